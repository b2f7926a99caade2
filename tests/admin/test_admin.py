"""The admin client against Apache Kafka, Tansu and pykaf's fake cluster (and the mock)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import open_fake_cluster


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with pykaf.open_producer(bootstrap) as producer:
        for p in range(partitions):
            await producer.send_batch(
                topic, [b"v%d" % i for i in range(per_partition)], partition=p
            )


async def wait_for(cond: Callable[[], Any], timeout: float = 20.0) -> None:
    with trio.fail_after(timeout):
        while not await cond():
            await trio.sleep(0.05)


async def test_topics_are_created_described_and_deleted(admin_broker: Any) -> None:
    a, b, c = unique("adm-a"), unique("adm-b"), unique("adm-c")
    async with pykaf.open_admin(admin_broker.bootstrap) as admin:
        assert a not in await admin.client.topics()  # the client has its metadata
        await admin.create_topics([pykaf.NewTopic(a, 3), pykaf.NewTopic(b, 1)])
        assert {a, b} <= set(await admin.list_topics())
        # the shared client's metadata knows them at once (no wait for its refresh)
        assert {a, b} <= set(await admin.client.topics())
        described = await admin.describe_topics([a, b])
        assert [p.partition for p in described[a].partitions] == [0, 1, 2]
        assert len(described[b].partitions) == 1
        brokers = {broker.node_id for broker in (await admin.describe_cluster()).brokers}
        for part in described[a].partitions:
            assert part.leader in brokers and part.leader in part.replicas

        # one topic: its own error; several: AdminError naming each, the rest done
        with pytest.raises(errors.TopicExistsError):
            await admin.create_topic(a, 3)
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.create_topics([pykaf.NewTopic(a, 1), pykaf.NewTopic(c, 2)])
        assert set(failed.value.failures) == {a}
        assert isinstance(failed.value.failures[a], errors.TopicExistsError)
        assert len((await admin.describe_topic(c)).partitions) == 2

        await admin.delete_topics([b, c])
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.describe_topic(c)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.delete_topic(unique("never-made"))
        assert b not in await admin.list_topics()
        assert not {b, c} & set(await admin.client.topics())


async def test_describe_cluster(broker: Any) -> None:
    """Kafka, Tansu and the three-broker mock: brokers, controller and cluster id."""
    async with pykaf.open_admin(broker.bootstrap) as admin:
        cluster = await admin.describe_cluster()
    expected = {"kafka": 1, "tansu": 1, "mock": 3}[broker.name]
    assert len(cluster.brokers) == expected
    assert all(b.host and b.port > 0 for b in cluster.brokers)
    assert cluster.cluster_id
    if broker.name in ("kafka", "tansu"):
        assert cluster.controller_id == cluster.brokers[0].node_id


async def test_validate_only_creates_nothing(kafka_or_fake: Any) -> None:
    """validate_only (Tansu 0.6 creates the topic anyway)."""
    topic = unique("checked")
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        await admin.create_topic(topic, 2, validate_only=True)
        assert topic not in await admin.list_topics()
        with pytest.raises(errors.InvalidPartitionsError):
            await admin.create_topic(topic, 0, validate_only=True)
        await admin.create_topic(topic, 2)
        await admin.create_partitions({topic: 4}, validate_only=True)
        assert len((await admin.describe_topic(topic)).partitions) == 2


async def test_partitions_are_added(kafka_or_fake: Any) -> None:
    """CreatePartitions (Tansu does not have it)."""
    topic = unique("grow")
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        await admin.create_topic(topic, 2)
        await admin.create_partitions({topic: 5})
        assert len((await admin.describe_topic(topic)).partitions) == 5
        assert await admin.client.partitions(topic) == [0, 1, 2, 3, 4]
        with pytest.raises(errors.InvalidPartitionsError):
            await admin.create_partitions({topic: 3})


async def test_topic_configs(admin_broker: Any) -> None:
    """DescribeConfigs of a topic and of each broker."""
    topic = unique("configs")
    async with pykaf.open_admin(admin_broker.bootstrap) as admin:
        await admin.create_topic(topic, 1, configs={"cleanup.policy": "compact"})
        configs = await admin.describe_topic_configs([topic])
        # each broker answers for itself, keyed by its id (Tansu 0.6 lists no configs)
        brokers = await admin.describe_broker_configs()
        assert set(brokers) == {b.node_id for b in (await admin.describe_cluster()).brokers}
    assert topic in configs
    entries = configs[topic]
    assert all(isinstance(e, pykaf.ConfigEntry) and e.name == k for k, e in entries.items())
    if admin_broker.name == "tansu":  # Tansu 0.6 answers with what it stores, if anything
        if "cleanup.policy" in entries:
            assert entries["cleanup.policy"].value == "compact"
    else:  # Kafka and the fake list every topic config, the defaults too
        assert entries["cleanup.policy"].value == "compact"
        assert entries["cleanup.policy"].source == "dynamic_topic"
        assert entries["retention.ms"].source != "dynamic_topic"


async def test_records_are_deleted_and_offsets_listed(kafka_or_fake: Any) -> None:
    """DeleteRecords (Tansu 0.6 closes the connection on it, at every version)."""
    topic = unique("trim")
    await trio.to_thread.run_sync(kafka_or_fake.create, topic, 2)
    await produce(kafka_or_fake.bootstrap, topic, 2, 20)
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        low = await admin.delete_records({(topic, 0): 15, (topic, 1): 5})
        assert low == {(topic, 0): 15, (topic, 1): 5}
        starts = await admin.list_offsets({(topic, 0): pykaf.OLDEST, (topic, 1): pykaf.OLDEST})
        assert starts == {(topic, 0): 15, (topic, 1): 5}
        with pytest.raises(errors.KafkaError):
            await admin.delete_records({(topic, 0): 500})  # past the end
        with pytest.raises(errors.ConfigError):
            await admin.list_offsets({(topic, 0): pykaf.NEWEST}, isolation_level="dirty")
    async with pykaf.open_consumer(kafka_or_fake.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        first = await pc.next_batch()
        assert first[0].offset == 15


async def test_group_offsets_listed_altered_and_lag(admin_broker: Any) -> None:
    topic, group = unique("lagging"), unique("g")
    await trio.to_thread.run_sync(admin_broker.create, topic, 2)
    await produce(admin_broker.bootstrap, topic, 2, 10)
    async with pykaf.open_admin(admin_broker.bootstrap) as admin:
        # a group with no members takes offsets from anyone (an admin's reset)
        await admin.alter_group_offsets(
            group, {(topic, 0): 4, (topic, 1): pykaf.OffsetAndMetadata(10, "all done")}
        )
        # Tansu 0.6 keeps no commit metadata
        note = None if admin_broker.name == "tansu" else "all done"
        offsets = await admin.list_group_offsets(group)
        assert offsets == {
            (topic, 0): pykaf.OffsetAndMetadata(4),
            (topic, 1): pykaf.OffsetAndMetadata(10, note),
        }
        assert await admin.list_group_offsets(group, [(topic, 1)]) == {
            (topic, 1): pykaf.OffsetAndMetadata(10, note)
        }
        lag = await admin.group_lag(group)
        assert [(x.partition, x.committed, x.end, x.lag) for x in lag] == [
            (0, 4, 10, 6),
            (1, 10, 10, 0),
        ]
        listed = {g.group_id: g for g in await admin.list_groups()}
        assert group in listed
        if admin_broker.name == "kafka":  # ListGroups v4+: the state (Tansu: v2 at most)
            assert listed[group].state == "Empty"


async def test_a_live_group_is_described_then_deleted(admin_broker: Any) -> None:
    topic, group = unique("live"), unique("g")
    await trio.to_thread.run_sync(admin_broker.create, topic, 2)
    fast = {"heartbeat_interval": 0.2, "session_timeout": 6.0, "rebalance_timeout": 4.0}

    class Idle:
        async def setup(self, session: Any) -> None:
            pass

        async def consume_claim(self, session: Any, claim: Any) -> None:
            async for _ in claim:
                pass

        async def cleanup(self, session: Any) -> None:
            pass

    async with pykaf.open_admin(admin_broker.bootstrap) as admin:
        async with (
            pykaf.open_consumer_group(
                admin_broker.bootstrap, group, [topic], client_id="member-one", **fast
            ) as member,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(member.consume, Idle())

            async def assigned() -> bool:
                return bool(member.assignment().get(topic))

            await wait_for(assigned)
            description = await admin.describe_group(group)
            assert description.state == "Stable"
            assert description.protocol_type == "consumer"
            [one] = description.members
            assert one.member_id
            if admin_broker.name != "tansu":  # Tansu 0.6 reports no client id or assignment
                assert one.client_id == "member-one"
                assert one.assignment == {topic: [0, 1]}
            if admin_broker.name != "tansu":  # Tansu 0.6 deletes a group with members
                with pytest.raises(errors.GroupNotEmptyError):
                    await admin.delete_group(group)
            nursery.cancel_scope.cancel()
        await admin.delete_group(group)
        assert group not in {g.group_id for g in await admin.list_groups()}
        if admin_broker.name != "tansu":  # Tansu 0.6 deletes unknown groups without a word
            with pytest.raises(errors.GroupIdNotFoundError):
                await admin.delete_group(group)


async def test_group_offsets_are_deleted(kafka_or_fake: Any) -> None:
    """OffsetDelete (Tansu does not have it)."""
    topic, group = unique("forget"), unique("g")
    await trio.to_thread.run_sync(kafka_or_fake.create, topic, 2)
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        await admin.alter_group_offsets(group, {(topic, 0): 1, (topic, 1): 2})
        await admin.delete_group_offsets(group, [(topic, 0)])
        assert await admin.list_group_offsets(group) == {(topic, 1): pykaf.OffsetAndMetadata(2)}
        many = [unique("a"), unique("b")]
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.delete_groups(many)
        assert set(failed.value.failures) == set(many)


def test_the_sync_admin_from_a_thread(real_broker: Any) -> None:
    import pykaf.sync

    topic = unique("sync-admin")
    with pykaf.sync.Admin(real_broker.bootstrap) as admin:
        admin.create_topic(topic, 2)
        assert len(admin.describe_topic(topic).partitions) == 2
        assert topic in admin.list_topics()
        with pytest.raises(errors.TopicExistsError):
            admin.create_topic(topic, 2)
        admin.alter_group_offsets(unique("g"), {(topic, 0): 0})
        assert admin.describe_cluster().brokers
        admin.delete_topic(topic)
        assert topic not in admin.list_topics()
    assert admin.closed
    with pytest.raises(errors.ClosedError):
        admin.list_topics()


async def test_require_stable_waits_out_a_transaction_holding_the_offsets(
    kafka_or_fake: Any,
) -> None:
    topic, group = unique("stable"), unique("g")
    await trio.to_thread.run_sync(kafka_or_fake.create, topic, 1)
    async with (
        pykaf.open_admin(kafka_or_fake.bootstrap) as admin,
        pykaf.open_producer(kafka_or_fake.bootstrap, transactional_id=unique("t")) as txn,
    ):
        await admin.alter_group_offsets(group, {(topic, 0): 3})
        txn.begin_transaction()
        await txn.send(topic, b"x", partition=0)
        await txn.send_offsets_to_transaction({(topic, 0): 7}, group)
        # Without require_stable the offset before the transaction is answered at once.
        assert await admin.list_group_offsets(group) == {(topic, 0): pykaf.OffsetAndMetadata(3)}
        committed_at: list[float] = []

        async def commit_later() -> None:
            await trio.sleep(1.0)
            committed_at.append(trio.current_time())
            await txn.commit_transaction()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit_later)
            offsets = await admin.list_group_offsets(group, [(topic, 0)], require_stable=True)
            answered_at = trio.current_time()
        assert offsets == {(topic, 0): pykaf.OffsetAndMetadata(7)}
        assert committed_at and answered_at >= committed_at[0]


async def test_a_coordinator_without_kip848_groups_describes_classic_ones() -> None:
    """Kafka 3.8 and 3.9 advertise ConsumerGroupDescribe (KIP-848's early access) and answer
    it UNSUPPORTED_VERSION per group while the consumer protocol is off: described classic."""

    async def as_kafka_3_8(ctx: Any, req: Any, version: int) -> Any:
        D = P.ConsumerGroupDescribeResponse
        unsupported = errors.UnsupportedVersionError.code
        return D(
            groups=[D.DescribedGroup(group_id=g, error_code=unsupported) for g in req.group_ids]
        )

    async with open_fake_cluster(brokers=1) as fake:
        fake.create_topic("t", 1)
        key = P.ConsumerGroupDescribeRequest.API_KEY
        fake.apis[key] = replace(fake.apis[key], handler=as_kafka_3_8)
        async with pykaf.open_admin(fake.bootstrap) as admin:
            await admin.alter_group_offsets("classic-g", {("t", 0): 3})
            described = await admin.describe_group("classic-g")
    assert described.group_protocol == "classic" and described.members == []
