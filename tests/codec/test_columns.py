"""BinaryColumn: Arrow-layout binary columns for BatchBuilder.extend."""

from __future__ import annotations

import array
from types import ModuleType
from typing import Any

import pytest

from pykaf._columns import BinaryColumn

T = 1_700_000_000_000
VALUES: list[bytes | None] = [b"a", None, b"", b"dddd", None, b"ff", b"g" * 300, None, b"i", b"j"]


def test_from_values_round_trip() -> None:
    col = BinaryColumn.from_values(VALUES)
    assert len(col) == len(VALUES)
    assert list(col) == VALUES
    assert [col[i] for i in range(len(VALUES))] == VALUES
    assert [col.is_null(i) for i in range(len(VALUES))] == [v is None for v in VALUES]
    assert col.validity is not None
    assert type(col[0]) is bytes


def test_from_values_without_nulls_has_no_bitmap() -> None:
    col = BinaryColumn.from_values([b"x", b"", b"yz"])
    assert col.validity is None
    assert list(col) == [b"x", b"", b"yz"]
    assert not any(col.is_null(i) for i in range(3))


def test_empty() -> None:
    col = BinaryColumn.from_values([])
    assert len(col) == 0
    assert list(col) == []


def test_index_out_of_range() -> None:
    col = BinaryColumn.from_values([b"a", b"b"])
    with pytest.raises(IndexError):
        col[2]
    with pytest.raises(IndexError):
        col[-1]


def test_manual_buffers() -> None:
    offsets = array.array("i", [0, 3, 3, 8])
    validity = bytes([0b101])
    col = BinaryColumn(offsets, b"abcdefgh", validity)
    assert list(col) == [b"abc", None, b"defgh"]


@pytest.mark.parametrize(("offset", "length"), [(0, 10), (3, 5), (6, 4), (9, 1), (10, 0), (2, 0)])
def test_offset_and_length_slice(offset: int, length: int) -> None:
    base = BinaryColumn.from_values(VALUES)
    col = BinaryColumn(base.offsets, base.data, base.validity, offset=offset, length=length)
    assert len(col) == length
    assert list(col) == VALUES[offset : offset + length]
    assert [col.is_null(i) for i in range(length)] == [
        v is None for v in VALUES[offset : offset + length]
    ]


def test_default_length_is_the_rest() -> None:
    base = BinaryColumn.from_values(VALUES)
    col = BinaryColumn(base.offsets, base.data, base.validity, offset=4)
    assert list(col) == VALUES[4:]


def test_validity_bits_are_lsb_first_across_bytes() -> None:
    values = [None if i % 3 == 0 else bytes([i]) for i in range(20)]
    col = BinaryColumn.from_values(values)
    assert col.validity is not None
    for i in range(20):
        bit = (col.validity[i >> 3] >> (i & 7)) & 1
        assert bit == (values[i] is not None)
    sliced = BinaryColumn(col.offsets, col.data, col.validity, offset=7, length=11)
    assert list(sliced) == values[7:18]


def test_large_offsets() -> None:
    offsets = array.array("q", [0, 2, 2, 5])
    col = BinaryColumn(offsets, b"abcde", large=True)
    assert list(col) == [b"ab", b"", b"cde"]
    with pytest.raises(ValueError):
        BinaryColumn(array.array("q", [0, 2, 9]), b"abcde", large=True)


@pytest.mark.parametrize(
    ("offsets", "data", "kwargs"),
    [
        ([0, 3, 9], b"abcde", {}),  # the last offset is beyond the data
        ([-1, 3], b"abcde", {}),  # negative first offset
        ([4, 2], b"abcde", {}),  # decreasing
        ([0, 1], b"a", {"offset": 2}),
        ([0, 1], b"a", {"offset": -1}),
        ([0, 1], b"a", {"length": 2}),
        ([0, 1, 2], b"ab", {"offset": 1, "length": 2}),
        ([0, 1, 2], b"ab", {"length": -1}),
    ],
    ids=[
        "last-beyond-data",
        "negative-first",
        "decreasing",
        "offset-too-big",
        "offset-negative",
        "length-too-big",
        "offset-plus-length-too-big",
        "length-negative",
    ],
)
def test_invalid_buffers_raise(offsets: list[int], data: bytes, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        BinaryColumn(array.array("i", offsets), data, **kwargs)


@pytest.mark.parametrize(
    "offsets",
    [[0, 2, 1, 5], [0, 100, 5], [0, -50, 5]],
    ids=["decreasing-in-the-middle", "interior-beyond-data", "interior-negative"],
)
def test_bad_interior_offsets_raise_where_read(codec: ModuleType, offsets: list[int]) -> None:
    # Checking every interior offset at construction would cost a pass over the
    # whole column; they are checked where each element is read instead.
    col = BinaryColumn(array.array("i", offsets), b"abcde")
    with pytest.raises(ValueError):
        [col[i] for i in range(len(col))]
    builder = codec.BatchBuilder()
    with pytest.raises(ValueError):
        builder.extend(col, timestamp=T)


def test_offsets_buffer_not_whole_int32() -> None:
    with pytest.raises(ValueError):
        BinaryColumn(b"\x00\x00\x00\x00\x01\x00", b"a")


def test_validity_too_short() -> None:
    with pytest.raises(ValueError):
        BinaryColumn(array.array("i", range(10)), b"x" * 9, b"\xff")


def _append_all(builder: Any, values: list[bytes | None], keys: list[bytes | None]) -> None:
    for k, v in zip(keys, values, strict=True):
        builder.append(T, k, v)


def test_extend_with_sliced_column(codec: ModuleType) -> None:
    base = BinaryColumn.from_values(VALUES)
    col = BinaryColumn(base.offsets, base.data, base.validity, offset=3, length=6)
    keys_base = BinaryColumn.from_values([b"k%d" % i if i % 4 else None for i in range(12)])
    keys = BinaryColumn(keys_base.offsets, keys_base.data, keys_base.validity, offset=5, length=6)
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(col, keys, timestamp=T) == 6
    _append_all(b, list(col), list(keys))
    assert a.build() == b.build()
    (batch,) = codec.decode_batches(a.build())
    assert [r.value for r in batch.records] == VALUES[3:9]
    assert [r.key for r in batch.records] == list(keys)


# -- pyarrow (optional) ---------------------------------------------------------


@pytest.fixture
def pa() -> Any:
    return pytest.importorskip("pyarrow")


ARROW_VALUES = ["a", None, "", "héllo", None, "x" * 70, "z"]


@pytest.mark.parametrize("typ", ["binary", "string", "large_binary", "large_string"])
def test_from_arrow(pa: Any, typ: str) -> None:
    pytype = getattr(pa, typ)()
    raw = [None if v is None else (v if "string" in typ else v.encode()) for v in ARROW_VALUES]
    arr = pa.array(raw, type=pytype)
    col = BinaryColumn.from_arrow(arr)
    want = [None if v is None else v.encode() for v in ARROW_VALUES]
    assert col.large is typ.startswith("large")
    assert list(col) == want
    sliced = BinaryColumn.from_arrow(arr.slice(1, 4))
    assert list(sliced) == want[1:5]
    assert BinaryColumn.from_arrow(arr.slice(5)).length == 2


def test_from_arrow_without_nulls(pa: Any) -> None:
    arr = pa.array([b"a", b"bc"], type=pa.binary())
    col = BinaryColumn.from_arrow(arr)
    assert col.validity is None
    assert list(col) == [b"a", b"bc"]


def test_from_arrow_empty_and_all_null(pa: Any) -> None:
    assert list(BinaryColumn.from_arrow(pa.array([], type=pa.binary()))) == []
    assert list(BinaryColumn.from_arrow(pa.array([None, None], type=pa.binary()))) == [None, None]


def test_from_arrow_rejects_other_types(pa: Any) -> None:
    with pytest.raises(TypeError):
        BinaryColumn.from_arrow(pa.array([1, 2, 3]))


@pytest.mark.parametrize("typ", ["binary", "large_string"])
def test_extend_from_arrow(codec: ModuleType, pa: Any, typ: str) -> None:
    pytype = getattr(pa, typ)()
    raw = [None if v is None else (v if "string" in typ else v.encode()) for v in ARROW_VALUES]
    arr = pa.array(raw * 3, type=pytype).slice(2, 15)
    col = BinaryColumn.from_arrow(arr)
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(col, col, timestamp=T) == 15
    vals = list(col)
    _append_all(b, vals, vals)
    assert a.build() == b.build()
