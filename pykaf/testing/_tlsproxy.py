"""A TLS-terminating TCP proxy for tests, and brokers reached only through it.

Neither test broker speaks TLS, so :class:`TLSProxy` accepts TLS connections on
127.0.0.1 and forwards the decrypted bytes to a plaintext target. It runs in
one background thread (a ``selectors`` loop driving ``ssl.SSLObject`` memory
BIOs), needs no event loop, and can be used from sync tests, trio tests and
subprocesses alike.

Kafka clients connect to the addresses brokers advertise in Metadata, not only
to the bootstrap address, so the broker behind a proxy must advertise the
proxy. :class:`TLSTansu` and :class:`TLSMockCluster` set that up.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import ssl
import threading
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from pykaf.testing._certs import TLSCertificates
from pykaf.testing._mock import MockCluster
from pykaf.testing._tansu import TansuBroker

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["TLSMockCluster", "TLSProxy", "TLSProxyError", "TLSTansu"]

_LOOPBACK = "127.0.0.1"
_CHUNK = 65536
_HIGH_WATER = 4 * 1024 * 1024  # stop reading a side while this much waits for the other
_MAX_ERRORS = 100  # handshake failures remembered
_JOIN_TIMEOUT = 10.0


class TLSProxyError(RuntimeError):
    """The TLS proxy could not start, or was used wrongly."""


class _Conn:
    """One client connection and its upstream twin."""

    def __init__(self, client: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 outgoing: ssl.MemoryBIO) -> None:  # fmt: skip
        self.client = client
        self.tls = tls
        self.incoming = incoming
        self.outgoing = outgoing
        self.upstream: socket.socket | None = None
        self.connected = False  # upstream connect finished
        self.handshaken = False
        self.to_client = bytearray()  # TLS bytes for the client
        self.to_upstream = bytearray()  # plaintext for the target
        self.client_eof = False
        self.upstream_eof = False
        self.failed = False  # close once to_client is flushed, forward nothing more
        self.closed = False
        self.registered: dict[socket.socket, int] = {}


class _Loop:
    """The proxy's state and selector loop; runs in one thread.

    Kept apart from :class:`TLSProxy` so that the thread does not keep the
    proxy object alive and ``weakref.finalize`` can stop it.
    """

    def __init__(self, listener: socket.socket, context: ssl.SSLContext) -> None:
        self.listener = listener
        self.context = context
        self.target: tuple[str, int] | None = None
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.lock = threading.Lock()
        self.stopping = False
        self.drop_requested = False
        self.conns: set[_Conn] = set()
        self.accepted = 0
        self.errors: list[str] = []
        self.thread: threading.Thread | None = None
        self.finished = False  # every socket closed

    # -- control (any thread) -------------------------------------------
    def wake(self) -> None:
        with contextlib.suppress(OSError):  # already awake (buffer full), or closing
            self.wake_w.send(b"x")

    def stop(self) -> None:
        """Stop the loop, close every socket and wait for the thread."""
        with self.lock:
            self.stopping = True
        thread = self.thread
        if thread is not None and thread.is_alive():
            self.wake()
            thread.join(_JOIN_TIMEOUT)
        if thread is None or not thread.is_alive():
            self._close_all()

    # -- loop (proxy thread) ---------------------------------------------
    def run(self) -> None:
        self.selector.register(self.listener, selectors.EVENT_READ, "listener")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        try:
            while True:
                with self.lock:
                    if self.stopping:
                        return
                    drop, self.drop_requested = self.drop_requested, False
                if drop:
                    for conn in list(self.conns):
                        self._close(conn)
                for key, mask in self.selector.select():
                    if key.data == "listener":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        conn = key.data
                        if not conn.closed:
                            self._on_event(conn, key.fileobj, mask)
        finally:
            self._close_all()

    def _drain_wake(self) -> None:
        try:
            while self.wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = self.context.wrap_bio(incoming, outgoing, server_side=True)
            conn = _Conn(sock, tls, incoming, outgoing)
            self.conns.add(conn)
            self.accepted += 1
            self._update(conn)

    def _on_event(self, conn: _Conn, sock: object, mask: int) -> None:
        try:
            if sock is conn.client:
                if mask & selectors.EVENT_WRITE:
                    self._send(conn.client, conn.to_client)
                if mask & selectors.EVENT_READ:
                    self._read_client(conn)
            elif sock is conn.upstream:
                if mask & selectors.EVENT_WRITE:
                    self._upstream_writable(conn)
                if mask & selectors.EVENT_READ:
                    self._read_upstream(conn)
        except OSError:  # reset, broken pipe, ...: drop both sides
            self._close(conn)
            return
        self._update(conn)

    @staticmethod
    def _send(sock: socket.socket, buf: bytearray) -> None:
        if not buf:
            return
        try:
            sent = sock.send(buf)
        except (BlockingIOError, InterruptedError):
            return
        del buf[:sent]

    def _read_client(self, conn: _Conn) -> None:
        try:
            data = conn.client.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            conn.incoming.write(data)
        else:
            conn.incoming.write_eof()
            conn.client_eof = True
        self._pump_tls(conn)

    def _pump_tls(self, conn: _Conn) -> None:
        """Advance the handshake, decrypt what the client sent, collect TLS output."""
        if not conn.handshaken and not conn.failed:
            try:
                conn.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLEOFError:
                conn.failed = True  # the client gave up (closed): not a TLS failure
            except (ssl.SSLError, ValueError) as exc:
                self._fail(conn, f"TLS handshake failed: {exc}")
            else:
                conn.handshaken = True
                self._connect_upstream(conn)
        if conn.handshaken and not conn.failed:
            while True:
                try:
                    data = conn.tls.read(_CHUNK)
                except ssl.SSLWantReadError:
                    break
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    conn.client_eof = True
                    break
                except ssl.SSLError as exc:
                    self._fail(conn, f"TLS error: {exc}")
                    break
                if not data:
                    conn.client_eof = True
                    break
                conn.to_upstream += data
        self._collect_tls_output(conn)
        if conn.client_eof and not conn.handshaken:
            conn.failed = True  # closed during the handshake

    def _collect_tls_output(self, conn: _Conn) -> None:
        pending = conn.outgoing.read()
        if pending:
            conn.to_client += pending

    def _fail(self, conn: _Conn, message: str) -> None:
        conn.failed = True
        conn.to_upstream.clear()
        if not conn.handshaken:
            with self.lock:
                if len(self.errors) < _MAX_ERRORS:
                    self.errors.append(message)

    def _connect_upstream(self, conn: _Conn) -> None:
        target = self.target
        if target is None:
            conn.failed = True  # nowhere to forward to: the client sees the connection close
            return
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(
                target[0], target[1], type=socket.SOCK_STREAM
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError:
            conn.failed = True
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.upstream = sock
        err = sock.connect_ex(addr)
        if err == 0:
            conn.connected = True
        elif err not in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            conn.failed = True

    def _upstream_writable(self, conn: _Conn) -> None:
        assert conn.upstream is not None
        if not conn.connected:
            err = conn.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                conn.failed = True  # target refused: the client sees the connection close
                conn.to_upstream.clear()
                return
            conn.connected = True
        self._send(conn.upstream, conn.to_upstream)

    def _read_upstream(self, conn: _Conn) -> None:
        assert conn.upstream is not None
        try:
            data = conn.upstream.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            conn.tls.write(data)
        else:
            conn.upstream_eof = True
            with contextlib.suppress(ssl.SSLError, ValueError):
                conn.tls.unwrap()  # queue a close_notify for the client
        self._collect_tls_output(conn)

    def _update(self, conn: _Conn) -> None:
        """Close the pair when done, else register the events it now waits for."""
        if conn.closed:
            return
        done_client = conn.client_eof and not conn.to_upstream
        done_upstream = conn.upstream_eof and not conn.to_client
        if (conn.failed and not conn.to_client) or done_client or done_upstream:
            self._close(conn)
            return
        if conn.client_eof and conn.upstream is None:
            self._close(conn)
            return
        client_events = 0
        if not conn.client_eof and not conn.failed and len(conn.to_upstream) < _HIGH_WATER:
            client_events |= selectors.EVENT_READ
        if conn.to_client:
            client_events |= selectors.EVENT_WRITE
        self._register(conn, conn.client, client_events)
        if conn.upstream is not None:
            up_events = 0
            if not conn.connected or conn.to_upstream:
                up_events |= selectors.EVENT_WRITE
            if (
                conn.connected
                and not conn.upstream_eof
                and not conn.failed
                and len(conn.to_client) < _HIGH_WATER
            ):
                up_events |= selectors.EVENT_READ
            self._register(conn, conn.upstream, up_events)

    def _register(self, conn: _Conn, sock: socket.socket, events: int) -> None:
        current = conn.registered.get(sock, 0)
        if events == current:
            return
        if current == 0:
            self.selector.register(sock, events, conn)
        elif events == 0:
            self.selector.unregister(sock)
        else:
            self.selector.modify(sock, events, conn)
        if events:
            conn.registered[sock] = events
        else:
            conn.registered.pop(sock, None)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        for sock in (conn.client, conn.upstream):
            if sock is None:
                continue
            if sock in conn.registered:
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(sock)
            sock.close()
        conn.registered.clear()
        self.conns.discard(conn)

    def _close_all(self) -> None:
        if self.finished:
            return
        self.finished = True
        for conn in list(self.conns):
            self._close(conn)
        for sock in (self.listener, self.wake_r, self.wake_w):
            sock.close()
        self.selector.close()


def _stop_loop(loop: _Loop) -> None:
    """Safety net run by ``weakref.finalize``."""
    loop.stop()


class TLSProxy:
    """Accept TLS on 127.0.0.1 and forward the plaintext to ``target``.

    Example:
        >>> with TLSProxy(("127.0.0.1", broker_port)) as proxy:  # doctest: +SKIP
        ...     ctx = proxy.certificates.client_context()
        ...     sock = ctx.wrap_socket(socket.create_connection(proxy.address),
        ...                            server_hostname="127.0.0.1")

    The proxy presents a server certificate for ``localhost``/``127.0.0.1``
    signed by the test CA of :attr:`certificates` (created for the proxy unless
    given). A connection is forwarded only after its TLS handshake succeeded;
    each gets its own connection to the target, and when either side closes,
    the other is closed after what was in flight has been delivered.

    The listening socket is bound by :meth:`start`, so :attr:`port` is known
    before the target is: start the proxy with ``target=None``, start the
    broker advertising :attr:`port`, then :meth:`set_target`.

    Args:
        target: ``(host, port)`` to forward to; may be set later.
        certificates: the CA and server certificate; new ones when None.
        require_client_cert: demand a client certificate signed by the CA.
        ssl_context: a server-side context to use instead of one built from
            ``certificates`` (``require_client_cert`` is then ignored).
        host: the address to listen on.
        port: the port to listen on; 0 picks a free one.
    """

    def __init__(
        self,
        target: tuple[str, int] | None = None,
        *,
        certificates: TLSCertificates | None = None,
        require_client_cert: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        host: str = _LOOPBACK,
        port: int = 0,
    ) -> None:
        self._target = target
        self._certificates = certificates
        self._owns_certificates = False
        self._require_client_cert = require_client_cert
        self._ssl_context = ssl_context
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._loop: _Loop | None = None
        self._finalizer: weakref.finalize[..., TLSProxy] | None = None

    # -- properties ------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the proxy thread is serving."""
        loop = self._loop
        return loop is not None and loop.thread is not None and loop.thread.is_alive()

    @property
    def host(self) -> str:
        """The address the proxy listens on."""
        return self._host

    @property
    def port(self) -> int:
        """The port the proxy listens on.

        Raises:
            TLSProxyError: the proxy is not started.
        """
        if self._port is None:
            raise TLSProxyError("the TLS proxy is not started")
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` of the proxy."""
        return (self._host, self.port)

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for a client's ``bootstrap.servers``."""
        return f"{self._host}:{self.port}"

    @property
    def target(self) -> tuple[str, int] | None:
        """Where connections are forwarded to, or None if not set yet."""
        return self._target

    @property
    def certificates(self) -> TLSCertificates:
        """The certificates the proxy presents (created on first use if not given)."""
        if self._certificates is None:
            self._certificates = TLSCertificates()
            self._owns_certificates = True
        return self._certificates

    @property
    def ca_file(self) -> str:
        """The CA file (PEM) a client must trust."""
        return self.certificates.ca_file

    @property
    def connections_accepted(self) -> int:
        """How many TCP connections the proxy has accepted."""
        return self._loop.accepted if self._loop is not None else 0

    @property
    def active_connections(self) -> int:
        """How many client connections are open now."""
        return len(self._loop.conns) if self._loop is not None else 0

    @property
    def handshake_errors(self) -> list[str]:
        """Why TLS handshakes failed (e.g. the client did not trust the CA), oldest first.

        Clients that simply closed the connection mid-handshake are not listed.
        """
        loop = self._loop
        if loop is None:
            return []
        with loop.lock:
            return list(loop.errors)

    # -- control ---------------------------------------------------------
    def set_target(self, host: str, port: int) -> None:
        """Forward connections that complete their handshake from now on to ``host:port``."""
        self._target = (host, port)
        if self._loop is not None:
            self._loop.target = self._target

    def drop_connections(self) -> None:
        """Close every open connection (both sides) at once, as a network failure would."""
        loop = self._loop
        if loop is None:
            return
        with loop.lock:
            loop.drop_requested = True
        loop.wake()

    def start(self) -> TLSProxy:
        """Bind the listening socket and start the proxy thread.

        Returns:
            self, so that ``proxy = TLSProxy(target).start()`` works.

        Raises:
            TLSProxyError: already started, or the address could not be bound.
        """
        if self._loop is not None:
            raise TLSProxyError("the TLS proxy is already started")
        context = self._ssl_context
        if context is None:
            context = self.certificates.server_context(
                require_client_cert=self._require_client_cert
            )
        listener = socket.socket(socket.AF_INET6 if ":" in self._host else socket.AF_INET)
        try:
            listener.bind((self._host, self._requested_port))
            listener.listen(128)
            listener.setblocking(False)
        except OSError as exc:
            listener.close()
            raise TLSProxyError(
                f"could not listen on {self._host}:{self._requested_port}: {exc}"
            ) from exc
        self._port = listener.getsockname()[1]
        loop = _Loop(listener, context)
        loop.target = self._target
        thread = threading.Thread(
            target=loop.run, name=f"pykaf-tls-proxy-{self._port}", daemon=True
        )
        loop.thread = thread
        self._loop = loop
        self._finalizer = weakref.finalize(self, _stop_loop, loop)
        self._finalizer.atexit = True
        thread.start()
        return self

    def stop(self) -> None:
        """Stop the proxy: close the listener and every connection, join the thread.

        Certificates the proxy created itself are removed. Safe to call more
        than once, and when the proxy never started.
        """
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()
        self._loop = None
        self._port = None
        if self._owns_certificates and self._certificates is not None:
            self._certificates.cleanup()
            self._certificates = None
            self._owns_certificates = False

    def __enter__(self) -> TLSProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self._host}:{self._port}" if self._port is not None else "stopped"
        return f"<TLSProxy {where} -> {self._target}>"


class _TLSFront:
    """What TLSTansu and TLSMockCluster share: certificates and client settings."""

    _certificates: TLSCertificates | None

    @property
    def bootstrap(self) -> str:  # pragma: no cover - overridden
        """The proxies' addresses, for ``bootstrap.servers``."""
        raise NotImplementedError

    def start(self) -> Self:  # pragma: no cover - overridden
        """Start the brokers and their proxies."""
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - overridden
        """Stop the proxies and the brokers."""
        raise NotImplementedError

    @property
    def certificates(self) -> TLSCertificates:
        """The test CA and certificates."""
        if self._certificates is None:
            raise TLSProxyError(f"{type(self).__name__} is not started")
        return self._certificates

    @property
    def ca_file(self) -> str:
        """The CA file (PEM) a client must trust."""
        return self.certificates.ca_file

    def ssl_context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """A client SSL context trusting the test CA (with the client certificate if asked)."""
        return self.certificates.client_context(client_cert=client_cert)

    def confluent_config(self, *, client_cert: bool = False) -> dict[str, str]:
        """confluent-kafka properties: bootstrap.servers, SSL and the CA (and client cert)."""
        return {
            "bootstrap.servers": self.bootstrap,
            **self.certificates.confluent_config(client_cert=client_cert),
        }

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class TLSTansu(_TLSFront):
    """A Tansu broker that clients reach only through a :class:`TLSProxy`.

    Example:
        >>> with TLSTansu() as broker:  # doctest: +SKIP
        ...     conf = {"bootstrap.servers": broker.bootstrap, **broker.confluent_config()}

    The proxy is started first, then Tansu advertising the proxy's port, so
    that Metadata sends clients back to the proxy.

    Args:
        certificates: the test CA and certificates; new ones when None.
        require_client_cert: demand a client certificate (mutual TLS).
        broker_options: keyword arguments for :class:`TansuBroker`.
    """

    def __init__(
        self,
        *,
        certificates: TLSCertificates | None = None,
        require_client_cert: bool = False,
        broker_options: Mapping[str, object] | None = None,
    ) -> None:
        self._given_certificates = certificates
        self._certificates: TLSCertificates | None = certificates
        self._require_client_cert = require_client_cert
        self._broker_options = dict(broker_options or {})
        self._proxy: TLSProxy | None = None
        self._broker: TansuBroker | None = None

    @property
    def proxy(self) -> TLSProxy:
        """The TLS proxy clients connect to."""
        if self._proxy is None:
            raise TLSProxyError("TLSTansu is not started")
        return self._proxy

    @property
    def broker(self) -> TansuBroker:
        """The plaintext Tansu broker behind the proxy."""
        if self._broker is None:
            raise TLSProxyError("TLSTansu is not started")
        return self._broker

    @property
    def bootstrap(self) -> str:
        """The proxy's ``"127.0.0.1:PORT"``, for ``bootstrap.servers``."""
        return self.proxy.bootstrap

    def start(self) -> TLSTansu:
        """Start the proxy, then Tansu advertising it.

        Raises:
            TLSProxyError: already started, or the proxy could not start.
            TansuError: the broker could not start.
        """
        if self._proxy is not None:
            raise TLSProxyError("TLSTansu is already started")
        if self._certificates is None:
            self._certificates = TLSCertificates()
        proxy = TLSProxy(
            certificates=self._certificates, require_client_cert=self._require_client_cert
        ).start()
        self._proxy = proxy
        try:
            broker = TansuBroker(
                advertised_port=proxy.port,
                **self._broker_options,  # type: ignore[arg-type]
            ).start()
        except BaseException:
            self.stop()
            raise
        self._broker = broker
        proxy.set_target(broker.host, broker.port)
        return self

    def stop(self) -> None:
        """Stop the broker and the proxy, remove certificates made here. Idempotent."""
        broker, self._broker = self._broker, None
        proxy, self._proxy = self._proxy, None
        try:
            if broker is not None:
                broker.stop()
        finally:
            if proxy is not None:
                proxy.stop()
            if self._given_certificates is None and self._certificates is not None:
                self._certificates.cleanup()
                self._certificates = None

    def __repr__(self) -> str:
        where = self._proxy.bootstrap if self._proxy is not None else "stopped"
        return f"<TLSTansu {where}>"


class TLSMockCluster(_TLSFront):
    """A librdkafka :class:`MockCluster` whose every broker sits behind a :class:`TLSProxy`.

    Each broker advertises its own proxy (``rd_kafka_mock_broker_set_host_port``,
    librdkafka >= 2.9), so clients reach every broker over TLS. Control the
    cluster through :attr:`cluster`; :attr:`bootstrap` lists the proxies.

    Args:
        num_brokers: how many brokers.
        certificates: the test CA and certificates; new ones when None.
        require_client_cert: demand a client certificate (mutual TLS).
        cluster_options: keyword arguments for :class:`MockCluster`.
    """

    def __init__(
        self,
        num_brokers: int = 3,
        *,
        certificates: TLSCertificates | None = None,
        require_client_cert: bool = False,
        cluster_options: Mapping[str, object] | None = None,
    ) -> None:
        self._num_brokers = num_brokers
        self._given_certificates = certificates
        self._certificates: TLSCertificates | None = certificates
        self._require_client_cert = require_client_cert
        self._cluster_options = dict(cluster_options or {})
        self._cluster: MockCluster | None = None
        self._proxies: dict[int, TLSProxy] = {}

    @property
    def cluster(self) -> MockCluster:
        """The mock cluster, for its controls (leaders, errors, brokers down...)."""
        if self._cluster is None:
            raise TLSProxyError("TLSMockCluster is not started")
        return self._cluster

    @property
    def proxies(self) -> dict[int, TLSProxy]:
        """Broker id -> the proxy in front of it."""
        return dict(self._proxies)

    @property
    def bootstrap(self) -> str:
        """The proxies' addresses, for ``bootstrap.servers``."""
        if not self._proxies:
            raise TLSProxyError("TLSMockCluster is not started")
        return ",".join(p.bootstrap for _, p in sorted(self._proxies.items()))

    def start(self) -> TLSMockCluster:
        """Start the cluster and one proxy per broker, and advertise the proxies.

        Raises:
            TLSProxyError: already started.
            MockClusterError: the cluster could not start, or this librdkafka
                cannot change what a broker advertises.
        """
        if self._cluster is not None:
            raise TLSProxyError("TLSMockCluster is already started")
        if self._certificates is None:
            self._certificates = TLSCertificates()
        cluster = MockCluster(self._num_brokers, **self._cluster_options)  # type: ignore[arg-type]
        self._cluster = cluster
        try:
            cluster.start()
            for broker_id, (host, port) in cluster.listeners.items():
                proxy = TLSProxy(
                    (host, port),
                    certificates=self._certificates,
                    require_client_cert=self._require_client_cert,
                ).start()
                self._proxies[broker_id] = proxy
                cluster.set_broker_address(broker_id, proxy.host, proxy.port)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the proxies and the cluster, remove certificates made here. Idempotent."""
        cluster, self._cluster = self._cluster, None
        proxies, self._proxies = self._proxies, {}
        try:
            for proxy in proxies.values():
                proxy.stop()
        finally:
            if cluster is not None:
                cluster.close()
            if self._given_certificates is None and self._certificates is not None:
                self._certificates.cleanup()
                self._certificates = None

    def __repr__(self) -> str:
        where = self.bootstrap if self._proxies else "stopped"
        return f"<TLSMockCluster {where}>"
