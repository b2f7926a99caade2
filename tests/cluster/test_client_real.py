"""The cluster client against Tansu: metadata, leaders, offsets, coordinators, TLS, SASL."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._cluster.client import NEWEST, OLDEST, open_client
from pykaf.testing import TansuBroker, TLSTansu


def produce(bootstrap: str, topic: str, n: int, **conf: Any) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0)
        p.flush(10)  # one record per batch: Tansu's ListOffsets is right then
    assert p.flush(10) == 0


async def test_metadata_leaders_and_offsets(tansu_fresh: TansuBroker) -> None:
    await trio.to_thread.run_sync(produce, tansu_fresh.bootstrap, "orders", 5)
    async with open_client(tansu_fresh.bootstrap, client_id="meta-test") as client:
        brokers = await client.brokers()
        assert [b.port for b in brokers] == [tansu_fresh.port]
        assert "orders" in await client.topics()
        parts = await client.partitions("orders")
        assert parts and parts == await client.writable_partitions("orders")
        leader = await client.leader("orders", 0)
        assert leader.node_id == brokers[0].node_id
        assert await client.replicas("orders", 0) == [leader.node_id]
        assert await client.in_sync_replicas("orders", 0) == [leader.node_id]
        assert await client.offline_replicas("orders", 0) == []
        assert await client.get_offset("orders", 0, OLDEST) == 0
        assert await client.get_offset("orders", 0, NEWEST) == 5
        assert (await client.controller()).node_id == leader.node_id
        coord = await client.coordinator("some-group")
        assert coord.port == tansu_fresh.port
        assert (await client.refresh_coordinator("some-group")) == coord
        stats = client.statistics()
        assert stats.brokers == 1 and stats.connections >= 1 and stats.requests_sent >= 5


async def test_unknown_topic_and_partition_errors(tansu: TansuBroker) -> None:
    async with open_client(tansu.bootstrap) as client:
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="auto-creation is off"):
            await client.partitions("no-such-topic")
        await trio.to_thread.run_sync(produce, tansu.bootstrap, "small", 1)
        await client.refresh_metadata()
        n = len(await client.partitions("small"))
        with pytest.raises(errors.UnknownTopicOrPartitionError, match=f"no partition {n}"):
            await client.leader("small", n)


async def test_auto_creation_when_asked(tansu_fresh: TansuBroker) -> None:
    async with open_client(tansu_fresh.bootstrap, allow_auto_create_topics=True) as client:
        assert await client.partitions("made-on-demand")


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


async def test_closed_client_refuses_calls(tansu: TansuBroker) -> None:
    async with open_client(tansu.bootstrap) as client:
        pass
    assert client.closed
    with pytest.raises(errors.ClosedError):
        await client.refresh_metadata()


async def test_tls_with_certificate_check(tls_tansu: TLSTansu) -> None:
    async with open_client(tls_tansu.bootstrap, ssl_cafile=tls_tansu.ca_file) as client:
        assert await client.brokers()
        assert client.statistics().connections >= 1
    assert tls_tansu.proxy.connections_accepted >= 1


async def test_tls_rejects_an_untrusted_certificate(tls_tansu: TLSTansu) -> None:
    ctx = ssl.create_default_context()  # trusts the system CAs, not the test CA
    with pytest.raises(errors.KafkaConnectionError, match="certificate"):
        async with open_client(
            tls_tansu.bootstrap, ssl_context=ctx, request_timeout=2, connect_timeout=2
        ):
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


def test_open_client_is_exported() -> None:
    assert pykaf.open_client is open_client
    assert pykaf.OLDEST == OLDEST and pykaf.NEWEST == NEWEST
