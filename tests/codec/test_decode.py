"""Decoding record sets: framing, partial batches, CRC, batch and record fields."""

from __future__ import annotations

import array
import gzip
from types import ModuleType
from typing import Any

import codec_wire as w
import pytest

from pykaf.errors import CorruptRecordError

T = 1_600_000_000_123


def _three_batches() -> list[bytes]:
    return [
        w.batch(
            w.record(0, 0, b"a", b"1") + w.record(1, 5, None, b"2", [("h", b"x")]),
            count=2,
            base_offset=10,
            base_timestamp=T,
            max_timestamp=T + 5,
            producer_id=99,
            producer_epoch=3,
            base_sequence=0,
            partition_leader_epoch=4,
        ),
        w.batch(w.record(0, 0, b"b", None), count=1, base_offset=12, base_timestamp=T + 9),
        w.batch(
            b"".join(w.record(i, -i, None, bytes([i]) * i) for i in range(5)),
            count=5,
            base_offset=13,
            base_timestamp=T + 20,
        ),
    ]


def test_decode_concatenated_batches(codec: ModuleType) -> None:
    parts = _three_batches()
    data = b"".join(parts)
    rs = codec.decode_record_set(data)
    assert rs.incomplete is False
    assert rs.consumed == len(data)
    assert rs.partial_size == 0
    assert [b.base_offset for b in rs.batches] == [10, 12, 13]
    assert [b.size for b in rs.batches] == [len(p) for p in parts]
    assert [b.last_offset for b in rs.batches] == [11, 12, 17]
    assert [b.next_offset for b in rs.batches] == [12, 13, 18]
    offsets = [r.offset for b in rs.batches for r in b.records]
    assert offsets == list(range(10, 18))
    first = rs.batches[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (99, 3, 0)
    assert first.partition_leader_epoch == 4
    assert [w.rec_tuple(r) for r in first.records] == [
        (10, T, b"a", b"1", []),
        (11, T + 5, None, b"2", [("h", b"x")]),
    ]
    last = rs.batches[2]
    assert [r.timestamp for r in last.records] == [T + 20 - i for i in range(5)]
    assert [r.value for r in last.records] == [bytes([i]) * i for i in range(5)]
    got = codec.decode_batches(data)
    assert [b.base_offset for b in got] == [10, 12, 13]


def test_decode_empty_input(codec: ModuleType) -> None:
    rs = codec.decode_record_set(b"")
    assert (rs.batches, rs.incomplete, rs.consumed, rs.partial_size) == ([], False, 0, 0)
    assert codec.decode_batches(b"") == []


def test_truncation_at_every_position(codec: ModuleType) -> None:
    parts = _three_batches()
    data = b"".join(parts)
    ends = [sum(len(p) for p in parts[: i + 1]) for i in range(len(parts))]
    for cut in range(len(data) + 1):
        rs = codec.decode_record_set(data[:cut])
        complete = [e for e in ends if e <= cut]
        consumed = complete[-1] if complete else 0
        assert rs.consumed == consumed, cut
        assert len(rs.batches) == len(complete), cut
        remaining = cut - consumed
        assert rs.incomplete is (remaining > 0), cut
        if remaining >= 12:
            assert rs.partial_size == len(parts[len(complete)]), cut
        else:
            assert rs.partial_size == 0, cut
        assert [b.base_offset for b in codec.decode_batches(data[:cut])] == [
            b.base_offset for b in rs.batches
        ]


@pytest.mark.parametrize(
    "wrap",
    [
        bytes,
        bytearray,
        memoryview,
        lambda d: memoryview(b"\x00" * 7 + d)[7:],
        lambda d: array.array("B", d),
    ],
    ids=["bytes", "bytearray", "memoryview", "offset-view", "array"],
)
def test_accepts_every_buffer(codec: ModuleType, wrap: Any) -> None:
    data = b"".join(_three_batches())
    rs = codec.decode_record_set(wrap(data))
    assert rs.consumed == len(data)
    assert [r.offset for b in rs.batches for r in b.records] == list(range(10, 18))
    assert rs.batches[0].records[0].key == b"a"


def test_decoded_values_do_not_alias_input(codec: ModuleType) -> None:
    data = bytearray(b"".join(_three_batches()))
    (first, *_rest) = codec.decode_batches(data)
    data[:] = bytes(len(data))
    r = first.records[0]
    assert (r.key, r.value) == (b"a", b"1")
    assert type(r.key) is bytes
    assert type(r.value) is bytes
    assert first.records[1].headers == [("h", b"x")]


def test_crc_mismatch(codec: ModuleType) -> None:
    good = _three_batches()[0]
    bad = bytearray(good)
    bad[-1] ^= 0x01  # last byte of the last header value
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(bytes(bad))
    with pytest.raises(CorruptRecordError):
        codec.decode_record_set(bytes(bad))
    (batch,) = codec.decode_batches(bytes(bad), check_crc=False)
    assert batch.records[1].headers == [("h", b"y")]
    assert batch.crc == w.parse_batch(good).crc
    # The stored CRC itself being wrong is the same failure.
    wrong_crc = w.patch(good, w.CRC, "I", w.parse_batch(good).crc ^ 0x80000000, recrc=False)
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(wrong_crc)
    assert len(codec.decode_batches(wrong_crc, check_crc=False)) == 1


def test_crc_mismatch_in_a_later_batch(codec: ModuleType) -> None:
    parts = _three_batches()
    bad = bytearray(parts[1])
    bad[w.RECORDS + 3] ^= 0x40
    with pytest.raises(CorruptRecordError):
        codec.decode_record_set(parts[0] + bytes(bad) + parts[2])


def test_fields_outside_crc_are_not_checked(codec: ModuleType) -> None:
    # The CRC covers attributes..end; baseOffset, batchLength and
    # partitionLeaderEpoch may change (the broker rewrites them) without a new CRC.
    good = _three_batches()[0]
    moved = w.patch(good, w.BASE_OFFSET, "q", 2**40, recrc=False)
    moved = w.patch(moved, w.PARTITION_LEADER_EPOCH, "i", 77, recrc=False)
    (batch,) = codec.decode_batches(moved)
    assert batch.base_offset == 2**40
    assert batch.partition_leader_epoch == 77
    assert [r.offset for r in batch.records] == [2**40, 2**40 + 1]
    assert batch.last_offset == 2**40 + 1


@pytest.mark.parametrize("magic", [3, 4, 127, -1, -128])
def test_unknown_magic(codec: ModuleType, magic: int) -> None:
    bad = w.patch(_three_batches()[1], w.MAGIC, "b", magic, recrc=False)
    for check in (True, False):
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(bad, check_crc=check)


def test_log_append_time_uses_max_timestamp(codec: ModuleType) -> None:
    data = w.batch(
        w.record(0, 0, None, b"a") + w.record(1, -50, None, b"b") + w.record(2, 70, None, b"c"),
        count=3,
        base_timestamp=T,
        max_timestamp=T + 12345,  # the broker's append time
        attributes=w.ATTR_TIMESTAMP_TYPE,
    )
    (batch,) = codec.decode_batches(data)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records] == [T + 12345] * 3
    created = w.patch(data, w.ATTRIBUTES, "h", 0)
    (batch,) = codec.decode_batches(created)
    assert batch.timestamp_type == 0
    assert [r.timestamp for r in batch.records] == [T, T - 50, T + 70]


def test_log_append_time_in_compressed_batch(codec: ModuleType) -> None:
    section = w.record(0, 0, None, b"a") + w.record(1, -50, None, b"b")
    data = w.batch(
        gzip.compress(section),
        count=2,
        base_timestamp=T,
        max_timestamp=T + 777,
        attributes=1 | w.ATTR_TIMESTAMP_TYPE,
    )
    (batch,) = codec.decode_batches(data)
    assert batch.compression == "gzip"
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records] == [T + 777] * 2


def test_builder_log_append_time_round_trip(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(timestamp_type=1)
    builder.append(T, None, b"a")
    builder.append(T + 10, None, b"b")
    (batch,) = codec.decode_batches(builder.build())
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == T + 10
    assert [r.timestamp for r in batch.records] == [T + 10, T + 10]


def test_empty_batch_after_compaction(codec: ModuleType) -> None:
    # The log cleaner keeps batches whose records were all removed (to retain
    # producer state): recordCount 0 with a lastOffsetDelta that still counts.
    data = w.batch(
        b"", count=0, base_offset=500, last_offset_delta=4, producer_id=8, producer_epoch=0
    )
    rs = codec.decode_record_set(data)
    (batch,) = rs.batches
    assert rs.consumed == len(data) == 61
    assert batch.records == []
    assert batch.record_count == 0
    assert batch.last_offset == 504
    assert batch.next_offset == 505


def test_compacted_offset_gaps(codec: ModuleType) -> None:
    data = w.batch(
        w.record(0, 0, b"k0", b"a") + w.record(5, 3, b"k5", b"b") + w.record(7, 4, b"k7", None),
        count=3,
        base_offset=1000,
        last_offset_delta=9,
        base_timestamp=T,
        max_timestamp=T + 4,
    )
    (batch,) = codec.decode_batches(data)
    assert [r.offset for r in batch.records] == [1000, 1005, 1007]
    assert batch.last_offset == 1009
    assert batch.next_offset == 1010
    assert batch.records[2].value is None


def test_large_offsets_and_ids(codec: ModuleType) -> None:
    base = 2**63 - 100
    data = w.batch(
        w.record(0, 0, None, b"x") + w.record(50, 0, None, b"y"),
        count=2,
        base_offset=base,
        last_offset_delta=50,
        producer_id=2**63 - 1,
        producer_epoch=32767,
        base_sequence=2**31 - 1,
        partition_leader_epoch=2**31 - 1,
        base_timestamp=2**62,
    )
    (batch,) = codec.decode_batches(data)
    assert [r.offset for r in batch.records] == [base, base + 50]
    assert batch.last_offset == base + 50
    assert batch.producer_id == 2**63 - 1
    assert batch.producer_epoch == 32767
    assert batch.base_sequence == 2**31 - 1
    assert batch.partition_leader_epoch == 2**31 - 1
    assert batch.base_timestamp == 2**62


def test_negative_header_fields(codec: ModuleType) -> None:
    data = w.batch(
        w.record(0, 0, None, b"x"),
        count=1,
        base_offset=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        partition_leader_epoch=-1,
        base_timestamp=-1,
        max_timestamp=-1,
    )
    (batch,) = codec.decode_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1
    assert batch.records[0].timestamp == -1


def test_record_attributes_are_exposed(codec: ModuleType) -> None:
    data = w.batch(w.record(0, 0, None, b"x", attributes=0x5A), count=1)
    (batch,) = codec.decode_batches(data)
    assert batch.records[0].attributes == 0x5A


def test_record_length_must_match_its_fields(codec: ModuleType) -> None:
    body = w.record_body(0, 0, b"k", b"value")
    for claimed in (len(body) + 1, len(body) - 1):
        records = w.varint(claimed) + body + b"\x00"  # one spare byte to read
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(w.batch(records, count=1))


def test_record_count_larger_than_records(codec: ModuleType) -> None:
    records = w.record(0, 0, None, b"a") + w.record(1, 0, None, b"b")
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(w.batch(records, count=3, last_offset_delta=2))


def test_record_count_smaller_than_records(codec: ModuleType) -> None:
    # Kafka rejects a batch whose records section holds more than recordCount
    # records ("Incorrect declared batch size, records still remaining").
    records = w.record(0, 0, None, b"a") + w.record(1, 0, None, b"b") + w.record(2, 0, None, b"c")
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(w.batch(records, count=2, last_offset_delta=1))


def test_invalid_utf8_header_key(codec: ModuleType) -> None:
    for bad in (b"\xff", b"\xc3", b"ok\xed\xa0\x80", b"\x80abc"):
        data = w.batch(w.record(0, 0, None, b"x", [(bad, b"v")]), count=1)
        for check in (True, False):
            with pytest.raises(CorruptRecordError):
                codec.decode_batches(data, check_crc=check)


def test_utf8_header_keys_decode(codec: ModuleType) -> None:
    headers = [("", None), ("ключ", b"1"), ("🎉", b""), ("a\x00b", b"\x00")]
    data = w.batch(w.record(0, 0, None, b"x", headers), count=1)
    (batch,) = codec.decode_batches(data)
    assert batch.records[0].headers == headers


@pytest.mark.parametrize("length", [0, 1, 11, 48])
def test_batch_length_too_small(codec: ModuleType, length: int) -> None:
    data = w.patch(w.batch(w.record(0, 0, None, b"x"), count=1), w.BATCH_LENGTH, "i", length)
    with pytest.raises(CorruptRecordError):
        codec.decode_record_set(data + bytes(100))


def test_record_constructor(codec: ModuleType) -> None:
    r = codec.Record(5, T, b"k", None)
    assert (r.offset, r.timestamp, r.key, r.value, r.attributes) == (5, T, b"k", None, 0)
    assert r.headers == []
    r = codec.Record(6, T, None, b"v", [("a", b"1"), ("b", None)], 3)
    assert r.headers == [("a", b"1"), ("b", None)]
    assert r.attributes == 3
