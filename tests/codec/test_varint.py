"""Kafka's varints: unsigned varint/varlong and zigzag varint/varlong."""

from __future__ import annotations

from types import ModuleType

import pytest
from codec_wire import uvarint, varint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykaf.errors import CorruptRecordError

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

U32 = 2**32 - 1
U64 = 2**64 - 1
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)

UVARINT_CASES = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**21 - 1, "ffff7f"),
    (2**28, "8080808001"),
    (2**31, "8080808008"),
    (U32, "ffffffff0f"),
]

UVARLONG_CASES = [
    *UVARINT_CASES,
    (2**32, "8080808010"),
    (2**35, "808080808001"),
    (2**56, "8080808080808080" + "01"),
    (2**63 - 1, "ff" * 8 + "7f"),
    (2**63, "80" * 9 + "01"),
    (U64, "ff" * 9 + "01"),
]

VARINT_CASES = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (2, "04"),
    (-64, "7f"),
    (63, "7e"),
    (64, "8001"),
    (-65, "8101"),
    (150, "ac02"),
    (-150, "ab02"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]

VARLONG_CASES = [
    *VARINT_CASES,
    (2**31, "8080808010"),
    (-(2**31) - 1, "8180808010"),
    (2**62, "80" * 9 + "01"),
    (2**63 - 1, "fe" + "ff" * 8 + "01"),
    (-(2**63), "ff" * 9 + "01"),
]


@pytest.mark.parametrize(("value", "hexed"), UVARINT_CASES)
def test_uvarint_known_answers(codec: ModuleType, value: int, hexed: str) -> None:
    encoded = bytes.fromhex(hexed)
    assert codec.encode_uvarint(value) == encoded
    assert codec.decode_uvarint(encoded) == (value, len(encoded))


@pytest.mark.parametrize(("value", "hexed"), UVARLONG_CASES)
def test_uvarlong_known_answers(codec: ModuleType, value: int, hexed: str) -> None:
    encoded = bytes.fromhex(hexed)
    assert codec.encode_uvarlong(value) == encoded
    assert codec.decode_uvarlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(("value", "hexed"), VARINT_CASES)
def test_varint_known_answers(codec: ModuleType, value: int, hexed: str) -> None:
    encoded = bytes.fromhex(hexed)
    assert codec.encode_varint(value) == encoded
    assert codec.decode_varint(encoded) == (value, len(encoded))


@pytest.mark.parametrize(("value", "hexed"), VARLONG_CASES)
def test_varlong_known_answers(codec: ModuleType, value: int, hexed: str) -> None:
    encoded = bytes.fromhex(hexed)
    assert codec.encode_varlong(value) == encoded
    assert codec.decode_varlong(encoded) == (value, len(encoded))


def test_returns_bytes(codec: ModuleType) -> None:
    for fn in (codec.encode_uvarint, codec.encode_uvarlong, codec.encode_varint):
        assert type(fn(300)) is bytes
    assert type(codec.encode_varlong(-300)) is bytes


@pytest.mark.parametrize("kind", ["uvarint", "uvarlong", "varint", "varlong"])
def test_decode_honours_pos(codec: ModuleType, kind: str) -> None:
    decode = getattr(codec, f"decode_{kind}")
    signed = not kind.startswith("u")
    payload = bytes.fromhex("ac02")  # 300 unsigned, 150 zigzag
    want = 150 if signed else 300
    data = b"\xff\xff\xff" + payload + b"\x05\xff"
    assert decode(data, 3) == (want, 5)
    # The next value starts where the previous one ended.
    assert decode(data, 5) == ((-3 if signed else 5), 6)
    # Several values back to back.
    stream = b"".join(bytes.fromhex(h) for _, h in UVARINT_CASES)
    pos = 0
    for value, hexed in UVARINT_CASES:
        got, pos2 = codec.decode_uvarint(stream, pos)
        assert got == value
        assert pos2 == pos + len(hexed) // 2
        pos = pos2
    assert pos == len(stream)


@pytest.mark.parametrize("kind", ["uvarint", "uvarlong", "varint", "varlong"])
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_every_buffer(codec: ModuleType, kind: str, wrap: type) -> None:
    decode = getattr(codec, f"decode_{kind}")
    want = 150 if not kind.startswith("u") else 300
    assert decode(wrap(b"\x00\xac\x02"), 1) == (want, 3)
    # A memoryview slice that does not start at its buffer's beginning.
    assert decode(memoryview(b"\x01\x01\xac\x02")[2:]) == (want, 2)


def test_non_minimal_encodings_decode(codec: ModuleType) -> None:
    # Kafka's readers accept redundant continuation bytes within the limit.
    assert codec.decode_uvarint(b"\x80\x00") == (0, 2)
    assert codec.decode_uvarint(b"\x80\x80\x80\x80\x00") == (0, 5)
    assert codec.decode_uvarlong(b"\x80" * 9 + b"\x00") == (0, 10)
    assert codec.decode_varint(b"\x81\x80\x80\x80\x00") == (-1, 5)
    assert codec.decode_varlong(b"\x82" + b"\x80" * 8 + b"\x00") == (1, 10)


@pytest.mark.parametrize(
    ("kind", "limit"), [("uvarint", 5), ("varint", 5), ("uvarlong", 10), ("varlong", 10)]
)
def test_decode_too_long_raises(codec: ModuleType, kind: str, limit: int) -> None:
    decode = getattr(codec, f"decode_{kind}")
    with pytest.raises(CorruptRecordError):
        decode(b"\x80" * limit + b"\x00")
    with pytest.raises(CorruptRecordError):
        decode(b"\xff" * (limit + 5) + b"\x01")
    with pytest.raises(CorruptRecordError):
        decode(b"\x00\x00" + b"\x80" * limit + b"\x01", 2)


@pytest.mark.parametrize("kind", ["uvarint", "uvarlong", "varint", "varlong"])
def test_decode_truncated_raises(codec: ModuleType, kind: str) -> None:
    decode = getattr(codec, f"decode_{kind}")
    for data in (b"", b"\x80", b"\xac", b"\xff\xff", b"\x80\x80\x80\x80"):
        with pytest.raises(CorruptRecordError):
            decode(data)
    with pytest.raises(CorruptRecordError):
        decode(b"\x01", 1)  # pos at the end
    with pytest.raises(CorruptRecordError):
        decode(b"\x01\x02\xac", 2)  # truncated after an offset
    with pytest.raises(CorruptRecordError):
        decode(memoryview(b"\xac\x02")[:1])  # the view ends before the byte that would end it


@pytest.mark.parametrize(
    ("kind", "bits"), [("uvarint", 32), ("varint", 32), ("uvarlong", 64), ("varlong", 64)]
)
def test_decode_maximal_length_stays_in_range(codec: ModuleType, kind: str, bits: int) -> None:
    # A maximal-length varint whose last byte carries bits beyond the type:
    # a decoder may reject it, but must never return a value outside the type.
    decode = getattr(codec, f"decode_{kind}")
    limit = 5 if bits == 32 else 10
    data = b"\xff" * (limit - 1) + b"\x7f"
    try:
        value, pos = decode(data)
    except CorruptRecordError:
        return
    assert pos == limit
    if kind.startswith("u"):
        assert 0 <= value < 2**bits
    else:
        assert -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("uvarint", [-1, U32 + 1, 2**40, -(2**70)]),
        ("uvarlong", [-1, U64 + 1, 2**100]),
        ("varint", [I32[0] - 1, I32[1] + 1, 2**40, -(2**40)]),
        ("varlong", [I64[0] - 1, I64[1] + 1, 2**100]),
    ],
)
def test_encode_out_of_range_raises_value_error(
    codec: ModuleType, kind: str, bad: list[int]
) -> None:
    encode = getattr(codec, f"encode_{kind}")
    for value in bad:
        with pytest.raises(ValueError):
            encode(value)


@FIXTURE_OK
@given(st.integers(0, U32))
def test_uvarint_roundtrip(codec: ModuleType, value: int) -> None:
    encoded = codec.encode_uvarint(value)
    assert encoded == uvarint(value)
    assert len(encoded) <= 5
    assert codec.decode_uvarint(encoded + b"\x99") == (value, len(encoded))


@FIXTURE_OK
@given(st.integers(0, U64))
def test_uvarlong_roundtrip(codec: ModuleType, value: int) -> None:
    encoded = codec.encode_uvarlong(value)
    assert encoded == uvarint(value)
    assert len(encoded) <= 10
    assert codec.decode_uvarlong(encoded + b"\x99") == (value, len(encoded))


@FIXTURE_OK
@given(st.integers(*I32))
def test_varint_roundtrip(codec: ModuleType, value: int) -> None:
    encoded = codec.encode_varint(value)
    assert encoded == varint(value)
    assert len(encoded) <= 5
    assert codec.decode_varint(encoded + b"\x99") == (value, len(encoded))


@FIXTURE_OK
@given(st.integers(*I64))
def test_varlong_roundtrip(codec: ModuleType, value: int) -> None:
    encoded = codec.encode_varlong(value)
    assert encoded == varint(value)
    assert len(encoded) <= 10
    assert codec.decode_varlong(encoded + b"\x99") == (value, len(encoded))


@FIXTURE_OK
@given(st.binary(max_size=12), st.integers(0, 12))
def test_decode_arbitrary_bytes_is_clean(codec: ModuleType, data: bytes, pos: int) -> None:
    for kind in ("uvarint", "uvarlong", "varint", "varlong"):
        decode = getattr(codec, f"decode_{kind}")
        try:
            _value, end = decode(data, pos)
        except CorruptRecordError:
            continue
        assert pos < end <= len(data)
        assert end - pos <= (5 if kind.endswith("int") else 10)
        assert data[end - 1] < 0x80
        assert all(b & 0x80 for b in data[pos : end - 1])
