"""Compressed record batches: gzip, snappy (raw and xerial), lz4 frames, zstd."""

from __future__ import annotations

import gzip
import itertools
import random
import struct
import zlib
from types import ModuleType
from typing import Any

import codec_wire as w
import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard

from pykaf.errors import CorruptRecordError

T = 1_650_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def _rows(n: int = 40, seed: int = 1) -> list[tuple[int, bytes | None, bytes | None, list]]:
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"trio", b"record"]
    rows = []
    for i in range(n):
        value = b" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 60)))
        key = None if i % 5 == 0 else b"key-%d" % (i % 7)
        headers = [("i", str(i).encode())] if i % 3 == 0 else []
        rows.append((T + rnd.randint(-1000, 1000), key, value, headers))
    return rows


def _build(codec: ModuleType, compression: int, rows: list, level: int | None = None) -> bytes:
    builder = codec.BatchBuilder(compression=compression, compression_level=level)
    for i, row in enumerate(rows):
        assert builder.append(*row) == i
    return bytes(builder.build(base_offset=1000, producer_id=5, producer_epoch=0, base_sequence=9))


def _check_decoded(b: Any, rows: list, compression: str) -> None:
    assert b.compression == compression
    assert b.compression_type == CODECS[compression]
    assert b.record_count == len(rows)
    assert b.last_offset == 1000 + len(rows) - 1
    got = [w.rec_tuple(r) for r in b.records]
    want = [(1000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    assert got == want


@pytest.mark.parametrize("name", list(CODECS))
def test_round_trip(codec: ModuleType, name: str) -> None:
    rows = _rows()
    data = _build(codec, CODECS[name], rows)
    p = w.parse_batch(data)
    assert p.attributes & 0x07 == CODECS[name]
    assert p.batch_length == len(data) - 12
    assert p.crc == w.crc32c(data[21:])
    assert p.record_count == len(rows)
    assert p.last_offset_delta == len(rows) - 1
    assert p.base_timestamp == rows[0][0]
    assert p.max_timestamp == max(r[0] for r in rows)
    (batch,) = codec.decode_batches(data)
    _check_decoded(batch, rows, name)
    assert batch.size == len(data)


@pytest.mark.parametrize("name", list(CODECS))
def test_records_section_is_the_compressed_plain_section(codec: ModuleType, name: str) -> None:
    rows = _rows()
    plain = _build(codec, 0, rows)
    packed = _build(codec, CODECS[name], rows)
    section = packed[61:]
    if name == "none":
        inflated = section
    elif name == "gzip":
        assert section[:2] == b"\x1f\x8b"  # a gzip member, not a bare zlib stream
        inflated = gzip.decompress(section)
    elif name == "snappy":
        assert section[:16] == XERIAL_HEADER  # Java's xerial framing
        inflated = _xerial_decode(section)
    elif name == "lz4":
        assert section[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
        inflated = lz4.frame.decompress(section)
    else:
        assert section[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
        inflated = zstandard.ZstdDecompressor().decompressobj().decompress(section)
    assert inflated == plain[61:]
    # Everything but attributes/CRC/length matches the uncompressed batch.
    assert packed[:8] == plain[:8]
    assert packed[12:17] == plain[12:17]
    assert packed[23:61] == plain[23:61]


def _xerial_decode(data: bytes) -> bytes:
    assert data[:16] == XERIAL_HEADER
    pos = 16
    out = b""
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + n]))
        pos += n
    return out


def _xerial_encode(data: bytes, cuts: list[int]) -> bytes:
    out = XERIAL_HEADER
    bounds = [0, *cuts, len(data)]
    for lo, hi in itertools.pairwise(bounds):
        block = bytes(cramjam.snappy.compress_raw(data[lo:hi]))
        out += struct.pack(">i", len(block)) + block
    return out


def _plain_section(rows: list) -> bytes:
    base = rows[0][0]
    return b"".join(w.record(i, ts - base, k, v, h) for i, (ts, k, v, h) in enumerate(rows))


def _hand_batch(rows: list, attributes: int, section: bytes) -> bytes:
    return w.batch(
        section,
        count=len(rows),
        base_offset=1000,
        attributes=attributes,
        base_timestamp=rows[0][0],
        max_timestamp=max(r[0] for r in rows),
    )


@pytest.mark.parametrize(
    "cuts", [[], [1], [100, 101, 900], [37, 500, 1200, 1201]], ids=["one", "two", "four", "five"]
)
def test_xerial_snappy_multi_block(codec: ModuleType, cuts: list[int]) -> None:
    rows = _rows(60)
    plain = _plain_section(rows)
    assert len(plain) > 1201
    data = _hand_batch(rows, 2, _xerial_encode(plain, cuts))
    (batch,) = codec.decode_batches(data)
    _check_decoded(batch, rows, "snappy")


def test_xerial_snappy_patched_into_built_batch(codec: ModuleType) -> None:
    # Take the codec's own uncompressed batch, swap in a hand-made xerial section.
    rows = _rows(30)
    plain = _build(codec, 0, rows)
    data = w.with_records(plain, _xerial_encode(plain[61:], [7, 300]), attributes=2)
    (batch,) = codec.decode_batches(data)
    _check_decoded(batch, rows, "snappy")


def test_raw_snappy_block(codec: ModuleType) -> None:
    rows = _rows(25)
    section = bytes(cramjam.snappy.compress_raw(_plain_section(rows)))
    (batch,) = codec.decode_batches(_hand_batch(rows, 2, section))
    _check_decoded(batch, rows, "snappy")


def test_xerial_empty_block_list_with_no_records(codec: ModuleType) -> None:
    rows = _rows(3)
    bad = _hand_batch(rows, 2, XERIAL_HEADER)  # header, no blocks: zero bytes of records
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(bad)


@pytest.mark.parametrize(
    ("name", "compress"),
    [
        ("gzip", lambda d: gzip.compress(d, compresslevel=9)),
        ("gzip", lambda d: gzip.compress(d, mtime=0)),
        ("lz4", lambda d: lz4.frame.compress(d, block_linked=False)),
        ("lz4", lambda d: lz4.frame.compress(d, block_linked=False, content_checksum=True)),
        (
            "lz4",
            lambda d: lz4.frame.compress(
                d, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
            ),
        ),
        ("zstd", lambda d: zstandard.ZstdCompressor(level=1).compress(d)),
        (
            "zstd",
            lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d),
        ),
    ],
)
def test_decode_reference_compressed(codec: ModuleType, name: str, compress: Any) -> None:
    rows = _rows(50, seed=7)
    section = compress(_plain_section(rows))
    (batch,) = codec.decode_batches(_hand_batch(rows, CODECS[name], section))
    _check_decoded(batch, rows, name)


def test_zstd_streamed_frame_without_size(codec: ModuleType) -> None:
    rows = _rows(200, seed=3)
    plain = _plain_section(rows)
    cctx = zstandard.ZstdCompressor()
    chunker = cctx.chunker(chunk_size=4096)
    section = b"".join([*chunker.compress(plain), *chunker.finish()])
    (batch,) = codec.decode_batches(_hand_batch(rows, 4, section))
    _check_decoded(batch, rows, "zstd")


def test_large_compressed_batch(codec: ModuleType) -> None:
    # More than 64 KiB inflated: several lz4 blocks and xerial blocks.
    rows = [(T + i, None, bytes([i % 251]) * 3000, []) for i in range(60)]
    for name, code in CODECS.items():
        data = _build(codec, code, rows)
        (batch,) = codec.decode_batches(data)
        _check_decoded(batch, rows, name)


@pytest.mark.parametrize(("name", "low", "high"), [("gzip", 1, 9), ("lz4", 0, 12), ("zstd", 1, 19)])
def test_compression_level_honoured(codec: ModuleType, name: str, low: int, high: int) -> None:
    rows = _rows(300, seed=11)
    fast = _build(codec, CODECS[name], rows, level=low)
    best = _build(codec, CODECS[name], rows, level=high)
    default = _build(codec, CODECS[name], rows)
    assert fast[61:] != best[61:], "the compression level made no difference"
    assert len(best) <= len(fast)
    for data in (fast, best, default):
        (batch,) = codec.decode_batches(data)
        _check_decoded(batch, rows, name)
    if name == "gzip":
        # zlib records its effort in the gzip header's XFL byte: 4 fastest, 2 best.
        assert fast[61 + 8] == 4
        assert best[61 + 8] == 2


def _lz4_kafka_blocks(frame: bytes) -> list[bytes]:
    """Check ``frame`` is an LZ4 frame Kafka's readers take; return its blocks, inflated.

    Java's KafkaLZ4BlockInputStream (KIP-57) and librdkafka need the standard
    frame: version 01, independent blocks, no dictionary, no reserved bits, a
    64 KiB..4 MiB block size. Each block is inflated on its own, with no earlier
    data as dictionary: a block that refers back (block_linked) fails here.
    """
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 0b01, "frame version must be 01"
    assert flg & 0x20, "blocks must be independent (B.Indep)"
    assert not flg & 0x02, "reserved FLG bit set"
    assert not flg & 0x01, "no dictionary ID"
    assert bd == 0x40, "64 KiB blocks, as the Java client writes"
    block_checksum = bool(flg & 0x10)
    pos = 6 + (8 if flg & 0x08 else 0) + 1  # descriptor, content size, header checksum
    blocks = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:  # end mark
            break
        size = word & 0x7FFFFFFF
        block = frame[pos : pos + size]
        pos += size + (4 if block_checksum else 0)
        if word & 0x80000000:  # stored uncompressed
            blocks.append(block)
        else:
            blocks.append(lz4.block.decompress(block, uncompressed_size=64 * 1024))
        assert len(blocks[-1]) <= 64 * 1024
    pos += 4 if flg & 0x04 else 0  # content checksum
    assert pos == len(frame), "bytes after the frame"
    return blocks


def _lz4_rows() -> list[tuple[int, bytes | None, bytes | None, list]]:
    # ~200 KiB of records that repeat across 64 KiB blocks (so a linked block
    # would refer back) with random bytes mixed in (some blocks barely shrink).
    rnd = random.Random(5)
    rows = _rows(600, seed=13)
    noise = [(T + i, None, rnd.randbytes(300), []) for i in range(100)]
    return rows + noise + rows[:200]


@pytest.mark.parametrize("level", [None, -1, 0, 1, 2, 3, 4, 9, 12])
def test_lz4_frame_is_kafka_readable(codec: ModuleType, level: int | None) -> None:
    rows = _lz4_rows()
    plain = _build(codec, 0, rows)[61:]
    data = _build(codec, CODECS["lz4"], rows, level=level)
    section = data[61:]
    blocks = _lz4_kafka_blocks(section)
    assert len(blocks) > 2
    assert b"".join(blocks) == plain
    # Both bindings read it (python-lz4: liblz4 1.9; cramjam: liblz4 1.10),
    # checking the header checksum and any block checksums.
    assert lz4.frame.decompress(section) == plain
    assert bytes(cramjam.lz4.decompress(section)) == plain
    (batch,) = codec.decode_batches(data)
    _check_decoded(batch, rows, "lz4")


@pytest.mark.parametrize("linked", [True, False])
def test_lz4_frame_check_catches_linked_blocks(linked: bool) -> None:
    # The checker above has teeth: a frame of dependent blocks fails it.
    plain = _plain_section(_lz4_rows())
    frame = lz4.frame.compress(
        plain,
        compression_level=9,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=linked,
        content_checksum=False,
    )
    if linked:
        with pytest.raises((AssertionError, lz4.block.LZ4BlockError)):
            assert b"".join(_lz4_kafka_blocks(frame)) == plain
    else:
        assert b"".join(_lz4_kafka_blocks(frame)) == plain


def test_builder_size_is_uncompressed(codec: ModuleType) -> None:
    rows = _rows(100)
    plain = codec.BatchBuilder()
    packed = codec.BatchBuilder(compression=4)
    for row in rows:
        plain.append(*row)
        packed.append(*row)
    assert packed.size == plain.size == len(plain.build())
    assert len(packed.build()) < packed.size


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_compressed_section(codec: ModuleType, name: str) -> None:
    rows = _rows(20)
    good = _build(codec, CODECS[name], rows)
    section = good[61:]
    cases = [
        section[: len(section) // 2],  # truncated stream
        section[:-1],
        b"\x00" * len(section),
        bytes(b ^ 0x5A for b in section),
        b"",
    ]
    for bad_section in cases:
        bad = w.with_records(good, bad_section)  # valid CRC over the damaged section
        for check in (True, False):
            with pytest.raises(CorruptRecordError):
                codec.decode_batches(bad, check_crc=check)


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_decompressed_garbage(codec: ModuleType, name: str) -> None:
    # Valid compression around an invalid records section.
    rows = _rows(5)
    junk = b"\xff" * 40
    section = {
        "gzip": gzip.compress,
        "snappy": lambda d: _xerial_encode(d, []),
        "lz4": lambda d: lz4.frame.compress(d, block_linked=False),
        "zstd": zstandard.ZstdCompressor().compress,
    }[name](junk)
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(_hand_batch(rows, CODECS[name], section))


def test_decompressed_section_with_too_few_records(codec: ModuleType) -> None:
    rows = _rows(5)
    plain = _plain_section(rows)
    short = _hand_batch(rows, 1, gzip.compress(plain[: len(plain) - 3]))
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(short)
    extra = _hand_batch(rows, 1, gzip.compress(plain + w.record(5, 0, None, b"extra")))
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(extra)  # Kafka: "records still remaining"
    more = w.patch(_hand_batch(rows, 1, gzip.compress(plain)), w.RECORD_COUNT, "i", 6)
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(more)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_codec(codec: ModuleType, codec_id: int) -> None:
    rows = _rows(3)
    data = _hand_batch(rows, codec_id, zlib.compress(_plain_section(rows)))
    for check in (True, False):
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(data, check_crc=check)
