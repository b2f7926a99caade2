"""Decoded records as columns: what ``next_batch(columnar=True)`` hands out.

A :class:`ColumnBatch` holds one decoded piece of a partition's fetch answer as
a handful of contiguous buffers in Apache Arrow's layouts, with no Python
object per record. :meth:`ColumnBatch.to_arrow` wraps the same buffers in a
``pyarrow.RecordBatch`` without copying them.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pykaf._columns import BinaryColumn
from pykaf.errors import MissingDependencyError

if TYPE_CHECKING:
    from typing_extensions import Buffer


class _RecordLike(Protocol):
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None

    @property
    def headers(self) -> list[tuple[str, bytes | None]]: ...


#: The field names and order of :meth:`ColumnBatch.to_arrow`'s record batch.
ARROW_FIELDS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")


class ColumnBatch:
    """Records of one partition as columns, in offset order (Arrow's memory layout).

    ``len(batch)`` records; record ``i`` has offset ``batch.offsets[i]``,
    timestamp ``batch.timestamps[i]`` (ms) of type ``batch.timestamp_types[i]``,
    key ``batch.key(i)``, value ``batch.value(i)`` and headers ``batch.headers(i)``.

    The buffers are read-only and owned by the batch: they stay valid as long
    as the batch, or any view or Arrow array made from them, is alive. They
    are never reused for later records.

    Attributes:
        topic, partition: where the records come from.
        offsets: the records' offsets, a memoryview of native int64 (format ``"q"``).
        timestamps: their timestamps in ms since the epoch, native int64. A
            LogAppendTime batch gives every record the batch's time; a magic 0
            (pre-0.10) message has -1.
        timestamp_types: what each timestamp is, native int8 (format ``"b"``):
            0 CreateTime (the producer's), 1 LogAppendTime (the broker's), -1
            none (a magic 0 message); ``Record.timestamp_type``'s values.
        keys, values: ``BinaryColumn`` objects: int32 offsets
            (``len + 1`` of them), one data buffer, and a validity bitmap (least
            significant bit first, 0 for a null) or None when nothing is null.
        header_offsets: int32, ``len + 1`` entries: record ``i``'s headers are
            entries ``header_offsets[i]`` to ``header_offsets[i + 1]`` of
            ``header_keys`` (UTF-8 names, never null) and ``header_values``.
        next_offset: the offset to read after this batch: the consumer's
            position once the batch is handed out (past any control records
            or aborted transactions it skipped); -1 when not known (a batch
            decoded outside a consumer).
    """

    __slots__ = (
        "header_keys",
        "header_offsets",
        "header_values",
        "keys",
        "next_offset",
        "offsets",
        "partition",
        "timestamp_types",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(
        self,
        topic: str | None,
        partition: int,
        offsets: Buffer,
        timestamps: Buffer,
        timestamp_types: Buffer,
        keys: BinaryColumn,
        values: BinaryColumn,
        header_offsets: Buffer,
        header_keys: BinaryColumn,
        header_values: BinaryColumn,
        next_offset: int = -1,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets = memoryview(offsets).toreadonly().cast("B").cast("q")
        self.timestamps = memoryview(timestamps).toreadonly().cast("B").cast("q")
        self.timestamp_types = memoryview(timestamp_types).toreadonly().cast("B").cast("b")
        self.keys = keys
        self.values = values
        self.header_offsets = memoryview(header_offsets).toreadonly().cast("B").cast("i")
        self.header_keys = header_keys
        self.header_values = header_values
        self.next_offset = next_offset
        n = len(self.offsets)
        if not (len(self.timestamps) == len(self.timestamp_types) == len(keys) == len(values) == n):
            raise ValueError("columns of different lengths")
        if len(self.header_offsets) != n + 1:
            raise ValueError("header_offsets must hold one entry more than the records")
        if len(header_keys) != len(header_values):
            raise ValueError("header keys and values of different lengths")

    def __len__(self) -> int:
        return len(self.offsets)

    def key(self, i: int) -> bytes | None:
        """Record ``i``'s key as bytes (a copy), or None."""
        return self.keys[i]

    def value(self, i: int) -> bytes | None:
        """Record ``i``'s value as bytes (a copy), or None."""
        return self.values[i]

    def headers(self, i: int) -> list[tuple[str, bytes | None]]:
        """Record ``i``'s headers as ``(name, value)`` pairs, in order."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        names, values = self.header_keys, self.header_values
        out = []
        for j in range(self.header_offsets[i], self.header_offsets[i + 1]):
            name = names[j]
            out.append(("" if name is None else name.decode(), values[j]))
        return out

    @property
    def has_headers(self) -> bool:
        """Whether any record of the batch has a header."""
        return len(self.header_keys) > 0

    def to_arrow(self) -> Any:
        """The batch as a ``pyarrow.RecordBatch``, sharing these buffers (no copy).

        Columns (:data:`ARROW_FIELDS`): ``offset`` int64, ``timestamp``
        ``timestamp[ms, tz=UTC]``, ``timestamp_type`` int8 (0 CreateTime, 1
        LogAppendTime, -1 none), ``key`` and ``value`` binary, ``headers``
        ``list<struct<key: string, value: binary>>``. The schema's metadata
        holds the topic and partition.

        Raises:
            MissingDependencyError: pyarrow is not installed
                (``pip install 'pykaf[arrow]'``).
        """
        try:
            import pyarrow as pa
        except ImportError as exc:
            raise MissingDependencyError(
                "ColumnBatch.to_arrow() needs pyarrow: pip install 'pykaf[arrow]'"
            ) from exc
        n = len(self)
        buf = pa.py_buffer
        hk, hv = self.header_keys, self.header_values
        entries = pa.StructArray.from_arrays(
            [_arrow_binary(pa, pa.string(), hk), _arrow_binary(pa, pa.binary(), hv)],
            names=["key", "value"],
        )
        headers = pa.Array.from_buffers(
            pa.list_(entries.type), n, [None, buf(self.header_offsets)], 0, children=[entries]
        )
        columns = [
            pa.Array.from_buffers(pa.int64(), n, [None, buf(self.offsets)], 0),
            pa.Array.from_buffers(pa.timestamp("ms", tz="UTC"), n, [None, buf(self.timestamps)], 0),
            pa.Array.from_buffers(pa.int8(), n, [None, buf(self.timestamp_types)], 0),
            _arrow_binary(pa, pa.binary(), self.keys),
            _arrow_binary(pa, pa.binary(), self.values),
            headers,
        ]
        metadata = {"topic": self.topic or "", "partition": str(self.partition)}
        return pa.RecordBatch.from_arrays(
            columns,
            schema=pa.schema(
                list(zip(ARROW_FIELDS, (c.type for c in columns), strict=True)), metadata=metadata
            ),
        )

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        """The Arrow PyCapsule interface: the batch as a struct array (via :meth:`to_arrow`).

        Lets Arrow-aware libraries (``pyarrow.record_batch(batch)``, Polars,
        DuckDB...) take a ColumnBatch directly, without a copy.
        """
        capsules: tuple[object, object] = self.to_arrow().__arrow_c_array__(requested_schema)
        return capsules

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """The Arrow PyCapsule stream interface: a stream of this one batch."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    @classmethod
    def from_records(
        cls,
        records: Sequence[_RecordLike],
        *,
        topic: str | None = None,
        partition: int = -1,
        next_offset: int = -1,
    ) -> ColumnBatch:
        """Pack decoded records into columns (a copy of every key, value and header)."""
        offsets = array.array("q", (r.offset for r in records))
        timestamps = array.array("q", (r.timestamp for r in records))
        timestamp_types = array.array("b", (r.timestamp_type for r in records))
        header_offsets = array.array("i", [0])
        names: list[bytes | None] = []
        header_values: list[bytes | None] = []
        for r in records:
            for name, value in r.headers:
                names.append(name.encode())
                header_values.append(value)
            header_offsets.append(len(names))
        return cls(
            topic,
            partition,
            offsets,
            timestamps,
            timestamp_types,
            _pack([r.key for r in records]),
            _pack([r.value for r in records]),
            header_offsets,
            _pack(names),
            _pack(header_values),
            next_offset,
        )

    def __repr__(self) -> str:
        first = self.offsets[0] if len(self) else None
        return (
            f"<ColumnBatch {self.topic}/{self.partition} records={len(self)} "
            f"first_offset={first} next_offset={self.next_offset}>"
        )


def _pack(values: Iterable[bytes | None]) -> BinaryColumn:
    """A read-only column of ``values`` (as the decoder's columns are)."""
    c = BinaryColumn.from_values(list(values))
    validity = None if c.validity is None else c.validity.toreadonly()
    return BinaryColumn(c.offsets.toreadonly(), c.data.toreadonly(), validity)


def _arrow_binary(pa: Any, typ: Any, column: BinaryColumn) -> Any:
    """A pyarrow binary/string array over ``column``'s buffers (no copy)."""
    n = len(column)
    validity = None
    nulls = 0
    if column.validity is not None:
        validity = pa.py_buffer(column.validity)
        nulls = -1  # let Arrow count them
    offsets = column.offsets
    return pa.Array.from_buffers(
        typ,
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(column.data)],
        nulls,
        column.offset,
    )


__all__ = ["ARROW_FIELDS", "ColumnBatch"]
