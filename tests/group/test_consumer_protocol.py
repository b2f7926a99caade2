"""KIP-848 consumer groups (``group_protocol="consumer"``) on Apache Kafka 4.3.

The broker assigns; members reconcile. These tests check what a member must
get right: one member gets everything; members joining and leaving move
partitions with no partition consumed by two members at once; commits carry
the member epoch and a restart resumes from them; regular-expression
subscriptions; static members keep their assignment across a restart; a
fenced or forgotten member drops its claims uncommitted and joins again;
every record is consumed at least once while members come and go; and the
broker's refusals (a bad regex, an unknown assignor) are typed errors.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio
from group_support import FAST, Overlap, Recorder, create, every, owned, produce, wait_for

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf import protocol as P
from pykaf._group.heartbeat_member import HeartbeatMember
from pykaf._group.heartbeat_states import HeartbeatState
from pykaf.testing._fake import open_fake_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker


@pytest.fixture(params=["kafka", "fake"])
def cg_broker(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka 4.3, and pykaf's fake cluster (which must behave the same)."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["kafka", "fake", "mock"])
def any_cg_broker(request: pytest.FixtureRequest) -> Any:
    """Kafka, the fake cluster, and librdkafka's mock, which has KIP-848 groups too.

    The other tests leave the mock out: its OffsetFetch of a whole group (the
    admin's) leaves partitions out; it does not fence a heartbeat whose epoch is
    ahead of the member's; it has neither ConsumerGroupDescribe nor
    DescribeGroups; a regular expression its library cannot compile crashes the
    process.
    """
    return bc.broker_from(request, request.param)


# ------------------------------------------------------------------ one member


async def test_one_member_gets_every_partition_and_commits_with_its_epoch(cg_broker: Any) -> None:
    broker = cg_broker
    topic, group_id = unique("kip848"), unique("g")
    await create(broker, topic, 4)
    await produce(broker.bootstrap, topic, 4, 20)
    rec = Recorder()
    async with (
        pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as group,
        trio.open_nursery() as nursery,
    ):
        assert isinstance(group, HeartbeatMember)
        nursery.start_soon(group.consume, rec)
        await wait_for(lambda: len(rec.seen) == 80)
        assert owned(group, topic=topic) == [0, 1, 2, 3]
        await wait_for(lambda: group.state is HeartbeatState.STABLE)
        assert group.member_epoch > 0 and group.generation_id == group.member_epoch
        await group.commit()  # OffsetCommit v9 with the member epoch
        assert {group.offsets.committed(topic, p) for p in range(4)} == {20}
        stats = group.statistics()
        assert stats.member_id == group.member_id and stats.generation_id == group.member_epoch
        nursery.cancel_scope.cancel()
    assert set(rec.seen) == every(topic, 4, 20)
    # cancelled, not closed: like the classic group, no cleanup for the last session
    assert (rec.setups, rec.cleanups) == (1, 0)
    # The member left (epoch -1): the group is empty now.
    async with pykaf.open_admin(broker.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group_id)
    assert {offsets[(topic, p)].offset for p in range(4)} == {20}


async def test_closing_while_consume_runs_elsewhere_commits_then_leaves(cg_broker: Any) -> None:
    # consume() runs in the caller's nursery; leaving the group's block must wait
    # for it to end its claims, commit the marks and leave before the client
    # closes (it once closed at once: no commit, and no leave, so the broker
    # held the partitions until the member's session timed out)
    broker = cg_broker
    topic, group_id = unique("kip848-close"), unique("g")
    await create(broker, topic, 2)
    await produce(broker.bootstrap, topic, 2, 10)
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        async with pykaf.open_consumer_group(
            broker.bootstrap, group_id, [topic], **{**FAST, "auto_commit_interval": 60}
        ) as group:
            nursery.start_soon(group.consume, rec)
            await wait_for(lambda: len(rec.seen) == 20)
        assert (rec.setups, rec.cleanups) == (1, 1)
        async with pykaf.open_admin(broker.bootstrap) as admin:
            offsets = await admin.list_group_offsets(group_id)
            assert {offsets[(topic, p)].offset for p in range(2)} == {10}
            assert (await admin.describe_group(group_id)).members == []  # it left


async def test_async_for_and_restart_resume_from_the_commit(any_cg_broker: Any) -> None:
    broker = any_cg_broker
    topic, group_id = unique("kip848-resume"), unique("g")
    await create(broker, topic, 3)
    await produce(broker.bootstrap, topic, 3, 10)
    got: list[tuple[int, int]] = []
    async with pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as group:
        with trio.fail_after(40):
            async for record in group:
                got.append((record.partition, record.offset))
                if len(got) == 30:
                    break
    assert sorted(got) == [(p, o) for p in range(3) for o in range(10)]
    # Leaving committed every record handed out; a new member starts after them.
    await produce(broker.bootstrap, topic, 3, 5, start=10)
    again: list[tuple[int, int]] = []
    async with pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as group:
        with trio.fail_after(40):
            async for record in group:
                again.append((record.partition, record.offset))
                if len(again) == 15:
                    break
    assert sorted(again) == [(p, o) for p in range(3) for o in range(10, 15)]


# ------------------------------------------------------------------ members come and go


async def test_a_second_member_takes_half_with_no_partition_consumed_twice_at_once(
    any_cg_broker: Any,
) -> None:
    broker = any_cg_broker
    topic, group_id = unique("kip848-two"), unique("g")
    await create(broker, topic, 6)
    await produce(broker.bootstrap, topic, 6, 30)
    overlap = Overlap()
    one, two = Recorder("one", overlap), Recorder("two", overlap)
    async with (
        pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, one)
        await wait_for(lambda: owned(g1, topic=topic) == list(range(6)))
        await wait_for(lambda: len(one.seen) == 180)
        async with pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as g2:
            nursery.start_soon(g2.consume, two)

            def split() -> bool:
                a, b = owned(g1, topic=topic), owned(g2, topic=topic)
                return len(a) == 3 and len(b) == 3 and sorted(a + b) == list(range(6))

            await wait_for(split, what=lambda: (g1.assignment(), g2.assignment()))
            moved = set(g2.assignment()[topic])
            # (a claim is the group's before its consume_claim task has started)
            await wait_for(lambda: all(two.claims[(topic, p)] for p in moved))
            # The partitions that moved were revoked from the first member,
            # their marks committed, before the second one started them: it
            # starts where the first stopped.
            for p in moved:
                assert one.claims[(topic, p)][-1].revoked
                assert two.claims[(topic, p)][0].initial_offset == 30
            # Partitions that stayed ran on through the rebalance: one claim each.
            for p in set(range(6)) - moved:
                assert len(one.claims[(topic, p)]) == 1
                assert not one.claims[(topic, p)][0].revoked
            await produce(broker.bootstrap, topic, 6, 10, start=30)
            await wait_for(lambda: len(set(one.seen) | set(two.seen)) == 240)
            assert {p for _, p, o in two.seen} == moved
            assert not [s for s in two.seen if s[2] < 30]  # nothing read twice
        # The second member left: the first takes everything back.
        await wait_for(lambda: owned(g1, topic=topic) == list(range(6)))
        await produce(broker.bootstrap, topic, 6, 5, start=40)
        await wait_for(lambda: len(set(one.seen) | set(two.seen)) == 270)
        nursery.cancel_scope.cancel()
    assert overlap.overlaps == []
    assert set(one.seen) | set(two.seen) == every(topic, 6, 45)
    # a session per applied assignment: each change cleaned up the one before
    assert one.setups >= 3 and one.cleanups == one.setups - 1
    assert two.setups >= 1 and two.cleanups == two.setups


async def test_three_members_come_and_go_while_records_are_produced(any_cg_broker: Any) -> None:
    """Every record is consumed at least once; no partition is consumed by two at once."""
    broker = any_cg_broker
    topic, group_id = unique("kip848-churn"), unique("g")
    partitions, rounds, per = 12, 12, 10
    await create(broker, topic, partitions)
    overlap = Overlap()
    seen: set[tuple[str, int, int]] = set()
    recorders: list[Recorder] = []
    produced = 0

    async def producer() -> None:
        nonlocal produced
        for r in range(rounds):
            await produce(broker.bootstrap, topic, partitions, per, start=r * per)
            produced += 1
            await trio.sleep(0.5)

    async def member(name: str, lifetime: float) -> None:
        rec = Recorder(name, overlap)
        recorders.append(rec)
        async with pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as g:
            with trio.move_on_after(lifetime):
                await g.consume(rec)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        nursery.start_soon(member, "a", 1000)  # stays to the end
        await trio.sleep(1)
        nursery.start_soon(member, "b", 4)
        nursery.start_soon(member, "c", 7)
        await trio.sleep(5)
        nursery.start_soon(member, "d", 1000)
        await wait_for(lambda: produced == rounds, timeout=60)

        def consumed() -> int:
            seen.clear()
            for rec in recorders:
                seen.update(rec.seen)
            return len(seen)

        await wait_for(lambda: consumed() == partitions * rounds * per, timeout=60)
        nursery.cancel_scope.cancel()
    assert seen == every(topic, partitions, rounds * per)
    assert overlap.overlaps == []
    # Duplicates come only from work not yet committed when a partition moved.
    total = sum(len(r.seen) for r in recorders)
    assert total < 2 * len(seen)


# ------------------------------------------------------------------ subscriptions


async def test_a_regex_subscription_gets_the_matching_topics(any_cg_broker: Any) -> None:
    broker = any_cg_broker
    prefix = unique("kip848re")
    a, b, other = f"{prefix}-a", f"{prefix}-b", unique("kip848other")
    for t in (a, b, other):
        await create(broker, t, 2)
    await produce(broker.bootstrap, other, 2, 3)
    await produce(broker.bootstrap, a, 2, 4)
    await produce(broker.bootstrap, b, 2, 5)
    rec = Recorder()
    pattern = re.compile(re.escape(prefix) + "-.*")
    async with (
        pykaf.open_consumer_group(broker.bootstrap, unique("g"), pattern, **FAST) as group,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(group.consume, rec)
        await wait_for(lambda: len(rec.seen) == 18, what=lambda: group.assignment())
        assert group.assignment() == {a: [0, 1], b: [0, 1]}
        nursery.cancel_scope.cancel()
    assert {t for t, _, _ in rec.seen} == {a, b}


async def test_a_regex_subscription_needs_the_consumer_protocol(kafka_broker: Any) -> None:
    with pytest.raises(errors.ConfigError, match="group_protocol"):
        async with pykaf.open_consumer_group(
            kafka_broker.bootstrap, unique("g"), re.compile("x.*")
        ):
            pass


async def test_the_brokers_refusals_are_typed_errors(cg_broker: Any) -> None:
    broker = cg_broker
    topic = unique("kip848-bad")
    await create(broker, topic, 1)
    with trio.fail_after(30):
        async with pykaf.open_consumer_group(
            # a lookahead: Python's re has it, RE2/J (the broker's syntax) does not
            broker.bootstrap,
            unique("g"),
            re.compile("(?=x).*"),
            **FAST,
        ) as group:
            with pytest.raises(errors.InvalidRegularExpressionError):
                await group.consume(Recorder())
        async with pykaf.open_consumer_group(
            broker.bootstrap, unique("g"), [topic], **FAST, group_remote_assignor="no-such"
        ) as group:
            with pytest.raises(errors.UnsupportedAssignorError):
                await group.consume(Recorder())


# ------------------------------------------------------------------ static members


async def test_a_static_member_restarting_keeps_its_assignment(any_cg_broker: Any) -> None:
    broker = any_cg_broker
    topic, group_id = unique("kip848-static"), unique("g")
    await create(broker, topic, 4)
    await produce(broker.bootstrap, topic, 4, 5)
    cfg = {**FAST}
    one = Recorder()
    async with (
        pykaf.open_consumer_group(
            broker.bootstrap, group_id, [topic], **cfg, group_instance_id="one"
        ) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, one)
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1, 2, 3])
        two = Recorder()
        async with (
            pykaf.open_consumer_group(
                broker.bootstrap, group_id, [topic], **cfg, group_instance_id="two"
            ) as g2,
            trio.open_nursery() as inner,
        ):
            inner.start_soon(g2.consume, two)
            await wait_for(lambda: len(owned(g2, topic=topic)) == 2)
            first = owned(g2, topic=topic)
            kept = owned(g1, topic=topic)
            inner.cancel_scope.cancel()
        # "two" left with epoch -2: the coordinator keeps its partitions for it.
        await trio.sleep(2)
        assert owned(g1, topic=topic) == kept
        again = Recorder()
        async with (
            pykaf.open_consumer_group(
                broker.bootstrap, group_id, [topic], **cfg, group_instance_id="two"
            ) as g2,
            trio.open_nursery() as inner,
        ):
            inner.start_soon(g2.consume, again)
            await wait_for(lambda: owned(g2, topic=topic) == first)
            await trio.sleep(1.5)  # a heartbeat or so: nothing moves
            assert owned(g1, topic=topic) == kept and owned(g2, topic=topic) == first
            inner.cancel_scope.cancel()
        nursery.cancel_scope.cancel()
    # The static member resumed after what it had committed.
    assert not [s for s in again.seen if s[2] < 5]


# ------------------------------------------------------------------ recovery


@pytest.mark.parametrize("how", ["fenced_epoch", "unknown_member"])
async def test_a_fenced_member_drops_its_claims_uncommitted_and_joins_again(
    cg_broker: Any, how: str
) -> None:
    broker = cg_broker
    topic, group_id = unique("kip848-fence"), unique("g")
    await create(broker, topic, 2)
    await produce(broker.bootstrap, topic, 2, 10)

    class Unmarking(Recorder):
        async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
            self.claims[(claim.topic, claim.partition)].append(claim)
            async for record in claim:
                self.seen.append((record.topic, record.partition, record.offset))
                if record.offset < 5:
                    session.mark_message(record)

    rec = Unmarking()
    cfg = {**FAST, "auto_commit": False}
    async with (
        pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **cfg) as group,
        trio.open_nursery() as nursery,
    ):
        assert isinstance(group, HeartbeatMember)
        nursery.start_soon(group.consume, rec)
        await wait_for(lambda: len(rec.seen) == 20)
        first_claims = [c for cs in rec.claims.values() for c in cs]
        old_id = group.member_id
        if how == "fenced_epoch":
            group.member_epoch += 100  # the coordinator answers FENCED_MEMBER_EPOCH
        else:
            group._machine.member_id = "no-such-member"  # ... UNKNOWN_MEMBER_ID
        group._heartbeat_now.set()
        # Its claims end, nothing is committed, and it joins again (epoch 0)
        # and gets its partitions back from the group's (empty) commit.
        await wait_for(lambda: all(c.revoked for c in first_claims))
        await wait_for(lambda: len(rec.seen) == 40 and group.state is HeartbeatState.STABLE)
        assert group.member_epoch > 0
        if how == "fenced_epoch":
            assert group.member_id == old_id  # a member keeps its id for life
        nursery.cancel_scope.cancel()
    assert sorted(rec.seen[20:]) == sorted(rec.seen[:20])  # read again from the start


async def test_a_lost_heartbeat_answer_is_followed_by_the_full_state() -> None:
    """KIP-848: after a heartbeat whose answer never came, the member sends its whole
    state again (the coordinator may have acted on it or not). Here the answer to
    the heartbeat acknowledging a revocation is lost after the coordinator bumped
    the member's epoch: the member sends the previous epoch again with its
    subscription, rebalance timeout and owned partitions, the coordinator accepts
    it, and the member keeps its partitions without being fenced."""
    key = P.ConsumerGroupHeartbeatRequest.API_KEY
    topic, group_id = "lost-answer", "lost-answer-g"
    async with open_fake_cluster(1) as fake:
        fake.create_topic(topic, 4)
        await produce(fake.bootstrap, topic, 4, 10)
        one, two = Recorder("one"), Recorder("two")
        async with (
            pykaf.open_consumer_group(fake.bootstrap, group_id, [topic], **FAST) as g1,
            trio.open_nursery() as nursery,
        ):
            assert isinstance(g1, HeartbeatMember)
            fenced: list[str] = []
            g1_fenced = g1._on_fenced
            g1._on_fenced = lambda why: (fenced.append(why), g1_fenced(why))[1]  # type: ignore[method-assign]
            nursery.start_soon(g1.consume, one)
            await wait_for(lambda: g1.state is HeartbeatState.STABLE and len(one.seen) == 40)
            e1 = g1.member_epoch

            def acknowledgement(req: Any) -> bool:  # member one reporting two partitions
                owned = sum(len(tp.partitions) for tp in req.topic_partitions or [])
                return req.member_id == g1.member_id and req.member_epoch > 0 and owned == 2

            fake.lose_responses(key, match=acknowledgement)
            fake.start_request_tracking()
            async with pykaf.open_consumer_group(fake.bootstrap, group_id, [topic], **FAST) as g2:
                nursery.start_soon(g2.consume, two)
                await wait_for(lambda: len(owned(g2, topic=topic)) == 2)
                await wait_for(lambda: g1.state is HeartbeatState.STABLE and g1.member_epoch > e1)
                kept = owned(g1, topic=topic)
                sent = [
                    r.request
                    for r in fake.requests
                    if r.api_key == key and r.request.member_id == g1.member_id
                ]
                acks = [r for r in sent if acknowledgement(r)]
                # the lost one, and the same state sent again with the same epoch
                assert len(acks) >= 2 and acks[0].member_epoch == acks[1].member_epoch == e1
                again = acks[1]
                assert again.subscribed_topic_names == [topic]
                assert again.rebalance_timeout_ms == int(FAST["rebalance_timeout"] * 1000)
                assert [sorted(tp.partitions) for tp in again.topic_partitions] == [kept]
                assert not fake.lost_answers  # the loss happened
                await produce(fake.bootstrap, topic, 4, 5, start=10)
                await wait_for(lambda: len(set(one.seen) | set(two.seen)) == 60)
            nursery.cancel_scope.cancel()
    assert fenced == []
    # the partitions member one kept ran on through it all: one claim each
    assert all(len(one.claims[(topic, p)]) == 1 for p in kept)


# ------------------------------------------------------------------ the sync facade


async def test_the_sync_facade_on_the_consumer_protocol(cg_broker: Any) -> None:
    broker = cg_broker
    topic, group_id = unique("kip848-sync"), unique("g")
    await create(broker, topic, 2)
    await produce(broker.bootstrap, topic, 2, 10)

    def run() -> list[tuple[int, int]]:
        got = []
        with pykaf.sync.ConsumerGroup(broker.bootstrap, group_id, [topic], **FAST) as group:
            for record in group:
                got.append((record.partition, record.offset))
                if len(got) == 20:
                    break
        return got

    got = await trio.to_thread.run_sync(run)
    assert sorted(got) == [(p, o) for p in range(2) for o in range(10)]
    async with pykaf.open_admin(broker.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group_id)
    assert {offsets[(topic, p)].offset for p in range(2)} == {10}


def test_the_options_are_checked() -> None:
    with pytest.raises(errors.ConfigError, match="group_protocol"):
        pykaf.GroupConfig(group_protocol="modern")
    with pytest.raises(errors.ConfigError, match="group_remote_assignor"):
        pykaf.GroupConfig(group_remote_assignor="")
    with pytest.raises(errors.ConfigError, match="client_rack"):
        pykaf.GroupConfig(client_rack=3)
    assert pykaf.GroupConfig().group_protocol == "classic"


#: an address nothing listens on: the options must be refused before connecting
NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize(
    ("option", "value", "broker_side"),
    [
        ("session_timeout", 10.0, "group.consumer.session.timeout.ms"),
        ("heartbeat_interval", 1.0, "group.consumer.heartbeat.interval.ms"),
        ("assignors", ["range"], "group_remote_assignor"),
        ("partition_watch_interval", 1.0, "coordinator notices"),
    ],
)
async def test_classic_options_set_with_the_consumer_protocol_are_refused(
    option: str, value: Any, broker_side: str
) -> None:
    """As Kafka's Java client refuses session.timeout.ms, heartbeat.interval.ms and
    partition.assignment.strategy with group.protocol=consumer: set explicitly, even
    to the default, they are a ConfigError naming what to set instead."""
    with trio.fail_after(5):
        with pytest.raises(errors.ConfigError, match=f"^{option} cannot be set") as caught:
            async with pykaf.open_consumer_group(
                NOWHERE, "g", ["t"], group_protocol="consumer", **{option: value}
            ):
                pass
        assert broker_side in str(caught.value)
        default = pykaf.GroupConfig.__dataclass_fields__[option].default
        if not callable(default):  # (assignors' default is a tuple: set it as given)
            with pytest.raises(errors.ConfigError, match=option):
                async with pykaf.open_consumer_group(
                    NOWHERE, "g", ["t"], group_protocol="consumer", **{option: default}
                ):
                    pass
    # the sync facade and a shared client refuse them alike
    with pytest.raises(errors.ConfigError, match=f"^{option} cannot be set"):
        pykaf.sync.ConsumerGroup(NOWHERE, "g", ["t"], group_protocol="consumer", **{option: value})


async def test_the_remote_assignor_set_with_the_classic_protocol_is_refused() -> None:
    with trio.fail_after(5), pytest.raises(errors.ConfigError, match="assignors"):
        async with pykaf.open_consumer_group(NOWHERE, "g", ["t"], group_remote_assignor="uniform"):
            pass


async def test_the_options_a_protocol_uses_are_not_refused(kafka_broker: Any) -> None:
    """Defaults are never refused, nor the options both protocols use; classic
    options with the classic protocol and the remote assignor with the consumer one."""
    topic = unique("kip848-opts")
    await create(kafka_broker, topic, 1)
    for options in (
        {**FAST, "group_remote_assignor": "range", "rebalance_timeout": 5.0},
        {"session_timeout": 10.0, "heartbeat_interval": 1.0, "assignors": ["range"]},
        {"group_protocol": "classic", "group_remote_assignor": None},
    ):
        async with pykaf.open_consumer_group(
            kafka_broker.bootstrap, unique("g"), [topic], **options
        ) as group:
            assert group.group_id


# ------------------------------------------------------------------ admin and CLI


async def test_describe_groups_and_the_cli_show_a_consumer_protocol_group(cg_broker: Any) -> None:
    broker = cg_broker
    topic, group_id = unique("kip848-admin"), unique("g")
    await create(broker, topic, 4)
    classic_group = unique("g")
    async with (
        pykaf.open_consumer_group(
            broker.bootstrap, group_id, [topic], **FAST, group_instance_id="i-1"
        ) as group,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(group.consume, Recorder())
        await wait_for(lambda: group.state is HeartbeatState.STABLE)
        async with pykaf.open_admin(broker.bootstrap) as admin:
            d = await admin.describe_group(group_id)
            assert (d.group_protocol, d.protocol_type) == ("consumer", "consumer")
            assert d.state == "Stable"
            assert d.protocol == "uniform"  # Kafka's default server-side assignor
            assert d.group_epoch >= 1 and d.assignment_epoch == d.group_epoch
            [m] = d.members
            assert (m.member_id, m.group_instance_id) == (group.member_id, "i-1")
            assert m.member_epoch == group.member_epoch
            assert m.assignment == m.target_assignment == {topic: [0, 1, 2, 3]}
            assert m.subscribed_topics == [topic] and m.subscribed_topic_regex is None
            # A classic group (and one that does not exist) is still DescribeGroups'.
            assert (await admin.describe_group(classic_group)).state == "Dead"
            assert (await admin.describe_group(classic_group)).group_protocol == "classic"
        epoch = group.member_epoch
        table = await trio.to_thread.run_sync(
            lambda: pykaf_command("groups", "describe", group_id, bootstrap=broker.bootstrap)
        )
        nursery.cancel_scope.cancel()
    lines = table.stdout.splitlines()
    assert lines[0] == f"group {group_id}: Stable (consumer uniform)"
    assert lines[1].startswith("group epoch ")
    assert "target" in lines[2] and "epoch" in lines[2]
    [row] = [line.split() for line in lines[3:]]
    assert row == [group.member_id, "i-1", str(epoch), "pykaf", row[4], *[f"{topic}:0,1,2,3"] * 2]


def pykaf_command(*args: str, bootstrap: str) -> Any:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": bootstrap}
    done = subprocess.run(
        [sys.executable, "-m", "pykaf", *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done


# ------------------------------------------------------------------ transactions


async def test_offsets_committed_by_a_transaction_carry_the_member_epoch(
    kafka_broker: Any,
) -> None:
    """KIP-447 with a consumer-protocol member: TxnOffsetCommit with its member epoch."""
    broker = kafka_broker
    src, dst, group_id = unique("kip848-src"), unique("kip848-dst"), unique("g")
    await create(broker, src, 1)
    await create(broker, dst, 1)
    await produce(broker.bootstrap, src, 1, 10)
    async with (
        pykaf.open_consumer_group(
            broker.bootstrap, group_id, [src], **FAST, auto_commit=False
        ) as group,
        pykaf.open_producer(broker.bootstrap, transactional_id=unique("t")) as txn,
    ):
        seen = []
        with trio.fail_after(40):
            async for record in group:
                seen.append(record)
                if len(seen) == 10:
                    break
        meta = group.group_metadata()
        assert isinstance(group, HeartbeatMember)
        assert meta.generation_id == group.member_epoch > 0 and meta.member_id == group.member_id
        txn.begin_transaction()
        await txn.send(dst, b"done", partition=0)
        await txn.send_offsets_to_transaction({(src, 0): 10}, meta)
        await txn.commit_transaction()
        # an epoch the member does not have is refused by the group coordinator
        stale = pykaf.GroupMetadata(group_id, meta.generation_id + 5, meta.member_id)
        txn.begin_transaction()
        # (Kafka answers TxnOffsetCommit's wrong member epoch with ILLEGAL_GENERATION)
        with pytest.raises(errors.IllegalGenerationError):
            await txn.send_offsets_to_transaction({(src, 0): 3}, stale)
        await txn.abort_transaction()
    async with pykaf.open_admin(broker.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group_id)
    assert offsets[(src, 0)].offset == 10


# ------------------------------------------------------------------ a killed member

_MEMBER_SCRIPT = """
import sys, trio, pykaf

async def main(bootstrap, group, topic):
    async with pykaf.open_consumer_group(
        bootstrap, group, [topic], group_protocol="consumer", auto_commit_interval=0.1,
        fetch_max_wait=0.05,
    ) as member:
        async for record in member:
            print(record.partition, record.offset, flush=True)

trio.run(main, *sys.argv[1:])
"""


async def test_a_killed_member_s_partitions_go_to_the_others_after_its_session(
    cg_broker: Any,
) -> None:
    """A member killed with SIGKILL never leaves: the coordinator drops it after the
    group's session timeout (10 s here) and the survivor resumes at its commits."""
    import os
    import signal
    import subprocess
    import sys

    broker = cg_broker
    topic, group_id = unique("kip848-kill"), unique("g")
    await create(broker, topic, 4)
    await produce(broker.bootstrap, topic, 4, 50)
    survivor = Recorder("survivor")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    async with (
        pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **FAST) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, survivor)
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1, 2, 3])
        victim = await trio.lowlevel.open_process(
            [sys.executable, "-c", _MEMBER_SCRIPT, broker.bootstrap, group_id, topic],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            await wait_for(lambda: len(owned(g1, topic=topic)) == 2, what=g1.assignment)
            taken = set(range(4)) - set(owned(g1, topic=topic))
            await produce(broker.bootstrap, topic, 4, 10, start=50)
            await trio.sleep(1.5)  # the victim reads and commits some of its records
        finally:
            victim.send_signal(signal.SIGKILL)
            await victim.wait()
        assert victim.stdout is not None
        out = b""
        while chunk := await victim.stdout.receive_some(1 << 16):
            out += chunk
        lines = out.decode().split("\n")[:-1]  # whole lines only
        victim_seen = {(topic, int(line.split()[0]), int(line.split()[1])) for line in lines}
        assert {p for _, p, _ in victim_seen} <= taken and victim_seen
        # no leave: its partitions stay its own until the session runs out
        await trio.sleep(2)
        assert set(owned(g1, topic=topic)).isdisjoint(taken)
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1, 2, 3], timeout=30)
        await wait_for(lambda: len(set(survivor.seen) | victim_seen) == 240)
        nursery.cancel_scope.cancel()
    assert set(survivor.seen) | victim_seen == every(topic, 4, 60)
    # the survivor resumed the victim's partitions at its commits, not at their start
    resumed = [survivor.claims[(topic, p)][-1].initial_offset for p in taken]
    assert all(offset > 0 for offset in resumed), resumed


async def test_a_handler_that_keeps_a_revoked_claim_is_cancelled_after_rebalance_timeout(
    cg_broker: Any,
) -> None:
    """The classic group's rule, on the consumer protocol: revocation waits for
    consume_claim up to ``rebalance_timeout``, then cancels it and acknowledges."""
    broker = cg_broker
    topic, group_id = unique("kip848-stall"), unique("g")
    await create(broker, topic, 2)
    cancelled: list[int] = []

    class Stubborn(Recorder):
        async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
            self.claims[(claim.topic, claim.partition)].append(claim)
            try:
                await trio.sleep_forever()  # never looks at the claim ending
            except trio.Cancelled:
                cancelled.append(claim.partition)
                raise

    cfg = {**FAST, "rebalance_timeout": 1.5}
    stubborn = Stubborn()
    async with (
        pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **cfg) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, stubborn)
        await wait_for(lambda: owned(g1, topic=topic) == [0, 1])
        async with pykaf.open_consumer_group(broker.bootstrap, group_id, [topic], **cfg) as g2:
            nursery.start_soon(g2.consume, Recorder())
            await wait_for(lambda: len(owned(g2, topic=topic)) == 1)
            [moved] = owned(g2, topic=topic)
            assert cancelled == [moved] and owned(g1, topic=topic) == [1 - moved]
        nursery.cancel_scope.cancel()
