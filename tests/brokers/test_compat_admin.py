"""The admin client on one Kafka release: topics, configs, groups, ACLs."""

from __future__ import annotations

import pytest
import trio
from compat_support import new_topic, unique

import pykaf
from pykaf import errors
from pykaf.testing import KafkaCluster


@pytest.mark.compat("KIP-4", "Admin: topics and partitions")
async def test_topics_are_created_grown_described_and_deleted(kafka: KafkaCluster) -> None:
    name = unique("adm-topic")
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        await admin.create_topic(name, 2, 1, {"retention.ms": "3600000"})
        with pytest.raises(errors.TopicExistsError):
            await admin.create_topic(name, 2, 1)
        await admin.create_partitions({name: 3})
        with trio.fail_after(30):
            while len((await admin.describe_topic(name)).partitions) != 3:
                await trio.sleep(0.1)
        assert name in await admin.list_topics()
        cluster = await admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [1]
        await admin.delete_topic(name)
        with trio.fail_after(30):
            while name in await admin.list_topics():
                await trio.sleep(0.1)


@pytest.mark.compat("KIP-339", "Admin: configs (described, changed incrementally)")
async def test_topic_configs_are_described_and_changed(kafka: KafkaCluster) -> None:
    topic = await new_topic(kafka, "adm-cfg", 1, **{"retention.ms": "3600000"})
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        before = (await admin.describe_topic_configs([topic]))[topic]
        assert before["retention.ms"].value == "3600000"
        assert before["cleanup.policy"].value == "delete"
        await admin.alter_topic_configs(
            {topic: {"retention.ms": None, "max.message.bytes": "2000000"}}
        )
        # a describe goes to any broker, which sees the change once its
        # metadata arrives: read until it has, then check all of it
        for _ in range(200):
            after = (await admin.describe_topic_configs([topic]))[topic]
            if after["max.message.bytes"].value == "2000000":
                break
            await trio.sleep(0.05)
        assert after["max.message.bytes"].value == "2000000"
        assert after["retention.ms"].value == str(7 * 24 * 3600 * 1000)  # back to the default
        brokers = await admin.describe_broker_configs([1], keys=["num.io.threads"])
        assert brokers[1]["num.io.threads"].value == "4"


@pytest.mark.compat("KIP-229", "Admin: groups and their offsets")
async def test_groups_are_listed_described_and_deleted(kafka: KafkaCluster) -> None:
    topic, group_id = await new_topic(kafka, "adm-grp", 2), unique("adm-g")
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        await admin.alter_group_offsets(group_id, {(topic, 0): 5, (topic, 1): 7})
        listed = {g.group_id: g for g in await admin.list_groups()}
        assert group_id in listed
        described = await admin.describe_group(group_id)
        assert described.members == [] and described.state.lower() == "empty"
        offsets = await admin.list_group_offsets(group_id)
        assert {tp: o.offset for tp, o in offsets.items()} == {(topic, 0): 5, (topic, 1): 7}
        await admin.delete_groups([group_id])
        assert group_id not in {g.group_id for g in await admin.list_groups()}


@pytest.mark.compat("KIP-140", "Admin: ACLs")
async def test_acls_are_created_described_and_deleted(kafka: KafkaCluster) -> None:
    u = unique("acl")
    principal = f"User:alice-{u}"
    reads = pykaf.AclBinding(pykaf.ResourceType.TOPIC, f"t-{u}", principal, pykaf.AclOperation.READ)
    group = pykaf.AclBinding(pykaf.ResourceType.GROUP, f"g-{u}", principal, pykaf.AclOperation.READ)
    mine = pykaf.AclFilter(principal=principal)
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        await admin.create_acls([reads, group])
        with trio.fail_after(20):  # Kafka applies new bindings a moment after answering
            while set(await admin.describe_acls(mine)) != {reads, group}:
                await trio.sleep(0.05)
        deleted = await admin.delete_acls([mine])
        assert set(deleted) == {reads, group}
        with trio.fail_after(20):
            while await admin.describe_acls(mine):
                await trio.sleep(0.05)
