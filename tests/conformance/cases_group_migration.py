"""Conformance cases of KIP-848's online migration: classic members in a consumer group.

A classic member (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) may join a
group run by the consumer protocol: the coordinator assigns for it and hands
its partitions out through SyncGroup, and tells it to rejoin (a Heartbeat's
REBALANCE_IN_PROGRESS) when its assignment should change. When the last
consumer-protocol member leaves, the group becomes a classic group again; a
consumer-protocol member joining a classic group of consumers converts it.
"""

from __future__ import annotations

from typing import Any

from cases_consumer_groups import H, heartbeat, owned_of
from cases_groups import commit, leave
from cases_groups import describe as describe_classic
from cases_groups import described as described_classic
from cases_txn import _retrying, find_coordinator
from conformance_harness import Answers, Target, Wire, case, norm

from pykaf import protocol as P
from pykaf._group.assignors import decode_assignment, encode_assignment, encode_subscription

SESSION_MS = 30_000
REBALANCE_MS = 30_000


def classic_join(
    group: str,
    member_id: str,
    topic: str,
    owned: dict[str, list[int]] | None = None,
    protocol_type: str = "consumer",
) -> P.JoinGroupRequest:
    """A classic consumer's JoinGroup offering cooperative-sticky then range (v1 subscriptions)."""
    meta = encode_subscription([topic], owned_partitions=owned or {}, version=1)
    J = P.JoinGroupRequest
    return J(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=[
            J.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=meta),
            J.JoinGroupRequestProtocol(name="range", metadata=meta),
        ],
    )


def joined(resp: P.JoinGroupResponse, me: str) -> dict[str, Any]:
    """A JoinGroup answer, with whether this member leads and how many it lists."""
    return {
        "error_code": resp.error_code,
        "protocol_type": resp.protocol_type,
        "protocol_name": resp.protocol_name,
        "leader is me": resp.leader == me and me != "",
        "leader": "" if resp.leader == "" else "set",
        "members listed": len(resp.members),
        "member id given": resp.member_id != "",
    }


def classic_sync(
    group: str, generation: int, member: str, assignments: dict[str, bytes] | None = None
) -> P.SyncGroupRequest:
    """A SyncGroup with the cooperative-sticky protocol."""
    S = P.SyncGroupRequest
    return S(
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="cooperative-sticky",
        assignments=[
            S.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ],
    )


def synced(resp: P.SyncGroupResponse) -> dict[str, Any]:
    """A SyncGroup answer with its assignment decoded."""
    return {
        "error_code": resp.error_code,
        "protocol_type": resp.protocol_type,
        "protocol_name": resp.protocol_name,
        "assignment": decode_assignment(bytes(resp.assignment)) if resp.error_code == 0 else None,
    }


def classic_heartbeat(group: str, generation: int, member: str) -> P.HeartbeatRequest:
    """A classic Heartbeat."""
    return P.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)


def consumer_describe(group: str) -> Any:
    return P.ConsumerGroupDescribeRequest(group_ids=[group])


def members_of(resp: Any) -> dict[str, Any]:
    """A ConsumerGroupDescribe answer: state, and per member (in join order given by ``ids``)
    its subscription, rack and assignment."""
    (g,) = resp.groups
    return {
        "error_code": g.error_code,
        "state": g.group_state,
        "members": sorted(
            (
                list(m.subscribed_topic_names),
                m.rack_id or "",
                sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
            )
            for m in g.members
        ),
    }


@case()
async def case_classic_member_in_a_consumer_group(t: Target, w: Wire, out: Answers) -> None:
    """A classic member joins a consumer group, is told to rejoin, gets its share,
    commits; the consumer member leaves (a classic group again); a consumer member
    joins again (a consumer group again); the classic member leaves."""
    topic = await t.create_topic("classic_member_in_a_consumer_group", 2)
    group = "classic_member_in_a_consumer_group.g"
    await find_coordinator(w, group, 0)
    modern = "modern-member"
    first = await _retrying(
        w, heartbeat(group, modern, 0, [topic], rack_id="rack-a"), lambda r: r.error_code
    )
    e1 = first.member_epoch
    mine = owned_of(first)
    out.add("consumer member's assignment", sorted(p for ps in mine.values() for p in ps))
    out.add("described with its rack", members_of(await w.send(consumer_describe(group))))

    out.add(
        "join of another protocol type",
        joined(await w.send(classic_join(group, "", topic, protocol_type="connect")), ""),
    )
    r = await w.send(classic_join(group, "", topic))
    out.add("classic join without a member id", joined(r, ""))
    classic = r.member_id
    r = await w.send(classic_join(group, classic, topic))
    out.add("classic join", joined(r, classic))
    gen = r.generation_id
    # (Kafka 4.3 may compute the new target, and the joining member's epoch, a
    # moment later; the fake at once)
    out.add("classic member's generation", gen - e1 in (0, 1))
    out.add(
        "classic sync: nothing free yet", synced(await w.send(classic_sync(group, gen, classic)))
    )
    out.add(
        "classic sync, wrong generation",
        synced(await w.send(classic_sync(group, gen + 5, classic))),
    )
    out.add("classic heartbeat", norm(await w.send(classic_heartbeat(group, gen, classic))))
    out.add(
        "classic heartbeat, wrong generation",
        norm(await w.send(classic_heartbeat(group, gen + 5, classic))),
    )
    out.add(
        "describe groups of a consumer group",
        described_classic(await w.send(describe_classic(group))),
    )

    # the consumer member gives a partition up
    revoke = await t.wait_for(
        lambda: w.send(heartbeat(group, modern, e1, None, mine)),
        lambda r: r.assignment is not None,
    )
    kept = owned_of(revoke)
    out.add("consumer member keeps", sorted(p for ps in kept.values() for p in ps))
    acked = await w.send(heartbeat(group, modern, e1, None, kept))
    e2 = acked.member_epoch
    out.add("consumer member acknowledges", (acked.error_code, e2 - e1))
    # the classic member learns of its partition from a heartbeat: rejoin
    told = await t.wait_for(
        lambda: w.send(classic_heartbeat(group, gen, classic)), lambda r: r.error_code != 0
    )
    out.add("classic heartbeat after the release", norm(told))
    r = await w.send(classic_join(group, classic, topic))
    out.add("classic rejoin", joined(r, classic))
    out.add("classic rejoin's generation", r.generation_id - e1)
    gen = r.generation_id
    got = synced(await w.send(classic_sync(group, gen, classic)))
    out.add("classic sync: the freed partition", got)
    theirs = got["assignment"][topic] if got["assignment"] else []
    out.add(
        "classic heartbeat when reconciled",
        norm(await w.send(classic_heartbeat(group, gen, classic))),
    )
    out.add("described, mixed", members_of(await w.send(consumer_describe(group))))
    out.add("classic commit", norm(await w.send(commit(group, gen, classic, topic, 4))))
    out.add("classic commit v8", norm(await w.send(commit(group, gen, classic, topic, 4), 8)))
    out.add(
        "classic commit, wrong generation",
        norm(await w.send(commit(group, gen + 3, classic, topic, 4))),
    )

    # the last consumer-protocol member leaves: a classic group again, rebalancing
    left = await w.send(H(group_id=group, member_id=modern, member_epoch=-1))
    out.add("consumer member leaves", (left.error_code, left.member_epoch))
    out.add("a classic group again", described_classic(await w.send(describe_classic(group))))
    out.add(
        "consumer describe of it",
        norm(await w.send(consumer_describe(group)), drop=frozenset({"groups"}))
        | {"codes": [g.error_code for g in (await w.send(consumer_describe(group))).groups]},
    )
    out.add(
        "classic heartbeat after the downgrade",
        norm(await w.send(classic_heartbeat(group, gen, classic))),
    )
    r = await w.send(classic_join(group, classic, topic, {topic: theirs}))
    out.add("classic rejoin after the downgrade", joined(r, classic))
    gen3 = r.generation_id
    out.add("generation after the downgrade", gen3 - gen)
    everything = encode_assignment({topic: [0, 1]})
    s = await w.send(classic_sync(group, gen3, classic, {classic: everything}))
    out.add("leader's sync", synced(s))
    out.add("classic group stable", described_classic(await w.send(describe_classic(group))))

    # a consumer-protocol member joins the classic group: it converts again
    back = await w.send(heartbeat(group, "modern-two", 0, [topic]))
    out.add("consumer member joins the classic group", (back.error_code, owned_of(back) == {}))
    out.add("converted", members_of(await w.send(consumer_describe(group))))
    out.add(
        "classic heartbeat after the upgrade",
        norm(await w.send(classic_heartbeat(group, gen3, classic))),
    )
    out.add("classic leaves", norm(await w.send(leave(group, classic))))
    out.add("classic leaves again", norm(await w.send(leave(group, classic))))
    epoch, have = back.member_epoch, owned_of(back)

    async def step() -> Any:
        nonlocal epoch, have
        r = await w.send(heartbeat(group, "modern-two", epoch, None, have))
        if r.error_code == 0:
            epoch = r.member_epoch
            have = owned_of(r) if r.assignment is not None else have
        return r

    last = await t.wait_for(step, lambda r: sum(map(len, have.values())) == 2)
    out.add("consumer member gets everything", (last.error_code, list(have.values())))
    await step()  # the acknowledgement
    out.add("a consumer group of one", members_of(await w.send(consumer_describe(group))))
