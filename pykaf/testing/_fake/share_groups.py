"""The fake cluster's share group (KIP-932) coordinator APIs: heartbeats, describe, start offsets.

ShareGroupHeartbeat joins (epoch 0, with the subscribed topics), keeps a
member in the group, or leaves (-1); ShareGroupDescribe describes groups;
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets
read and change the groups' start offsets. The checks and error codes are
those Kafka 4.3.1 answers (checked by tests/conformance/cases_share.py).
The state is in ``share_coordinator.py``; ListGroups and DeleteGroups (in
``groups.py``) list and delete share groups with :func:`listed` and
:func:`delete`.
"""

from __future__ import annotations

import uuid
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.configs import group_value
from pykaf.testing._fake.share_coordinator import (
    ASSIGNOR,
    IdPartition,
    ShareGroup,
    ShareGroupCoordinator,
    ShareMember,
    clock,
    refresh,
)
from pykaf.testing._fake.share_partition import SharePartitionState

__all__ = ["APIS", "delete", "listed", "share_group", "topic_maps"]

H = P.ShareGroupHeartbeatResponse
_INVALID = errors.InvalidRequestError.code
_NOT_FOUND = errors.GroupIdNotFoundError.code
_NON_EMPTY = errors.GroupNotEmptyError.code
_UNKNOWN_PARTITION = errors.UnknownTopicOrPartitionError.code
_NOT_HOSTED = "This server does not host this topic-partition."
#: what Kafka answers with IncludeAuthorizedOperations and no authorizer: READ,
#: DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
_GROUP_OPERATIONS = 3400
_NO_OPERATIONS = -(2**31)


def _coord(ctx: RequestContext) -> ShareGroupCoordinator:
    return ctx.cluster.share_groups


def _coordinates(ctx: RequestContext, group_id: str) -> bool:
    return ctx.cluster.coordinator_for(0, group_id) == ctx.broker.node_id


def _int_config(ctx: RequestContext, group_id: str, name: str) -> int:
    return int(group_value(ctx.cluster, group_id, name))


def share_group(ctx: RequestContext, group_id: str) -> ShareGroup | None:
    """The share group ``group_id`` with its expired members removed, or None."""
    timeout = _int_config(ctx, group_id, "share.session.timeout.ms")
    g = _coord(ctx).group(group_id, timeout)
    if g is not None:
        refresh(g, *topic_maps(ctx))
    return g


def topic_maps(ctx: RequestContext) -> tuple[dict[str, uuid.UUID], dict[str, int]]:
    """The cluster's topics: name -> id, and name -> partition count."""
    live = {n: t for n, t in ctx.cluster.topics.items() if not t.internal}
    return {n: t.topic_id for n, t in live.items()}, {n: len(t.partitions) for n, t in live.items()}


def _other_kind(ctx: RequestContext, group_id: str) -> bool:
    """Whether ``group_id`` is a consumer-protocol group, or a classic one with members."""
    if ctx.cluster.consumer_groups.group(group_id) is not None:
        return True
    classic = ctx.cluster.groups.group(group_id)
    return classic is not None and bool(classic.members)


# -- ShareGroupHeartbeat ----------------------------------------------------------------


def _error(code: int, message: str | None = None) -> H:
    return H(error_code=code, error_message=message, member_epoch=0, heartbeat_interval_ms=0)


def _heartbeat_error(req: Any, version: int, code: int) -> H:
    return _error(code)


def _check(req: Any) -> H | None:
    """Kafka's checks of the request itself."""
    if not req.group_id:
        return _error(_INVALID, "GroupId can't be empty.")
    if not req.member_id:
        return _error(_INVALID)  # Kafka 4.3.1 says nothing more
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        return _error(_INVALID, "SubscribedTopicNames must be set in first request.")
    if req.member_epoch < -1:
        return _error(_INVALID, "MemberEpoch is invalid.")
    return None


def _fenced(m: ShareMember, epoch: int) -> H | None:
    if epoch > m.epoch:
        return _error(
            errors.FencedMemberEpochError.code,
            f"The share group member has a greater member epoch ({epoch}) than the one known "
            f"by the group coordinator ({m.epoch}). The member must abandon all its partitions "
            "and rejoin.",
        )
    if epoch < m.epoch and epoch != m.previous_epoch:
        return _error(
            errors.FencedMemberEpochError.code,
            f"The share group member has a smaller member epoch ({epoch}) than the one known by "
            f"the group coordinator ({m.epoch}), and it does not match the previous member "
            f"epoch ({m.previous_epoch}). The member must abandon all its partitions and rejoin.",
        )
    return None


async def share_group_heartbeat(
    ctx: RequestContext, req: P.ShareGroupHeartbeatRequest, version: int
) -> Any:
    """One heartbeat: join (epoch 0), leave (-1), or keep the member and tell its assignment."""
    if not _coordinates(ctx, req.group_id):
        return _error(errors.NotCoordinatorError.code)
    refused = _check(req)
    if refused is not None:
        return refused
    if _other_kind(ctx, req.group_id):
        return _error(_NOT_FOUND, f"Group {req.group_id} is not a share group.")
    coord = _coord(ctx)
    g = share_group(ctx, req.group_id)
    epoch = req.member_epoch
    if epoch != 0:
        if g is None:
            what = "Group" if epoch < 0 else "Share group"
            return _error(_NOT_FOUND, f"{what} {req.group_id} not found.")
        found = g.members.get(req.member_id)
        if found is None:
            return _error(
                errors.UnknownMemberIdError.code,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if epoch < 0:
            del g.members[found.member_id]
            refresh(g, *topic_maps(ctx))
            return H(member_id=found.member_id, member_epoch=-1, heartbeat_interval_ms=0)
        fenced = _fenced(found, epoch)
        if fenced is not None:
            return fenced
        m = found
    else:
        if g is None:
            g = coord.groups[req.group_id] = ShareGroup(req.group_id)
        joined = g.members.get(req.member_id)
        if joined is None:
            joined = g.members[req.member_id] = ShareMember(
                member_id=req.member_id,
                client_id=ctx.header.client_id or "",
                client_host="/" + ctx.session.peer.rsplit(":", 1)[0],
            )
        joined.sent = None
        m = joined
    if req.subscribed_topic_names is not None:
        m.topics = sorted(set(req.subscribed_topic_names))
    if req.rack_id is not None:
        m.rack_id = req.rack_id
    coord.touch(m, _int_config(ctx, req.group_id, "share.session.timeout.ms"))
    refresh(g, *topic_maps(ctx))
    if m.epoch != g.assignment_epoch:
        m.previous_epoch, m.epoch = m.epoch, g.assignment_epoch
    m.assigned = g.target.get(m.member_id, frozenset())
    assignment = None
    if m.assigned != m.sent:
        m.sent = m.assigned
        assignment = H.Assignment(topic_partitions=_by_topic(m.assigned, H.TopicPartitions))
    return H(
        member_id=m.member_id,
        member_epoch=m.epoch,
        heartbeat_interval_ms=_int_config(ctx, req.group_id, "share.heartbeat.interval.ms"),
        assignment=assignment,
    )


def _by_topic(
    parts: frozenset[IdPartition], cls: Any, names: dict[uuid.UUID, str] | None = None
) -> list[Any]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(parts):
        by_topic.setdefault(tid, []).append(p)
    if names is None:
        return [cls(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()]
    return [
        cls(topic_id=tid, topic_name=names.get(tid, ""), partitions=ps)
        for tid, ps in by_topic.items()
    ]


# -- ShareGroupDescribe ------------------------------------------------------------------


async def share_group_describe(
    ctx: RequestContext, req: P.ShareGroupDescribeRequest, version: int
) -> Any:
    """Each group's state, epochs, assignor and members with their assignments."""
    D = P.ShareGroupDescribeResponse
    names = {t.topic_id: n for n, t in ctx.cluster.topics.items()}
    out = []
    for group_id in req.group_ids:
        if not _coordinates(ctx, group_id):
            out.append(
                D.DescribedGroup(group_id=group_id, error_code=errors.NotCoordinatorError.code)
            )
            continue
        g = share_group(ctx, group_id)
        if g is None:
            kind = " is not a share group" if _other_kind(ctx, group_id) else " not found"
            out.append(
                D.DescribedGroup(
                    group_id=group_id,
                    error_code=_NOT_FOUND,
                    error_message=f"Group {group_id}{kind}.",
                )
            )
            continue
        out.append(
            D.DescribedGroup(
                group_id=group_id,
                group_state=g.state,
                group_epoch=g.epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=ASSIGNOR,
                members=[
                    D.Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.topics),
                        assignment=D.Assignment(
                            topic_partitions=_by_topic(m.assigned, D.TopicPartitions, names)
                        ),
                    )
                    for m in g.members.values()
                ],
                authorized_operations=(
                    _GROUP_OPERATIONS if req.include_authorized_operations else _NO_OPERATIONS
                ),
            )
        )
    return D(throttle_time_ms=0, groups=out)


# -- DescribeShareGroupOffsets -----------------------------------------------------------

_DO = P.DescribeShareGroupOffsetsResponse


def _offset_entry(ctx: RequestContext, g: ShareGroup | None, topic: str, index: int) -> Any:
    t = ctx.cluster.topics.get(topic)
    state = None
    if g is not None and t is not None:
        state = g.partitions.get((t.topic_id, index))
    start, lag = -1, -1
    if state is not None and t is not None and index < len(t.partitions):
        log = t.partitions[index].log
        assert g is not None
        limit = _int_config(ctx, g.group_id, "share.delivery.count.limit")
        state.expire(clock(), limit)
        if state.start_offset is not None:
            start, lag = state.start_offset, state.lag(log)
    return _DO.DescribeShareGroupOffsetsResponsePartition(
        partition_index=index, start_offset=start, leader_epoch=0, lag=lag, error_code=0
    )


def _describe_group_offsets(ctx: RequestContext, rg: Any) -> Any:
    out = _DO.DescribeShareGroupOffsetsResponseGroup(group_id=rg.group_id, topics=[], error_code=0)
    if not _coordinates(ctx, rg.group_id):
        out.error_code = errors.NotCoordinatorError.code
        return out
    g = share_group(ctx, rg.group_id)
    wanted: list[tuple[str, list[int]]]
    if rg.topics is None:
        names = {t.topic_id: n for n, t in ctx.cluster.topics.items()}
        by_topic: dict[str, list[int]] = {}
        for tid, p in sorted(g.partitions if g is not None else {}):
            if tid in names:
                by_topic.setdefault(names[tid], []).append(p)
        wanted = list(by_topic.items())
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in rg.topics]
    for topic, indexes in wanted:
        t = ctx.cluster.topics.get(topic)
        out.topics.append(
            _DO.DescribeShareGroupOffsetsResponseTopic(
                topic_name=topic,
                topic_id=t.topic_id if t is not None else uuid.UUID(int=0),
                partitions=[_offset_entry(ctx, g, topic, i) for i in indexes],
            )
        )
    return out


async def describe_share_group_offsets(
    ctx: RequestContext, req: P.DescribeShareGroupOffsetsRequest, version: int
) -> Any:
    """Each group's start offsets and lags: -1 where the group has no state (yet)."""
    return _DO(throttle_time_ms=0, groups=[_describe_group_offsets(ctx, rg) for rg in req.groups])


def _describe_offsets_error(req: Any, version: int, code: int) -> Any:
    return _DO(
        groups=[
            _DO.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=code
            )
            for g in req.groups
        ]
    )


# -- AlterShareGroupOffsets and DeleteShareGroupOffsets ------------------------------------

_AO = P.AlterShareGroupOffsetsResponse
_DL = P.DeleteShareGroupOffsetsResponse


def _may_change(ctx: RequestContext, group_id: str) -> tuple[int, str | None]:
    """(error, message) for changing the start offsets of ``group_id``: it must be empty."""
    if not _coordinates(ctx, group_id):
        return errors.NotCoordinatorError.code, None
    g = share_group(ctx, group_id)
    if g is not None and g.members:
        return _NON_EMPTY, "The group is not empty."
    if g is None and _other_kind(ctx, group_id):
        return _NOT_FOUND, f"Group {group_id} is not a share group."
    return 0, None


async def alter_share_group_offsets(
    ctx: RequestContext, req: P.AlterShareGroupOffsetsRequest, version: int
) -> Any:
    """Set an empty group's start offsets (the group is made if it does not exist)."""
    code, message = _may_change(ctx, req.group_id)
    if code:
        return _AO(error_code=code, error_message=message, responses=[])
    coord = _coord(ctx)
    g = coord.groups.get(req.group_id)
    if g is None:
        g = coord.groups[req.group_id] = ShareGroup(req.group_id)
    out = []
    for rt in sorted(req.topics, key=lambda t: t.topic_name):
        t = ctx.cluster.topics.get(rt.topic_name)
        parts = []
        for rp in rt.partitions:
            if t is None or not 0 <= rp.partition_index < len(t.partitions):
                parts.append(
                    _AO.AlterShareGroupOffsetsResponsePartition(
                        partition_index=rp.partition_index,
                        error_code=_UNKNOWN_PARTITION,
                        error_message=_NOT_HOSTED,
                    )
                )
                continue
            state = g.partitions.setdefault((t.topic_id, rp.partition_index), SharePartitionState())
            state.set_start(rp.start_offset)
            parts.append(
                _AO.AlterShareGroupOffsetsResponsePartition(
                    partition_index=rp.partition_index, error_code=0
                )
            )
        out.append(
            _AO.AlterShareGroupOffsetsResponseTopic(
                topic_name=rt.topic_name,
                topic_id=t.topic_id if t is not None else uuid.UUID(int=0),
                partitions=parts,
            )
        )
    coord.notify()
    return _AO(throttle_time_ms=0, error_code=0, responses=out)


async def delete_share_group_offsets(
    ctx: RequestContext, req: P.DeleteShareGroupOffsetsRequest, version: int
) -> Any:
    """Forget an empty group's state of whole topics (it starts again by its reset policy)."""
    code, message = _may_change(ctx, req.group_id)
    if code:
        return _DL(error_code=code, error_message=message, responses=[])
    g = _coord(ctx).groups.get(req.group_id)
    out = []
    for rt in req.topics:
        t = ctx.cluster.topics.get(rt.topic_name)
        if t is None:
            out.append(
                _DL.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=rt.topic_name,
                    topic_id=uuid.UUID(int=0),
                    error_code=_UNKNOWN_PARTITION,
                    error_message=_NOT_HOSTED,
                )
            )
            continue
        if g is not None:
            for key in [k for k in g.partitions if k[0] == t.topic_id]:
                del g.partitions[key]
        out.append(
            _DL.DeleteShareGroupOffsetsResponseTopic(
                topic_name=rt.topic_name, topic_id=t.topic_id, error_code=0
            )
        )
    return _DL(throttle_time_ms=0, error_code=0, responses=out)


# -- for ListGroups and DeleteGroups ------------------------------------------------------


def listed(ctx: RequestContext) -> list[tuple[str, str]]:
    """(group id, state) of the share groups this broker coordinates."""
    out = []
    for group_id in sorted(_coord(ctx).groups):
        if _coordinates(ctx, group_id):
            g = share_group(ctx, group_id)
            if g is not None:
                out.append((group_id, g.state))
    return out


def delete(ctx: RequestContext, group_id: str) -> int | None:
    """Delete share group ``group_id``: the error code, or None when it is no share group."""
    g = share_group(ctx, group_id)
    if g is None:
        return None
    if g.members:
        return _NON_EMPTY
    del _coord(ctx).groups[group_id]
    return 0


APIS = [
    Api(
        P.ShareGroupHeartbeatRequest,
        P.ShareGroupHeartbeatResponse,
        share_group_heartbeat,
        1,
        1,
        error=_heartbeat_error,
    ),
    Api(P.ShareGroupDescribeRequest, P.ShareGroupDescribeResponse, share_group_describe, 1, 1),
    Api(
        P.DescribeShareGroupOffsetsRequest,
        P.DescribeShareGroupOffsetsResponse,
        describe_share_group_offsets,
        0,
        1,
        error=_describe_offsets_error,
    ),
    Api(
        P.AlterShareGroupOffsetsRequest,
        P.AlterShareGroupOffsetsResponse,
        alter_share_group_offsets,
        0,
        0,
    ),
    Api(
        P.DeleteShareGroupOffsetsRequest,
        P.DeleteShareGroupOffsetsResponse,
        delete_share_group_offsets,
        0,
        0,
    ),
]
