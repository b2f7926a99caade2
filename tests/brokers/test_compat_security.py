"""SASL SCRAM and TLS on one Kafka release (the SCRAM users are made at format time)."""

from __future__ import annotations

from typing import Any

import pytest
from compat_support import new_topic, read_partition

import pykaf
from pykaf import errors
from pykaf.testing import KafkaCluster
from pykaf.testing.fixtures import KAFKA_USERS


def _scram(mechanism: str, password: str = KAFKA_USERS["admin"]) -> dict[str, Any]:
    return {"sasl_mechanism": mechanism, "sasl_username": "admin", "sasl_password": password}


@pytest.mark.compat("KIP-84", "SASL SCRAM-SHA-256/512 (over TLS too)")
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_logins(kafka: KafkaCluster, mechanism: str) -> None:
    topic = await new_topic(kafka, f"scram-{mechanism[-3:]}")
    sasl = {"security_protocol": "SASL_PLAINTEXT", **_scram(mechanism)}
    sasl_tls = {"security_protocol": "SASL_SSL", "ssl_cafile": kafka.ca_file, **_scram(mechanism)}
    async with pykaf.open_producer(kafka.sasl_bootstrap, **sasl) as producer:
        await producer.send(topic, b"sasl", partition=0)
    async with pykaf.open_producer(kafka.sasl_tls_bootstrap, **sasl_tls) as producer:
        await producer.send(topic, b"sasl-tls", partition=0)
    got = await read_partition(kafka.sasl_bootstrap, topic, 0, 2, **sasl)
    assert [r.value for r in got] == [b"sasl", b"sasl-tls"]
    with pytest.raises(errors.SaslAuthenticationError):
        async with pykaf.open_producer(
            kafka.sasl_bootstrap,
            security_protocol="SASL_PLAINTEXT",
            **_scram(mechanism, "wrong-password"),
        ):
            pass


@pytest.mark.compat("—", "TLS (and SASL over TLS)")
async def test_tls(kafka: KafkaCluster) -> None:
    topic = await new_topic(kafka, "tls")
    tls = {"security_protocol": "SSL", "ssl_cafile": kafka.ca_file}
    async with pykaf.open_producer(kafka.tls_bootstrap, **tls) as producer:
        await producer.send(topic, b"over tls", partition=0)
    got = await read_partition(kafka.tls_bootstrap, topic, 0, 1, **tls)
    assert got[0].value == b"over tls"
