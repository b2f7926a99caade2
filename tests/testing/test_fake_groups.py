"""The fake cluster's group coordinator: pykaf and confluent-kafka groups on it,
and its error answers to raw requests.

Members split the partitions with no overlap and no gap; leaving, being
expelled after the session timeout and static rejoins behave as on Kafka;
commits persist; the coordinator moving is followed; stale generations,
unknown members and admin requests get Kafka's answers.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._group.assignors import decode_assignment, encode_assignment, encode_subscription
from pykaf.testing._fake import FakeCluster, open_fake_cluster

FAST = {
    "heartbeat_interval": 0.1,
    "session_timeout": 3.0,
    "rebalance_timeout": 3.0,
    "auto_commit_interval": 0.1,
    "fetch_max_wait": 0.05,
    "retry_backoff": 0.05,
}
JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH = 8, 9


@pytest.fixture
async def fake() -> AsyncIterator[FakeCluster]:
    """Three brokers served from the test's own trio loop (confluent-kafka runs in threads)."""
    async with open_fake_cluster(3) as cluster:
        yield cluster
        assert not cluster.handler_errors, cluster.handler_errors


def call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


_counter = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{threading.get_ident() % 1000}"


async def wait_for(
    cond: Callable[[], bool], timeout: float = 30.0, what: str | Callable[[], Any] = ""
) -> None:
    """Wait until ``cond()``; fail naming ``what`` (or what calling it returns)."""
    with trio.move_on_after(timeout):
        while not cond():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"not within {timeout} s: {what() if callable(what) else what or cond}")


class Idle:
    """A handler that reads its claims until they are revoked, calling the hooks given."""

    def __init__(
        self,
        on_claim: Callable[[pykaf.Claim], None] | None = None,
        on_record: Callable[[pykaf.GroupSession, Any], None] | None = None,
    ) -> None:
        self.on_claim, self.on_record = on_claim, on_record

    async def setup(self, session: pykaf.GroupSession) -> None:
        pass

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        pass

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        if self.on_claim is not None:
            self.on_claim(claim)
        async for record in claim:
            if self.on_record is not None:
                self.on_record(session, record)


def parts(group: pykaf.ConsumerGroup, topic: str) -> list[int]:
    return sorted(group.assignment().get(topic, []))


def split(topic: str, n: int, *groups: pykaf.ConsumerGroup) -> Callable[[], bool]:
    """Every member has partitions, none twice, none missing."""

    def check() -> bool:
        owned = [parts(g, topic) for g in groups]
        flat = sorted(p for o in owned for p in o)
        return all(owned) and flat == list(range(n))

    return check


def name_on(fake: FakeCluster, node: int, prefix: str) -> str:
    """A new group name that broker ``node`` coordinates."""
    while True:
        name = unique(prefix)
        if coordinator(fake, name) == node:
            return name


def coordinator(fake: FakeCluster, group_id: str) -> int:
    return int(call(fake.coordinator_for, 0, group_id))


def describe(fake: FakeCluster, group_id: str) -> Any:
    """The coordinator's view of the group (state, members), read on the cluster's loop."""

    def look() -> Any:
        coord = fake.groups
        g = coord.group(group_id)
        if g is None:
            return ("Dead", 0, {})
        return (g.state, g.generation, dict(g.members))

    return call(look)


# ------------------------------------------------------------------ pykaf members


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
async def test_two_then_three_members_split_and_a_leaver_rebalances(
    fake: FakeCluster, assignor: str
) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 6)
    boot = fake.bootstrap
    cfg = {**FAST, "assignors": [assignor]}
    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **cfg) as g1,
        pykaf.open_consumer_group(boot, group_id, [topic], **cfg) as g2,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, Idle())
        nursery.start_soon(g2.consume, Idle())
        await wait_for(split(topic, 6, g1, g2), what=lambda: (parts(g1, topic), parts(g2, topic)))
        async with pykaf.open_consumer_group(boot, group_id, [topic], **cfg) as g3:
            nursery.start_soon(g3.consume, Idle())
            await wait_for(
                split(topic, 6, g1, g2, g3),
                what=lambda: [parts(g, topic) for g in (g1, g2, g3)],
            )
            assert all(len(parts(g, topic)) == 2 for g in (g1, g2, g3))
            state, generation, members = describe(fake, group_id)
            assert (state, len(members)) == ("Stable", 3)
        # The third member left (LeaveGroup): the other two share everything again.
        await wait_for(split(topic, 6, g1, g2), what=lambda: (parts(g1, topic), parts(g2, topic)))
        state, later, members = describe(fake, group_id)
        assert later > generation and len(members) == 2
        nursery.cancel_scope.cancel()
    assert describe(fake, group_id)[0] == "Empty"


async def test_commits_persist_and_a_new_member_resumes_from_them(
    fake: FakeCluster,
) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 2)
    boot = fake.bootstrap
    async with pykaf.open_producer(boot) as producer:
        for p in range(2):
            await producer.send_batch(topic, [b"%d" % i for i in range(10)], partition=p)
    seen: list[tuple[int, int]] = []

    def mark(session: pykaf.GroupSession, record: Any) -> None:
        seen.append((record.partition, record.offset))
        if record.offset < 6:
            session.mark_message(record)

    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **FAST) as g,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g.consume, Idle(on_record=mark))
        await wait_for(lambda: len(seen) == 20)
        nursery.cancel_scope.cancel()
    # The coordinator holds what was marked: the next offset to read, 6.
    stored = call(lambda: {p: fake.groups.committed(group_id, (topic, p)) for p in range(2)})
    assert {p: c.offset for p, c in stored.items() if c is not None} == {0: 6, 1: 6}
    starts: list[int] = []

    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **FAST) as g,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g.consume, Idle(on_claim=lambda c: starts.append(c.initial_offset)))
        await wait_for(lambda: len(starts) == 2)
        nursery.cancel_scope.cancel()
    assert starts == [6, 6]
    # And OffsetFetch (the newest, batched v8 and the oldest with a top-level error) agree.
    async with pykaf.open_client(boot) as client:
        node = coordinator(fake, group_id)
        some_topic = [
            P.OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])
        ]
        req = P.OffsetFetchRequest(
            groups=[
                P.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=None),
                P.OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=name_on(fake, node, "nobody"), topics=some_topic
                ),
                P.OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=name_on(fake, node % 3 + 1, "elsewhere"), topics=some_topic
                ),
            ]
        )
        resp = await client.request(node, req, 8)
        ours, nobody, elsewhere = resp.groups
        assert ours.error_code == 0
        assert [(p.partition_index, p.committed_offset) for p in ours.topics[0].partitions] == [
            (0, 6),
            (1, 6),
        ]
        assert nobody.error_code == 0 and nobody.topics[0].partitions[0].committed_offset == -1
        assert elsewhere.error_code == errors.NotCoordinatorError.code
        resp = await client.request(
            node,
            P.OffsetFetchRequest(
                group_id=group_id,
                topics=[
                    P.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[1])
                ],
            ),
            1,
        )
        assert resp.topics[0].partitions[0].committed_offset == 6


async def test_a_static_follower_rejoins_without_a_rebalance(fake: FakeCluster) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 4)
    boot = fake.bootstrap
    leader_cfg = {**FAST, "group_instance_id": "a"}
    follower_cfg = {**FAST, "group_instance_id": "b"}
    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **leader_cfg) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, Idle())
        await wait_for(lambda: parts(g1, topic) == [0, 1, 2, 3])
        async with (
            pykaf.open_consumer_group(boot, group_id, [topic], **follower_cfg) as g2,
            trio.open_nursery() as inner,
        ):
            inner.start_soon(g2.consume, Idle())
            await wait_for(split(topic, 4, g1, g2))
            theirs, old_id = parts(g2, topic), g2.member_id
            inner.cancel_scope.cancel()
        # A static member does not leave when it closes: still a member.
        state, generation, members = describe(fake, group_id)
        assert state == "Stable" and old_id in members
        async with (
            pykaf.open_consumer_group(boot, group_id, [topic], **follower_cfg) as g2,
            trio.open_nursery() as inner,
        ):
            inner.start_soon(g2.consume, Idle())
            await wait_for(lambda: parts(g2, topic) == theirs)
            # Same generation: the instance took its old place, no rebalance ran.
            assert g2.generation_id == generation and g2.member_id != old_id
            state, now_generation, members = describe(fake, group_id)
            assert (state, now_generation) == ("Stable", generation)
            assert old_id not in members and g2.member_id in members
            inner.cancel_scope.cancel()
        nursery.cancel_scope.cancel()
    # The old member id is fenced.
    async with pykaf.open_client(boot) as client:
        resp = await client.request(
            coordinator(fake, group_id),
            P.HeartbeatRequest(
                group_id=group_id, generation_id=generation, member_id=old_id, group_instance_id="b"
            ),
            4,
        )
        assert resp.error_code == errors.FencedInstanceIdError.code


async def _raw_member(
    client: pykaf.Client, node: int, group_id: str, topic: str, session_ms: int
) -> tuple[str, int, dict[str, list[int]]]:
    """Join and sync with raw requests; return (member id, generation, assignment)."""
    join = join_request(group_id, topic, session_ms=session_ms)
    resp = await client.request(node, join, 5)
    assert resp.error_code == errors.MemberIdRequiredError.code and resp.member_id
    join.member_id = resp.member_id
    resp = await client.request(node, join, 5)
    assert resp.error_code == 0, resp
    assert resp.leader != resp.member_id and resp.members == []
    sync = P.SyncGroupRequest(
        group_id=group_id,
        generation_id=resp.generation_id,
        member_id=resp.member_id,
        assignments=[],
    )
    got = await client.request(node, sync, 5)
    assert got.error_code == 0
    return resp.member_id, resp.generation_id, decode_assignment(got.assignment)


async def test_a_member_that_stops_heartbeating_is_expelled(fake: FakeCluster) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 4)
    boot = fake.bootstrap
    node = coordinator(fake, group_id)
    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **FAST) as g1,
        pykaf.open_client(boot) as client,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, Idle())
        await wait_for(lambda: parts(g1, topic) == [0, 1, 2, 3])
        member_id, generation, assigned = await _raw_member(client, node, group_id, topic, 1000)
        mine = set(assigned.get(topic, []))
        await wait_for(lambda: set(parts(g1, topic)) == {0, 1, 2, 3} - mine)
        assert mine and describe(fake, group_id)[2].keys() == {g1.member_id, member_id}
        # The raw member never heartbeats: after its second of session it is
        # removed, the group rebalances and the pykaf member gets everything.
        await wait_for(lambda: parts(g1, topic) == [0, 1, 2, 3])
        _state, later, members = describe(fake, group_id)
        assert members.keys() == {g1.member_id} and later > generation
        hb = await client.request(
            node,
            P.HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id),
            4,
        )
        assert hb.error_code == errors.UnknownMemberIdError.code
        nursery.cancel_scope.cancel()


async def test_the_coordinator_moving_is_followed(fake: FakeCluster) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 2)
    boot = fake.bootstrap
    fake.start_request_tracking()
    async with (
        pykaf.open_consumer_group(boot, group_id, [topic], **FAST) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, Idle())
        await wait_for(lambda: parts(g1, topic) == [0, 1])
        old = coordinator(fake, group_id)
        new = old % 3 + 1
        heartbeats = fake.count_requests(HEARTBEAT, new)
        fake.set_coordinator("group", group_id, new)
        # NOT_COORDINATOR on the old broker sends the member looking for the new one.
        await wait_for(lambda: fake.count_requests(HEARTBEAT, new) > heartbeats + 2)
        await g1.commit()
        assert parts(g1, topic) == [0, 1]
        nursery.cancel_scope.cancel()
    old_answers = [r for r in fake.requests if r.broker_id == old and r.api_key == HEARTBEAT]
    assert old_answers


# ------------------------------------------------------------------ raw requests


def commit_request(
    group_id: str,
    topic: str,
    partitions: list[int],
    offset: int,
    generation: int = -1,
    member_id: str = "",
) -> P.OffsetCommitRequest:
    """An OffsetCommit of ``offset`` for these partitions (a simple commit by default)."""
    return P.OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            P.OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    P.OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=offset, committed_metadata=""
                    )
                    for p in partitions
                ],
            )
        ],
    )


def join_request(
    group_id: str, topic: str, *, session_ms: int = 30_000, rebalance_ms: int = 10_000
) -> P.JoinGroupRequest:
    """A consumer's JoinGroup (range assignor) with no member id yet."""
    return P.JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id="",
        protocol_type="consumer",
        protocols=[P.JoinGroupRequestProtocol(name="range", metadata=encode_subscription([topic]))],
    )


async def test_a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout(
    fake: FakeCluster,
) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 2)
    node = coordinator(fake, group_id)
    joined: list[Any] = []
    async with (
        pykaf.open_client(fake.bootstrap) as client,
        pykaf.open_client(fake.bootstrap) as newcomer,
    ):
        first, generation, _ = await _first_member(client, node, group_id, topic, rebalance_ms=500)

        async def second() -> None:
            join = join_request(group_id, topic, rebalance_ms=500)
            joined.append(await newcomer.request(node, join, 3))  # v3: no MEMBER_ID_REQUIRED

        hb = P.HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=first)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await wait_for(lambda: describe(fake, group_id)[0] == "PreparingRebalance")
            # The first member heartbeats but does not rejoin: told to, then dropped.
            assert (await client.request(node, hb, 4)).error_code == (
                errors.RebalanceInProgressError.code
            )
        [resp] = joined
        assert resp.error_code == 0 and resp.generation_id == generation + 1
        assert [m.member_id for m in resp.members] == [resp.member_id] != [first]
        assert (await client.request(node, hb, 4)).error_code == errors.UnknownMemberIdError.code


async def test_the_initial_delay_gathers_the_first_members_into_one_generation() -> None:
    async with open_fake_cluster(1, group_initial_rebalance_delay_ms=300) as fake:
        topic, group_id = unique("t"), unique("g")
        fake.create_topic(topic, 2)
        answers: list[Any] = []

        async def join() -> None:
            async with pykaf.open_client(fake.bootstrap) as client:
                answers.append(await client.request(1, join_request(group_id, topic), 3))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join)
            await wait_for(lambda: describe(fake, group_id)[0] == "PreparingRebalance")
            nursery.start_soon(join)
        assert [a.error_code for a in answers] == [0, 0]
        assert {a.generation_id for a in answers} == {1}
        [leader] = [a for a in answers if a.leader == a.member_id]
        assert len(leader.members) == 2
        assert not fake.handler_errors


async def test_stale_generation_and_unknown_member_on_commit_and_heartbeat(
    fake: FakeCluster,
) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 2)
    node = coordinator(fake, group_id)

    def commit(generation: int, member_id: str, offset: int = 5) -> P.OffsetCommitRequest:
        return commit_request(group_id, topic, [0], offset, generation, member_id)

    def code_of(resp: Any) -> int:
        return int(resp.topics[0].partitions[0].error_code)

    async with pykaf.open_client(fake.bootstrap) as client:
        # Simple commit (generation -1) on a group with no members.
        assert code_of(await client.request(node, commit(-1, ""), 8)) == 0
        member_id, generation, _ = await _first_member(client, node, group_id, topic)
        # A second join (another client) rebalances: generation + 1.
        assert code_of(await client.request(node, commit(generation, member_id, 7), 8)) == 0
        assert code_of(await client.request(node, commit(generation + 5, member_id), 8)) == (
            errors.IllegalGenerationError.code
        )
        assert code_of(await client.request(node, commit(generation, "nobody"), 8)) == (
            errors.UnknownMemberIdError.code
        )
        assert code_of(await client.request(node, commit(-1, ""), 2)) == (
            errors.UnknownMemberIdError.code
        )
        other = node % 3 + 1
        assert code_of(await client.request(other, commit(generation, member_id), 8)) == (
            errors.NotCoordinatorError.code
        )
        hb = P.HeartbeatRequest(
            group_id=group_id, generation_id=generation - 1, member_id=member_id
        )
        assert (await client.request(node, hb, 4)).error_code == errors.IllegalGenerationError.code
        hb.generation_id = generation
        assert (await client.request(node, hb, 4)).error_code == 0
        hb.member_id = "nobody"
        assert (await client.request(node, hb, 0)).error_code == errors.UnknownMemberIdError.code
        sync = P.SyncGroupRequest(
            group_id=group_id, generation_id=generation + 1, member_id=member_id, assignments=[]
        )
        assert (await client.request(node, sync, 5)).error_code == (
            errors.IllegalGenerationError.code
        )
        got = call(lambda: fake.groups.committed(group_id, (topic, 0)))
        assert got.offset == 7
        # Leaving (v5, batched by member) empties the group; a simple commit works again.
        leave = P.LeaveGroupRequest(
            group_id=group_id,
            members=[
                P.LeaveGroupRequest.MemberIdentity(member_id=member_id),
                P.LeaveGroupRequest.MemberIdentity(member_id="nobody"),
            ],
        )
        resp = await client.request(node, leave, 5)
        assert [m.error_code for m in resp.members] == [0, errors.UnknownMemberIdError.code]
        assert describe(fake, group_id)[0] == "Empty"
        assert code_of(await client.request(node, commit(-1, "", 9), 8)) == 0


async def _first_member(
    client: pykaf.Client,
    node: int,
    group_id: str,
    topic: str,
    instance: str | None = None,
    rebalance_ms: int = 10_000,
) -> tuple[str, int, bytes]:
    """Become a group's only member and leader: (member id, generation, assignment)."""
    join = join_request(group_id, topic, rebalance_ms=rebalance_ms)
    join.group_instance_id = instance
    resp = await client.request(node, join, 7)
    if resp.error_code == errors.MemberIdRequiredError.code:
        join.member_id = resp.member_id
        resp = await client.request(node, join, 7)
    assert resp.error_code == 0 and resp.leader == resp.member_id
    assert [m.member_id for m in resp.members] == [resp.member_id]
    assert resp.protocol_type == "consumer" and resp.protocol_name == "range"
    assignment = encode_assignment({topic: [0, 1]})
    sync = P.SyncGroupRequest(
        group_id=group_id,
        generation_id=resp.generation_id,
        member_id=resp.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            P.SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=resp.member_id, assignment=assignment
            )
        ],
    )
    got = await client.request(node, sync, 5)
    assert got.error_code == 0 and got.protocol_name == "range"
    assert bytes(got.assignment) == assignment
    return resp.member_id, resp.generation_id, bytes(got.assignment)


async def test_join_errors_and_find_coordinator(fake: FakeCluster) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 2)
    node = coordinator(fake, group_id)
    async with pykaf.open_client(fake.bootstrap) as client:
        _member_id, _generation, _ = await _first_member(client, node, group_id, topic)
        base = {
            "group_id": group_id,
            "session_timeout_ms": 30_000,
            "rebalance_timeout_ms": 10_000,
        }
        other = P.JoinGroupRequest(
            **base,
            member_id="",
            protocol_type="consumer",
            protocols=[P.JoinGroupRequestProtocol(name="roundrobin", metadata=b"")],
        )
        resp = await client.request(node, other, 3)  # v3: no MEMBER_ID_REQUIRED
        assert resp.error_code == errors.InconsistentGroupProtocolError.code
        other.protocol_type = "connect"
        other.protocols[0].name = "range"
        resp = await client.request(node, other, 5)
        assert resp.error_code == errors.InconsistentGroupProtocolError.code
        other.protocol_type = "consumer"
        other.member_id = "made-up"
        resp = await client.request(node, other, 5)
        assert resp.error_code == errors.UnknownMemberIdError.code
        resp = await client.request(node % 3 + 1, other, 5)
        assert resp.error_code == errors.NotCoordinatorError.code
        # FindCoordinator: v0 (group), v3 (transaction), v4 (batched).
        f0 = await client.request(1, P.FindCoordinatorRequest(key=group_id), 0)
        assert (f0.error_code, f0.node_id) == (0, node)
        f3 = await client.request(2, P.FindCoordinatorRequest(key="tx", key_type=1), 3)
        assert f3.node_id == coordinator_of(fake, 1, "tx")
        x = name_on(fake, node % 3 + 1, "x")
        fake.broker_down(node)
        try:
            f4 = await client.request(
                node % 3 + 1,
                P.FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id, x]),
                4,
            )
        finally:
            fake.broker_up(node)
        answers = {c.key: c for c in f4.coordinators}
        assert answers[group_id].error_code == errors.CoordinatorNotAvailableError.code
        assert (answers[x].error_code, answers[x].node_id) == (0, node % 3 + 1)


def coordinator_of(fake: FakeCluster, key_type: int, key: str) -> int:
    return int(call(fake.coordinator_for, key_type, key))


async def test_describe_list_delete_and_offset_delete(fake: FakeCluster) -> None:
    topic, group_id, idle = unique("t"), unique("g"), unique("idle")
    fake.create_topic(topic, 2)
    node = coordinator(fake, group_id)
    async with pykaf.open_client(fake.bootstrap, client_id="tester") as client:
        member_id, _generation, assignment = await _first_member(
            client, node, group_id, topic, instance="i-1"
        )
        missing_id, nope = name_on(fake, node, "missing"), name_on(fake, node, "nope")
        elsewhere = name_on(fake, node % 3 + 1, "elsewhere")
        resp = await client.request(
            node, P.DescribeGroupsRequest(groups=[group_id, missing_id, elsewhere]), 5
        )
        described, missing, other = resp.groups
        assert (described.error_code, described.group_state) == (0, "Stable")
        assert (described.protocol_type, described.protocol_data) == ("consumer", "range")
        [m] = described.members
        assert (m.member_id, m.group_instance_id, m.client_id) == (member_id, "i-1", "tester")
        assert m.client_host.startswith("/127.0.0.1")
        assert bytes(m.member_assignment) == assignment
        assert bytes(m.member_metadata) == encode_subscription([topic])
        assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])
        assert other.error_code == errors.NotCoordinatorError.code
        # A group with only committed offsets (a simple commit) on the same broker.
        idle_node = coordinator(fake, idle)
        commit = commit_request(idle, topic, [0, 1], 3)
        assert (await client.request(idle_node, commit, 8)).topics[0].partitions[0].error_code == 0
        listed = {}
        for broker in (1, 2, 3):
            resp = await client.request(broker, P.ListGroupsRequest(states_filter=[]), 4)
            for g in resp.groups:
                listed[g.group_id] = (broker, g.group_state, g.protocol_type)
        assert listed[group_id] == (node, "Stable", "consumer")
        assert listed[idle] == (idle_node, "Empty", "")
        resp = await client.request(node, P.ListGroupsRequest(states_filter=["empty"]), 4)
        assert group_id not in {g.group_id for g in resp.groups}
        # OffsetDelete: a topic the members consume is refused; an empty group's offsets go.
        od = P.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                P.OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        P.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)
                    ],
                )
            ],
        )
        resp = await client.request(node, od, 0)
        assert resp.topics[0].partitions[0].error_code == errors.GroupSubscribedToTopicError.code
        od.group_id = idle
        resp = await client.request(idle_node, od, 0)
        assert (resp.error_code, resp.topics[0].partitions[0].error_code) == (0, 0)
        left = call(lambda: sorted(fake.groups.offsets[idle]))
        assert left == [(topic, 1)]
        # DeleteGroups: members remain -> NON_EMPTY_GROUP; unknown -> GROUP_ID_NOT_FOUND.
        resp = await client.request(
            node, P.DeleteGroupsRequest(groups_names=[group_id, nope, elsewhere]), 2
        )
        assert [r.error_code for r in resp.results] == [
            errors.GroupNotEmptyError.code,
            errors.GroupIdNotFoundError.code,
            errors.NotCoordinatorError.code,
        ]
        leave = P.LeaveGroupRequest(
            group_id=group_id,
            members=[P.LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="i-1")],
        )
        assert (await client.request(node, leave, 4)).members[0].error_code == 0
        resp = await client.request(node, P.DeleteGroupsRequest(groups_names=[group_id]), 0)
        assert resp.results[0].error_code == 0
        resp = await client.request(node, P.DescribeGroupsRequest(groups=[group_id]), 0)
        assert resp.groups[0].group_state == "Dead"


async def test_txn_offset_commit_is_held_until_the_transaction_ends(
    fake: FakeCluster,
) -> None:
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 1)
    node = coordinator(fake, group_id)
    async with pykaf.open_client(fake.bootstrap) as client:
        member_id, generation, _ = await _first_member(client, node, group_id, topic)

        txn_node = coordinator_of(fake, 1, "tx")
        init = await client.request(
            txn_node, P.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
        )
        pid, epoch = init.producer_id, init.producer_epoch

        def txn_commit(
            gen: int, member: str, *, producer_epoch: int = epoch, group: str = group_id
        ) -> P.TxnOffsetCommitRequest:
            return P.TxnOffsetCommitRequest(
                transactional_id="tx",
                group_id=group,
                producer_id=pid,
                producer_epoch=producer_epoch,
                generation_id=gen,
                member_id=member,
                topics=[
                    P.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            P.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=11, committed_metadata=""
                            )
                        ],
                    )
                ],
            )

        def code_of(resp: Any) -> int:
            return int(resp.topics[0].partitions[0].error_code)

        # KIP-890: the group must be in the producer's open transaction first
        early = await client.request(node, txn_commit(generation, member_id), 3)
        assert code_of(early) == errors.InvalidTxnStateError.code
        added = await client.request(
            txn_node,
            P.AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id=group_id
            ),
        )
        assert added.error_code == 0
        stale = await client.request(
            node, txn_commit(generation, member_id, producer_epoch=epoch - 1), 3
        )
        assert code_of(stale) == errors.InvalidProducerEpochError.code
        bad = await client.request(node, txn_commit(generation + 1, member_id), 3)
        assert code_of(bad) == errors.IllegalGenerationError.code
        bad = await client.request(node, txn_commit(generation, "ghost"), 3)
        assert code_of(bad) == errors.UnknownMemberIdError.code
        ok = await client.request(node, txn_commit(generation, member_id), 3)
        assert code_of(ok) == 0

        async def fetch(stable: bool) -> Any:
            req = P.OffsetFetchRequest(
                group_id=group_id,
                topics=[
                    P.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
                ],
                require_stable=stable,
            )
            resp = await client.request(node, req, 7)
            return resp.topics[0].partitions[0]

        unstable = await fetch(True)
        assert unstable.error_code == errors.UnstableOffsetCommitError.code
        assert (await fetch(False)).committed_offset == -1
        call(fake.groups.complete_transaction, pid, True)
        done = await fetch(True)
        assert (done.error_code, done.committed_offset) == (0, 11)


# ------------------------------------------------------------------ confluent-kafka


def _confluent_member(
    bootstrap: str,
    topic: str,
    group_id: str,
    assignor: str,
    assigned: set[int],
    stop: threading.Event,
    commits: list[Any],
) -> None:
    bc = pytest.importorskip("broker_clients")
    consumer = bc.ck.Consumer(
        {
            **bc.QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "partition.assignment.strategy": assignor,
            "heartbeat.interval.ms": 100,
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
        }
    )
    cooperative = assignor == "cooperative-sticky"

    def on_assign(c: Any, ps: list[Any]) -> None:
        assigned.update(p.partition for p in ps)
        if cooperative:
            c.incremental_assign(ps)

    def on_revoke(c: Any, ps: list[Any]) -> None:
        assigned.difference_update(p.partition for p in ps)
        if cooperative:
            c.incremental_unassign(ps)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    committed = False
    try:
        while not stop.is_set():
            consumer.poll(0.05)
            if assigned and not committed and len(consumer.assignment()) == len(assigned):
                tps = [bc.ck.TopicPartition(topic, p, 100 + p) for p in sorted(assigned)]
                consumer.commit(offsets=tps, asynchronous=False)
                back = consumer.committed(
                    [bc.ck.TopicPartition(topic, p) for p in sorted(assigned)]
                )
                commits.extend((tp.partition, tp.offset) for tp in back)
                committed = True
    finally:
        consumer.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
async def test_confluent_kafka_and_pykaf_members_share_a_group(
    fake: FakeCluster, assignor: str
) -> None:
    pytest.importorskip("broker_clients")
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 4)
    assigned: set[int] = set()
    commits: list[Any] = []
    stop = threading.Event()
    cfg = {**FAST, "assignors": [assignor]}
    async with (
        pykaf.open_consumer_group(fake.bootstrap, group_id, [topic], **cfg) as g1,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g1.consume, Idle())
        await wait_for(lambda: parts(g1, topic) == [0, 1, 2, 3])
        nursery.start_soon(
            trio.to_thread.run_sync,
            _confluent_member,
            fake.bootstrap,
            topic,
            group_id,
            assignor,
            assigned,
            stop,
            commits,
        )

        def shared() -> bool:
            mine = set(parts(g1, topic))
            return (
                bool(mine)
                and bool(assigned)
                and mine | assigned == {0, 1, 2, 3}
                and not (mine & assigned)
            )

        try:
            await wait_for(shared, what=lambda: (parts(g1, topic), assigned))
            await wait_for(lambda: bool(commits), what="confluent-kafka's commit")
            assert sorted(commits) == [(p, 100 + p) for p in sorted(assigned)]
        finally:
            stop.set()
        # confluent-kafka left: pykaf gets everything back.
        await wait_for(lambda: parts(g1, topic) == [0, 1, 2, 3])
        nursery.cancel_scope.cancel()


async def test_every_version_is_answered(fake: FakeCluster) -> None:
    # Each group API at each advertised version, on the group's coordinator,
    # for a group nobody joined: the answer decodes and carries Kafka's code.
    topic = unique("t")
    fake.create_topic(topic, 1)
    group_id = unique("g")
    node = coordinator(fake, group_id)
    some = [P.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]
    cases: list[tuple[Any, range, Callable[[Any], Any], Any]] = [
        (
            lambda v: (
                P.FindCoordinatorRequest(coordinator_keys=[group_id])
                if v >= 4
                else P.FindCoordinatorRequest(key=group_id)
            ),
            range(5),
            lambda r: r.node_id if r.coordinators == [] else r.coordinators[0].node_id,
            node,
        ),
        (
            P.HeartbeatRequest(group_id=group_id, generation_id=1, member_id="m"),
            range(5),
            lambda r: r.error_code,
            errors.UnknownMemberIdError.code,
        ),
        (
            P.SyncGroupRequest(group_id=group_id, generation_id=1, member_id="m", assignments=[]),
            range(6),
            lambda r: r.error_code,
            errors.UnknownMemberIdError.code,
        ),
        (
            lambda v: (
                P.LeaveGroupRequest(
                    group_id=group_id, members=[P.LeaveGroupRequest.MemberIdentity(member_id="m")]
                )
                if v >= 3
                else P.LeaveGroupRequest(group_id=group_id, member_id="m")
            ),
            range(6),
            lambda r: r.error_code or r.members[0].error_code,
            errors.UnknownMemberIdError.code,
        ),
        (
            commit_request(group_id, topic, [0], 1, generation=3, member_id="m"),
            range(2, 9),  # Kafka 4 dropped v0 and v1 (KIP-896)
            lambda r: r.topics[0].partitions[0].error_code,
            errors.UnknownMemberIdError.code,
        ),
        (
            lambda v: (
                P.OffsetFetchRequest(
                    groups=[
                        P.OffsetFetchRequest.OffsetFetchRequestGroup(
                            group_id=group_id,
                            topics=[
                                P.OffsetFetchRequest.OffsetFetchRequestTopics(
                                    name=topic, partition_indexes=[0]
                                )
                            ],
                        )
                    ],
                )
                if v >= 8
                else P.OffsetFetchRequest(group_id=group_id, topics=some)
            ),
            range(1, 9),  # Kafka 4 dropped v0 (KIP-896)
            lambda r: (
                (r.groups[0].topics if r.groups else r.topics)[0].partitions[0].committed_offset
            ),
            -1,
        ),
        (
            P.DescribeGroupsRequest(groups=[group_id]),
            range(6),
            lambda r: r.groups[0].group_state,
            "Dead",
        ),
        (P.ListGroupsRequest(), range(6), lambda r: r.error_code, 0),
        (
            P.DeleteGroupsRequest(groups_names=[group_id]),
            range(3),
            lambda r: r.results[0].error_code,
            errors.GroupIdNotFoundError.code,
        ),
        (
            P.OffsetDeleteRequest(group_id=group_id, topics=[]),
            range(1),
            lambda r: r.error_code,
            errors.GroupIdNotFoundError.code,
        ),
    ]
    async with pykaf.open_client(fake.bootstrap) as client:
        for request, versions, pick, expected in cases:
            for version in versions:
                made = request(version) if callable(request) else request
                resp = await client.request(node, made, version)
                assert pick(resp) == expected, (type(request).__name__, version)
        for version in range(10):
            join = join_request(group_id, topic, rebalance_ms=-1 if version == 0 else 10_000)
            join.protocol_type = ""
            resp = await client.request(node, join, version)
            assert resp.error_code == errors.InconsistentGroupProtocolError.code, version
        # Injected errors keep the response's shape.
        fake.push_request_errors(OFFSET_COMMIT, errors.NotCoordinatorError.code)
        resp = await client.request(node, commit_request(group_id, topic, [0], 1), 8)
        assert resp.topics[0].partitions[0].error_code == errors.NotCoordinatorError.code
        fake.push_request_errors(10, errors.CoordinatorNotAvailableError.code)
        resp = await client.request(
            node, P.FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]), 4
        )
        assert resp.coordinators[0].error_code == errors.CoordinatorNotAvailableError.code


async def test_a_join_answered_before_a_new_rebalance_keeps_its_answer() -> None:
    """A member whose JoinGroup was answered keeps that answer if a rebalance starts at once.

    Kafka sends the JoinGroup responses as the join phase completes; a member
    joining right after starts a new phase, which the earlier members learn of
    from SyncGroup or Heartbeat. Their answer must not be taken back (they
    were left waiting until the rebalance timeout, then expelled).
    """
    from pykaf.testing._fake.group_coordinator import Member, clock
    from pykaf.testing._fake.groups import _join_and_wait

    cluster = FakeCluster(1)
    coord = cluster.groups
    g = coord.get_or_create("race")

    def member(name: str) -> Member:
        m = Member(name, None, "c", "h", 10_000, 300, "consumer", [("range", b"")])
        m.touch(clock())  # its session runs from now
        g.members[name] = m
        return m

    a, b = member("a"), member("b")
    answers: dict[str, Any] = {}

    async def join_a() -> None:
        answers["a"] = await _join_and_wait(coord, g, a, 5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join_a)
        await trio.testing.wait_all_tasks_blocked()
        answers["b"] = await _join_and_wait(coord, g, b, 5)  # completes the phase, no wait
        coord.prepare_rebalance(g)  # a third member arrives before a's task runs
    assert answers["a"].error_code == 0 and answers["b"].error_code == 0
    assert answers["a"].generation_id == answers["b"].generation_id
    assert "a" in g.members


async def test_commit_of_given_offsets_without_a_generation_raises(fake: FakeCluster) -> None:
    """Marks wait for the generation; ``commit(offsets=)`` cannot, so it says so."""
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 1)
    async with pykaf.open_consumer_group(fake.bootstrap, group_id, [topic], **FAST) as g:
        assert g.generation_id < 0  # not consuming: never joined
        await g.commit()  # the marks (none) wait quietly
        with pytest.raises(errors.RebalanceInProgressError, match=f"{topic}/0 not committed"):
            await g.commit({(topic, 0): 3})
    with pytest.raises(errors.ClosedError):
        await g.commit({(topic, 0): 3})
    assert call(fake.groups.committed, group_id, (topic, 0)) is None


async def test_a_mark_goes_again_after_a_lower_explicit_commit(fake: FakeCluster) -> None:
    """After ``commit(offsets=)`` below a committed mark, the next plain commit sends the mark."""
    topic, group_id = unique("t"), unique("g")
    fake.create_topic(topic, 1)
    async with (
        pykaf.open_consumer_group(
            fake.bootstrap, group_id, [topic], **{**FAST, "auto_commit": False}
        ) as g,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(g.consume, Idle())
        await wait_for(lambda: (topic, 0) in g._claims, what="the claim")
        g.offsets.mark(topic, 0, 8, None, -1)
        await g.commit()
        await g.commit({(topic, 0): 2})
        assert call(fake.groups.committed, group_id, (topic, 0)).offset == 2
        await g.commit()
        assert call(fake.groups.committed, group_id, (topic, 0)).offset == 8
        nursery.cancel_scope.cancel()
