"""A broker without share groups: the share consumer and admin calls raise typed errors.

A fake cluster with the KIP-932 APIs taken away stands for Kafka before 4.1:
``UnsupportedVersionError``, never a hang.
"""

from __future__ import annotations

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
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
        async with pykaf.open_share_consumer(fake.bootstrap, "workers", ["jobs"]) as consumer:
            with trio.fail_after(10), pytest.raises(errors.UnsupportedVersionError):
                await consumer.next_batch()
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
