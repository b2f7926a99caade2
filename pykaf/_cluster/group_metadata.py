"""A consumer group member's identity, shared by the roles that name it.

Groups hand it out (``GroupSession.group_metadata()``) and the transactional
producer sends it with ``send_offsets_to_transaction`` (KIP-447); it sits
below both so that neither role imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupMetadata"]


@dataclass(frozen=True)
class GroupMetadata:
    """The consumer group member whose offsets a transaction commits (KIP-447).

    Get it from a group session with ``session.group_metadata()``; the
    coordinator rejects the offsets if this member was fenced meanwhile.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
