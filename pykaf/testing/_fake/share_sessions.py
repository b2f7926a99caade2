"""A fake broker's share sessions (KIP-932), with Kafka's rules; state only, no I/O.

A share session belongs to one member of one group on one broker. ShareFetch
with epoch 0 opens it (replacing one the member had) and may not carry
acknowledgements; every later ShareFetch or ShareAcknowledge must carry the
session's next epoch (else INVALID_SHARE_SESSION_EPOCH), and a member
without a session gets SHARE_SESSION_NOT_FOUND. Epoch -1 closes it: the
member's acquired records on this broker go back to the group. A ShareFetch
adds the partitions it names to the session and drops those it forgets;
forgetting a partition gives nothing back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pykaf import errors

OPEN_EPOCH, CLOSE_EPOCH = 0, -1
_MAX_EPOCH = 2**31 - 1

Key = tuple[str, str]  # (group id, member id)
IdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    """One member's share session: the epoch its next request must carry, its partitions."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[IdPartition, None] = field(default_factory=dict)  # ordered set

    def advance(self) -> None:
        """The epoch after a request (1 after the largest int32)."""
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


class ShareSessionCache:
    """One broker's share sessions, by (group, member)."""

    def __init__(self) -> None:
        self.sessions: dict[Key, ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> ShareSession:
        """Open a session (epoch 0), replacing the member's old one."""
        session = ShareSession(group_id, member_id)
        self.sessions[(group_id, member_id)] = session
        return session

    def find(self, group_id: str, member_id: str, epoch: int) -> ShareSession | int:
        """The session a request at ``epoch`` (not 0) continues, or the error code."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return errors.ShareSessionNotFoundError.code
        if epoch != CLOSE_EPOCH and epoch != session.epoch:
            return errors.InvalidShareSessionEpochError.code
        return session

    def close(self, session: ShareSession) -> None:
        """Forget ``session``."""
        self.sessions.pop((session.group_id, session.member_id), None)
