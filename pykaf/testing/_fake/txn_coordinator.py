"""The fake cluster's transaction coordinator state: producer ids, transactions, markers, timeouts.

Every transactional id's producer and open transaction; a commit or abort
writes the markers to the transaction's partitions at once, and a transaction
open longer than its timeout is aborted with a bumped epoch (KIP-360), which
fences the old producer. The request handlers (``txn.py``) drive it; it knows
nothing of requests or connections, only a partition lookup and the group
coordinator (for the offsets a transaction commits).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import trio

from pykaf import errors
from pykaf.testing._fake.group_coordinator import GroupCoordinator
from pykaf.testing._fake.model import Partition

_FENCED = errors.ProducerFencedError.code
_BAD_MAPPING = errors.InvalidPidMappingError.code
_BAD_STATE = errors.InvalidTxnStateError.code
_MAX_EPOCH = 32767 - 1  # Kafka gives a new producer id before the epoch reaches Short.MAX


class TxnStatus(Enum):
    """Where a transactional id's transaction is (Kafka's TransactionState, minus Prepare*)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclass
class TxnMetadata:
    """One transactional id's producer and its current transaction."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    last_epoch: int = -1  # the epoch before a coordinator fence (KIP-360 recovery)
    status: TxnStatus = TxnStatus.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started: float = 0.0  # trio clock when it became ongoing


class TransactionCoordinator:
    """Every transactional id's state (one coordinator state shared by all brokers)."""

    def __init__(
        self,
        partition: Callable[[str, int], Partition | None],
        groups: GroupCoordinator,
    ) -> None:
        self.partition = partition
        self.groups = groups
        self.transactions: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, TxnMetadata] = {}
        self.coordinator_epoch = 0
        self._next_producer_id = 1000
        self._changed: trio.Event | None = None

    def new_producer_id(self) -> int:
        """A producer id never given before."""
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    # -- transactions ------------------------------------------------------------

    def begin(self, txn: TxnMetadata) -> None:
        """The transaction starts (nothing if it is open already)."""
        if txn.status is not TxnStatus.ONGOING:
            txn.status = TxnStatus.ONGOING
            txn.partitions.clear()
            txn.groups.clear()
            txn.started = trio.current_time()
            if self._changed is not None:
                self._changed.set()

    def complete(self, txn: TxnMetadata, commit: bool) -> None:
        """Write the markers to every partition of the transaction and end it."""
        for topic, index in sorted(txn.partitions):
            p = self.partition(topic, index)
            if p is not None:
                p.log.append_marker(
                    txn.producer_id, txn.epoch, self.coordinator_epoch, commit=commit
                )
        self.groups.complete_transaction(txn.producer_id, commit)
        txn.status = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()

    def add_implicitly(
        self,
        producer_id: int,
        epoch: int,
        *,
        partition: tuple[str, int] | None = None,
        group: str | None = None,
    ) -> None:
        """Transactions V2: a Produce v12 or TxnOffsetCommit v5 adds to the transaction.

        At the producer's current epoch only, starting the transaction if none
        is open; anything else is left for the verification that follows.
        """
        self.expire()
        txn = self.by_producer.get(producer_id)
        if txn is None or epoch != txn.epoch:
            return
        self.begin(txn)
        if partition is not None:
            txn.partitions.add(partition)
        if group is not None:
            txn.groups.add(group)

    def bump_epoch(self, txn: TxnMetadata) -> None:
        """The next epoch (a new producer id when the epoch would overflow)."""
        if txn.epoch >= _MAX_EPOCH:
            del self.by_producer[txn.producer_id]
            txn.producer_id, txn.epoch, txn.last_epoch = self.new_producer_id(), 0, -1
            self.by_producer[txn.producer_id] = txn
        else:
            txn.last_epoch = txn.epoch
            txn.epoch += 1

    def fence_and_abort(self, txn: TxnMetadata) -> None:
        """Bump the epoch and abort the open transaction with it (the old producer is fenced)."""
        txn.last_epoch = txn.epoch
        txn.epoch += 1
        self.complete(txn, commit=False)

    def expire(self) -> float:
        """Abort the transactions open past their timeout; return the next deadline."""
        now = trio.current_time()
        nearest = math.inf
        for txn in self.transactions.values():
            if txn.status is not TxnStatus.ONGOING:
                continue
            deadline = txn.started + txn.timeout_ms / 1000
            if deadline <= now:
                self.fence_and_abort(txn)
            else:
                nearest = min(nearest, deadline)
        return nearest

    async def run(self) -> None:
        """Abort timed-out transactions at their deadlines (runs in the cluster's nursery)."""
        while True:
            self._changed = trio.Event()
            with trio.move_on_at(self.expire()):
                await self._changed.wait()

    def _open_transaction(self, producer_id: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        """The producer's open transaction at its current epoch, or the error code (KIP-890)."""
        self.expire()
        txn = self.by_producer.get(producer_id)
        if txn is None:
            return _BAD_MAPPING, None
        if epoch < txn.epoch:
            return errors.InvalidProducerEpochError.code, None
        if txn.status is not TxnStatus.ONGOING:
            return _BAD_STATE, None
        return 0, txn

    def verify_produce(self, producer_id: int, epoch: int, topic: str, partition: int) -> int:
        """KIP-890 check of a transactional batch: its partition is in the open transaction."""
        code, txn = self._open_transaction(producer_id, epoch)
        if txn is not None and (topic, partition) not in txn.partitions:
            return _BAD_STATE
        return code

    def verify_offsets(self, producer_id: int, epoch: int, group_id: str) -> int:
        """KIP-890 check of a TxnOffsetCommit: the group is in the producer's open transaction.

        Without it, a fenced zombie's late TxnOffsetCommit would wait under the
        producer id, to be applied by its successor's next commit.
        """
        code, txn = self._open_transaction(producer_id, epoch)
        if txn is not None and group_id not in txn.groups:
            return _BAD_STATE
        return code

    def check(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[int, TxnMetadata | None]:
        """What AddPartitionsToTxn, AddOffsetsToTxn and EndTxn check once at the coordinator."""
        self.expire()
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return _BAD_MAPPING, None
        if epoch != txn.epoch:
            return _FENCED, None
        return 0, txn

    def register(self, txn: TxnMetadata) -> None:
        """A new transactional id's metadata."""
        self.transactions[txn.transactional_id] = txn
        self.by_producer[txn.producer_id] = txn
