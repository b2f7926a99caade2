"""Property tests: encode then decode gives the input back; both codecs agree byte for byte."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import codec_wire as w
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykaf._columns import BinaryColumn

SETTINGS = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
    max_examples=60,
)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

maybe_bytes = st.none() | st.binary(max_size=64) | st.binary(min_size=120, max_size=400)
headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=4
)
record_st = st.tuples(
    st.integers(0, 2**62),  # timestamps spread wide, so deltas go both ways and get long
    maybe_bytes,
    maybe_bytes,
    headers_st,
)
records_st = st.lists(record_st, min_size=1, max_size=30)
build_st = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 2**62),
        "producer_id": st.integers(-1, 2**63 - 1),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
        "is_transactional": st.booleans(),
        "partition_leader_epoch": st.integers(-1, 2**31 - 1),
    }
)


def _encode(codec: ModuleType, compression: int, rows: list[Any], kw: dict[str, Any]) -> bytes:
    builder = codec.BatchBuilder(compression=compression)
    for i, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(ts, key, value, headers) == i
    return bytes(builder.build(**kw))


@pytest.mark.parametrize("compression", range(5), ids=CODECS)
@SETTINGS
@given(rows=records_st, kw=build_st)
def test_encode_decode(
    codec: ModuleType, compression: int, rows: list[Any], kw: dict[str, Any]
) -> None:
    data = _encode(codec, compression, rows, kw)
    rs = codec.decode_record_set(data)
    assert (rs.incomplete, rs.consumed, rs.partial_size) == (False, len(data), 0)
    (batch,) = rs.batches
    base = kw["base_offset"]
    assert batch.base_offset == base
    assert batch.last_offset == base + len(rows) - 1
    assert batch.record_count == len(rows)
    assert batch.compression == CODECS[compression]
    assert batch.producer_id == kw["producer_id"]
    assert batch.producer_epoch == kw["producer_epoch"]
    assert batch.base_sequence == kw["base_sequence"]
    assert batch.partition_leader_epoch == kw["partition_leader_epoch"]
    assert batch.is_transactional is kw["is_transactional"]
    assert batch.base_timestamp == rows[0][0]
    assert batch.max_timestamp == max(r[0] for r in rows)
    assert batch.size == len(data)
    got = [w.rec_tuple(r) for r in batch.records]
    want = [(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    assert got == want


@pytest.mark.parametrize("compression", range(5), ids=CODECS)
@SETTINGS
@given(rows=records_st, kw=build_st)
def test_implementations_identical(
    both_codecs: tuple[ModuleType, ModuleType],
    compression: int,
    rows: list[Any],
    kw: dict[str, Any],
) -> None:
    cy, py = both_codecs
    a = _encode(cy, compression, rows, kw)
    b = _encode(py, compression, rows, kw)
    assert a == b
    # And each decodes the other's output to the same records.
    ra = [w.rec_tuple(r) for r in py.decode_batches(a)[0].records]
    rb = [w.rec_tuple(r) for r in cy.decode_batches(b)[0].records]
    assert ra == rb


@SETTINGS
@given(
    rows=st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=40),
    stamps=st.lists(st.integers(0, 2**50), min_size=40, max_size=40),
    max_records=st.integers(1, 50),
    max_bytes=st.integers(300, 5000),
    compression=st.integers(0, 4),
)
def test_implementations_identical_extend(
    both_codecs: tuple[ModuleType, ModuleType],
    rows: list[Any],
    stamps: list[int],
    max_records: int,
    max_bytes: int,
    compression: int,
) -> None:
    values = [v for _, v in rows]
    keys = [k for k, _ in rows]
    out = []
    for codec in both_codecs:
        builder = codec.BatchBuilder(
            compression=compression, max_records=max_records, max_bytes=max_bytes
        )
        try:
            stop: int | str = builder.extend(
                BinaryColumn.from_values(values), keys, stamps[: len(rows)]
            )
        except Exception as exc:  # both must fail the same way
            out.append((type(exc).__name__, None))
            continue
        out.append((stop, builder.build(base_offset=3) if builder.record_count else b""))
    assert out[0] == out[1]


@SETTINGS
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 2**40), maybe_bytes, maybe_bytes), min_size=1, max_size=15
    ),
    magic=st.sampled_from([0, 1]),
    compression=st.sampled_from([0, 1, 2, 3]),
    first=st.integers(0, 2**40),
)
def test_legacy_round_trip(
    codec: ModuleType, rows: list[Any], magic: int, compression: int, first: int
) -> None:
    messages = [(first + i, ts, k, v) for i, (ts, k, v) in enumerate(rows)]
    data = codec.encode_legacy_message_set(messages, magic=magic, compression=compression)
    batches = codec.decode_batches(data)
    got = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records]
    want = [(o, ts if magic else -1, k, v) for o, ts, k, v in messages]
    assert got == want
    assert all(b.magic == magic for b in batches)


@SETTINGS
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 2**40), maybe_bytes, maybe_bytes), min_size=1, max_size=10
    ),
    magic=st.sampled_from([0, 1]),
    compression=st.sampled_from([0, 1, 2, 3]),
)
def test_legacy_implementations_identical(
    both_codecs: tuple[ModuleType, ModuleType], rows: list[Any], magic: int, compression: int
) -> None:
    messages = [(10 + i, ts, k, v) for i, (ts, k, v) in enumerate(rows)]
    cy, py = both_codecs
    a = cy.encode_legacy_message_set(messages, magic=magic, compression=compression)
    b = py.encode_legacy_message_set(messages, magic=magic, compression=compression)
    assert a == b


@pytest.mark.parametrize("control_type", [0, 1])
def test_control_implementations_identical(
    both_codecs: tuple[ModuleType, ModuleType], control_type: int
) -> None:
    cy, py = both_codecs
    kw = {"producer_id": 12, "producer_epoch": 4, "timestamp": 99, "coordinator_epoch": 8}
    assert cy.encode_control_batch(control_type, **kw) == py.encode_control_batch(
        control_type, **kw
    )


@SETTINGS
@given(data=st.binary(max_size=200))
def test_decoders_agree_on_arbitrary_input(
    both_codecs: tuple[ModuleType, ModuleType], data: bytes
) -> None:
    outcomes = []
    for codec in both_codecs:
        for check in (True, False):
            try:
                rs = codec.decode_record_set(data, check_crc=check)
            except Exception as exc:
                outcomes.append(type(exc).__name__)
                continue
            outcomes.append(
                (
                    rs.incomplete,
                    rs.consumed,
                    rs.partial_size,
                    [[w.rec_tuple(r) for r in b.records] for b in rs.batches],
                )
            )
    assert outcomes[:2] == outcomes[2:]


@SETTINGS
@given(
    data=st.data(),
    rows=records_st,
    compression=st.integers(0, 4),
)
def test_decoders_agree_on_damaged_batches(
    both_codecs: tuple[ModuleType, ModuleType],
    data: st.DataObject,
    rows: list[Any],
    compression: int,
) -> None:
    cy, py = both_codecs
    good = bytearray(_encode(py, compression, rows, {}))
    pos = data.draw(st.integers(0, len(good) - 1))
    good[pos] ^= data.draw(st.integers(1, 255))
    damaged = bytes(good) if data.draw(st.booleans()) else w.fix_crc(good)
    outcomes = []
    for codec in (cy, py):
        try:
            rs = codec.decode_record_set(damaged, check_crc=False)
        except Exception as exc:
            outcomes.append(type(exc).__name__)
            continue
        outcomes.append(
            (
                rs.incomplete,
                rs.consumed,
                [[w.rec_tuple(r) for r in b.records] for b in rs.batches],
            )
        )
    assert outcomes[0] == outcomes[1]
