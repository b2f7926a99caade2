"""Conformance cases of a consumer-protocol (KIP-848) group's life, at the wire level."""

from __future__ import annotations

import uuid
from typing import Any

import trio
from cases_txn import _retrying, find_coordinator
from conformance_harness import Answers, Target, Wire, case, norm

from pykaf import protocol as P

H = P.ConsumerGroupHeartbeatRequest


def heartbeat(
    group: str,
    member: str,
    epoch: int,
    topics: list[str] | None = None,
    owned: dict[uuid.UUID, list[int]] | None = None,
    **fields: Any,
) -> Any:
    """A ConsumerGroupHeartbeat; a join (epoch 0) gives its timeout, topics and no partitions."""
    join = epoch == 0
    return H(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000 if join else -1,
        subscribed_topic_names=topics,
        topic_partitions=(
            []
            if join
            else [H.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()]
            if owned is not None
            else None
        ),
        **fields,
    )


def answered(resp: Any) -> dict[str, Any]:
    """A heartbeat answer: its code, epoch and assignment (partition numbers by topic id)."""
    parts = None
    if resp.assignment is not None:
        parts = sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)
    return {
        "error_code": resp.error_code,
        "member_epoch": resp.member_epoch,
        "interval given": resp.heartbeat_interval_ms > 0,
        "assignment": parts,
    }


def owned_of(resp: Any) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}


def described(resp: Any) -> dict[str, Any]:
    (g,) = resp.groups
    return {
        "error_code": g.error_code,
        "state": g.group_state,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "assignor": g.assignor_name,
        "members": sorted(
            (
                m.member_id,
                m.member_epoch,
                sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions),
                list(m.subscribed_topic_names),
            )
            for m in g.members
        ),
    }


def commit(group: str, member: str, epoch: int, topic: str, offset: int) -> Any:
    C = P.OffsetCommitRequest
    return C(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=[
            C.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
                ],
            )
        ],
    )


def describe(group: str) -> Any:
    return P.ConsumerGroupDescribeRequest(group_ids=[group])


def epochs_as(d: dict[str, Any], epoch: int) -> dict[str, Any]:
    """A description with its group and assignment epochs (and each member's) told
    against ``epoch``: the brokers count group epochs differently."""
    d = dict(d)
    d["epochs"] = (d.pop("group_epoch"), d.pop("assignment_epoch")) == (epoch, epoch)
    d["members"] = [(m[0], m[1] == epoch, *m[2:]) for m in d["members"]]
    return d


def relative(resp: Any, epoch: int) -> dict[str, Any]:
    """A heartbeat answer with its epoch told against ``epoch`` (the brokers number alike
    only up to how often they bump the group epoch)."""
    out = answered(resp)
    e = out.pop("member_epoch")
    out["epoch"] = "same" if e == epoch else "higher" if e > epoch else e
    return out


@case()
async def case_consumer_group_life(t: Target, w: Wire, out: Answers) -> None:
    """Join, a second member and the revocation it needs, commits, fencing, leaving."""
    topic = await t.create_topic("consumer_group_life", 2)
    group = "consumer_group_life.g"
    await find_coordinator(w, group, 0)
    one, two = "member-one", "member-two"
    first = await _retrying(w, heartbeat(group, one, 0, [topic]), lambda r: r.error_code)
    out.add("join", relative(first, 0))
    e1 = first.member_epoch
    mine = owned_of(first)
    out.add("heartbeat", relative(await w.send(heartbeat(group, one, e1, None, mine)), e1))
    out.add("describe one member", epochs_as(described(await w.send(describe(group))), e1))
    out.add("commit", norm(await w.send(commit(group, one, e1, topic, 5))))
    out.add("commit, stale epoch", norm(await w.send(commit(group, one, e1 + 7, topic, 6))))
    out.add("commit, unknown member", norm(await w.send(commit(group, "nobody", e1, topic, 6))))

    second = await w.send(heartbeat(group, two, 0, [topic]))
    out.add("second joins: nothing free yet", answered(second)["assignment"])
    # the first member must give one partition up (Kafka may compute the new
    # target a moment later): its epoch stays until it has
    revoke = await t.wait_for(
        lambda: w.send(heartbeat(group, one, e1, None, mine)), lambda r: r.assignment is not None
    )
    out.add("first is asked to revoke", relative(revoke, e1))
    kept = owned_of(revoke)
    acked = await w.send(heartbeat(group, one, e1, None, kept))
    out.add("first acknowledges", relative(acked, e1))
    e2 = acked.member_epoch
    got = await t.wait_for(
        lambda: w.send(heartbeat(group, two, second.member_epoch, None, {})),
        lambda r: r.assignment is not None and r.assignment.topic_partitions,
    )
    out.add("second gets the freed partition", relative(got, e2))
    out.add("describe two members", epochs_as(described(await w.send(describe(group))), e2))
    listed = await w.send(P.ListGroupsRequest(states_filter=[], types_filter=["consumer"]))
    out.add(
        "listed as a consumer group",
        [
            (g.protocol_type, g.group_state, g.group_type)
            for g in listed.groups
            if g.group_id == group
        ],
    )
    out.add("commit, old epoch", norm(await w.send(commit(group, one, e1, topic, 6))))
    out.add("epoch ahead", answered(await w.send(heartbeat(group, one, e2 + 50, None, kept))))
    out.add("unknown member", answered(await w.send(heartbeat(group, "nobody", 3, None, {}))))
    out.add(
        "join without a rebalance timeout",
        norm(
            await w.send(
                H(group_id=group, member_id="x", member_epoch=0, subscribed_topic_names=[topic])
            ),
            drop=frozenset({"error_message"}),
        ),
    )
    out.add(
        "unknown assignor",
        answered(await w.send(heartbeat(group, "x", 0, [topic], server_assignor="nope"))),
    )
    out.add(
        "a regex RE2/J does not have",
        answered(
            await w.send(heartbeat(group, "x", 0, None, subscribed_topic_regex="(?=a)consumer.*"))
        ),
    )
    left = await w.send(H(group_id=group, member_id=two, member_epoch=-1))
    out.add("second leaves", answered(left))
    out.add("describe unknown group", described(await w.send(describe(group + ".none"))))


@case()
async def case_consumer_group_slow_revocation(t: Target, w: Wire, out: Answers) -> None:
    """A member that does not give a partition up within its rebalance timeout is removed."""
    topic = await t.create_topic("consumer_group_slow_revocation", 2)
    group = "consumer_group_slow_revocation.g"
    await find_coordinator(w, group, 0)
    slow = H(
        group_id=group,
        member_id="slow",
        member_epoch=0,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=[topic],
        topic_partitions=[],
    )
    first = await _retrying(w, slow, lambda r: r.error_code)
    mine = owned_of(first)
    await w.send(heartbeat(group, "other", 0, [topic]))
    revoke = await t.wait_for(
        lambda: w.send(heartbeat(group, "slow", first.member_epoch, None, mine)),
        lambda r: r.assignment is not None,
    )
    out.add("asked to revoke", sorted(p for ps in owned_of(revoke).values() for p in ps) != [0, 1])
    await trio.sleep(2.5)  # past the rebalance timeout, still owning both
    late = await w.send(heartbeat(group, "slow", first.member_epoch, None, mine))
    out.add("heartbeat after the rebalance timeout", answered(late))


@case()
async def case_consumer_group_lost_answer(t: Target, w: Wire, out: Answers) -> None:
    """A heartbeat's answer lost after the coordinator bumped the member's epoch: the
    member sends its full state again with the previous epoch, which is accepted
    when the partitions it reports are still its own, and fenced otherwise."""
    topic = await t.create_topic("consumer_group_lost_answer", 2)
    group = "consumer_group_lost_answer.g"
    await find_coordinator(w, group, 0)
    first = await _retrying(w, heartbeat(group, "one", 0, [topic]), lambda r: r.error_code)
    e1, mine = first.member_epoch, owned_of(first)
    await w.send(heartbeat(group, "one", e1, None, mine))
    await w.send(heartbeat(group, "two", 0, [topic]))
    revoke = await t.wait_for(
        lambda: w.send(heartbeat(group, "one", e1, None, mine)), lambda r: r.assignment is not None
    )
    kept = owned_of(revoke)
    acked = await w.send(heartbeat(group, "one", e1, None, kept))  # this answer is "lost"
    e2 = acked.member_epoch
    out.add("the lost answer bumped the epoch", e2 > e1)
    again = await w.send(heartbeat(group, "one", e1, None, kept))
    out.add("previous epoch, owned partitions only", relative(again, e2))
    full = H(
        group_id=group,
        member_id="one",
        member_epoch=e1,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[topic],
        topic_partitions=[H.TopicPartitions(topic_id=t, partitions=ps) for t, ps in kept.items()],
    )
    # a full request (rebalance timeout, subscription, owned partitions) gets the
    # assignment again, in case the lost answer carried one
    out.add("the full state again, previous epoch", relative(await w.send(full), e2))
    out.add(
        "previous epoch, a revoked partition still reported",
        answered(await w.send(heartbeat(group, "one", e1, [topic], mine))),
    )
    out.add(
        "previous epoch, no partitions reported",
        answered(await w.send(heartbeat(group, "one", e1, [topic], None))),
    )
    out.add(
        "the current epoch still works",
        relative(await w.send(heartbeat(group, "one", e2, [topic], kept)), e2),
    )
