"""A partition's log in memory: record batches kept as the bytes clients sent.

The broker never decodes records: it reads the 61-byte v2 batch header
(offsets, producer id and epoch, sequence, attributes, timestamps), rewrites
the base offset, and hands the bytes back on fetch. The CRC covers the batch
from its attributes on, so setting the base offset leaves it valid.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import crc32c
import trio

from pykaf import errors
from pykaf.codec import CONTROL_ABORT, CONTROL_COMMIT, decode_batches, encode_control_batch
from pykaf.errors import CorruptRecordError

# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
# maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
# recordCount int32
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_BASE_OFFSET = struct.Struct(">q")
_I32 = struct.Struct(">i")
_EPOCH_AT = 12  # partitionLeaderEpoch: after baseOffset and batchLength, outside the CRC
#: what OffsetForLeaderEpoch answers for an epoch the log does not know
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_LOG_APPEND_TIME = 0x08
_CRC_FROM = 21  # the CRC covers the batch from its attributes on
_CRC_AT = 17
_ATTRS_AND_DELTA = struct.Struct(">hi")
_MAX_TIMESTAMP_AT = 35
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
#: batches per producer a partition remembers to answer retried duplicates (Kafka: 5)
PRODUCER_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchHeader:
    """The fields of a v2 record batch header the broker acts on."""

    length: int  # whole batch in bytes, the 12-byte offset and length prefix included
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def transactional(self) -> bool:
        """The batch belongs to a transaction."""
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def control(self) -> bool:
        """The batch is a control batch (a COMMIT or ABORT marker)."""
        return bool(self.attributes & ATTR_CONTROL)


def split_batches(data: bytes | bytearray | memoryview) -> list[tuple[BatchHeader, bytes]]:
    """Cut a produce request's record set into batches, reading each header.

    Raises:
        CorruptRecordError: a batch is truncated, not magic 2, or its length is
            impossible.
    """
    out: list[tuple[BatchHeader, bytes]] = []
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(f"record set ends inside a batch header at byte {pos}")
        fields = _HEADER.unpack_from(view, pos)
        length = fields[1] + 12
        if length < HEADER_SIZE or pos + length > end:
            raise CorruptRecordError(f"batch at byte {pos} declares an impossible length {length}")
        if fields[3] != 2:
            raise CorruptRecordError(f"batch at byte {pos} has magic {fields[3]}, not 2")
        header = BatchHeader(length, *fields[3:])
        if header.record_count < 0 or header.last_offset_delta < 0:
            raise CorruptRecordError(f"batch at byte {pos} has a negative record count")
        if crc32c.crc32c(view[pos + _CRC_FROM : pos + length]) != header.crc:
            raise CorruptRecordError(f"batch at byte {pos} fails its CRC-32C check")
        out.append((header, bytes(view[pos : pos + length])))
        pos += length
    return out


@dataclass(slots=True)
class StoredBatch:
    """A batch in the log: its offsets, header and bytes (base offset already set)."""

    base_offset: int
    last_offset: int
    header: BatchHeader
    data: bytes


def stamp_log_append_time(header: BatchHeader, data: bytes, now_ms: int) -> bytes:
    """The batch with LogAppendTime set: timestamp type bit, max timestamp, CRC redone."""
    buf = bytearray(data)
    header.attributes |= ATTR_LOG_APPEND_TIME
    header.max_timestamp = now_ms
    _ATTRS_AND_DELTA.pack_into(buf, _CRC_FROM, header.attributes, header.last_offset_delta)
    _I64.pack_into(buf, _MAX_TIMESTAMP_AT, now_ms)
    header.crc = crc32c.crc32c(memoryview(buf)[_CRC_FROM:])
    _U32.pack_into(buf, _CRC_AT, header.crc)
    return bytes(buf)


def _records(batch: StoredBatch) -> list[Any]:
    """The records of a stored batch, decoded (only ListOffsets by timestamp needs them)."""
    (decoded,) = decode_batches(batch.data, check_crc=False)
    return list(decoded.records)


def _next_seq(seq: int) -> int:
    return 0 if seq == _INT32_MAX else seq + 1


@dataclass(slots=True)
class ProducerState:
    """What a partition remembers of one producer id: its epoch and last batches."""

    epoch: int
    #: (first sequence, last sequence, base offset, max timestamp) of the last batches, oldest first
    batches: deque[tuple[int, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=PRODUCER_BATCHES)
    )

    @property
    def last_seq(self) -> int:
        """The last sequence written at this epoch, or -1."""
        return self.batches[-1][1] if self.batches else -1


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    """An aborted transaction on one partition: its first offset and its ABORT marker's."""

    producer_id: int
    first_offset: int
    last_offset: int


class PartitionLog:
    """The batches of one partition, in offset order, with its watermarks.

    Attributes:
        batches: the stored batches, oldest first.
        log_start_offset: the first offset still readable.
        high_watermark: the next offset to be written (every replica is in
            sync: a write is committed when it is appended).
        producers: sequence state by producer id (idempotence).
        open_txns: the first offset of each producer's open transaction here.
        aborted: the aborted transactions, in marker order.
        leader_epoch: the epoch stamped on every batch appended now.
        epochs: the epoch history, Kafka's leader epoch cache: (epoch, start
            offset) pairs, oldest first, both increasing.
    """

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []  # base offsets, for bisect
        self.log_start_offset = 0
        self.high_watermark = 0
        self.size_bytes = 0
        self.producers: dict[int, ProducerState] = {}
        #: (epoch, lowest first sequence) of transactional batches verified
        #: before their producer had state here (Kafka's verification entry)
        self.verifying: dict[int, tuple[int, int]] = {}
        self.open_txns: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []
        self._aborted_ends: list[int] = []  # last offsets of ``aborted``, for bisect
        self._waiters: set[trio.Event] = set()
        self.leader_epoch = 0
        self.epochs: list[tuple[int, int]] = [(0, 0)]

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark."""
        if self.open_txns:
            return min(self.open_txns.values())
        return self.high_watermark

    # -- wakeups -----------------------------------------------------------------

    def add_waiter(self, event: trio.Event) -> None:
        """Set ``event`` at the next append (a fetch waiting for min_bytes)."""
        self._waiters.add(event)

    def remove_waiter(self, event: trio.Event) -> None:
        """Stop waking ``event``."""
        self._waiters.discard(event)

    def _wake(self) -> None:
        for event in self._waiters:
            event.set()
        self._waiters.clear()

    # -- idempotence ---------------------------------------------------------------

    def note_verified(self, header: BatchHeader) -> None:
        """A transactional batch passed the KIP-890 check: remember its lowest sequence."""
        pid = header.producer_id
        if pid in self.producers:
            return
        seen = self.verifying.get(pid)
        if seen is None or seen[0] != header.producer_epoch:
            self.verifying[pid] = (header.producer_epoch, header.base_sequence)
        else:
            self.verifying[pid] = (seen[0], min(seen[1], header.base_sequence))

    def check_producer(self, header: BatchHeader) -> tuple[int, tuple[int, int] | None]:
        """Check an idempotent batch's epoch and sequence against the producer's state.

        A producer id this partition has not seen may start at any sequence
        (Kafka 4 no longer answers UNKNOWN_PRODUCER_ID: its state may have
        been removed with the log, or expired).

        Returns:
            (error code, None) when it must be refused; (0, (base offset, max
            timestamp)) when it is a retry of one of the producer's last
            batches (answer them, write nothing: Kafka answers the stored
            batch's max timestamp as its log append time); (0, None) when it is
            to be appended.
        """
        pid = header.producer_id
        if pid < 0:
            return 0, None
        first = header.base_sequence
        last = (first + header.last_offset_delta) % (_INT32_MAX + 1)
        state = self.producers.get(pid)
        if state is None:
            # KIP-890: a transactional batch of a producer new to this partition
            # may not start above the lowest sequence the verification saw
            lowest = self.verifying.get(pid)
            if (
                header.transactional
                and lowest is not None
                and lowest[0] == header.producer_epoch
                and first > lowest[1]
            ):
                return errors.OutOfOrderSequenceError.code, None
            return 0, None
        if header.producer_epoch < state.epoch:
            return errors.InvalidProducerEpochError.code, None
        if header.producer_epoch > state.epoch:
            return (0, None) if first == 0 else (errors.OutOfOrderSequenceError.code, None)
        for b_first, b_last, b_base, b_time in state.batches:
            if b_first == first and b_last == last:
                return 0, (b_base, b_time)
        if state.batches and first != _next_seq(state.last_seq):
            return errors.OutOfOrderSequenceError.code, None
        if not state.batches and first != 0:
            return errors.OutOfOrderSequenceError.code, None
        return 0, None

    def _track_producer(self, header: BatchHeader, base: int) -> None:
        pid = header.producer_id
        state = self.producers.get(pid)
        self.verifying.pop(pid, None)
        if state is None or header.producer_epoch != state.epoch:
            state = self.producers[pid] = ProducerState(header.producer_epoch)
        if header.control:
            return
        last = (header.base_sequence + header.last_offset_delta) % (_INT32_MAX + 1)
        state.batches.append((header.base_sequence, last, base, header.max_timestamp))

    # -- writing -------------------------------------------------------------------

    def append(self, header: BatchHeader, data: bytes) -> int:
        """Store one batch at the end of the log; return its base offset."""
        base = self.high_watermark
        # the leader stamps its epoch on the batch (the CRC does not cover it)
        raw = _BASE_OFFSET.pack(base) + data[8:_EPOCH_AT] + _I32.pack(self.leader_epoch)
        raw += data[_EPOCH_AT + 4 :]
        last = base + header.last_offset_delta
        self.batches.append(StoredBatch(base, last, header, raw))
        self._bases.append(base)
        self.high_watermark = last + 1
        self.size_bytes += len(raw)
        if header.producer_id >= 0:
            self._track_producer(header, base)
            if header.transactional and not header.control:
                self.open_txns.setdefault(header.producer_id, base)
        self._wake()
        return base

    def append_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *, commit: bool
    ) -> int:
        """Write a COMMIT or ABORT marker ending the producer's transaction here."""
        data = encode_control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            timestamp=int(time.time() * 1000),
            coordinator_epoch=coordinator_epoch,
        )
        ((header, raw),) = split_batches(data)
        offset = self.append(header, raw)
        first = self.open_txns.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTxn(producer_id, first, offset))
            self._aborted_ends.append(offset)
        return offset

    # -- leader epochs ---------------------------------------------------------------

    def start_epoch(self, epoch: int) -> None:
        """A new leader took over at ``epoch``: it starts at the log end offset.

        As Kafka's epoch cache does, entries with an epoch at or above
        ``epoch``, or starting at or after the log end (epochs that wrote
        nothing), give way to the new one.
        """
        end = self.high_watermark
        self.epochs = [(e, start) for e, start in self.epochs if e < epoch and start < end]
        self.epochs.append((epoch, end))
        self.leader_epoch = epoch

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) OffsetForLeaderEpoch answers for ``epoch``.

        The current epoch ends at the log end offset; an older one where the
        next known epoch starts, answered with the largest known epoch at or
        below it (the asked epoch itself when it predates every entry); an
        epoch above every entry, or -1, gets (-1, -1).
        """
        if epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.epochs[-1][0] == epoch:
            return epoch, self.high_watermark
        later = [(e, start) for e, start in self.epochs if e > epoch]
        if not later:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        earlier = [e for e, _ in self.epochs if e <= epoch]
        return (earlier[-1] if earlier else epoch), later[0][1]

    def truncate_to(self, offset: int) -> int:
        """Cut the log's end back to ``offset`` (a replica losing what it had not replicated).

        Whole batches go: the log ends where the batch holding ``offset``
        began. Producer state, open and aborted transactions and epochs past
        the new end go with them. Returns the new log end offset.

        Raises:
            ValueError: ``offset`` is below the log start offset.
        """
        if offset < self.log_start_offset:
            raise ValueError(f"offset {offset} is below the log start {self.log_start_offset}")
        keep = [b for b in self.batches if b.last_offset < offset]
        end = keep[-1].last_offset + 1 if keep else min(offset, self.high_watermark)
        end = max(end, self.log_start_offset)
        self.batches = keep
        self._bases = [b.base_offset for b in keep]
        self.size_bytes = sum(len(b.data) for b in keep)
        self.high_watermark = end
        for state in self.producers.values():
            kept = [b for b in state.batches if b[2] < end]
            state.batches.clear()
            state.batches.extend(kept)
        self.open_txns = {pid: first for pid, first in self.open_txns.items() if first < end}
        self.aborted = [a for a in self.aborted if a.last_offset < end]
        self._aborted_ends = [a.last_offset for a in self.aborted]
        self.epochs = [(e, start) for e, start in self.epochs if start < end] or self.epochs[:1]
        return end

    # -- reading -------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, upto: int | None = None, min_one: bool = True
    ) -> tuple[bytes, int]:
        """The batches from the one holding ``offset``, up to ``max_bytes``.

        The first batch is returned whole even when it is larger than
        ``max_bytes`` (as Kafka does, so a consumer can always progress)
        unless ``min_one`` is False. Batches starting at or after ``upto``
        (the last stable offset for a read_committed fetch) are left out.

        Returns:
            the bytes and the last offset they hold (``offset - 1`` when empty).
        """
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            i = 0
        limit = self.high_watermark if upto is None else upto
        out: list[bytes] = []
        size = 0
        last = offset - 1
        batches = self.batches
        n = len(batches)
        while i < n:
            b = batches[i]
            if b.base_offset >= limit:
                break
            if b.last_offset < offset:
                i += 1
                continue
            if (out or not min_one) and size + len(b.data) > max_bytes:
                break
            out.append(b.data)
            size += len(b.data)
            last = b.last_offset
            i += 1
        return b"".join(out), last

    def batches_from(self, offset: int) -> list[StoredBatch]:
        """The stored batches from the one holding ``offset`` on, in order."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return self.batches[i:]

    def aborted_between(self, first: int, last: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping offsets ``first``..``last``."""
        i = bisect.bisect_left(self._aborted_ends, first)
        return [a for a in self.aborted[i:] if a.first_offset <= last]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is at least ``timestamp``.

        Batches are skipped by their max timestamp; the one that may hold it is
        decoded (Kafka answers at record granularity).
        """
        for b in self.batches:
            if b.header.max_timestamp >= timestamp and not b.header.control:
                for record in _records(b):
                    if record.offset >= self.log_start_offset and record.timestamp >= timestamp:
                        return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3)."""
        best: StoredBatch | None = None
        for b in self.batches:
            if not b.header.control and (
                best is None or b.header.max_timestamp > best.header.max_timestamp
            ):
                best = b
        if best is None:
            return None
        if best.header.attributes & ATTR_LOG_APPEND_TIME:
            return best.base_offset, best.header.max_timestamp
        for record in _records(best):
            if record.timestamp == best.header.max_timestamp:
                return record.offset, record.timestamp
        return best.last_offset, best.header.max_timestamp

    def delete_before(self, offset: int) -> None:
        """Move the log start to ``offset``, dropping the batches wholly below it."""
        self.log_start_offset = max(self.log_start_offset, min(offset, self.high_watermark))
        keep = [b for b in self.batches if b.last_offset >= self.log_start_offset]
        self.size_bytes = sum(len(b.data) for b in keep)
        self.batches = keep
        self._bases = [b.base_offset for b in keep]
        self.aborted = [a for a in self.aborted if a.last_offset >= self.log_start_offset]
        self._aborted_ends = [a.last_offset for a in self.aborted]
