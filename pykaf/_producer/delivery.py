"""Delivery: how each record's outcome reaches whoever asked for it.

A batch settles once, acknowledged or failed. :class:`Reports` then tells
everyone who waits on its records: the ``send()`` waiters (the batch's
event), the ``on_delivery`` callbacks and ``input()`` messages (the batch's
``extras``), the ``send_batch`` deliveries, the ``on_acknowledgement``
interceptors and the ``on_batch`` hook, and gives the batch's buffer space
back. A failure nobody else hears of is kept for the next ``flush()`` or
``aclose()`` (``DeliveryError``): nothing is lost without a report.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from pykaf import errors
from pykaf._net.metrics import BatchEvent, report_batch
from pykaf._producer.batch import ProducerBatch
from pykaf._producer.config import ProducerConfig
from pykaf._producer.records import (
    BatchDelivery,
    ProducerError,
    ProducerMessage,
    RecordMetadata,
)
from pykaf.codec import COMPRESSION_NAMES

if TYPE_CHECKING:
    from pykaf._txn.manager import TransactionManager

log = logging.getLogger("pykaf.producer")

#: Failures the user asked for: an aborted transaction, a purge, a close.
_ASKED_FOR = (errors.TransactionAbortedError, errors.PurgedError, errors.ClosedError)

#: ``on_delivery(error, metadata)``: told of one record's outcome.
OnDelivery = Callable[[BaseException | None, RecordMetadata], Any]
#: A failure kept for ``flush()``: topic, partition, records, error.
Failure = tuple[str, int, int, BaseException]


def record_metadata(batch: ProducerBatch, delta: int, timestamp: int) -> RecordMetadata:
    """Where the record ``delta`` of an acknowledged ``batch`` was written."""
    offset = batch.base_offset + delta if batch.base_offset >= 0 else -1
    ts = batch.log_append_time if batch.log_append_time >= 0 else timestamp
    return RecordMetadata(batch.topic, batch.partition, offset, ts)


class Reports:
    """Settles batches and reports every record's outcome exactly once.

    ``release(records, nbytes)`` gives settled records' buffer space back
    (the accumulator's).
    """

    def __init__(
        self,
        config: ProducerConfig,
        txn: TransactionManager | None,
        release: Callable[[int, int], None],
    ) -> None:
        self._txn = txn
        self._release = release
        #: The ``on_batch`` hook: checked once per request sent and once per batch settled.
        self.batch_hook: Callable[[BatchEvent], object] | None = config.on_batch
        self._compression = config.compression_code
        self._on_ack = tuple(config.on_acknowledgement)
        #: Failures nobody was told of, for the next ``flush()``.
        self.unreported: list[Failure] = []
        self.records_acked = 0
        self.records_failed = 0
        self._success_send: trio.MemorySendChannel[ProducerMessage] | None = None
        self._success_receive: trio.MemoryReceiveChannel[ProducerMessage] | None = None
        self._error_send: trio.MemorySendChannel[ProducerError] | None = None
        self._error_receive: trio.MemoryReceiveChannel[ProducerError] | None = None
        if config.return_successes:
            self._success_send, self._success_receive = trio.open_memory_channel[ProducerMessage](
                math.inf
            )
        if config.return_errors:
            self._error_send, self._error_receive = trio.open_memory_channel[ProducerError](
                math.inf
            )

    # ------------------------------------------------------------------ channels

    def successes(self) -> trio.MemoryReceiveChannel[ProducerMessage]:
        """The ``successes()`` channel.

        Raises:
            ConfigError: ``return_successes`` is off.
        """
        if self._success_receive is None:
            raise errors.ConfigError("successes() needs return_successes=True")
        return self._success_receive

    def errors(self) -> trio.MemoryReceiveChannel[ProducerError]:
        """The ``errors()`` channel.

        Raises:
            ConfigError: ``return_errors`` is off.
        """
        if self._error_receive is None:
            raise errors.ConfigError("errors() needs return_errors=True")
        return self._error_receive

    def close_channels(self) -> None:
        """End ``successes()`` and ``errors()`` (the producer closed)."""
        for ch in (self._success_send, self._error_send):
            if ch is not None:
                ch.close()

    # ------------------------------------------------------------------ settling

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        """The broker wrote ``batch`` at ``base_offset`` (-1: unknown)."""
        batch.base_offset = base_offset
        batch.log_append_time = log_append_time
        self.records_acked += batch.count
        self._settle(batch, None)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        """``batch`` failed for good: every one of its records fails with ``error``.

        Logged at WARNING, or at DEBUG when the user asked for it
        (``abort_transaction()``, ``purge()``, closing): each record's sender
        is told either way.
        """
        log.log(
            logging.DEBUG if isinstance(error, _ASKED_FOR) else logging.WARNING,
            "%r failed: %s",
            batch,
            error,
        )
        txn = self._txn
        if txn is not None:
            txn.record_failed(error)
            if isinstance(error, errors.InvalidProducerEpochError) and isinstance(
                txn.error, errors.ProducerFencedError
            ):
                # Kafka answers a fenced producer's Produce with INVALID_PRODUCER_EPOCH
                # (PRODUCER_FENCED is for the coordinator's APIs): its records fail as
                # the producer does, with ProducerFencedError (the broker's as cause).
                error = txn.error
        self.records_failed += batch.count
        batch.error = error
        unobserved = batch.count - batch.observed
        if batch.deliveries:
            for delivery, n, _, _ in batch.deliveries:
                unobserved -= n
                self._report_to_flush(batch.topic, batch.partition, n, error, delivery)
        if unobserved > 0 and not isinstance(error, errors.PurgedError):
            self.unreported.append((batch.topic, batch.partition, unobserved, error))
        self._settle(batch, error)

    def fail_alone(
        self,
        topic: str,
        partition: int,
        error: BaseException,
        delivery: BatchDelivery,
        index: int,
        count: int = 1,
    ) -> None:
        """Records ``index`` to ``index + count - 1`` of a ``send_batch`` call failed unbuffered."""
        self.records_failed += count
        delivery.settle_records(topic, partition, count, error)
        if delivery.on_settle is not None:
            _call_hook(delivery, partition, index, count, -1, delivery.timestamp, error)
        self._report_to_flush(topic, partition, count, error, delivery)

    def _report_to_flush(
        self,
        topic: str,
        partition: int,
        records: int,
        error: BaseException,
        delivery: BatchDelivery,
    ) -> None:
        """Keep a send_batch failure for flush() unless its delivery is (or gets) awaited.

        Nor is a purge's: the caller of ``purge()`` was told.
        """
        if delivery.observed or isinstance(error, errors.PurgedError):
            return
        entry = (topic, partition, records, error)
        self.unreported.append(entry)
        delivery.claim_later(entry, self.unreported)

    def _settle(self, batch: ProducerBatch, error: BaseException | None) -> None:
        if self.batch_hook is not None:
            report_batch(self.batch_hook, self._batch_event(batch, error))
        batch.done = True
        batch.builder = None
        self._release(batch.count, batch.buffered)
        if batch.event is not None or batch.hooks is not None:
            batch.notify_done()
        if batch.extras:
            for delta, timestamp, target in batch.extras:
                self._notify(batch, delta, timestamp, target, error)
        if batch.deliveries:
            for delivery, n, first, index in batch.deliveries:
                delivery.settle_records(batch.topic, batch.partition, n, error)
                if delivery.on_settle is not None:
                    base = batch.base_offset
                    offset = base + first if error is None and base >= 0 else -1
                    ts = batch.log_append_time
                    if ts < 0:
                        ts = delivery.timestamp
                    _call_hook(delivery, batch.partition, index, n, offset, ts, error)
        if self._on_ack:
            stamps = batch.timestamps or []
            for i, ts in enumerate(stamps):
                md = record_metadata(batch, i, ts)
                for fn in self._on_ack:
                    try:
                        fn(md, error)
                    except Exception:
                        log.exception("on_acknowledgement interceptor failed")

    def _batch_event(self, batch: ProducerBatch, error: BaseException | None) -> BatchEvent:
        """The ``on_batch`` hook's view of a batch that is settling now."""
        trace = batch.trace
        if trace is None:  # never sent: nothing reached a broker
            builder = batch.builder
            node_id, seconds = -1, None
            uncompressed = None if builder is None else builder.size
        else:
            node_id, uncompressed = trace.node_id, trace.uncompressed
            seconds = trio.current_time() - trace.first_sent
        return BatchEvent(
            kind="produce",
            topic=batch.topic,
            partition=batch.partition,
            node_id=node_id,
            records=batch.count,
            bytes=0 if batch.raw is None else len(batch.raw),
            uncompressed_bytes=uncompressed,
            compression=COMPRESSION_NAMES[self._compression],
            base_offset=batch.base_offset if error is None and batch.base_offset >= 0 else None,
            error=error,
            seconds=seconds,
            retries=max(0, batch.attempts - 1),
            dropped=0,
        )

    def _notify(
        self,
        batch: ProducerBatch,
        delta: int,
        timestamp: int,
        target: Any,
        error: BaseException | None,
    ) -> None:
        md = record_metadata(batch, delta, timestamp)
        if isinstance(target, ProducerMessage):
            self._route_message(target, md, error)
            return
        try:
            target(error, md)
        except Exception:
            log.exception("on_delivery callback failed")

    def _route_message(
        self, msg: ProducerMessage, md: RecordMetadata, error: BaseException | None
    ) -> None:
        if error is None:
            msg.partition, msg.offset, msg.timestamp = md.partition, md.offset, md.timestamp
            if self._success_send is not None:
                self._success_send.send_nowait(msg)
        elif self._error_send is not None:
            self._error_send.send_nowait(ProducerError(msg, error))

    # ------------------------------------------------------------------ refused before a batch

    def parked_failed(self, topic: str, record: tuple[Any, ...], error: BaseException) -> None:
        """A record parked for an unknown topic failed before it reached a batch."""
        target = record[5]
        timestamp = record[4]
        if self._txn is not None:
            self._txn.record_failed(error)
        self.records_failed += 1
        md = RecordMetadata(topic, -1 if record[2] is None else record[2], -1, timestamp)
        if isinstance(target, ProducerMessage):
            if self._error_send is not None:
                self._error_send.send_nowait(ProducerError(target, error))
                return
        elif target is not None:
            try:
                target(error, md)
            except Exception:
                log.exception("on_delivery callback failed")
            return
        if not isinstance(error, errors.PurgedError):  # purge() told of it
            self.unreported.append((topic, md.partition, 1, error))

    def refused(self, msg: ProducerMessage, error: BaseException) -> None:
        """An ``input()`` message was refused before it reached a batch."""
        self.records_failed += 1
        if self._txn is not None and not isinstance(error, errors.TransactionStateError):
            self._txn.record_failed(error)  # the transaction lost a record: abort only
        if self._error_send is not None:
            self._error_send.send_nowait(ProducerError(msg, error))
        else:
            self.unreported.append(
                (msg.topic, -1 if msg.partition is None else msg.partition, 1, error)
            )

    # ------------------------------------------------------------------ flush reporting

    def raise_unreported(self) -> None:
        """Raise ``DeliveryError`` for the failures nobody was told of, and forget them.

        Raises:
            DeliveryError: there were some.
        """
        if self.unreported:
            failures = list(self.unreported)
            self.unreported.clear()  # cleared in place: deliveries hold this list
            total = sum(n for _, _, n, _ in failures)
            raise errors.DeliveryError(
                f"{total} records failed: {failures[0][3]!r}"
                + (f" (and {len(failures) - 1} more failures)" if len(failures) > 1 else ""),
                failures,
            )

    def forget_unreported(self) -> None:
        """Drop the failures kept for ``flush()`` (a transaction's error told them)."""
        self.unreported.clear()  # cleared in place: deliveries hold this list


__all__ = ["Failure", "OnDelivery", "Reports", "record_metadata"]


def _call_hook(
    delivery: BatchDelivery,
    partition: int,
    index: int,
    count: int,
    offset: int,
    timestamp: int,
    error: BaseException | None,
) -> None:
    """Run a delivery's ``on_settle``; a hook that raises is logged, the settling goes on.

    ``index`` is a position in the records as appended; where they were
    grouped by partition (``delivery.order``), the hook hears of the call's
    own indices, once per run of consecutive ones.
    """
    hook = delivery.on_settle
    assert hook is not None
    order = delivery.order
    if order is None:
        runs = [(index, index, count)]
    else:
        runs = []
        i, end = index, index + count
        while i < end:
            j = i + 1
            while j < end and order[j] == order[j - 1] + 1:
                j += 1
            runs.append((i, order[i], j - i))
            i = j
    for at, first, n in runs:
        try:
            hook(partition, first, n, offset + at - index if offset >= 0 else -1, timestamp, error)
        except Exception:
            log.exception("a send_batch on_settle hook raised")
