"""Describing and incrementally altering configs.

Tansu 0.6 stores changes but checks nothing and reports every config as a
default, so what goes beyond the round trip runs on Apache Kafka and pykaf's
fake cluster (librdkafka's mock cluster has neither API).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def settled_topic(
    admin: pykaf.Admin, topic: str, done: Callable[[dict[str, Any]], bool], **kw: Any
) -> dict[str, Any]:
    """The topic's configs once `done` holds of them, or as last read after 10 s.

    Kafka's brokers see a config change once its metadata reaches them, and a
    describe goes to any broker: one right after the alter may answer the old
    value. The caller asserts on what this returns, so a change that never
    lands still fails, naming the values read.
    """
    for _ in range(200):
        found: dict[str, Any] = (await admin.describe_topic_configs([topic], **kw))[topic]
        if done(found):
            break
        await trio.sleep(0.05)
    return found


async def test_group_configs_are_described_set_and_deleted(kafka_or_fake: Any) -> None:
    group, reset = unique("cfg-g"), "share.auto.offset.reset"
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        # a group that does not exist has the broker's configs
        before = (await admin.describe_group_configs([group]))[group]
        assert before[reset].value == "latest" and before[reset].default
        assert "consumer.session.timeout.ms" in before

        async def settled(value: str) -> dict[str, Any]:
            # Kafka's brokers see a config change once its metadata reaches them:
            # a describe right after the alter may still answer the old value.
            for _ in range(100):
                found = (await admin.describe_group_configs([group], keys=[reset]))[group]
                if found[reset].value == value:
                    break
                await trio.sleep(0.1)
            return found

        await admin.alter_group_configs({group: {reset: "earliest"}})
        only = await settled("earliest")
        assert list(only) == [reset]
        assert (only[reset].value, only[reset].source) == ("earliest", "group")
        assert not only[reset].default
        await admin.alter_group_configs({group: {reset: None}})
        assert (await settled("latest"))[reset].value == "latest"


async def test_topic_configs_are_set_deleted_appended_and_subtracted(kafka_or_fake: Any) -> None:
    topic = unique("cfg")
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        await admin.create_topic(topic, 1, configs={"retention.ms": "3600000"})
        before = (await admin.describe_topic_configs([topic]))[topic]
        assert before["retention.ms"].value == "3600000"
        assert before["retention.ms"].source == "dynamic_topic"
        assert before["cleanup.policy"].value == "delete"
        assert before["cleanup.policy"].source == "default" and before["cleanup.policy"].default

        await admin.alter_topic_configs(
            {
                topic: {
                    "retention.ms": None,
                    "max.message.bytes": "2097152",
                    "cleanup.policy": pykaf.ConfigChange.append("compact"),
                }
            }
        )
        after = await settled_topic(
            admin, topic, lambda c: c["max.message.bytes"].value == "2097152"
        )
        assert after["retention.ms"].value == "604800000" and after["retention.ms"].default
        assert after["max.message.bytes"].value == "2097152"
        assert after["cleanup.policy"].value == "delete,compact"
        # appending what is there keeps it once; subtracting removes it
        await admin.alter_topic_configs(
            {topic: {"cleanup.policy": pykaf.ConfigChange.append("compact")}}
        )
        await admin.alter_topic_configs(
            {topic: {"cleanup.policy": pykaf.ConfigChange.subtract("delete")}}
        )
        keys = ["cleanup.policy", "max.message.bytes"]
        only = await settled_topic(
            admin, topic, lambda c: c["cleanup.policy"].value == "compact", keys=keys
        )
        assert set(only) == set(keys)
        assert only["cleanup.policy"].value == "compact"


async def test_a_refused_change_changes_nothing(kafka_or_fake: Any) -> None:
    topic, other = unique("cfg"), unique("cfg")
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        await admin.create_topics([pykaf.NewTopic(topic, 1), pykaf.NewTopic(other, 1)])

        async def values() -> dict[str, str | None]:
            entries = (await admin.describe_topic_configs([topic]))[topic]
            return {k: e.value for k, e in entries.items()}

        start = await values()
        # one bad value refuses the topic's whole change: retention.ms stays
        with pytest.raises(errors.InvalidConfigurationError, match=r"segment\.bytes"):
            await admin.alter_topic_configs(
                {topic: {"retention.ms": "1000", "segment.bytes": "lots"}}
            )
        with pytest.raises(errors.InvalidConfigurationError, match=r"no\.such\.config"):
            await admin.alter_topic_configs({topic: {"no.such.config": "1"}})
        with pytest.raises(errors.InvalidConfigurationError, match="its type is not LIST"):
            await admin.alter_topic_configs(
                {topic: {"retention.ms": pykaf.ConfigChange.append("5")}}
            )
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.alter_topic_configs({unique("nope"): {"retention.ms": "1"}})
        # deleting a name that cannot be set changes nothing, as on Kafka
        await admin.alter_topic_configs({topic: {"no.such.config": None}})
        await admin.alter_topic_configs({topic: {"retention.ms": "1000"}}, validate_only=True)
        assert await values() == start

        # several topics: the good one is changed, the bad one named in AdminError
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.alter_topic_configs(
                {topic: {"retention.ms": "1000"}, other: {"compression.type": "brotli"}}
            )
        assert set(failed.value.failures) == {other}
        assert isinstance(failed.value.failures[other], errors.InvalidConfigurationError)
        assert (await values())["retention.ms"] == "1000"


async def test_broker_configs_per_broker_and_cluster_wide(fake_cluster: Any) -> None:
    topic = unique("cfg")
    async with pykaf.open_admin(fake_cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1)
        brokers = await admin.describe_broker_configs()
        assert set(brokers) == {1, 2, 3}
        assert brokers[2]["broker.id"].value == "2" and brokers[2]["broker.id"].read_only
        assert brokers[1]["message.max.bytes"].source == "default"

        await admin.alter_broker_configs({2: {"message.max.bytes": "2000000"}})
        await admin.alter_broker_configs({None: {"log.retention.ms": "7200000"}})
        brokers = await admin.describe_broker_configs(
            keys=["message.max.bytes", "log.retention.ms"]
        )
        assert brokers[2]["message.max.bytes"].value == "2000000"
        assert brokers[2]["message.max.bytes"].source == "dynamic_broker"
        assert brokers[1]["message.max.bytes"].value == "1048588"
        for node in (1, 2, 3):
            entry = brokers[node]["log.retention.ms"]
            assert (entry.value, entry.source) == ("7200000", "dynamic_default_broker")
        # a topic without its own retention.ms takes the cluster-wide default
        retention = (await admin.describe_topic_configs([topic]))[topic]["retention.ms"]
        assert (retention.value, retention.source) == ("7200000", "dynamic_default_broker")

        with pytest.raises(errors.InvalidRequestError, match="dynamically"):
            await admin.alter_broker_configs({1: {"num.partitions": "7"}})
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.alter_broker_configs(
                {1: {"message.max.bytes": "-5"}, 3: {"log.cleaner.threads": "2"}}
            )
        assert set(failed.value.failures) == {1}
        # Kafka answers INVALID_REQUEST for any bad broker value (INVALID_CONFIG for topics)
        assert isinstance(failed.value.failures[1], errors.InvalidRequestError)
        for bad in ("1_000", "2147483648", "+5"):
            with pytest.raises(errors.InvalidRequestError):
                await admin.alter_broker_configs({1: {"message.max.bytes": bad}})
        threads = await admin.describe_broker_configs([3], keys=["log.cleaner.threads"])
        assert threads[3]["log.cleaner.threads"].value == "2"


async def test_the_fake_refuses_what_kafka_refuses(fake_cluster: Any) -> None:
    """Raw requests: a broker resource sent to another broker, a key given twice, synonyms."""
    topic = unique("cfg")
    await trio.to_thread.run_sync(fake_cluster.create_topic, topic, 1)
    R = P.IncrementalAlterConfigsRequest
    async with pykaf.open_client(fake_cluster.bootstrap) as client:
        twice = R(
            resources=[
                R.AlterConfigsResource(
                    resource_type=2,
                    resource_name=topic,
                    configs=[
                        R.AlterableConfig(name="retention.ms", config_operation=0, value="1"),
                        R.AlterableConfig(name="retention.ms", config_operation=1, value=None),
                    ],
                ),
                R.AlterConfigsResource(resource_type=4, resource_name="2", configs=[]),
                R.AlterConfigsResource(resource_type=99, resource_name="x", configs=[]),
            ],
            validate_only=False,
        )
        response = await client.request(1, twice)
        codes = [r.error_code for r in response.responses]
        assert codes == [errors.InvalidRequestError.code] * 3

        D = P.DescribeConfigsRequest
        described = await client.request(
            1,
            D(
                resources=[
                    D.DescribeConfigsResource(
                        resource_type=2, resource_name=topic, configuration_keys=["retention.ms"]
                    )
                ],
                include_synonyms=True,
            ),
        )
        (entry,) = described.results[0].configs
        # as Kafka answers: log.retention.ms is unset (retention follows
        # log.retention.hours), so the default lists no synonym
        assert (entry.value, entry.config_source) == ("604800000", 5)
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == []

        async def entry_of(resource_type: int, name: str, key: str) -> Any:
            request = D(
                resources=[
                    D.DescribeConfigsResource(
                        resource_type=resource_type, resource_name=name, configuration_keys=[key]
                    )
                ],
                include_synonyms=True,
            )
            (found,) = (await client.request(1, request)).results[0].configs
            return found

        # a topic config with no broker synonym: only the topic's own value, if any
        assert (await entry_of(2, topic, "preallocate")).synonyms == []
        cluster = fake_cluster.cluster  # changed from its own loop, through call()
        await trio.to_thread.run_sync(
            fake_cluster.call, lambda: cluster.topics[topic].configs.update({"retention.ms": "9"})
        )
        found = await entry_of(2, topic, "retention.ms")
        # (Kafka lists no log.retention.ms default: it is unset)
        assert [(s.name, s.value, s.source) for s in found.synonyms] == [("retention.ms", "9", 1)]
        # the cluster-wide broker resource lists only its own level
        await trio.to_thread.run_sync(
            fake_cluster.call,
            lambda: cluster.configs.broker.setdefault(None, {}).update({"log.retention.ms": "7"}),
        )
        found = await entry_of(4, "", "log.retention.ms")
        assert (found.value, found.config_source) == ("7", 3)
        assert [(s.name, s.value, s.source) for s in found.synonyms] == [
            ("log.retention.ms", "7", 3)
        ]


async def test_configs_round_trip_on_both(admin_broker: Any) -> None:
    """What Tansu 0.6 does too: set, append, subtract and delete, read back."""
    topic = unique("cfg")
    async with pykaf.open_admin(admin_broker.bootstrap) as admin:
        await admin.create_topic(topic, 1, configs={"cleanup.policy": "compact"})

        async def value(name: str, *wants: str | None) -> str | None:
            def done(configs: dict[str, Any]) -> bool:
                entry = configs.get(name)
                return (None if entry is None else entry.value) in wants

            entry = (await settled_topic(admin, topic, done)).get(name)
            return None if entry is None else entry.value

        await admin.alter_topic_configs(
            {
                topic: {
                    "retention.ms": "1000",
                    "cleanup.policy": pykaf.ConfigChange.append("delete"),
                }
            }
        )
        assert await value("retention.ms", "1000") == "1000"
        assert await value("cleanup.policy", "compact,delete") == "compact,delete"
        await admin.alter_topic_configs(
            {topic: {"cleanup.policy": pykaf.ConfigChange.subtract("compact")}}
        )
        assert await value("cleanup.policy", "delete") == "delete"
        await admin.alter_topic_configs({topic: {"retention.ms": None}})
        # deleted: back to the default (the fake), or no longer listed (Tansu)
        assert await value("retention.ms", "604800000", None) in ("604800000", None)


async def test_the_fake_enforces_what_the_configs_say(fake_cluster: Any) -> None:
    """max.message.bytes refuses a larger batch; a cluster-wide LogAppendTime stamps batches."""
    topic, stamped = unique("small"), unique("stamped")
    async with pykaf.open_admin(fake_cluster.bootstrap) as admin:
        await admin.create_topics([pykaf.NewTopic(topic, 1), pykaf.NewTopic(stamped, 1)])
        await admin.alter_topic_configs({topic: {"max.message.bytes": "1000"}})
        await admin.alter_broker_configs({None: {"log.message.timestamp.type": "LogAppendTime"}})
    async with pykaf.open_producer(fake_cluster.bootstrap) as producer:
        await producer.send(topic, b"x" * 100, partition=0)
        # Kafka's answer carries no message, and neither does the fake's
        with pytest.raises(errors.RecordTooLargeError):
            await producer.send(topic, b"x" * 2000, partition=0)
        assert fake_cluster.cluster.high_watermark(topic, 0) == 1  # nothing of it was written
        await producer.send(stamped, b"old", partition=0, timestamp=1_000)
    async with pykaf.open_consumer(fake_cluster.bootstrap) as consumer:
        pc = await consumer.consume_partition(stamped, 0, pykaf.OLDEST)
        (record,) = await pc.next_batch()
        assert record.timestamp > 1_000_000_000_000  # the broker's clock, not 1000
