"""A Kafka connection as a state machine with no I/O: bytes in, responses out.

In the style of h11: the caller feeds what the socket received into
:meth:`Connection.receive_data` and writes what :meth:`Connection.data_to_send`
returns. The machine frames requests, assigns correlation ids, matches
responses in order (Kafka answers in request order on one connection), knows
that Produce with acks=0 gets no answer, and negotiates API versions from the
broker's ApiVersions response.

Errors are split as h11 splits them: :class:`~pykaf.errors.ProtocolError` when
the peer broke the protocol (after which the connection must be dropped),
``ValueError``/``UnsupportedVersionError`` when the caller asked for something
the connection cannot do.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pykaf import protocol as P
from pykaf.errors import ProtocolError, UnsupportedVersionError
from pykaf.protocol.versions import CLIENT_CAPS

_SIZE = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_CID = struct.Struct(">i")
#: A frame at least this large is gathered into one buffer as its bytes come
#: (see ``Connection._filling``), not kept as the reads and joined at its end.
FILL_FROM = 1 << 20
API_VERSIONS_KEY = P.ApiVersionsRequest.API_KEY
PRODUCE_KEY = P.ProduceRequest.API_KEY
UNSUPPORTED_VERSION = 35

#: Responses larger than this are refused (and the connection dropped) rather
#: than buffered: a corrupt size prefix must not make the client allocate GBs.
DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024 * 1024
#: How many unanswered (acks=0) requests' correlation ids a connection keeps.
UNANSWERED_KEPT = 1024


@dataclass(slots=True)
class Pending:
    """A request sent and not yet answered."""

    correlation_id: int
    api_key: int
    version: int
    response_class: Any
    context: Any = None


@dataclass(slots=True)
class Response:
    """A decoded response, matched to the request it answers."""

    correlation_id: int
    api_key: int
    version: int  # the version the body was decoded with
    body: Any
    context: Any = None
    request_version: int = -1  # the version the request was sent with


@dataclass(slots=True)
class BrokerVersions:
    """What a broker said it supports and what pykaf will use with it."""

    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    chosen: dict[int, int] = field(default_factory=dict)
    #: The cluster-wide finalized feature levels the broker reported (ApiVersions
    #: v3+ tagged fields; KIP-584), by name: ``{"transaction.version": 2, ...}``.
    #: Empty when the broker reports none (older brokers, some test brokers).
    finalized_features: dict[str, int] = field(default_factory=dict)
    #: Their epoch (-1: none reported): a higher one is newer.
    finalized_features_epoch: int = -1

    def feature_level(self, name: str) -> int:
        """The finalized max level of feature ``name`` (0 when not finalized)."""
        return self.finalized_features.get(name, 0)

    def version_for(self, api_key: int) -> int:
        """The version to use for ``api_key``; raises if no common version exists."""
        try:
            return self.chosen[api_key]
        except KeyError:
            name = P.api_name(api_key)
            if api_key not in self.ranges:
                raise UnsupportedVersionError(
                    f"the broker does not support {name} (API key {api_key})"
                ) from None
            lo, hi = self.ranges[api_key]
            req = P.REQUESTS[api_key]
            raise UnsupportedVersionError(
                f"no common version of {name}: broker {lo}-{hi}, "
                f"pykaf {req.MIN_VERSION}-{req.MAX_VERSION}"
            ) from None

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        """Whether a version >= ``min_version`` of ``api_key`` was negotiated."""
        v = self.chosen.get(api_key)
        return v is not None and v >= min_version


def _rejected_api_versions(body: memoryview) -> Any:
    """The body of an ApiVersions rejection (KIP-511).

    A broker that does not speak our ApiVersions version answers with
    UNSUPPORTED_VERSION in a v0 body naming the versions it does speak. Some
    brokers (librdkafka's mock) write that body in a shape v0 cannot parse;
    then all that is known is the rejection, and the retry uses v0.
    (quirk: mock-api-versions-body)
    """
    cls = P.RESPONSES[API_VERSIONS_KEY]
    try:
        return cls.decode(body, 0)
    except ProtocolError:
        return cls(error_code=UNSUPPORTED_VERSION, api_keys=[])


def negotiate(ranges: dict[int, tuple[int, int]]) -> BrokerVersions:
    """Pick, per API, the highest version both pykaf and the broker speak."""
    chosen: dict[int, int] = {}
    for key, (lo, hi) in ranges.items():
        req = P.REQUESTS.get(key)
        if req is None:
            continue
        cap = CLIENT_CAPS.get(key)
        v = min(hi, req.MAX_VERSION, req.MAX_VERSION if cap is None else cap.max_version)
        if v >= max(lo, req.MIN_VERSION):
            chosen[key] = v
    return BrokerVersions(dict(ranges), chosen)


class Connection:
    """Framing, correlation and version state of one broker connection.

    Args:
        client_id: sent in every request header (None sends a null client id).
        max_response_bytes: the largest response frame accepted.
    """

    def __init__(
        self,
        client_id: str | None = "pykaf",
        *,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self.versions: BrokerVersions | None = None
        self._next_id = 0
        self._pending: deque[Pending] = deque()
        # Correlation ids of requests Kafka never answers (Produce with acks=0),
        # the latest UNANSWERED_KEPT: some brokers (Tansu, librdkafka's mock)
        # answer them anyway, and such an answer is dropped, not a protocol error.
        # quirk: answered-acks-zero
        self._unanswered: dict[int, None] = {}
        self._out: list[bytes | bytearray | memoryview] = []
        # Bytes received and not yet framed: the chunks as read (or views of
        # their tails), never copied until a whole frame is there (but for a
        # large frame's, gathered in ``_filling`` instead).
        self._chunks: deque[bytes | memoryview] = deque()
        self._buffered = 0
        self._frame_size = -1  # the current frame's size once its prefix is in
        # A large frame's bytes so far (without its prefix), gathered as they
        # come: each read is copied in and freed at once, so a 32 MiB Fetch
        # answer is not a hundred reads held until a join, whose release the C
        # allocator may hand back to the system after every answer (to be
        # faulted in again by the next; how often depends on its history).
        self._filling: bytearray | None = None
        self._closed_reason: str | None = None

    # -- sending --------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests sent that still wait for a response."""
        return len(self._pending)

    @property
    def unanswered(self) -> int:
        """Requests sent that expect no response (acks=0), of the latest ``UNANSWERED_KEPT``."""
        return len(self._unanswered)

    def version_for(self, api_key: int) -> int:
        """The negotiated version for ``api_key`` (after the ApiVersions exchange)."""
        if self.versions is None:
            raise UnsupportedVersionError("API versions have not been negotiated yet")
        return self.versions.version_for(api_key)

    def send_request(
        self,
        request: Any,
        version: int | None = None,
        *,
        expect_response: bool = True,
        context: Any = None,
    ) -> int:
        """Frame ``request`` for sending; return its correlation id.

        Args:
            request: a protocol request object (``pykaf.protocol.*Request``).
            version: the version to encode; None uses the negotiated one.
            expect_response: False for requests the broker never answers
                (Produce with acks=0); nothing is queued to wait for them.
            context: an opaque value handed back with the response.

        Raises:
            UnsupportedVersionError: no usable version of this API.
            ValueError: the connection is broken.
        """
        if self._closed_reason is not None:
            raise ValueError(f"connection is broken: {self._closed_reason}")
        api_key = request.API_KEY
        if version is None:
            version = self.version_for(api_key)
        if not request.MIN_VERSION <= version <= request.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{request.API_NAME} v{version} is outside pykaf's "
                f"{request.MIN_VERSION}-{request.MAX_VERSION}"
            )
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        header = P.encode_request_header(
            api_key,
            version,
            cid,
            self.client_id,
            P.request_header_flexible(api_key, version),
        )
        body = request.encode_parts(version)  # joined once, by data_to_send
        size = len(header)
        for part in body:
            size += len(part)
        out = self._out
        out.append(_SIZE.pack(size))
        out.append(header)
        out += body
        if expect_response:
            self._pending.append(Pending(cid, api_key, version, P.RESPONSES[api_key], context))
        else:
            unanswered = self._unanswered
            unanswered[cid] = None
            if len(unanswered) > UNANSWERED_KEPT:
                del unanswered[next(iter(unanswered))]
        return cid

    def data_to_send(self) -> bytes:
        """Everything framed since the last call, ready to write to the socket."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    # -- receiving ------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Feed bytes read from the socket; return the responses they completed.

        Raises:
            ProtocolError: the broker broke the protocol (an oversized frame, an
                unexpected correlation id, an undecodable body). The connection
                is unusable afterwards; every pending request must be failed.
        """
        if self._closed_reason is not None:
            raise ProtocolError(f"connection is broken: {self._closed_reason}")
        if (
            type(data) is bytes
            and not self._chunks
            and self._frame_size < 0
            and self._filling is None
            and not self._unanswered
            and len(data) >= 4
            and len(data) == 4 + _SIZE.unpack_from(data)[0]
        ):
            # One whole frame, nothing buffered (an answer read in one piece,
            # the common case): no buffering, the frame's bytes copied once.
            if len(data) > 4 + self.max_response_bytes or len(data) < 8:
                self._break(f"invalid response size {len(data) - 4}")
            return [self._handle_frame(data[4:])]
        out: list[Response] = []
        if self._filling is not None:
            whole, data = self._fill(data)
            if whole is None:
                return out
            self._settle(whole, out)
        if data:
            self._chunks.append(data if isinstance(data, bytes) else bytes(data))
            self._buffered += len(data)
        while True:
            if self._frame_size < 0:
                if self._buffered < 4:
                    break
                (size,) = _SIZE.unpack(self._peek(4))
                if size < 4 or size > self.max_response_bytes:
                    self._break(f"invalid response size {size}")
                self._frame_size = size
            if self._buffered < 4 + self._frame_size:
                if self._frame_size >= FILL_FROM:
                    self._start_filling()
                break
            frame = self._take_frame(self._frame_size)
            self._frame_size = -1
            self._settle(frame, out)
        return out

    def _settle(self, frame: bytes | bytearray, out: list[Response]) -> None:
        """A whole frame: its response joins ``out`` (unless it answers an acks=0 request)."""
        if self._unanswered and self._answers_unanswered(frame):
            return
        out.append(self._handle_frame(frame))

    def _start_filling(self) -> None:
        """The current frame is large: what came of it moves into the buffer it is gathered in."""
        chunks = self._chunks
        filling = bytearray()
        skip = 4  # the size prefix
        for chunk in chunks:
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            filling += memoryview(chunk)[skip:] if skip else chunk
            skip = 0
        chunks.clear()
        self._buffered = 0
        self._filling = filling

    def _fill(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[bytearray | None, bytes | bytearray | memoryview]:
        """Add ``data`` to the frame being gathered: (the frame once whole, else None; the rest)."""
        filling = self._filling
        assert filling is not None
        need = self._frame_size - len(filling)
        if len(data) < need:
            filling += data
            return None, b""
        filling += memoryview(data)[:need] if len(data) > need else data
        self._filling = None
        self._frame_size = -1
        return filling, memoryview(data)[need:] if len(data) > need else b""

    def _answers_unanswered(self, frame: bytes | bytearray) -> bool:
        """Whether ``frame`` answers a request that expects none (then forget that request).

        The correlation id is a response header's first field in every
        header version, so it is read before the header's version is known.
        """
        if len(frame) < 4:
            return False
        (cid,) = _CID.unpack_from(frame)
        if self._pending and self._pending[0].correlation_id == cid:
            return False
        if cid not in self._unanswered:
            return False
        del self._unanswered[cid]
        return True

    def _peek(self, n: int) -> bytes:
        """The first ``n`` buffered bytes (``n`` is small: a size prefix)."""
        first = self._chunks[0]
        if len(first) >= n:
            return bytes(first[:n])
        return b"".join(bytes(c) for c in self._chunks)[:n]

    def _take_frame(self, size: int) -> bytes:
        """Remove a size prefix and the ``size`` bytes after it; return those bytes.

        Each received byte is copied once: into the frame's own bytes object.
        """
        chunks = self._chunks
        self._buffered -= 4 + size
        skip, need = 4, size
        parts: list[bytes | memoryview] = []
        while skip or need:
            chunk = chunks[0]
            length = len(chunk)
            if skip:
                if length <= skip:
                    chunks.popleft()
                    skip -= length
                    continue
                chunk = memoryview(chunk)[skip:]
                length -= skip
                skip = 0
            if length <= need:
                parts.append(chunk)
                chunks.popleft()
                need -= length
            else:
                view = memoryview(chunk)
                parts.append(view[:need])
                chunks[0] = view[need:]
                need = 0
        if len(parts) == 1:
            return bytes(parts[0])
        return b"".join(parts)

    def _handle_frame(self, frame: bytes | bytearray) -> Response:
        if not self._pending:
            self._break("a response arrived with no request pending")
        pending = self._pending[0]
        flexible = P.response_header_flexible(pending.api_key, pending.version)
        try:
            cid, body_at = P.decode_response_header(frame, flexible)
        except ProtocolError as exc:
            self._break(f"malformed response header: {exc}")
        if cid != pending.correlation_id:
            self._break(
                f"expected the response to correlation id {pending.correlation_id}, got {cid}"
            )
        body_bytes = memoryview(frame)[body_at:]
        version = pending.version
        if pending.api_key == API_VERSIONS_KEY and version > 0 and len(body_bytes) >= 2:
            (code,) = _ERROR_CODE.unpack_from(body_bytes)
            if code == UNSUPPORTED_VERSION:
                self._pending.popleft()
                return Response(
                    cid,
                    pending.api_key,
                    0,
                    _rejected_api_versions(body_bytes),
                    pending.context,
                    pending.version,
                )
        try:
            body = pending.response_class.decode(body_bytes, version)
        except ProtocolError as exc:
            # The request stays pending so that its owner fails it with the break.
            self._break(f"malformed {P.api_name(pending.api_key)} v{version} response: {exc}")
        self._pending.popleft()
        return Response(cid, pending.api_key, version, body, pending.context, pending.version)

    def _break(self, reason: str) -> NoReturn:
        self._closed_reason = reason
        raise ProtocolError(reason)

    @property
    def broken(self) -> str | None:
        """Why the connection can no longer be used, or None while it is healthy."""
        return self._closed_reason

    def take_pending(self) -> list[Pending]:
        """Remove and return every unanswered request (to fail them after a break)."""
        items = list(self._pending)
        self._pending.clear()
        return items

    # -- version negotiation ----------------------------------------------------

    def api_versions_request(self, version: int | None = None) -> Any:
        """The ApiVersions request pykaf opens a connection with."""
        from pykaf._version import __version__

        req_cls = P.REQUESTS[API_VERSIONS_KEY]
        return req_cls(client_software_name="pykaf", client_software_version=__version__)

    def handle_api_versions(self, response: Response) -> BrokerVersions | None:
        """Record the broker's API ranges from an ApiVersions response.

        Returns the negotiated versions, or None when the broker rejected our
        ApiVersions version; then :attr:`retry_api_versions_version` says which
        version to retry with.

        Raises:
            ProtocolError: the response carried another error.
        """
        body = response.body
        if body.error_code == UNSUPPORTED_VERSION:
            hi = 0
            for k in body.api_keys:
                if k.api_key == API_VERSIONS_KEY:
                    hi = k.max_version
            req_cls = P.REQUESTS[API_VERSIONS_KEY]
            self.retry_api_versions_version = max(0, min(hi, req_cls.MAX_VERSION))
            sent = response.request_version
            if sent <= 0 or self.retry_api_versions_version >= sent:
                # Nothing lower to try: the broker is unusable for us.
                self._break("the broker rejected every ApiVersions version")
            return None
        if body.error_code:
            self._break(f"ApiVersions failed with error code {body.error_code}")
        ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        self.versions = negotiate(ranges)
        epoch = getattr(body, "finalized_features_epoch", -1)
        if epoch is not None and epoch >= 0:  # the features are valid only then
            self.versions.finalized_features_epoch = epoch
            self.versions.finalized_features = {
                f.name: f.max_version_level for f in body.finalized_features or ()
            }
        return self.versions

    retry_api_versions_version: int = 0
