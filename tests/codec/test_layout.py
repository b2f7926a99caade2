"""Record batch v2 byte layout, checked field by field against Kafka's specification."""

from __future__ import annotations

import struct
from types import ModuleType

import codec_wire as w
import pytest

T = 1_700_000_000_000  # needs more than 32 bits

# A batch assembled by hand, byte by byte, from Kafka's record batch v2 layout.
EXPECTED = bytes.fromhex(
    "0000000000000005"  # baseOffset 5
    "0000004d"  # batchLength 77 = 89 - 12
    "00000003"  # partitionLeaderEpoch 3
    "02"  # magic 2
    "4ed84a20"  # crc: CRC-32C of bytes 21..88
    "0000"  # attributes: no compression, create time, not transactional
    "00000001"  # lastOffsetDelta 1
    "0000018bcfe56800"  # baseTimestamp T
    "0000018bcfe56800"  # maxTimestamp T (the second record is older)
    "0000000000001234"  # producerId 0x1234
    "0007"  # producerEpoch 7
    "0000002a"  # baseSequence 42
    "00000002"  # recordCount 2
    # record 0: null key, value b"v0", one header ("h", None)
    "16"  # length 11
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "01"  # keyLength -1 (null)
    "047630"  # valueLength 2, b"v0"
    "02"  # headerCount 1
    "0268"  # header key length 1, "h"
    "01"  # header value length -1 (null)
    # record 1: key b"k1", value b"value1", no headers, 200 ms older
    "1e"  # length 15
    "00"  # attributes
    "8f03"  # timestampDelta -200
    "02"  # offsetDelta 1
    "046b31"  # keyLength 2, b"k1"
    "0c76616c756531"  # valueLength 6, b"value1"
    "00"  # headerCount 0
)


def _fill(codec: ModuleType, **kwargs: int) -> object:
    builder = codec.BatchBuilder(**kwargs)
    assert builder.append(T, None, b"v0", [("h", None)]) == 0
    assert builder.append(T - 200, b"k1", b"value1") == 1
    return builder


def test_hand_assembled_bytes_are_self_consistent() -> None:
    assert len(EXPECTED) == 89
    assert w.crc32c(EXPECTED[21:]) == 0x4ED84A20
    built = w.batch(
        w.record(0, 0, None, b"v0", [("h", None)]) + w.record(1, -200, b"k1", b"value1"),
        count=2,
        base_offset=5,
        partition_leader_epoch=3,
        base_timestamp=T,
        producer_id=0x1234,
        producer_epoch=7,
        base_sequence=42,
    )
    assert built == EXPECTED


def test_builder_matches_hand_assembled(codec: ModuleType) -> None:
    builder = _fill(codec)
    assert builder.record_count == 2
    assert builder.size == 89
    assert builder.base_timestamp == T
    assert builder.max_timestamp == T
    out = builder.build(
        base_offset=5,
        producer_id=0x1234,
        producer_epoch=7,
        base_sequence=42,
        partition_leader_epoch=3,
    )
    assert type(out) is bytes
    assert out.hex() == EXPECTED.hex()


def test_builder_headers_empty_list_equals_none(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(T, None, b"v0", [("h", None)])
    builder.append(T - 200, b"k1", b"value1", [])
    out = builder.build(
        base_offset=5,
        producer_id=0x1234,
        producer_epoch=7,
        base_sequence=42,
        partition_leader_epoch=3,
    )
    assert out == EXPECTED


def test_record_size_matches_hand_assembled(codec: ModuleType) -> None:
    assert codec.record_size(0, 0, None, b"v0", [("h", None)]) == 12
    assert codec.record_size(1, -200, b"k1", b"value1") == 16
    assert codec.record_size(1, -200, b"k1", b"value1", []) == 16
    assert codec.RECORD_BATCH_OVERHEAD == 61


def test_decode_hand_assembled(codec: ModuleType) -> None:
    (batch,) = codec.decode_batches(EXPECTED)
    assert batch.base_offset == 5
    assert batch.batch_length == 77
    assert batch.partition_leader_epoch == 3
    assert batch.magic == 2
    assert batch.crc == 0x4ED84A20
    assert batch.attributes == 0
    assert batch.last_offset_delta == 1
    assert batch.base_timestamp == T
    assert batch.max_timestamp == T
    assert batch.producer_id == 0x1234
    assert batch.producer_epoch == 7
    assert batch.base_sequence == 42
    assert batch.record_count == 2
    assert batch.size == 89
    assert batch.last_offset == 6
    assert batch.next_offset == 7
    assert batch.compression == "none"
    assert batch.compression_type == 0
    assert batch.timestamp_type == 0
    assert batch.is_transactional is False
    assert batch.is_control is False
    assert batch.control_type is None
    assert batch.control_type_id == -1
    assert batch.coordinator_epoch == -1
    r0, r1 = batch.records
    assert w.rec_tuple(r0) == (5, T, None, b"v0", [("h", None)])
    assert w.rec_tuple(r1) == (6, T - 200, b"k1", b"value1", [])
    assert r0.attributes == 0
    assert r1.attributes == 0
    assert type(r1.key) is bytes
    assert type(r1.value) is bytes
    assert type(r0.headers[0][0]) is str


def test_every_header_field_at_its_offset(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(T + 10, b"a", b"b")
    builder.append(T, None, None)
    builder.append(T + 99, b"", b"")
    out = builder.build(
        base_offset=0x0102030405060708,
        producer_id=0x1122334455667788,
        producer_epoch=0x7FFE,
        base_sequence=0x7FFFFFF0,
        is_transactional=True,
        partition_leader_epoch=0x0A0B0C0D,
    )
    (base_offset,) = struct.unpack_from(">q", out, 0)
    (batch_length,) = struct.unpack_from(">i", out, 8)
    (leader_epoch,) = struct.unpack_from(">i", out, 12)
    (magic,) = struct.unpack_from(">b", out, 16)
    (crc,) = struct.unpack_from(">I", out, 17)
    (attributes,) = struct.unpack_from(">h", out, 21)
    (last_offset_delta,) = struct.unpack_from(">i", out, 23)
    (base_timestamp,) = struct.unpack_from(">q", out, 27)
    (max_timestamp,) = struct.unpack_from(">q", out, 35)
    (producer_id,) = struct.unpack_from(">q", out, 43)
    (producer_epoch,) = struct.unpack_from(">h", out, 51)
    (base_sequence,) = struct.unpack_from(">i", out, 53)
    (record_count,) = struct.unpack_from(">i", out, 57)
    assert base_offset == 0x0102030405060708
    assert batch_length == len(out) - 12
    assert leader_epoch == 0x0A0B0C0D
    assert magic == 2
    assert crc == w.crc32c(out[21:])
    assert attributes == w.ATTR_TRANSACTIONAL
    assert last_offset_delta == 2
    assert base_timestamp == T + 10
    assert max_timestamp == T + 99
    assert producer_id == 0x1122334455667788
    assert producer_epoch == 0x7FFE
    assert base_sequence == 0x7FFFFFF0
    assert record_count == 3
    records = w.parse_records(out[61:], 3)
    assert [(r.timestamp_delta, r.offset_delta, r.key, r.value) for r in records] == [
        (0, 0, b"a", b"b"),
        (-10, 1, None, None),
        (89, 2, b"", b""),
    ]
    assert all(r.attributes == 0 and r.headers == [] for r in records)


def test_build_defaults(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(T, b"k", b"v")
    p = w.parse_batch(builder.build())
    assert p.base_offset == 0
    assert p.producer_id == -1
    assert p.producer_epoch == -1
    assert p.base_sequence == -1
    assert p.partition_leader_epoch == -1
    assert p.attributes == 0
    assert p.magic == 2


@pytest.mark.parametrize(
    ("kwargs", "attr"),
    [
        ({"compression": 1}, 1),
        ({"compression": 2}, 2),
        ({"compression": 3}, 3),
        ({"compression": 4}, 4),
        ({"timestamp_type": 1}, w.ATTR_TIMESTAMP_TYPE),
        ({"compression": 4, "timestamp_type": 1}, 4 | w.ATTR_TIMESTAMP_TYPE),
    ],
)
def test_attribute_bits(codec: ModuleType, kwargs: dict[str, int], attr: int) -> None:
    builder = codec.BatchBuilder(**kwargs)
    builder.append(T, b"k", b"v" * 100)
    out = builder.build()
    assert struct.unpack_from(">h", out, 21)[0] == attr
    out = builder.build(is_transactional=True)
    assert struct.unpack_from(">h", out, 21)[0] == attr | w.ATTR_TRANSACTIONAL
    assert struct.unpack_from(">I", out, 17)[0] == w.crc32c(out[21:])


def test_headers_layout(codec: ModuleType) -> None:
    headers = [("", b""), ("é✓", b"\x00\xff"), ("h", None), ("h", b"dup")]
    builder = codec.BatchBuilder()
    builder.append(T, b"key", None, headers)
    out = builder.build()
    (rec,) = w.parse_records(out[61:], 1)
    assert rec.key == b"key"
    assert rec.value is None
    assert rec.headers == headers
    body = w.record_body(0, 0, b"key", None, headers)
    assert out[61:] == w.varint(len(body)) + body


@pytest.mark.parametrize("size", [0, 1, 63, 64, 127, 128, 8191, 8192, 70000])
def test_length_varint_widths(codec: ModuleType, size: int) -> None:
    value = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    key = value[: size // 3]
    builder = codec.BatchBuilder()
    builder.append(T, key, value, [("x" * (size % 200), value[:50])])
    assert builder.size == 61 + codec.record_size(
        0, 0, key, value, [("x" * (size % 200), value[:50])]
    )
    out = builder.build()
    expected = w.record(0, 0, key, value, [("x" * (size % 200), value[:50])])
    assert out[61:] == expected
    assert len(out) == builder.size


def test_timestamp_deltas_need_varlong(codec: ModuleType) -> None:
    # Deltas beyond 32 bits must be written as varlongs, not truncated.
    stamps = [T, T + 2**40, T - 2**35, 0, 2**62]
    builder = codec.BatchBuilder()
    for ts in stamps:
        builder.append(ts, None, b"x")
    out = builder.build()
    p = w.parse_batch(out)
    assert p.base_timestamp == T
    assert p.max_timestamp == 2**62
    recs = w.parse_records(p.records, len(stamps))
    assert [r.timestamp_delta for r in recs] == [ts - T for ts in stamps]
    assert [r.offset_delta for r in recs] == list(range(len(stamps)))
