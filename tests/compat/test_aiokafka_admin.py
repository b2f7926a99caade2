"""pykaf.compat.aiokafka.admin.AIOKafkaAdminClient: topics, configs and groups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pykaf.compat.aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition, errors
from pykaf.compat.aiokafka.admin import (
    AIOKafkaAdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
)

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["fake", "kafka"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, then Apache Kafka."""
    return bc.broker_from(request, request.param)


def test_topics_configs_and_groups(admin_broker: Any) -> None:
    topic = bc.unique("aiok-admin")
    group = bc.unique("aiok-admin-g")

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
        await admin.start()
        try:
            created = await admin.create_topics(
                [NewTopic(topic, 2, 1, topic_configs={"retention.ms": "600000"})]
            )
            assert created.to_object()["topic_errors"] == [
                {"topic": topic, "error_code": 0, "error_message": None}
            ]
            again = await admin.create_topics([NewTopic(topic, 2, 1)])
            (entry,) = again.to_object()["topic_errors"]
            code = entry["error_code"]
            assert errors.for_code(code) is errors.TopicAlreadyExistsError
            assert topic in await admin.list_topics()
            (described,) = await admin.describe_topics([topic])
            assert described["topic"] == topic
            assert [p["partition"] for p in described["partitions"]] == [0, 1]
            cluster = await admin.describe_cluster()
            assert cluster["brokers"] and cluster["controller_id"] >= 0
            grown = await admin.create_partitions({topic: NewPartitions(3)})
            assert grown.topic_errors[0]["error_code"] == 0
            assert len((await admin.describe_topics([topic]))[0]["partitions"]) == 3

            resource = ConfigResource(ConfigResourceType.TOPIC, topic, ["retention.ms"])
            (configs,) = await admin.describe_configs([resource])
            (found,) = configs.to_object()["resources"][0]["config_entries"]
            assert (found["config_names"], found["config_value"]) == ("retention.ms", "600000")
            await admin.alter_configs([ConfigResource("topic", topic, {"retention.ms": "700000"})])
            # Kafka's brokers see a config change once its metadata reaches them.
            for _ in range(100):
                (configs,) = await admin.describe_configs([resource])
                value = configs.resources[0]["config_entries"][0]["config_value"]
                if value == "700000":
                    break
                await asyncio.sleep(0.1)
            assert value == "700000"

            async with AIOKafkaProducer(bootstrap_servers=admin_broker.bootstrap) as producer:
                await producer.send_and_wait(topic, b"x", partition=0)
            consumer = AIOKafkaConsumer(
                bootstrap_servers=admin_broker.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            consumer.subscribe([topic])
            while not await consumer.getmany(timeout_ms=1000):
                pass
            await consumer.commit()
            assert (group, "consumer") in await admin.list_consumer_groups()
            (desc,) = await admin.describe_consumer_groups([group])
            (info,) = desc.to_object()["groups"]
            assert info["state"] == "Stable" and len(info["members"]) == 1
            offsets = await admin.list_consumer_group_offsets(group)
            assert offsets[TopicPartition(topic, 0)].offset == 1
            await consumer.stop()
            assert await admin.delete_consumer_groups([group]) == [(group, 0)]

            deleted = await admin.delete_topics([topic, topic + "-none"])
            codes = {e["topic"]: e["error_code"] for e in deleted.topic_error_codes}
            assert codes == {topic: 0, topic + "-none": 3}
        finally:
            await admin.close()

    asyncio.run(main())


def test_a_call_before_start_is_refused() -> None:
    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers="127.0.0.1:1")
        with pytest.raises(errors.IllegalStateError, match="not started"):
            await admin.list_topics()

    asyncio.run(main())
