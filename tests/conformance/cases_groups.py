"""Conformance cases of a classic consumer group's life, at the wire level."""

from __future__ import annotations

from typing import Any

import trio
from cases_txn import _retrying, find_coordinator
from conformance_harness import Answers, Target, Wire, case, norm

import pykaf
from pykaf import protocol as P
from pykaf._group.assignors import encode_assignment, encode_subscription

SESSION_MS = 30_000
REBALANCE_MS = 30_000


def join(group: str, member_id: str, topic: str) -> P.JoinGroupRequest:
    """A consumer's JoinGroup with the range protocol."""
    return P.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[
            P.JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=encode_subscription([topic])
            )
        ],
    )


def joined(resp: P.JoinGroupResponse, me: str) -> dict[str, Any]:
    """A JoinGroup answer, with whether this member leads and how many it lists."""
    return {
        "error_code": resp.error_code,
        "generation_id": resp.generation_id,
        "protocol_type": resp.protocol_type,
        "protocol_name": resp.protocol_name,
        "leader is me": resp.leader == me and me != "",
        "members listed": len(resp.members),
        "member id given": resp.member_id != "",
    }


def sync(group: str, generation: int, member: str, assignments: dict[str, Any]) -> Any:
    """A SyncGroup (the leader's carries every member's assignment)."""
    return P.SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            P.SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in assignments.items()
        ],
    )


def heartbeat(group: str, generation: int, member: str) -> P.HeartbeatRequest:
    """A Heartbeat."""
    return P.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)


def describe(group: str) -> P.DescribeGroupsRequest:
    """A DescribeGroups of one group."""
    return P.DescribeGroupsRequest(groups=[group], include_authorized_operations=False)


def described(resp: P.DescribeGroupsResponse) -> dict[str, Any]:
    """The state, protocol and member count of a described group."""
    (g,) = resp.groups
    return {
        "error_code": g.error_code,
        "state": g.group_state,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol_data,
        "members": len(g.members),
    }


def commit(group: str, generation: int, member: str, topic: str, offset: int) -> Any:
    """An OffsetCommit of partition 0."""
    return P.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        topics=[
            P.OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    P.OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="meta",
                    )
                ],
            )
        ],
    )


def fetch_offsets(group: str, topic: str) -> P.OffsetFetchRequest:
    """An OffsetFetch of partitions 0 and 1 (v8's form: a list of groups)."""
    return P.OffsetFetchRequest(
        groups=[
            P.OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group,
                topics=[
                    P.OffsetFetchRequest.OffsetFetchRequestTopics(
                        name=topic, partition_indexes=[0, 1]
                    )
                ],
            )
        ],
        require_stable=True,
    )


def leave(group: str, *members: str) -> P.LeaveGroupRequest:
    """A LeaveGroup (v3+: a list of members)."""
    return P.LeaveGroupRequest(
        group_id=group,
        members=[P.LeaveGroupRequest.MemberIdentity(member_id=m) for m in members],
    )


@case()
async def case_classic_group_life(t: Target, w: Wire, out: Answers) -> None:
    """Join, sync, heartbeat, a second member's rebalance, leave; states and error codes."""
    topic = await t.create_topic("classic_group_life", 2)
    group = "classic_group_life.g"
    await find_coordinator(w, group, 0)
    # Kafka names the coordinator before it loaded the offsets partition (NOT_COORDINATOR)
    first = await _retrying(w, join(group, "", topic), lambda r: r.error_code)
    out.add("join without a member id", joined(first, ""))
    m1 = first.member_id
    r = await w.send(join(group, m1, topic))
    out.add("join", joined(r, m1))
    gen = r.generation_id
    out.add("describe while syncing", described(await w.send(describe(group))))
    out.add("heartbeat before sync", norm(await w.send(heartbeat(group, gen, m1))))
    assignment = encode_assignment({topic: [0, 1]})
    s = await w.send(sync(group, gen, m1, {m1: assignment}))
    out.add("sync", (s.error_code, s.protocol_name, bytes(s.assignment) == assignment))
    out.add("heartbeat", norm(await w.send(heartbeat(group, gen, m1))))
    out.add("heartbeat, wrong generation", norm(await w.send(heartbeat(group, gen + 5, m1))))
    out.add("heartbeat, unknown member", norm(await w.send(heartbeat(group, gen, "nobody"))))
    out.add("describe stable", described(await w.send(describe(group))))
    out.add("commit", norm(await w.send(commit(group, gen, m1, topic, 5))))
    out.add("commit, wrong generation", norm(await w.send(commit(group, gen + 5, m1, topic, 6))))
    out.add("commit, unknown member", norm(await w.send(commit(group, gen, "nobody", topic, 6))))
    out.add("fetch offsets", norm(await w.send(fetch_offsets(group, topic))))
    out.add("sync, wrong generation", norm(await w.send(sync(group, gen + 5, m1, {}))))
    out.add("sync, unknown member", norm(await w.send(sync(group, gen, "nobody", {}))))

    # a second member on a connection of its own (a pending JoinGroup holds its connection)
    async with pykaf.open_client(t.bootstrap) as client2:
        w2 = Wire(client2, w.node_id)
        second = await w2.send(join(group, "", topic))
        out.add("second join without a member id", joined(second, ""))
        m2 = second.member_id
        answers: dict[str, Any] = {}

        async def join_second() -> None:
            answers["m2"] = await w2.send(join(group, m2, topic))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join_second)
            await t.wait_for(
                lambda: w.send(describe(group)),
                lambda d: d.groups[0].group_state == "PreparingRebalance",
            )
            out.add("heartbeat during the rebalance", norm(await w.send(heartbeat(group, gen, m1))))
            out.add(
                "commit during the rebalance", norm(await w.send(commit(group, gen, m1, topic, 7)))
            )
            r1 = await w.send(join(group, m1, topic))
        r2 = answers["m2"]
        out.add("rejoin of the first", joined(r1, m1))
        out.add("join of the second", joined(r2, m2))
        gen2 = r1.generation_id
        leader, follower = (m1, m2) if r1.leader == m1 else (m2, m1)
        wl, wf = (w, w2) if leader == m1 else (w2, w)
        both = {
            leader: encode_assignment({topic: [0]}),
            follower: encode_assignment({topic: [1]}),
        }
        s1 = await wl.send(sync(group, gen2, leader, both))
        s2 = await wf.send(sync(group, gen2, follower, {}))
        out.add(
            "syncs",
            [
                (s.error_code, bytes(s.assignment) == both[m])
                for s, m in ((s1, leader), (s2, follower))
            ],
        )
        out.add("describe two members", described(await w.send(describe(group))))
        left = await w2.send(leave(group, m2))
        out.add("second leaves", norm(left))
    out.add("heartbeat after a leave", norm(await w.send(heartbeat(group, gen2, m1))))
    r3 = await w.send(join(group, m1, topic))
    out.add("rejoin alone", joined(r3, m1))
    await w.send(sync(group, r3.generation_id, m1, {m1: assignment}))
    out.add("leave unknown member", norm(await w.send(leave(group, "nobody"))))
    out.add("last leaves", norm(await w.send(leave(group, m1))))
    out.add("describe empty", described(await w.send(describe(group))))
    out.add("simple commit to an empty group", norm(await w.send(commit(group, -1, "", topic, 9))))
    out.add("member commit to an empty group", norm(await w.send(commit(group, 3, m1, topic, 9))))
    out.add("fetch offsets of an empty group", norm(await w.send(fetch_offsets(group, topic))))
    out.add("describe unknown group", described(await w.send(describe("classic_group_life.none"))))
    out.add(
        "heartbeat, unknown group", norm(await w.send(heartbeat("classic_group_life.none", 1, "m")))
    )
    out.add(
        "fetch offsets, unknown group",
        norm(await w.send(fetch_offsets("classic_group_life.none", topic))),
    )
