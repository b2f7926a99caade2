"""Where a decoded record came from: ``topic``, ``partition`` and ``timestamp_type``.

The decoders stamp the topic and partition they are given into every record
(v2 and legacy, compressed legacy wrappers included), sharing the one topic
object; ``timestamp_type`` comes from the batch (v2), the attributes (magic 1,
with the wrapper's type ruling over its inner messages) or is -1 (magic 0).
"""

from __future__ import annotations

import copy
import gzip
import pickle
import sys
from types import ModuleType
from typing import Any

import codec_wire as w
import pytest

T = 1_700_000_000_000


def _topic() -> str:
    """A topic str built at run time, so it is not an interned constant shared by chance."""
    return "".join(["orders", "-", "eu"])


def _origin(r: Any) -> tuple[Any, int, int]:
    return (r.topic, r.partition, r.timestamp_type)


def _full(r: Any) -> tuple[Any, ...]:
    return (*w.rec_tuple(r), r.attributes, r.topic, r.partition, r.timestamp_type)


def _records(batches: list[Any]) -> list[Any]:
    return [r for b in batches for r in b.records]


def _v2(codec: ModuleType, timestamp_type: int = 0, compression: int = 0) -> bytes:
    builder = codec.BatchBuilder(timestamp_type=timestamp_type, compression=compression)
    builder.append(T, b"k0", b"v0")
    builder.append(T + 5, None, b"v1", [("h", b"x")])
    builder.append(T + 9, b"k2", None)
    data: bytes = builder.build(base_offset=40)
    return data


def _wrapper(
    magic: int, inner_magic: int, *, log_append: bool = False, inner_attributes: int = 0
) -> bytes:
    """A gzip-compressed legacy wrapper at offset 12 around three inner messages."""
    inner = b"".join(
        w.legacy_message(
            i if magic == 1 else 10 + i,
            None,
            b"m%d" % i,
            magic=inner_magic,
            timestamp=T + i,
            attributes=inner_attributes,
        )
        for i in range(3)
    )
    return w.legacy_message(
        12,
        None,
        gzip.compress(inner),
        magic=magic,
        timestamp=T + 99,
        attributes=1 | (w.ATTR_TIMESTAMP_TYPE if log_append else 0),
    )


def _mixed() -> bytes:
    """v2 batches (create and log-append time), plain and wrapped legacy messages."""
    create = w.batch(
        w.record(0, 0, b"a", b"1") + w.record(1, 3, None, b"2", [("h", None)]),
        count=2,
        base_offset=100,
        base_timestamp=T,
    )
    appended = w.batch(
        gzip.compress(w.record(0, 0, None, b"3")),
        count=1,
        base_offset=102,
        base_timestamp=T,
        max_timestamp=T + 50,
        attributes=1 | w.ATTR_TIMESTAMP_TYPE,
    )
    return (
        create
        + appended
        + w.legacy_message(103, b"k", b"m0", magic=0)
        + w.legacy_message(104, None, b"m1", magic=1, timestamp=T)
        + w.legacy_message(105, None, b"m2", magic=1, timestamp=T, attributes=0x08)
        + _wrapper(1, 1)
        + _wrapper(1, 1, log_append=True)
        + _wrapper(0, 0)
    )


# -- v2 batches -----------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1])
def test_v2_create_time(codec: ModuleType, compression: int) -> None:
    topic = _topic()
    (batch,) = codec.decode_batches(_v2(codec, 0, compression), topic=topic, partition=7)
    assert batch.timestamp_type == 0
    assert [_origin(r) for r in batch.records] == [(topic, 7, 0)] * 3
    assert [r.timestamp for r in batch.records] == [T, T + 5, T + 9]


@pytest.mark.parametrize("compression", [0, 1])
def test_v2_log_append_time_from_builder(codec: ModuleType, compression: int) -> None:
    (batch,) = codec.decode_batches(_v2(codec, 1, compression), topic="t", partition=0)
    assert batch.timestamp_type == 1
    assert [_origin(r) for r in batch.records] == [("t", 0, 1)] * 3


def test_v2_log_append_time_flipped_by_hand(codec: ModuleType) -> None:
    # The broker sets the bit (and max_timestamp) on append; here by hand, CRC recomputed.
    data = w.patch(_v2(codec), w.ATTRIBUTES, "h", w.ATTR_TIMESTAMP_TYPE)
    data = w.patch(data, w.MAX_TIMESTAMP, "q", T + 1000)
    (batch,) = codec.decode_batches(data, topic="t", partition=2)
    assert [_origin(r) for r in batch.records] == [("t", 2, 1)] * 3
    assert [r.timestamp for r in batch.records] == [T + 1000] * 3
    # Without the CRC fix the bytes only decode with check_crc=False, the same way.
    stale = w.patch(_v2(codec), w.ATTRIBUTES, "h", w.ATTR_TIMESTAMP_TYPE, recrc=False)
    (batch,) = codec.decode_batches(stale, check_crc=False, topic="t", partition=2)
    assert [r.timestamp_type for r in batch.records] == [1] * 3


def test_control_batch_records_are_stamped(codec: ModuleType) -> None:
    data = codec.encode_control_batch(
        codec.CONTROL_COMMIT, producer_id=5, producer_epoch=1, timestamp=T, base_offset=9
    )
    (batch,) = codec.decode_batches(data, topic="t", partition=1)
    assert batch.control_type == "commit"
    assert [_origin(r) for r in batch.records] == [("t", 1, 0)]


# -- legacy messages --------------------------------------------------------------


def test_legacy_plain_messages(codec: ModuleType) -> None:
    data = (
        w.legacy_message(7, b"k", b"v", magic=0)
        + w.legacy_message(8, None, b"v", magic=1, timestamp=T)
        + w.legacy_message(9, None, b"v", magic=1, timestamp=T + 1, attributes=0x08)
    )
    batches = codec.decode_batches(data, topic="t", partition=3)
    assert [_origin(r) for r in _records(batches)] == [("t", 3, -1), ("t", 3, 0), ("t", 3, 1)]


@pytest.mark.parametrize(
    ("magic", "inner_magic", "log_append", "inner_attributes", "want"),
    [
        (1, 1, False, 0, 0),  # CreateTime wrapper: its inner messages are CreateTime
        (1, 1, True, 0, 1),  # LogAppendTime wrapper: its time and type for all
        (1, 1, False, 0x08, 0),  # the wrapper's type rules over the inner bit
        (1, 0, False, 0, -1),  # magic 0 inner messages carry no timestamp
        (1, 0, True, 0, 1),  # ... unless the wrapper stamps its append time on them
        (0, 0, False, 0, -1),  # magic 0 wrapper, magic 0 messages
        (0, 1, False, 0x08, 1),  # magic 0 wrapper (no type): magic 1 messages keep theirs
    ],
)
def test_legacy_compressed_wrapper(
    codec: ModuleType,
    magic: int,
    inner_magic: int,
    log_append: bool,
    inner_attributes: int,
    want: int,
) -> None:
    topic = _topic()
    data = _wrapper(magic, inner_magic, log_append=log_append, inner_attributes=inner_attributes)
    (batch,) = codec.decode_batches(data, topic=topic, partition=4)
    assert batch.magic == magic
    assert [r.offset for r in batch.records] == [10, 11, 12]
    assert [_origin(r) for r in batch.records] == [(topic, 4, want)] * 3
    if magic == 1 and log_append:
        assert [r.timestamp for r in batch.records] == [T + 99] * 3


# -- both entry points, defaults, sharing -------------------------------------------


def test_record_set_and_batches_stamp_everything(codec: ModuleType) -> None:
    topic = _topic()
    data = _mixed()
    rs = codec.decode_record_set(data, topic=topic, partition=11)
    assert rs.consumed == len(data)
    records = _records(rs.batches)
    assert len(records) == 15
    assert all(r.topic is topic and r.partition == 11 for r in records)
    assert [r.timestamp_type for r in records] == [0, 0, 1, -1, 0, 1] + [0] * 3 + [1] * 3 + [-1] * 3
    again = _records(codec.decode_batches(data, topic=topic, partition=11))
    assert [_full(r) for r in again] == [_full(r) for r in records]


def test_defaults_when_not_given(codec: ModuleType) -> None:
    records = _records(codec.decode_batches(_mixed()))
    assert {(r.topic, r.partition) for r in records} == {(None, -1)}
    # The timestamp type is the data's, whether or not an origin was given.
    stamped = _records(codec.decode_batches(_mixed(), topic="t", partition=0))
    assert [r.timestamp_type for r in records] == [r.timestamp_type for r in stamped]
    (batch,) = codec.decode_record_set(_v2(codec), check_crc=False).batches
    assert [_origin(r) for r in batch.records] == [(None, -1, 0)] * 3


def test_topic_object_is_shared(codec: ModuleType) -> None:
    topic = _topic()
    before = sys.getrefcount(topic)
    batches = codec.decode_batches(_mixed(), topic=topic, partition=0)
    records = _records(batches)
    assert records[0].topic is records[1].topic is topic
    assert all(r.topic is topic for r in records)
    # One reference per record and nothing else: no copies, nothing leaked.
    assert sys.getrefcount(topic) == before + len(records)
    del batches, records
    assert sys.getrefcount(topic) == before


def test_str_subclass_topic_kept_as_is(codec: ModuleType) -> None:
    class Topic(str):
        pass

    topic = Topic("t")
    (batch,) = codec.decode_batches(_v2(codec), topic=topic)
    assert all(r.topic is topic for r in batch.records)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic": b"t"}, TypeError),
        ({"topic": 3}, TypeError),
        ({"partition": "0"}, TypeError),
        ({"partition": 1.0}, TypeError),
        ({"partition": None}, TypeError),
        ({"partition": 2**31}, ValueError),
        ({"partition": -(2**31) - 1}, ValueError),
    ],
)
def test_bad_origin_arguments(codec: ModuleType, kwargs: dict[str, Any], error: type) -> None:
    for decode in (codec.decode_batches, codec.decode_record_set):
        with pytest.raises(error):
            decode(_v2(codec), **kwargs)
        with pytest.raises(error):
            decode(b"", **kwargs)  # checked before any byte is read


class _Index:
    """An integer that is not an int (as numpy's are): accepted through __index__."""

    def __index__(self) -> int:
        return 6


def test_partition_int32_bounds(codec: ModuleType) -> None:
    for partition in (0, 2**31 - 1, -(2**31)):
        (batch,) = codec.decode_batches(_v2(codec), partition=partition)
        assert {r.partition for r in batch.records} == {partition}
    (batch,) = codec.decode_batches(_v2(codec), partition=_Index())  # type: ignore[arg-type]
    assert {type(r.partition) for r in batch.records} == {int}
    assert {r.partition for r in batch.records} == {6}


def test_both_implementations_agree(both_codecs: tuple[ModuleType, ModuleType]) -> None:
    compiled, pure = both_codecs
    topic = _topic()
    inputs = [_mixed(), _v2(compiled, 1, 1), _v2(pure, 0, 1)]
    for data in inputs:
        for kwargs in ({}, {"topic": topic, "partition": 5}, {"topic": topic}, {"partition": 0}):
            got = [
                [_full(r) for r in _records(impl.decode_batches(data, **kwargs))]
                for impl in (compiled, pure)
            ]
            assert got[0] == got[1], kwargs
            reprs = [
                [repr(r) for r in _records(impl.decode_batches(data, **kwargs))]
                for impl in (compiled, pure)
            ]
            assert reprs[0] == reprs[1], kwargs


# -- records built by hand ------------------------------------------------------------


def test_record_by_hand_defaults(codec: ModuleType) -> None:
    r = codec.Record(1, T, b"k", b"v", [("h", b"x")], 3)
    assert (r.offset, r.timestamp, r.key, r.value, r.headers, r.attributes) == (
        1, T, b"k", b"v", [("h", b"x")], 3,
    )  # fmt: skip
    assert _origin(r) == (None, -1, -1)
    assert _origin(codec.Record(1, T, None, None)) == (None, -1, -1)


def test_record_by_hand_with_origin(codec: ModuleType) -> None:
    r = codec.Record(1, T, b"k", b"v", topic="t", partition=2, timestamp_type=1)
    assert _origin(r) == ("t", 2, 1)
    assert r.headers == []
    assert r.attributes == 0
    r = codec.Record(1, T, b"k", b"v", None, 0, topic=None, partition=0, timestamp_type=0)
    assert _origin(r) == (None, 0, 0)
    with pytest.raises(TypeError):
        codec.Record(1, T, b"k", b"v", None, 0, "t")  # keyword-only


def test_equality_ignores_origin(codec: ModuleType) -> None:
    (batch,) = codec.decode_batches(_v2(codec, 1), topic="t", partition=9)
    decoded = batch.records[0]
    by_hand = codec.Record(40, decoded.timestamp, b"k0", b"v0")
    assert _origin(by_hand) != _origin(decoded)
    assert by_hand == decoded
    other = codec.Record(40, decoded.timestamp, b"k0", b"v0", topic="u", partition=1)
    assert other == decoded
    assert codec.Record(41, decoded.timestamp, b"k0", b"v0", topic="t") != decoded


def test_repr_shows_topic_and_partition_when_set(codec: ModuleType) -> None:
    plain = codec.Record(1, 2, b"k", None)
    assert repr(plain) == "Record(offset=1, timestamp=2, key=b'k', value=None, headers=[])"
    r = codec.Record(1, 2, b"k", None, topic="t", partition=0, timestamp_type=0)
    assert repr(r) == (
        "Record(topic='t', partition=0, offset=1, timestamp=2, key=b'k', value=None, headers=[])"
    )
    assert repr(codec.Record(1, 2, b"k", None, partition=3)).startswith(
        "Record(topic=None, partition=3, offset=1,"
    )


def test_origin_fields_are_writable(codec: ModuleType) -> None:
    (batch,) = codec.decode_batches(_v2(codec), topic="t", partition=1)
    r = batch.records[0]
    r.topic = "u"
    r.partition = 8
    r.timestamp_type = 1
    assert _origin(r) == ("u", 8, 1)
    r.topic = None
    assert r.topic is None
    del r.topic
    with pytest.raises(AttributeError):
        r.topic  # noqa: B018


def test_deleted_fields_raise_not_crash(codec: ModuleType) -> None:
    # The compiled Record's member descriptors allow del, which leaves NULL in the
    # field; __eq__ and __repr__ must raise AttributeError as the twin does.
    for name in ("key", "value", "topic"):
        r = codec.Record(1, 2, b"k", b"v", topic="t")
        delattr(r, name)
        with pytest.raises(AttributeError):
            getattr(r, name)
        with pytest.raises(AttributeError):
            repr(r)
        if name != "topic":
            with pytest.raises(AttributeError):
                r == codec.Record(1, 2, b"k", b"v")  # noqa: B015
        else:
            assert r == codec.Record(1, 2, b"k", b"v")


def test_pickle_and_copy_keep_origin(codec: ModuleType) -> None:
    r = codec.Record(1, 2, b"k", b"v", [("h", None)], 1, topic="t", partition=4, timestamp_type=1)
    for twin in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert _full(twin) == _full(r)


def test_compiled_record_fields_are_member_descriptors(
    both_codecs: tuple[ModuleType, ModuleType],
) -> None:
    compiled, _ = both_codecs
    for name in ("offset", "timestamp", "key", "value", "attributes"):
        assert type(compiled.Record.__dict__[name]).__name__ == "member_descriptor", name
    for name in ("topic", "partition", "timestamp_type"):
        assert type(compiled.Record.__dict__[name]).__name__ == "member_descriptor", name
        assert compiled.Record.__dict__[name].__doc__, name


def test_compiled_record_new_has_topic_none(both_codecs: tuple[ModuleType, ModuleType]) -> None:
    compiled, _ = both_codecs
    r = compiled.Record.__new__(compiled.Record)
    assert r.topic is None  # never an AttributeError
    assert (r.key, r.value) == (None, None)
    r.topic = "t"
    assert r.topic == "t"


def test_python_record_slots_sorted(both_codecs: tuple[ModuleType, ModuleType]) -> None:
    _, pure = both_codecs
    slots = pure.Record.__slots__
    assert list(slots) == sorted(slots)
    assert {"topic", "partition", "timestamp_type"} <= set(slots)
