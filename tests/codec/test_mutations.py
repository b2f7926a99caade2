"""Damaged input: the decoders may succeed, report an incomplete set, or raise
CorruptRecordError. Anything else (IndexError, struct.error, MemoryError,
UnicodeDecodeError, OverflowError, a crash, a hang) is a bug.
"""

from __future__ import annotations

import faulthandler
import gzip
import random
import struct
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import codec_wire as w
import cramjam
import lz4.frame
import pytest
import zstandard

from pykaf.errors import CorruptRecordError

T = 1_700_000_000_000
HANG_LIMIT = 60  # seconds; faulthandler kills the run (with tracebacks) past this


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    faulthandler.dump_traceback_later(HANG_LIMIT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _touch(batch: Any) -> None:
    """Read every field and property, as a consumer would."""
    for name in (
        "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
        "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
        "base_sequence", "record_count", "control_type_id", "coordinator_epoch", "size",
        "last_offset", "next_offset", "compression_type", "timestamp_type",
    ):  # fmt: skip
        assert isinstance(getattr(batch, name), int), name
    assert batch.compression in ("none", "gzip", "snappy", "lz4", "zstd")
    assert isinstance(batch.is_transactional, bool)
    assert isinstance(batch.is_control, bool)
    assert batch.control_type in (None, "commit", "abort")
    for r in batch.records:
        assert isinstance(r.offset, int)
        assert isinstance(r.timestamp, int)
        assert isinstance(r.attributes, int)
        assert r.key is None or type(r.key) is bytes
        assert r.value is None or type(r.value) is bytes
        for hk, hv in r.headers:
            assert type(hk) is str
            assert hv is None or type(hv) is bytes


def outcome(codec: ModuleType, data: bytes, check_crc: bool = True) -> Any:
    """Decode ``data``; return "corrupt" or the RecordSet, failing on anything else."""
    try:
        rs = codec.decode_record_set(data, check_crc=check_crc)
    except CorruptRecordError:
        result: Any = "corrupt"
    except BaseException as exc:
        pytest.fail(
            f"{codec.IMPLEMENTATION}: decode_record_set(check_crc={check_crc}) raised "
            f"{type(exc).__name__}: {exc!r} on {len(data)} bytes: {data.hex()}"
        )
    else:
        assert 0 <= rs.consumed <= len(data)
        assert sum(b.size for b in rs.batches) == rs.consumed
        assert rs.incomplete is (rs.consumed < len(data))
        assert rs.partial_size == 0 or rs.partial_size > len(data) - rs.consumed
        for batch in rs.batches:
            _touch(batch)
        result = rs
    try:
        batches = codec.decode_batches(data, check_crc=check_crc)
    except CorruptRecordError:
        assert result == "corrupt", "decode_batches raised where decode_record_set did not"
    except BaseException as exc:
        pytest.fail(
            f"{codec.IMPLEMENTATION}: decode_batches(check_crc={check_crc}) raised "
            f"{type(exc).__name__}: {exc!r} on {data.hex()}"
        )
    else:
        assert result != "corrupt", "decode_batches succeeded where decode_record_set raised"
        assert [b.size for b in batches] == [b.size for b in result.batches]
    return result


def _xerial(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block


COMPRESSORS = {
    "none": lambda d: d,
    "gzip": gzip.compress,
    "snappy": _xerial,
    "lz4": lambda d: lz4.frame.compress(d, block_linked=False),
    "zstd": zstandard.ZstdCompressor().compress,
}


def _corpus() -> dict[str, tuple[bytes, int]]:
    """Small valid inputs: name -> (bytes, where the CRC-protected region starts)."""
    out: dict[str, tuple[bytes, int]] = {}
    section = (
        w.record(0, 0, b"key", b"value", [("h", b"1"), ("n", None)])
        + w.record(1, -9, None, b"v" * 20)
        + w.record(2, 2**33, b"", None, [("é", b"")])
    )
    for code, (name, compress) in enumerate(COMPRESSORS.items()):
        out[f"v2-{name}"] = (
            w.batch(
                compress(section),
                count=3,
                attributes=code,
                base_offset=40,
                base_timestamp=T,
                max_timestamp=T + 2**33,
                producer_id=3,
                producer_epoch=1,
            ),
            17,
        )
    out["v2-hand"] = (
        w.batch(
            w.record(0, 0, None, b"x", [("k", None)]) + w.record(1, -300, b"kk", b""),
            count=2,
            base_timestamp=T,
            attributes=w.ATTR_TIMESTAMP_TYPE,
        ),
        17,
    )
    out["control"] = (
        w.batch(
            w.record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 6)),
            count=1,
            attributes=0x30,
        ),
        17,
    )
    out["legacy0"] = (w.legacy_message(5, b"k", b"value", magic=0), 12)
    out["legacy1"] = (w.legacy_message(6, None, b"value", magic=1, timestamp=T), 12)
    inner1 = b"".join(
        w.legacy_message(i, None, b"in%d" % i, magic=1, timestamp=T) for i in range(3)
    )
    out["legacy1-gzip"] = (
        w.legacy_message(9, None, gzip.compress(inner1), magic=1, timestamp=T, attributes=1),
        12,
    )
    inner0 = b"".join(w.legacy_message(7 + i, b"k", b"in", magic=0) for i in range(2))
    out["legacy0-gzip"] = (
        w.legacy_message(8, None, gzip.compress(inner0), magic=0, attributes=1),
        12,
    )
    return out


CORPUS = _corpus()


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_is_valid(codec: ModuleType, name: str) -> None:
    data, _ = CORPUS[name]
    rs = outcome(codec, data)
    assert rs != "corrupt"
    assert rs.consumed == len(data)
    assert len(rs.batches) == 1


@pytest.mark.parametrize("name", list(CORPUS))
def test_truncate_everywhere(codec: ModuleType, name: str) -> None:
    data, _ = CORPUS[name]
    for cut in range(len(data)):
        for check in (True, False):
            rs = outcome(codec, data[:cut], check)
            # A cut batch is not corrupt, just incomplete.
            assert rs != "corrupt", (cut, check)
            assert (rs.batches, rs.consumed, rs.incomplete) == ([], 0, cut > 0), cut
            assert rs.partial_size == (len(data) if cut >= 12 else 0), cut


@pytest.mark.parametrize("name", list(CORPUS))
def test_bit_flips(codec: ModuleType, name: str) -> None:
    data, protected = CORPUS[name]
    rnd = random.Random(hash(name) & 0xFFFF)
    positions = list(range(len(data))) * 4
    rnd.shuffle(positions)
    for pos in positions[:500]:
        bad = bytearray(data)
        bad[pos] ^= 1 << rnd.randrange(8)
        bad_bytes = bytes(bad)
        result = outcome(codec, bad_bytes, True)
        if pos >= protected:
            # CRC-32C and CRC-32 detect every single-bit error in what they cover.
            assert result == "corrupt", f"flip at {pos} went unnoticed: {bad_bytes.hex()}"
        outcome(codec, bad_bytes, False)


@pytest.mark.parametrize("name", [n for n, (_, protected) in CORPUS.items() if protected == 17])
def test_random_byte_damage_with_fixed_crc(codec: ModuleType, name: str) -> None:
    data, _ = CORPUS[name]
    rnd = random.Random(len(data))
    for _ in range(400):
        bad = bytearray(data)
        for _ in range(rnd.randint(1, 3)):
            bad[rnd.randrange(21, len(bad))] = rnd.randrange(256)
        outcome(codec, w.fix_crc(bad), True)


@pytest.mark.parametrize("name", list(CORPUS))
def test_garbage_after_valid_data(codec: ModuleType, name: str) -> None:
    data, _ = CORPUS[name]
    (good,) = codec.decode_batches(data)
    rnd = random.Random(7)
    for n in [*range(1, 30), 61, 100, 300]:
        garbage = bytes(rnd.randrange(256) for _ in range(n))
        for check in (True, False):
            rs = outcome(codec, data + garbage, check)
            if n < 12:
                # Too short even for a batch header: a clean partial tail.
                assert rs != "corrupt"
                assert (rs.consumed, rs.incomplete, rs.partial_size) == (len(data), True, 0)
            if rs != "corrupt":
                assert rs.batches[0].size == good.size
                assert [w.rec_tuple(r) for r in rs.batches[0].records] == [
                    w.rec_tuple(r) for r in good.records
                ]


@pytest.mark.parametrize("n", [12, 16, 17, 40, 200])
def test_zero_padding_after_valid_data(codec: ModuleType, n: int) -> None:
    # Zero bytes declare a batch of 12 bytes: smaller than any valid batch.
    data, _ = CORPUS["v2-none"]
    for check in (True, False):
        assert outcome(codec, data + bytes(n), check) == "corrupt"


# -- forged fields with a valid CRC ---------------------------------------------


def _v2(records: bytes, count: int = 1, **kw: Any) -> bytes:
    return w.batch(records, count=count, base_timestamp=T, **kw)


def _forged_record(
    *,
    length: int | None = None,
    ts: bytes | None = None,
    od: bytes | None = None,
    key: bytes | None = None,
    value: bytes | None = None,
    headers: bytes | None = None,
) -> bytes:
    body = b"\x00"
    body += w.varint(0) if ts is None else ts
    body += w.varint(0) if od is None else od
    body += w.varint(1) + b"k" if key is None else key
    body += w.varint(1) + b"v" if value is None else value
    body += w.varint(0) if headers is None else headers
    return (w.varint(len(body)) if length is None else w.varint(length)) + body


BIG32 = 2**31 - 1
STRICT_V2: dict[str, bytes] = {
    "record length huge": _v2(_forged_record(length=BIG32)),
    "record length negative": _v2(_forged_record(length=-5)),
    "record length zero": _v2(_forged_record(length=0)),
    "record length one short": _v2(w.varint(7) + _forged_record()[1:]),
    "key length huge": _v2(_forged_record(key=w.varint(BIG32) + b"k")),
    "key length past end": _v2(_forged_record(key=w.varint(200) + b"k")),
    "value length huge": _v2(_forged_record(value=w.varint(BIG32) + b"v")),
    "value length min int": _v2(_forged_record(value=w.varint(-(2**31)) + b"v")),
    "header count huge": _v2(_forged_record(headers=w.varint(BIG32))),
    "header count negative": _v2(_forged_record(headers=w.varint(-1))),
    "header count min int": _v2(_forged_record(headers=w.varint(-(2**31)))),
    "header count past end": _v2(
        _forged_record(headers=w.varint(3) + w.varint(1) + b"h" + w.varint(-1))
    ),
    "header key length huge": _v2(_forged_record(headers=w.varint(1) + w.varint(BIG32) + b"h")),
    "header key length -1": _v2(_forged_record(headers=w.varint(1) + w.varint(-1) + w.varint(-1))),
    "header key length -7": _v2(_forged_record(headers=w.varint(1) + w.varint(-7) + w.varint(-1))),
    "header value length huge": _v2(
        _forged_record(headers=w.varint(1) + w.varint(1) + b"h" + w.varint(BIG32))
    ),
    "header key invalid utf-8": _v2(
        _forged_record(headers=w.varint(1) + w.varint(2) + b"\xc3\x28" + w.varint(-1))
    ),
    "offset delta varint 6 bytes": _v2(_forged_record(od=b"\x80" * 5 + b"\x00")),
    "timestamp delta varlong 11 bytes": _v2(_forged_record(ts=b"\x80" * 10 + b"\x00")),
    "record length varint 6 bytes": _v2(b"\xff" * 6 + b"\x01" + b"\x00" * 20),
    "record count huge": _v2(_forged_record(), count=BIG32, last_offset_delta=0),
    "record count negative": _v2(_forged_record(), count=-1, last_offset_delta=0),
    "record count min int": _v2(_forged_record(), count=-(2**31), last_offset_delta=0),
    "record count 2 with 1 record": _v2(_forged_record(), count=2),
    "records truncated mid-record": _v2(_forged_record()[:-2]),
    "record count huge, gzip": _v2(
        gzip.compress(_forged_record()), count=BIG32, attributes=1, last_offset_delta=0
    ),
    "gzip section of garbage": _v2(b"\x1f\x8b" + b"\xff" * 30, attributes=1),
    "snappy section of garbage": _v2(b"\xff" * 30, attributes=2),
    "lz4 section of garbage": _v2(b"\x04\x22\x4d\x18" + b"\xff" * 30, attributes=3),
    "zstd section of garbage": _v2(b"\x28\xb5\x2f\xfd" + b"\xff" * 30, attributes=4),
    "xerial block length huge": _v2(
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, BIG32) + b"\x00" * 10, attributes=2
    ),
    "xerial block length negative": _v2(
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, -4) + b"\x00" * 10, attributes=2
    ),
    "xerial header truncated": _v2(b"\x82SNAPPY\x00\x00\x00", attributes=2),
    "snappy claims 2 GiB": _v2(b"\xff\xff\xff\xff\x07\x00", attributes=2),
    "compression id 7": _v2(_forged_record(), attributes=7),
    "control batch with a 1-byte key": _v2(_forged_record(), attributes=0x30),
}

LENIENT_V2: dict[str, bytes] = {
    # Java reads any negative length as null here, so either reading is defensible.
    "key length -2": _v2(_forged_record(key=w.varint(-2))),
    "value length -9": _v2(_forged_record(value=w.varint(-9))),
    "header value length -3": _v2(
        _forged_record(headers=w.varint(1) + w.varint(1) + b"h" + w.varint(-3))
    ),
    "record count 0 with records": _v2(_forged_record(), count=0, last_offset_delta=0),
    "last offset delta negative": _v2(_forged_record(), last_offset_delta=-5),
    "last offset delta huge": _v2(_forged_record(), last_offset_delta=BIG32),
    "offset delta negative": _v2(_forged_record(od=w.varint(-(2**31)))),
    "timestamp delta extreme": _v2(_forged_record(ts=w.varint(2**63 - 1)), max_timestamp=T),
    "timestamp delta extreme negative": _v2(_forged_record(ts=w.varint(-(2**63)))),
    "base timestamp max": w.batch(
        _forged_record(ts=w.varint(2**62)), count=1, base_timestamp=2**63 - 1
    ),
    "base offset max": w.batch(_forged_record(od=w.varint(BIG32)), count=1, base_offset=2**63 - 1),
    "record attributes 0xff": _v2(b"\x10\xff" + _forged_record()[2:]),
    "log append time, control, transactional bits": _v2(_forged_record(), attributes=0x38),
    "high attribute bits": _v2(_forged_record(), attributes=-0x8000),
    "control batch with two markers": _v2(
        w.record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 1))
        + w.record(1, 0, struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 2)),
        count=2,
        attributes=0x30,
    ),
    "control key version 5": _v2(
        w.record(0, 0, struct.pack(">hh", 5, 1), struct.pack(">hi", 3, 1)), attributes=0x30
    ),
    "control key with trailing bytes": _v2(
        w.record(0, 0, struct.pack(">hhi", 0, 1, 9), struct.pack(">hi", 0, 1)), attributes=0x30
    ),
}


@pytest.mark.parametrize("name", list(STRICT_V2))
def test_forged_v2_is_corrupt(codec: ModuleType, name: str) -> None:
    data = STRICT_V2[name]
    for check in (True, False):
        assert outcome(codec, data, check) == "corrupt", name


@pytest.mark.parametrize("name", list(LENIENT_V2))
def test_forged_v2_is_clean(codec: ModuleType, name: str) -> None:
    data = LENIENT_V2[name]
    for check in (True, False):
        outcome(codec, data, check)


def test_batch_length_forgeries(codec: ModuleType) -> None:
    good, _ = CORPUS["v2-none"]
    for length in (-1, -(2**31), 0, 1, 13, 48):
        bad = w.patch(good, w.BATCH_LENGTH, "i", length)
        for check in (True, False):
            assert outcome(codec, bad, check) == "corrupt", length
    # Declaring more than is there: a partial batch, never an allocation of 2 GiB.
    for length in (len(good) - 11, 2**31 - 1):
        bad = w.patch(good, w.BATCH_LENGTH, "i", length)
        for check in (True, False):
            rs = outcome(codec, bad, check)
            if rs != "corrupt":
                assert (rs.incomplete, rs.consumed, rs.partial_size) == (True, 0, length + 12)
    # Declaring less than the records need, with the CRC made to match the short batch.
    short = len(good) - 12 - 5
    buf = bytearray(good[: 12 + short])
    struct.pack_into(">i", buf, w.BATCH_LENGTH, short)
    bad = w.fix_crc(buf) + good[12 + short :]
    for check in (True, False):
        assert outcome(codec, bad, check) == "corrupt"
        assert outcome(codec, bad[: 12 + short], check) == "corrupt"


def test_every_header_field_forged(codec: ModuleType) -> None:
    # Overwrite each v2 header field with extreme values (CRC refreshed).
    good, _ = CORPUS["v2-gzip"]
    fields = [
        (w.BASE_OFFSET, "q"), (w.PARTITION_LEADER_EPOCH, "i"), (w.ATTRIBUTES, "h"),
        (w.LAST_OFFSET_DELTA, "i"), (w.BASE_TIMESTAMP, "q"), (w.MAX_TIMESTAMP, "q"),
        (w.PRODUCER_ID, "q"), (w.PRODUCER_EPOCH, "h"), (w.BASE_SEQUENCE, "i"),
        (w.RECORD_COUNT, "i"),
    ]  # fmt: skip
    for offset, fmt in fields:
        bits = struct.calcsize(fmt) * 8
        for value in (0, 1, -1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), 3):
            bad = w.patch(good, offset, fmt, value)
            for check in (True, False):
                outcome(codec, bad, check)


# -- legacy forgeries -------------------------------------------------------------


def _legacy_raw(body_after_crc: bytes, offset: int = 0) -> bytes:
    import zlib

    message = struct.pack(">I", zlib.crc32(body_after_crc)) + body_after_crc
    return struct.pack(">qi", offset, len(message)) + message


STRICT_LEGACY: dict[str, bytes] = {
    "v0 key length huge": _legacy_raw(b"\x00\x00" + struct.pack(">i", BIG32) + b"kkkk"),
    "v0 value length huge": _legacy_raw(b"\x00\x00" + struct.pack(">ii", -1, BIG32) + b"vv"),
    "v0 value length past end": _legacy_raw(b"\x00\x00" + struct.pack(">ii", -1, 10) + b"vv"),
    "v0 fields missing": _legacy_raw(b"\x00\x00" + struct.pack(">i", -1)),
    "v1 too short for its timestamp": _legacy_raw(b"\x01\x00" + b"\x00" * 8),
    "v1 key length huge": _legacy_raw(b"\x01\x00" + struct.pack(">qi", T, BIG32) + b"\x00" * 8),
    "message size negative": struct.pack(">qi", 0, -1) + b"\x00" * 30,
    "message size tiny": struct.pack(">qi", 0, 3) + b"\x00" * 30,
    "magic 3": _legacy_raw(b"\x03\x00" + struct.pack(">ii", -1, -1)),
    "gzip wrapper, inner size huge": _legacy_raw(
        b"\x01\x01"
        + struct.pack(">qi", T, -1)
        + (lambda z: struct.pack(">i", len(z)) + z)(
            gzip.compress(struct.pack(">qi", 0, BIG32) + b"\x00" * 20)
        )
    ),
    "gzip wrapper, inner truncated": _legacy_raw(
        b"\x01\x01"
        + struct.pack(">qi", T, -1)
        + (lambda z: struct.pack(">i", len(z)) + z)(
            gzip.compress(w.legacy_message(0, b"k", b"v", magic=1)[:-2])
        )
    ),
    "wrapper with unknown codec 6": _legacy_raw(
        b"\x01\x06" + struct.pack(">qi", T, -1) + struct.pack(">i", 4) + b"abcd"
    ),
}

LENIENT_LEGACY: dict[str, bytes] = {
    "v0 key length -2": _legacy_raw(b"\x00\x00" + struct.pack(">ii", -2, -1)),
    "v0 trailing bytes": _legacy_raw(b"\x00\x00" + struct.pack(">ii", -1, -1) + b"extra"),
    "v1 attributes 0xf0": _legacy_raw(b"\x01\xf0" + struct.pack(">qii", T, -1, -1)),
    "nested compression": _legacy_raw(
        b"\x01\x01"
        + struct.pack(">qi", T, -1)
        + (lambda z: struct.pack(">i", len(z)) + z)(
            gzip.compress(
                w.legacy_message(
                    0,
                    None,
                    gzip.compress(w.legacy_message(0, None, b"x", magic=1)),
                    magic=1,
                    attributes=1,
                )
            )
        )
    ),
    "v0 wrapper holding v1 messages": _legacy_raw(
        b"\x00\x01"
        + struct.pack(">i", -1)
        + (lambda z: struct.pack(">i", len(z)) + z)(
            gzip.compress(w.legacy_message(0, None, b"x", magic=1, timestamp=T))
        )
    ),
    "v1 wrapper, inner relative offsets descending": w.legacy_message(
        3,
        None,
        gzip.compress(
            w.legacy_message(5, None, b"a", magic=1) + w.legacy_message(0, None, b"b", magic=1)
        ),
        magic=1,
        attributes=1,
    ),
}


@pytest.mark.parametrize("name", list(STRICT_LEGACY))
def test_forged_legacy_is_corrupt(codec: ModuleType, name: str) -> None:
    for check in (True, False):
        assert outcome(codec, STRICT_LEGACY[name], check) == "corrupt", name


@pytest.mark.parametrize("name", list(LENIENT_LEGACY))
def test_forged_legacy_is_clean(codec: ModuleType, name: str) -> None:
    for check in (True, False):
        outcome(codec, LENIENT_LEGACY[name], check)


# -- random input -------------------------------------------------------------------


def test_random_bytes(codec: ModuleType) -> None:
    rnd = random.Random(2024)
    for _ in range(400):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 120)))
        outcome(codec, data, rnd.random() < 0.5)


def test_random_headers_on_valid_framing(codec: ModuleType) -> None:
    # Plausible framing (sizes right, magic 0/1/2) around random content.
    rnd = random.Random(99)
    for _ in range(400):
        magic = rnd.choice([0, 1, 2])
        body = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 100)))
        if magic == 2:
            body = body.ljust(44, b"\x00")
            data = struct.pack(">qiib", 0, len(body) + 5, 0, 2) + body
            if rnd.random() < 0.7:
                data = w.fix_crc(data)
        else:
            data = _legacy_raw(bytes([magic]) + body)
        outcome(codec, data, rnd.random() < 0.3)
