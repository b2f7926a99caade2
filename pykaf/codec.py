"""Kafka's record formats: varints, record batches v2, legacy message sets.

This public module re-exports the compiled codec ``pykaf._codec`` or, when
``PYKAF_NO_EXTENSIONS=1`` is set (or the extension is missing), its pure-Python
twin ``pykaf._codec_py``. Both have the same names, signatures and output.
``IMPLEMENTATION`` says which one is active.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pykaf._column_batch import ColumnBatch
from pykaf._columns import BinaryColumn

if os.environ.get("PYKAF_NO_EXTENSIONS") == "1":
    from pykaf import _codec_py as _impl
else:
    try:
        from pykaf import _codec as _impl  # type: ignore[no-redef]
    except ImportError:  # not compiled (e.g. a source checkout without a build)
        from pykaf import _codec_py as _impl

IMPLEMENTATION: str = _impl.IMPLEMENTATION
"""The active implementation: ``"cython"`` (``pykaf._codec``) or ``"python"`` (the twin)."""

COMPRESSION_NONE = _impl.COMPRESSION_NONE
"""Kafka's compression code for uncompressed records (0)."""

COMPRESSION_GZIP = _impl.COMPRESSION_GZIP
"""Kafka's compression code for gzip (1)."""

COMPRESSION_SNAPPY = _impl.COMPRESSION_SNAPPY
"""Kafka's compression code for snappy, xerial framing (2)."""

COMPRESSION_LZ4 = _impl.COMPRESSION_LZ4
"""Kafka's compression code for lz4 frames (3)."""

COMPRESSION_ZSTD = _impl.COMPRESSION_ZSTD
"""Kafka's compression code for zstd (4)."""

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
"""The compression names, indexed by their codes (see ``compression_code``)."""

TIMESTAMP_CREATE_TIME = _impl.TIMESTAMP_CREATE_TIME
"""A batch's timestamp type: set by the producer (0)."""

TIMESTAMP_LOG_APPEND_TIME = _impl.TIMESTAMP_LOG_APPEND_TIME
"""A batch's timestamp type: set by the broker on append (1)."""

CONTROL_ABORT = _impl.CONTROL_ABORT
"""A transaction marker's control type: the transaction aborted (0)."""

CONTROL_COMMIT = _impl.CONTROL_COMMIT
"""A transaction marker's control type: the transaction committed (1)."""

RECORD_BATCH_OVERHEAD = _impl.RECORD_BATCH_OVERHEAD
"""The bytes of a v2 record batch's header, before its records (61)."""

NO_PRODUCER_ID = _impl.NO_PRODUCER_ID
"""The producer id of a batch from a producer that is not idempotent (-1)."""

KEEP_ALL = _impl.KEEP_ALL
"""Offset bounds ``(first, last)`` that keep every record of a decoded batch."""

KEEP_NONE = _impl.KEEP_NONE
"""Offset bounds ``(first, last)`` that keep no record."""

# The classes and functions of the active implementation. Type checkers and the
# API reference (griffe) read them from the pure-Python twin, whose interface
# (pykaf/_codec.pyi) and docstrings the compiled codec shares.
if TYPE_CHECKING:
    from pykaf._codec_py import (
        BatchBuilder,
        ProduceSet,
        Record,
        RecordBatch,
        RecordSet,
        RecordStager,
        crc32c,
        decode_batches,
        decode_columns,
        decode_record_set,
        decode_uvarint,
        decode_uvarlong,
        decode_varint,
        decode_varlong,
        encode_control_batch,
        encode_legacy_message_set,
        encode_uvarint,
        encode_uvarlong,
        encode_varint,
        encode_varlong,
        fnv1a_32,
        murmur2,
        partition_order,
        record_size,
        take,
    )

    # Not in __all__: the partition consumer's base class, the sync
    # consumer's per-record take, the sync producer's futures' tracking and
    # the staging's lock, not public API.
    from pykaf._codec_py import (
        LockedTake as LockedTake,
    )
    from pykaf._codec_py import (
        RecordCursor as RecordCursor,
    )
    from pykaf._codec_py import (
        StagerLock as StagerLock,
    )
    from pykaf._codec_py import (
        gc_track as gc_track,
    )
else:
    encode_uvarint = _impl.encode_uvarint
    decode_uvarint = _impl.decode_uvarint
    encode_uvarlong = _impl.encode_uvarlong
    decode_uvarlong = _impl.decode_uvarlong
    encode_varint = _impl.encode_varint
    decode_varint = _impl.decode_varint
    encode_varlong = _impl.encode_varlong
    decode_varlong = _impl.decode_varlong
    crc32c = _impl.crc32c
    murmur2 = _impl.murmur2
    fnv1a_32 = _impl.fnv1a_32
    partition_order = _impl.partition_order
    take = _impl.take
    Record = _impl.Record
    RecordBatch = _impl.RecordBatch
    RecordSet = _impl.RecordSet
    RecordCursor = _impl.RecordCursor
    LockedTake = _impl.LockedTake
    gc_track = _impl.gc_track
    decode_record_set = _impl.decode_record_set
    decode_batches = _impl.decode_batches
    decode_columns = _impl.decode_columns
    record_size = _impl.record_size
    BatchBuilder = _impl.BatchBuilder
    ProduceSet = _impl.ProduceSet
    encode_control_batch = _impl.encode_control_batch
    encode_legacy_message_set = _impl.encode_legacy_message_set
    RecordStager = _impl.RecordStager
    StagerLock = _impl.StagerLock


def compression_code(name: str | int | None) -> int:
    """Turn a compression name ("lz4") or code (3) into Kafka's code.

    Raises:
        ValueError: for an unknown name or code.
    """
    if name is None:
        return COMPRESSION_NONE
    if isinstance(name, int):
        if 0 <= name < len(COMPRESSION_NAMES):
            return name
        raise ValueError(f"unknown compression code {name}")
    try:
        return COMPRESSION_NAMES.index(name.lower())
    except ValueError:
        raise ValueError(
            f"unknown compression {name!r}; expected one of {', '.join(COMPRESSION_NAMES)}"
        ) from None


__all__ = [
    "COMPRESSION_GZIP",
    "COMPRESSION_LZ4",
    "COMPRESSION_NAMES",
    "COMPRESSION_NONE",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_ZSTD",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "IMPLEMENTATION",
    "KEEP_ALL",
    "KEEP_NONE",
    "NO_PRODUCER_ID",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "BatchBuilder",
    "BinaryColumn",
    "ColumnBatch",
    "ProduceSet",
    "Record",
    "RecordBatch",
    "RecordSet",
    "RecordStager",
    "compression_code",
    "crc32c",
    "decode_batches",
    "decode_columns",
    "decode_record_set",
    "decode_uvarint",
    "decode_uvarlong",
    "decode_varint",
    "decode_varlong",
    "encode_control_batch",
    "encode_legacy_message_set",
    "encode_uvarint",
    "encode_uvarlong",
    "encode_varint",
    "encode_varlong",
    "fnv1a_32",
    "murmur2",
    "partition_order",
    "record_size",
    "take",
]
