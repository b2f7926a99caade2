"""Peers that break the protocol or go silent: clean errors, reset connections, no hangs."""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Awaitable, Callable

import pytest
import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup

Handler = Callable[[trio.SocketStream], Awaitable[None]]


async def read_request(stream: trio.SocketStream, buf: bytearray) -> P.RequestHeader:
    while True:
        if len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) >= 4 + size:
                frame = bytes(buf[4 : 4 + size])
                del buf[: 4 + size]
                return P.decode_request_header(frame)
        data = await stream.receive_some(65536)
        if not data:
            raise EOFError
        buf += data


def frame(header: P.RequestHeader, body: bytes, *, flexible: bool | None = None) -> bytes:
    if flexible is None:
        flexible = P.response_header_flexible(header.api_key, header.api_version)
    payload = P.encode_response_header(header.correlation_id, flexible) + body
    return struct.pack(">i", len(payload)) + payload


def versions_body(header: P.RequestHeader) -> bytes:
    keys = [
        P.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3),
        P.ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=12),
        P.ApiVersionsResponse.ApiVersion(api_key=10, min_version=0, max_version=4),
    ]
    return P.ApiVersionsResponse(error_code=0, api_keys=keys).encode(header.api_version)


async def serve(handler: Handler, nursery: trio.Nursery) -> int:
    listeners = await nursery.start(trio.serve_tcp, handler, 0)
    return int(listeners[0].socket.getsockname()[1])


async def open_conn(port: int, nursery: trio.Nursery, **cfg: object) -> BrokerConnection:
    options: dict[str, object] = {"request_timeout": 1.0, "connect_timeout": 1.0, **cfg}
    config = ClientConfig.from_kwargs(**options)
    return await BrokerConnection.open(nursery, "127.0.0.1", port, config)


def behaving_then(after: Callable[[P.RequestHeader], bytes | None]) -> Handler:
    """Answer ApiVersions properly, then answer every request with ``after``."""

    async def handler(stream: trio.SocketStream) -> None:
        buf = bytearray()
        try:
            header = await read_request(stream, buf)
            await stream.send_all(frame(header, versions_body(header)))
            while True:
                header = await read_request(stream, buf)
                reply = after(header)
                if reply is None:
                    await trio.sleep_forever()
                await stream.send_all(reply)
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    return handler


BAD_REPLIES: dict[str, Callable[[P.RequestHeader], bytes]] = {
    "wrong-correlation-id": lambda h: frame(
        h._replace(correlation_id=h.correlation_id + 7), P.MetadataResponse().encode(h.api_version)
    ),
    "truncated-body": lambda h: frame(h, P.MetadataResponse(cluster_id="c" * 40).encode(12)[:9]),
    "garbage-body": lambda h: frame(h, b"\xff" * 64),
    "negative-size": lambda h: struct.pack(">i", -1) + b"\0" * 8,
    "oversized-frame": lambda h: struct.pack(">i", 2**31 - 1) + b"\0" * 8,
}


@pytest.mark.parametrize("kind", sorted(BAD_REPLIES))
async def test_malformed_responses_give_protocol_errors(kind: str) -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(behaving_then(BAD_REPLIES[kind]), nursery)
        conn = await open_conn(port, nursery, max_response_bytes=1 << 20)
        with trio.fail_after(5):
            with pytest.raises(errors.ProtocolError):
                await conn.request(P.MetadataRequest(topics=None))
            assert conn.broken
            with pytest.raises(errors.ProtocolError):  # the connection stays dead
                await conn.request(P.MetadataRequest(topics=None))
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_silent_peer_times_out_and_every_pending_request_fails() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(behaving_then(lambda h: None), nursery)
        conn = await open_conn(port, nursery, request_timeout=0.3)
        results: list[BaseException] = []

        async def one() -> None:
            try:
                await conn.request(P.MetadataRequest(topics=None))
            except errors.PykafError as exc:
                results.append(exc)

        with trio.fail_after(5):
            async with trio.open_nursery() as inner:
                for _ in range(3):
                    inner.start_soon(one)
        assert len(results) == 3
        assert all(isinstance(e, errors.KafkaConnectionError) for e in results)
        assert any(isinstance(e, errors.KafkaTimeoutError) for e in results)
        assert conn.broken
        nursery.cancel_scope.cancel()


async def hang_up(stream: trio.SocketStream) -> None:
    """Answer ApiVersions, read the next request, and close the connection."""
    buf = bytearray()
    header = await read_request(stream, buf)
    await stream.send_all(frame(header, versions_body(header)))
    await read_request(stream, buf)
    await stream.aclose()


async def test_peer_closing_mid_request_is_a_connection_error() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(hang_up, nursery)
        conn = await open_conn(port, nursery)
        with trio.fail_after(5), pytest.raises(errors.KafkaConnectionError, match="closed"):
            await conn.request(P.MetadataRequest(topics=None))
        nursery.cancel_scope.cancel()


async def test_pipelined_requests_are_matched_in_order() -> None:
    async def echo_cluster_ids(stream: trio.SocketStream) -> None:
        buf = bytearray()
        header = await read_request(stream, buf)
        await stream.send_all(frame(header, versions_body(header)))
        with pytest.raises(EOFError):
            while True:
                header = await read_request(stream, buf)
                body = P.MetadataResponse(cluster_id=str(header.correlation_id))
                await trio.sleep(0.001 * (header.correlation_id % 3))
                await stream.send_all(frame(header, body.encode(header.api_version)))

    async with trio.open_nursery() as nursery:
        port = await serve(echo_cluster_ids, nursery)
        conn = await open_conn(port, nursery, max_in_flight_per_connection=4)
        got: list[str] = []

        async def one() -> None:
            resp = await conn.request(P.MetadataRequest(topics=None))
            got.append(resp.cluster_id)

        with trio.fail_after(5):
            async with trio.open_nursery() as inner:
                for _ in range(20):
                    inner.start_soon(one)
        assert sorted(got, key=int) == [str(i) for i in range(1, 21)]
        assert conn.requests_sent == 21
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_connect_timeout() -> None:
    # A listening socket whose backlog is never accepted still completes TCP
    # handshakes in the kernel, so use an unroutable-free trick: a server that
    # accepts and never answers ApiVersions.
    async with trio.open_nursery() as nursery:
        port = await serve(behaving_then(lambda h: None), nursery)

        async def mute(stream: trio.SocketStream) -> None:
            await trio.sleep_forever()

        mute_port = await serve(mute, nursery)
        with trio.fail_after(5), pytest.raises(errors.KafkaTimeoutError):
            await open_conn(mute_port, nursery, request_timeout=0.3)
        # connect_timeout bounds the ApiVersions exchange too, whatever
        # request_timeout says: a port that is not Kafka's is named in seconds.
        with trio.fail_after(20), pytest.raises(errors.KafkaTimeoutError, match="ApiVersions"):
            await open_conn(mute_port, nursery, request_timeout=60.0, connect_timeout=0.3)
        assert port
        nursery.cancel_scope.cancel()


async def test_an_unreachable_bootstrap_names_the_cause_within_connect_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pykaf._cluster.client import open_client

    # A closed port: the kernel refuses at once. request_timeout (60 s) is not
    # the wait: until a broker first answered, connect_timeout is.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with trio.fail_after(30), pytest.raises(errors.KafkaConnectionError) as info:
        async with open_client(
            f"127.0.0.1:{closed}", request_timeout=60.0, connect_timeout=0.5
        ) as client:
            await client.topics()
    assert "Connection refused" in str(info.value)
    # and the first failure is logged at once, with its cause
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and "Connection refused" in warnings[0].getMessage()


def test_describe_reads_into_exception_groups() -> None:
    from pykaf._net.connection import describe

    refused = ConnectionRefusedError(111, "Connection refused")
    try:
        try:
            raise BaseExceptionGroup("attempts", [refused, OSError("unreachable")])
        except BaseExceptionGroup as group:
            raise OSError("all attempts to connect failed") from group
    except OSError as exc:
        text = describe(exc)
    assert text.startswith("all attempts to connect failed: ")
    assert "Connection refused" in text and "unreachable" in text


async def test_closing_the_client_with_requests_stuck_does_not_hang() -> None:
    from pykaf._cluster.client import open_client

    async def answers_metadata_then_goes_silent(stream: trio.SocketStream) -> None:
        buf = bytearray()
        try:
            header = await read_request(stream, buf)
            await stream.send_all(frame(header, versions_body(header)))
            while True:
                header = await read_request(stream, buf)
                if header.api_key != 3:
                    await trio.sleep_forever()  # never answers anything else
                port = stream.socket.getsockname()[1]
                resp = P.MetadataResponse(
                    brokers=[
                        P.MetadataResponse.MetadataResponseBroker(
                            node_id=1, host="127.0.0.1", port=port
                        )
                    ],
                    controller_id=1,
                )
                await stream.send_all(frame(header, resp.encode(header.api_version)))
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async with trio.open_nursery() as nursery:
        port = await serve(answers_metadata_then_goes_silent, nursery)
        outcomes: list[BaseException] = []
        with trio.fail_after(10):  # a guard against hanging, not a speed check
            async with open_client(f"127.0.0.1:{port}", request_timeout=60) as client:

                async def stuck() -> None:
                    try:
                        await client.coordinator("g")
                    except errors.PykafError as exc:
                        outcomes.append(exc)

                async with trio.open_nursery() as waiters:
                    for _ in range(3):
                        waiters.start_soon(stuck)
                    await trio.sleep(0.2)  # the three requests are now in flight
                    assert client.statistics().requests_sent >= 3
                    await client.aclose()  # closing fails them instead of waiting
        assert len(outcomes) == 3
        assert all(isinstance(e, errors.KafkaConnectionError) for e in outcomes)
        nursery.cancel_scope.cancel()
