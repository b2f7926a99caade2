"""pykaf.testing's fake cluster: serving, metadata, SASL, TLS, faults, the command.

The data plane (produce, fetch, transactions) and the group coordinator have
their own test modules; these tests cover what every request goes through.
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import (
    FakeCluster,
    FakeClusterError,
    FakeClusterThread,
    TLSCertificates,
    open_fake_cluster,
)
from pykaf.testing._fake.api import Api

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

METADATA = P.MetadataRequest.API_KEY
SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


# -- raw wire helpers (a client with no pykaf code on the path) -----------------


def _raw_request(sock: socket.socket, req: Any, version: int, correlation_id: int = 7) -> None:
    flexible = P.request_header_flexible(req.API_KEY, version)
    head = P.encode_request_header(req.API_KEY, version, correlation_id, "raw", flexible)
    body = req.encode(version)
    sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)


def _raw_response(sock: socket.socket) -> bytes | None:
    """The next frame, or None when the broker closed the connection."""
    try:
        return _read_frame(sock)
    except ConnectionResetError:
        return None


def _read_frame(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    out = b""
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _connect(cluster: FakeClusterThread, node_id: int = 1) -> socket.socket:
    host, port = cluster.cluster.listeners()[node_id]
    sock = socket.create_connection((host, port), timeout=10)
    return sock


@pytest.fixture
def sasl_cluster() -> Iterator[FakeClusterThread]:
    with FakeClusterThread(1, users={"alice": "wonderland", "bob": "builder"}) as c:
        yield c
    assert not c.cluster.handler_errors


# -- construction and metadata --------------------------------------------------


def test_bad_construction_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one broker"):
        FakeCluster(0)
    with pytest.raises(ValueError, match="default_partitions"):
        FakeCluster(1, default_partitions=0)
    with pytest.raises(ValueError, match="unsupported SASL"):
        FakeCluster(1, users={"a": "b"}, sasl_mechanisms=["GSSAPI"])
    with pytest.raises(ValueError, match="2 ports for 3 brokers"):
        FakeCluster(3, ports=[1, 2])


def test_controls_name_what_is_missing(fake_cluster: FakeClusterThread) -> None:
    with pytest.raises(FakeClusterError, match="no broker 9"):
        fake_cluster.broker_down(9)
    with pytest.raises(FakeClusterError, match="no partition"):
        fake_cluster.set_partition_leader("nope", 0, 1)
    fake_cluster.create_topic("once", 2)
    with pytest.raises(FakeClusterError, match="exists"):
        fake_cluster.create_topic("once", 2)
    with pytest.raises(FakeClusterError, match="replication 4"):
        fake_cluster.create_topic("too-many", 1, 4)


def test_leaders_spread_over_brokers_seen_by_confluent(fake_cluster: FakeClusterThread) -> None:
    fake_cluster.create_topic("spread", 6)
    admin = confluent_admin.AdminClient({"bootstrap.servers": fake_cluster.bootstrap})
    md = admin.list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    leaders = [md.topics["spread"].partitions[i].leader for i in range(6)]
    assert sorted(set(leaders)) == [1, 2, 3]
    assert md.cluster_id == "pykaf-fake-cluster"


@pytest.mark.trio
async def test_pykaf_client_sees_metadata_and_leader_moves() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("moves", 3)
        async with pykaf.open_client(cluster.bootstrap) as client:
            before = (await client.leader("moves", 0)).node_id
            target = 3 if before != 3 else 1
            cluster.set_partition_leader("moves", 0, target)
            await client.refresh_metadata("moves")
            assert (await client.leader("moves", 0)).node_id == target
            assert cluster.topics["moves"].partitions[0].leader_epoch == 1
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await client.partitions("absent")
        assert "absent" not in cluster.topics  # pykaf does not ask for auto-creation


@pytest.mark.trio
async def test_auto_creation_follows_the_request_and_the_cluster() -> None:
    for cluster_allows, expected in ((True, [0, 1, 2, 3, 4]), (False, None)):
        async with (
            open_fake_cluster(1, default_partitions=5, auto_create_topics=cluster_allows) as fake,
            # request_timeout caps the wait for a topic the broker never creates.
            pykaf.open_client(
                fake.bootstrap, allow_auto_create_topics=True, request_timeout=1.0
            ) as client,
        ):
            # As Kafka does, the Metadata request that creates the topic answers
            # UNKNOWN_TOPIC_OR_PARTITION (tests/conformance); the client asks again.
            if expected is not None:
                assert await client.partitions("made") == expected
            else:
                with pytest.raises(errors.UnknownTopicOrPartitionError, match="did not create"):
                    await client.partitions("made")


async def test_a_topic_the_broker_never_creates_is_given_up_before_request_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pykaf._cluster import client as client_module

    monkeypatch.setattr(client_module, "AUTO_CREATE_WAIT", 0.3)
    async with (
        open_fake_cluster(1, auto_create_topics=False) as fake,
        pykaf.open_client(fake.bootstrap, allow_auto_create_topics=True) as client,
    ):
        # request_timeout (30 s) is not what ends the wait: the guard would.
        with trio.fail_after(20), pytest.raises(errors.UnknownTopicOrPartitionError):
            await client.partitions("never")


# -- the server: framing, versions, handler failures ----------------------------


def test_api_versions_lists_every_handler_and_refuses_unknown_versions(
    fake_cluster: FakeClusterThread,
) -> None:
    with _connect(fake_cluster) as sock:
        _raw_request(sock, P.ApiVersionsRequest(), 0)
        frame = _raw_response(sock)
        assert frame is not None
        resp = P.ApiVersionsResponse.decode(frame[4:], 0)
        assert resp.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        # KIP-714's two APIs are answered but advertised only with client_telemetry=True
        telemetry = {P.GetTelemetrySubscriptionsRequest.API_KEY, P.PushTelemetryRequest.API_KEY}
        assert keys == {
            k: (a.min_version, a.max_version)
            for k, a in fake_cluster.cluster.apis.items()
            if k not in telemetry
        }
        assert telemetry <= set(fake_cluster.cluster.apis)
        # a version from the future: UNSUPPORTED_VERSION in v0, as Kafka answers
        head = struct.pack(">hhih", 18, 99, 8, -1) + b"\x00"  # header v2: empty tags
        sock.sendall(struct.pack(">i", len(head)) + head)
        frame = _raw_response(sock)
        assert frame is not None and struct.unpack(">i", frame[:4])[0] == 8
        assert P.ApiVersionsResponse.decode(frame[4:], 0).error_code == 35


def test_unknown_api_closes_the_connection(fake_cluster: FakeClusterThread) -> None:
    with _connect(fake_cluster) as sock:
        head = struct.pack(">hhih", 999, 0, 1, -1)
        sock.sendall(struct.pack(">i", len(head)) + head)
        assert _raw_response(sock) is None


def test_a_failing_handler_is_recorded_and_drops_only_its_connection(
    fake_cluster: FakeClusterThread,
) -> None:
    cluster = fake_cluster.cluster
    original = cluster.apis[METADATA]

    async def broken(ctx: Any, req: Any, version: int) -> Any:
        raise RuntimeError("handler bug")

    cluster.apis[METADATA] = Api(P.MetadataRequest, P.MetadataResponse, broken, 0, 12)
    try:
        with _connect(fake_cluster) as sock:
            _raw_request(sock, P.MetadataRequest(topics=None), 1)
            assert _raw_response(sock) is None
        assert [str(e) for e in cluster.handler_errors] == ["handler bug"]
    finally:
        cluster.apis[METADATA] = original
        cluster.handler_errors.clear()
    with _connect(fake_cluster) as sock:  # the broker still serves
        _raw_request(sock, P.MetadataRequest(topics=None), 1)
        assert _raw_response(sock) is not None


# -- faults ---------------------------------------------------------------------


@pytest.mark.trio
async def test_injected_errors_come_in_order_then_stop() -> None:
    async with open_fake_cluster(2) as cluster:
        cluster.push_request_errors(METADATA, 7, 5, broker_id=2)
        async with pykaf.open_client(cluster.bootstrap) as client:
            seen = []
            for _ in range(3):
                resp = await client.request(2, P.MetadataRequest(topics=[]))
                seen.append(resp)
            # Metadata has no top-level error code: the injected answer is empty
            assert [len(r.brokers) for r in seen] == [0, 0, 2]
            cluster.push_request_errors(P.DescribeClusterRequest.API_KEY, 41)
            resp = await client.request(1, P.DescribeClusterRequest())
            assert resp.error_code == 41
            resp = await client.request(1, P.DescribeClusterRequest())
            assert resp.error_code == 0 and len(resp.brokers) == 2


@pytest.mark.trio
async def test_request_tracking_counts_per_api_and_broker() -> None:
    async with open_fake_cluster(2) as cluster:
        cluster.start_request_tracking()
        async with pykaf.open_client(cluster.bootstrap) as client:
            await client.request(2, P.DescribeClusterRequest())
            await client.request(2, P.DescribeClusterRequest())
        key = P.DescribeClusterRequest.API_KEY
        assert cluster.count_requests(key, broker_id=2) == 2
        assert cluster.count_requests(key, broker_id=1) == 0
        assert cluster.count_requests(P.ApiVersionsRequest.API_KEY) >= 2
        cluster.stop_request_tracking()
        n = cluster.count_requests()
        async with pykaf.open_client(cluster.bootstrap) as client:
            await client.request(1, P.DescribeClusterRequest())
        assert cluster.count_requests() == n


def test_broker_down_drops_connections_and_refuses_new_ones(
    fake_cluster: FakeClusterThread,
) -> None:
    sock = _connect(fake_cluster, 2)
    _raw_request(sock, P.ApiVersionsRequest(), 0)
    assert _raw_response(sock) is not None
    fake_cluster.broker_down(2)
    assert _raw_response(sock) is None  # the open connection dropped
    sock.close()
    with _connect(fake_cluster, 2) as again:
        _raw_request(again, P.ApiVersionsRequest(), 0)
        assert _raw_response(again) is None  # accepted, then closed at once
    fake_cluster.broker_up(2)
    with _connect(fake_cluster, 2) as back:
        _raw_request(back, P.ApiVersionsRequest(), 0)
        assert _raw_response(back) is not None


@pytest.mark.trio
async def test_pykaf_follows_a_broker_down_then_up() -> None:
    async with open_fake_cluster(2) as cluster, pykaf.open_client(cluster.bootstrap) as client:
        await client.request(2, P.DescribeClusterRequest())
        cluster.broker_down(2)
        with pytest.raises((errors.KafkaConnectionError, errors.KafkaTimeoutError)):
            with trio.fail_after(10):
                await client.request(2, P.DescribeClusterRequest())
        cluster.broker_up(2)
        with trio.fail_after(10):
            while True:
                try:
                    resp = await client.request(2, P.DescribeClusterRequest())
                    break
                except errors.KafkaConnectionError:
                    await trio.sleep(0.05)
        assert resp.error_code == 0


@pytest.mark.trio
async def test_added_latency_still_answers_every_request() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.set_rtt(1, 30)
        async with pykaf.open_client(cluster.bootstrap) as client:
            async with trio.open_nursery() as nursery:
                results: list[int] = []

                async def one(i: int) -> None:
                    resp = await client.request(1, P.DescribeClusterRequest())
                    assert resp.error_code == 0
                    results.append(i)

                for i in range(5):
                    nursery.start_soon(one, i)
            assert sorted(results) == [0, 1, 2, 3, 4]


# -- SASL -----------------------------------------------------------------------


@pytest.mark.trio
@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM])
async def test_pykaf_logs_in_with_every_mechanism(mechanism: str) -> None:
    async with open_fake_cluster(1, users={"alice": "wonderland"}) as cluster:
        cluster.create_topic("secret", 2)
        opts = {"sasl_mechanism": mechanism, "sasl_username": "alice"}
        async with pykaf.open_client(cluster.bootstrap, sasl_password="wonderland", **opts) as c:
            assert await c.partitions("secret") == [0, 1]
        with pytest.raises(errors.SaslAuthenticationError):
            async with pykaf.open_client(cluster.bootstrap, sasl_password="wrong", **opts) as c:
                await c.partitions("secret")
        with pytest.raises(errors.SaslAuthenticationError):
            async with pykaf.open_client(
                cluster.bootstrap,
                sasl_mechanism=mechanism,
                sasl_username="mallory",
                sasl_password="x",
            ) as c:
                await c.partitions("secret")


@pytest.mark.trio
async def test_a_mechanism_the_cluster_does_not_offer_is_refused() -> None:
    async with open_fake_cluster(1, users={"a": "b"}, sasl_mechanisms=["SCRAM-SHA-512"]) as cluster:
        with pytest.raises(errors.UnsupportedSaslMechanismError):
            async with pykaf.open_client(
                cluster.bootstrap, sasl_mechanism="PLAIN", sasl_username="a", sasl_password="b"
            ) as c:
                await c.partitions("x")


def test_requests_before_authentication_close_the_connection(
    sasl_cluster: FakeClusterThread,
) -> None:
    with _connect(sasl_cluster) as sock:
        _raw_request(sock, P.ApiVersionsRequest(), 0)
        assert _raw_response(sock) is not None  # allowed before SASL
        _raw_request(sock, P.MetadataRequest(topics=None), 1)
        assert _raw_response(sock) is None


def test_plain_over_handshake_v0_bare_tokens(sasl_cluster: FakeClusterThread) -> None:
    with _connect(sasl_cluster) as sock:
        _raw_request(sock, P.SaslHandshakeRequest(mechanism="PLAIN"), 0)
        frame = _raw_response(sock)
        assert frame is not None
        assert P.SaslHandshakeResponse.decode(frame[4:], 0).error_code == 0
        token = b"\x00bob\x00builder"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _raw_response(sock) == b""
        _raw_request(sock, P.MetadataRequest(topics=None), 1)
        frame = _raw_response(sock)
        assert frame is not None
        assert len(P.MetadataResponse.decode(frame[4:], 1).brokers) == 1
    with _connect(sasl_cluster) as sock:
        _raw_request(sock, P.SaslHandshakeRequest(mechanism="PLAIN"), 0)
        assert _raw_response(sock) is not None
        token = b"\x00bob\x00wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _raw_response(sock) is None


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM])
def test_confluent_kafka_logs_in_and_is_refused(
    sasl_cluster: FakeClusterThread, mechanism: str
) -> None:
    sasl_cluster.create_topic("c-secret", 1)
    base = {
        "bootstrap.servers": sasl_cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
    }
    ok = confluent_admin.AdminClient({**base, "sasl.password": "wonderland"})
    assert "c-secret" in ok.list_topics(timeout=10).topics
    bad = confluent_admin.AdminClient({**base, "sasl.password": "nope"})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        bad.list_topics(timeout=3)
    assert info.value.args[0].code() in (
        confluent_kafka.KafkaError._AUTHENTICATION,
        confluent_kafka.KafkaError._TRANSPORT,
        confluent_kafka.KafkaError._TIMED_OUT,
    )


# -- TLS ------------------------------------------------------------------------


@pytest.mark.trio
async def test_tls_with_a_certificate_check(tls_certs: TLSCertificates) -> None:
    async with open_fake_cluster(2, certificates=tls_certs) as cluster:
        cluster.create_topic("sealed", 2)
        async with pykaf.open_client(cluster.bootstrap, ssl_cafile=tls_certs.ca_file) as client:
            assert await client.partitions("sealed") == [0, 1]
            assert (await client.leader("sealed", 1)).node_id in (1, 2)
        # a client that does not trust the test CA is refused by its own check
        untrusting = ssl.create_default_context()
        with pytest.raises(errors.TlsCertificateError, match="certificate"):
            async with pykaf.open_client(
                cluster.bootstrap, ssl_context=untrusting, request_timeout=2, connect_timeout=2
            ):
                pass


def test_confluent_kafka_over_tls(tls_certs: TLSCertificates) -> None:
    with FakeClusterThread(1, certificates=tls_certs) as cluster:
        cluster.create_topic("sealed-c", 1)
        conf = {"bootstrap.servers": cluster.bootstrap, **tls_certs.confluent_config()}
        admin = confluent_admin.AdminClient(conf)
        assert "sealed-c" in admin.list_topics(timeout=10).topics


# -- python -m pykaf.testing ------------------------------------------------------


def test_the_command_serves_until_terminated() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykaf.testing", "--brokers", "2", "--topic", "cmd:4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        assert bootstrap.count(",") == 1
        admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(timeout=10)
        assert len(md.topics["cmd"].partitions) == 4
        assert sorted(md.brokers) == [1, 2]
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_the_command_refuses_bad_arguments() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pykaf.testing", "--certfile", "only.pem"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "both --certfile and --keyfile" in out.stderr


def test_the_command_sets_the_transaction_version() -> None:
    from pykaf.testing.__main__ import build, parser

    assert build(parser().parse_args([])).transaction_version == 1
    cluster = build(parser().parse_args(["--transaction-version", "2"]))
    assert cluster.transaction_version == 2
    assert cluster.api_versions().finalized_features[0].max_version_level == 2
    with pytest.raises(SystemExit):
        parser().parse_args(["--transaction-version", "3"])
