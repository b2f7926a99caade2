"""Decompression bombs: a small compressed batch that inflates to a huge records section.

Both twins refuse one with CorruptRecordError, and quickly: a record count the
compressed bytes cannot hold is refused before anything is inflated, and
inflation itself stops at ``_compression.inflate_limit`` of the compressed size
(memory is measured with tracemalloc, never time).
"""

from __future__ import annotations

import tracemalloc
import zlib
from types import ModuleType

import codec_wire as w
import pytest
import zstandard

from pykaf import _compression
from pykaf.errors import CorruptRecordError

N = 4_000_000  # empty records: 7 bytes each, 28 MB inflated
EMPTY = w.record(0, 0, None, None)


@pytest.fixture(scope="module")
def sections() -> dict[str, bytes]:
    """The issue's bomb: 4,000,000 empty records, gzip (~40 KB) and zstd."""
    plain = EMPTY * N
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    return {
        "gzip": gz.compress(plain) + gz.flush(),
        "zstd": zstandard.ZstdCompressor(level=19).compress(plain),
    }


def _bomb(section: bytes, codec: str, count: int) -> bytes:
    attributes = {"gzip": 1, "zstd": 4}[codec]
    return w.batch(section, count=count, attributes=attributes, last_offset_delta=N - 1)


def test_minimum_record_size() -> None:
    assert len(EMPTY) == _compression.MIN_RECORD_SIZE == 7


def test_inflate_limit_policy() -> None:
    floor, ratio = _compression.INFLATE_FLOOR, _compression.MAX_RATIO
    assert _compression.inflate_limit(0) == floor
    assert _compression.inflate_limit(floor // ratio) == floor
    assert _compression.inflate_limit(40_000) == max(floor, 40_000 * ratio)
    assert _compression.inflate_limit(2**40) == _compression.MAX_DECOMPRESSED


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_bomb_declaring_its_records_is_refused_before_inflating(
    codec: ModuleType, sections: dict[str, bytes], name: str
) -> None:
    data = _bomb(sections[name], name, N)
    assert len(data) < 100_000  # the bomb is small; 4M records cannot fit its limit
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match=f"record count {N} exceeds"):
            codec.decode_batches(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # nothing inflated, no record built


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_bomb_inflation_stops_at_the_limit(
    codec: ModuleType, sections: dict[str, bytes], name: str
) -> None:
    # Declaring one record passes the count check: inflation itself must stop.
    section = sections[name]
    limit = _compression.inflate_limit(len(section))
    assert limit < len(EMPTY) * N  # the bound is below what the bomb inflates to
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match=f"inflates beyond {limit} bytes"):
            codec.decode_batches(_bomb(section, name, 1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # zlib joins its output blocks into one bytes object (twice the limit at the
    # peak); without the bound it was twice the full 28 MB.
    assert peak < 2 * limit + 4 * 1024 * 1024 < 2 * len(EMPTY) * N


def test_legacy_wrapper_bomb_is_refused(codec: ModuleType, sections: dict[str, bytes]) -> None:
    data = w.legacy_message(0, None, sections["gzip"], magic=1, attributes=1)
    with pytest.raises(CorruptRecordError, match="inflates beyond"):
        codec.decode_batches(data)


def test_compressible_batch_under_the_floor_decodes(codec: ModuleType) -> None:
    # 3 MB of zeros compresses ~1000:1, past MAX_RATIO, but stays under INFLATE_FLOOR.
    value = bytes(3_000_000)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    record = w.record(0, 0, None, value)
    section = gz.compress(record) + gz.flush()
    assert len(record) > _compression.MAX_RATIO * len(section)
    (b,) = codec.decode_batches(w.batch(section, count=1, attributes=1))
    assert b.records[0].value == value
