"""decode_columns: record sets decoded straight into Arrow-layout columns.

Every test runs on both codecs. The row decoder is the reference: on any
input, valid or damaged, the columns hold exactly the records
``decode_batches`` returns (or both raise the same error class), the two
twins produce byte-identical buffers, and ``select``'s bounds keep exactly
the records the row path's filtering would.
"""

from __future__ import annotations

import gc
import struct
import sys
from types import ModuleType
from typing import Any

import codec_wire as w
import pytest
import twins
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_twins_agree import plans
from twins import Plan

from pykaf import ColumnBatch, errors
from pykaf.codec import BinaryColumn

T = 1_700_000_000_000
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def rows(columns: ColumnBatch) -> list[tuple[Any, ...]]:
    """Each record of ``columns`` as (offset, timestamp, key, value, headers, timestamp type)."""
    return [
        (
            columns.offsets[i],
            columns.timestamps[i],
            columns.key(i),
            columns.value(i),
            columns.headers(i),
            columns.timestamp_types[i],
        )
        for i in range(len(columns))
    ]


def record_rows(records: Any) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type) for r in records]


def raw(column: BinaryColumn) -> tuple[bytes, bytes, bytes | None]:
    validity = None if column.validity is None else bytes(column.validity)
    return bytes(column.offsets), bytes(column.data), validity


def buffers(columns: ColumnBatch) -> tuple[Any, ...]:
    """Every buffer of a ColumnBatch as bytes: for byte-for-byte comparisons."""
    return (
        bytes(columns.offsets),
        bytes(columns.timestamps),
        bytes(columns.timestamp_types),
        raw(columns.keys),
        raw(columns.values),
        bytes(columns.header_offsets),
        raw(columns.header_keys),
        raw(columns.header_values),
    )


_blob = st.none() | st.binary(max_size=40)
_headers = st.lists(st.tuples(st.text(max_size=6), _blob), max_size=3)
_records = st.lists(st.tuples(_blob, _blob, _headers), min_size=1, max_size=30)


def build(codec: ModuleType, batches: list[tuple[int, list[Any]]]) -> bytes:
    """Batches of (compression, [(key, value, headers)]) at consecutive offsets."""
    out, offset = [], 0
    for compression, records in batches:
        builder = codec.BatchBuilder(compression=compression, max_bytes=1 << 24)
        for i, (key, value, headers) in enumerate(records):
            builder.append(T + i, key, value, headers)
        out.append(builder.build(base_offset=offset))
        offset += len(records)
    return b"".join(out)


# -- the same records as the row decoder --------------------------------------------


@SETTINGS
@given(batches=st.lists(st.tuples(st.integers(0, 4), _records), min_size=1, max_size=5))
def test_columns_hold_what_the_row_decoder_returns(
    both_codecs: tuple[ModuleType, ModuleType], batches: list[tuple[int, list[Any]]]
) -> None:
    compiled, pure = both_codecs
    data = build(compiled, batches)
    expected = record_rows(r for b in compiled.decode_batches(data) for r in b.records)
    outcomes = []
    for codec in both_codecs:
        columns, decoded, kept, above = codec.decode_columns(data, topic="t", partition=2)
        assert rows(columns) == expected
        assert (columns.topic, columns.partition, columns.next_offset) == ("t", 2, -1)
        assert kept == [len(r) for _, r in batches] and above == [0] * len(batches)
        assert [b.records for b in decoded] == [[]] * len(batches)
        assert [b.base_offset for b in decoded] == [
            b.base_offset for b in compiled.decode_batches(data)
        ]
        outcomes.append(buffers(columns))
    assert outcomes[0] == outcomes[1]  # the twins write the same bytes
    assert pure.IMPLEMENTATION == "python"


@SETTINGS
@given(plan=plans())
def test_damaged_input_gives_the_row_decoders_outcome(
    both_codecs: tuple[ModuleType, ModuleType], plan: Plan
) -> None:
    data = twins.build(plan)
    check = plan.legacy_magic is None  # legacy CRCs are not re-sealed
    for codec in both_codecs:
        try:
            want: Any = record_rows(
                r for b in codec.decode_batches(data, check_crc=check) for r in b.records
            )
        except Exception as exc:
            want = type(exc).__name__
        try:
            got: Any = rows(codec.decode_columns(data, check_crc=check)[0])
        except Exception as exc:
            got = type(exc).__name__
        assert got == want, f"{codec.IMPLEMENTATION} on {data.hex()}"
        assert isinstance(got, list) or got == "CorruptRecordError"


# -- select: the bounds the consumer's filter gives ----------------------------------


@SETTINGS
@given(
    batches=st.lists(st.tuples(st.integers(0, 4), _records), min_size=1, max_size=5),
    bounds=st.lists(st.tuples(st.integers(-3, 60), st.integers(-3, 60)), min_size=5, max_size=5),
)
def test_select_keeps_exactly_the_bounded_records(
    both_codecs: tuple[ModuleType, ModuleType],
    batches: list[tuple[int, list[Any]]],
    bounds: list[tuple[int, int]],
) -> None:
    compiled, _ = both_codecs
    data = build(compiled, batches)
    decoded = compiled.decode_batches(data)
    expected, want_kept, want_above = [], [], []
    for b, (lo, hi) in zip(decoded, bounds, strict=False):
        inside = [r for r in b.records if lo <= r.offset <= hi]
        expected.extend(record_rows(inside))
        want_kept.append(len(inside))
        want_above.append(sum(r.offset > hi for r in b.records) if lo <= hi else 0)
    outcomes = []
    for codec in both_codecs:
        seen = []

        def select(batch: Any, seen: list[int] = seen) -> tuple[int, int]:
            assert batch.records == []
            seen.append(batch.base_offset)
            return bounds[len(seen) - 1]

        columns, _, kept, above = codec.decode_columns(data, select=select)
        assert seen == [b.base_offset for b in decoded]
        assert rows(columns) == expected
        assert (kept, above) == (want_kept, want_above)
        outcomes.append(buffers(columns))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(1, 1), (3, 4), (0, 0), (0, 2), (2, 3), (1, 3), (4, 4)],
    ids=["no-header-row", "no-header-rows", "first", "first-three", "middle", "mixed", "last"],
)
def test_select_packs_the_headers_of_the_rows_it_keeps(
    both_codecs: tuple[ModuleType, ModuleType], lo: int, hi: int
) -> None:
    # The compiled keep() gathers the kept rows' header entries into a scratch
    # index (eidx) before packing: rows 1, 3 and 4 have none, so keeping only
    # those leaves it empty (no entry written, none read), the others fill it.
    records = [
        (b"k0", b"v0", [("a", b"1"), ("b", None)]),
        (None, b"v1", []),
        (b"k2", None, [("c", b"3")]),
        (None, b"v3", []),
        (b"k4", b"v4", []),
    ]
    compiled, _ = both_codecs
    data = build(compiled, [(0, records)] * 2)  # a second batch, kept whole
    expected = [r for r in compiled.decode_batches(data)[0].records if lo <= r.offset <= hi]
    expected += compiled.decode_batches(data)[1].records
    outcomes = []
    for codec in both_codecs:
        bounds = iter([(lo, hi), codec.KEEP_ALL])
        columns, _, kept, above = codec.decode_columns(
            data, select=lambda b, bounds=bounds: next(bounds)
        )
        assert rows(columns) == record_rows(expected)
        assert kept == [hi - lo + 1, 5] and above == [4 - hi, 0]
        outcomes.append(buffers(columns))
    assert outcomes[0] == outcomes[1]


def test_keep_all_and_keep_none(codec: ModuleType) -> None:
    data = build(codec, [(0, [(b"k", b"v", [("h", b"x")])] * 3)] * 2)
    every = codec.decode_columns(data, select=lambda b: codec.KEEP_ALL)[0]
    assert len(every) == 6 and every.headers(5) == [("h", b"x")]
    none = codec.decode_columns(data, select=lambda b: codec.KEEP_NONE)[0]
    assert len(none) == 0 and not none.has_headers
    assert bytes(none.header_offsets) == struct.pack("=i", 0)


def test_control_and_legacy_records_become_columns(codec: ModuleType) -> None:
    marker = codec.encode_control_batch(
        codec.CONTROL_COMMIT, producer_id=5, producer_epoch=0, timestamp=T, base_offset=2
    )
    legacy = w.legacy_message(3, b"lk", b"lv", magic=1, timestamp=T)
    data = build(codec, [(1, [(None, b"a", []), (b"k", None, [("n", None)])])]) + marker + legacy
    columns, batches, kept, _ = codec.decode_columns(data)
    expected = record_rows(r for b in codec.decode_batches(data) for r in b.records)
    assert rows(columns) == expected and len(columns) == 4
    assert [b.control_type for b in batches] == [None, "commit", None]
    assert kept == [2, 1, 1]


def test_timestamp_types_follow_each_batch(codec: ModuleType) -> None:
    # CreateTime, LogAppendTime (every record gets the batch's max timestamp),
    # a magic 0 message (no timestamp) and a magic 1 one, and a commit marker.
    create = codec.BatchBuilder(max_bytes=1 << 20)
    create.append(T, None, b"c0", [])
    create.append(T + 1, None, b"c1", [])
    logged = codec.BatchBuilder(max_bytes=1 << 20, timestamp_type=1)
    logged.append(T + 5, None, b"l0", [])
    logged.append(T + 9, None, b"l1", [])
    data = (
        create.build(base_offset=0)
        + logged.build(base_offset=2)
        + w.legacy_message(4, None, b"m0", magic=0)
        + w.legacy_message(5, None, b"m1", magic=1, timestamp=T)
        + codec.encode_control_batch(
            codec.CONTROL_COMMIT, producer_id=5, producer_epoch=0, timestamp=T, base_offset=6
        )
    )
    columns = codec.decode_columns(data)[0]
    records = [r for b in codec.decode_batches(data) for r in b.records]
    assert list(columns.timestamp_types) == [r.timestamp_type for r in records]
    assert list(columns.timestamp_types) == [0, 0, 1, 1, -1, 0, 0]
    assert columns.timestamp_types.format == "b" and columns.timestamp_types.readonly
    # Rows dropped by select take their types with them.
    kept = codec.decode_columns(data, select=lambda b: (1, 4))[0]
    assert list(kept.offsets) == [1, 2, 3, 4]
    assert list(kept.timestamp_types) == [0, 1, 1, -1]


# -- hostile input --------------------------------------------------------------------


def test_a_trailing_partial_batch_is_left_out(codec: ModuleType) -> None:
    whole = build(codec, [(0, [(None, b"a", [])]), (0, [(None, b"b", [])])])
    first = len(build(codec, [(0, [(None, b"a", [])])]))
    for cut in (first, first + 5, first + 12, len(whole) - 1):
        assert [r[3] for r in rows(codec.decode_columns(whole[:cut])[0])] == [b"a"]
    assert len(codec.decode_columns(b"")[0]) == 0


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC"),
        (lambda d: w.patch(d, w.MAGIC, "b", 7), "magic"),
        (lambda d: w.patch(d, w.RECORD_COUNT, "i", 10**6), "record count"),
        (lambda d: w.patch(d, w.RECORD_COUNT, "i", -1), "negative record count"),
        (lambda d: w.patch(d, w.BATCH_LENGTH, "i", 3, recrc=False), "too small"),
    ],
)
def test_corrupt_input_raises_corrupt_record_error(
    codec: ModuleType, damage: Any, match: str
) -> None:
    data = damage(build(codec, [(0, [(b"k", b"v", [("h", b"x")])] * 3)]))
    with pytest.raises(errors.CorruptRecordError, match=match):
        codec.decode_batches(data)
    with pytest.raises(errors.CorruptRecordError, match=match):
        codec.decode_columns(data)


@pytest.mark.parametrize(
    ("record", "match"),
    [
        (w.record(0, 0, None, b"v", headers=[(b"\xff\xfe", b"x")]), "UTF-8"),
        (w.record(0, 0, None, b"v", headers=[("\ud800".encode("utf-8", "surrogatepass"), b"")]),
         "UTF-8"),
        (w.varint(len(w.record_body(0, 0, b"k", b"v")) + 4) + w.record_body(0, 0, b"k", b"v")
         + b"junk", "disagrees"),
    ],
)  # fmt: skip
def test_bad_records_raise_as_on_the_row_path(
    codec: ModuleType, record: bytes, match: str | None
) -> None:
    data = w.batch(record, count=1)
    with pytest.raises(errors.CorruptRecordError, match=match):
        codec.decode_batches(data)
    with pytest.raises(errors.CorruptRecordError, match=match):
        codec.decode_columns(data)


def test_header_keys_in_utf8_beyond_ascii(codec: ModuleType) -> None:
    data = build(codec, [(0, [(None, b"v", [("ключ", b"1"), ("鍵", None)])])])
    assert codec.decode_columns(data)[0].headers(0) == [("ключ", b"1"), ("鍵", None)]


# -- the buffers ----------------------------------------------------------------------


def test_buffers_are_read_only_and_outlive_the_batch(codec: ModuleType) -> None:
    columns = codec.decode_columns(build(codec, [(0, [(b"k", b"value", [])] * 4)]))[0]
    for view in (columns.offsets, columns.timestamps, columns.values.data, columns.keys.offsets):
        assert view.readonly
        with pytest.raises(TypeError):
            view[0] = 0
    values = columns.values.data
    del columns
    gc.collect()
    assert bytes(values) == b"value" * 4


def test_freed_buffers_reused_by_later_decodes_never_touch_live_ones(codec: ModuleType) -> None:
    # Large buffers (the compiled codec keeps a few freed ones for reuse) of
    # batches still referenced stay as they were while later decodes run.
    def piece(tag: bytes, nulls: bool) -> bytes:
        records = [(None if nulls and i % 2 else tag, tag * 300, []) for i in range(3000)]
        return build(codec, [(0, records)])

    kept = codec.decode_columns(piece(b"a", False))[0]
    values = kept.values.data
    expected = bytes(values)
    for round_ in range(6):
        tag = b"bcdefg"[round_ : round_ + 1]
        other = codec.decode_columns(piece(tag, round_ % 2 == 1))[0]
        assert other.value(2999) == tag * 300
        assert other.key(1) == (None if round_ % 2 else tag)
        assert (other.keys.validity is None) == (round_ % 2 == 0)
        del other
        gc.collect()
    del kept
    gc.collect()
    assert bytes(values) == expected  # the view kept the buffer alive and unchanged
    assert codec.decode_columns(piece(b"z", False))[0].value(0) == b"z" * 300


def test_a_null_bitmap_only_when_something_is_null(codec: ModuleType) -> None:
    records = [(None if i == 9 else b"k", b"v", []) for i in range(10)]
    columns = codec.decode_columns(build(codec, [(0, records)]))[0]
    assert columns.values.validity is None
    assert bytes(columns.keys.validity) == bytes([0xFF, 0x01])  # bit 9 clear, padding 0
    assert columns.key(9) is None and columns.key(8) == b"k"
    # Dropping the null record drops the bitmap.
    kept = codec.decode_columns(build(codec, [(0, records)]), select=lambda b: (0, 8))[0]
    assert len(kept) == 9 and kept.keys.validity is None


def test_to_arrow_shares_the_buffers_and_matches_the_rows(codec: ModuleType) -> None:
    pa = pytest.importorskip("pyarrow")
    batches = [
        (0, [(None, b"v%d" % i, [("a", b"1"), ("b", None)] if i % 2 else []) for i in range(7)]),
        (4, [(b"k%d" % i, None if i == 1 else b"", []) for i in range(3)]),
    ]
    data = build(codec, batches)
    columns = codec.decode_columns(data, topic="topic", partition=1)[0]
    table = columns.to_arrow()
    assert isinstance(table, pa.RecordBatch)
    assert table.schema.names == [
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
    ]
    assert table.schema.metadata == {b"topic": b"topic", b"partition": b"1"}
    table.validate(full=True)
    records = [r for b in codec.decode_batches(data) for r in b.records]
    assert table.column("offset").to_pylist() == [r.offset for r in records]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in records]
    assert table.column("timestamp_type").to_pylist() == [r.timestamp_type for r in records]
    assert table.column("key").to_pylist() == [r.key for r in records]
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] for r in records
    ]
    # No copy: Arrow's buffers are the batch's.
    value_buffer = table.column("value").buffers()[2]
    assert value_buffer.address == pa.py_buffer(columns.values.data).address
    offsets_buffer = table.column("offset").buffers()[1]
    assert offsets_buffer.address == pa.py_buffer(columns.offsets).address
    del columns
    gc.collect()
    assert table.column("value").to_pylist() == [r.value for r in records]


def test_the_arrow_pycapsule_interface(codec: ModuleType) -> None:
    pa = pytest.importorskip("pyarrow")
    data = build(codec, [(2, [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(9)])])
    columns = codec.decode_columns(data, topic="t", partition=0)[0]
    assert pa.record_batch(columns).equals(columns.to_arrow())
    assert pa.table(columns).to_batches()[0].equals(columns.to_arrow())
    assert pa.record_batch(columns).column("value").buffers()[2].address == (
        pa.py_buffer(columns.values.data).address
    )


def test_to_arrow_without_pyarrow_names_the_extra(
    codec: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    columns = codec.decode_columns(build(codec, [(0, [(None, b"v", [])])]))[0]
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(errors.MissingDependencyError, match=r"pykaf\[arrow\]") as caught:
        columns.to_arrow()
    assert isinstance(caught.value, ImportError)


def test_from_records_matches_the_decoder(codec: ModuleType) -> None:
    data = build(codec, [(0, [(b"k", None, [("h", b"x"), ("i", None)]), (None, b"v", [])])])
    records = [r for b in codec.decode_batches(data) for r in b.records]
    packed = ColumnBatch.from_records(records, topic="t", partition=0, next_offset=2)
    assert buffers(packed) == buffers(codec.decode_columns(data)[0])
    assert packed.next_offset == 2 and len(packed) == 2
    assert "records=2" in repr(packed)
