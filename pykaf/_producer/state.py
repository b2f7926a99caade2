"""Per-topic and per-partition producer state: plain objects, no I/O.

A partition's batches move through three ordered places: ``open`` (being
filled), ``queue`` (sealed, waiting for its broker's sender) and ``inflight``
(sent, waiting for the answer). A retriable failure moves the failed batch,
and every later one of the partition that comes back, to ``retry``; once
nothing of the partition is in flight, ``requeue()`` puts them back at the
front of ``queue`` in their original order. That is how order survives
retries and leader moves.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

import trio

from pykaf._cluster.router import Route
from pykaf._producer.batch import ProducerBatch


class Sender(Protocol):
    """The broker's sink a partition is attached to (``sink.BrokerSink``)."""

    def wake(self) -> None:
        """Look for ready batches again (a batch opened or sealed)."""

    def detach(self, part: PartitionState) -> None:
        """Stop sending ``part``'s batches."""

    def write_now(self) -> bool:
        """Write what is ready at once, without waiting, when nothing is in flight."""

    async def send_inline(self) -> bool:
        """Send what is ready from the calling task when nothing is in flight."""


class PartitionState:
    """Where one partition's batches are, and who sends them.

    Other modules read its fields and move batches between its places (the
    deques and ``retry``); every other change goes through a method below,
    named for the event it records (``tests/test_private_access.py`` fails on
    a field written from outside this module). Its leader, its attach and
    detach, and the failures its backoff counts are its :attr:`route`'s
    (:mod:`pykaf._cluster.router`).
    """

    __slots__ = (
        "broker",
        "inflight",
        "next_ordinal",
        "next_sequence",
        "open",
        "partition",
        "queue",
        "retry",
        "retrying",
        "route",
        "topic",
        "txn_added",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.queue: deque[ProducerBatch] = deque()
        self.inflight: deque[ProducerBatch] = deque()
        self.retry: list[ProducerBatch] = []
        self.broker: Sender | None = None
        self.retrying = False
        self.next_ordinal = 0
        self.next_sequence = 0
        #: Where the partition is led, and the sink it is attached to there.
        self.route: Route[PartitionState] = Route(topic, partition, self)
        #: The serial of the transaction the partition was last added to (0: none).
        self.txn_added = 0

    def batches(self) -> list[ProducerBatch]:
        """Every unsettled batch of the partition, oldest first."""
        out = sorted([*self.inflight, *self.retry], key=_ordinal)
        out.extend(self.queue)
        if self.open is not None and self.open.count:
            out.append(self.open)
        return out

    # -- the batch being filled (the accumulator) ------------------------------------

    def take_ordinal(self, step: int) -> int:
        """The ordinal of a batch opened now; the next one is ``step`` later."""
        ordinal = self.next_ordinal
        self.next_ordinal += step
        return ordinal

    def opened(self, batch: ProducerBatch) -> None:
        """``batch`` is the one records are appended to now."""
        self.open = batch

    def closed(self) -> ProducerBatch | None:
        """The open batch is sealed or dropped: no batch is open; the one that was."""
        batch, self.open = self.open, None
        return batch

    # -- the sink it is attached to (the route attaches and detaches it) ------------

    def attached(self, sender: Sender) -> None:
        """``sender`` sends the partition's batches from now on: a new run of attempts."""
        self.broker = sender
        self.retrying = False

    def detached_from(self, sender: Sender) -> None:
        """``sender`` stopped sending them (nothing if another took over)."""
        if self.broker is sender:
            self.broker = None

    def retry_round(self) -> bool:
        """A batch came back to be retried; True if this starts a round (a failure to count)."""
        if self.retrying:
            return False
        self.retrying = True
        return True

    def resend_now(self) -> None:
        """Batches came back split: retried without a backoff or a metadata refresh."""
        self.retrying = True

    # -- sequences (idempotence) and transactions -------------------------------------

    def take_sequence(self, count: int) -> int:
        """The base sequence of a batch of ``count`` records built now."""
        base = self.next_sequence
        self.next_sequence = (base + count) & 0x7FFFFFFF
        return base

    def restart_sequences(self, at: int = 0) -> None:
        """A new producer epoch (or a restamped queue): the next batch starts at ``at``."""
        self.next_sequence = at

    def joined_transaction(self, serial: int) -> None:
        """The partition is in transaction ``serial`` (added, or sent under V2)."""
        self.txn_added = serial

    # -- retries -------------------------------------------------------------------

    def requeue(self) -> None:
        """Put the batches that came back in front of the queue, in their order."""
        self.retry.sort(key=_ordinal)
        self.queue.extendleft(reversed(self.retry))
        self.retry.clear()

    def __repr__(self) -> str:
        return (
            f"<PartitionState {self.topic}/{self.partition} queue={len(self.queue)} "
            f"inflight={len(self.inflight)} retry={len(self.retry)} retrying={self.retrying}>"
        )


def _ordinal(batch: ProducerBatch) -> int:
    return batch.ordinal


class TopicState:
    """A topic as the producer sees it: its partitions, once metadata is known.

    Records sent before the topic's metadata arrives wait in ``pending``, in
    order (as tuples the producer replays through its normal path, and runs
    ``send_nowait`` staged, ``staging.ParkedRun``, replayed in bulk), so
    ``send_nowait`` never has to await.
    """

    __slots__ = (
        "available",
        "count",
        "error",
        "hurry",
        "name",
        "null_part",
        "parts",
        "pending",
        "ready",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.parts: list[PartitionState] = []
        self.available: list[int] | None = None
        self.pending: list[Any] = []
        #: ``send_now()`` came while records waited: send them once they are appended.
        self.hurry = False
        self.ready = trio.Event()
        self.error: BaseException | None = None
        #: The sticky partition for null keys, while the partitioner keeps it.
        self.null_part: PartitionState | None = None

    def __repr__(self) -> str:
        return f"<TopicState {self.name} partitions={self.count} pending={len(self.pending)}>"
