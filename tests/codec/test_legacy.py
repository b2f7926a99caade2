"""Legacy message sets (magic 0 and 1): encoding, decoding, compressed wrappers."""

from __future__ import annotations

import gzip
import struct
from types import ModuleType
from typing import Any

import codec_wire as w
import cramjam
import lz4.frame
import pytest

from pykaf.errors import CorruptRecordError

T = 1_600_000_000_000
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)

# Assembled by hand from the legacy message format.
MAGIC0 = bytes.fromhex(
    "0000000000000007"  # offset 7
    "00000014"  # message size 20
    "a4cdab3a"  # CRC-32 of magic..end
    "00"  # magic 0
    "00"  # attributes
    "000000016b"  # key b"k"
    "0000000568656c6c6f"  # value b"hello"
)
MAGIC1 = bytes.fromhex(
    "0000000000000008"  # offset 8
    "0000001b"  # message size 27
    "61df48e7"  # CRC-32 of magic..end
    "01"  # magic 1
    "00"  # attributes: create time, no compression
    "00000174876e8000"  # timestamp T
    "ffffffff"  # null key
    "0000000568656c6c6f"  # value b"hello"
)


def test_hand_assembled_constants() -> None:
    assert w.legacy_message(7, b"k", b"hello", magic=0) == MAGIC0
    assert w.legacy_message(8, None, b"hello", magic=1, timestamp=T) == MAGIC1


def test_decode_hand_assembled_magic0(codec: ModuleType) -> None:
    (batch,) = codec.decode_batches(MAGIC0)
    assert batch.magic == 0
    assert batch.base_offset == 7
    assert batch.last_offset == 7
    assert batch.next_offset == 8
    assert batch.size == len(MAGIC0)
    assert batch.compression == "none"
    assert batch.is_control is False
    assert batch.is_transactional is False
    assert batch.control_type is None
    (record,) = batch.records
    assert w.rec_tuple(record) == (7, -1, b"k", b"hello", [])


def test_decode_hand_assembled_magic1(codec: ModuleType) -> None:
    (batch,) = codec.decode_batches(MAGIC1)
    assert batch.magic == 1
    assert batch.base_offset == 8
    assert batch.last_offset == 8
    assert batch.size == len(MAGIC1)
    assert batch.timestamp_type == 0
    (record,) = batch.records
    assert w.rec_tuple(record) == (8, T, None, b"hello", [])


def test_decode_message_set(codec: ModuleType) -> None:
    data = (
        MAGIC0
        + MAGIC1
        + w.legacy_message(9, b"tomb", None, magic=1, timestamp=T + 1)
        + w.legacy_message(10, None, None, magic=0)
        + w.legacy_message(11, b"", b"", magic=1, timestamp=-1)
    )
    rs = codec.decode_record_set(data)
    assert rs.consumed == len(data)
    assert rs.incomplete is False
    assert [b.magic for b in rs.batches] == [0, 1, 1, 0, 1]
    assert [len(b.records) for b in rs.batches] == [1] * 5
    assert [w.rec_tuple(b.records[0]) for b in rs.batches] == [
        (7, -1, b"k", b"hello", []),
        (8, T, None, b"hello", []),
        (9, T + 1, b"tomb", None, []),
        (10, -1, None, None, []),
        (11, -1, b"", b"", []),
    ]


def test_legacy_crc_mismatch(codec: ModuleType) -> None:
    for good in (MAGIC0, MAGIC1):
        bad = bytearray(good)
        bad[-1] ^= 0x20  # b"hello" -> b"hellO"
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(bytes(bad))
        (batch,) = codec.decode_batches(bytes(bad), check_crc=False)
        assert batch.records[0].value == b"hellO"


def test_legacy_truncation(codec: ModuleType) -> None:
    data = MAGIC0 + MAGIC1
    for cut in range(len(data) + 1):
        rs = codec.decode_record_set(data[:cut])
        done = [e for e in (len(MAGIC0), len(data)) if e <= cut]
        consumed = done[-1] if done else 0
        assert rs.consumed == consumed, cut
        assert len(rs.batches) == len(done), cut
        assert rs.incomplete is (cut > consumed), cut
        pending = cut - consumed
        want = 0 if pending < 12 else (len(MAGIC1) if done else len(MAGIC0))
        assert rs.partial_size == want, cut


def test_log_append_time_v1(codec: ModuleType) -> None:
    data = w.legacy_message(3, None, b"v", magic=1, timestamp=T + 7, attributes=0x08)
    (batch,) = codec.decode_batches(data)
    assert batch.timestamp_type == 1
    assert batch.records[0].timestamp == T + 7


# -- compressed wrappers ------------------------------------------------------


def _xerial(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return XERIAL_HEADER + struct.pack(">i", len(block)) + block


def _unsnappy(data: bytes) -> bytes:
    if data[:8] != XERIAL_HEADER[:8]:
        return bytes(cramjam.snappy.decompress_raw(data))
    pos, out = 16, b""
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out


COMPRESSORS: dict[int, Any] = {
    1: gzip.compress,
    2: _xerial,
    3: lambda d: lz4.frame.compress(d, block_linked=False),
}
DECOMPRESSORS: dict[int, Any] = {1: gzip.decompress, 2: _unsnappy, 3: lz4.frame.decompress}
NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4"}

INNER = [(None, b"first"), (b"k2", b"second"), (b"k3", None)]


@pytest.mark.parametrize("compression", [1, 2])
def test_decode_magic1_wrapper_relative_offsets(codec: ModuleType, compression: int) -> None:
    inner = b"".join(
        w.legacy_message(i, k, v, magic=1, timestamp=T + i * 10) for i, (k, v) in enumerate(INNER)
    )
    wrapper = w.legacy_message(
        102,
        None,
        COMPRESSORS[compression](inner),
        magic=1,
        timestamp=T + 20,
        attributes=compression,
    )
    rs = codec.decode_record_set(wrapper)
    (batch,) = rs.batches
    assert rs.consumed == len(wrapper)
    assert batch.magic == 1
    assert batch.compression == NAMES[compression]
    assert batch.size == len(wrapper)
    assert batch.last_offset == 102
    assert batch.base_offset == 100
    assert [w.rec_tuple(r) for r in batch.records] == [
        (100, T, None, b"first", []),
        (101, T + 10, b"k2", b"second", []),
        (102, T + 20, b"k3", None, []),
    ]


def test_decode_magic1_wrapper_lz4(codec: ModuleType) -> None:
    inner = b"".join(
        w.legacy_message(i, k, v, magic=1, timestamp=T) for i, (k, v) in enumerate(INNER)
    )
    wrapper = w.legacy_message(40, None, COMPRESSORS[3](inner), magic=1, timestamp=T, attributes=3)
    (batch,) = codec.decode_batches(wrapper)
    assert [r.offset for r in batch.records] == [38, 39, 40]
    assert [r.value for r in batch.records] == [v for _, v in INNER]


def test_decode_magic1_wrapper_with_compaction_gaps(codec: ModuleType) -> None:
    # Relative inner offsets 0, 2, 5 under a wrapper at 205: absolute 200, 202, 205.
    inner = b"".join(
        w.legacy_message(rel, k, v, magic=1, timestamp=T)
        for rel, (k, v) in zip((0, 2, 5), INNER, strict=True)
    )
    wrapper = w.legacy_message(205, None, gzip.compress(inner), magic=1, timestamp=T, attributes=1)
    (batch,) = codec.decode_batches(wrapper)
    assert [r.offset for r in batch.records] == [200, 202, 205]
    assert batch.last_offset == 205


def test_decode_magic1_wrapper_log_append_time(codec: ModuleType) -> None:
    inner = b"".join(
        w.legacy_message(i, k, v, magic=1, timestamp=T + i) for i, (k, v) in enumerate(INNER)
    )
    wrapper = w.legacy_message(
        2, None, gzip.compress(inner), magic=1, timestamp=T + 999, attributes=1 | 0x08
    )
    (batch,) = codec.decode_batches(wrapper)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records] == [T + 999] * 3


@pytest.mark.parametrize("compression", [1, 2])
def test_decode_magic0_wrapper_absolute_offsets(codec: ModuleType, compression: int) -> None:
    inner = b"".join(
        w.legacy_message(off, k, v, magic=0)
        for off, (k, v) in zip((50, 51, 53), INNER, strict=True)
    )
    wrapper = w.legacy_message(
        53, None, COMPRESSORS[compression](inner), magic=0, attributes=compression
    )
    (batch,) = codec.decode_batches(wrapper)
    assert batch.magic == 0
    assert batch.compression == NAMES[compression]
    assert [w.rec_tuple(r) for r in batch.records] == [
        (50, -1, None, b"first", []),
        (51, -1, b"k2", b"second", []),
        (53, -1, b"k3", None, []),
    ]
    assert batch.last_offset == 53


def test_wrapper_followed_by_plain_messages(codec: ModuleType) -> None:
    inner = b"".join(w.legacy_message(i, None, b"x%d" % i, magic=1, timestamp=T) for i in range(4))
    data = w.legacy_message(
        9, None, gzip.compress(inner), magic=1, timestamp=T, attributes=1
    ) + w.legacy_message(10, None, b"plain", magic=1, timestamp=T)
    batches = codec.decode_batches(data)
    assert [[r.offset for r in b.records] for b in batches] == [[6, 7, 8, 9], [10]]


def test_compressed_wrapper_with_no_inner_messages(codec: ModuleType) -> None:
    # Kafka: "Found invalid compressed record set with no inner records".
    wrapper = w.legacy_message(5, None, gzip.compress(b""), magic=1, timestamp=T, attributes=1)
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(wrapper)


def test_compressed_wrapper_with_garbage_inside(codec: ModuleType) -> None:
    junk = b"\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\xf0" + b"\x00" * 20
    for payload in (gzip.compress(junk), gzip.compress(MAGIC1[:-3]), b"not gzip at all"):
        wrapper = w.legacy_message(5, None, payload, magic=1, timestamp=T, attributes=1)
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(wrapper)


def test_compressed_wrapper_with_null_value(codec: ModuleType) -> None:
    wrapper = w.legacy_message(5, None, None, magic=1, timestamp=T, attributes=1)
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(wrapper)


# -- encoding -----------------------------------------------------------------

MESSAGES = [
    (100, T, None, b"v0"),
    (101, T + 5, b"k1", b"v1" * 30),
    (102, T - 3, b"k2", None),
    (103, T + 1, b"", b""),
]


@pytest.mark.parametrize("magic", [0, 1])
def test_encode_uncompressed_is_exact(codec: ModuleType, magic: int) -> None:
    out = codec.encode_legacy_message_set(MESSAGES, magic=magic)
    want = b"".join(
        w.legacy_message(off, k, v, magic=magic, timestamp=ts) for off, ts, k, v in MESSAGES
    )
    assert type(out) is bytes
    assert out == want


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, 1, 2, 3])
def test_encode_decode_round_trip(codec: ModuleType, magic: int, compression: int) -> None:
    out = codec.encode_legacy_message_set(MESSAGES, magic=magic, compression=compression)
    batches = codec.decode_batches(out)
    records = [r for b in batches for r in b.records]
    assert all(b.magic == magic for b in batches)
    assert len(batches) == (len(MESSAGES) if compression == 0 else 1)
    assert [(r.offset, r.key, r.value) for r in records] == [(o, k, v) for o, _, k, v in MESSAGES]
    if magic == 1:
        assert [r.timestamp for r in records] == [ts for _, ts, _, _ in MESSAGES]
    else:
        assert [r.timestamp for r in records] == [-1] * len(MESSAGES)
    if compression:
        assert batches[0].compression == NAMES[compression]
        assert batches[0].last_offset == 103


@pytest.mark.parametrize(("magic", "compression"), [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3)])
def test_encode_compressed_wrapper_layout(codec: ModuleType, magic: int, compression: int) -> None:
    out = codec.encode_legacy_message_set(MESSAGES, magic=magic, compression=compression)
    (wrapper,) = w.parse_legacy(out)  # one wrapper message with a valid CRC-32
    assert wrapper.magic == magic
    assert wrapper.attributes & 0x07 == compression
    assert wrapper.key is None
    assert wrapper.offset == 103  # the last inner message's absolute offset
    assert wrapper.value is not None
    inner = w.parse_legacy(DECOMPRESSORS[compression](wrapper.value))
    assert [(m.key, m.value) for m in inner] == [(k, v) for _, _, k, v in MESSAGES]
    assert all(m.magic == magic and m.attributes & 0x07 == 0 for m in inner)
    if magic == 0:
        assert [m.offset for m in inner] == [100, 101, 102, 103]
    else:
        # Relative offsets: absolute = wrapper - last relative + relative.
        rel = [m.offset for m in inner]
        assert [103 - rel[-1] + r for r in rel] == [100, 101, 102, 103]
        assert [m.timestamp for m in inner] == [ts for _, ts, _, _ in MESSAGES]
        assert wrapper.timestamp == max(ts for _, ts, _, _ in MESSAGES)


def test_encode_with_offset_gaps(codec: ModuleType) -> None:
    msgs = [(10, T, None, b"a"), (13, T, None, b"b"), (20, T, None, b"c")]
    for magic in (0, 1):
        for compression in (0, 1):
            out = codec.encode_legacy_message_set(msgs, magic=magic, compression=compression)
            offsets = [r.offset for b in codec.decode_batches(out) for r in b.records]
            assert offsets == [10, 13, 20]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"magic": 2},
        {"magic": -1},
        {"magic": 1, "compression": 4},  # zstd needs magic 2
        {"magic": 0, "compression": 4},
        {"magic": 1, "compression": 9},
    ],
)
def test_encode_rejects_bad_arguments(codec: ModuleType, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        codec.encode_legacy_message_set(MESSAGES, **kwargs)


@pytest.mark.parametrize(
    "message", [(2**63, T, None, b"v"), (0, 2**63, None, b"v"), (-(2**63) - 1, T, None, b"v")]
)
@pytest.mark.parametrize("compression", [0, 1])
def test_encode_rejects_fields_outside_their_width(
    codec: ModuleType, message: tuple[int, int, None, bytes], compression: int
) -> None:
    with pytest.raises(ValueError):
        codec.encode_legacy_message_set([message], magic=1, compression=compression)


# -- mixed --------------------------------------------------------------------


def test_legacy_then_v2_in_one_buffer(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(T + 50, b"v2k", b"v2v", [("h", b"1")])
    builder.append(T + 51, None, b"v2v2")
    v2 = builder.build(base_offset=104)
    legacy = codec.encode_legacy_message_set(MESSAGES[:2], magic=0)
    legacy += codec.encode_legacy_message_set(MESSAGES[2:], magic=1, compression=1)
    data = legacy + v2
    rs = codec.decode_record_set(data)
    assert rs.consumed == len(data)
    assert rs.incomplete is False
    assert [b.magic for b in rs.batches] == [0, 0, 1, 2]
    offsets = [r.offset for b in rs.batches for r in b.records]
    assert offsets == [100, 101, 102, 103, 104, 105]
    last = rs.batches[-1]
    assert last.records[0].headers == [("h", b"1")]
    # Cut inside the v2 batch: the legacy part is still returned.
    rs = codec.decode_record_set(data[:-5])
    assert rs.incomplete is True
    assert rs.consumed == len(legacy)
    assert rs.partial_size == len(v2)
    assert [b.magic for b in rs.batches] == [0, 0, 1]
