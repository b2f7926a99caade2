"""Columnar inputs for the bulk encode path: binary values in Arrow's layout.

A :class:`BinaryColumn` lets ``BatchBuilder.extend`` read many values from two
contiguous buffers (offsets and data, plus an optional validity bitmap) without
a Python object per value. This is how Spark's Arrow batches reach the codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Buffer as _Buffer


class BinaryColumn:
    """A column of ``bytes | None`` values stored as Arrow stores binary arrays.

    Element ``i`` is ``data[offsets[offset + i] : offsets[offset + i + 1]]``, or
    ``None`` when bit ``offset + i`` of ``validity`` (least significant bit
    first, as Arrow orders it) is 0.

    Args:
        offsets: native-endian int32 offsets (int64 when ``large`` is true),
            one more than the number of physical elements.
        data: the concatenated value bytes.
        validity: an optional bitmap; ``None`` means every value is present.
        offset: the logical start within ``offsets`` (Arrow's array offset).
        length: the number of logical elements; defaults to all that remain.
        large: whether ``offsets`` holds int64 (Arrow's large_binary).

    Raises:
        ValueError: if the buffers are too small for ``offset`` and ``length``,
            or the first and last offsets are outside ``data``. Interior
            offsets are checked where each element is read (indexing and
            ``BatchBuilder.extend`` raise ValueError), not here: that would
            cost a pass over the whole column.
    """

    __slots__ = ("data", "large", "length", "offset", "offsets", "validity")

    def __init__(
        self,
        offsets: _Buffer,
        data: _Buffer,
        validity: _Buffer | None = None,
        *,
        offset: int = 0,
        length: int | None = None,
        large: bool = False,
    ) -> None:
        width = 8 if large else 4
        raw = memoryview(offsets).cast("B")
        if len(raw) % width:
            raise ValueError(f"offsets buffer is not a whole number of int{width * 8}")
        self.offsets = raw.cast("q" if large else "i")
        self.data = memoryview(data).cast("B")
        self.validity = None if validity is None else memoryview(validity).cast("B")
        self.large = large
        physical = len(self.offsets) - 1
        if offset < 0 or offset > max(physical, 0):
            raise ValueError(f"offset {offset} outside a column of {physical} elements")
        self.offset = offset
        self.length = physical - offset if length is None else length
        if self.length < 0 or offset + self.length > physical:
            raise ValueError(f"length {self.length} at offset {offset} exceeds {physical} elements")
        if self.validity is not None and len(self.validity) * 8 < offset + self.length:
            raise ValueError("validity bitmap is shorter than the column")
        if self.length:
            lo = self.offsets[offset]
            hi = self.offsets[offset + self.length]
            if lo < 0 or hi > len(self.data) or lo > hi:
                raise ValueError("offsets point outside the data buffer")

    @classmethod
    def from_values(cls, values: Sequence[bytes | None]) -> BinaryColumn:
        """Pack a sequence of ``bytes | None`` into a column (handy in tests)."""
        import array

        offsets = array.array("i", [0])
        data = bytearray()
        validity = bytearray((len(values) + 7) // 8)
        any_null = False
        for i, v in enumerate(values):
            if v is None:
                any_null = True
            else:
                data += v
                validity[i >> 3] |= 1 << (i & 7)
            offsets.append(len(data))
        return cls(offsets, bytes(data), validity if any_null else None)

    @classmethod
    def from_arrow(cls, array: Any) -> BinaryColumn:
        """Wrap a pyarrow ``binary``/``string`` (or ``large_*``) array without copying."""
        import pyarrow as pa  # optional dependency, only needed here

        typ = array.type
        if pa.types.is_binary(typ) or pa.types.is_string(typ):
            large = False
        elif pa.types.is_large_binary(typ) or pa.types.is_large_string(typ):
            large = True
        else:
            raise TypeError(f"expected a binary or string array, got {typ}")
        validity, offsets, data = array.buffers()
        return cls(
            offsets,
            b"" if data is None else data,
            validity if array.null_count else None,
            offset=array.offset,
            length=len(array),
            large=large,
        )

    def __len__(self) -> int:
        return self.length

    def span_bytes(self, start: int, stop: int) -> int:
        """Bytes of data held by elements ``start`` to ``stop`` (nulls hold none)."""
        if not 0 <= start <= stop <= self.length:
            raise IndexError(f"{start}:{stop} outside a column of {self.length} elements")
        return int(self.offsets[self.offset + stop] - self.offsets[self.offset + start])

    def is_null(self, i: int) -> bool:
        """Whether logical element ``i`` is null."""
        if self.validity is None:
            return False
        j = self.offset + i
        return not (self.validity[j >> 3] >> (j & 7)) & 1

    def __getitem__(self, i: int) -> bytes | None:
        if not 0 <= i < self.length:
            raise IndexError(i)
        if self.is_null(i):
            return None
        j = self.offset + i
        lo, hi = self.offsets[j], self.offsets[j + 1]
        if lo < 0 or hi < lo or hi > len(self.data):
            raise ValueError(f"element {i}: offsets {lo}..{hi} outside the data buffer")
        return bytes(self.data[lo:hi])

    def __repr__(self) -> str:
        return f"BinaryColumn(length={self.length}, large={self.large})"
