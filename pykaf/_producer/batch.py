"""One record batch on its way through the producer, and re-stamping built batches.

A :class:`ProducerBatch` is the unit everything in the producer moves and
tracks: records are appended to its Cython ``BatchBuilder``; once sealed it
is built (compressed, sequence-numbered) exactly once, and those bytes are
what every retry sends. Completion is recorded per batch: whoever waits
(``send()``, callbacks, bulk deliveries) is told when the batch settles.

A batch the broker refuses as too large is split in two (:meth:`split`):
each half is an ordinary batch that takes over the tracking of its records,
and the split batch only points ``send()`` waiters to them (:meth:`locate`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from pykaf.codec import BatchBuilder, crc32c, decode_batches

if TYPE_CHECKING:
    from pykaf._producer.records import BatchDelivery

# Offsets inside a v2 record batch header (Kafka's protocol guide).
_CRC_AT = 17
_ATTRIBUTES_AT = 21  # the CRC covers from here to the end
_PRODUCER_AT = 43  # producerId int64, producerEpoch int16, baseSequence int32
_PRODUCER = struct.Struct(">qhi")
_CRC = struct.Struct(">I")
#: Ordinals of successive batches of a partition are this far apart; a part of a
#: split batch takes its batch's ordinal plus the delta of its first record, so
#: parts sort between their batch's neighbours (a batch holds < 2**31 records).
ORDINAL_STEP = 1 << 32


def restamp(raw: bytes, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """``raw`` (a built v2 batch) with a new producer id, epoch and base sequence.

    Used after an epoch bump: the records and compression stay, the header
    fields the broker checks change, and the CRC is computed again.
    """
    buf = bytearray(raw)
    _PRODUCER.pack_into(buf, _PRODUCER_AT, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(buf, _CRC_AT, crc32c(memoryview(buf)[_ATTRIBUTES_AT:]))
    return bytes(buf)


def _len(data: bytes | None) -> int:
    return 0 if data is None else len(data)


class SendTrace:
    """A batch's sends as the ``on_batch`` hook reports them (made only while one is set).

    Attributes:
        node_id: the broker of the latest send.
        first_sent: trio time of the first send.
        uncompressed: the built batch's size before compression (None if unknown).
    """

    __slots__ = ("first_sent", "node_id", "uncompressed")

    def __init__(self, node_id: int, first_sent: float, uncompressed: int | None) -> None:
        self.node_id = node_id
        self.first_sent = first_sent
        self.uncompressed = uncompressed


class ProducerBatch:
    """Records for one partition, from the first append until they are settled.

    Attributes:
        topic, partition: where the batch goes.
        builder: the Cython builder while the batch is open; None once built.
        count: records appended.
        buffered: bytes this batch holds against the producer's buffer limit.
        created: trio time of the first record (linger and delivery timeout).
        ordinal: the batch's place in its partition (retries keep this order);
            see ``ORDINAL_STEP``.
        raw: the built bytes, once sent for the first time.
        base_sequence: the first record's sequence number (-1 without idempotence).
        attempts: times sent so far.
        observed: records whose outcome someone will hear of (a waiter, a
            callback, a channel); failures of the others are kept for flush().
        waiters: offset deltas of the records whose ``send()`` waits (None: none).
        extras: ``(offset_delta, timestamp, target)`` for records whose outcome
            goes to a callback or a channel message.
        deliveries: ``[BatchDelivery, records, first offset delta, first index]`` for
            ``send_batch`` calls.
        timestamps: every record's timestamp, kept only for interceptors.
        trace: where and when it was sent, kept only for the ``on_batch`` hook.
        parts: once split, ``(first offset delta, part)`` for each part, in
            order; the batch itself is then done and never settles.
    """

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "buffered",
        "builder",
        "count",
        "created",
        "deliveries",
        "done",
        "error",
        "event",
        "extras",
        "hooks",
        "log_append_time",
        "observed",
        "ordinal",
        "partition",
        "parts",
        "raw",
        "timestamps",
        "topic",
        "trace",
        "waiters",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        builder: BatchBuilder | None,
        created: float,
        ordinal: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.builder: BatchBuilder | None = builder
        self.count = 0
        self.buffered = 0
        self.created = created
        self.ordinal = ordinal
        self.raw: bytes | None = None
        self.base_sequence = -1
        self.attempts = 0
        self.observed = 0
        self.waiters: list[int] | None = None
        self.extras: list[tuple[int, int, Any]] | None = None
        self.deliveries: list[list[Any]] | None = None
        self.timestamps: list[int] | None = None
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.event: trio.Event | None = None
        self.hooks: list[Callable[[], object]] | None = None
        self.trace: SendTrace | None = None
        self.parts: list[tuple[int, ProducerBatch]] | None = None

    def size(self) -> int:
        """Bytes on the wire (built) or so far (open, uncompressed)."""
        if self.raw is not None:
            return len(self.raw)
        return self.builder.size if self.builder is not None else 0

    def add_delivery(self, delivery: BatchDelivery, records: int, first: int, index: int) -> None:
        """Count ``records`` of a ``send_batch`` call, from offset delta ``first`` on.

        ``index`` is the position of the first of them in the call's columns.
        """
        if self.deliveries is None:
            self.deliveries = [[delivery, records, first, index]]
            return
        last = self.deliveries[-1]
        if last[0] is delivery and last[2] + last[1] == first and last[3] + last[1] == index:
            last[1] += records
        else:
            self.deliveries.append([delivery, records, first, index])

    def add_waiter(self, delta: int) -> None:
        """A ``send()`` waits for the record at offset delta ``delta``."""
        self.observed += 1
        if self.waiters is None:
            self.waiters = [delta]
        else:
            self.waiters.append(delta)

    def observe(self, delta: int, timestamp: int, target: Any) -> None:
        """``target`` (a callback or an ``input()`` message) hears of record ``delta``'s outcome."""
        self.observed += 1
        if self.extras is None:
            self.extras = [(delta, timestamp, target)]
        else:
            self.extras.append((delta, timestamp, target))

    def note_send(self, node_id: int, now: float) -> None:
        """Remember, for the ``on_batch`` hook, that the batch is being sent to ``node_id``.

        Called only while a hook is set, before the batch is built: the first
        send keeps its time and the batch's size before compression.
        """
        trace = self.trace
        if trace is None:
            builder = self.builder
            self.trace = SendTrace(node_id, now, None if builder is None else builder.size)
        else:
            trace.node_id = node_id

    async def wait(self) -> None:
        """Return once the batch (every part, if it was split) is acknowledged or has failed."""
        if not self.done:
            if self.event is None:
                self.event = trio.Event()
            await self.event.wait()
        if self.parts is not None:
            for _, part in self.parts:
                await part.wait()

    def when_done(self, hook: Callable[[], object]) -> None:
        """Call ``hook()`` once the batch is settled or split (now, if it is already).

        :meth:`wait` for code that is not a trio task (``pykaf.aio``'s
        ``send()``): the hook runs in the producer's loop, in the call that
        settles the batch, and must not raise.
        """
        if self.done:
            hook()
        elif self.hooks is None:
            self.hooks = [hook]
        else:
            self.hooks.append(hook)

    def notify_done(self) -> None:
        """Wake whoever waits for the batch (it was just settled or split)."""
        if self.event is not None:
            self.event.set()
        hooks = self.hooks
        if hooks is not None:
            self.hooks = None
            for hook in hooks:
                hook()

    def locate(self, delta: int) -> tuple[ProducerBatch, int]:
        """The batch that carries the record at offset ``delta`` now, and its delta there."""
        batch = self
        while batch.parts is not None:
            for first, part in reversed(batch.parts):
                if delta >= first:
                    batch, delta = part, delta - first
                    break
        return batch, delta

    # -- splitting (a batch the broker refused as too large) ----------------------

    def split(self, new_builder: Callable[[], BatchBuilder], overhead: int) -> list[ProducerBatch]:
        """Split this built batch in two, each with about half the records' bytes.

        The records are decoded from the built bytes (the builder is gone) and
        appended to builders from ``new_builder``. Each half is built with this
        batch's producer id, epoch and transactional flag, and sequence
        numbers that continue this batch's. A record's weight is its key and
        value plus ``overhead``: what it holds against the buffer limits.
        Returns the two halves, which take this batch's place (:meth:`split_into`).
        """
        raw = self.raw
        assert raw is not None and self.count > 1, "only a built batch of records is split"
        (decoded,) = decode_batches(raw)
        records = decoded.records
        weights = [_len(r.key) + _len(r.value) + overhead for r in records]
        half, cut, total = sum(weights) / 2, 1, weights[0]
        while cut < len(records) - 1 and total + weights[cut] <= half:
            total += weights[cut]
            cut += 1
        parts: list[tuple[int, ProducerBatch]] = []
        for lo, hi in ((0, cut), (cut, len(records))):
            builder = new_builder()
            for r in records[lo:hi]:
                builder.append(r.timestamp, r.key, r.value, r.headers)
            uncompressed = builder.size
            sequence = -1 if self.base_sequence < 0 else (self.base_sequence + lo) & 0x7FFFFFFF
            part_raw = builder.build(
                producer_id=decoded.producer_id,
                producer_epoch=decoded.producer_epoch,
                base_sequence=sequence,
                is_transactional=decoded.is_transactional,
            )
            # The second half holds the rest, so the buffer is released exactly.
            buffered = total if lo == 0 else self.buffered - total
            parts.append((lo, self.part(lo, hi, part_raw, sequence, buffered, uncompressed)))
        self.split_into(parts)
        return [part for _, part in parts]

    def part(
        self,
        lo: int,
        hi: int,
        raw: bytes,
        base_sequence: int,
        buffered: int,
        uncompressed: int,
    ) -> ProducerBatch:
        """A new, built batch for records ``lo`` to ``hi`` of this one, with their tracking.

        ``raw`` holds those records (built by the caller), ``buffered`` their
        bytes against the buffer limits. Offset deltas are rebased on ``lo``.
        """
        part = ProducerBatch(self.topic, self.partition, None, self.created, self.ordinal + lo)
        part.count = hi - lo
        part.buffered = buffered
        part.raw = raw
        part.base_sequence = base_sequence
        if self.extras:
            extras = [(d - lo, ts, target) for d, ts, target in self.extras if lo <= d < hi]
            if extras:
                part.extras = extras
                part.observed += len(extras)
        if self.waiters:
            waiters = [d - lo for d in self.waiters if lo <= d < hi]
            if waiters:
                part.waiters = waiters
                part.observed += len(waiters)
        if self.deliveries:
            for delivery, n, first, index in self.deliveries:
                start, stop = max(first, lo), min(first + n, hi)
                if start < stop:
                    part.add_delivery(delivery, stop - start, start - lo, index + start - first)
        if self.timestamps is not None:
            part.timestamps = self.timestamps[lo:hi]
        if self.trace is not None:
            part.trace = SendTrace(self.trace.node_id, self.trace.first_sent, uncompressed)
        return part

    def split_into(self, parts: list[tuple[int, ProducerBatch]]) -> None:
        """Hand this batch over to its ``parts``; wake whoever waits on it."""
        self.parts = parts
        self.done = True
        self.raw = None
        self.builder = None
        self.extras = self.deliveries = self.timestamps = self.waiters = None
        self.notify_done()

    def __repr__(self) -> str:
        if self.parts is not None:
            state = f"split in {len(self.parts)}"
        else:
            state = "done" if self.done else ("built" if self.raw is not None else "open")
        number, first = divmod(self.ordinal, ORDINAL_STEP)
        where = f"#{number}" + (f"+{first}" if first else "")
        return f"<ProducerBatch {self.topic}/{self.partition} {where} {self.count} records {state}>"
