"""The fake cluster's answers to KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe.

The state and the server-side assignors are in ``consumer_coordinator.py``.
The checks follow Kafka's group coordinator: a join (epoch 0) must give a
rebalance timeout, an empty owned list and a subscription; a member id is
required (v1+); an epoch ahead of the member's, or behind it other than the
previous epoch with owned partitions it still has, is FENCED_MEMBER_EPOCH; an
unknown member is UNKNOWN_MEMBER_ID; a static member's instance id in use is
UNRELEASED_INSTANCE_ID; unknown assignors and regular expressions RE2/J
cannot have (lookarounds, back-references) are refused. OffsetCommit from a
member of such a group must be v9+ and carry its member epoch (a classic
member's, any version, its epoch as the generation, exactly). A join to a
classic group of consumers converts it (``group_migration.py``); the last
consumer-protocol member leaving a group of classic members converts it back.
An answer carries the member's assignment when it changed, and after a full
request (rebalance timeout, subscription and owned partitions all given).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake import group_migration
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.consumer_coordinator import (
    ASSIGNORS,
    ConsumerGroupCoordinator,
    ConsumerGroupState,
    ConsumerMember,
    compute_target,
    reconcile,
    subscribed,
)

__all__ = ["APIS", "commit_check"]

H = P.ConsumerGroupHeartbeatResponse
#: What RE2/J (Kafka's regular expressions) does not have, though Python's re does.
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]")


def _coord(ctx: RequestContext) -> ConsumerGroupCoordinator:
    return ctx.cluster.consumer_groups


def _topics(ctx: RequestContext) -> tuple[dict[str, uuid.UUID], dict[str, int]]:
    live = {n: t for n, t in ctx.cluster.topics.items() if not t.internal}
    return {n: t.topic_id for n, t in live.items()}, {n: len(t.partitions) for n, t in live.items()}


def _error(code: int, message: str | None = None) -> H:
    return H(error_code=code, error_message=message, member_epoch=0, heartbeat_interval_ms=0)


def _heartbeat_error(req: Any, version: int, code: int) -> H:
    return _error(code)


def _check(req: Any, version: int) -> H | None:
    """Kafka's checks of the request itself."""
    invalid = errors.InvalidRequestError.code
    if not req.group_id:
        return _error(invalid, "GroupId can't be empty.")
    if version >= 1 and not req.member_id:
        return _error(invalid, "MemberId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return _error(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            return _error(invalid, "TopicPartitions must be empty when (re-)joining.")
        regex = getattr(req, "subscribed_topic_regex", None)
        if req.subscribed_topic_names is None and regex is None:
            return _error(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set.")
    elif req.member_epoch == -2 and req.instance_id is None:
        return _error(invalid, "InstanceId can't be null.")
    elif req.member_epoch < -2:
        return _error(errors.FencedMemberEpochError.code)
    if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
        return _error(
            errors.UnsupportedAssignorError.code,
            f"ServerAssignor {req.server_assignor} is not supported.",
        )
    regex = getattr(req, "subscribed_topic_regex", None)
    if regex is not None:
        try:
            re.compile(regex)
            bad = _NOT_RE2.search(regex) is not None
        except re.error:
            bad = True
        if bad:
            return _error(errors.InvalidRegularExpressionError.code, f"{regex} is not valid.")
    return None


def _join(
    coord: ConsumerGroupCoordinator, g: ConsumerGroupState, req: Any, ctx: RequestContext
) -> ConsumerMember | H:
    instance = req.instance_id
    if instance is not None:
        holder = next((m for m in g.members.values() if m.instance_id == instance), None)
        if holder is not None and holder.member_id != req.member_id:
            if not holder.left:
                return _error(
                    errors.UnreleasedInstanceIdError.code,
                    f"Static member {holder.member_id} with instance id {instance} "
                    "is not released yet.",
                )
            # the instance comes back: the new member takes its place and assignment
            old_id = holder.member_id
            del g.members[old_id]
            holder.member_id, holder.left, holder.sent = req.member_id, False, None
            g.members[holder.member_id] = holder
            g.target[holder.member_id] = g.target.pop(old_id, set())
            return holder
    m = g.members.get(req.member_id)
    if m is None:
        m = ConsumerMember(
            member_id=req.member_id or uuid.uuid4().hex,
            instance_id=instance,
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.session.peer.rsplit(":", 1)[0],
        )
        g.members[m.member_id] = m
    else:
        # a rejoin: it owns nothing now (its partitions come back if still its target)
        m.assigned, m.revoking, m.epoch, m.sent = set(), set(), 0, None
    return m


def _fenced(m: ConsumerMember, epoch: int, owned: set[tuple[uuid.UUID, int]] | None) -> bool:
    if epoch > m.epoch:
        return True
    if epoch < m.epoch:
        # the answer bumping the epoch may have been lost: the previous epoch with
        # partitions the member still has is accepted
        return epoch != m.previous_epoch or owned is None or not owned <= m.assigned | m.revoking
    return False


async def consumer_group_heartbeat(
    ctx: RequestContext, req: P.ConsumerGroupHeartbeatRequest, version: int
) -> Any:
    """One heartbeat: join, leave, or a step of the member's reconciliation."""
    if ctx.cluster.coordinator_for(0, req.group_id) != ctx.broker.node_id:
        return _error(errors.NotCoordinatorError.code)
    refused = _check(req, version)
    if refused is not None:
        return refused
    coord = _coord(ctx)
    epoch = req.member_epoch
    # A classic group of consumers is converted when a member joins (KIP-848's
    # online migration); an empty one is simply replaced.
    classic = (
        group_migration.classic_group(ctx.cluster.groups, req.group_id)
        if epoch == 0
        else ctx.cluster.groups.group(req.group_id)
    )
    upgraded = (
        classic is not None
        and classic.members
        and epoch == 0
        and group_migration.upgrade(ctx.cluster.groups, coord, classic, ctx.cluster.topic_map())
    )
    if classic is not None and classic.members and not upgraded:
        return _error(
            errors.GroupIdNotFoundError.code, f"Group {req.group_id} is not a consumer group."
        )
    g = coord.group(req.group_id)
    if epoch < 0:
        m = g.members.get(req.member_id) if g is not None else None
        if g is None or m is None or m.classic is not None:
            return _error(errors.UnknownMemberIdError.code)
        if epoch == -2:
            m.left = True  # the assignment waits for the instance until the session ends
        elif not coord.downgrades(g, m):  # the last consumer-protocol member: classic again
            del g.members[m.member_id]
            refresh(g, ctx)
        return H(member_id=m.member_id, member_epoch=epoch, heartbeat_interval_ms=0)
    owned = (
        None
        if req.topic_partitions is None
        else {(tp.topic_id, p) for tp in req.topic_partitions for p in tp.partitions}
    )
    if epoch == 0:
        if g is None:
            g = coord.groups[req.group_id] = ConsumerGroupState(req.group_id)
        joined = _join(coord, g, req, ctx)
        if isinstance(joined, H):
            return joined
        m = joined
    else:
        found = g.members.get(req.member_id) if g is not None else None
        if g is None or found is None or found.left or found.classic is not None:
            return _error(errors.UnknownMemberIdError.code)
        m = found
        if _fenced(m, epoch, owned):
            return _error(errors.FencedMemberEpochError.code)
    if req.rebalance_timeout_ms != -1:
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.subscribed_topic_names is not None:
        m.topics = sorted(req.subscribed_topic_names)
    regex = getattr(req, "subscribed_topic_regex", None)
    if regex is not None:
        m.regex = regex or None
    if req.server_assignor is not None:
        g.assignor = req.server_assignor
    if req.rack_id is not None:
        m.rack = req.rack_id
    coord.touch(m)
    refresh(g, ctx)
    reconcile(g, m, owned)
    assignment = None
    now = frozenset(m.assigned)
    # The assignment goes out when it changed, and in the answer to a full
    # request (what a member sends after an error or a lost answer: Kafka tells
    # one by its rebalance timeout, subscription and owned partitions all set).
    full = (
        req.rebalance_timeout_ms != -1
        and (req.subscribed_topic_names is not None or regex is not None)
        and owned is not None
    )
    if epoch == 0 or full or now != m.sent:
        m.sent = now
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in sorted(now):
            by_topic.setdefault(tid, []).append(p)
        assignment = H.Assignment(
            topic_partitions=[
                H.TopicPartitions(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()
            ]
        )
    return H(
        member_id=m.member_id,
        member_epoch=m.epoch,
        heartbeat_interval_ms=coord.heartbeat_interval_ms,
        assignment=assignment,
    )


def refresh(g: ConsumerGroupState, ctx: RequestContext) -> None:
    """A new group epoch and target when the members or what they subscribe to changed."""
    topics, partitions = _topics(ctx)
    signature = tuple(
        (mid, tuple((t, partitions[t]) for t in subscribed(x, topics)))
        for mid, x in sorted(g.members.items())
    )
    if signature != g.signature:
        g.signature = signature
        g.epoch += 1
        compute_target(g, topics, partitions)


def commit_check(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    epoch: int,
    version: int,
    partitions: list[tuple[str, int]],
) -> int | None:
    """An OffsetCommit's check for a consumer-protocol group; None for any other group.

    An epoch ahead of the member's is STALE_MEMBER_EPOCH; an older one is
    accepted for partitions the member still holds (the answer bumping its
    epoch may not have reached it yet), as Kafka 4 does.
    """
    g = _coord(ctx).group(group_id)
    if g is None:
        return None
    if epoch < 0 and not g.members:
        return 0  # a simple commit (admin tools) to an empty group
    m = g.members.get(member_id)
    if m is None:
        return errors.UnknownMemberIdError.code
    if m.classic is not None:  # a classic member: its generation is its epoch, exactly
        return 0 if epoch == m.epoch else errors.IllegalGenerationError.code
    if version < 9:
        return errors.UnsupportedVersionError.code
    if epoch > m.epoch:
        return errors.StaleMemberEpochError.code
    if epoch < m.epoch:
        ids = {n: t.topic_id for n, t in ctx.cluster.topics.items()}
        held = m.assigned | m.revoking
        if not all((ids.get(t), p) in held for t, p in partitions):
            return errors.StaleMemberEpochError.code
    return 0


async def consumer_group_describe(
    ctx: RequestContext, req: P.ConsumerGroupDescribeRequest, version: int
) -> Any:
    """Each group's epochs, assignor and members, with their assignments and targets."""
    D = P.ConsumerGroupDescribeResponse
    names = {t.topic_id: n for n, t in ctx.cluster.topics.items()}
    out = []

    def assignment(parts: set[tuple[uuid.UUID, int]]) -> Any:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in sorted(parts):
            by_topic.setdefault(tid, []).append(p)
        return D.Assignment(
            topic_partitions=[
                D.TopicPartitions(topic_id=tid, topic_name=names.get(tid, ""), partitions=ps)
                for tid, ps in by_topic.items()
            ]
        )

    for group_id in req.group_ids:
        if ctx.cluster.coordinator_for(0, group_id) != ctx.broker.node_id:
            out.append(
                D.DescribedGroup(group_id=group_id, error_code=errors.NotCoordinatorError.code)
            )
            continue
        g = _coord(ctx).group(group_id)
        if g is not None:
            refresh(g, ctx)
        if g is None:
            shared = group_id in ctx.cluster.share_groups.groups
            out.append(
                D.DescribedGroup(
                    group_id=group_id,
                    error_code=errors.GroupIdNotFoundError.code,
                    error_message=(
                        f"Group {group_id} is not a consumer group."
                        if shared
                        else f"Group {group_id} not found."
                    ),
                )
            )
            continue
        out.append(
            D.DescribedGroup(
                group_id=group_id,
                group_state=g.state,
                group_epoch=g.epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor,
                members=[
                    D.Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack,
                        member_epoch=m.epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.topics),
                        subscribed_topic_regex=m.regex,
                        assignment=assignment(m.assigned),
                        target_assignment=assignment(g.target.get(m.member_id, set())),
                    )
                    for m in g.members.values()
                ],
            )
        )
    return D(throttle_time_ms=0, groups=out)


APIS = [
    Api(
        P.ConsumerGroupHeartbeatRequest,
        P.ConsumerGroupHeartbeatResponse,
        consumer_group_heartbeat,
        0,
        1,
        error=_heartbeat_error,
    ),
    Api(
        P.ConsumerGroupDescribeRequest,
        P.ConsumerGroupDescribeResponse,
        consumer_group_describe,
        0,
        0,
    ),
]
