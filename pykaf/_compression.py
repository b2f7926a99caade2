"""Compression of a record batch's records section: gzip, snappy, lz4, zstd.

Shared by both codec implementations; it runs once per batch, never per
record, so plain Python calling the C libraries costs nothing measurable.
Libraries: zlib (stdlib) for gzip, cramjam for snappy (maintained, wheels
everywhere, no system library), lz4 for the LZ4 frame format (cramjam's
frame compressor for the HC levels, 3 and up: faster), zstandard for zstd.

Every decoder bounds its output so a decompression bomb is a
:class:`~pykaf.errors.CorruptRecordError`, not an out-of-memory crash: by
default a section may inflate to :func:`inflate_limit` of its compressed size
(``INFLATE_FLOOR`` bytes, or ``MAX_RATIO`` times its size, whichever is more,
never more than ``MAX_DECOMPRESSED``); docs/codec.md explains the choice.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

import cramjam
import lz4.frame
import zstandard

from pykaf.errors import CorruptRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer as _Buffer

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

#: Largest records section pykaf will inflate from one compressed batch.
MAX_DECOMPRESSED = 256 * 1024 * 1024
#: Any compressed section may inflate to this many bytes, whatever its ratio.
INFLATE_FLOOR = 4 * 1024 * 1024
#: Beyond the floor, a section may inflate to at most this many times its size
#: (LZ4's own ceiling; Kafka data compresses 2-20x, rarely past 100x).
MAX_RATIO = 255
#: The fewest bytes a v2 record takes: length, attributes, timestamp delta,
#: offset delta, key length, value length and header count, one byte each.
MIN_RECORD_SIZE = 7


def inflate_limit(compressed_size: int) -> int:
    """The most bytes a records section of ``compressed_size`` bytes may inflate to.

    ``max(INFLATE_FLOOR, MAX_RATIO * compressed_size)``, capped at ``MAX_DECOMPRESSED``:
    small batches inflate freely, large ones no further than ``MAX_RATIO`` to 1.
    """
    return min(MAX_DECOMPRESSED, max(INFLATE_FLOOR, MAX_RATIO * compressed_size))


# xerial snappy-java's stream framing, which Java clients write: an 8-byte magic,
# two int32 versions, then blocks of (int32 compressed length, raw snappy block).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size

#: The first LZ4 HC level (liblz4's LZ4HC_CLEVEL_MIN): from here on pykaf
#: compresses with cramjam's lz4 frame compressor, below with python-lz4's.
LZ4_HC_MIN = 3


_ZSTD_DCTX = zstandard.ZstdDecompressor()
_ZSTD_CCTX: dict[int, zstandard.ZstdCompressor] = {}


def compress(codec: int, data: _Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with Kafka codec ``codec`` at ``level`` (None: the codec's default).

    Raises:
        ValueError: for an unknown codec or a level the codec rejects.
    """
    if codec == GZIP:
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        lvl = 0 if level is None else level
        if lvl >= LZ4_HC_MIN:
            return _lz4_hc_compress(data, lvl)
        # Kafka's LZ4 is the standard frame format with independent 64 KB blocks.
        return bytes(
            lz4.frame.compress(
                data,
                compression_level=lvl,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
            )
        )
    if codec == ZSTD:
        lvl = 3 if level is None else level
        cctx = _ZSTD_CCTX.get(lvl)
        if cctx is None:
            cctx = _ZSTD_CCTX[lvl] = zstandard.ZstdCompressor(level=lvl)
        return cctx.compress(memoryview(data))
    if codec == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec {codec}")


def _lz4_hc_compress(data: _Buffer, level: int) -> bytes:
    # cramjam's frame compressor (liblz4 1.10) runs the HC levels faster than
    # python-lz4's bundled 1.9.4 (~7% at level 9, the broker's and aiokafka's
    # default; the same compressed sizes). Its frame: independent 64 KB blocks,
    # each with its xxh32 block checksum (Java's reader verifies them), no
    # content size, no content checksum. It takes bytes only.
    c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    c.compress(data if type(data) is bytes else bytes(data))
    return bytes(c.finish())


def decompress(codec: int, data: _Buffer, limit: int | None = None) -> bytes:
    """Inflate a compressed records section to at most ``limit`` bytes.

    ``limit`` defaults to :func:`inflate_limit` of the section's size; inflation
    stops once it is passed (at most a block beyond), so a bomb costs no more
    memory than the limit.

    Raises:
        CorruptRecordError: the data is not valid for the codec, is truncated,
            or inflates beyond ``limit`` bytes.
        (also for an unknown codec id: a batch naming one is not readable)
    """
    if limit is None:
        limit = inflate_limit(memoryview(data).nbytes)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, limit)
        if codec == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec == LZ4:
            return _lz4_decompress(data, limit)
        if codec == ZSTD:
            return _zstd_decompress(data, limit)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own types
        raise CorruptRecordError(f"invalid {NAMES[codec]} data: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _too_big(name: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{name} data inflates beyond {limit} bytes")


def _gzip_decompress(data: _Buffer, limit: int) -> bytes:
    d = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib headers
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise _too_big("gzip", limit)
    if not d.eof:
        raise CorruptRecordError("gzip data is truncated")
    return out


def _xerial_compress(data: _Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for i in range(0, len(view), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i : i + XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(data: _Buffer, limit: int) -> bytes:
    # The uncompressed length is the block's leading uvarint: check it before
    # allocating, so a forged length cannot reserve gigabytes.
    block = memoryview(data).cast("B")
    size = 0
    shift = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        size |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if size > limit:
        raise _too_big("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: _Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return _snappy_block(view, limit)
    if len(view) < 16:
        raise CorruptRecordError("xerial snappy header is truncated")
    pos = 16
    out: list[bytes] = []
    total = 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or pos + n > len(view):
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the data")
        chunk = _snappy_block(view[pos : pos + n], limit - total)
        total += len(chunk)
        out.append(chunk)
        pos += n
    return b"".join(out)


def _lz4_decompress(data: _Buffer, limit: int) -> bytes:
    # A frame may state its content size; the one-call path below would
    # allocate that much up front, so refuse a stated size past the limit.
    if lz4.frame.get_frame_info(data)["content_size"] > limit:
        raise _too_big("lz4", limit)
    if memoryview(data).nbytes * _LZ4_MAX_RATIO <= limit:
        # LZ4 cannot inflate this far past the limit: one call (much faster
        # than the incremental decompressor; it also refuses truncated frames).
        return bytes(lz4.frame.decompress(data))
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise _too_big("lz4", limit)
    if not d.eof:
        raise CorruptRecordError("lz4 frame is truncated")
    return bytes(out)


def _zstd_decompress(raw: _Buffer, limit: int) -> bytes:
    data = memoryview(raw).cast("B")
    size = zstandard.frame_content_size(data)
    if size > limit:
        raise _too_big("zstd", limit)
    if size >= 0 and len(data) < 1 << 16:
        # The frame states its size and is small: one call, no chunking.
        out = _ZSTD_DCTX.decompress(data)
        if len(out) != size:
            raise CorruptRecordError("zstd frame is truncated")
        return out
    # Unknown or large: feed small slices so one call cannot inflate far past
    # the limit (a zstd block inflates at most ~32768x), and read across frames.
    view = memoryview(data)
    out_parts = bytearray()
    pos = 0
    while pos < len(view):
        d = _ZSTD_DCTX.decompressobj()
        while pos < len(view) and not d.eof:
            out_parts += d.decompress(view[pos : pos + _ZSTD_SLICE])
            pos += _ZSTD_SLICE
            if len(out_parts) > limit:
                raise _too_big("zstd", limit)
        if not d.eof:
            raise CorruptRecordError("zstd frame is truncated")
        pos -= len(d.unused_data)
    return bytes(out_parts)


_ZSTD_SLICE = 2048
_LZ4_MAX_RATIO = 255  # an LZ4 byte stands for at most 255 output bytes
