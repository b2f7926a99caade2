"""Request and response headers, and which header version each API version uses.

Request header v1 is ``api_key int16, api_version int16, correlation_id int32,
client_id nullable string``; v2 (flexible request versions) adds a tag buffer.
Response header v0 is ``correlation_id int32``; v1 (flexible response versions)
adds a tag buffer, except for ApiVersions, whose responses always use v0 so
that a client can read the error of a version the broker does not speak
(KIP-511).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pykaf.errors import UnsupportedVersionError
from pykaf.protocol import _wire
from pykaf.protocol._errors import MalformedMessageError
from pykaf.protocol._messages import API_NAMES, REQUESTS, RESPONSES
from pykaf.protocol._messages.api_versions import ApiVersionsRequest

_REQUEST_HEADER = struct.Struct(">hhih")
_FIXED = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
API_VERSIONS_KEY = ApiVersionsRequest.API_KEY


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``Metadata`` for 3), or ``ApiKey<n>`` when unknown."""
    return API_NAMES.get(api_key) or f"ApiKey{api_key}"


def request_header_flexible(api_key: int, version: int) -> bool:
    """Whether a request of this API version uses request header v2 (with tags).

    Raises:
        UnsupportedVersionError: pykaf does not speak the API.
    """
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"pykaf does not speak {api_name(api_key)}")
    return cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION


def response_header_flexible(api_key: int, version: int) -> bool:
    """Whether a response of this API version uses response header v1 (with tags).

    ApiVersions responses never do (KIP-511).

    Raises:
        UnsupportedVersionError: pykaf does not speak the API.
    """
    if api_key == API_VERSIONS_KEY:
        return False
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"pykaf does not speak {api_name(api_key)}")
    return cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> bytes:
    """A request header: v2 when ``flexible``, else v1 (the client id is never compact)."""
    if client_id is None:
        head = _REQUEST_HEADER.pack(api_key, api_version, correlation_id, -1)
    else:
        cid = client_id.encode()
        head = _REQUEST_HEADER.pack(api_key, api_version, correlation_id, len(cid)) + cid
    return head + b"\x00" if flexible else head


def decode_response_header(data: bytes | bytearray | memoryview, flexible: bool) -> tuple[int, int]:
    """Read a response header; return the correlation id and the offset of the body.

    Unknown tagged fields in a v1 header are skipped.

    Raises:
        MalformedMessageError: the header is truncated or corrupt.
    """
    try:
        (correlation_id,) = _CORRELATION.unpack_from(data, 0)
        pos = 4
        if flexible:
            pos = _wire.skip_tags(data, pos, len(data))
    except (struct.error, IndexError) as exc:
        raise MalformedMessageError(f"truncated response header ({exc})") from None
    return correlation_id, pos


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """A response header (v1 with an empty tag buffer when ``flexible``); for fake brokers."""
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if flexible else head


class RequestHeader(NamedTuple):
    """A decoded request header, and where the request body starts."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def decode_request_header(data: bytes | bytearray | memoryview) -> RequestHeader:
    """Read a request header (v1, or v2 when the API version is flexible); for fake brokers.

    The header version follows from the API key and version it starts with;
    an API pykaf does not speak is read as header v1.

    Raises:
        MalformedMessageError: the header is truncated or corrupt.
    """
    try:
        api_key, api_version, correlation_id = _FIXED.unpack_from(data, 0)
        (n,) = _wire.INT16.unpack_from(data, 8)
        pos = 10
        client_id = None
        if n >= 0:
            if pos + n > len(data):
                raise MalformedMessageError("truncated client id in request header")
            client_id = bytes(data[pos : pos + n]).decode()
            pos += n
        elif n != -1:
            raise MalformedMessageError(f"invalid client id length {n}")
        try:
            flexible = request_header_flexible(api_key, api_version)
        except UnsupportedVersionError:
            flexible = False
        if flexible:
            pos = _wire.skip_tags(data, pos, len(data))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedMessageError(f"truncated or corrupt request header ({exc})") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)
