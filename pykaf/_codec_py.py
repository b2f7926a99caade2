"""Pure-Python twin of the Cython codec ``pykaf._codec`` (same names, same bytes).

Selected by ``PYKAF_NO_EXTENSIONS=1`` or when the extension is not built; the
tests run every codec test against both. Formats follow Kafka's definitions:
record batch v2 (magic 2) and the legacy message sets (magic 0 and 1).
"""

from __future__ import annotations

import operator
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from crc32c import crc32c as _crc32c

from pykaf import _compression
from pykaf._column_batch import ColumnBatch
from pykaf._columns import BinaryColumn
from pykaf.errors import CorruptRecordError, RecordBatchTooLargeError, RecordTooLargeError

if TYPE_CHECKING:
    from typing_extensions import Buffer

IMPLEMENTATION = "python"

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
RECORD_BATCH_OVERHEAD = 61
NO_PRODUCER_ID = -1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_MAX_RECORD_COUNT = 2147483647
_LEGACY_HEADER = 12  # offset int64 + message size int32
_V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
_LEGACY_V0 = struct.Struct(">qiIbb")
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

Headers = Sequence[tuple[str, bytes | None]]


# -- varints ------------------------------------------------------------------


def _encode_unsigned(value: int, limit: int, what: str) -> bytes:
    if not 0 <= value < limit:
        raise ValueError(f"{what} {value} out of range [0, {limit})")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_unsigned(data: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    if pos < 0:
        raise ValueError("negative position")
    value = 0
    shift = 0
    n = len(data)
    for i in range(max_bytes):
        if pos >= n:
            raise CorruptRecordError("truncated varint")
        b = data[pos]
        pos += 1
        if i == max_bytes - 1 and b > (0x0F if max_bytes == 5 else 0x01):
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def encode_uvarint(value: int) -> bytes:
    """Encode an unsigned 32-bit varint (at most 5 bytes)."""
    return _encode_unsigned(value, 1 << 32, "uvarint")


def _view(data: Buffer) -> bytes | memoryview:
    return data if isinstance(data, (bytes, memoryview)) else memoryview(data).cast("B")


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    u, pos = _decode_unsigned(data, pos, 5)
    return (u >> 1) ^ -(u & 1), pos


def _varlong(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    u, pos = _decode_unsigned(data, pos, 10)
    return (u >> 1) ^ -(u & 1), pos


def decode_uvarint(data: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at ``pos``; return (value, next position)."""
    return _decode_unsigned(_view(data), pos, 5)


def encode_uvarlong(value: int) -> bytes:
    """Encode an unsigned 64-bit varint (at most 10 bytes)."""
    return _encode_unsigned(value, 1 << 64, "uvarlong")


def decode_uvarlong(data: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 64-bit varint at ``pos``; return (value, next position)."""
    return _decode_unsigned(_view(data), pos, 10)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit zigzag varint."""
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"varint {value} out of the int32 range")
    return _encode_unsigned((value << 1) ^ (value >> 31), 1 << 32, "varint")


def decode_varint(data: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a signed 32-bit zigzag varint at ``pos``; return (value, next position)."""
    return _varint(_view(data), pos)


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit zigzag varint."""
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"varlong {value} out of the int64 range")
    return _encode_unsigned((value << 1) ^ (value >> 63), 1 << 64, "varlong")


def decode_varlong(data: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a signed 64-bit zigzag varint at ``pos``; return (value, next position)."""
    return _varlong(_view(data), pos)


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``value``."""
    return int(_crc32c(data, value))


# -- partitioner hashes -----------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_MURMUR2_SEED = 0x9747B28C
_MURMUR2_M = 0x5BD1E995
_FNV1A_OFFSET = 2166136261
_FNV1A_PRIME = 16777619


def _hash_bytes(data: Buffer) -> bytes:
    if data is None:
        raise TypeError("cannot hash None: data must be bytes-like")
    if type(data) is bytes:
        return data
    return memoryview(data).cast("B").tobytes()


def murmur2(data: Buffer) -> int:
    """Kafka's murmur2 hash of ``data`` as a signed 32-bit int, as Java's ``Utils.murmur2``."""
    b = _hash_bytes(data)
    n = len(b)
    m = _MURMUR2_M
    h = (_MURMUR2_SEED ^ n) & _MASK32
    whole = n & ~3
    for (k,) in struct.iter_unpack("<I", b[:whole]):
        k = (k * m) & _MASK32
        k ^= k >> 24
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail = n & 3
    if tail == 3:
        h ^= b[whole + 2] << 16
    if tail >= 2:
        h ^= b[whole + 1] << 8
    if tail >= 1:
        h = ((h ^ b[whole]) * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def fnv1a_32(data: Buffer) -> int:
    """32-bit FNV-1a hash of ``data`` (unsigned), as librdkafka's and sarama's."""
    h = _FNV1A_OFFSET
    for byte in _hash_bytes(data):
        h = ((h ^ byte) * _FNV1A_PRIME) & _MASK32
    return h


def partition_order(
    keys: Sequence[bytes | None] | BinaryColumn, count: int, parts: Sequence[int] | None = None
) -> tuple[list[int], list[int]]:
    """Group records by partition, each partition's records in their order (a stable sort).

    Without ``parts``, record ``i`` goes where Kafka's default partitioner
    sends key ``keys[i]``: ``(murmur2(key) & 0x7fffffff) % count``. ``keys`` is
    a sequence of bytes-like keys or a BinaryColumn, with no null key. With
    ``parts`` (a sequence of ints, one per record), record ``i`` goes to
    ``parts[i]`` and ``keys`` only gives the number of records.

    Returns:
        ``(order, bounds)``: ``order`` lists the records' indices grouped by
        partition; partition ``p``'s records are ``order[bounds[p]:bounds[p + 1]]``.

    Raises:
        ValueError: ``count`` below 1, a null key, a partition outside
            ``0..count-1``, or ``parts`` of another length than ``keys``.
        TypeError: a key that is not bytes-like.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    n = len(keys)
    if parts is None:
        chosen = []
        for i in range(n):
            key = keys[i]
            if key is None:
                raise ValueError(f"keys[{i}] is null: a null key has no partition of its own")
            if not isinstance(key, (bytes, bytearray, memoryview)):
                raise TypeError(f"keys must be bytes or None, not {type(key).__name__}")
            chosen.append((murmur2(key) & 0x7FFFFFFF) % count)
    else:
        if len(parts) != n:
            raise ValueError(f"{len(parts)} partitions for {n} keys")
        chosen = [operator.index(p) for p in parts]
        for i, p in enumerate(chosen):
            if not 0 <= p < count:
                raise ValueError(f"parts[{i}] = {p} is outside 0..{count - 1}")
    order = sorted(range(n), key=chosen.__getitem__)  # sorted is stable
    sizes = [0] * count
    for p in chosen:
        sizes[p] += 1
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    return order, bounds


def take(column: Sequence[Any] | BinaryColumn, order: Sequence[int]) -> list[Any] | BinaryColumn:
    """``column``'s elements in ``order`` (a sequence of indices): a list, or a BinaryColumn.

    A BinaryColumn gives a BinaryColumn (int64 offsets; nulls kept); any other
    sequence gives a list.

    Raises:
        IndexError: an index outside the column.
    """
    length = len(column)
    for i, j in enumerate(order):
        if not 0 <= j < length:
            raise IndexError(f"order[{i}] = {j} is outside a column of {length}")
    if not isinstance(column, BinaryColumn):
        return [column[j] for j in order]
    return _column_of([column[j] for j in order])


def _column_of(values: list[bytes | None]) -> BinaryColumn:
    """A BinaryColumn with int64 offsets holding ``values``."""
    offsets = [0]
    data = bytearray()
    validity = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            data += v
            validity[i >> 3] |= 1 << (i & 7)
        offsets.append(len(data))
    nulls = None in values
    return BinaryColumn(
        struct.pack(f"={len(offsets)}q", *offsets),
        bytes(data),
        validity if nulls else None,
        large=True,
    )


def _varint_size(u: int) -> int:
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def _zz32(v: int) -> int:
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def _zz64(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


# -- decoded objects -------------------------------------------------------------


class Record:
    """One record: its absolute offset, timestamp (ms), key, value and headers.

    Decoded records also say where they came from: ``topic`` and ``partition``
    (as given to the decoder; None and -1 otherwise) and ``timestamp_type``
    (0 CreateTime, 1 LogAppendTime, -1 unknown: a magic 0 message). These
    three are not compared by ``==``.
    """

    __slots__ = (
        "_headers",
        "attributes",
        "key",
        "offset",
        "partition",
        "timestamp",
        "timestamp_type",
        "topic",
        "value",
    )

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
        attributes: int = 0,
        *,
        topic: str | None = None,
        partition: int = -1,
        timestamp_type: int = -1,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self._headers = list(headers) if headers else None
        self.attributes = attributes
        self.topic = topic
        self.partition = partition
        self.timestamp_type = timestamp_type

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        """The record's headers as ``(name, value)`` pairs, in order."""
        return list(self._headers) if self._headers else []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and self.headers == other.headers
            and self.attributes == other.attributes
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        topic = self.topic
        where = (
            f"topic={topic!r}, partition={self.partition}, "
            if topic is not None or self.partition != -1
            else ""
        )
        return (
            f"Record({where}offset={self.offset}, timestamp={self.timestamp}, "
            f"key={self.key!r}, value={self.value!r}, headers={self.headers!r})"
        )


class RecordBatch:
    """A decoded record batch (magic 2) or legacy message (magic 0/1)."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "control_type_id",
        "coordinator_epoch",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
        "records",
        "size",
    )

    def __init__(self) -> None:
        self.base_offset = 0
        self.batch_length = 0
        self.partition_leader_epoch = -1
        self.magic = 2
        self.crc = 0
        self.attributes = 0
        self.last_offset_delta = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.record_count = 0
        self.records: list[Record] = []
        self.control_type_id = -1
        self.coordinator_epoch = -1
        self.size = 0

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record (it may have been compacted away)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset to fetch after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_type(self) -> int:
        """Kafka's compression codec id (0 none .. 4 zstd)."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def compression(self) -> str:
        """The compression codec's name."""
        c = self.attributes & _COMPRESSION_MASK
        return _compression.NAMES[c] if c < len(_compression.NAMES) else f"unknown-{c}"

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        """Whether the batch belongs to a transaction."""
        return self.magic >= 2 and bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Whether the batch holds a control record (e.g. a transaction marker)."""
        return self.magic >= 2 and bool(self.attributes & _CONTROL_BIT)

    @property
    def control_type(self) -> str | None:
        """``"commit"`` or ``"abort"`` for transaction markers, else None."""
        if self.control_type_id == CONTROL_COMMIT:
            return "commit"
        if self.control_type_id == CONTROL_ABORT:
            return "abort"
        return None

    def __repr__(self) -> str:
        return (
            f"RecordBatch(magic={self.magic}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, records={len(self.records)}, "
            f"compression={self.compression!r}, producer_id={self.producer_id}, "
            f"transactional={self.is_transactional}, control={self.control_type!r})"
        )


class RecordSet:
    """What a fetch response's records field held: complete batches, maybe a partial one."""

    __slots__ = ("batches", "consumed", "incomplete", "partial_size")

    def __init__(
        self, batches: list[RecordBatch], incomplete: bool, consumed: int, partial_size: int
    ) -> None:
        self.batches = batches
        self.incomplete = incomplete
        self.consumed = consumed
        self.partial_size = partial_size

    def __repr__(self) -> str:
        return (
            f"RecordSet(batches={len(self.batches)}, incomplete={self.incomplete}, "
            f"consumed={self.consumed}, partial_size={self.partial_size})"
        )


# -- reading records one by one ---------------------------------------------------


class RecordCursor:
    """Decoded records and the index of the next one: a reader's per-record side.

    A partition consumer subclasses it: ``async for`` and ``next_nowait``
    take the next record from ``_local``; when the list is read out,
    ``__anext__`` awaits the subclass's ``_refill_next()`` (a coroutine that
    fills ``_local`` and returns its first record, or raises
    StopAsyncIteration). The compiled twin hands a waiting record out without
    a coroutine per record.
    """

    _local: list[Record]
    _next: int

    def __init__(self) -> None:
        self._local = []
        self._next = 0

    def __aiter__(self) -> RecordCursor:
        return self

    async def __anext__(self) -> Record:
        i = self._next
        local = self._local
        if i >= len(local):
            return await self._refill_next()
        self._next = i + 1
        return local[i]

    async def _refill_next(self) -> Record:
        """Fill ``_local`` and hand out its first record (a subclass defines it)."""
        raise StopAsyncIteration

    def next_nowait(self) -> Record | None:
        """The next record if one is decoded and waiting, else None (no wait, no fetch).

        What ``async for`` hands out when it need not wait; for a caller outside
        trio (``pykaf.aio``) that reads records one by one without crossing
        into trio for each.
        """
        i = self._next
        local = self._local
        if i >= len(local):
            return None
        self._next = i + 1
        return local[i]


#: Bumped in the child at every ``os.fork()``: a cheap way for a per-record path
#: (LockedTake, pykaf.sync's) to notice that it runs in another process than its loop.
forks = 0


def _count_fork() -> None:
    global forks
    forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


class LockedTake:
    """A thread's ``poll()`` outside trio (``pykaf.sync``): the next record of ``cursor``.

    Called, it takes the next decoded record of ``cursor`` (a RecordCursor,
    or None) under ``lock``; when none waits, or the process was forked
    since it was made, it returns ``general(timeout)`` instead. The compiled
    twin does it with no Python frame.
    """

    def __init__(self, lock: Any, general: Callable[[float | None], Record | None]) -> None:
        self._lock = lock
        self._general = general
        self._forks = forks
        #: The cursor to take from (set and cleared under ``lock``).
        self.cursor: RecordCursor | None = None

    def __call__(self, timeout: float | None = None) -> Record | None:
        if self._forks == forks:
            with self._lock:
                cursor = self.cursor
                record = None if cursor is None else cursor.next_nowait()
            if record is not None:
                return record
        return self._general(timeout)


# -- decoding -------------------------------------------------------------------


def decode_batches(
    data: Buffer, *, check_crc: bool = True, topic: str | None = None, partition: int = -1
) -> list[RecordBatch]:
    """Decode every complete batch in ``data`` (a trailing partial batch is left out).

    Every record gets ``topic`` and ``partition`` (the same str object in all).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch.
        TypeError, ValueError: topic is not a str or None, partition not an int32.
    """
    return decode_record_set(data, check_crc=check_crc, topic=topic, partition=partition).batches


def _check_partition(partition: int) -> int:
    """The partition as an int in the int32 range, else TypeError/ValueError."""
    partition = operator.index(partition)
    if not -(2**31) <= partition <= _INT32_MAX:
        raise ValueError(f"partition {partition} is outside the int32 range")
    return partition


def decode_record_set(
    data: Buffer, *, check_crc: bool = True, topic: str | None = None, partition: int = -1
) -> RecordSet:
    """Decode a fetch response's records field, reporting a trailing partial batch.

    Every record gets ``topic`` and ``partition`` (the same str object in all).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch.
        TypeError, ValueError: topic is not a str or None, partition not an int32.
    """
    if topic is not None and not isinstance(topic, str):
        raise TypeError(f"topic must be a str or None, not {type(topic).__name__}")
    where = (topic, _check_partition(partition))
    view = memoryview(data).cast("B")
    n = len(view)
    pos = 0
    batches: list[RecordBatch] = []
    while pos < n:
        if n - pos < _LEGACY_HEADER:
            return RecordSet(batches, True, pos, 0)
        length = struct.unpack_from(">i", view, pos + 8)[0]
        if length < 14:  # smaller than the smallest legacy message
            raise CorruptRecordError(f"record batch length {length} is too small")
        end = pos + _LEGACY_HEADER + length
        if end > n:
            return RecordSet(batches, True, pos, _LEGACY_HEADER + length)
        magic = view[pos + 16]
        if magic == 2:
            batches.append(_decode_v2(view, pos, end, check_crc, where))
        elif magic in (0, 1):
            _decode_legacy(view, pos, end, check_crc, batches, where)
        else:
            raise CorruptRecordError(f"unknown record batch magic {magic}")
        pos = end
    return RecordSet(batches, False, pos, 0)


def _decode_v2(
    view: memoryview, pos: int, end: int, check_crc: bool, where: tuple[str | None, int]
) -> RecordBatch:
    if end - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch of {end - pos} bytes is shorter than its header")
    (
        base_offset,
        batch_length,
        leader_epoch,
        _magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _V2_HEADER.unpack_from(view, pos)
    if check_crc:
        actual = _crc32c(view[pos + 21 : end])
        if actual != crc:
            raise CorruptRecordError(
                f"record batch at offset {base_offset}: CRC mismatch "
                f"(stored {crc:#010x}, computed {actual:#010x})"
            )
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if last_offset_delta < 0:
        raise CorruptRecordError(f"negative last offset delta {last_offset_delta}")
    if base_offset > _INT64_MAX - 1 - last_offset_delta:
        # Kafka's offsets are int64s; the next offset to fetch must be one too.
        raise CorruptRecordError(
            f"base offset {base_offset} + last offset delta {last_offset_delta} overflows int64"
        )
    attributes &= 0xFFFF  # a bit field: read unsigned, as the compiled twin does
    b = RecordBatch()
    b.base_offset = base_offset
    b.batch_length = batch_length
    b.partition_leader_epoch = leader_epoch
    b.magic = 2
    b.crc = crc
    b.attributes = attributes
    b.last_offset_delta = last_offset_delta
    b.base_timestamp = base_timestamp
    b.max_timestamp = max_timestamp
    b.producer_id = producer_id
    b.producer_epoch = producer_epoch
    b.base_sequence = base_sequence
    b.record_count = count
    b.size = end - pos
    codec = attributes & _COMPRESSION_MASK
    body: Buffer = view[pos + RECORD_BATCH_OVERHEAD : end]
    if codec != COMPRESSION_NONE:
        # Refuse a count the section cannot hold before inflating anything.
        section = end - pos - RECORD_BATCH_OVERHEAD
        most = _compression.inflate_limit(section) // _compression.MIN_RECORD_SIZE
        if count > most:
            raise CorruptRecordError(
                f"record count {count} exceeds what {section} compressed bytes may hold"
            )
        body = _compression.decompress(codec, body)
    log_append = bool(attributes & _TIMESTAMP_TYPE_BIT)
    b.records = _decode_records(
        memoryview(body),
        count,
        base_offset,
        base_timestamp,
        max_timestamp if log_append else None,
        where,
    )
    if attributes & _CONTROL_BIT:
        _read_control(b)
    return b


def _decode_records(
    body: memoryview,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: int | None,
    where: tuple[str | None, int],
) -> list[Record]:
    topic, partition = where
    ts_type = TIMESTAMP_CREATE_TIME if log_append_ts is None else TIMESTAMP_LOG_APPEND_TIME
    new_record = Record.__new__
    n = len(body)
    # Each record takes at least 7 bytes; a larger count cannot be honest.
    if count > n // _compression.MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} exceeds what {n} bytes can hold")
    records: list[Record] = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(body, pos)
        if length < 0 or pos + length > n:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        rec_end = pos + length
        if pos >= rec_end:
            raise CorruptRecordError("empty record")
        attributes = body[pos]
        pos += 1
        ts_delta, pos = _varlong(body, pos)
        off_delta, pos = _varint(body, pos)
        key, pos = _read_varbytes(body, pos, rec_end)
        value, pos = _read_varbytes(body, pos, rec_end)
        hcount, pos = _varint(body, pos)
        if hcount < 0 or hcount > rec_end - pos:
            raise CorruptRecordError(f"header count {hcount} is invalid")
        headers: list[tuple[str, bytes | None]] | None = None
        if hcount:
            headers = []
            for _h in range(hcount):
                hkey, pos = _read_varbytes(body, pos, rec_end)
                if hkey is None:
                    raise CorruptRecordError("null header key")
                try:
                    name = hkey.decode()
                except UnicodeDecodeError as exc:
                    raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
                hval, pos = _read_varbytes(body, pos, rec_end)
                headers.append((name, hval))
        if pos != rec_end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        offset = base_offset + off_delta
        if not _INT64_MIN <= offset <= _INT64_MAX:
            raise CorruptRecordError(f"record offset delta {off_delta} overflows int64")
        if log_append_ts is None:
            timestamp = base_ts + ts_delta
            if not _INT64_MIN <= timestamp <= _INT64_MAX:
                raise CorruptRecordError(f"record timestamp delta {ts_delta} overflows int64")
        else:
            timestamp = log_append_ts
        # Every slot set directly: half the cost of a call to Record.__init__.
        r = new_record(Record)
        r.offset = offset
        r.timestamp = timestamp
        r.key = key
        r.value = value
        r._headers = headers
        r.attributes = attributes
        r.topic = topic
        r.partition = partition
        r.timestamp_type = ts_type
        records.append(r)
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left over after {count} records")
    return records


def _read_varbytes(body: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _varint(body, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"field of {length} bytes overruns its record")
    return bytes(body[pos : pos + length]), pos + length


def _read_control(b: RecordBatch) -> None:
    if not b.records:
        return  # the log cleaner may leave a control batch with no records
    if len(b.records) != 1:
        raise CorruptRecordError(f"control batch holds {len(b.records)} records, expected 1")
    key = b.records[0].key
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is too short")
    version, ctype = struct.unpack_from(">hh", key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    b.control_type_id = ctype
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
        value = b.records[0].value
        if value is None or len(value) < 6:
            raise CorruptRecordError("transaction marker value is too short")
        b.coordinator_epoch = struct.unpack_from(">i", value, 2)[0]


def _decode_legacy(
    view: memoryview,
    pos: int,
    end: int,
    check_crc: bool,
    out: list[RecordBatch],
    where: tuple[str | None, int],
) -> None:
    offset, _size, crc, magic, attributes = _LEGACY_V0.unpack_from(view, pos)
    attributes &= 0xFF
    p = pos + 18
    timestamp = -1
    if magic == 1:
        if end - p < 8:
            raise CorruptRecordError("legacy message is truncated")
        timestamp = struct.unpack_from(">q", view, p)[0]
        p += 8
    if check_crc:
        actual = zlib.crc32(view[pos + 16 : end])
        if actual != crc:
            raise CorruptRecordError(
                f"legacy message at offset {offset}: CRC mismatch "
                f"(stored {crc:#010x}, computed {actual:#010x})"
            )
    key, p = _read_bytes32(view, p, end)
    value, p = _read_bytes32(view, p, end)
    if p != end:
        raise CorruptRecordError("legacy message size disagrees with its fields")
    codec = attributes & _COMPRESSION_MASK
    b = RecordBatch()
    b.magic = magic
    b.crc = crc
    b.attributes = attributes
    b.batch_length = end - pos - _LEGACY_HEADER
    b.size = end - pos
    b.base_timestamp = b.max_timestamp = timestamp
    if codec == COMPRESSION_NONE:
        if offset == _INT64_MAX:
            raise CorruptRecordError(
                f"legacy message offset {offset}: the next offset overflows int64"
            )
        b.base_offset = offset
        b.record_count = 1
        ts_type = -1 if magic == 0 else int(bool(attributes & _TIMESTAMP_TYPE_BIT))
        b.records = [
            Record(
                offset,
                timestamp,
                key,
                value,
                topic=where[0],
                partition=where[1],
                timestamp_type=ts_type,
            )
        ]
        out.append(b)
        return
    if value is None:
        raise CorruptRecordError("compressed legacy message has no value")
    inner_data = _compression.decompress(codec, value)
    inner: list[RecordBatch] = []
    inner_view = memoryview(inner_data)
    ipos = 0
    while ipos < len(inner_view):
        if len(inner_view) - ipos < _LEGACY_HEADER + 14:
            raise CorruptRecordError("truncated message inside a compressed wrapper")
        ilen = struct.unpack_from(">i", inner_view, ipos + 8)[0]
        iend = ipos + _LEGACY_HEADER + ilen
        if ilen < 14 or iend > len(inner_view):
            raise CorruptRecordError(f"inner legacy message length {ilen} is invalid")
        if inner_view[ipos + 16] not in (0, 1):
            raise CorruptRecordError("inner message of a compressed wrapper has a bad magic")
        _decode_legacy(inner_view, ipos, iend, check_crc, inner, where)
        if inner[-1].compression_type != COMPRESSION_NONE:
            raise CorruptRecordError("nested compressed legacy messages")
        ipos = iend
    if not inner:
        raise CorruptRecordError("compressed legacy message is empty")
    records = [r for ib in inner for r in ib.records]
    if magic == 1:
        # Inner offsets are relative; the wrapper carries the last one's absolute offset.
        # The wrapper's timestamp type also rules (Java's LegacyRecord): LogAppendTime
        # stamps its timestamp on every inner message; under CreateTime the inner
        # magic 1 messages are CreateTime and magic 0 ones keep -1 (no timestamp).
        shift = offset - records[-1].offset
        for r in records:
            r.offset += shift
            if not _INT64_MIN <= r.offset <= _INT64_MAX:
                raise CorruptRecordError(f"inner message offset overflows int64 (wrapper {offset})")
        if attributes & _TIMESTAMP_TYPE_BIT:
            for r in records:
                r.timestamp = timestamp
                r.timestamp_type = TIMESTAMP_LOG_APPEND_TIME
        else:
            for r in records:
                if r.timestamp_type != -1:
                    r.timestamp_type = TIMESTAMP_CREATE_TIME
    b.base_offset = records[0].offset
    span = records[-1].offset - records[0].offset
    if not 0 <= span <= _INT32_MAX:
        raise CorruptRecordError(f"compressed message set spans {span} offsets")
    if records[-1].offset == _INT64_MAX:
        raise CorruptRecordError("compressed message set: the next offset overflows int64")
    b.last_offset_delta = span
    b.record_count = len(records)
    b.records = records
    out.append(b)


def _read_bytes32(view: memoryview, p: int, end: int) -> tuple[bytes | None, int]:
    if end - p < 4:
        raise CorruptRecordError("legacy message is truncated")
    n = struct.unpack_from(">i", view, p)[0]
    p += 4
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid length {n}")
        return None, p
    if n > end - p:
        raise CorruptRecordError(f"field of {n} bytes overruns its message")
    return bytes(view[p : p + n]), p + n


# -- columnar decoding ----------------------------------------------------------

#: The bounds ``select`` returns to keep every record of a batch (inclusive).
KEEP_ALL = (_INT64_MIN, _INT64_MAX)
#: The bounds that keep none.
KEEP_NONE = (1, 0)


def decode_columns(
    data: Buffer,
    *,
    check_crc: bool = True,
    topic: str | None = None,
    partition: int = -1,
    select: Callable[[RecordBatch], tuple[int, int]] | None = None,
) -> tuple[ColumnBatch, list[RecordBatch], list[int], list[int]]:
    """Decode every complete batch in ``data`` straight into columns.

    ``select(batch)`` is called once per batch, in order, once the batch is
    decoded (its ``records`` list is empty: the records are in the columns)
    and returns inclusive offset bounds ``(lo, hi)``: only that batch's
    records with ``lo <= offset <= hi`` are kept (``KEEP_ALL``,
    ``KEEP_NONE``). Without ``select`` every record is kept, control records
    included, as ``decode_batches`` would return them.

    Returns:
        The columns, the batches (headers only), and per batch the records
        kept and the records above ``hi`` (0 for a batch kept none of).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch, as ``decode_batches``.
        RecordBatchTooLargeError: the keys, values or headers of ``data``
            exceed the 2 GiB an Arrow binary column's int32 offsets address.
        TypeError, ValueError: topic is not a str or None, partition not an int32.
    """
    batches = decode_batches(data, check_crc=check_crc, topic=topic, partition=partition)
    kept_records: list[Record] = []
    kept: list[int] = []
    above: list[int] = []
    for b in batches:
        records, b.records = b.records, []
        lo, hi = KEEP_ALL if select is None else select(b)
        if lo <= _INT64_MIN and hi >= _INT64_MAX:
            kept_records.extend(records)
            kept.append(len(records))
            above.append(0)
            continue
        inside = [r for r in records if lo <= r.offset <= hi]
        kept_records.extend(inside)
        kept.append(len(inside))
        above.append(sum(1 for r in records if r.offset > hi) if lo <= hi else 0)
    sizes = [0, 0, 0, 0]
    for r in kept_records:
        sizes[0] += len(r.key or b"")
        sizes[1] += len(r.value or b"")
        for name, value in r.headers:
            sizes[2] += len(name.encode())
            sizes[3] += len(value or b"")
    if max(sizes) > _INT32_MAX:
        raise RecordBatchTooLargeError(
            "decoded keys, values or headers exceed the 2 GiB of an Arrow binary column"
        )
    columns = ColumnBatch.from_records(kept_records, topic=topic, partition=partition)
    return columns, batches, kept, above


# -- encoding -------------------------------------------------------------------


def _bytes_len(b: bytes | None) -> int:
    if b is None:
        return 1
    n = len(b)
    return _varint_size(_zz32(n)) + n


def _headers_size(headers: Headers | None) -> int:
    if not headers:
        return 1
    size = _varint_size(_zz32(len(headers)))
    for item in headers:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"headers must be (name, value) pairs, not {item!r}")
        name, value = item
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, not {type(name).__name__}")
        _check_bytes(value, "header value")
        size += _bytes_len(name.encode()) + _bytes_len(value)
    return size


def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None = None,
) -> int:
    """Encoded size of one v2 record, its length prefix included."""
    body = (
        1
        + _varint_size(_zz64(timestamp_delta))
        + _varint_size(_zz32(offset_delta))
        + _bytes_len(key)
        + _bytes_len(value)
        + _headers_size(headers)
    )
    return _varint_size(_zz32(body)) + body


# An upper bound on a record's size beyond its key, value and headers bytes:
# length (5) + attributes (1) + timestamp delta (10) + offset delta (5).
_MAX_RECORD_OVERHEAD = 21


def _write_varbytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out.append(1)  # zigzag(-1)
        return
    out += _encode_unsigned(_zz32(len(b)), 1 << 32, "length")
    out += b


def _check_range(v: int, lo: int, hi: int, what: str) -> None:
    if not lo <= v <= hi:
        raise ValueError(f"{what} {v} is outside [{lo}, {hi}]")


def _check_bytes(b: object, what: str) -> None:
    if b is not None and not isinstance(b, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes or None, not {type(b).__name__}")


class BatchBuilder:
    """Accumulates records for one partition and builds a v2 record batch.

    ``append`` adds one record; ``extend`` adds many from columns; ``build``
    returns the finished batch (compressed, with its CRC). Sizes are tracked as
    the uncompressed batch size, as Kafka's own producers do.
    """

    #: Bytes of the values and keys the last ``extend`` appended (a null counts 0).
    extended_bytes: int = 0

    def __init__(
        self,
        *,
        compression: int = 0,
        compression_level: int | None = None,
        max_bytes: int = 1048576,
        max_records: int = _MAX_RECORD_COUNT,
        timestamp_type: int = 0,
    ) -> None:
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if max_bytes <= RECORD_BATCH_OVERHEAD:
            raise ValueError(f"max_bytes must exceed {RECORD_BATCH_OVERHEAD}")
        if not 0 < max_records <= _MAX_RECORD_COUNT:
            raise ValueError("max_records must be in [1, 2**31-1]")
        if timestamp_type not in (0, 1):
            raise ValueError("timestamp_type must be 0 or 1")
        self.compression = compression
        self.compression_level = compression_level
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.timestamp_type = timestamp_type
        self.extended_bytes = 0  # bytes of values and keys the last extend() appended
        self._buf = bytearray()
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return self._count

    @property
    def size(self) -> int:
        """Uncompressed size of the batch so far, its 61-byte header included."""
        return RECORD_BATCH_OVERHEAD + len(self._buf)

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (-1 while empty)."""
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp (-1 while empty)."""
        return self._max_ts

    def would_overflow(
        self, key: bytes | None, value: bytes | None, headers: Headers | None = None
    ) -> bool:
        """Whether appending this record might not fit (a conservative estimate)."""
        if self._count >= self.max_records:
            return True
        est = _MAX_RECORD_OVERHEAD + _bytes_len(key) + _bytes_len(value) + _headers_size(headers)
        return self.size + est > self.max_bytes

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int:
        """Append one record; return its offset delta, or -1 if the batch is full.

        Raises:
            RecordTooLargeError: the record cannot fit even an empty batch.
            TypeError: key, value or a header has the wrong type.
        """
        _check_bytes(key, "key")
        _check_bytes(value, "value")
        _check_range(timestamp, -(1 << 63), (1 << 63) - 1, "timestamp")
        if self._count >= self.max_records:
            return -1
        base_ts = timestamp if self._count == 0 else self._base_ts
        ts_delta = timestamp - base_ts
        if not -(1 << 63) <= ts_delta < 1 << 63:
            raise ValueError(f"timestamp {timestamp} is too far from the batch's base")
        size = record_size(self._count, ts_delta, key, value, headers)
        if self.size + size > self.max_bytes:
            if self._count == 0:
                raise RecordTooLargeError(
                    f"a record of {size} bytes does not fit a batch of at most "
                    f"{self.max_bytes} bytes"
                )
            return -1
        self._write(size, ts_delta, key, value, headers)
        if self._count == 0:
            self._base_ts = timestamp
            self._max_ts = timestamp
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        return self._count - 1

    def _write(
        self,
        size: int,
        ts_delta: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
    ) -> None:
        out = self._buf
        body = _body_len(size)  # size counts the length prefix itself
        out += _encode_unsigned(_zz32(body), 1 << 32, "length")
        out.append(0)
        out += _encode_unsigned(_zz64(ts_delta), 1 << 64, "delta")
        out += _encode_unsigned(_zz32(self._count), 1 << 32, "delta")
        _write_varbytes(out, key)
        _write_varbytes(out, value)
        if not headers:
            out.append(0)
            return
        out += _encode_unsigned(_zz32(len(headers)), 1 << 32, "count")
        for name, hval in headers:
            _write_varbytes(out, name.encode())
            _write_varbytes(out, hval)

    def extend(
        self,
        values: Sequence[bytes | None] | BinaryColumn,
        keys: Sequence[bytes | None] | BinaryColumn | None = None,
        timestamps: Sequence[int] | Buffer | None = None,
        headers: Sequence[Headers | None] | None = None,
        *,
        start: int = 0,
        stop: int | None = None,
        timestamp: int | None = None,
    ) -> int:
        """Append ``values[start:stop]`` (with matching keys, timestamps, headers).

        Returns the index after the last record appended: ``stop`` when all
        fitted, less when the batch filled up first. Afterwards
        ``extended_bytes`` holds the bytes of the values and keys it appended
        (a null counts 0).

        Raises:
            RecordTooLargeError: the record at ``start`` cannot fit an empty batch.
            ValueError: the columns are shorter than ``stop``.
        """
        self.extended_bytes = 0
        n = len(values)
        stop = n if stop is None else stop
        if not 0 <= start <= stop <= n:
            raise ValueError(f"start={start}, stop={stop} outside a column of {n} values")
        for name, col in (("keys", keys), ("headers", headers)):
            if col is not None and len(col) < stop:
                raise ValueError(f"{name} has {len(col)} entries, fewer than stop={stop}")
        ts_list: Sequence[int] | None = None
        if timestamps is not None:
            ts_list = _timestamps_view(timestamps)
            if len(ts_list) < stop:
                raise ValueError(f"timestamps has {len(ts_list)} entries, fewer than {stop}")
        elif timestamp is None:
            timestamp = int(time.time() * 1000)
        payload = 0
        for i in range(start, stop):
            ts = ts_list[i] if ts_list is not None else timestamp
            assert ts is not None
            k = keys[i] if keys is not None else None
            h = headers[i] if headers is not None else None
            v = values[i]
            if self.append(ts, k, v, h) < 0:
                self.extended_bytes = payload
                return i
            if v is not None:
                payload += len(v)
            if k is not None:
                payload += len(k)
        self.extended_bytes = payload
        return stop

    def build(
        self,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """Return the finished batch: header, CRC-32C and (compressed) records.

        Raises:
            ValueError: the batch is empty.
        """
        if self._count == 0:
            raise ValueError("cannot build an empty record batch")
        _check_range(base_offset, -(1 << 63), (1 << 63) - 1, "base_offset")
        _check_range(producer_id, -(1 << 63), (1 << 63) - 1, "producer_id")
        _check_range(producer_epoch, -(1 << 15), (1 << 15) - 1, "producer_epoch")
        _check_range(base_sequence, -(1 << 31), (1 << 31) - 1, "base_sequence")
        _check_range(partition_leader_epoch, -(1 << 31), (1 << 31) - 1, "partition_leader_epoch")
        body: bytes | bytearray = self._buf
        if self.compression != COMPRESSION_NONE:
            body = _compression.compress(self.compression, body, self.compression_level)
        attributes = self.compression
        if self.timestamp_type:
            attributes |= _TIMESTAMP_TYPE_BIT
        if is_transactional:
            attributes |= _TRANSACTIONAL_BIT
        return _assemble(
            base_offset,
            partition_leader_epoch,
            attributes,
            self._count - 1,
            self._base_ts,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            self._count,
            body,
        )


def _body_len(size: int) -> int:
    """The body length of a record whose total size (prefix included) is ``size``."""
    for width in range(1, 6):
        body = size - width
        if _varint_size(_zz32(body)) == width:
            return body
    raise AssertionError(size)


def _timestamps_view(timestamps: Sequence[int] | Buffer) -> Sequence[int]:
    """Timestamps as a sequence: a list as is, a buffer read as native int64."""
    try:
        mv = memoryview(timestamps)  # type: ignore[arg-type]
    except TypeError:
        return timestamps  # type: ignore[return-value]
    if mv.itemsize != 8 and mv.format != "B":
        raise TypeError(f"timestamps buffer must hold int64 values, not {mv.format!r}")
    raw = mv.cast("B")
    if len(raw) % 8:
        raise ValueError("timestamps buffer is not a whole number of int64 values")
    return raw.cast("q").tolist()


def _assemble(
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    body: bytes | bytearray | memoryview,
) -> bytes:
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = _crc32c(body, _crc32c(tail))
    length = 49 + len(body)  # everything after the batchLength field
    if length > _INT32_MAX:
        raise ValueError("record batch exceeds 2 GiB")
    head = struct.pack(">qiiBI", base_offset, length, leader_epoch, 2, crc)
    return b"".join((head, tail, body))


def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a transaction marker batch (COMMIT=1 or ABORT=0) as a broker writes it."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"control_type must be 0 (abort) or 1 (commit), not {control_type}")
    _check_range(producer_id, -(1 << 63), (1 << 63) - 1, "producer_id")
    _check_range(producer_epoch, -(1 << 15), (1 << 15) - 1, "producer_epoch")
    _check_range(timestamp, -(1 << 63), (1 << 63) - 1, "timestamp")
    _check_range(coordinator_epoch, -(1 << 31), (1 << 31) - 1, "coordinator_epoch")
    _check_range(base_offset, -(1 << 63), (1 << 63) - 1, "base_offset")
    _check_range(partition_leader_epoch, -(1 << 31), (1 << 31) - 1, "partition_leader_epoch")
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    size = record_size(0, 0, key, value)
    out = bytearray()
    out += _encode_unsigned(_zz32(_body_len(size)), 1 << 32, "length")
    out += b"\x00\x00\x00"  # attributes, timestamp delta 0, offset delta 0
    _write_varbytes(out, key)
    _write_varbytes(out, value)
    out.append(0)
    return _assemble(
        base_offset,
        partition_leader_epoch,
        _TRANSACTIONAL_BIT | _CONTROL_BIT,
        0,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        -1,
        1,
        out,
    )


def _legacy_message(
    magic: int, offset: int, timestamp: int, attributes: int, key: Any, value: Any
) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(field))
            body += field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


def encode_legacy_message_set(
    messages: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    magic: int,
    compression: int = 0,
) -> bytes:
    """Encode (offset, timestamp, key, value) tuples as a magic 0 or 1 message set.

    With compression the messages are wrapped in one compressed message, as
    pre-0.11 producers wrote them (magic 1: relative inner offsets).
    """
    if magic not in (0, 1):
        raise ValueError("legacy magic must be 0 or 1")
    if not 0 <= compression <= 3:  # zstd needs magic 2
        raise ValueError(f"compression {compression} is not valid for magic {magic}")
    for offset, timestamp, _key, _value in messages:
        _check_range(offset, -(1 << 63), (1 << 63) - 1, "offset")
        _check_range(timestamp, -(1 << 63), (1 << 63) - 1, "timestamp")
    if compression == COMPRESSION_NONE:
        return b"".join(_legacy_message(magic, o, t, 0, k, v) for o, t, k, v in messages)
    if not messages:
        raise ValueError("a compressed message set needs at least one message")
    first = messages[0][0]
    inner = b"".join(
        _legacy_message(magic, (o - first) if magic == 1 else o, t, 0, k, v)
        for o, t, k, v in messages
    )
    wrapped = _compression.compress(compression, inner)
    last_offset = messages[-1][0]
    max_ts = max(t for _o, t, _k, _v in messages)
    return _legacy_message(magic, last_offset, max_ts, compression, None, wrapped)


class ProduceSet:
    """sarama's produce set: per topic and partition, the batches for one request."""

    def __init__(
        self,
        *,
        compression: int = 0,
        compression_level: int | None = None,
        max_batch_bytes: int = 1048576,
        max_batch_records: int = _MAX_RECORD_COUNT,
        max_request_bytes: int = 104857600,
        flush_bytes: int = 0,
        flush_records: int = 0,
    ) -> None:
        if max_request_bytes < max_batch_bytes:
            raise ValueError("max_request_bytes must be at least max_batch_bytes")
        self._opts = {
            "compression": compression,
            "compression_level": compression_level,
            "max_bytes": max_batch_bytes,
            "max_records": max_batch_records,
        }
        BatchBuilder(**self._opts)  # type: ignore[arg-type]  # validate once
        self.max_request_bytes = max_request_bytes
        self.flush_bytes = flush_bytes
        self.flush_records = flush_records
        self._batches: dict[tuple[str, int], BatchBuilder] = {}
        self._bytes = 0
        self._records = 0

    @property
    def buffered_bytes(self) -> int:
        """Uncompressed bytes buffered over all partitions (batch headers included)."""
        return self._bytes

    @property
    def buffered_records(self) -> int:
        """Records buffered over all partitions."""
        return self._records

    def __len__(self) -> int:
        return len(self._batches)

    def would_overflow(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> bool:
        """Whether this record might not fit the partition's batch or the request."""
        est = _MAX_RECORD_OVERHEAD + _bytes_len(key) + _bytes_len(value) + _headers_size(headers)
        b = self._batches.get((topic, partition))
        if b is None:
            return self._bytes + RECORD_BATCH_OVERHEAD + est > self.max_request_bytes
        return self._bytes + est > self.max_request_bytes or b.would_overflow(key, value, headers)

    def ready_to_flush(self) -> bool:
        """Whether the buffered records should be sent now (sarama's readyToFlush)."""
        if self._records == 0:
            return False
        if self.flush_bytes == 0 and self.flush_records == 0:
            return True
        if self.flush_records and self._records >= self.flush_records:
            return True
        return bool(self.flush_bytes and self._bytes >= self.flush_bytes)

    def add(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int:
        """Add a record; return its offset delta in the batch, or -1 if the batch is full.

        Raises:
            RecordTooLargeError: the record cannot fit even an empty batch.
        """
        tp = (topic, partition)
        b = self._batches.get(tp)
        fresh = b is None
        if b is None:
            b = BatchBuilder(**self._opts)  # type: ignore[arg-type]
        before = b.size
        idx = b.append(timestamp, key, value, headers)
        if idx < 0:
            return -1
        if fresh:
            self._batches[tp] = b
            before = 0
        self._bytes += b.size - before
        self._records += 1
        return idx

    def batch(self, topic: str, partition: int) -> BatchBuilder | None:
        """The partition's batch being filled, if any."""
        return self._batches.get((topic, partition))

    def drain(self) -> list[tuple[str, int, BatchBuilder]]:
        """Take every non-empty batch out, leaving the set empty."""
        out = [(t, p, b) for (t, p), b in self._batches.items()]
        self._batches = {}
        self._bytes = 0
        self._records = 0
        return out


# -- per-record staging -------------------------------------------------------

_NO_RUN = object()  # no run open: equal to no topic
# A timestamp a run's int64 column can hold; others go one by one (and fail alone).
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def gc_track(obj: object) -> None:
    """Have the cyclic garbage collector track ``obj`` again, if it does not.

    Nothing to do here: this twin's ``RecordStager.send_async`` leaves its
    futures tracked (only the compiled one untracks them).
    """


class StagerLock:
    """A lock for :class:`RecordStager`'s runs (the compiled one's takes no call when free).

    Here a ``threading.Lock`` with the same methods: ``with``,
    :meth:`acquire`, :meth:`release`, :meth:`locked`; not reentrant.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        """Hold it; without ``blocking``, only when it is free. Whether it is now held."""
        return self._lock.acquire(blocking)

    def release(self) -> None:
        """Give it back.

        Raises:
            RuntimeError: it is not held.
        """
        self._lock.release()

    def locked(self) -> bool:
        """Whether a thread holds it."""
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class RecordStager:
    """Records staged one at a time in any thread, for a producer running in another.

    The per-record half of ``pykaf.sync.Producer``: ``produce`` and
    ``send_async`` append a plain record (a bytes value and key, or no key;
    no headers or timestamp; both within ``small`` bytes) to the open run of
    records for its topic and partition (of records without ``on_delivery``,
    with one, or of ``send_async`` records; keyed or not) under ``lock`` and
    return; any other record, or one that opens a run, goes to the slow path
    the owner passed in (``stage`` / ``stage_future``), which opens runs
    through :meth:`open_run`, :meth:`open_callback_run` or
    :meth:`open_future_run`. ``poll(0)`` returns 0 at once while ``ready`` is
    empty and calls ``poll_wait`` otherwise. ``queued`` counts the records
    staged, ``accepted`` those the loop has taken over, ``futures`` the
    ``send_async`` records among them; past ``max_pending`` records in
    between, every call takes the slow path (which waits for room).
    ``joined_bytes`` adds up the values and keys of the records joined to
    runs here (not those the owner opened runs with).
    """

    def __init__(
        self,
        lock: Any,
        stage: Callable[..., None],
        stage_future: Callable[..., Any],
        poll_wait: Callable[[float | None], int],
        future_type: Callable[[Any], Any],
        ready: Any,
        *,
        small: int,
        max_pending: int,
    ) -> None:
        self.reset_lock(lock)
        self._stage = stage
        self._stage_future = stage_future
        self._poll_wait = poll_wait
        self.future_type = future_type
        self.ready = ready
        self.small = small
        self.max_pending = max_pending
        self.queued = 0
        self.accepted = 0
        self.futures = 0
        self.joined_bytes = 0
        # The open run: its kind (0 none, 1 plain, 2 with callbacks, 3
        # futures), where it goes, its lists (keys None for a keyless run).
        self._kind = 0
        self._topic: object = _NO_RUN
        self._partition: int | None = None
        self._values: list[bytes] = []
        self._keys: list[bytes] | None = None
        self._targets: list[Any] | None = None

    def reset_lock(self, lock: Any) -> None:
        """Use ``lock`` from now on (a fresh one in a forked child)."""
        self.lock = lock

    def _open(
        self,
        kind: int,
        topic: object,
        partition: int | None,
        values: list[bytes],
        keys: list[bytes] | None,
        stamps: list[int] | None,
        targets: list[Any] | None,
    ) -> None:
        self._kind = kind
        self._topic = topic
        self._partition = partition
        self._values = values
        self._keys = keys
        self._stamps = stamps
        self._targets = targets

    def open_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None:
        """Under ``lock``: records without ``on_delivery`` join ``values`` (``keys``, ...)."""
        self._open(1, topic, partition, values, keys, timestamps, None)

    def open_callback_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        callbacks: list[Any],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None:
        """Under ``lock``: records with ``on_delivery`` join ``values``, it ``callbacks``."""
        self._open(2, topic, partition, values, keys, timestamps, callbacks)

    def open_future_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        futures: list[Any],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None:
        """Under ``lock``: ``send_async`` records join ``values``, their futures ``futures``."""
        self._open(3, topic, partition, values, keys, timestamps, futures)

    def close_runs(self) -> None:
        """Under ``lock``: no open run; the next record takes the slow path."""
        self._open(0, _NO_RUN, None, [], None, None, None)

    def _plain(self, key: Any, value: Any, partition: Any, headers: Any, timestamp: Any) -> bool:
        """Whether the record may join a run (without looking at the run)."""
        return (
            headers is None
            and (
                timestamp is None
                or (type(timestamp) is int and _INT64_MIN <= timestamp <= _INT64_MAX)
            )
            and type(value) is bytes
            and len(value) <= self.small
            and (key is None or (type(key) is bytes and len(key) <= self.small))
            and (partition is None or type(partition) is int)
            and self.queued - self.accepted < self.max_pending
        )

    def _join(
        self,
        kind: int,
        topic: str,
        partition: int | None,
        value: bytes,
        key: Any,
        timestamp: int | None,
        target: Any,
    ) -> bool:
        """Under the lock: append the record to the open run if it is of it."""
        if (
            self._kind != kind
            or (self._keys is None) != (key is None)
            or (self._stamps is None) != (timestamp is None)
        ):
            return False
        if not (topic == self._topic and partition == self._partition):
            return False
        self._values.append(value)
        self.joined_bytes += len(value)
        if key is not None:
            assert self._keys is not None
            self._keys.append(key)
            self.joined_bytes += len(key)
        if timestamp is not None:
            assert self._stamps is not None
            self._stamps.append(timestamp)
        if target is not None:
            assert self._targets is not None
            self._targets.append(target)
        self.queued += 1
        return True

    def produce(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        on_delivery: Callable[[BaseException | None, Any], object] | None = None,
    ) -> None:
        """Stage one record; see ``pykaf.sync.Producer.produce``."""
        if self._plain(key, value, partition, headers, timestamp):
            with self.lock:
                kind = 1 if on_delivery is None else 2
                if self._join(kind, topic, partition, value, key, timestamp, on_delivery):  # type: ignore[arg-type]
                    return
        self._stage(topic, value, key, partition, headers, timestamp, on_delivery)

    def send_async(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Stage one record with a future; see ``pykaf.sync.Producer.send_async``."""
        future = self.future_type(self)
        if self._plain(key, value, partition, headers, timestamp):
            with self.lock:
                if self._join(3, topic, partition, value, key, timestamp, future):  # type: ignore[arg-type]
                    self.futures += 1
                    return future
        return self._stage_future(future, topic, value, key, partition, headers, timestamp, timeout)

    def poll(self, timeout: float | None = 0) -> int:
        """Run ready callbacks; see ``pykaf.sync.Producer.poll``."""
        if timeout == 0 and not self.ready:
            return 0
        return self._poll_wait(timeout)
