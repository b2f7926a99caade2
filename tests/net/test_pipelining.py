"""BrokerConnection.send: answers handed to ``on_answer`` as they are read; large writes."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
import trio
import trio.testing
from test_bad_peers import frame, hang_up, open_conn, read_request, serve, versions_body

from pykaf import errors
from pykaf import protocol as P


def answering(delay: float = 0.0) -> object:
    """A broker that answers every Metadata request with its correlation id as cluster id."""

    async def handler(stream: trio.SocketStream) -> None:
        buf = bytearray()
        header = await read_request(stream, buf)
        await stream.send_all(frame(header, versions_body(header)))
        try:
            while True:
                header = await read_request(stream, buf)
                await trio.sleep(delay)
                body = P.MetadataResponse(cluster_id=str(header.correlation_id))
                await stream.send_all(frame(header, body.encode(header.api_version)))
        except (EOFError, trio.BrokenResourceError):
            return

    return handler


async def test_on_answer_gets_each_body_in_order_before_response_returns() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(answering(), nursery)  # type: ignore[arg-type]
        conn = await open_conn(port, nursery, max_in_flight_per_connection=5)
        heard: list[object] = []
        pending = []
        with trio.fail_after(5):
            for _ in range(5):
                handle = await conn.send(P.MetadataRequest(topics=None), on_answer=heard.append)
                assert handle is not None
                pending.append(handle)
            # The reader hands each answer over as it reads it: nobody awaits
            # response() yet, and every answer is already in, in order.
            while len(heard) < 5:
                await trio.sleep(0.01)
            bodies = [await p.response() for p in pending]
        assert bodies == heard  # the same objects
        assert [b.cluster_id for b in bodies] == ["1", "2", "3", "4", "5"]  # type: ignore[attr-defined]
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_on_answer_is_not_called_for_a_request_that_failed() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(hang_up, nursery)
        conn = await open_conn(port, nursery)
        heard: list[object] = []
        handle = await conn.send(P.MetadataRequest(topics=None), on_answer=heard.append)
        assert handle is not None
        with trio.fail_after(5), pytest.raises(errors.KafkaConnectionError):
            await handle.response()
        assert heard == []
        nursery.cancel_scope.cancel()


async def test_a_request_larger_than_the_socket_buffer_arrives_whole() -> None:
    # Many long topic names: about 9 MB, more than the kernel takes in one
    # write, so the writer waits for room and writes the rest.
    names = [f"topic-{i:07d}-" + "x" * 200 for i in range(40_000)]
    sizes: list[int] = []

    async def slow_reader(stream: trio.SocketStream) -> None:
        buf = bytearray()
        header = await read_request(stream, buf)
        await stream.send_all(frame(header, versions_body(header)))
        while len(buf) < 4:
            await trio.sleep(0.05)  # let the client's write fill the socket buffers
            buf += await stream.receive_some(1 << 16)
        (size,) = struct.unpack_from(">i", buf)
        sizes.append(size)
        while len(buf) < 4 + size:
            buf += await stream.receive_some(1 << 16)
        header = P.decode_request_header(bytes(buf[4 : 4 + size]))
        body = P.MetadataResponse(cluster_id="whole")
        await stream.send_all(frame(header, body.encode(header.api_version)))

    async with trio.open_nursery() as nursery:
        port = await serve(slow_reader, nursery)
        conn = await open_conn(port, nursery, request_timeout=30.0)
        request = P.MetadataRequest(
            topics=[P.MetadataRequest.MetadataRequestTopic(name=n) for n in names]
        )
        with trio.fail_after(30):
            resp = await conn.request(request)
        assert resp.cluster_id == "whole"
        assert sizes and sizes[0] > 8_000_000
        assert conn.bytes_sent > 8_000_000
        await conn.aclose()
        nursery.cancel_scope.cancel()


def big_request() -> P.MetadataRequest:
    """A Metadata request of about 9 MB: more than the kernel takes in one write."""
    names = [f"topic-{i:07d}-" + "x" * 200 for i in range(40_000)]
    return P.MetadataRequest(topics=[P.MetadataRequest.MetadataRequestTopic(name=n) for n in names])


async def both_answered(heard: list[object], failures: list[None], conn: object) -> None:
    """Wait for the answers of the big request and the small one behind it, in order."""
    with trio.fail_after(30):
        while len(heard) < 2:
            await trio.sleep(0.01)
    assert [b.cluster_id for b in heard] == ["1", "2"]  # type: ignore[attr-defined]
    assert not failures and conn.bytes_sent > 8_000_000  # type: ignore[attr-defined]


def metadata_request() -> tuple[object, int]:
    return P.MetadataRequest(topics=None), 12


async def test_submit_nowait_writes_at_once_and_the_answer_frees_its_slot() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(answering(), nursery)  # type: ignore[arg-type]
        conn = await open_conn(port, nursery, max_in_flight_per_connection=1)
        heard: list[object] = []
        failures: list[None] = []
        slot = conn.submit_nowait(*metadata_request(), heard.append, lambda: failures.append(None))
        assert slot is not None and slot.sent_at > 0
        # Its one in-flight slot is taken until the answer is read: no wait, no write.
        assert not conn.can_submit_now()
        assert conn.submit_nowait(*metadata_request(), heard.append, failures.append) is None
        with trio.fail_after(5):
            while not heard:
                await trio.sleep(0.01)
        # Nobody collected it: the connection gave the slot back itself.
        assert conn.can_submit_now()
        again = await conn.submit(*metadata_request(), heard.append, lambda: failures.append(None))
        with trio.fail_after(5):
            while len(heard) < 2:
                await trio.sleep(0.01)
        assert [b.cluster_id for b in heard] == ["1", "2"]  # type: ignore[attr-defined]
        assert not failures and not slot.failed and not again.failed
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_submitted_request_that_fails_is_told_through_on_failure() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(hang_up, nursery)
        conn = await open_conn(port, nursery)
        heard: list[object] = []
        failures: list[None] = []
        slot = conn.submit_nowait(*metadata_request(), heard.append, lambda: failures.append(None))
        assert slot is not None
        with trio.fail_after(5):
            while not failures:
                await trio.sleep(0.01)
        assert failures == [None] and heard == []
        assert isinstance(slot.error, errors.KafkaConnectionError)
        nursery.cancel_scope.cancel()


async def test_time_out_fails_every_submitted_request() -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(answering(delay=3600), nursery)  # type: ignore[arg-type]
        conn = await open_conn(port, nursery, max_in_flight_per_connection=5)
        failures: list[int] = []
        slots = []
        for i in range(3):
            slot = await conn.submit(
                *metadata_request(), failures.append, lambda i=i: failures.append(i)
            )
            slots.append(slot)
        conn.time_out(30.0)
        assert failures == [0, 1, 2]
        assert all(isinstance(s.error, errors.KafkaTimeoutError) for s in slots)
        assert conn.broken
        nursery.cancel_scope.cancel()


async def test_a_request_the_kernel_takes_in_part_is_finished_before_the_next() -> None:
    # submit_nowait hands a request of about 9 MB to the kernel, which takes
    # only part of it; a task of the connection's writes the rest, and a
    # request submitted right after reaches the wire only behind it.
    big = big_request()
    async with trio.open_nursery() as nursery:
        port = await serve(answering(), nursery)  # type: ignore[arg-type]
        conn = await open_conn(port, nursery, request_timeout=30.0, max_in_flight_per_connection=5)
        heard: list[object] = []
        failures: list[None] = []
        first = conn.submit_nowait(big, 12, heard.append, lambda: failures.append(None))
        assert first is not None
        assert not conn.can_submit_now()  # the rest is still to be written
        await conn.submit(*metadata_request(), heard.append, lambda: failures.append(None))
        await both_answered(heard, failures, conn)
        await conn.aclose()
        nursery.cancel_scope.cancel()


class ThreadBroker:
    """A broker answering Metadata from a thread of its own (as ``answering``).

    It answers while the test's trio loop does not yield, which an in-loop
    server cannot: what a caller that reads answers in its own call needs.
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.answered = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _read(self, sock: socket.socket, buf: bytearray) -> P.RequestHeader | None:
        while True:
            if len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) >= 4 + size:
                    data = bytes(buf[4 : 4 + size])
                    del buf[: 4 + size]
                    return P.decode_request_header(data)
            chunk = sock.recv(1 << 20)
            if not chunk:
                return None
            buf += chunk

    def _serve(self) -> None:
        sock, _ = self._listener.accept()
        with sock:
            buf = bytearray()
            header = self._read(sock, buf)
            assert header is not None
            sock.sendall(frame(header, versions_body(header)))
            while (header := self._read(sock, buf)) is not None:
                body = P.MetadataResponse(cluster_id=str(header.correlation_id))
                sock.sendall(frame(header, body.encode(header.api_version)))
                self.answered += 1

    def wait_answered(self, n: int) -> None:
        """Block (no checkpoint) until ``n`` answers went out."""
        deadline = time.monotonic() + 10
        while self.answered < n:
            assert time.monotonic() < deadline, "the broker did not answer"
            time.sleep(0.001)

    def close(self) -> None:
        self._listener.close()


async def test_read_nowait_hands_answers_over_in_the_callers_call() -> None:
    broker = ThreadBroker()
    async with trio.open_nursery() as nursery:
        conn = await open_conn(broker.port, nursery, max_in_flight_per_connection=2)
        try:
            await trio.testing.wait_all_tasks_blocked()  # the reader waits for the socket
            heard: list[object] = []
            failures: list[None] = []
            for _ in range(2):
                assert conn.submit_nowait(
                    *metadata_request(), heard.append, lambda: failures.append(None)
                )
            assert not conn.can_submit_now()  # both slots taken
            broker.wait_answered(2)
            assert heard == []  # no checkpoint: the reader task did not run
            deadline = time.monotonic() + 10
            while len(heard) < 2:  # (a loaded kernel may take a moment to pass them on)
                assert time.monotonic() < deadline
                conn.read_nowait()
                time.sleep(0.001)
            assert [b.cluster_id for b in heard] == ["1", "2"]  # type: ignore[attr-defined]
            assert conn.can_submit_now() and not failures  # their slots are free again
            # The reader task finds nothing left to read and goes on waiting.
            await trio.testing.wait_all_tasks_blocked()
            await conn.submit(*metadata_request(), heard.append, lambda: failures.append(None))
            with trio.fail_after(5):
                while len(heard) < 3:
                    await trio.sleep(0.01)
            assert [b.cluster_id for b in heard] == ["1", "2", "3"]  # type: ignore[attr-defined]
        finally:
            conn.close()  # (the reader task ends only then)
            broker.close()
        nursery.cancel_scope.cancel()


async def test_write_backlog_nowait_writes_the_rest_of_a_request_in_the_callers_call() -> None:
    big = big_request()
    broker = ThreadBroker()
    async with trio.open_nursery() as nursery:
        conn = await open_conn(
            broker.port, nursery, request_timeout=30.0, max_in_flight_per_connection=5
        )
        try:
            heard: list[object] = []
            failures: list[None] = []
            assert conn.submit_nowait(big, 12, heard.append, lambda: failures.append(None))
            assert not conn.can_submit_now()  # the kernel took only part of it
            deadline = time.monotonic() + 30
            while not conn.write_backlog_nowait():  # no checkpoint: the broker's thread reads
                assert time.monotonic() < deadline
                time.sleep(0.001)
            assert conn.can_submit_now()
            assert conn.submit_nowait(*metadata_request(), heard.append, failures.append)
            await both_answered(heard, failures, conn)
        finally:
            conn.close()  # (the reader task ends only then)
            broker.close()
        nursery.cancel_scope.cancel()
