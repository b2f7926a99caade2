"""The fake cluster's network side: one TCP listener per broker, one task per connection.

A connection is served as Kafka serves one: requests are read, handled and
answered one at a time, in order. Before handling, the broker applies the
cluster's faults (down, injected errors, added latency) and, when SASL is on,
refuses every request but the handshake until the client authenticated.
"""

from __future__ import annotations

import logging
import ssl
import struct
from typing import Any

import trio

from pykaf.protocol import (
    ApiVersionsRequest,
    MalformedMessageError,
    Message,
    Response,
    decode_request_header,
    encode_response_header,
    response_header_flexible,
)
from pykaf.protocol._message import spec_of
from pykaf.testing._fake.api import ClusterState, RequestContext
from pykaf.testing._fake.model import BrokerNode, CloseConnection, RequestRecord, Session

log = logging.getLogger("pykaf.testing.fake")

_SIZE = struct.Struct(">i")
MAX_FRAME = 100 * 1024 * 1024
API_VERSIONS = ApiVersionsRequest.API_KEY


def fit(msg: Any, version: int) -> Any:
    """Reset, in place, every field of ``msg`` that ``version`` does not have.

    Handlers fill responses for the newest version; an older client gets the
    fields its version carries (Kafka's brokers drop the others the same way).
    """
    spec = spec_of(type(msg))
    blank: Any = None
    for f in spec.fields:
        value = getattr(msg, f.attr)
        if version not in f.versions:
            if blank is None:
                blank = type(msg)()
            setattr(msg, f.attr, getattr(blank, f.attr))
        elif f.kind == "array" and value and f.elem_struct is not None:
            for item in value:
                fit(item, version)
        elif f.kind == "struct" and value is not None:
            fit(value, version)
    return msg


def default_error(response_cls: type[Response], code: int) -> Response:
    """An empty response of ``response_cls`` with its top-level ``error_code`` set."""
    resp = response_cls()
    if hasattr(resp, "error_code"):
        resp.error_code = code
    return resp


class BrokerServer:
    """Serves one broker: accepts connections and answers their requests."""

    def __init__(self, cluster: ClusterState, node: BrokerNode) -> None:
        self.cluster = cluster
        self.node = node
        self._connections: set[trio.CancelScope] = set()
        self._listeners: list[trio.SocketListener] = []

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on the broker's address and serve until cancelled."""
        listeners = await trio.open_tcp_listeners(self.node.port, host=self.node.host)
        self._listeners = listeners
        self.node.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started()
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    def drop_connections(self) -> None:
        """Close every open connection (the broker went down)."""
        for scope in list(self._connections):
            scope.cancel()

    async def _handle(self, stream: trio.SocketStream) -> None:
        if not self.node.up:
            await trio.aclose_forcefully(stream)
            return
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        session = Session(peer=peer, authenticated=not self.cluster.sasl_required)
        with trio.CancelScope() as scope:
            self._connections.add(scope)
            conn: trio.abc.Stream = stream
            try:
                if self.cluster.ssl_context is not None:
                    conn = trio.SSLStream(stream, self.cluster.ssl_context, server_side=True)
                    await conn.do_handshake()
                await self._serve_connection(conn, session)
            except (
                CloseConnection,
                trio.BrokenResourceError,
                trio.ClosedResourceError,
                ssl.SSLError,
            ):
                pass
            except OSError as exc:
                log.debug("broker %d: connection from %s: %s", self.node.node_id, peer, exc)
            finally:
                self._connections.discard(scope)
                session.closed = True
                await trio.aclose_forcefully(conn)

    async def _read_exactly(self, stream: trio.abc.Stream, buf: bytearray, n: int) -> bytes:
        while len(buf) < n:
            chunk = await stream.receive_some(max(65536, n - len(buf)))
            if not chunk:
                raise CloseConnection
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    async def _serve_connection(self, stream: trio.abc.Stream, session: Session) -> None:
        buf = bytearray()
        while True:
            (size,) = _SIZE.unpack(await self._read_exactly(stream, buf, 4))
            if size < 0 or size > MAX_FRAME:
                raise CloseConnection
            frame = await self._read_exactly(stream, buf, size)
            if session.raw_sasl:
                reply = await self.cluster.sasl.raw_token(session, frame)
                await stream.send_all(_SIZE.pack(len(reply)) + reply)
                continue
            out = await self._answer(session, frame)
            if out is not None:
                await stream.send_all(out)
            if session.extra.get("close_after_reply"):
                raise CloseConnection

    async def _answer(self, session: Session, frame: bytes) -> bytes | None:
        cluster = self.cluster
        try:
            header = decode_request_header(frame)
        except MalformedMessageError:
            raise CloseConnection from None
        key, version = header.api_key, header.api_version
        api = cluster.apis.get(key)
        if api is None:
            log.debug("broker %d: unknown API key %d: closing", self.node.node_id, key)
            raise CloseConnection
        if not (api.min_version <= version <= api.max_version):
            if key != API_VERSIONS:
                raise CloseConnection
            return self._frame(header.correlation_id, key, 0, cluster.api_versions_error())
        if not session.authenticated and not api.before_auth:
            log.debug(
                "broker %d: %s before SASL authentication: closing",
                self.node.node_id,
                api.request.__name__,
            )
            raise CloseConnection
        try:
            request = api.request.decode(memoryview(frame)[header.body_offset :], version)
        except MalformedMessageError:
            raise CloseConnection from None
        if cluster.tracking:
            cluster.requests.append(
                RequestRecord(self.node.node_id, key, version, header.client_id, request)
            )
        injected = cluster.take_injected(self.node.node_id, key)
        ctx = RequestContext(cluster, self.node, session, header)
        if injected is not None:
            if injected.rtt_ms:
                await trio.sleep(injected.rtt_ms / 1000)
            response: Response | None = (
                api.error(request, version, injected.code)
                if api.error is not None
                else default_error(api.response, injected.code)
            )
        else:
            try:
                response = await api.handler(ctx, request, version)
            except CloseConnection:
                raise
            except Exception as exc:
                cluster.handler_errors.append(exc)
                log.exception(
                    "broker %d: %s v%d handler failed",
                    self.node.node_id,
                    api.request.__name__,
                    version,
                )
                raise CloseConnection from None
        if session.closed or (injected is None and cluster.answer_lost(key, request)):
            raise CloseConnection  # (a lost answer: carried out, then the connection drops)
        if self.node.rtt_ms:
            await trio.sleep(self.node.rtt_ms / 1000)
        if response is None:
            return None
        return self._frame(header.correlation_id, key, version, response)

    def _frame(self, correlation_id: int, key: int, version: int, response: Message) -> bytes:
        fit(response, version)
        body = response.encode(version)
        head = encode_response_header(correlation_id, response_header_flexible(key, version))
        return _SIZE.pack(len(head) + len(body)) + head + body
