"""Consumer groups on one Kafka release: classic groups with every assignor, static
membership, and KIP-848 groups where the release has them (refused at open elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from compat_support import lacks, new_topic, unique

import pykaf
from pykaf.protocol.versions import BrokerFeatureError
from pykaf.testing import KafkaCluster

PARTITIONS, PER = 4, 10
FAST: dict[str, Any] = {
    "session_timeout": 6.0,
    "heartbeat_interval": 0.5,
    "rebalance_timeout": 10.0,
    "auto_commit_interval": 0.2,
    "fetch_max_wait": 0.05,
    "retry_backoff": 0.05,
}


class Seen:
    """A handler recording and marking every record of its claims."""

    def __init__(self) -> None:
        self.records: set[tuple[int, int]] = set()

    async def setup(self, session: pykaf.GroupSession) -> None:
        pass

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        async for record in claim:
            self.records.add((record.partition, record.offset))
            session.mark_message(record)

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        pass


async def wait_for(cond: Callable[[], bool], what: Callable[[], Any], timeout: float = 40) -> None:
    with trio.move_on_after(timeout):
        while not cond():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"not within {timeout} s: {what()}")


async def filled_topic(kafka: KafkaCluster) -> str:
    topic = await new_topic(kafka, "grp", PARTITIONS)
    async with pykaf.open_producer(kafka.bootstrap) as producer:
        for p in range(PARTITIONS):
            await producer.send_batch(topic, [b"%d-%d" % (p, i) for i in range(PER)], partition=p)
    return topic


def owned(groups: list[pykaf.ConsumerGroup], topic: str) -> list[list[int]]:
    return [g.assignment().get(topic, []) for g in groups]


@pytest.mark.compat("KIP-429", "Classic groups: range, roundrobin, sticky, cooperative-sticky")
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
async def test_classic_group_with_each_assignor(kafka: KafkaCluster, assignor: str) -> None:
    topic, group_id = await filled_topic(kafka), unique("g")
    one, two = Seen(), Seen()
    every = {(p, o) for p in range(PARTITIONS) for o in range(PER)}
    options = {**FAST, "assignors": [assignor]}
    async with (
        pykaf.open_consumer_group(kafka.bootstrap, group_id, [topic], **options) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, one)
        await wait_for(lambda: owned([g1], topic) == [list(range(PARTITIONS))], lambda: one)
        async with pykaf.open_consumer_group(kafka.bootstrap, group_id, [topic], **options) as g2:
            nursery.start_soon(g2.consume, two)

            def split() -> bool:
                a, b = owned([g1, g2], topic)
                return len(a) == len(b) == PARTITIONS // 2 and sorted(a + b) == list(range(4))

            await wait_for(split, lambda: owned([g1, g2], topic))
            assert g1.protocol == g2.protocol == assignor
            await wait_for(lambda: one.records | two.records == every, lambda: len(one.records))
            await g2.commit()
        await g1.commit()
        nursery.cancel_scope.cancel()
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        committed = await admin.list_group_offsets(group_id)
    assert {tp: o.offset for tp, o in committed.items()} == {
        (topic, p): PER for p in range(PARTITIONS)
    }


@pytest.mark.compat("KIP-345", "Static membership")
async def test_static_member_comes_back_without_a_rebalance(kafka: KafkaCluster) -> None:
    topic, group_id = await filled_topic(kafka), unique("static")
    options = {**FAST, "group_instance_id": "instance-a"}
    generations = []
    for _ in range(2):
        seen = Seen()
        async with (
            pykaf.open_consumer_group(kafka.bootstrap, group_id, [topic], **options) as group,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(group.consume, seen)
            await wait_for(lambda: owned([group], topic) == [list(range(4))], lambda: group)
            generations.append(group.generation_id)
            async with pykaf.open_admin(kafka.bootstrap) as admin:
                described = await admin.describe_group(group_id)
            assert [m.group_instance_id for m in described.members] == ["instance-a"]
            nursery.cancel_scope.cancel()
    # the static member sent no LeaveGroup: the coordinator kept its place
    # and handed its assignment back, in the same generation
    assert generations[1] == generations[0]


@pytest.mark.compat("KIP-848", "Consumer groups (group_protocol='consumer')")
async def test_consumer_protocol_group_or_refused_at_open(
    kafka: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic, group_id = await filled_topic(kafka), unique("kip848")
    options = {"group_protocol": "consumer", "auto_commit_interval": 0.2, "fetch_max_wait": 0.05}
    if kafka.release.line < (4, 0):
        with pytest.raises(BrokerFeatureError) as info:
            async with pykaf.open_consumer_group(kafka.bootstrap, group_id, [topic], **options):
                pytest.fail("a consumer-protocol group opened on Kafka 3.x")
        assert f"Kafka {kafka.release.line[0]}.{kafka.release.line[1]}" in str(info.value)
        assert "Kafka 4.0 or newer" in str(info.value)
        lacks(request, "BrokerFeatureError at open (needs 4.0)")
        return
    seen = Seen()
    every = {(p, o) for p in range(PARTITIONS) for o in range(PER)}
    async with (
        pykaf.open_consumer_group(kafka.bootstrap, group_id, [topic], **options) as group,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(group.consume, seen)
        await wait_for(lambda: seen.records == every, lambda: len(seen.records))
        nursery.cancel_scope.cancel()
