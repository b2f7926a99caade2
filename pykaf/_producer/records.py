"""What the producer hands back: record metadata, messages, errors, bulk deliveries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import trio

from pykaf.errors import DeliveryError


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written (a named tuple: cheap to make per record).

    Attributes:
        topic, partition: where it went.
        offset: its offset in the partition (-1 when unknown: acks=0, or a
            duplicate the broker had already written and did not re-number).
        timestamp: the record's timestamp in ms: the one it was sent with, or
            the broker's append time for topics using LogAppendTime.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerMessage:
    """A record for the sarama-style channels (``input()``, ``successes()``, ``errors()``).

    Fill in ``topic`` and ``value`` (and optionally the rest) and send it on
    ``producer.input()``. When it comes back on ``successes()``, ``partition``,
    ``offset`` and ``timestamp`` say where it was written. ``metadata`` is
    yours: pykaf carries it through untouched.
    """

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None
    partition: int | None = None
    timestamp: int | None = None
    metadata: Any = None
    offset: int = field(default=-1)


@dataclass(frozen=True, slots=True)
class ProducerError:
    """A message that failed for good, on the ``errors()`` channel."""

    message: ProducerMessage
    error: BaseException


@dataclass(frozen=True, slots=True)
class BrokerStatistics:
    """Counters of one broker's sender."""

    node_id: int
    in_flight: int
    requests: int
    batches: int
    records: int
    bytes: int
    errors: int


@dataclass(frozen=True, slots=True)
class ProducerStatistics:
    """A snapshot of the producer's buffers and counters (cheap to take).

    Attributes:
        buffered_records, buffered_bytes: accepted and not yet acknowledged or
            failed (bytes count keys and values plus a fixed per-record overhead).
        in_flight: Produce requests sent and not yet answered.
        records_sent, records_acked, records_failed: totals since open
            (records_sent counts a retried record again each time it is sent,
            as Java's record-send-total does).
        batches_sent: record batches sent (retries count again).
        batch_records_avg: the mean number of records per batch sent.
        retries: batches sent again after a retriable failure.
        errors: Produce errors seen from brokers (retried or not): an error
            code per partition, or a request whose connection failed; the sum
            of the brokers' ``errors``.
        epoch_bumps: idempotent producer id/epoch resets (KIP-360 recovery) the
            producer asked for (InitProducerId); not the bumps transactions V2
            make at every transaction's end (EndTxn v5).
        splits: batches the broker refused as too large (MESSAGE_TOO_LARGE)
            and the producer sent again as two smaller ones.
        brokers: per broker counters.
        transaction_version: 0 without a ``transactional_id``; else 1 or 2,
            the transaction protocol of the open or last transaction
            (2: KIP-890 part 2, when the cluster's ``transaction.version`` is 2).
    """

    buffered_records: int
    buffered_bytes: int
    in_flight: int
    records_sent: int
    records_acked: int
    records_failed: int
    batches_sent: int
    batch_records_avg: float
    retries: int
    errors: int
    epoch_bumps: int
    splits: int
    producer_id: int
    producer_epoch: int
    brokers: dict[int, BrokerStatistics]
    transaction_version: int = 0


#: ``BatchDelivery.on_settle(partition, index, count, offset, timestamp, error)``.
SettleHook = Callable[[int, int, int, int, int, "BaseException | None"], None]


class BatchDelivery:
    """The outcome of one ``send_batch`` call; ``await wait()`` for it.

    Tracked per record batch, never per record: each batch that carries some
    of this call's records reports how many were acknowledged or failed.

    ``on_settle``, when set (before the records settle: right after
    ``send_batch`` returns, in the producer's trio loop), hears of each range
    of the call's records as it settles: ``on_settle(partition, index, count,
    offset, timestamp, error)``: the records ``index`` to ``index + count - 1``
    of the call's columns went to ``partition`` at offsets ``offset`` on (-1:
    unknown, or failed), stamped ``timestamp`` (the broker's log append time,
    or the time ``send_batch`` gave them; -1 when the caller's own timestamps
    apply); ``error`` None when acknowledged. It runs in the trio loop and
    must not raise or block.
    """

    __slots__ = (
        "_claims",
        "_event",
        "_failures",
        "_sink",
        "acked",
        "failed",
        "observed",
        "on_settle",
        "order",
        "pending",
        "timestamp",
        "total",
    )

    def __init__(self, total: int) -> None:
        self.total = total
        self.pending = total
        self.acked = 0
        self.failed = 0
        self.observed = False
        self.on_settle: SettleHook | None = None
        # Where the records were grouped by partition (keyed, in the
        # accumulator): the call's index of each grouped position.
        self.order: list[int] | None = None
        self.timestamp = -1  # the records' timestamp (ms) when send_batch stamped them
        self._failures: list[tuple[str, int, int, BaseException]] = []
        self._event: trio.Event | None = None
        # Failures that settled before anyone awaited this delivery are also
        # queued for the producer's next flush(); wait() takes them back.
        self._claims: list[tuple[str, int, int, BaseException]] = []
        self._sink: list[tuple[str, int, int, BaseException]] | None = None

    @property
    def done(self) -> bool:
        """Whether every record has been acknowledged or has failed."""
        return self.pending == 0

    def settle_records(
        self, topic: str, partition: int, count: int, error: BaseException | None
    ) -> None:
        """Internal (the producer's delivery stage): ``count`` records settled."""
        self.pending -= count
        if error is None:
            self.acked += count
        else:
            self.failed += count
            self._failures.append((topic, partition, count, error))
        if self.pending == 0 and self._event is not None:
            self._event.set()

    def claim_later(
        self,
        entry: tuple[str, int, int, BaseException],
        sink: list[tuple[str, int, int, BaseException]],
    ) -> None:
        """Internal: ``entry`` waits in ``sink`` for ``flush()``; ``wait()`` takes it back."""
        self._claims.append(entry)
        self._sink = sink

    async def wait(self) -> int:
        """Wait until every record is settled; return how many were acknowledged.

        Raises:
            DeliveryError: some records failed (``.failures`` says which and why).
        """
        self.observed = True
        if self._claims and self._sink is not None:
            claimed = {id(entry) for entry in self._claims}
            self._sink[:] = [entry for entry in self._sink if id(entry) not in claimed]
            self._claims.clear()
        if self.pending:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        if self._failures:
            raise DeliveryError(
                f"{self.failed} of {self.total} records failed: {self._failures[0][3]}",
                self._failures,
            )
        return self.acked
