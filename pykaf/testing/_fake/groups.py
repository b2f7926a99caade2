"""The fake cluster's group coordinator: committed offsets, and those of open transactions.

Offsets a transaction commits (TxnOffsetCommit) wait in ``pending`` under the
producer id until the transaction ends: :meth:`complete_transaction` makes
them the group's committed offsets on commit and drops them on abort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pykaf.testing._fake.cluster import FakeCluster


@dataclass(slots=True)
class CommittedOffset:
    """A committed offset of one partition for one group."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1


TopicPartition = tuple[str, int]


class GroupCoordinator:
    """Committed offsets by group, and the offsets transactions hold until they end."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        #: producer id -> group -> partition -> offset, for open transactions
        self.pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}

    def commit(self, group_id: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        """Store a committed offset for a group."""
        self.offsets.setdefault(group_id, {})[tp] = committed

    def committed(self, group_id: str, tp: TopicPartition) -> CommittedOffset | None:
        """The group's committed offset for a partition, or None."""
        return self.offsets.get(group_id, {}).get(tp)

    def add_transaction_offset(
        self, producer_id: int, group_id: str, tp: TopicPartition, committed: CommittedOffset
    ) -> None:
        """Hold an offset a transaction commits until the transaction ends."""
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = committed

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for this group and partition."""
        return any(tp in groups.get(group_id, {}) for groups in self.pending.values())

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction ended: apply its offsets (commit) or drop them (abort)."""
        groups = self.pending.pop(producer_id, {})
        if committed:
            for group_id, offsets in groups.items():
                for tp, off in offsets.items():
                    self.commit(group_id, tp, off)
