"""One TCP or TLS connection to a broker, driven by trio.

A reader task (in a nursery the owner supplies) feeds received bytes to the
sans-I/O :class:`~pykaf.protocol.connection.Connection` and wakes the waiting
requester. Requests are pipelined up to ``max_in_flight_per_connection``.
Socket, TLS and timeout failures become :mod:`pykaf.errors` connection errors
here, at this boundary; after any of them the connection is dead, every
pending request fails, and the owner opens a new one.
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import trio

from pykaf import protocol as P
from pykaf._config import ClientConfig
from pykaf._net.metrics import ApiCounters
from pykaf._net.sasl import authenticate
from pykaf.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    PykafError,
    TlsCertificateError,
    UnsupportedVersionError,
)
from pykaf.protocol.connection import API_VERSIONS_KEY, BrokerVersions, Connection

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

log = logging.getLogger("pykaf.net")

#: Seconds a graceful close (after acks=0 requests) waits for the broker to close too.
CLOSE_DRAIN = 1.0
_READ_SIZE = 1 << 18  # bytes asked of the kernel per read
_IO_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError)

#: The loop that hosts this trio run as a guest (``pykaf.aio`` sets it to its
#: asyncio loop), or None. A plain TCP connection's reading is then driven by
#: the host's ``add_reader`` callback, in the host's own thread: an answer is
#: read and handed over without waking trio's guest I/O thread first (a
#: cross-thread hop per answer). Any object with asyncio's ``add_reader`` and
#: ``remove_reader`` will do; one whose ``add_reader`` raises
#: ``NotImplementedError`` (asyncio's proactor loop) leaves the reading to trio.
READ_HOST: trio.lowlevel.RunVar[Any] = trio.lowlevel.RunVar("pykaf_read_host", default=None)


def describe(exc: BaseException) -> str:
    """A useful message for an I/O error (trio's wrappers often have none).

    It follows the causes, and into exception groups: trio's
    ``open_tcp_stream`` raises "all attempts to connect ... failed" from a
    group holding each address's error (``Connection refused``), which is
    what a user needs to read.
    """
    parts: list[str] = []
    first = exc
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        if isinstance(current, BaseExceptionGroup):
            causes = list(dict.fromkeys(describe(e) for e in current.exceptions))
            parts.append("; ".join(causes))
            break
        text = str(current)
        if text and (not parts or text not in parts[-1]):
            parts.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(parts) or type(first).__name__


def _certificate_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification failure behind ``exc`` (trio wraps it), if any."""
    current: BaseException | None = exc
    for _ in range(4):
        if current is None:
            return None
        if isinstance(current, ssl.SSLCertVerificationError):
            return current
        current = current.__cause__ or current.__context__
    return None


def fresh_error(error: BaseException) -> BaseException:
    """A new instance of a connection's error for each task that raises it.

    One exception object raised in several tasks collects all their tracebacks.
    """
    try:
        return type(error)(*error.args).with_traceback(None)
    except Exception:  # an exception class with an unusual constructor
        return error


class _Slot:
    """Where the reader task leaves one response for the task waiting on it."""

    __slots__ = (
        "api",
        "api_key",
        "error",
        "event",
        "on_answer",
        "on_failure",
        "response",
        "sent_at",
        "size",
    )

    def __init__(self, api_key: int, api: str, *, awaited: bool = True) -> None:
        #: Set once the answer is in or the request failed; a submitted
        #: request, which nobody awaits, has none (its callbacks tell instead).
        self.event: trio.Event | None = trio.Event() if awaited else None
        self.response: Any = None
        self.error: BaseException | None = None
        #: Called by the reader task with the decoded body as the answer is read.
        self.on_answer: Callable[[Any], None] | None = None
        #: Set for a request written by :meth:`BrokerConnection.submit`: nobody
        #: collects it, so the connection frees its in-flight slot itself, and
        #: calls this (with no argument) if the request fails.
        self.on_failure: Callable[[], None] | None = None
        self.api_key = api_key
        self.api = api
        self.sent_at = 0.0
        self.size = 0

    @property
    def failed(self) -> bool:
        """Whether the request failed (its ``error`` says why)."""
        return self.error is not None

    @property
    def settled(self) -> bool:
        """Whether the answer is in or the request failed."""
        return self.response is not None or self.error is not None


#: A request's slot, as :meth:`BrokerConnection.submit` returns it.
Slot = _Slot
#: How a submitted request's answer is handed over: the decoded body.
OnAnswer = Callable[[Any], None]


class PendingResponse:
    """A request written by :meth:`BrokerConnection.send`, its response not yet read.

    ``collect`` is the connection's: it waits for the slot's response and gives
    the in-flight slot back.
    """

    __slots__ = ("_collect", "_done", "_slot")

    def __init__(
        self, collect: Callable[[_Slot, float | None], Awaitable[Any]], slot: _Slot
    ) -> None:
        self._collect = collect
        self._slot = slot
        self._done = False

    async def response(self, timeout: float | None = None) -> Any:
        """The decoded response body; call once.

        Raises:
            KafkaConnectionError: the connection broke; the request may or may
                not have been applied.
            KafkaTimeoutError: no response in time (the connection is dropped).
        """
        if self._done:
            raise RuntimeError("response() was already collected")
        self._done = True
        resp = await self._collect(self._slot, timeout)
        return resp.body


class BrokerConnection:
    """A live connection to one broker; create it with :meth:`open`.

    Attributes:
        host, port: where it is connected.
        node_id: the broker's id (-1 for a bootstrap connection).
        versions: the API versions negotiated at open.
    """

    def __init__(
        self, stream: trio.abc.Stream, host: str, port: int, node_id: int, config: ClientConfig
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.config = config
        self._stream = stream
        #: A plain TCP stream's descriptor (-1 otherwise): the reader and the
        #: writer call the kernel directly and wait only when it is not ready,
        #: which saves a trip through trio's scheduler per request and per answer.
        self._fd = stream.socket.fileno() if type(stream) is trio.SocketStream else -1
        self._proto = Connection(config.client_id, max_response_bytes=config.max_response_bytes)
        self._send_lock = trio.Lock()
        #: The unwritten end of a request :meth:`submit_nowait` began to write
        #: (the kernel took only part of it): written before anything else.
        self._backlog: bytes | memoryview = b""
        #: Whether the last read emptied the socket (the next one waits first).
        self._drained = False
        #: The reader task waits for the socket to be readable, holding no
        #: bytes it has not handed over: another caller may read now
        #: (:meth:`read_nowait`) without reordering the answers.
        self._parked = False
        self._nursery: trio.Nursery | None = None
        #: The loop reading this connection for trio (see ``READ_HOST``), or None.
        self._host: Any = None
        self._in_flight = trio.Semaphore(config.max_in_flight_per_connection)
        # Shielded: only close() ends the reader. A caller's scope that is
        # cancelled must not take the connection with it while a shielded
        # close (a consumer group's last commit and leave) still needs it; the
        # client closes every connection it opened when it closes.
        self._reader_scope = trio.CancelScope(shield=True)
        self._closed = trio.Event()
        self._error: PykafError | None = None
        self.opened_at = trio.current_time()
        #: When a SASL session ends (KIP-368); the pool reconnects before then.
        self.expires_at: float | None = None
        self.requests_sent = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        #: Requests per API: count, errors, round trips (``pykaf/_net/metrics.py``).
        self.api_counters = ApiCounters(node_id, config.on_request)

    def learn_node_id(self, node_id: int) -> None:
        """A bootstrap connection (-1) turned out to reach broker ``node_id``."""
        if node_id >= 0 and self.node_id < 0:
            self.node_id = node_id
            self.api_counters.node_id = node_id

    # -- opening --------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        nursery: trio.Nursery,
        host: str,
        port: int,
        config: ClientConfig,
        *,
        node_id: int = -1,
    ) -> BrokerConnection:
        """Connect, negotiate API versions and authenticate.

        Raises:
            KafkaConnectionError: the broker could not be reached or the TLS
                handshake failed.
            KafkaTimeoutError: connecting took longer than ``connect_timeout``.
            SaslAuthenticationError: SASL authentication was refused.
        """
        ctx = config.build_ssl_context()
        stream: trio.abc.Stream
        try:
            with trio.fail_after(config.connect_timeout):
                tcp = await trio.open_tcp_stream(host, port)
                if ctx is None:
                    stream = tcp
                else:
                    stream = trio.SSLStream(
                        tcp, ctx, server_hostname=host if ctx.check_hostname else None
                    )
                    try:
                        await stream.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
        except trio.TooSlowError:
            raise KafkaTimeoutError(
                f"connecting to {host}:{port} took longer than {config.connect_timeout}s"
            ) from None
        except _IO_ERRORS as exc:
            refused = _certificate_error(exc)
            if refused is not None:  # retrying cannot help: fail now, saying what to change
                raise TlsCertificateError(
                    f"{host}:{port}: the broker's TLS certificate was refused:"
                    f" certificate verify failed: {refused.verify_message} (ssl_cafile names"
                    " the CA to trust; ssl_check_hostname turns the host name check off)"
                ) from exc
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {describe(exc)}") from exc
        conn = cls(stream, host, port, node_id, config)
        conn._nursery = nursery
        await nursery.start(conn._reader)
        try:
            await conn._negotiate_versions()
            if config.use_sasl:
                conn.expires_at = await authenticate(conn, config)
        except BaseException:
            conn.close()
            raise
        log.debug("connected to broker %s at %s:%s", node_id, host, port)
        return conn

    async def _negotiate_versions(self) -> None:
        req_cls = P.REQUESTS[API_VERSIONS_KEY]
        version = req_cls.MAX_VERSION
        # Part of connecting: a port that is not Kafka's (an HTTP server, a TLS
        # listener spoken to in plaintext) never answers; connect_timeout says
        # so in seconds, not request_timeout.
        wait = min(self.config.request_timeout, self.config.connect_timeout)
        for _ in range(3):
            slot = await self._send(
                self._proto.api_versions_request(), version, expect_response=True
            )
            try:
                resp = await self._wait(slot, wait)
            except KafkaTimeoutError:
                raise KafkaTimeoutError(
                    f"{self}: no answer to ApiVersions within {wait:g}s (connect_timeout):"
                    " is this a Kafka listener, and one of the client's security_protocol?"
                ) from None
            if self._proto.handle_api_versions(resp) is not None:
                return
            version = self._proto.retry_api_versions_version
        raise UnsupportedVersionError(f"{self}: could not agree on an ApiVersions version")

    # -- requests ---------------------------------------------------------------

    @property
    def versions(self) -> BrokerVersions:
        """API versions negotiated with this broker."""
        assert self._proto.versions is not None
        return self._proto.versions

    @property
    def broken(self) -> bool:
        """Whether the connection failed or was closed."""
        return self._error is not None

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return self._proto.in_flight

    def version_for(self, api_key: int) -> int:
        """The negotiated version of ``api_key``."""
        return self._proto.version_for(api_key)

    async def request(
        self,
        request: Any,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Send ``request`` and return the decoded response body.

        Args:
            request: a ``pykaf.protocol`` request object.
            version: the API version; None uses the negotiated one.
            expect_response: False for Produce with acks=0 (returns None).
            timeout: seconds to wait for the response (default: request_timeout).

        Raises:
            KafkaConnectionError: the connection broke (the request may or may
                not have reached the broker).
            KafkaTimeoutError: no response in time; the connection is dropped.
        """
        async with self._in_flight:
            slot = await self._send(request, version, expect_response=expect_response)
            if slot is None:
                return None
            resp = await self._wait(
                slot, self.config.request_timeout if timeout is None else timeout
            )
            return resp.body

    async def send(
        self,
        request: Any,
        version: int | None = None,
        *,
        expect_response: bool = True,
        on_answer: Callable[[Any], None] | None = None,
    ) -> PendingResponse | None:
        """Write ``request`` now and return a handle to await its response later.

        Requests reach the wire in the order ``send`` is called, which is what
        a pipelining caller (the producer, keeping sequence numbers in order)
        needs; :meth:`request` cannot promise that across tasks. Takes one of
        the connection's in-flight slots until the response is collected
        (returns None, holding no slot, when ``expect_response`` is False).

        ``on_answer``, if given, is called by the reader task with the decoded
        response body as soon as the answer is read (in the order the requests
        were written), before :meth:`PendingResponse.response` returns it; it
        is not called when the request fails (the connection broke or timed
        out): ``response()`` raises then. It must not raise.

        Raises:
            KafkaConnectionError: the connection broke before the write.
        """
        # No checkpoint when a slot is free: a pipelining sender (the producer's
        # sender task) yields once per request in the socket write, not three times.
        try:
            self._in_flight.acquire_nowait()
        except trio.WouldBlock:
            await self._in_flight.acquire()
        try:
            slot = await self._send(
                request, version, expect_response=expect_response, on_answer=on_answer
            )
        except BaseException:
            self._in_flight.release()
            raise
        if slot is None:
            self._in_flight.release()
            return None
        return PendingResponse(self._collect, slot)

    async def submit(
        self,
        request: Any,
        version: int,
        on_answer: OnAnswer,
        on_failure: Callable[[], None],
    ) -> _Slot:
        """Write ``request`` (waiting for a free slot and the wire) and return its slot.

        Nobody collects the answer: the reader hands the decoded body to
        ``on_answer`` as it reads it, and the connection frees the in-flight
        slot itself. If the request fails instead (the connection broke, or
        :meth:`time_out`), the slot's ``error`` is set and ``on_failure()``
        is called; the slot's ``sent_at`` tells the caller's watchdog its
        age. Requests reach the wire in the order they are submitted or sent.

        Raises:
            KafkaConnectionError: the connection broke before the request was
                framed (nothing was written; ``on_failure`` is not called).
        """
        try:
            self._in_flight.acquire_nowait()
        except trio.WouldBlock:
            await self._in_flight.acquire()
        try:
            slot: _Slot = await self._send(
                request, version, expect_response=True, on_answer=on_answer, on_failure=on_failure
            )
        except BaseException:
            self._in_flight.release()
            raise
        return slot

    def can_submit_now(self) -> bool:
        """Whether :meth:`submit_nowait` would write a request now (not return None)."""
        return (
            self._error is None
            and self._fd >= 0
            and not self._backlog
            and not self._send_lock.locked()
            and self._in_flight.value > 0
        )

    def submit_nowait(
        self,
        request: Any,
        version: int,
        on_answer: OnAnswer,
        on_failure: Callable[[], None],
    ) -> _Slot | None:
        """:meth:`submit` without waiting: None (nothing done) when it would have to wait.

        That is: the connection failed, a slot or the wire is taken, or it is
        not plain TCP. The request is framed and handed to the kernel in this
        call, with no checkpoint, so a caller outside any trio task (an
        asyncio callback of ``pykaf.aio``) may use it. When the kernel takes
        only part of it, the rest is written by a task of the connection's
        before anything else.
        """
        if not self.can_submit_now():
            return None
        self._in_flight.acquire_nowait()
        try:
            slot = self._frame(request, version, on_answer, on_failure)
        except BaseException:
            self._in_flight.release()
            raise
        data = self._proto.data_to_send()
        slot.sent_at = trio.current_time()
        slot.size = len(data)
        self.requests_sent += 1
        self.bytes_sent += len(data)
        written = self._write_now(data)
        if written < 0:
            return slot
        if written < len(data):
            assert self._nursery is not None
            self._backlog = memoryview(data)[written:]
            self._nursery.start_soon(self._write_backlog)
        return slot

    def _frame(
        self,
        request: Any,
        version: int | None,
        on_answer: OnAnswer | None,
        on_failure: Callable[[], None] | None,
    ) -> _Slot:
        """Frame ``request`` (expecting an answer) for the next write; its slot."""
        cls = type(request)
        slot = _Slot(cls.API_KEY, _api_name(cls), awaited=on_failure is None)
        slot.on_answer = on_answer
        slot.on_failure = on_failure
        self._proto.send_request(request, version, expect_response=True, context=slot)
        return slot

    def write_backlog_nowait(self) -> bool:
        """Hand the kernel what it takes now of :meth:`submit_nowait`'s unwritten rest.

        No checkpoint, as :meth:`submit_nowait`: a caller that writes
        requests from its own call continues the rest itself rather than
        wait for the connection's task. Returns whether nothing is left
        (:meth:`can_submit_now` may then say yes).
        """
        data = self._backlog
        if not data:
            return True
        if self._error is not None or self._send_lock.locked():
            return False  # the task (or a send) writes it, or the connection failed
        written = self._write_now(data)
        if written <= 0:
            return False
        self._backlog = data[written:] if written < len(data) else b""
        return not self._backlog

    def _write_now(self, data: bytes | memoryview) -> int:
        """Hand ``data`` to the kernel without waiting; how much it took (-1: failed it)."""
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            self._fail(KafkaConnectionError(f"{self}: send failed: {describe(exc)}"))
            return -1

    def read_nowait(self) -> None:
        """Read the answers the kernel holds now and hand them over, in the caller's call.

        For a caller that runs for long without a checkpoint (a tight loop
        of ``send_nowait``, which writes requests from its own call): their
        answers are settled as they come in, so their in-flight slots free
        up, without waiting for the reader task. Only while the reader task
        waits for the socket holding nothing it has read (or a host loop
        reads, which never holds any), so answers keep their order; nothing
        is done otherwise. A failure fails the connection, as the reader's.
        """
        if self._fd < 0 or self._error is not None:
            return
        if self._parked or self._host is not None:
            while self._read_now():
                pass

    async def _write_backlog(self) -> None:
        """Write the rest of a request :meth:`submit_nowait` began (unless a send did)."""
        async with self._send_lock:
            data, self._backlog = self._backlog, b""
            if data and self._error is None:
                await self._write_shielded(data)

    def time_out(self, timeout: float) -> None:
        """No answer came within ``timeout`` seconds: drop the connection.

        Answers come in order, so one that is late holds up all behind it:
        every pending request fails with ``KafkaTimeoutError``.
        """
        self._fail(KafkaTimeoutError(f"{self}: no response within {timeout}s"))

    async def _collect(self, slot: _Slot, timeout: float | None) -> Any:
        """Wait for the response of a request :meth:`send` wrote; free its in-flight slot."""
        try:
            return await self._wait(
                slot, self.config.request_timeout if timeout is None else timeout
            )
        finally:
            self._in_flight.release()

    async def _send(
        self,
        request: Any,
        version: int | None,
        *,
        expect_response: bool,
        on_answer: OnAnswer | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> Any:
        """Frame and write one request; its slot (None when no answer is expected).

        With ``on_failure`` (:meth:`submit`), a failure once the request is
        framed reaches the caller through it, not as an exception.
        """
        self._check()
        lock = self._send_lock
        try:
            lock.acquire_nowait()  # uncontended: no checkpoint (the write has one)
        except trio.WouldBlock:
            await lock.acquire()
        try:
            self._check()
            if expect_response:
                slot: _Slot | None = self._frame(request, version, on_answer, on_failure)
            else:
                slot = None
                self._proto.send_request(request, version, expect_response=False)
            data = self._proto.data_to_send()
            if slot is not None:
                # Stamped before the write: a broker on loopback can answer,
                # and the reader record the answer, before send_all returns.
                slot.sent_at = trio.current_time()
                slot.size = len(data)
            self.requests_sent += 1
            self.bytes_sent += len(data)
            if self._backlog:  # the rest of a request submit_nowait began goes first
                data = b"".join((self._backlog, data))
                self._backlog = b""
            fd = self._fd
            try:
                written = os.write(fd, data) if fd >= 0 else 0
            except BlockingIOError:
                written = 0
            except OSError:
                written = 0  # the stream's own write raises it, described
            if written < len(data):
                await self._write_shielded(memoryview(data)[written:] if written else data)
        finally:
            lock.release()
        if on_failure is None:
            self._check()
        return slot

    async def _write_shielded(self, data: bytes | memoryview) -> None:
        """Write all of ``data`` on the stream, shielded, within ``request_timeout``.

        A frame cut in half by a cancellation would corrupt the stream for
        every later request, so the write is shielded and has its own bound
        (one scope: a shielded scope's own deadline still applies). A failure
        fails the connection.
        """
        with trio.CancelScope(
            shield=True, deadline=trio.current_time() + self.config.request_timeout
        ) as scope:
            try:
                await self._stream.send_all(data)
            except _IO_ERRORS as exc:
                self._fail(KafkaConnectionError(f"{self}: send failed: {describe(exc)}"))
        if scope.cancelled_caught:
            self._fail(KafkaTimeoutError(f"{self}: sending a request timed out"))

    async def _read(self) -> bytes | bytearray:
        """The next bytes from the broker (b"" once it closed the connection).

        Like ``receive_some``, each read yields to the scheduler once: waiting
        for data when the kernel has none, or a checkpoint when it had some
        at once (so that a stream of answers cannot starve the other tasks).
        On a plain TCP stream it asks the kernel directly.
        """
        fd = self._fd
        if fd < 0:
            return await self._stream.receive_some(_READ_SIZE)
        if not self._drained:
            await trio.lowlevel.checkpoint_if_cancelled()  # raises a pending cancel; no yield
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                pass
            else:
                self._drained = len(data) < _READ_SIZE
                # Shielded: the bytes are read, so a cancellation here must not
                # drop them (the next read raises it instead).
                await trio.lowlevel.cancel_shielded_checkpoint()
                return data
        # The last read left nothing behind (or the kernel has nothing): wait
        # for more, rather than ask for nothing first (a system call per answer).
        while True:
            self._parked = True
            try:
                await trio.lowlevel.wait_readable(fd)
            finally:
                self._parked = False
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                continue
            self._drained = len(data) < _READ_SIZE
            return data

    async def _wait(self, slot: _Slot, timeout: float) -> Any:
        event = slot.event
        assert event is not None  # (a submitted request is never awaited)
        if not event.is_set():  # (no timer needed for an answer already in)
            with trio.move_on_after(timeout) as scope:
                await event.wait()
            if scope.cancelled_caught:
                # Responses come in order: one that is late blocks all behind it.
                self._fail(KafkaTimeoutError(f"{self}: no response within {timeout}s"))
        if slot.error is not None:
            raise fresh_error(slot.error)
        if not event.is_set():  # failed before this request was answered
            raise fresh_error(self._error or KafkaConnectionError(f"{self}: connection lost"))
        return slot.response

    def _check(self) -> None:
        if self._error is not None:
            raise fresh_error(self._error)

    # -- reading ----------------------------------------------------------------

    def _deliver(self, data: bytes | bytearray) -> None:
        """Hand the answers ``data`` completes to their requests (``data`` is not empty)."""
        self.bytes_received += len(data)
        now = trio.current_time()
        record = self.api_counters.record
        for resp in self._proto.receive_data(data):
            slot = resp.context
            # No slot <-> response cycle: a response (a Fetch's record sets) is
            # freed once read, not at the next full garbage collection.
            resp.context = None
            slot.response = resp
            if slot.event is not None:
                slot.event.set()
            record(slot.api_key, slot.api, now - slot.sent_at, slot.size, None)
            if slot.on_failure is not None:  # submitted: nobody collects it
                self._in_flight.release()
            if slot.on_answer is not None:
                slot.on_answer(resp.body)

    def _hosted_readable(self) -> None:
        """The host loop's callback: the socket is readable (see ``READ_HOST``)."""
        if self._error is not None:
            # Failed: the reader task removes this callback once trio runs, but
            # a socket at its end stays readable and would call it until then.
            self._host.remove_reader(self._fd)
            return
        self._read_now()

    def _read_now(self) -> bool:
        """One read without waiting, its answers handed over; whether more may be there.

        A failure (the broker closed, a broken answer, a callback that
        raised) fails the connection: the caller is a loop callback or
        :meth:`read_nowait`'s, which must not raise.
        """
        try:
            data = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError as exc:
            self._fail(KafkaConnectionError(f"{self}: receive failed: {describe(exc)}"))
            return False
        if not data:
            self._fail(KafkaConnectionError(self._closed_by_broker()))
            return False
        try:
            self._deliver(data)
        except ProtocolError as exc:
            self._fail(exc)
            return False
        except Exception as exc:
            # A reader task that raised would take the client down with it; a
            # loop callback's error would only be logged by the loop, leaving
            # every request behind it unanswered: the connection fails instead.
            log.exception("%s: handing over an answer failed", self)
            self._fail(KafkaConnectionError(f"{self}: handing over an answer failed: {exc!r}"))
            return False
        return len(data) == _READ_SIZE and self._error is None

    def _hosted(self) -> Any:
        """The host loop reading this connection (registered now), or None: trio reads."""
        host = READ_HOST.get() if self._fd >= 0 else None
        if host is None:
            return None
        try:
            host.add_reader(self._fd, self._hosted_readable)
        except NotImplementedError:
            return None
        self._host = host
        return host

    async def _reader(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        host = self._hosted()
        try:
            with self._reader_scope:
                task_status.started()
                if host is not None:
                    await trio.sleep_forever()  # the host reads; close() cancels this
                try:
                    while True:
                        data = await self._read()
                        if not data:
                            self._fail(KafkaConnectionError(self._closed_by_broker()))
                            break
                        self._deliver(data)
                except ProtocolError as exc:
                    self._fail(exc)
                except _IO_ERRORS as exc:
                    self._fail(KafkaConnectionError(f"{self}: receive failed: {describe(exc)}"))
        finally:
            if host is not None:
                host.remove_reader(self._fd)
            # Also when an outer scope cancels the reader: aclose() waits for this.
            if self._error is None:
                self._fail(KafkaConnectionError(f"{self}: connection closed"))
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self._stream)
            self._closed.set()

    def _closed_by_broker(self) -> str:
        """Why the broker closed the connection, as far as the client can tell."""
        said = f"{self}: closed by the broker"
        if (
            self.config.use_sasl
            or self._proto.versions is None
            or not set(self.api_counters.by_api) <= {API_VERSIONS_KEY}
        ):
            return said
        # ApiVersions answered, then the next request closed the connection:
        # what a SASL listener does to a client that does not authenticate.
        return (
            f"{said} after ApiVersions, at its first request: a SASL listener closes a"
            " connection that does not authenticate. Is security_protocol set to the"
            " listener's (SASL_PLAINTEXT, or SASL_SSL), with sasl_mechanism,"
            " sasl_username and sasl_password?"
        )

    def _fail(self, error: PykafError) -> None:
        """Kill the connection: fail every pending request with ``error``."""
        if self._error is None:
            self._error = error
            text = str(error)  # most name the connection already
            log.info("%s", text if text.startswith(repr(self)) else f"{self}: {text}")
        for pending in self._proto.take_pending():
            slot = pending.context
            if slot is not None and not slot.settled:
                slot.error = error
                if slot.event is not None:
                    slot.event.set()
                if slot.sent_at:
                    self._record_failure(slot, error)
                if slot.on_failure is not None:  # submitted: nobody collects it
                    self._in_flight.release()
                    slot.on_failure()
        self._reader_scope.cancel()

    def _record_failure(self, slot: _Slot, error: PykafError) -> None:
        try:
            seconds = trio.current_time() - slot.sent_at
        except RuntimeError:  # closed from outside the loop: no clock to read
            return
        self.api_counters.record(slot.api_key, slot.api, seconds, slot.size, error)

    def close(self) -> None:
        """Close the connection; pending requests fail with KafkaConnectionError."""
        self._fail(KafkaConnectionError(f"{self}: connection closed"))

    async def aclose(self) -> None:
        """Close the connection and wait until its reader task has finished.

        After Produce requests with acks=0 the close is graceful: pykaf
        half-closes and reads until the broker closes too (at most
        ``CLOSE_DRAIN`` seconds). A broker that answers such requests anyway
        (Tansu, librdkafka's mock) would otherwise have answers unread in the
        socket, which turns the close into a reset that can make the broker
        drop requests it has not read yet. (quirk: answered-acks-zero)
        """
        if self._error is None and self._proto.unanswered:
            with trio.move_on_after(CLOSE_DRAIN):
                async with self._send_lock:
                    if self._error is None and isinstance(
                        self._stream, trio.abc.HalfCloseableStream
                    ):
                        with suppress(*_IO_ERRORS, trio.BusyResourceError):
                            await self._stream.send_eof()
                await self._closed.wait()  # the reader sees the broker's close
        self.close()
        await self._closed.wait()

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"


_API_NAMES: dict[int, str] = {}


def _api_name(cls: type) -> str:
    """``ProduceRequest`` -> ``Produce`` (worked out once per API: this is on every request)."""
    key: int = cls.API_KEY  # type: ignore[attr-defined]
    name = _API_NAMES.get(key)
    if name is None:
        name = cls.__name__
        name = _API_NAMES[key] = name[: -len("Request")] if name.endswith("Request") else name
    return name
