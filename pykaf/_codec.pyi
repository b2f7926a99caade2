"""The record codec's interface, shared by ``pykaf._codec`` and ``pykaf._codec_py``.

Both modules define exactly these names with these signatures and produce
byte-identical output; ``pykaf.codec`` re-exports whichever one is active.
Every decoder raises :class:`pykaf.errors.CorruptRecordError` on malformed
input; encoders raise ``ValueError``/``TypeError`` on bad arguments and
:class:`pykaf.errors.RecordTooLargeError` when one record cannot fit a batch.
"""

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeAlias

from typing_extensions import Buffer

from pykaf._column_batch import ColumnBatch
from pykaf._columns import BinaryColumn

Header: TypeAlias = tuple[str, bytes | None]
Headers: TypeAlias = Sequence[tuple[str, bytes | None]]

IMPLEMENTATION: Final[str]  # "cython" or "python"

COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4
TIMESTAMP_CREATE_TIME: Final = 0
TIMESTAMP_LOG_APPEND_TIME: Final = 1
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
RECORD_BATCH_OVERHEAD: Final = 61  # bytes of a v2 batch header
NO_PRODUCER_ID: Final = -1

# -- varints (Kafka limits: 5 bytes for 32-bit, 10 bytes for 64-bit) --------
def encode_uvarint(value: int) -> bytes: ...
def decode_uvarint(data: Buffer, pos: int = 0) -> tuple[int, int]: ...
def encode_uvarlong(value: int) -> bytes: ...
def decode_uvarlong(data: Buffer, pos: int = 0) -> tuple[int, int]: ...
def encode_varint(value: int) -> bytes: ...
def decode_varint(data: Buffer, pos: int = 0) -> tuple[int, int]: ...
def encode_varlong(value: int) -> bytes: ...
def decode_varlong(data: Buffer, pos: int = 0) -> tuple[int, int]: ...
def crc32c(data: Buffer, value: int = 0) -> int: ...

# -- partitioner hashes (crc32 for the "consistent" partitioner is zlib.crc32) --
def murmur2(data: Buffer) -> int:
    """Kafka's murmur2 (Java ``Utils.murmur2``): signed 32-bit, seed 0x9747b28c."""

def fnv1a_32(data: Buffer) -> int:
    """32-bit FNV-1a (offset basis 2166136261, prime 16777619), unsigned."""

def partition_order(
    keys: Sequence[bytes | None] | BinaryColumn, count: int, parts: Sequence[int] | None = None
) -> tuple[list[int], list[int]]:
    """Group records by partition (a stable counting sort); ``(order, bounds)``.

    Without ``parts``, record ``i``'s partition is Kafka's default for key
    ``keys[i]``: ``(murmur2(key) & 0x7fffffff) % count`` (no null key); with
    ``parts``, ``parts[i]``. Partition ``p``'s records are
    ``order[bounds[p]:bounds[p + 1]]``. ValueError for a null key, a
    partition out of range or ``count`` below 1.
    """

def take(column: Sequence[Any] | BinaryColumn, order: Sequence[int]) -> list[Any] | BinaryColumn:
    """``column``'s elements in ``order``: a BinaryColumn for a BinaryColumn, else a list."""

# -- decoded objects ---------------------------------------------------------
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    attributes: int
    # Where a decoded record came from (as given to the decoder), not compared by ==.
    topic: str | None  # None unless given
    partition: int  # -1 unless given
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 unknown (magic 0)
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
    ) -> None: ...
    @property
    def headers(self) -> list[Header]: ...

class RecordBatch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int  # a bit field, read unsigned: 0..65535 (magic 2), 0..255 (legacy)
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: list[Record]
    control_type_id: int  # -1 unless a control batch
    coordinator_epoch: int  # -1 unless a transaction marker
    size: int  # bytes this batch occupied in the input
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def compression(self) -> str: ...  # "none" "gzip" "snappy" "lz4" "zstd"
    @property
    def compression_type(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def control_type(self) -> str | None: ...  # "commit", "abort" or None

class RecordSet:
    batches: list[RecordBatch]
    incomplete: bool  # a partial batch follows the complete ones
    consumed: int  # bytes taken by the complete batches
    partial_size: int  # total size the partial batch declares (0 if none)

def decode_record_set(
    data: Buffer, *, check_crc: bool = True, topic: str | None = None, partition: int = -1
) -> RecordSet: ...
def decode_batches(
    data: Buffer, *, check_crc: bool = True, topic: str | None = None, partition: int = -1
) -> list[RecordBatch]: ...

# -- columnar decoding ---------------------------------------------------------
#: ``select``'s bounds (inclusive) that keep every record of a batch, and none.
KEEP_ALL: Final[tuple[int, int]]
KEEP_NONE: Final[tuple[int, int]]

def decode_columns(
    data: Buffer,
    *,
    check_crc: bool = True,
    topic: str | None = None,
    partition: int = -1,
    select: Callable[[RecordBatch], tuple[int, int]] | None = None,
) -> tuple[ColumnBatch, list[RecordBatch], list[int], list[int]]:
    """Decode every complete batch straight into columns (no ``Record`` per record).

    Same checks and errors as ``decode_batches``. ``select(batch)`` is called
    per batch once it is decoded (``batch.records`` is empty) and returns the
    inclusive offset bounds of the batch's records to keep; without it every
    record is kept, control records included. Returns the columns, the
    batches, and per batch the records kept and those above the upper bound.
    ``RecordBatchTooLargeError`` when keys, values or headers pass 2 GiB.
    """

# -- encoding ----------------------------------------------------------------
def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None = None,
) -> int: ...

class BatchBuilder:
    compression: int
    compression_level: int | None
    max_bytes: int
    max_records: int
    timestamp_type: int
    @property
    def extended_bytes(self) -> int: ...
    def __init__(
        self,
        *,
        compression: int = 0,
        compression_level: int | None = None,
        max_bytes: int = 1048576,
        max_records: int = 2147483647,
        timestamp_type: int = 0,
    ) -> None: ...
    @property
    def record_count(self) -> int: ...
    @property
    def size(self) -> int: ...  # uncompressed batch size so far, header included
    @property
    def base_timestamp(self) -> int: ...  # -1 while empty
    @property
    def max_timestamp(self) -> int: ...  # -1 while empty
    def would_overflow(
        self, key: bytes | None, value: bytes | None, headers: Headers | None = None
    ) -> bool: ...
    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int: ...
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
    ) -> int: ...
    def build(
        self,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
    ) -> bytes: ...

def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes: ...
def encode_legacy_message_set(
    messages: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    magic: int,
    compression: int = 0,
) -> bytes: ...

class ProduceSet:
    max_request_bytes: int
    flush_bytes: int
    flush_records: int
    def __init__(
        self,
        *,
        compression: int = 0,
        compression_level: int | None = None,
        max_batch_bytes: int = 1048576,
        max_batch_records: int = 2147483647,
        max_request_bytes: int = 104857600,
        flush_bytes: int = 0,
        flush_records: int = 0,
    ) -> None: ...
    @property
    def buffered_bytes(self) -> int: ...
    @property
    def buffered_records(self) -> int: ...
    def __len__(self) -> int: ...  # partitions holding records
    def would_overflow(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> bool: ...
    def ready_to_flush(self) -> bool: ...
    def add(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int: ...
    def batch(self, topic: str, partition: int) -> BatchBuilder | None: ...
    def drain(self) -> list[tuple[str, int, BatchBuilder]]: ...

class RecordCursor:
    """Decoded records and the index of the next one: a reader's per-record side."""

    _local: list[Record]
    _next: int
    def __aiter__(self) -> RecordCursor: ...
    def __anext__(self) -> Awaitable[Record]: ...
    def next_nowait(self) -> Record | None: ...

class LockedTake:
    """A thread's ``poll()`` outside trio: the next record of ``cursor``, under a lock."""

    cursor: RecordCursor | None
    def __init__(self, lock: Any, general: Callable[[float | None], Record | None]) -> None: ...
    def __call__(self, timeout: float | None = None) -> Record | None: ...

def gc_track(obj: object) -> None:
    """Have the cyclic garbage collector track ``obj`` again, if it does not."""

class StagerLock:
    """A lock for :class:`RecordStager`'s runs (the compiled one's takes no call when free)."""

    def acquire(self, blocking: bool = True) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: object) -> None: ...

class RecordStager:
    lock: Any
    future_type: Callable[[Any], Any]
    ready: Any
    queued: int
    accepted: int
    futures: int
    joined_bytes: int
    small: int
    max_pending: int
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
    ) -> None: ...
    def reset_lock(self, lock: Any) -> None: ...
    def open_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None: ...
    def open_callback_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        callbacks: list[Any],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None: ...
    def open_future_run(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        futures: list[Any],
        keys: list[bytes] | None = None,
        timestamps: list[int] | None = None,
    ) -> None: ...
    def close_runs(self) -> None: ...
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
    ) -> None: ...
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
    ) -> Any: ...
    def poll(self, timeout: float | None = 0) -> int: ...
