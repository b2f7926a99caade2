"""A broker without share groups: the share consumer and admin calls raise typed errors.

A fake cluster with the KIP-932 APIs taken away stands for Kafka before 4.1:
``UnsupportedVersionError`` (the share consumer's ``BrokerFeatureError``, at
open), never a hang.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.protocol.versions import BrokerFeatureError
from pykaf.testing import open_fake_cluster

_SHARE_APIS = (
    P.ShareGroupHeartbeatRequest,
    P.ShareGroupDescribeRequest,
    P.ShareFetchRequest,
    P.ShareAcknowledgeRequest,
    P.DescribeShareGroupOffsetsRequest,
    P.AlterShareGroupOffsetsRequest,
    P.DeleteShareGroupOffsetsRequest,
)


async def test_share_consumer_on_a_broker_without_share_groups() -> None:
    async with open_fake_cluster(brokers=1) as fake:
        for api in _SHARE_APIS:  # as a broker before Kafka 4.1
            del fake.apis[api.API_KEY]
        fake.create_topic("jobs", 1)
        with trio.fail_after(10), pytest.raises(BrokerFeatureError, match="share groups") as info:
            async with pykaf.open_share_consumer(fake.bootstrap, "workers", ["jobs"]):
                pytest.fail("opened on a broker without share groups")
        assert isinstance(info.value, errors.UnsupportedVersionError)
        assert "Kafka 4.1 or newer" in info.value.needs
        async with pykaf.open_admin(fake.bootstrap) as admin:
            with pytest.raises(errors.UnsupportedVersionError):
                await admin.describe_share_group("workers")


async def test_open_share_consumer_checks_its_arguments() -> None:
    with pytest.raises(errors.ConfigError, match="group_id"):
        async with pykaf.open_share_consumer("localhost:1", "", ["t"]):
            pass
    with pytest.raises(errors.ConfigError, match="topics"):
        async with pykaf.open_share_consumer("localhost:1", "g", "t"):  # type: ignore[arg-type]
            pass
    with pytest.raises(errors.ConfigError, match="max_records"):
        async with pykaf.open_share_consumer("localhost:1", "g", ["t"], max_records=0):
            pass


@pytest.mark.parametrize("settle", ["commit", "next_batch"])
async def test_renew_on_a_broker_before_kafka_4_2(settle: str) -> None:
    # ShareFetch and ShareAcknowledge v1 (Kafka 4.1) carry no RENEW: a typed error,
    # and the outcome is kept, so the record can still be settled otherwise.
    async with open_fake_cluster(brokers=1) as fake:
        for api in (P.ShareFetchRequest, P.ShareAcknowledgeRequest):
            fake.apis[api.API_KEY] = replace(fake.apis[api.API_KEY], max_version=1)
        fake.create_topic("jobs", 1)
        async with pykaf.open_admin(fake.bootstrap) as admin:
            await admin.alter_group_configs({"workers": {"share.auto.offset.reset": "earliest"}})
        async with pykaf.open_producer(fake.bootstrap) as producer:
            await producer.send_batch("jobs", [b"a", b"b"], partition=0)
        async with pykaf.open_share_consumer(
            fake.bootstrap, "workers", ["jobs"], fetch_max_wait=0.2
        ) as consumer:
            with trio.fail_after(10):
                held = await consumer.next_batch()
            assert [r.value for r in held] == [b"a", b"b"]
            consumer.acknowledge(held[0], pykaf.RENEW)
            which = "ShareAcknowledge" if settle == "commit" else "ShareFetch"
            with pytest.raises(errors.UnsupportedVersionError, match=f"RENEW needs {which} v2"):
                if settle == "commit":
                    await consumer.commit()
                else:
                    await consumer.next_batch(timeout=1)
            consumer.acknowledge(held[0], pykaf.ACCEPT)  # done with it after all
            await consumer.commit()
        async with pykaf.open_share_consumer(
            fake.bootstrap, "workers", ["jobs"], fetch_max_wait=0.2
        ) as again:
            assert await again.next_batch(timeout=1) == []  # both were accepted
