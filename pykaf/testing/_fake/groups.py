"""The fake cluster's group coordinator: Kafka's classic group protocol and the offset store.

Groups follow Kafka's state machine (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead). A JoinGroup waits, inside its handler,
until every known member rejoined or the rebalance timeout passed; a
follower's SyncGroup waits for the leader's assignments. Session timeouts
are enforced when the group is next looked at: every group request, and
every waiting JoinGroup or SyncGroup (which wakes at the earliest deadline),
first expires the members whose session ran out, as Kafka's timers would
have. A group nobody asks about keeps its dead members until someone does.

The coordinator's state lives in ``group_coordinator.py``; this module answers
the group and offset requests with it. A group id that belongs to a
consumer-protocol group sends JoinGroup, SyncGroup, Heartbeat and LeaveGroup to
``classic_members.py`` (KIP-848's online migration).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake import classic_members, consumer_groups, share_groups
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.consumer_coordinator import ConsumerGroupState
from pykaf.testing._fake.group_coordinator import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    CommittedOffset,
    Group,
    GroupCoordinator,
    Member,
    TopicPartition,
    clock,
    wall_ms,
)

MAX_METADATA = 4096

NOT_COORDINATOR = errors.NotCoordinatorError.code
UNKNOWN_MEMBER = errors.UnknownMemberIdError.code
ILLEGAL_GENERATION = errors.IllegalGenerationError.code
REBALANCING = errors.RebalanceInProgressError.code
FENCED = errors.FencedInstanceIdError.code
INCONSISTENT = errors.InconsistentGroupProtocolError.code
UNKNOWN_PARTITION = errors.UnknownTopicOrPartitionError.code


# ------------------------------------------------------------------ helpers


def _coordinates(ctx: RequestContext, group_id: str) -> bool:
    return ctx.cluster.coordinator_for(0, group_id) == ctx.broker.node_id


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.cluster.groups


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.session.peer.rsplit(":", 1)[0]


def _consumer_group(ctx: RequestContext, group_id: str) -> ConsumerGroupState | None:
    """The consumer-protocol (KIP-848) group of ``group_id``, if it is one."""
    return ctx.cluster.consumer_groups.group(group_id)


def _partition_known(ctx: RequestContext, topic: str, partition: int) -> bool:
    return ctx.cluster.partition(topic, partition) is not None


def _subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a consumer protocol subscription (empty when it does not parse)."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


# ------------------------------------------------------------------ FindCoordinator


def _find_one(ctx: RequestContext, key_type: int, key: str) -> tuple[int, int, str, int]:
    """(error, node id, host, port) of the coordinator of ``key``."""
    if key_type not in (0, 1):
        return errors.InvalidRequestError.code, -1, "", -1
    node = ctx.cluster.nodes[ctx.cluster.coordinator_for(key_type, key)]
    if not node.up:
        return errors.CoordinatorNotAvailableError.code, -1, "", -1
    return 0, node.node_id, node.host, node.port


async def find_coordinator(ctx: RequestContext, req: P.FindCoordinatorRequest, version: int) -> Any:
    """The broker coordinating a group or a transactional id (v4: a batch of keys)."""
    if version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, node_id, host, port = _find_one(ctx, req.key_type, key)
            coordinators.append(
                P.FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node_id, host=host, port=port, error_code=code
                )
            )
        return P.FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, node_id, host, port = _find_one(ctx, req.key_type, req.key)
    return P.FindCoordinatorResponse(
        throttle_time_ms=0, error_code=code, node_id=node_id, host=host, port=port
    )


def _find_coordinator_error(req: Any, version: int, code: int) -> P.FindCoordinatorResponse:
    if version >= 4:
        return P.FindCoordinatorResponse(
            coordinators=[
                P.FindCoordinatorResponse.Coordinator(
                    key=k, node_id=-1, host="", port=-1, error_code=code
                )
                for k in req.coordinator_keys
            ]
        )
    return P.FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)


# ------------------------------------------------------------------ JoinGroup


def _join_error(req: Any, version: int, code: int, member_id: str = "") -> P.JoinGroupResponse:
    return classic_members.join_error(code, member_id, version)


async def join_group(ctx: RequestContext, req: P.JoinGroupRequest, version: int) -> Any:
    """Join (or rejoin) a group; waits for the join phase to end."""
    if not _coordinates(ctx, req.group_id):
        return _join_error(req, version, NOT_COORDINATOR, req.member_id)
    if not req.group_id:
        return _join_error(req, version, errors.InvalidGroupIdError.code, req.member_id)
    modern = _consumer_group(ctx, req.group_id)
    if modern is not None:
        if modern.members:  # KIP-848's migration: a classic member in a consumer group
            return classic_members.join(ctx, modern, req, version)
        del ctx.cluster.consumer_groups.groups[req.group_id]  # an empty one turns classic
    coord = _coordinator(ctx)
    g = coord.get_or_create(req.group_id)
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    if not req.protocol_type or not protocols:
        return _join_error(req, version, INCONSISTENT, req.member_id)
    if g.members and (
        req.protocol_type != g.protocol_type
        or not coord.candidates([*g.members.values(), _probe(protocols)])
    ):
        return _join_error(req, version, INCONSISTENT, req.member_id)
    instance_id = req.group_instance_id if version >= 5 else None
    rebalance_ms = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
    now = clock()

    def new_member(member_id: str) -> Member:
        return Member(
            member_id=member_id,
            instance_id=instance_id,
            client_id=ctx.header.client_id or "",
            client_host=_client_host(ctx),
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=req.protocol_type,
            protocols=protocols,
        )

    member_id = req.member_id
    m: Member | None
    if not member_id:
        member_id = f"{ctx.header.client_id or ''}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in g.static:
            return await _replace_static(
                coord, g, g.members[g.static[instance_id]], new_member(member_id), version
            )
        if instance_id is None and version >= 4:
            g.pending[member_id] = now + req.session_timeout_ms / 1000
            return _join_error(req, version, errors.MemberIdRequiredError.code, member_id)
        m = new_member(member_id)
        g.members[member_id] = m
        if instance_id is not None:
            g.static[instance_id] = member_id
    elif member_id in g.pending:
        del g.pending[member_id]
        m = g.members[member_id] = new_member(member_id)
    else:
        if g.fenced(member_id, instance_id):
            return _join_error(req, version, FENCED, member_id)
        m = g.members.get(member_id)
        if m is None:
            return _join_error(req, version, UNKNOWN_MEMBER, member_id)
        unchanged = m.protocols == protocols
        m.protocols = protocols
        m.session_timeout_ms, m.rebalance_timeout_ms = req.session_timeout_ms, rebalance_ms
        if g.state in (STABLE, COMPLETING) and unchanged and member_id != g.leader:
            # A follower rejoining with what it had: the current generation again.
            m.touch(now)
            resp = coord.join_response(g, m, skip_assignment=False)
            return resp
    m.touch(now)
    g.protocol_type = req.protocol_type
    return await _join_and_wait(coord, g, m, version)


def _probe(protocols: list[tuple[str, bytes]]) -> Member:
    return Member("", None, "", "", 0, 0, "", protocols)


async def _join_and_wait(
    coord: GroupCoordinator, g: Group, m: Member, version: int
) -> P.JoinGroupResponse:
    if g.state != PREPARING:
        coord.prepare_rebalance(g)
    elif g.initial_delay:
        # Kafka's initial delay grows with every new member, up to the rebalance timeout.
        delay = coord.initial_rebalance_delay_ms / 1000
        cap = g.rebalance_started + max(m.rebalance_timeout_ms / 1000, delay)
        g.rebalance_deadline = min(clock() + delay, cap)
    m.awaiting_join = True
    m.join_result = None
    coord.maybe_complete_join(g)
    await coord.wait(g, m, lambda: m.join_result is not None or g.members.get(m.member_id) is not m)
    if m.join_result is None:
        return _join_error(None, version, UNKNOWN_MEMBER, m.member_id)
    return m.join_result


async def _replace_static(
    coord: GroupCoordinator, g: Group, old: Member, new: Member, version: int
) -> P.JoinGroupResponse:
    """A static member came back under a new member id: the old id is fenced."""
    del g.members[old.member_id]
    new.assignment = old.assignment
    g.members[new.member_id] = new
    assert new.instance_id is not None
    g.static[new.instance_id] = new.member_id
    was_leader = g.leader == old.member_id
    if was_leader:
        g.leader = new.member_id
    new.touch(clock())
    old.join_result = None
    g.notify()
    if g.state == STABLE and old.protocols == new.protocols:
        # KIP-345: no rebalance. The leader learns the members but must not
        # reassign (v9 says so; before, its SyncGroup is answered with what it had).
        return coord.join_response(g, new, skip_assignment=was_leader and version >= 9)
    return await _join_and_wait(coord, g, new, version)


# ------------------------------------------------------------------ SyncGroup


def _sync_error(code: int) -> P.SyncGroupResponse:
    return P.SyncGroupResponse(throttle_time_ms=0, error_code=code, assignment=b"")


def _member_check(
    g: Group | None, member_id: str, instance_id: str | None, generation: int
) -> tuple[int, Member | None]:
    """The usual checks of a member's request: fenced, unknown, stale generation."""
    if g is None:
        return UNKNOWN_MEMBER, None
    if g.fenced(member_id, instance_id):
        return FENCED, None
    m = g.members.get(member_id)
    if m is None:
        return UNKNOWN_MEMBER, None
    if generation != g.generation:
        return ILLEGAL_GENERATION, m
    return 0, m


async def sync_group(ctx: RequestContext, req: P.SyncGroupRequest, version: int) -> Any:
    """The leader hands out assignments; followers wait for theirs."""
    if not _coordinates(ctx, req.group_id):
        return _sync_error(NOT_COORDINATOR)
    modern = _consumer_group(ctx, req.group_id)
    if modern is not None:
        if not modern.members:
            return _sync_error(UNKNOWN_MEMBER)
        return classic_members.sync(ctx, modern, req, version)
    coord = _coordinator(ctx)
    g = coord.group(req.group_id)
    instance_id = req.group_instance_id if version >= 3 else None
    code, m = _member_check(g, req.member_id, instance_id, req.generation_id)
    if code or g is None or m is None:
        return _sync_error(code)
    if version >= 5 and (
        (req.protocol_type is not None and req.protocol_type != g.protocol_type)
        or (req.protocol_name is not None and req.protocol_name != g.protocol)
    ):
        return _sync_error(INCONSISTENT)
    m.touch(clock())
    if g.state == PREPARING:
        return _sync_error(REBALANCING)
    generation = g.generation
    if g.state == COMPLETING:
        if m.member_id == g.leader:
            given = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for other in g.members.values():
                other.assignment = given.get(other.member_id, b"")
            g.state = STABLE
            g.notify()
        else:
            await coord.wait(
                g,
                m,
                lambda: (
                    g.state != COMPLETING
                    or g.generation != generation
                    or g.members.get(m.member_id) is not m
                ),
            )
    if g.members.get(m.member_id) is not m:
        return _sync_error(UNKNOWN_MEMBER)
    if g.state != STABLE or g.generation != generation:
        return _sync_error(REBALANCING)
    return P.SyncGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        protocol_type=g.protocol_type,
        protocol_name=g.protocol,
        assignment=m.assignment,
    )


# ------------------------------------------------------------------ Heartbeat


async def heartbeat(ctx: RequestContext, req: P.HeartbeatRequest, version: int) -> Any:
    """Keep a member's session; tell it when a rebalance runs."""
    if not _coordinates(ctx, req.group_id):
        return P.HeartbeatResponse(throttle_time_ms=0, error_code=NOT_COORDINATOR)
    modern = _consumer_group(ctx, req.group_id)
    if modern is not None:
        return classic_members.heartbeat(ctx, modern, req, version)
    g = _coordinator(ctx).group(req.group_id)
    instance_id = req.group_instance_id if version >= 3 else None
    code, m = _member_check(g, req.member_id, instance_id, req.generation_id)
    if m is not None and code != FENCED:
        m.touch(clock())
    if code == 0 and g is not None and g.state == PREPARING:
        code = REBALANCING
    return P.HeartbeatResponse(throttle_time_ms=0, error_code=code)


# ------------------------------------------------------------------ LeaveGroup


async def leave_group(ctx: RequestContext, req: P.LeaveGroupRequest, version: int) -> Any:
    """Members leave (v3+: a batch, static members by instance id); the rest rebalance."""
    if not _coordinates(ctx, req.group_id):
        return P.LeaveGroupResponse(throttle_time_ms=0, error_code=NOT_COORDINATOR, members=[])
    modern = _consumer_group(ctx, req.group_id)
    if modern is not None:
        return classic_members.leave(ctx, modern, req, version)
    coord = _coordinator(ctx)
    g = coord.group(req.group_id)
    leaving = classic_members.leaving_members(req, version)
    results = []
    removed = False
    for member_id, instance_id in leaving:
        code = UNKNOWN_MEMBER
        found = member_id
        if g is not None:
            if instance_id is not None:
                current = g.static.get(instance_id)
                if current is not None and member_id and member_id != current:
                    code = FENCED
                elif current is not None:
                    found = current
            if code != FENCED:
                if found in g.pending:
                    del g.pending[found]
                    code = 0
                elif found in g.members:
                    coord.remove_member(g, g.members[found])
                    code, removed = 0, True
        results.append(
            P.LeaveGroupResponse.MemberResponse(
                member_id=member_id, group_instance_id=instance_id, error_code=code
            )
        )
    if removed and g is not None:
        coord.members_left(g)
    top = results[0].error_code if version < 3 else 0
    return P.LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=results)


# ------------------------------------------------------------------ OffsetCommit


def _commit_check(g: Group | None, generation: int, member_id: str, instance_id: str | None) -> int:
    """Kafka's checks of a group commit (a simple commit: generation -1 on an empty group)."""
    if generation < 0 and (g is None or g.state == EMPTY):
        return 0
    if g is None:
        return UNKNOWN_MEMBER
    if member_id in g.pending:
        return UNKNOWN_MEMBER
    if g.state == COMPLETING:
        return REBALANCING
    if g.fenced(member_id, instance_id):
        return FENCED
    m = g.members.get(member_id)
    if m is None:
        return UNKNOWN_MEMBER
    if generation != g.generation:
        return ILLEGAL_GENERATION
    m.touch(clock())
    return 0


def _partition_codes(topics: Any, code: int, response_topic: Any, response_partition: Any) -> Any:
    return [
        response_topic(
            name=t.name,
            partitions=[
                response_partition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _store_offsets(
    ctx: RequestContext,
    topics: Any,
    code: int,
    store: Callable[[TopicPartition, CommittedOffset], None],
    response_topic: Any,
    response_partition: Any,
    *,
    leader_epochs: bool,
) -> Any:
    """Check and store each partition's offset; the per-partition answers."""
    if code:
        return _partition_codes(topics, code, response_topic, response_partition)
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            pcode = 0
            if not _partition_known(ctx, t.name, p.partition_index):
                pcode = UNKNOWN_PARTITION
            elif p.committed_metadata is not None and len(p.committed_metadata) > MAX_METADATA:
                pcode = errors.OffsetMetadataTooLargeError.code
            else:
                store(
                    (t.name, p.partition_index),
                    CommittedOffset(
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch if leader_epochs else -1,
                        metadata=p.committed_metadata,
                        commit_timestamp_ms=wall_ms(),
                    ),
                )
            parts.append(response_partition(partition_index=p.partition_index, error_code=pcode))
        out.append(response_topic(name=t.name, partitions=parts))
    return out


async def offset_commit(ctx: RequestContext, req: P.OffsetCommitRequest, version: int) -> Any:
    """Commit offsets for a group's member, or a simple commit (generation -1, empty group)."""
    resp_t, resp_p = (
        P.OffsetCommitResponse.OffsetCommitResponseTopic,
        (P.OffsetCommitResponse.OffsetCommitResponsePartition),
    )
    if not _coordinates(ctx, req.group_id):
        code = NOT_COORDINATOR
    else:
        coord = _coordinator(ctx)
        g = coord.group(req.group_id)
        instance_id = req.group_instance_id if version >= 7 else None
        epoch = req.generation_id_or_member_epoch
        parts = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        modern = consumer_groups.commit_check(
            ctx, req.group_id, req.member_id, epoch, version, parts
        )
        if modern is not None:
            code = modern  # a consumer-protocol (KIP-848) group
        else:
            code = _commit_check(g, epoch, req.member_id, instance_id)
            if code == 0 and g is None:
                coord.get_or_create(req.group_id)
    return P.OffsetCommitResponse(
        throttle_time_ms=0,
        topics=_store_offsets(
            ctx,
            req.topics,
            code,
            lambda tp, off: _coordinator(ctx).commit(req.group_id, tp, off),
            resp_t,
            resp_p,
            leader_epochs=version >= 6,
        ),
    )


def _offset_commit_error(req: Any, version: int, code: int) -> P.OffsetCommitResponse:
    return P.OffsetCommitResponse(
        topics=_partition_codes(
            req.topics,
            code,
            P.OffsetCommitResponse.OffsetCommitResponseTopic,
            P.OffsetCommitResponse.OffsetCommitResponsePartition,
        )
    )


# ------------------------------------------------------------------ TxnOffsetCommit


async def txn_offset_commit(
    ctx: RequestContext, req: P.TxnOffsetCommitRequest, version: int
) -> Any:
    """Offsets a transaction commits: held until it ends.

    KIP-447 member checks on v3; KIP-890 verification that the group is in
    the producer's open transaction at its current epoch.
    """
    resp_t, resp_p = (
        P.TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic,
        (P.TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition),
    )
    coord = _coordinator(ctx)
    code = 0
    if not _coordinates(ctx, req.group_id):
        code = NOT_COORDINATOR
    elif version >= 3:
        g = coord.group(req.group_id)
        if req.member_id and (g is None or req.member_id not in g.members):
            code = UNKNOWN_MEMBER
        elif g is not None and g.fenced(req.member_id, req.group_instance_id):
            code = FENCED
        elif req.generation_id >= 0 and (g is None or req.generation_id != g.generation):
            code = ILLEGAL_GENERATION
    if code == 0 and version >= 5 and ctx.cluster.transaction_version >= 2:
        # transactions V2: the group joins the transaction (no AddOffsetsToTxn)
        ctx.cluster.transactions.add_implicitly(
            req.producer_id, req.producer_epoch, group=req.group_id
        )
    if code == 0:
        code = ctx.cluster.transactions.verify_offsets(
            req.producer_id, req.producer_epoch, req.group_id
        )
    if code == 0:
        coord.get_or_create(req.group_id)
    return P.TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=_store_offsets(
            ctx,
            req.topics,
            code,
            lambda tp, off: coord.add_transaction_offset(req.producer_id, req.group_id, tp, off),
            resp_t,
            resp_p,
            leader_epochs=version >= 2,
        ),
    )


def _txn_offset_commit_error(req: Any, version: int, code: int) -> P.TxnOffsetCommitResponse:
    return P.TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=_partition_codes(
            req.topics,
            code,
            P.TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic,
            P.TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition,
        ),
    )


# ------------------------------------------------------------------ OffsetFetch

#: (partition, offset, leader epoch, metadata, error)
_Fetched = tuple[int, int, int, str | None, int]


def _fetch_group(
    ctx: RequestContext, group_id: str, topics: list[tuple[str, list[int]]] | None, stable: bool
) -> tuple[int, list[tuple[str, list[_Fetched]]]]:
    """(group error, [(topic, [(partition, offset, epoch, metadata, error)])])."""
    if not _coordinates(ctx, group_id):
        return NOT_COORDINATOR, []
    coord = _coordinator(ctx)
    stored = coord.offsets.get(group_id, {})
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(stored):
            by_topic.setdefault(t, []).append(p)
        topics = list(by_topic.items())
    out = []
    for name, partitions in topics:
        parts: list[_Fetched] = []
        for p in partitions:
            if stable and coord.has_pending(group_id, (name, p)):
                parts.append((p, -1, -1, "", errors.UnstableOffsetCommitError.code))
                continue
            off = stored.get((name, p))
            if off is None:
                parts.append((p, -1, -1, "", 0))
            else:
                parts.append((p, off.offset, off.leader_epoch, off.metadata, 0))
        out.append((name, parts))
    return 0, out


def _fetched_topics(
    found: list[tuple[str, list[_Fetched]]], topic_cls: Any, partition_cls: Any
) -> list[Any]:
    return [
        topic_cls(
            name=name,
            partitions=[
                partition_cls(
                    partition_index=p,
                    committed_offset=o,
                    committed_leader_epoch=e,
                    metadata=md,
                    error_code=c,
                )
                for p, o, e, md, c in parts
            ],
        )
        for name, parts in found
    ]


def _wanted(topics: Any) -> list[tuple[str, list[int]]] | None:
    return None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]


async def offset_fetch(ctx: RequestContext, req: P.OffsetFetchRequest, version: int) -> Any:
    """A group's committed offsets (v8: several groups); require_stable waits for transactions."""
    R = P.OffsetFetchResponse
    stable = version >= 7 and req.require_stable
    if version >= 8:
        groups = []
        for rg in req.groups:
            code, found = _fetch_group(ctx, rg.group_id, _wanted(rg.topics), stable)
            groups.append(
                R.OffsetFetchResponseGroup(
                    group_id=rg.group_id,
                    error_code=code,
                    topics=_fetched_topics(
                        found, R.OffsetFetchResponseTopics, R.OffsetFetchResponsePartitions
                    ),
                )
            )
        return R(throttle_time_ms=0, groups=groups)
    wanted = _wanted(req.topics)
    code, found = _fetch_group(ctx, req.group_id, wanted, stable)
    if code and version < 2 and wanted is not None:
        # v0-1 have no top-level error: each partition carries it.
        found = [(name, [(p, -1, -1, "", code) for p in ps]) for name, ps in wanted]
    return R(
        throttle_time_ms=0,
        error_code=code,
        topics=_fetched_topics(found, R.OffsetFetchResponseTopic, R.OffsetFetchResponsePartition),
    )


def _offset_fetch_error(req: Any, version: int, code: int) -> P.OffsetFetchResponse:
    if version >= 8:
        return P.OffsetFetchResponse(
            groups=[
                P.OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=code, topics=[]
                )
                for g in req.groups
            ]
        )
    return P.OffsetFetchResponse(error_code=code, topics=[])


# ------------------------------------------------------------------ admin


def _described(coord: GroupCoordinator, group_id: str) -> P.DescribeGroupsResponse.DescribedGroup:
    g = coord.group(group_id)
    if g is None:
        return P.DescribeGroupsResponse.DescribedGroup(
            error_code=0,
            group_id=group_id,
            group_state=DEAD,
            protocol_type="",
            protocol_data="",
            members=[],
        )
    stable = g.state == STABLE
    return P.DescribeGroupsResponse.DescribedGroup(
        error_code=0,
        group_id=group_id,
        group_state=g.state,
        protocol_type=g.protocol_type or "",
        protocol_data=(g.protocol or "") if stable else "",
        members=[
            P.DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(g.protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in g.members.values()
        ],
    )


async def describe_groups(ctx: RequestContext, req: P.DescribeGroupsRequest, version: int) -> Any:
    """State, protocol and members of each group (metadata and assignments when Stable)."""
    coord = _coordinator(ctx)
    out = []
    for group_id in req.groups:
        if not _coordinates(ctx, group_id):
            out.append(_describe_error_group(group_id, NOT_COORDINATOR))
        else:
            out.append(_described(coord, group_id))
    return P.DescribeGroupsResponse(throttle_time_ms=0, groups=out)


def _describe_error_group(group_id: str, code: int) -> P.DescribeGroupsResponse.DescribedGroup:
    return P.DescribeGroupsResponse.DescribedGroup(
        error_code=code,
        group_id=group_id,
        group_state="",
        protocol_type="",
        protocol_data="",
        members=[],
    )


def _describe_groups_error(req: Any, version: int, code: int) -> P.DescribeGroupsResponse:
    return P.DescribeGroupsResponse(groups=[_describe_error_group(g, code) for g in req.groups])


async def list_groups(ctx: RequestContext, req: P.ListGroupsRequest, version: int) -> Any:
    """The groups this broker coordinates (v4: filtered by state; v5: by type)."""
    coord = _coordinator(ctx)
    states = {s.lower() for s in req.states_filter} if version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if version >= 5 else set()
    modern = ctx.cluster.consumer_groups
    out = []
    for group_id in sorted(modern.groups):  # consumer-protocol (KIP-848) groups
        cg = modern.group(group_id)
        if cg is None or not _coordinates(ctx, group_id):
            continue
        if (states and cg.state.lower() not in states) or (types and "consumer" not in types):
            continue
        out.append(
            P.ListGroupsResponse.ListedGroup(
                group_id=group_id,
                protocol_type="consumer",
                group_state=cg.state,
                group_type="consumer",
            )
        )
    for group_id, state in share_groups.listed(ctx):  # share groups (KIP-932)
        if (states and state.lower() not in states) or (types and "share" not in types):
            continue
        out.append(
            P.ListGroupsResponse.ListedGroup(
                group_id=group_id, protocol_type="share", group_state=state, group_type="share"
            )
        )
    shared = ctx.cluster.share_groups.groups
    # (after the consumer groups: looking at one may have made it classic)
    names = sorted(set(coord.groups) | {g for g, offs in coord.offsets.items() if offs})
    for group_id in names:
        if not _coordinates(ctx, group_id) or group_id in modern.groups or group_id in shared:
            continue
        state = coord.state_of(group_id)
        if state == DEAD:
            state = EMPTY  # only committed offsets: Kafka lists it Empty
        if states and state.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        g = coord.groups.get(group_id)
        out.append(
            P.ListGroupsResponse.ListedGroup(
                group_id=group_id,
                protocol_type=(g.protocol_type if g is not None else None) or "",
                group_state=state,
                group_type="classic",
            )
        )
    return P.ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=out)


async def delete_groups(ctx: RequestContext, req: P.DeleteGroupsRequest, version: int) -> Any:
    """Delete empty groups and their offsets (NON_EMPTY_GROUP while members remain)."""
    coord = _coordinator(ctx)
    results = []
    for group_id in req.groups_names:
        code = 0
        shared = share_groups.delete(ctx, group_id) if _coordinates(ctx, group_id) else None
        if not _coordinates(ctx, group_id):
            code = NOT_COORDINATOR
        elif shared is not None:
            code = shared
        elif not coord.exists(group_id):
            code = errors.GroupIdNotFoundError.code
        elif coord.state_of(group_id) not in (EMPTY, DEAD):
            code = errors.GroupNotEmptyError.code
        else:
            g = coord.groups.pop(group_id, None)
            coord.offsets.pop(group_id, None)
            if g is not None:
                g.state = DEAD
                g.notify()
        results.append(
            P.DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code)
        )
    return P.DeleteGroupsResponse(throttle_time_ms=0, results=results)


def _delete_groups_error(req: Any, version: int, code: int) -> P.DeleteGroupsResponse:
    return P.DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            P.DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=code)
            for g in req.groups_names
        ],
    )


async def offset_delete(ctx: RequestContext, req: P.OffsetDeleteRequest, version: int) -> Any:
    """Delete a group's committed offsets of topics it does not consume."""
    resp_t = P.OffsetDeleteResponse.OffsetDeleteResponseTopic
    resp_p = P.OffsetDeleteResponse.OffsetDeleteResponsePartition
    coord = _coordinator(ctx)
    top = 0
    if not _coordinates(ctx, req.group_id):
        top = NOT_COORDINATOR
    elif not coord.exists(req.group_id):
        top = errors.GroupIdNotFoundError.code
    g = coord.group(req.group_id) if top == 0 else None
    subscribed: set[str] = set()
    if g is not None and g.members:
        if g.protocol_type != "consumer":
            top = errors.GroupNotEmptyError.code
        else:
            for m in g.members.values():
                subscribed |= _subscribed_topics(m.metadata(g.protocol))
    if top:
        return P.OffsetDeleteResponse(error_code=top, throttle_time_ms=0, topics=[])
    stored = coord.offsets.get(req.group_id, {})
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = 0
            if t.name in subscribed:
                code = errors.GroupSubscribedToTopicError.code
            elif not _partition_known(ctx, t.name, p.partition_index):
                code = UNKNOWN_PARTITION
            else:
                stored.pop((t.name, p.partition_index), None)
            parts.append(resp_p(partition_index=p.partition_index, error_code=code))
        topics.append(resp_t(name=t.name, partitions=parts))
    return P.OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=topics)


# Kafka 4.0 dropped the oldest versions (KIP-896); the fake speaks Kafka 4's ranges
APIS = [
    Api(
        P.FindCoordinatorRequest,
        P.FindCoordinatorResponse,
        find_coordinator,
        0,
        4,
        error=_find_coordinator_error,
    ),
    Api(P.JoinGroupRequest, P.JoinGroupResponse, join_group, 0, 9, error=_join_error),
    Api(P.SyncGroupRequest, P.SyncGroupResponse, sync_group, 0, 5),
    Api(P.HeartbeatRequest, P.HeartbeatResponse, heartbeat, 0, 4),
    Api(P.LeaveGroupRequest, P.LeaveGroupResponse, leave_group, 0, 5),
    Api(
        P.OffsetCommitRequest,
        P.OffsetCommitResponse,
        offset_commit,
        2,
        9,
        error=_offset_commit_error,
    ),
    Api(P.OffsetFetchRequest, P.OffsetFetchResponse, offset_fetch, 1, 8, error=_offset_fetch_error),
    Api(
        P.TxnOffsetCommitRequest,
        P.TxnOffsetCommitResponse,
        txn_offset_commit,
        0,
        3,
        error=_txn_offset_commit_error,
    ),
    Api(
        P.DescribeGroupsRequest,
        P.DescribeGroupsResponse,
        describe_groups,
        0,
        5,
        error=_describe_groups_error,
    ),
    Api(P.ListGroupsRequest, P.ListGroupsResponse, list_groups, 0, 5),
    Api(
        P.DeleteGroupsRequest,
        P.DeleteGroupsResponse,
        delete_groups,
        0,
        2,
        error=_delete_groups_error,
    ),
    Api(P.OffsetDeleteRequest, P.OffsetDeleteResponse, offset_delete, 0, 0),
]
