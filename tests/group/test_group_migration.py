"""Online migration between the classic and the consumer group protocols (KIP-848).

Kafka 4 (``group.consumer.migration.policy=bidirectional``, the default) lets
the two kinds of member share a group: a consumer-protocol member joining a
classic group of consumers converts it to a consumer group, whose coordinator
then assigns for the classic members too and hands their partitions out
through JoinGroup/SyncGroup; when the last consumer-protocol member leaves,
the group goes back to being a classic one and rebalances the classic way.
Committed offsets stay the group's through every conversion. The fake
cluster must do the same.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from group_support import FAST, Overlap, Recorder, create, every, owned, produce, wait_for

import pykaf
from pykaf._group.heartbeat_member import HeartbeatMember

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

#: a classic member's options, quick to notice a rebalance
CLASSIC = {
    "heartbeat_interval": 0.5,
    "session_timeout": 10.0,
    "rebalance_timeout": 10.0,
    "auto_commit_interval": 0.2,
    "fetch_max_wait": 0.05,
    "retry_backoff": 0.05,
}


@pytest.fixture(params=["kafka", "fake"])
def cg_broker(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka 4.3, and pykaf's fake cluster (which must behave the same)."""
    return bc.broker_from(request, request.param)


async def protocol_of(bootstrap: str, group_id: str) -> tuple[str, list[str]]:
    """The group's protocol ("classic" or "consumer") and its members' ids, sorted."""
    async with pykaf.open_admin(bootstrap) as admin:
        d = await admin.describe_group(group_id)
    return d.group_protocol, sorted(m.member_id for m in d.members)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
async def test_a_classic_group_upgrades_downgrades_and_upgrades_again(
    cg_broker: Any, assignor: str
) -> None:
    """Two classic members; a consumer-protocol member joins (the group converts),
    leaves (it converts back), joins again, and the classic members leave (a
    consumer group of one). Every record is consumed, no partition by two members
    at once, and each member resumes at the offsets the others committed."""
    broker = cg_broker
    topic, group_id = unique("migrate"), unique("g")
    partitions = 4
    await create(broker, topic, partitions)
    await produce(broker.bootstrap, topic, partitions, 20)
    overlap = Overlap()
    a, b = Recorder("a", overlap), Recorder("b", overlap)
    modern, again = Recorder("modern", overlap), Recorder("again", overlap)
    everyone = [a, b, modern, again]
    classic = {**CLASSIC, "assignors": [assignor]}

    def consumed() -> set[tuple[str, int, int]]:
        return set().union(*(set(r.seen) for r in everyone))

    def covering(*groups: pykaf.ConsumerGroup) -> bool:
        parts = [p for g in groups for p in g.assignment().get(topic, [])]
        return sorted(parts) == list(range(partitions)) and all(
            g.assignment().get(topic) for g in groups
        )

    async with trio.open_nursery() as nursery:
        ga = await nursery.start(member, broker.bootstrap, group_id, topic, a, classic)
        gb = await nursery.start(member, broker.bootstrap, group_id, topic, b, classic)
        await wait_for(lambda: covering(ga, gb), what=lambda: (ga.assignment(), gb.assignment()))
        await wait_for(lambda: len(consumed()) == 80)
        assert (await protocol_of(broker.bootstrap, group_id))[0] == "classic"

        # A consumer-protocol member joins: the group becomes a consumer group
        # whose coordinator assigns for all three.
        stop_modern = trio.Event()
        gm = await nursery.start(
            member, broker.bootstrap, group_id, topic, modern, FAST, stop_modern
        )
        assert isinstance(gm, HeartbeatMember)
        await wait_for(
            lambda: covering(ga, gb, gm), what=lambda: (ga.assignment(), gb.assignment())
        )
        kind, members = await protocol_of(broker.bootstrap, group_id)
        assert kind == "consumer"
        assert members == sorted([ga.member_id, gb.member_id, gm.member_id])
        await produce(broker.bootstrap, topic, partitions, 10, start=20)
        await wait_for(lambda: len(consumed()) == 120)
        # the new member resumed its partitions at the classic members' commits
        assert modern.seen and min(o for _, _, o in modern.seen) >= 20

        # The last consumer-protocol member leaves: a classic group again.
        stop_modern.set()
        await wait_for(lambda: gm.state.name == "UNSUBSCRIBED")
        await wait_for(lambda: covering(ga, gb), what=lambda: (ga.assignment(), gb.assignment()))
        assert (await protocol_of(broker.bootstrap, group_id))[0] == "classic"
        await produce(broker.bootstrap, topic, partitions, 10, start=30)
        await wait_for(lambda: len(consumed()) == 160)

        # A consumer-protocol member again; then the classic members leave.
        gn = await nursery.start(member, broker.bootstrap, group_id, topic, again, FAST)
        await wait_for(lambda: covering(ga, gb, gn))
        await ga.aclose()
        await gb.aclose()
        await wait_for(lambda: owned(gn, topic=topic) == list(range(partitions)))
        kind, members = await protocol_of(broker.bootstrap, group_id)
        assert (kind, members) == ("consumer", [gn.member_id])
        await produce(broker.bootstrap, topic, partitions, 10, start=40)
        await wait_for(lambda: len(consumed()) == 200)
        nursery.cancel_scope.cancel()
    assert consumed() == every(topic, partitions, 50)
    assert overlap.overlaps == []
    # At least once: a record is read again only when its partition moved
    # before its mark was committed.
    total = sum(len(r.seen) for r in everyone)
    assert total < 1.5 * len(consumed())


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
async def test_a_classic_member_joins_a_consumer_group(cg_broker: Any, assignor: str) -> None:
    """A classic pykaf member (JoinGroup) joins a group whose other member speaks the
    consumer protocol: the coordinator splits the partitions (handing the classic
    member's out through SyncGroup, eager or cooperative alike), and takes them
    back when it leaves."""
    broker = cg_broker
    topic, group_id = unique("kip848-mixed"), unique("g")
    await create(broker, topic, 4)
    await produce(broker.bootstrap, topic, 4, 25)
    overlap = Overlap()
    modern, classic = Recorder("modern", overlap), Recorder("classic", overlap)
    async with (
        pykaf.open_consumer_group(
            broker.bootstrap, group_id, [topic], **FAST, client_rack="rack-a"
        ) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, modern)
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1, 2, 3])
        async with pykaf.open_consumer_group(
            broker.bootstrap,
            group_id,
            [topic],
            **CLASSIC,
            assignors=[assignor],
            client_rack="rack-b",  # (in its subscription, v3)
        ) as g2:
            assert not isinstance(g2, HeartbeatMember)
            nursery.start_soon(g2.consume, classic)

            def split() -> bool:
                a, b = owned(g1, topic=topic), owned(g2, topic=topic)
                return len(a) == 2 and len(b) == 2 and sorted(a + b) == [0, 1, 2, 3]

            await wait_for(split, what=lambda: (g1.assignment(), g2.assignment()))
            async with pykaf.open_admin(broker.bootstrap) as admin:
                d = await admin.describe_group(group_id)
            racks = {m.member_id: m.rack for m in d.members}
            assert racks == {g1.member_id: "rack-a", g2.member_id: "rack-b"}
            await produce(broker.bootstrap, topic, 4, 5, start=25)
            await wait_for(lambda: len(set(modern.seen) | set(classic.seen)) == 120)
            # the classic member started where the other had committed
            assert classic.seen and min(o for _, _, o in classic.seen) >= 25
        # the classic member left: the consumer-protocol member takes everything back
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1, 2, 3])
        assert (await protocol_of(broker.bootstrap, group_id)) == ("consumer", [g1.member_id])
        nursery.cancel_scope.cancel()
    assert overlap.overlaps == []
    assert set(modern.seen) | set(classic.seen) == every(topic, 4, 30)


async def member(
    bootstrap: str,
    group_id: str,
    topic: str,
    recorder: Recorder,
    options: dict[str, Any],
    stop: trio.Event | None = None,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """A member consuming with ``recorder`` until cancelled, ``stop`` or its aclose()."""
    async with pykaf.open_consumer_group(bootstrap, group_id, [topic], **options) as g:
        task_status.started(g)
        async with trio.open_nursery() as inner:
            inner.start_soon(g.consume, recorder)
            if stop is not None:
                await stop.wait()
                inner.cancel_scope.cancel()
