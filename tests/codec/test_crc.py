"""CRC-32C (Castagnoli), the checksum of record batch v2."""

from __future__ import annotations

from types import ModuleType

import crc32c as reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

# The standard check value and the RFC 3720 (iSCSI) appendix B.4 vectors.
KNOWN = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"a", 0xC1D04330),
]


@pytest.mark.parametrize(("data", "want"), KNOWN)
def test_known_answers(codec: ModuleType, data: bytes, want: int) -> None:
    assert codec.crc32c(data) == want


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_accepts_every_buffer(codec: ModuleType, wrap: type) -> None:
    assert codec.crc32c(wrap(b"123456789")) == 0xE3069283
    assert codec.crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283


def test_chaining(codec: ModuleType) -> None:
    data = b"123456789"
    for cut in range(len(data) + 1):
        assert codec.crc32c(data[cut:], codec.crc32c(data[:cut])) == 0xE3069283
    assert codec.crc32c(b"", 0xE3069283) == 0xE3069283
    # Three pieces.
    v = codec.crc32c(b"123")
    v = codec.crc32c(b"456", v)
    assert codec.crc32c(b"789", v) == 0xE3069283


def test_result_is_unsigned_32_bit(codec: ModuleType) -> None:
    value = codec.crc32c(b"\xff" * 32)
    assert isinstance(value, int)
    assert 0 <= value < 2**32
    assert value == 0x62A8AB43  # high bit clear; check one with it set
    assert codec.crc32c(bytes(32)) == 0x8A9136AA


def test_large_input(codec: ModuleType) -> None:
    data = bytes(range(256)) * 4099  # odd length, crosses every alignment
    assert codec.crc32c(data) == reference.crc32c(data)
    assert codec.crc32c(memoryview(data)[3:]) == reference.crc32c(data[3:])


@FIXTURE_OK
@given(st.binary(max_size=300), st.integers(0, 300))
def test_matches_reference(codec: ModuleType, data: bytes, cut: int) -> None:
    want = reference.crc32c(data)
    assert codec.crc32c(data) == want
    cut = min(cut, len(data))
    assert codec.crc32c(data[cut:], codec.crc32c(data[:cut])) == want
