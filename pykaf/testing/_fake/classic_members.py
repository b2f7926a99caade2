"""Classic members in a consumer-protocol group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

KIP-848's online migration, as Kafka's group coordinator does it: a classic
consumer may join a group run by the consumer protocol. The coordinator
assigns for it with the group's server-side assignor; its JoinGroup is
answered at once (no leader, no member list) with its member epoch as the
generation and its own first protocol, after a reconciliation step against
the partitions its subscription says it owns; SyncGroup hands it the
partitions it may use now. A Heartbeat answers REBALANCE_IN_PROGRESS when the
member should rejoin: the group epoch moved past its epoch, it has partitions
to give up, or partitions of its target another member held are free now.
It must then rejoin within its rebalance timeout, and sync within it after
joining, or it is removed. LeaveGroup removes it (the group stays a consumer
group). The groups' handlers (``groups.py``) call these when the group id
belongs to a consumer group.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.protocol.consumer_protocol import decode_subscription
from pykaf.testing._fake.api import RequestContext
from pykaf.testing._fake.consumer_coordinator import (
    ClassicInfo,
    ConsumerGroupState,
    ConsumerMember,
    clock,
    reconcile,
)
from pykaf.testing._fake.consumer_groups import refresh
from pykaf.testing._fake.group_migration import assignment_bytes, ids_of

__all__ = ["heartbeat", "join", "join_error", "leave", "sync"]

PROTOCOL_TYPE = "consumer"


def join_error(code: int, member_id: str, version: int) -> P.JoinGroupResponse:
    """A JoinGroup answer carrying an error, in the form ``version`` can hold."""
    return P.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if version >= 7 else "",
        leader="",
        member_id=member_id,
        members=[],
    )


def _supports(g: ConsumerGroupState, protocol_type: str, names: set[str]) -> bool:
    """Kafka's check: the consumer protocol type, and a protocol every classic member offers."""
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    for m in g.classic_members():
        assert m.classic is not None
        names &= {name for name, _ in m.classic.protocols}
    return bool(names)


def join(
    ctx: RequestContext, g: ConsumerGroupState, req: P.JoinGroupRequest, version: int
) -> P.JoinGroupResponse:
    """A classic member joins (or rejoins) the consumer group ``g``."""
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    if not _supports(g, req.protocol_type or "", {name for name, _ in protocols}):
        return join_error(errors.InconsistentGroupProtocolError.code, req.member_id, version)
    instance_id = req.group_instance_id if version >= 5 else None
    member_id = req.member_id or str(uuid.uuid4())
    if not req.member_id and instance_id is None and version >= 4:
        return join_error(errors.MemberIdRequiredError.code, member_id, version)
    try:
        sub = decode_subscription(member_id, instance_id, protocols[0][1])
    except errors.MalformedMessageError:
        return join_error(errors.InconsistentGroupProtocolError.code, req.member_id, version)
    m = _member_for(ctx, g, member_id, req.member_id, instance_id)
    if isinstance(m, int):
        return join_error(m, req.member_id, version)
    now = clock()
    rebalance_ms = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
    m.topics, m.regex = sorted(sub.topics), None
    if sub.rack_id is not None:
        m.rack = sub.rack_id
    m.rebalance_timeout_ms = rebalance_ms
    m.client_id = ctx.header.client_id or ""
    m.client_host = "/" + ctx.session.peer.rsplit(":", 1)[0]
    # joined: no join timer; the sync timer runs
    m.classic = ClassicInfo(
        req.session_timeout_ms, protocols, sync_deadline=now + rebalance_ms / 1000
    )
    g.members[m.member_id] = m
    ctx.cluster.consumer_groups.touch(m)
    refresh(g, ctx)
    reconcile(g, m, ids_of(sub.owned_partitions, ctx.cluster.topic_map()))
    return P.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        generation_id=m.epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=m.classic.protocol_name,
        leader="",
        skip_assignment=False,
        member_id=m.member_id,
        members=[],
    )


def _member_for(
    ctx: RequestContext,
    g: ConsumerGroupState,
    member_id: str,
    given: str,
    instance_id: str | None,
) -> ConsumerMember | int:
    """The joining member: existing, new, or a static one taking its instance's place."""
    if instance_id is not None:
        holder = next((m for m in g.members.values() if m.instance_id == instance_id), None)
        if holder is None:
            if given:
                return errors.UnknownMemberIdError.code
        elif holder.member_id != member_id:
            if given:
                return errors.FencedInstanceIdError.code
            # the instance came back under a new member id: it takes the old one's place
            del g.members[holder.member_id]
            g.target[member_id] = g.target.pop(holder.member_id, set())
            holder.member_id, holder.epoch, holder.previous_epoch = member_id, 0, 0
            holder.left, holder.sent = False, None
            return holder
        else:
            return holder
    found = g.members.get(member_id)
    if found is not None:
        return found
    return ConsumerMember(
        member_id=member_id,
        instance_id=instance_id,
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.session.peer.rsplit(":", 1)[0],
    )


def _classic_member(
    g: ConsumerGroupState, member_id: str, instance_id: str | None
) -> ConsumerMember | int:
    """A classic member's request: the member, or UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID."""
    if instance_id is None:
        m = g.members.get(member_id)
    else:
        m = next((x for x in g.members.values() if x.instance_id == instance_id), None)
        if m is not None and m.member_id != member_id:
            return errors.FencedInstanceIdError.code
    if m is None or m.classic is None:
        return errors.UnknownMemberIdError.code
    return m


def _must_rejoin(m: ConsumerMember) -> int:
    """REBALANCE_IN_PROGRESS, starting the member's join timer if it is not running."""
    assert m.classic is not None
    if m.classic.join_deadline == math.inf:
        m.classic.join_deadline = clock() + m.rebalance_timeout_ms / 1000
    return errors.RebalanceInProgressError.code


def sync(
    ctx: RequestContext, g: ConsumerGroupState, req: P.SyncGroupRequest, version: int
) -> P.SyncGroupResponse:
    """A classic member's SyncGroup: the partitions it may use now."""
    refresh(g, ctx)
    m = _classic_member(g, req.member_id, req.group_instance_id if version >= 3 else None)
    code = m if isinstance(m, int) else 0
    if isinstance(m, ConsumerMember):
        assert m.classic is not None
        if req.generation_id != m.epoch:
            code = errors.IllegalGenerationError.code
        elif version >= 5 and (
            (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE)
            or (req.protocol_name is not None and req.protocol_name != m.classic.protocol_name)
        ):
            code = errors.InconsistentGroupProtocolError.code
        elif g.epoch > m.epoch and not m.revoking:
            code = _must_rejoin(m)
    if code or not isinstance(m, ConsumerMember) or m.classic is None:
        return P.SyncGroupResponse(throttle_time_ms=0, error_code=code, assignment=b"")
    m.classic.sync_deadline = math.inf
    ctx.cluster.consumer_groups.touch(m)
    metadata = m.classic.protocols[0][1]
    return P.SyncGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        protocol_type=req.protocol_type if version >= 5 else None,
        protocol_name=req.protocol_name if version >= 5 else None,
        assignment=assignment_bytes(m.assigned, metadata, ctx.cluster.topic_map()),
    )


def heartbeat(
    ctx: RequestContext, g: ConsumerGroupState, req: P.HeartbeatRequest, version: int
) -> P.HeartbeatResponse:
    """A classic member's Heartbeat: its session, and whether it must rejoin."""
    refresh(g, ctx)
    m = _classic_member(g, req.member_id, req.group_instance_id if version >= 3 else None)
    if isinstance(m, int):
        return P.HeartbeatResponse(throttle_time_ms=0, error_code=m)
    if req.generation_id != m.epoch:
        return P.HeartbeatResponse(
            throttle_time_ms=0, error_code=errors.IllegalGenerationError.code
        )
    ctx.cluster.consumer_groups.touch(m)
    unreleased = g.unreleased(m)
    free = bool(unreleased) and not unreleased & g.held_by_others(m.member_id)
    code = _must_rejoin(m) if m.epoch < g.epoch or m.revoking or free else 0
    return P.HeartbeatResponse(throttle_time_ms=0, error_code=code)


def leaving_members(req: P.LeaveGroupRequest, version: int) -> list[tuple[str, str | None]]:
    """The (member id, group instance id) pairs a LeaveGroup names (v3+: a batch)."""
    if version >= 3:
        return [(i.member_id, i.group_instance_id) for i in req.members]
    return [(req.member_id, None)]


def leave(
    ctx: RequestContext, g: ConsumerGroupState, req: P.LeaveGroupRequest, version: int
) -> P.LeaveGroupResponse:
    """Classic members leave the consumer group (which stays one)."""
    leaving = leaving_members(req, version)
    results = []
    removed = False
    for member_id, instance_id in leaving:
        m: Any = _classic_member(g, member_id, instance_id)
        if instance_id is not None and not member_id and m == errors.FencedInstanceIdError.code:
            # an administrator removes a static member by instance id alone
            m = next(x for x in g.members.values() if x.instance_id == instance_id)
            if m.classic is None:
                m = errors.UnknownMemberIdError.code
        code = m if isinstance(m, int) else 0
        if isinstance(m, ConsumerMember):
            del g.members[m.member_id]
            member_id, removed = m.member_id, True
        results.append(
            P.LeaveGroupResponse.MemberResponse(
                member_id=member_id, group_instance_id=instance_id, error_code=code
            )
        )
    if removed:
        refresh(g, ctx)
    top = results[0].error_code if version < 3 else 0
    return P.LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=results)
