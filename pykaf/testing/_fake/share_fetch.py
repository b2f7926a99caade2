"""The fake cluster's ShareFetch and ShareAcknowledge (KIP-932), on the partitions' leaders.

A request first goes through the member's share session (``share_sessions.py``);
then its acknowledgements are applied, partition by partition, all or none
per partition (``share_partition.py`` holds the rules); then a ShareFetch
acquires records of the session's partitions for the member, waiting up to
``max_wait_ms`` for some (new records, released ones, expired locks). Its
answer names every partition of a session's first request, and afterwards
only partitions with records, an error or an acknowledgement outcome.
Closing a session (epoch -1) acquires nothing and gives the member's
acquired records on this broker back to the group. A topic id or partition
the broker does not know is answered UNKNOWN_TOPIC_OR_PARTITION and stays
out of the session; as Kafka 4.3.1 does, a partition the group never had
assigned (so has no share state) is answered UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.configs import group_value
from pykaf.testing._fake.model import Partition
from pykaf.testing._fake.share_coordinator import ShareGroup, clock
from pykaf.testing._fake.share_partition import AckBatch, SharePartitionState, stored_batches
from pykaf.testing._fake.share_sessions import CLOSE_EPOCH, OPEN_EPOCH, ShareSession

_F = P.ShareFetchResponse
_A = P.ShareAcknowledgeResponse
_UNKNOWN_SERVER = errors.UnknownServerError.code
_UNKNOWN_PARTITION = errors.UnknownTopicOrPartitionError.code
_NOT_LEADER = errors.NotLeaderOrFollowerError.code

IdPartition = tuple[uuid.UUID, int]


class _Group:
    """What one request needs of its share group: the group, its configs, and the clock."""

    def __init__(self, ctx: RequestContext, group_id: str) -> None:
        self.ctx = ctx
        self.group_id = group_id
        coord = ctx.cluster.share_groups
        self.group: ShareGroup | None = coord.groups.get(group_id)

        def config(name: str) -> str:
            return group_value(ctx.cluster, group_id, name)

        self.lock_ms = int(config("share.record.lock.duration.ms"))
        self.limit = int(config("share.delivery.count.limit"))
        self.policy = config("share.auto.offset.reset")
        self.read_committed = config("share.isolation.level") == "read_committed"

    def state(self, tp: IdPartition) -> SharePartitionState | None:
        """The group's state of ``tp`` (None: never assigned), loaded and its locks expired."""
        if self.group is None:
            return None
        state = self.group.partitions.get(tp)
        p = self.partition(tp)
        if state is None or p is None:
            return None
        state.load(p.log, self.policy)
        if state.expire(clock(), self.limit):
            self.ctx.cluster.share_groups.notify()
        return state

    def partition(self, tp: IdPartition) -> Partition | None:
        """The cluster's partition ``tp`` (None: unknown topic id or partition)."""
        for t in self.ctx.cluster.topics.values():
            if t.topic_id == tp[0]:
                return t.partitions[tp[1]] if 0 <= tp[1] < len(t.partitions) else None
        return None


def _ack_batches(batches: list[Any]) -> list[AckBatch]:
    return [AckBatch(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]


def _acknowledge(
    g: _Group, member: str, tp: IdPartition, batches: list[Any], renew: bool
) -> tuple[int, str | None]:
    """One partition's acknowledgements: (error code, message)."""
    p = g.partition(tp)
    if p is None:
        return _UNKNOWN_PARTITION, None
    if p.leader != g.ctx.broker.node_id:
        return _NOT_LEADER, None
    state = g.state(tp)
    if state is None:
        return _UNKNOWN_PARTITION, "This server does not host this topic-partition."
    code, message = state.acknowledge(
        member,
        _ack_batches(batches),
        limit=g.limit,
        renew=renew,
        lock_deadline=clock() + g.lock_ms / 1000,
    )
    if code == 0:
        g.ctx.cluster.share_groups.notify()
    return code, message


def _release(g: _Group, session: ShareSession) -> None:
    """A session closed: give back what its member holds on this broker."""
    if g.group is None:
        return
    released = 0
    for tp, state in g.group.partitions.items():
        p = g.partition(tp)
        if p is not None and p.leader == g.ctx.broker.node_id:
            released += state.release_member(session.member_id, g.limit)
    if released:
        g.ctx.cluster.share_groups.notify()


def _session(ctx: RequestContext, req: Any) -> ShareSession | int:
    """The session a non-opening request continues (or closes), or the error code."""
    cache = ctx.cluster.share_sessions(ctx.broker.node_id)
    return cache.find(req.group_id or "", req.member_id or "", req.share_session_epoch)


# -- ShareFetch --------------------------------------------------------------------------


def _fetch_error(code: int, message: str | None = None) -> Any:
    return _F(error_code=code, error_message=message, acquisition_lock_timeout_ms=0, responses=[])


def _share_fetch_error(req: Any, version: int, code: int) -> Any:
    return _fetch_error(code)


async def share_fetch(ctx: RequestContext, req: P.ShareFetchRequest, version: int) -> Any:
    """Acknowledge, then acquire records of the session's partitions for the member."""
    if not req.group_id or not req.member_id:
        return _fetch_error(errors.InvalidRequestError.code)
    named = [(t.topic_id, p) for t in req.topics for p in t.partitions]
    epoch = req.share_session_epoch
    if epoch == OPEN_EPOCH and any(p.acknowledgement_batches for _, p in named):
        return _fetch_error(errors.InvalidRequestError.code)
    g = _Group(ctx, req.group_id)
    cache = ctx.cluster.share_sessions(ctx.broker.node_id)
    if epoch == OPEN_EPOCH:
        session = cache.open(req.group_id, req.member_id)
    else:
        found = _session(ctx, req)
        if isinstance(found, int):
            return _fetch_error(found)
        session = found
        session.advance()
    answers: dict[IdPartition, Any] = {}

    def answer(tp: IdPartition) -> Any:
        if tp not in answers:
            answers[tp] = _F.PartitionData(partition_index=tp[1], records=b"", acquired_records=[])
        return answers[tp]

    unknown = set()
    for tid, fp in named:
        tp = (tid, fp.partition_index)
        if g.partition(tp) is None:
            unknown.add(tp)
            answer(tp).error_code = _UNKNOWN_PARTITION
            continue
        if fp.acknowledgement_batches:
            code, message = _acknowledge(
                g, req.member_id, tp, fp.acknowledgement_batches, bool(req.is_renew_ack)
            )
            if code:
                a = answer(tp)
                a.acknowledge_error_code, a.acknowledge_error_message = code, message
            else:
                answer(tp)
    if epoch == CLOSE_EPOCH:
        cache.close(session)
        _release(g, session)
    else:
        for tid, fp in named:
            if (tid, fp.partition_index) not in unknown:
                session.partitions[(tid, fp.partition_index)] = None
        for ft in req.forgotten_topics_data:
            for index in ft.partitions:
                session.partitions.pop((ft.topic_id, index), None)
        if epoch == OPEN_EPOCH:
            for tp in session.partitions:
                answer(tp)
        await _acquire_all(ctx, g, req, session, answer)
    return _F(
        throttle_time_ms=0,
        error_code=0,
        acquisition_lock_timeout_ms=g.lock_ms,
        responses=_by_topic(answers, _F.ShareFetchableTopicResponse),
    )


async def _acquire_all(
    ctx: RequestContext, g: _Group, req: Any, session: ShareSession, answer: Any
) -> None:
    """Acquire records of the session's partitions; wait up to max_wait_ms for some."""
    deadline = clock() + max(req.max_wait_ms, 0) / 1000
    max_records = req.max_records if req.max_records > 0 else 500
    coord = ctx.cluster.share_groups
    while True:
        got = False
        waits: list[tuple[Partition, SharePartitionState]] = []
        for tp in list(session.partitions):
            p = g.partition(tp)
            if p is None:
                continue
            if p.leader != ctx.broker.node_id:
                answer(tp).error_code = _NOT_LEADER
                continue
            state = g.state(tp)
            if state is None:
                answer(tp).error_code = _UNKNOWN_SERVER
                continue
            ranges = state.acquire(
                p.log,
                req.member_id,
                max_records,
                clock() + g.lock_ms / 1000,
                read_committed=g.read_committed,
            )
            waits.append((p, state))
            if ranges:
                got = True
                a = answer(tp)
                a.records = stored_batches(p.log, ranges)
                a.acquired_records = [
                    _F.AcquiredRecords(first_offset=f, last_offset=last, delivery_count=c)
                    for f, last, c in ranges
                ]
        now = clock()
        if got or now >= deadline or not waits:
            return
        wake = min([deadline, *(d for _, s in waits if (d := s.next_deadline()) is not None)])
        event = trio.Event()
        for p, _ in waits:
            p.log.add_waiter(event)
        coord.add_waiter(event)
        try:
            with trio.move_on_at(wake if math.isfinite(wake) else deadline):
                await event.wait()
        finally:
            for p, _ in waits:
                p.log.remove_waiter(event)
            coord.remove_waiter(event)


def _by_topic(answers: dict[IdPartition, Any], cls: Any) -> list[Any]:
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, _), part in answers.items():
        by_topic.setdefault(tid, []).append(part)
    return [cls(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()]


# -- ShareAcknowledge ----------------------------------------------------------------------


def _ack_error(code: int) -> Any:
    return _A(error_code=code, acquisition_lock_timeout_ms=0, responses=[])


def _share_acknowledge_error(req: Any, version: int, code: int) -> Any:
    return _ack_error(code)


async def share_acknowledge(
    ctx: RequestContext, req: P.ShareAcknowledgeRequest, version: int
) -> Any:
    """Apply acknowledgements in the member's session (epoch -1 also closes it)."""
    if not req.group_id or not req.member_id:
        return _ack_error(errors.InvalidRequestError.code)
    if req.share_session_epoch == OPEN_EPOCH:
        return _ack_error(errors.InvalidShareSessionEpochError.code)
    found = _session(ctx, req)
    if isinstance(found, int):
        return _ack_error(found)
    session = found
    g = _Group(ctx, req.group_id)
    answers: dict[IdPartition, Any] = {}
    for t in req.topics:
        for ap in t.partitions:
            tp = (t.topic_id, ap.partition_index)
            code, message = _acknowledge(
                g, req.member_id, tp, ap.acknowledgement_batches, bool(req.is_renew_ack)
            )
            answers[tp] = _A.PartitionData(
                partition_index=ap.partition_index, error_code=code, error_message=message
            )
    if req.share_session_epoch == CLOSE_EPOCH:
        ctx.cluster.share_sessions(ctx.broker.node_id).close(session)
        _release(g, session)
    else:
        session.advance()
    return _A(
        throttle_time_ms=0,
        error_code=0,
        acquisition_lock_timeout_ms=g.lock_ms,
        responses=_by_topic(answers, _A.ShareAcknowledgeTopicResponse),
    )


APIS = [
    Api(P.ShareFetchRequest, P.ShareFetchResponse, share_fetch, 1, 2, error=_share_fetch_error),
    Api(
        P.ShareAcknowledgeRequest,
        P.ShareAcknowledgeResponse,
        share_acknowledge,
        1,
        2,
        error=_share_acknowledge_error,
    ),
]
