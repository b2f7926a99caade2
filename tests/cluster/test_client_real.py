"""The cluster client against Apache Kafka and Tansu: metadata, leaders, offsets,
coordinators, TLS, SASL."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._cluster.client import NEWEST, OLDEST, open_client
from pykaf.testing import KafkaCluster, TansuBroker

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


def produce(bootstrap: str, topic: str, n: int, **conf: Any) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0)
        p.flush(10)  # one record per batch: Tansu's ListOffsets is right then
    assert p.flush(10) == 0


async def test_metadata_leaders_and_offsets(real_broker: Any) -> None:
    topic = bc.unique("orders")
    real_broker.create(topic, 1)
    await trio.to_thread.run_sync(produce, real_broker.bootstrap, topic, 5)
    port = int(real_broker.bootstrap.rsplit(":", 1)[1])
    async with open_client(real_broker.bootstrap, client_id="meta-test") as client:
        brokers = await client.brokers()
        assert [b.port for b in brokers] == [port]
        assert topic in await client.topics()
        parts = await client.partitions(topic)
        assert parts and parts == await client.writable_partitions(topic)
        leader = await client.leader(topic, 0)
        assert leader.node_id == brokers[0].node_id
        assert await client.replicas(topic, 0) == [leader.node_id]
        assert await client.in_sync_replicas(topic, 0) == [leader.node_id]
        assert await client.offline_replicas(topic, 0) == []
        assert await client.get_offset(topic, 0, OLDEST) == 0
        assert await client.get_offset(topic, 0, NEWEST) == 5
        assert (await client.controller()).node_id == leader.node_id
        coord = await client.coordinator(bc.unique("some-group"))
        assert coord.port == port
        stats = client.statistics()
        assert stats.brokers == 1 and stats.connections >= 1 and stats.requests_sent >= 5


async def test_unknown_topic_and_partition_errors(real_broker: Any) -> None:
    small = bc.unique("small")
    async with open_client(real_broker.bootstrap) as client:
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="allow_auto_create"):
            await client.partitions(bc.unique("no-such-topic"))
        real_broker.create(small, 1)
        await client.refresh_metadata()
        n = len(await client.partitions(small))
        with pytest.raises(errors.UnknownTopicOrPartitionError, match=f"no partition {n}"):
            await client.leader(small, n)


async def test_auto_creation_when_asked(real_broker: Any) -> None:
    # Kafka's auto.create.topics.enable is on by default, as Tansu's is
    topic = bc.unique("made-on-demand")
    async with open_client(real_broker.bootstrap, allow_auto_create_topics=True) as client:
        # Kafka's first answers are LEADER_NOT_AVAILABLE: the client asks again
        assert await client.partitions(topic)


async def test_unreachable_bootstrap_is_a_connection_error() -> None:
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.KafkaConnectionError):
        async with open_client(f"127.0.0.1:{port}", request_timeout=1, connect_timeout=1):
            pass


async def test_invalid_config_fails_before_connecting() -> None:
    with pytest.raises(errors.ConfigError):
        async with open_client("127.0.0.1:1", request_timeout=-1):
            pass


async def test_closed_client_refuses_calls(real_broker: Any) -> None:
    async with open_client(real_broker.bootstrap) as client:
        pass
    assert client.closed
    with pytest.raises(errors.ClosedError):
        await client.refresh_metadata()


@pytest.fixture(params=["kafka", "tansu"])
def tls_broker(request: pytest.FixtureRequest) -> tuple[str, str, Any]:
    """(bootstrap, CA file, TLS proxy) of Kafka's TLS listener, or of Tansu behind a TLS proxy."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_cluster")
        return kafka.tls_bootstrap, kafka.ca_file, None
    tansu = request.getfixturevalue("tls_tansu")
    return tansu.bootstrap, tansu.ca_file, tansu.proxy


async def test_tls_with_certificate_check(tls_broker: tuple[str, str, Any]) -> None:
    bootstrap, ca_file, proxy = tls_broker
    async with open_client(bootstrap, ssl_cafile=ca_file) as client:
        [broker] = await client.brokers()
        assert broker.address == bootstrap  # the TLS listener advertises itself
        assert client.statistics().connections >= 1
    if proxy is not None:
        assert proxy.connections_accepted >= 1


async def test_tls_rejects_an_untrusted_certificate(tls_broker: tuple[str, str, Any]) -> None:
    ctx = ssl.create_default_context()  # trusts the system CAs, not the test CA
    # Not retried until a timeout: refused at once with what to change.
    with pytest.raises(errors.TlsCertificateError, match="ssl_cafile"):
        async with open_client(
            tls_broker[0], ssl_context=ctx, request_timeout=60, connect_timeout=30
        ):
            pass


async def test_plaintext_to_a_tls_listener_fails_cleanly(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(errors.KafkaConnectionError):
        async with open_client(kafka_cluster.tls_bootstrap, request_timeout=2, connect_timeout=2):
            pass


async def test_sasl_against_a_broker_without_working_logins(tansu: TansuBroker) -> None:
    # Tansu answers the SASL handshake but no login can succeed there
    # (../shared/brokers.md); the client must fail cleanly with a SASL error.
    with pytest.raises((errors.SaslAuthenticationError, errors.UnsupportedSaslMechanismError)):
        async with open_client(
            tansu.bootstrap,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="alice",
            sasl_password="secret",
            request_timeout=3,
        ):
            pass


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_logins_on_kafka(kafka_cluster: KafkaCluster, mechanism: str, tls: bool) -> None:
    """Each mechanism logs in with the right password, over SASL_PLAINTEXT and
    SASL_SSL, and fails with SaslAuthenticationError for a wrong password or
    an unknown user."""
    from pykaf.testing.fixtures import KAFKA_USERS

    options: dict[str, Any] = {
        "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "request_timeout": 5,
    }
    if tls:
        options["ssl_cafile"] = kafka_cluster.ca_file
    bootstrap = kafka_cluster.sasl_tls_bootstrap if tls else kafka_cluster.sasl_bootstrap
    for user in ("alice", "bob"):
        async with open_client(
            bootstrap, sasl_username=user, sasl_password=KAFKA_USERS[user], **options
        ) as client:
            [broker] = await client.brokers()
            assert broker.address == bootstrap
    for user, password in (("alice", "bob-secret"), ("mallory", "alice-secret")):
        with pytest.raises(errors.SaslAuthenticationError):
            async with open_client(
                bootstrap, sasl_username=user, sasl_password=password, **options
            ):
                pass


async def test_a_mechanism_the_listener_lacks_is_refused(kafka_cluster: KafkaCluster) -> None:
    # the SASL listener enables PLAIN and SCRAM only: the handshake names them
    with pytest.raises(errors.UnsupportedSaslMechanismError, match="PLAIN"):
        async with open_client(
            kafka_cluster.sasl_bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=lambda: "token",
            request_timeout=5,
        ):
            pass


def test_open_client_is_exported() -> None:
    assert pykaf.open_client is open_client
    assert pykaf.OLDEST == OLDEST and pykaf.NEWEST == NEWEST
