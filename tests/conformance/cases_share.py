"""Conformance cases of share groups (KIP-932): membership, share sessions, acquisition, admin.

Kafka initialises a partition's share state a moment after assigning it and
answers the first join before that; the cases wait for the assignment (as
a client does) and compare what it ends as. Which member gets which
partition is the assignor's choice, so assignments are compared by their
shape: how many partitions each member got and how many members share each.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio
from cases_txn import _retrying, find_coordinator
from conformance_harness import Answers, Target, Wire, case, norm
from conformance_util import batch, produce

from pykaf import protocol as P
from pykaf._admin.share_groups import alter_offsets_request as alter_offsets
from pykaf._admin.share_groups import delete_offsets_request as delete_offsets
from pykaf._admin.share_groups import describe_offsets_request as describe_offsets

H = P.ShareGroupHeartbeatRequest
F = P.ShareFetchRequest
A = P.ShareAcknowledgeRequest
IAC = P.IncrementalAlterConfigsRequest
GROUP_RESOURCE = 32

#: a ShareFetch that waits this long returns as soon as it acquired something
LONG_WAIT_MS = 5000
SHORT_WAIT_MS = 200

Acks = dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]


# -- requests ------------------------------------------------------------------------------


def configs(group: str, **values: str) -> Any:
    """IncrementalAlterConfigs SETting group configs (``share_record_lock_duration_ms=...``)."""
    return IAC(
        resources=[
            IAC.AlterConfigsResource(
                resource_type=GROUP_RESOURCE,
                resource_name=group,
                configs=[
                    IAC.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v)
                    for k, v in values.items()
                ],
            )
        ],
        validate_only=False,
    )


def heartbeat(group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    """A ShareGroupHeartbeat (a join gives its topics)."""
    return H(group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics)


def share_fetch(
    group: str,
    member: str,
    epoch: int,
    parts: list[tuple[uuid.UUID, int]] = (),  # type: ignore[assignment]
    acks: Acks | None = None,
    wait_ms: int = SHORT_WAIT_MS,
    forgotten: list[tuple[uuid.UUID, int]] = (),  # type: ignore[assignment]
) -> Any:
    """A ShareFetch of ``parts`` (with their acknowledgements), up to 100 records."""
    acks = acks or {}
    topics: dict[uuid.UUID, list[Any]] = {}
    for tp in [*parts, *(tp for tp in acks if tp not in parts)]:
        topics.setdefault(tp[0], []).append(
            F.FetchPartition(
                partition_index=tp[1],
                acknowledgement_batches=[
                    F.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
                    for a, b, t in acks.get(tp, [])
                ],
            )
        )
    gone: dict[uuid.UUID, list[int]] = {}
    for tid, p in forgotten:
        gone.setdefault(tid, []).append(p)
    return F(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[F.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[
            F.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in gone.items()
        ],
    )


def share_ack(group: str, member: str, epoch: int, acks: Acks, renew: bool = False) -> Any:
    """A ShareAcknowledge."""
    topics: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), batches in acks.items():
        topics.setdefault(tid, []).append(
            A.AcknowledgePartition(
                partition_index=p,
                acknowledgement_batches=[
                    A.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
                    for a, b, t in batches
                ],
            )
        )
    return A(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=[A.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
    )


# -- answers as data -------------------------------------------------------------------------


def fetched(resp: Any) -> dict[str, Any]:
    """A ShareFetch answer: codes, lock, and per partition what was acquired (records decoded)."""
    return {
        "error_code": resp.error_code,
        "lock_ms": resp.acquisition_lock_timeout_ms,
        "partitions": [
            {
                "partition": p.partition_index,
                "error_code": p.error_code,
                "acknowledge_error_code": p.acknowledge_error_code,
                "acquired": [
                    (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
                ],
                "offsets": sorted(r[0] for b in norm(p)["records"] for r in b["records"]),
            }
            for t in resp.responses
            for p in t.partitions
        ],
    }


def acked(resp: Any) -> dict[str, Any]:
    """A ShareAcknowledge answer: codes, lock, each partition's code."""
    return {
        "error_code": resp.error_code,
        "lock_ms": resp.acquisition_lock_timeout_ms,
        "partitions": [
            (p.partition_index, p.error_code) for t in resp.responses for p in t.partitions
        ],
    }


def beat(resp: Any) -> dict[str, Any]:
    """A heartbeat answer without its epoch (the brokers count group epochs differently)."""
    return {
        "error_code": resp.error_code,
        "member_id": resp.member_id,
        "epoch_given": resp.member_epoch > 0,
        "interval_given": resp.heartbeat_interval_ms > 0,
    }


def offsets_of(resp: Any) -> list[Any]:
    """A DescribeShareGroupOffsets answer: (topic, partition, start, lag, code) per partition."""
    (g,) = resp.groups
    return [
        g.error_code,
        [
            (t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in g.topics
            for p in t.partitions
        ],
    ]


def parts_of(resp: Any) -> list[int]:
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


# -- steps -------------------------------------------------------------------------------------


async def topic_id(w: Wire, topic: str) -> uuid.UUID:
    await w.client.refresh_metadata(topic)
    tid = w.client.metadata.topics[topic].topic_id
    return tid if isinstance(tid, uuid.UUID) else uuid.UUID(bytes=bytes(tid))


async def start_group(w: Wire, group: str, **values: str) -> None:
    """Find the coordinator and set the group's configs (starting at the earliest record)."""
    await find_coordinator(w, group, 0)
    settings = {"share_auto_offset_reset": "earliest", **values}
    resp = await w.send(configs(group, **settings))
    assert resp.responses[0].error_code == 0, resp


async def join(t: Target, w: Wire, group: str, member: str, topics: list[str]) -> Any:
    """Join and heartbeat until the member has partitions (Kafka assigns them a moment later)."""
    first = await _retrying(w, heartbeat(group, member, 0, topics), lambda r: r.error_code)
    assert first.error_code == 0, first
    state = {"epoch": first.member_epoch, "parts": parts_of(first) if first.assignment else []}

    async def probe() -> Any:
        r = await w.send(heartbeat(group, member, state["epoch"]))
        if r.error_code == 0:
            state["epoch"] = r.member_epoch
            if r.assignment is not None:
                state["parts"] = parts_of(r)
        return state["parts"]

    if not state["parts"]:
        await t.wait_for(probe, bool)
    return state


# -- cases ---------------------------------------------------------------------------------------


@case()
async def case_share_group_membership(t: Target, w: Wire, out: Answers) -> None:
    """Joining (several members on fewer partitions), heartbeats, errors, describe, list, leave."""
    topic = await t.create_topic("share_group_membership", 2)
    group = "share_group_membership.g"
    await start_group(w, group)
    out.add("empty member id", norm(await w.send(heartbeat(group, "", 0, [topic]))))
    out.add("join without topics", norm(await w.send(heartbeat(group, "m0", 0))))
    out.add("epoch -2", norm(await w.send(heartbeat(group, "m0", -2))))
    out.add("heartbeat, no such group", norm(await w.send(heartbeat(group, "m0", 3))))
    out.add("leave, no such group", norm(await w.send(heartbeat(group, "m0", -1))))
    epochs = {}
    got: dict[str, list[int]] = {}
    for m in ("m1", "m2", "m3"):
        joined = await w.send(heartbeat(group, m, 0, [topic]))
        out.add(f"{m} joins", beat(joined))
        epochs[m] = joined.member_epoch
        if joined.assignment is not None:
            got[m] = parts_of(joined)

    async def everyone() -> dict[str, list[int]]:
        for m in epochs:
            r = await w.send(heartbeat(group, m, epochs[m]))
            assert r.error_code == 0, r
            epochs[m] = r.member_epoch
            if r.assignment is not None:
                got[m] = parts_of(r)
        return got

    await t.wait_for(
        everyone,
        lambda g: (
            len(g) == 3 and all(g.values()) and {p for ps in g.values() for p in ps} == {0, 1}
        ),
    )
    out.add("every member has partitions: sizes", sorted(len(ps) for ps in got.values()))
    out.add("members per partition", [sum(p in ps for ps in got.values()) for p in (0, 1)])
    e1 = epochs["m1"]
    out.add("epoch ahead", norm(await w.send(heartbeat(group, "m1", e1 + 5))))
    out.add("a heartbeat at the member's epoch", beat(await w.send(heartbeat(group, "m1", e1))))
    out.add("unknown member", norm(await w.send(heartbeat(group, "nobody", 1))))
    described = await w.send(
        P.ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
    )
    (g,) = described.groups
    out.add(
        "describe",
        {
            "error_code": g.error_code,
            "state": g.group_state,
            "assignor": g.assignor_name,
            "epochs agree": g.group_epoch == g.assignment_epoch == e1,
            "members": sorted(
                (
                    m.member_id,
                    m.member_epoch == e1,
                    list(m.subscribed_topic_names),
                    sorted(got[m.member_id])
                    == sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                    [tp.topic_name for tp in m.assignment.topic_partitions],
                )
                for m in g.members
            ),
        },
    )
    listed = await w.send(P.ListGroupsRequest(states_filter=[], types_filter=["share"]))
    out.add(
        "listed as a share group",
        [
            (x.protocol_type, x.group_state, x.group_type)
            for x in listed.groups
            if x.group_id == group
        ],
    )
    consumer = await w.send(P.ListGroupsRequest(states_filter=[], types_filter=["consumer"]))
    out.add(
        "not listed as a consumer group",
        [x.group_id for x in consumer.groups if x.group_id == group],
    )
    out.add(
        "ConsumerGroupDescribe of a share group",
        norm(await w.send(P.ConsumerGroupDescribeRequest(group_ids=[group]))),
    )
    out.add("m2 leaves", norm(await w.send(heartbeat(group, "m2", -1))))
    out.add("m2 leaves again", norm(await w.send(heartbeat(group, "m2", -1))))
    out.add(
        "describe an unknown group",
        norm(await w.send(P.ShareGroupDescribeRequest(group_ids=[group + ".none"]))),
    )


@case()
async def case_share_fetch_and_acknowledge(t: Target, w: Wire, out: Answers) -> None:
    """Share sessions, acquisition, RELEASE, REJECT, ownership, implicit answers, close."""
    topic = await t.create_topic("share_fetch_and_acknowledge", 1)
    group = "share_fetch_and_acknowledge.g"
    await w.send(produce(topic, batch([b"0", b"1", b"2", b"3", b"4"])))
    await start_group(w, group)
    tid = await topic_id(w, topic)
    tp = (tid, 0)
    await join(t, w, group, "m1", [topic])
    out.add("acknowledge without a session", acked(await w.send(share_ack(group, "m1", 1, {}))))
    out.add("acknowledge with epoch 0", acked(await w.send(share_ack(group, "m1", 0, {}))))
    out.add("fetch without a session", fetched(await w.send(share_fetch(group, "m1", 3, [tp]))))
    out.add(
        "opening fetch with acknowledgements",
        fetched(await w.send(share_fetch(group, "m1", 0, [tp], {tp: [(0, 0, [1])]}))),
    )
    first = await w.send(share_fetch(group, "m1", 0, [tp], wait_ms=LONG_WAIT_MS))
    out.add("open: the whole batch acquired", fetched(first))
    out.add(
        "nothing more", fetched(await w.send(share_fetch(group, "m1", 1, wait_ms=SHORT_WAIT_MS)))
    )
    out.add("a wrong epoch", fetched(await w.send(share_fetch(group, "m1", 7))))
    out.add(
        "release 0-1, reject 2, accept 3",
        acked(await w.send(share_ack(group, "m1", 2, {tp: [(0, 3, [2, 2, 3, 1])]}))),
    )
    out.add(
        "past the records in flight",
        acked(await w.send(share_ack(group, "m1", 3, {tp: [(99, 99, [1])]}))),
    )
    out.add("an unknown type", acked(await w.send(share_ack(group, "m1", 4, {tp: [(4, 4, [7])]}))))
    out.add(
        "RENEW without IsRenewAck",
        acked(await w.send(share_ack(group, "m1", 5, {tp: [(4, 4, [4])]}))),
    )
    out.add("first after last", acked(await w.send(share_ack(group, "m1", 6, {tp: [(4, 3, [1])]}))))
    out.add(
        "types not matching the offsets",
        acked(await w.send(share_ack(group, "m1", 7, {tp: [(3, 4, [1, 1, 1])]}))),
    )
    out.add(
        "accepting a settled record again",
        acked(await w.send(share_ack(group, "m1", 8, {tp: [(3, 3, [1])]}))),
    )
    out.add(
        "the released records come back",
        fetched(await w.send(share_fetch(group, "m1", 9, wait_ms=LONG_WAIT_MS))),
    )
    out.add(
        "acknowledging with a fetch",
        fetched(await w.send(share_fetch(group, "m1", 10, acks={tp: [(0, 1, [1])]}))),
    )
    await join(t, w, group, "m2", [topic])
    out.add(
        "another member finds nothing free",
        fetched(await w.send(share_fetch(group, "m2", 0, [tp], wait_ms=SHORT_WAIT_MS))),
    )
    out.add(
        "it may not settle m1's records",
        acked(await w.send(share_ack(group, "m2", 1, {tp: [(4, 4, [1])]}))),
    )
    out.add(
        "an unknown partition",
        acked(await w.send(share_ack(group, "m2", 2, {(tid, 7): [(0, 0, [1])]}))),
    )
    out.add("m1 closes its session", acked(await w.send(share_ack(group, "m1", -1, {}))))
    out.add("the closed session is gone", fetched(await w.send(share_fetch(group, "m1", 11))))
    out.add(
        "m2 gets what m1 held",
        fetched(await w.send(share_fetch(group, "m2", 3, wait_ms=LONG_WAIT_MS))),
    )
    out.add(
        "m2 closes with acknowledgements",
        fetched(await w.send(share_fetch(group, "m2", -1, [tp], {tp: [(4, 4, [1])]}))),
    )
    await t.wait_for(
        lambda: w.send(describe_offsets(group, None)),
        lambda r: offsets_of(r)[1] and offsets_of(r)[1][0][3] == 0,
    )
    out.add(
        "an unknown partition fails the fetch",
        fetched(await w.send(share_fetch(group, "m2", 0, [(tid, 5)]))),
    )


@case()
async def case_share_lock_expiry(t: Target, w: Wire, out: Answers) -> None:
    """A lock that runs out redelivers; at the delivery count limit the record is archived."""
    topic = await t.create_topic("share_lock_expiry", 1)
    group = "share_lock_expiry.g"
    await w.send(produce(topic, batch([b"a", b"b"])))
    await start_group(
        w, group, share_record_lock_duration_ms="1000", share_delivery_count_limit="2"
    )
    tp = (await topic_id(w, topic), 0)
    await join(t, w, group, "m1", [topic])
    out.add(
        "first delivery",
        fetched(await w.send(share_fetch(group, "m1", 0, [tp], wait_ms=LONG_WAIT_MS))),
    )
    await trio.sleep(1.3)
    out.add(
        "too late to settle", acked(await w.send(share_ack(group, "m1", 1, {tp: [(0, 0, [1])]})))
    )
    out.add(
        "redelivered after the lock",
        fetched(await w.send(share_fetch(group, "m1", 2, wait_ms=LONG_WAIT_MS))),
    )
    out.add(
        "release one at the limit",
        acked(await w.send(share_ack(group, "m1", 3, {tp: [(0, 0, [2])]}))),
    )
    await trio.sleep(1.3)
    out.add(
        "both archived: nothing comes back",
        fetched(await w.send(share_fetch(group, "m1", 4, wait_ms=1500))),
    )
    lag = await t.wait_for(
        lambda: w.send(describe_offsets(group, None)),
        lambda r: offsets_of(r)[1] and offsets_of(r)[1][0][3] == 0,
    )
    out.add("nothing left to deliver", offsets_of(lag)[1][0][3])


@case()
async def case_share_group_admin(t: Target, w: Wire, out: Answers) -> None:
    """Start offsets described, altered and deleted; a share group deleted; group configs."""
    topic = await t.create_topic("share_group_admin", 2)
    group = "share_group_admin.g"
    await w.send(produce(topic, batch([b"a", b"b", b"c"])))
    await start_group(w, group)
    tp = (await topic_id(w, topic), 0)
    out.add(
        "offsets of an unknown group",
        offsets_of(await w.send(describe_offsets(group + ".none", None))),
    )
    await join(t, w, group, "m1", [topic])
    out.add("assigned, never fetched", offsets_of(await w.send(describe_offsets(group, None))))
    out.add("alter with a member", norm(await w.send(alter_offsets(group, {(topic, 0): 1}))))
    out.add("delete offsets with a member", norm(await w.send(delete_offsets(group, [topic]))))
    out.add(
        "delete the group with a member",
        norm(await w.send(P.DeleteGroupsRequest(groups_names=[group]))),
    )
    out.add("m1 leaves", beat(await w.send(heartbeat(group, "m1", -1))))
    out.add(
        "alter when empty", norm(await w.send(alter_offsets(group, {(topic, 0): 1, (topic, 9): 0})))
    )
    out.add("after alter", offsets_of(await w.send(describe_offsets(group, [(topic, 0)]))))
    await join(t, w, group, "m2", [topic])
    out.add(
        "delivery from the new start",
        fetched(await w.send(share_fetch(group, "m2", 0, [tp], wait_ms=LONG_WAIT_MS))),
    )
    await w.send(share_ack(group, "m2", -1, {tp: [(1, 2, [1])]}))
    await w.send(heartbeat(group, "m2", -1))
    listed = await w.send(P.ListGroupsRequest(states_filter=["Empty"], types_filter=["share"]))
    out.add(
        "listed Empty",
        [
            (x.protocol_type, x.group_state, x.group_type)
            for x in listed.groups
            if x.group_id == group
        ],
    )
    out.add(
        "delete offsets",
        norm(await w.send(delete_offsets(group, [topic, "share_group_admin.none"]))),
    )
    out.add("offsets after delete", offsets_of(await w.send(describe_offsets(group, None))))
    out.add("delete the group", norm(await w.send(P.DeleteGroupsRequest(groups_names=[group]))))
    out.add("delete it again", norm(await w.send(P.DeleteGroupsRequest(groups_names=[group]))))
    out.add(
        "describe the deleted group",
        norm(await w.send(P.ShareGroupDescribeRequest(group_ids=[group]))),
    )
    for label, values in [
        ("bad share.auto.offset.reset", {"share_auto_offset_reset": "sideways"}),
        ("share.record.lock.duration.ms below the floor", {"share_record_lock_duration_ms": "10"}),
        ("share.record.lock.duration.ms not a number", {"share_record_lock_duration_ms": "x"}),
        ("share.delivery.count.limit below 2", {"share_delivery_count_limit": "1"}),
        ("an unknown group config", {"share_nonsense": "1"}),
        ("by_duration", {"share_auto_offset_reset": "by_duration:PT1H"}),
        (
            "good values",
            {"share_record_lock_duration_ms": "2000", "share_isolation_level": "read_committed"},
        ),
    ]:
        resp = await w.send(configs(group, **values))
        out.add(label, [(r.error_code, r.resource_type, r.resource_name) for r in resp.responses])
