"""A SASL listener reached without ``security_protocol``: the error says so (issue 35).

Such a listener answers ApiVersions, then closes the connection at the first
request that is not part of authenticating. pykaf used to retry "closed by the
broker" until request_timeout and name neither SASL nor ``security_protocol``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf import protocol as P
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection
from pykaf.testing import KafkaCluster, open_fake_cluster

QUICK: dict[str, Any] = {"request_timeout": 1.0, "connect_timeout": 1.0, "retry_backoff": 0.05}


def assert_hint(error: BaseException) -> None:
    text = str(error)
    assert "closed by the broker" in text
    assert "SASL listener" in text and "security_protocol" in text
    assert "SASL_PLAINTEXT" in text and "sasl_mechanism" in text


async def test_the_fake_clusters_sasl_listener_without_security_protocol() -> None:
    async with open_fake_cluster(1, users={"alice": "alice-secret"}) as cluster:
        with pytest.raises(errors.KafkaConnectionError) as info:
            async with pykaf.open_client(cluster.bootstrap, **QUICK):
                pytest.fail("connected without authenticating")
        assert_hint(info.value)
        # the same listener with the right options: no error
        async with pykaf.open_client(
            cluster.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_username="alice",
            sasl_password="alice-secret",
            **QUICK,
        ) as client:
            assert await client.brokers()


@pytest.mark.broker
def test_kafkas_sasl_listener_without_security_protocol(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(errors.KafkaConnectionError) as info:
        pykaf.sync.Admin(kafka_cluster.sasl_bootstrap, **QUICK)
    assert_hint(info.value)


async def test_a_connection_closed_after_answering_gets_no_hint() -> None:
    """Only a close at the first request after ApiVersions hints at SASL."""
    async with open_fake_cluster(1) as cluster, trio.open_nursery() as nursery:
        broker = cluster.nodes[next(iter(cluster.nodes))]
        config = ClientConfig.from_kwargs(**QUICK)
        conn = await BrokerConnection.open(nursery, broker.host, broker.port, config)
        await conn.request(P.MetadataRequest(topics=None))
        cluster.broker_down(broker.node_id)
        with trio.fail_after(5), pytest.raises(errors.KafkaConnectionError) as info:
            await conn.request(P.MetadataRequest(topics=None))
        assert "SASL" not in str(info.value) and "security_protocol" not in str(info.value)
        await conn.aclose()
        nursery.cancel_scope.cancel()
