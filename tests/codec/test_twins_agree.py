"""The compiled codec and its pure-Python twin agree on every input, hostile ones included.

Valid batches (every codec, control batches, timestamps and offsets near the
int64 limits) are damaged (flips, byte writes, insertions, deletions,
truncations, extreme header fields, damage to the records before compression),
the CRC re-sealed, and both twins must decode them to the same values or
raise the same error class. ``tools/twin_probe.py`` runs the same comparison on
hundreds of thousands of inputs; the regression tests below pin down each cause
of disagreement that probe found.
"""

from __future__ import annotations

import gzip
import struct
from types import ModuleType

import codec_wire as w
import pytest
import twins
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twins import INT64_MAX, INT64_MIN, Mutation, Plan, RecordSpec

from pykaf.errors import CorruptRecordError

T = 1_700_000_000_000


def _ints(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.sampled_from(twins.extremes({8: "b", 16: "h", 32: "i", 64: "q"}[bits])) | st.integers(
        lo, hi
    )


_blob = st.none() | st.binary(max_size=24)
_record = st.builds(
    RecordSpec,
    offset_delta=st.integers(0, 20) | _ints(32),
    timestamp_delta=st.integers(-5, 5) | _ints(64),
    key=_blob,
    value=_blob,
    headers=st.lists(st.tuples(st.text(max_size=4), _blob), max_size=2),
    attributes=st.sampled_from((0, 0x80, 0xFF)),
)
_control_record = st.builds(
    RecordSpec,
    offset_delta=st.just(0),
    timestamp_delta=st.just(0),
    key=st.sampled_from((0, 1, 2)).map(lambda t: struct.pack(">hh", 0, t)),
    value=st.integers(-1, 5).map(lambda e: struct.pack(">hi", 0, e)),
)
_mutation = st.one_of(
    st.builds(Mutation, st.sampled_from(("flip", "set", "delete")), st.integers(0, 1 << 16),
              st.integers(0, 255), in_records=st.booleans()),
    st.builds(Mutation, st.just("insert"), st.integers(0, 1 << 16),
              data=st.binary(min_size=1, max_size=6), in_records=st.booleans()),
    st.builds(Mutation, st.just("truncate"), st.integers(0, 1 << 16), in_records=st.booleans()),
    st.builds(Mutation, st.just("field"), st.integers(0, len(twins.HEADER_FIELDS) - 1),
              _ints(64)),
)  # fmt: skip
_timestamp = st.sampled_from((0, T, -1, INT64_MAX, INT64_MAX - 3, INT64_MIN, INT64_MIN + 3))


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """A valid batch (sometimes a legacy message set) and the damage to do to it."""
    control = draw(st.booleans()) and draw(st.booleans())
    records = draw(
        st.lists(_control_record, min_size=1, max_size=1)
        if control
        else st.lists(_record, max_size=6)
    )
    base_ts = draw(_timestamp)
    return Plan(
        records,
        codec=draw(st.integers(0, 4)),
        base_offset=draw(st.sampled_from((0, 42, INT64_MAX - 2, INT64_MAX, -1, INT64_MIN))),
        base_timestamp=base_ts,
        max_timestamp=draw(st.none() | _timestamp),
        attributes=(0x30 if control else 0) | draw(st.sampled_from((0, 0x08, 0x10))),
        mutations=draw(st.lists(_mutation, max_size=3)),
        fix_length=draw(st.booleans()),
        legacy_magic=draw(st.sampled_from((None, None, None, None, 0, 1))),
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(plan=plans())
def test_twins_agree_on_damaged_batches(
    both_codecs: tuple[ModuleType, ModuleType], plan: Plan
) -> None:
    compiled, pure = both_codecs
    data = twins.build(plan)
    check = plan.legacy_magic is None  # legacy CRCs are not re-sealed
    a = twins.snapshot(compiled, data, check_crc=check)
    b = twins.snapshot(pure, data, check_crc=check)
    assert a == b, f"{twins.first_difference(a, b)} on {data.hex()}"
    for outcome in (a, b):  # only CorruptRecordError may come out of hostile bytes
        assert outcome[0] == "ok" or outcome[1] == "CorruptRecordError", outcome


# -- one regression test per cause of disagreement the probe found -------------------


def _one(record: bytes, **kw: int) -> bytes:
    return w.batch(record, count=1, **kw)


def test_attributes_read_unsigned(codec: ModuleType) -> None:
    # A 16-bit bit field: the high bit set reads 0x8000 in both (was -32768 in Python).
    (b,) = codec.decode_batches(_one(w.record(0, 0, None, b"v"), attributes=-0x8000))
    assert b.attributes == 0x8000
    assert (b.compression, b.timestamp_type, b.is_control) == ("none", 0, False)


@pytest.mark.parametrize(
    ("base_ts", "delta"),
    [(INT64_MAX, 1), (INT64_MAX - 5, 2**62), (INT64_MIN, -1), (-(2**62), -(2**63))],
)
def test_timestamp_overflow_is_corrupt(codec: ModuleType, base_ts: int, delta: int) -> None:
    # Was: int64 wrap-around in the compiled codec, an out-of-range int in Python.
    data = _one(w.record(0, delta, None, b"v"), base_timestamp=base_ts)
    with pytest.raises(CorruptRecordError, match="timestamp delta"):
        codec.decode_batches(data)


def test_timestamp_at_the_limits_is_fine(codec: ModuleType) -> None:
    data = w.batch(
        w.record(0, INT64_MAX, None, b"v") + w.record(1, INT64_MIN, None, b"w"),
        count=2,
        base_timestamp=0,
    )
    (b,) = codec.decode_batches(data)
    assert [r.timestamp for r in b.records] == [INT64_MAX, INT64_MIN]


def test_log_append_time_ignores_the_delta(codec: ModuleType) -> None:
    # LogAppendTime takes maxTimestamp; the delta is not added, so it cannot overflow.
    data = _one(
        w.record(0, 2**63 - 1, None, b"v"), base_timestamp=INT64_MAX, max_timestamp=T,
        attributes=0x08,
    )  # fmt: skip
    (b,) = codec.decode_batches(data)
    assert b.records[0].timestamp == T


@pytest.mark.parametrize(("base", "delta"), [(INT64_MAX - 3, 10), (INT64_MIN, -1)])
def test_record_offset_overflow_is_corrupt(codec: ModuleType, base: int, delta: int) -> None:
    data = _one(w.record(delta, 0, None, b"v"), base_offset=base, last_offset_delta=0)
    with pytest.raises(CorruptRecordError, match="offset delta"):
        codec.decode_batches(data)


@pytest.mark.parametrize(("base", "last_delta"), [(INT64_MAX, 0), (INT64_MAX - 5, 5)])
def test_next_offset_overflow_is_corrupt(codec: ModuleType, base: int, last_delta: int) -> None:
    # Was: last_offset/next_offset wrapped to negative in the compiled codec.
    data = _one(w.record(0, 0, None, b"v"), base_offset=base, last_offset_delta=last_delta)
    with pytest.raises(CorruptRecordError, match="overflows int64"):
        codec.decode_batches(data)
    (b,) = codec.decode_batches(w.patch(data, w.BASE_OFFSET, "q", base - 1))
    assert b.next_offset == INT64_MAX


def test_properties_do_not_wrap(codec: ModuleType) -> None:
    b = codec.RecordBatch()
    b.base_offset = INT64_MAX
    b.last_offset_delta = 2**31 - 1
    assert b.last_offset == INT64_MAX + 2**31 - 1
    assert b.next_offset == INT64_MAX + 2**31


def _legacy_wrapper(inner: list[tuple[int, bytes]], outer_offset: int, magic: int) -> bytes:
    msgs = b"".join(w.legacy_message(o, None, v, magic=magic, timestamp=T) for o, v in inner)
    return w.legacy_message(
        outer_offset, None, gzip.compress(msgs), magic=magic, timestamp=T, attributes=1
    )


@pytest.mark.parametrize(
    ("inner", "outer", "magic"),
    [
        ([(0, b"a"), (2**40, b"b")], 2**40, 0),  # spans more than an int32 of offsets
        ([(5, b"a"), (1, b"b")], 1, 0),  # offsets go backwards
        ([(0, b"a"), (1, b"b")], INT64_MIN, 1),  # the shift takes the first below int64
        ([(-(2**62), b"a"), (2**62, b"b")], 2**62, 1),  # span beyond int32 after the shift
        ([(0, b"a")], INT64_MAX, 1),  # the next offset would be 2**63
    ],
)
def test_legacy_offsets_that_do_not_fit_are_corrupt(
    codec: ModuleType, inner: list[tuple[int, bytes]], outer: int, magic: int
) -> None:
    # Was: last_offset_delta truncated to int32 (compiled) or unbounded (Python).
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(_legacy_wrapper(inner, outer, magic))


def test_legacy_wrapper_offsets_still_decode(codec: ModuleType) -> None:
    (b,) = codec.decode_batches(_legacy_wrapper([(0, b"a"), (1, b"b")], 100, 1))
    assert [r.offset for r in b.records] == [99, 100]
    assert (b.base_offset, b.last_offset_delta, b.next_offset) == (99, 1, 101)
