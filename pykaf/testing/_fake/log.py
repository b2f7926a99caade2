"""A partition's log in memory: record batches kept as the bytes clients sent.

The broker never decodes records: it reads the 61-byte v2 batch header
(offsets, producer id and epoch, sequence, attributes, timestamps), rewrites
the base offset, and hands the bytes back on fetch. The CRC covers the batch
from its attributes on, so setting the base offset leaves it valid.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from pykaf.errors import CorruptRecordError

# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
# maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
# recordCount int32
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_BASE_OFFSET = struct.Struct(">q")

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_LOG_APPEND_TIME = 0x08


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


def split_batches(data: bytes | memoryview) -> list[tuple[BatchHeader, bytes]]:
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


class PartitionLog:
    """The batches of one partition, in offset order, with its watermarks.

    Attributes:
        batches: the stored batches, oldest first.
        log_start_offset: the first offset still readable.
        high_watermark: the next offset to be written (every replica is in
            sync: a write is committed when it is appended).
    """

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []  # base offsets, for bisect
        self.log_start_offset = 0
        self.high_watermark = 0
        self.size_bytes = 0

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark."""
        return self.high_watermark

    def append(self, header: BatchHeader, data: bytes) -> int:
        """Store one batch at the end of the log; return its base offset."""
        base = self.high_watermark
        raw = _BASE_OFFSET.pack(base) + data[8:]
        last = base + header.last_offset_delta
        self.batches.append(StoredBatch(base, last, header, raw))
        self._bases.append(base)
        self.high_watermark = last + 1
        self.size_bytes += len(raw)
        return base

    def read(self, offset: int, max_bytes: int, *, upto: int | None = None) -> bytes:
        """The batches from the one holding ``offset``, up to ``max_bytes``.

        The first batch is returned whole even when it is larger than
        ``max_bytes`` (as Kafka does, so a consumer can always progress).
        Batches starting at or after ``upto`` (the last stable offset for a
        read_committed fetch) are left out.
        """
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            i = 0
        limit = self.high_watermark if upto is None else upto
        out: list[bytes] = []
        size = 0
        n = len(self.batches)
        while i < n:
            b = self.batches[i]
            if b.base_offset >= limit:
                break
            if b.last_offset < offset:
                i += 1
                continue
            if out and size + len(b.data) > max_bytes:
                break
            out.append(b.data)
            size += len(b.data)
            i += 1
        return b"".join(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch whose max timestamp is at least ``timestamp``."""
        for b in self.batches:
            if b.header.max_timestamp >= timestamp and not b.header.control:
                return max(b.base_offset, self.log_start_offset), b.header.max_timestamp
        return None

    def delete_before(self, offset: int) -> None:
        """Move the log start to ``offset``, dropping the batches wholly below it."""
        self.log_start_offset = max(self.log_start_offset, min(offset, self.high_watermark))
        keep = [b for b in self.batches if b.last_offset >= self.log_start_offset]
        self.size_bytes = sum(len(b.data) for b in keep)
        self.batches = keep
        self._bases = [b.base_offset for b in keep]
