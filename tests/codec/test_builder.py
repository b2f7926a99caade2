"""BatchBuilder: offsets, timestamps, size accounting, limits, extend()."""

from __future__ import annotations

import array
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import codec_wire as w
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykaf._columns import BinaryColumn
from pykaf.errors import RecordTooLargeError

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
T = 1_700_000_000_000


def test_empty_builder(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    assert builder.record_count == 0
    assert builder.size == 61
    assert builder.base_timestamp == -1
    assert builder.max_timestamp == -1
    assert builder.compression == 0
    assert builder.compression_level is None
    assert builder.max_bytes == 1048576
    assert builder.max_records == 2147483647
    assert builder.timestamp_type == 0


def test_constructor_arguments_are_kept(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(
        compression=4, compression_level=7, max_bytes=5000, max_records=9, timestamp_type=1
    )
    assert builder.compression == 4
    assert builder.compression_level == 7
    assert builder.max_bytes == 5000
    assert builder.max_records == 9
    assert builder.timestamp_type == 1


def test_append_returns_offset_deltas_and_tracks_size(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    rows: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (T, b"k0", b"v0", []),
        (T - 5000, None, b"v1" * 100, [("a", b"1")]),
        (T + 2**33, b"k2", None, [("b", None), ("c", b"")]),
        (T + 7, b"", b"", []),
    ]
    size = 61
    for i, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(ts, key, value, headers) == i
        size += codec.record_size(i, ts - T, key, value, headers)
        assert builder.size == size
        assert builder.record_count == i + 1
    assert builder.base_timestamp == T
    assert builder.max_timestamp == T + 2**33
    out = builder.build()
    assert len(out) == size  # uncompressed: built size == size
    recs = w.parse_records(out[61:], len(rows))
    for i, (rec, (ts, key, value, headers)) in enumerate(zip(recs, rows, strict=True)):
        assert rec.offset_delta == i
        assert rec.timestamp_delta == ts - T
        assert (rec.key, rec.value, rec.headers) == (key, value, headers)
        assert rec.length + len(w.varint(rec.length)) == codec.record_size(
            i, ts - T, key, value, headers
        )


def test_base_and_max_timestamp(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(1000, None, b"x")
    assert (builder.base_timestamp, builder.max_timestamp) == (1000, 1000)
    builder.append(400, None, b"x")
    assert (builder.base_timestamp, builder.max_timestamp) == (1000, 1000)
    builder.append(1500, None, b"x")
    assert (builder.base_timestamp, builder.max_timestamp) == (1000, 1500)
    builder.append(1200, None, b"x")
    assert (builder.base_timestamp, builder.max_timestamp) == (1000, 1500)
    p = w.parse_batch(builder.build())
    assert (p.base_timestamp, p.max_timestamp) == (1000, 1500)
    assert [r.timestamp_delta for r in w.parse_records(p.records, 4)] == [0, -600, 500, 200]


@pytest.mark.parametrize(
    ("offset_delta", "ts_delta", "key", "value", "headers"),
    [
        (0, 0, None, None, None),
        (0, 0, b"", b"", []),
        (1, -1, b"k", b"v", [("h", b"x")]),
        (63, 64, b"k" * 64, b"v" * 64, [("h" * 64, None)]),
        (2**31 - 1, -(2**63), b"k" * 200, b"v" * 20000, [("a", b"1")] * 70),
        (2**20, 2**63 - 1, None, b"v" * 2**16, [("é", b"\x00")]),
    ],
)
def test_record_size_formula(
    codec: ModuleType,
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
) -> None:
    expected = w.record(offset_delta, ts_delta, key, value, headers or [])
    assert codec.record_size(offset_delta, ts_delta, key, value, headers) == len(expected)


def _sizes(codec: ModuleType, rows: Sequence[tuple[int, bytes | None, bytes | None]]) -> list[int]:
    base = rows[0][0]
    return [codec.record_size(i, ts - base, k, v) for i, (ts, k, v) in enumerate(rows)]


def test_max_bytes_exact_fit(codec: ModuleType) -> None:
    rows = [(T, b"k", b"a" * 50), (T + 1, b"k", b"b" * 70), (T + 2, b"k", b"c")]
    s = _sizes(codec, rows)
    builder = codec.BatchBuilder(max_bytes=61 + s[0] + s[1])
    assert builder.append(*rows[0]) == 0
    assert builder.append(*rows[1]) == 1
    assert builder.size == builder.max_bytes
    assert builder.would_overflow(b"k", b"c")
    assert builder.append(*rows[2]) == -1
    assert builder.record_count == 2
    assert builder.size == 61 + s[0] + s[1]
    assert builder.max_timestamp == T + 1  # the rejected record left no trace
    assert w.parse_batch(builder.build()).record_count == 2


def test_max_bytes_one_short(codec: ModuleType) -> None:
    rows = [(T, b"k", b"a" * 50), (T + 1, b"k", b"b" * 70)]
    s = _sizes(codec, rows)
    builder = codec.BatchBuilder(max_bytes=61 + s[0] + s[1] - 1)
    assert builder.append(*rows[0]) == 0
    assert builder.would_overflow(b"k", b"b" * 70)
    assert builder.append(*rows[1]) == -1
    assert builder.record_count == 1
    assert builder.size == 61 + s[0]
    # A smaller record that does fit is still accepted afterwards.
    assert builder.append(T + 1, None, None) == 1
    assert builder.record_count == 2


def test_max_records(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_records=2)
    assert builder.append(T, None, b"x") == 0
    assert not builder.would_overflow(None, b"x")
    assert builder.append(T, None, b"x") == 1
    assert builder.would_overflow(None, None)
    size = builder.size
    assert builder.append(T, None, None) == -1
    assert builder.record_count == 2
    assert builder.size == size


def test_record_too_large_for_empty_batch(codec: ModuleType) -> None:
    rs = codec.record_size(0, 0, b"k", b"v" * 500)
    exact = codec.BatchBuilder(max_bytes=61 + rs)
    assert exact.append(T, b"k", b"v" * 500) == 0
    assert exact.size == exact.max_bytes
    small = codec.BatchBuilder(max_bytes=61 + rs - 1)
    with pytest.raises(RecordTooLargeError):
        small.append(T, b"k", b"v" * 500)
    assert small.record_count == 0
    assert small.size == 61
    with pytest.raises(RecordTooLargeError):
        codec.BatchBuilder(max_bytes=100).append(T, None, b"x" * 1000, [("h", b"y")])


def test_too_large_record_into_non_empty_batch_returns_minus_one(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_bytes=200)
    assert builder.append(T, None, b"x") == 0
    assert builder.append(T, None, b"x" * 1000) == -1
    assert builder.record_count == 1


def test_would_overflow_false_when_room(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    assert not builder.would_overflow(b"k", b"v")
    assert not builder.would_overflow(None, None, [("h", None)])
    builder.append(T, b"k", b"v")
    assert not builder.would_overflow(b"k", b"v" * 1000, [("h", b"x")])


@FIXTURE_OK
@given(
    max_bytes=st.integers(61 + 8, 700),
    max_records=st.integers(1, 12),
    rows=st.lists(
        st.tuples(
            st.integers(0, 2**62),
            st.one_of(st.none(), st.binary(max_size=40)),
            st.one_of(st.none(), st.binary(max_size=120)),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2),
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_limits_model(
    codec: ModuleType,
    max_bytes: int,
    max_records: int,
    rows: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
) -> None:
    builder = codec.BatchBuilder(max_bytes=max_bytes, max_records=max_records)
    accepted: list[int] = []
    base = None
    for ts, key, value, headers in rows:
        count, size = builder.record_count, builder.size
        wo = builder.would_overflow(key, value, headers)
        delta = 0 if base is None else ts - base
        need = codec.record_size(count, delta, key, value, headers)
        if count == 0:
            if 61 + need > max_bytes:
                with pytest.raises(RecordTooLargeError):
                    builder.append(ts, key, value, headers)
                assert builder.record_count == 0
                continue
            assert builder.append(ts, key, value, headers) == 0
            base = ts
            accepted.append(ts)
            continue
        got = builder.append(ts, key, value, headers)
        if size + need > max_bytes or count + 1 > max_records:
            assert got == -1
            assert wo, "would_overflow must be True whenever append returns -1"
            assert (builder.record_count, builder.size) == (count, size)
        else:
            assert got == count
            assert builder.size == size + need
            accepted.append(ts)
    if accepted:
        assert builder.max_timestamp == max(accepted)
        assert builder.base_timestamp == accepted[0]
        assert builder.size <= max_bytes
        assert len(builder.build()) == builder.size


@pytest.mark.parametrize(
    "bad",
    [
        {"compression": 5},
        {"compression": -1},
        {"timestamp_type": 2},
    ],
)
def test_constructor_rejects_bad_arguments(codec: ModuleType, bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        codec.BatchBuilder(**bad)


@pytest.mark.parametrize(
    "args",
    [
        (T, "key", b"v", None),
        (T, None, "value", None),
        (T, None, b"v", [(b"bytes-key", b"x")]),
        (T, None, b"v", [("k", "str-value")]),
        (T, None, b"v", [("k",)]),
        (T, None, b"v", [("k", b"v", b"extra")]),
        (T, 5, b"v", None),
    ],
)
def test_append_rejects_bad_types(codec: ModuleType, args: tuple[Any, ...]) -> None:
    builder = codec.BatchBuilder()
    with pytest.raises((TypeError, ValueError)):
        builder.append(*args)
    assert builder.record_count == 0
    assert builder.size == 61


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1])
def test_append_rejects_timestamp_outside_int64(codec: ModuleType, ts: int) -> None:
    builder = codec.BatchBuilder()
    with pytest.raises(ValueError):
        builder.append(ts, None, b"v")
    assert builder.record_count == 0
    with pytest.raises(ValueError):
        builder.extend([b"v"], timestamps=[ts])
    assert builder.record_count == 0
    with pytest.raises(ValueError):
        builder.extend([b"v"], timestamp=ts)
    assert builder.record_count == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("base_offset", 2**63),
        ("base_offset", -(2**63) - 1),
        ("producer_id", 2**63),
        ("producer_epoch", 2**15),
        ("producer_epoch", 70000),
        ("producer_epoch", -(2**15) - 1),
        ("base_sequence", 2**31),
        ("partition_leader_epoch", 2**31),
        ("partition_leader_epoch", -(2**31) - 1),
    ],
)
def test_build_rejects_fields_outside_their_width(
    codec: ModuleType, field: str, value: int
) -> None:
    # A value that does not fit the wire field must not be silently wrapped.
    builder = codec.BatchBuilder()
    builder.append(T, None, b"v")
    with pytest.raises(ValueError):
        builder.build(**{field: value})


# -- extend ------------------------------------------------------------------

VALUES: list[bytes | None] = [b"v0", None, b"", b"v3" * 40, b"v4", b"v5", None, b"v7"]
KEYS: list[bytes | None] = [None, b"k1", b"k2", b"", None, b"k5" * 10, b"k6", b"k7"]
STAMPS = [T, T - 10, T + 2**35, T + 3, T, T - 2**33, T + 1, T + 2]
HEADERS: list[list[tuple[str, bytes | None]] | None] = [
    None,
    [("a", b"1")],
    [],
    [("b", None), ("c", b"")],
    None,
    [("é", b"\xff")],
    None,
    [("z", b"z" * 30)],
]


def _one_by_one(
    builder: Any,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    stamps: Sequence[int],
    headers: Sequence[Any] | None,
    start: int = 0,
    stop: int | None = None,
) -> int:
    stop = len(values) if stop is None else stop
    for i in range(start, stop):
        got = builder.append(
            stamps[i],
            None if keys is None else keys[i],
            values[i],
            None if headers is None else headers[i],
        )
        if got == -1:
            return i
    return stop


def _built(builder: Any) -> bytes:
    return bytes(builder.build(base_offset=100, producer_id=7, producer_epoch=1, base_sequence=0))


def test_extend_equals_appends(codec: ModuleType) -> None:
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(VALUES, KEYS, STAMPS, HEADERS) == len(VALUES)
    assert _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS) == len(VALUES)
    assert a.record_count == b.record_count == len(VALUES)
    assert a.size == b.size
    assert (a.base_timestamp, a.max_timestamp) == (b.base_timestamp, b.max_timestamp)
    assert _built(a) == _built(b)
    recs = w.parse_records(_built(a)[61:], len(VALUES))
    assert [(r.key, r.value) for r in recs] == list(zip(KEYS, VALUES, strict=True))
    assert [r.headers for r in recs] == [h or [] for h in HEADERS]


def test_extend_keys_and_headers_optional(codec: ModuleType) -> None:
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(VALUES, None, STAMPS) == len(VALUES)
    _one_by_one(b, VALUES, None, STAMPS, None)
    assert _built(a) == _built(b)
    recs = w.parse_records(_built(a)[61:], len(VALUES))
    assert all(r.key is None and r.headers == [] for r in recs)


def test_extend_fixed_timestamp(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    assert builder.extend(VALUES, KEYS, timestamp=T + 5) == len(VALUES)
    p = w.parse_batch(_built(builder))
    assert p.base_timestamp == p.max_timestamp == T + 5
    assert all(r.timestamp_delta == 0 for r in w.parse_records(p.records, len(VALUES)))


def test_extend_defaults_to_now(codec: ModuleType) -> None:
    before = int(time.time() * 1000)
    builder = codec.BatchBuilder()
    assert builder.extend(VALUES) == len(VALUES)
    after = int(time.time() * 1000) + 1
    assert before <= builder.base_timestamp <= after
    assert before <= builder.max_timestamp <= after
    p = w.parse_batch(_built(builder))
    for r in w.parse_records(p.records, len(VALUES)):
        assert before <= p.base_timestamp + r.timestamp_delta <= after


@pytest.mark.parametrize(
    "wrap",
    [list, lambda s: array.array("q", s), lambda s: memoryview(array.array("q", s))],
    ids=["list", "array", "memoryview"],
)
def test_extend_timestamp_containers(codec: ModuleType, wrap: Any) -> None:
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(VALUES, KEYS, wrap(STAMPS), HEADERS) == len(VALUES)
    _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS)
    assert _built(a) == _built(b)


@pytest.mark.parametrize(("start", "stop"), [(0, 8), (2, 5), (3, None), (7, 8), (4, 4), (8, 8)])
def test_extend_start_stop(codec: ModuleType, start: int, stop: int | None) -> None:
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    got = a.extend(VALUES, KEYS, STAMPS, HEADERS, start=start, stop=stop)
    want = _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS, start, stop)
    assert got == want == (len(VALUES) if stop is None else stop)
    assert a.record_count == b.record_count == want - start
    assert a.size == b.size
    if a.record_count:
        assert _built(a) == _built(b)
        recs = w.parse_records(_built(a)[61:], a.record_count)
        assert [r.value for r in recs] == VALUES[start:want]
        assert [r.offset_delta for r in recs] == list(range(want - start))


def test_extend_stops_when_records_full(codec: ModuleType) -> None:
    a = codec.BatchBuilder(max_records=3)
    assert a.extend(VALUES, KEYS, STAMPS, HEADERS) == 3
    assert a.record_count == 3
    # Continue where it stopped, in a fresh batch, then once more.
    b = codec.BatchBuilder(max_records=3)
    assert b.extend(VALUES, KEYS, STAMPS, HEADERS, start=3) == 6
    c = codec.BatchBuilder(max_records=3)
    assert c.extend(VALUES, KEYS, STAMPS, HEADERS, start=6) == 8
    assert c.record_count == 2
    ref = codec.BatchBuilder(max_records=3)
    _one_by_one(ref, VALUES, KEYS, STAMPS, HEADERS, 3, 6)
    assert _built(b) == _built(ref)


def test_extend_stops_when_bytes_full(codec: ModuleType) -> None:
    sizes = [
        codec.record_size(i, STAMPS[i] - STAMPS[0], KEYS[i], VALUES[i], HEADERS[i])
        for i in range(3)
    ]
    limit = 61 + sum(sizes) + 2  # the 4th record (100+ bytes) cannot fit
    a, b = codec.BatchBuilder(max_bytes=limit), codec.BatchBuilder(max_bytes=limit)
    assert a.extend(VALUES, KEYS, STAMPS, HEADERS) == 3
    assert _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS) == 3
    assert a.size == b.size == 61 + sum(sizes)
    assert _built(a) == _built(b)


def test_extend_onto_non_empty_batch(codec: ModuleType) -> None:
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    for builder in (a, b):
        assert builder.append(T - 99, b"first", b"record", [("x", b"y")]) == 0
    assert a.extend(VALUES, KEYS, STAMPS, HEADERS, start=1, stop=6) == 6
    _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS, 1, 6)
    assert a.record_count == 6
    assert a.base_timestamp == T - 99
    assert _built(a) == _built(b)


def test_extend_on_full_batch_appends_nothing(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_records=1)
    builder.append(T, None, b"x")
    assert builder.extend(VALUES, KEYS, STAMPS, HEADERS, start=2) == 2
    assert builder.record_count == 1


def test_extend_first_record_too_large(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_bytes=80)
    with pytest.raises(RecordTooLargeError):
        builder.extend([b"x" * 500, b"y"], timestamp=T)
    assert builder.record_count == 0


def test_extend_large_record_later_stops(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_bytes=200)
    assert builder.extend([b"a", b"b", b"x" * 500, b"c"], timestamp=T) == 2
    assert builder.record_count == 2


@pytest.mark.parametrize("large", [False, True])
def test_extend_binary_column(codec: ModuleType, large: bool) -> None:
    values = BinaryColumn.from_values(VALUES)
    keys = BinaryColumn.from_values(KEYS)
    if large:
        values = BinaryColumn(
            array.array("q", values.offsets.tolist()), values.data, values.validity, large=True
        )
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(values, keys, STAMPS, HEADERS) == len(VALUES)
    _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS)
    assert _built(a) == _built(b)


def test_extend_sliced_binary_column(codec: ModuleType) -> None:
    # A column that starts three elements into its buffers (Arrow's array offset),
    # with a validity bitmap whose bits must be read at offset + i.
    full_values: list[bytes | None] = [b"pad0", None, b"pad2", *VALUES, b"tail"]
    full_keys: list[bytes | None] = [b"kp0", b"kp1", None, *KEYS, None]
    base_v = BinaryColumn.from_values(full_values)
    base_k = BinaryColumn.from_values(full_keys)
    values = BinaryColumn(base_v.offsets, base_v.data, base_v.validity, offset=3, length=8)
    keys = BinaryColumn(base_k.offsets, base_k.data, base_k.validity, offset=3, length=8)
    assert list(values) == VALUES
    assert list(keys) == KEYS
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(values, keys, STAMPS, HEADERS) == 8
    _one_by_one(b, VALUES, KEYS, STAMPS, HEADERS)
    assert _built(a) == _built(b)
    # start/stop index the logical column.
    c, d = codec.BatchBuilder(), codec.BatchBuilder()
    assert c.extend(values, keys, STAMPS, HEADERS, start=2, stop=7) == 7
    _one_by_one(d, VALUES, KEYS, STAMPS, HEADERS, 2, 7)
    assert _built(c) == _built(d)


def test_extend_binary_column_with_unaligned_data(codec: ModuleType) -> None:
    # Offsets that do not start at zero within the data buffer.
    offsets = array.array("i", [5, 8, 8, 12])
    col = BinaryColumn(offsets, b"xxxxxabcdefgzz")
    assert list(col) == [b"abc", b"", b"defg"]
    a, b = codec.BatchBuilder(), codec.BatchBuilder()
    assert a.extend(col, timestamp=T) == 3
    _one_by_one(b, list(col), None, [T] * 3, None)
    assert _built(a) == _built(b)


@FIXTURE_OK
@given(
    data=st.data(),
    rows=st.lists(
        st.tuples(
            st.integers(0, 2**50),
            st.none() | st.binary(max_size=30),
            st.none() | st.binary(max_size=90),
            st.none()
            | st.lists(
                st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=2
            ),
        ),
        max_size=25,
    ),
)
def test_extend_model(codec: ModuleType, data: st.DataObject, rows: list[Any]) -> None:
    n = len(rows)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.none() | st.integers(start, n))
    max_bytes = data.draw(st.integers(200, 2000))
    max_records = data.draw(st.integers(1, 30))
    column = data.draw(st.booleans())
    stamps = [r[0] for r in rows]
    keys = [r[1] for r in rows]
    values = [r[2] for r in rows]
    headers = [r[3] for r in rows]
    a = codec.BatchBuilder(max_bytes=max_bytes, max_records=max_records)
    b = codec.BatchBuilder(max_bytes=max_bytes, max_records=max_records)
    try:
        want: int | None = _one_by_one(b, values, keys, stamps, headers, start, stop)
    except RecordTooLargeError:
        want = None
    vals: Any = BinaryColumn.from_values(values) if column else values
    ks: Any = BinaryColumn.from_values(keys) if column else keys
    ts: Any = array.array("q", stamps) if column else stamps
    if want is None:
        with pytest.raises(RecordTooLargeError):
            a.extend(vals, ks, ts, headers, start=start, stop=stop)
        return
    assert a.extend(vals, ks, ts, headers, start=start, stop=stop) == want
    assert (a.record_count, a.size) == (b.record_count, b.size)
    if a.record_count:
        assert _built(a) == _built(b)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timestamps": array.array("q", [1, 2])},
        {"timestamps": [1, 2]},
        {"timestamps": array.array("i", [1, 2, 3, 4, 5])},
        {"keys": [b"k"], "timestamp": T},
        {"keys": BinaryColumn.from_values([b"k"]), "timestamp": T},
        {"headers": [[("a", b"1")]], "timestamp": T},
        {"stop": 9, "timestamp": T},
        {"start": 7, "timestamp": T},
        {"start": 3, "stop": 1, "timestamp": T},
        {"start": -2, "timestamp": T},
    ],
    ids=[
        "short-timestamp-buffer",
        "short-timestamp-list",
        "int32-timestamp-buffer",
        "short-keys",
        "short-key-column",
        "short-headers",
        "stop-beyond",
        "start-beyond",
        "start-after-stop",
        "negative-start",
    ],
)
def test_extend_rejects_bad_arguments(codec: ModuleType, kwargs: dict[str, Any]) -> None:
    # Checked up front: a short buffer must never be read past its end.
    for values in ([b"a", b"b", b"c", b"d", b"e"], BinaryColumn.from_values([b"a"] * 5)):
        builder = codec.BatchBuilder()
        with pytest.raises((ValueError, TypeError)):
            builder.extend(values, **kwargs)
        assert builder.record_count == 0
        assert builder.size == 61


def _payload(values: Any, keys: Any, start: int, stop: int) -> int:
    """Bytes of the values and keys of records ``start`` to ``stop - 1`` (a null counts 0)."""
    total = 0
    for i in range(start, stop):
        for col in (values, keys):
            if col is not None and col[i] is not None:
                total += len(col[i])
    return total


def test_extended_bytes_counts_what_extend_appended(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    assert builder.extended_bytes == 0
    assert builder.extend(VALUES, KEYS, STAMPS, HEADERS, start=1, stop=6) == 6
    assert builder.extended_bytes == _payload(VALUES, KEYS, 1, 6) > 0
    # Without keys, values only; the count is per call, not cumulative.
    assert builder.extend(VALUES, None, STAMPS, None, start=6) == len(VALUES)
    assert builder.extended_bytes == _payload(VALUES, None, 6, len(VALUES))
    # Nulls count nothing.
    assert builder.extend([None, b"abc"], [b"k", None], timestamp=T) == 2
    assert builder.extended_bytes == 4


def test_extended_bytes_stops_where_the_batch_filled(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(max_records=3)
    assert builder.extend(VALUES, KEYS, STAMPS, HEADERS) == 3
    assert builder.extended_bytes == _payload(VALUES, KEYS, 0, 3)
    assert builder.extend(VALUES, KEYS, STAMPS, HEADERS, start=3) == 3  # full: nothing
    assert builder.extended_bytes == 0
