"""pykaf.aio.testing.open_kafka_cluster: Apache Kafka started and stopped from asyncio."""

from __future__ import annotations

import asyncio

import pytest

import pykaf
import pykaf.aio
from pykaf.aio.testing import KafkaCluster, open_kafka_cluster
from pykaf.testing import KafkaUnavailableError, kafka_home

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def test_a_kafka_cluster_for_an_asyncio_test() -> None:
    try:
        kafka_home()
    except KafkaUnavailableError as exc:
        pytest.skip(f"Apache Kafka cannot run here: {exc}")

    async def main() -> None:
        async with open_kafka_cluster() as kafka:
            assert isinstance(kafka, KafkaCluster)
            await kafka.create_topic("events", 2)
            async with pykaf.aio.open_producer(kafka.bootstrap) as producer:
                md = await producer.send("events", b"v", partition=1)
            assert (md.partition, md.offset) == (1, 0)
            assert kafka.node_ids == kafka.cluster.node_ids  # the cluster's own attributes
            await kafka.delete_topic("events")

    asyncio.run(main())
