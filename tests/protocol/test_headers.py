"""Request and response headers, and which header version each API version uses."""

from __future__ import annotations

import struct

import pytest

import pykaf.protocol as P
from pykaf.errors import UnsupportedVersionError


def test_request_header_v1() -> None:
    head = P.encode_request_header(3, 1, 7, "pykaf", False)
    assert head == struct.pack(">hhih", 3, 1, 7, 5) + b"pykaf"


def test_request_header_v2_adds_an_empty_tag_buffer_and_keeps_a_plain_client_id() -> None:
    head = P.encode_request_header(3, 12, 2**31 - 1, "pykaf", True)
    assert head == struct.pack(">hhih", 3, 12, 2**31 - 1, 5) + b"pykaf" + b"\x00"


def test_request_header_null_client_id() -> None:
    assert P.encode_request_header(18, 0, 1, None, False) == struct.pack(">hhih", 18, 0, 1, -1)


def test_decode_request_header_roundtrip() -> None:
    body = P.MetadataRequest(topics=None).encode(12)
    frame = P.encode_request_header(3, 12, 42, "cli", True) + body
    header = P.decode_request_header(frame)
    assert header == P.RequestHeader(3, 12, 42, "cli", len(frame) - len(body))
    assert P.MetadataRequest.decode(memoryview(frame)[header.body_offset :], 12).topics is None
    v1 = P.encode_request_header(3, 8, 1, None, False)
    assert P.decode_request_header(v1) == P.RequestHeader(3, 8, 1, None, len(v1))


@pytest.mark.parametrize(
    "data", [b"", b"\x00\x03\x00", b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab"]
)
def test_decode_request_header_truncated(data: bytes) -> None:
    with pytest.raises(P.MalformedMessageError):
        P.decode_request_header(data)


def test_response_header_v0_and_v1() -> None:
    assert P.decode_response_header(b"\x00\x00\x00\x05rest", False) == (5, 4)
    assert P.decode_response_header(b"\x00\x00\x00\x05\x00rest", True) == (5, 5)
    # unknown tagged fields in the header are skipped
    tagged = b"\x00\x00\x00\x05" + b"\x02" + b"\x00\x01z" + b"\x03\x02ab" + b"rest"
    assert P.decode_response_header(tagged, True) == (5, len(tagged) - 4)
    assert P.encode_response_header(9, True) == b"\x00\x00\x00\x09\x00"
    assert P.encode_response_header(9, False) == b"\x00\x00\x00\x09"


@pytest.mark.parametrize(
    ("data", "flexible"),
    [
        (b"", False),
        (b"\x00\x00\x01", False),
        (b"\x00\x00\x00\x01", True),
        (b"\x00\x00\x00\x01\x01\x00\x05", True),
    ],
)
def test_response_header_truncated(data: bytes, flexible: bool) -> None:
    with pytest.raises(P.MalformedMessageError):
        P.decode_response_header(data, flexible)


def test_header_versions_follow_flexibility() -> None:
    assert not P.request_header_flexible(3, 8)
    assert P.request_header_flexible(3, 9)
    assert not P.response_header_flexible(3, 8)
    assert P.response_header_flexible(3, 9)
    assert not P.request_header_flexible(17, 1)  # SaslHandshake: never flexible
    assert not P.response_header_flexible(47, 0)  # OffsetDelete: never flexible


def test_api_versions_responses_always_use_header_v0() -> None:
    assert P.request_header_flexible(18, 3)
    for version in range(P.ApiVersionsResponse.MAX_VERSION + 1):
        assert not P.response_header_flexible(18, version)


def test_unknown_api() -> None:
    with pytest.raises(UnsupportedVersionError):
        P.request_header_flexible(9999, 0)
    with pytest.raises(UnsupportedVersionError):
        P.response_header_flexible(9999, 0)
    assert P.api_name(9999) == "ApiKey9999"
    assert P.api_name(7) == "ControlledShutdown"  # known to Kafka, not spoken by pykaf
    assert 7 not in P.REQUESTS
