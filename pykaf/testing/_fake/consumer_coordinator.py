"""The fake cluster's consumer-protocol (KIP-848) groups: members, epochs, server-side assignment.

State only, no I/O (the handlers are in ``consumer_groups.py``). Like Kafka's
group coordinator, a group has a **group epoch** (bumped when a member joins,
leaves or changes its subscription), a **target assignment** computed by a
server-side assignor for that epoch (``uniform``: balanced and sticky;
``range``: contiguous ranges per topic), and per member a **member epoch** and
the partitions it may use. A member reaches its target step by step on its
heartbeats: partitions the target takes away are revoked first (the member
keeps its epoch until a heartbeat no longer lists them as owned, and is
removed from the group if that takes longer than its rebalance timeout); then
it gets the target's partitions that no other member still holds, and the
target's epoch. Sessions expire when the group is next looked at.

A member may also speak the classic protocol (KIP-848's online migration,
``classic_members.py``): it has :class:`ClassicInfo` (its session timeout
and JoinGroup protocols), reconciles only when it rejoins, and is removed if
it does not rejoin or sync within its rebalance timeout once told to. When a
consumer-protocol member's session runs out and only classic members would
remain, ``on_last_consumer_member`` may turn the group into a classic one
(``group_migration.py``).
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

#: A partition by topic id.
IdPartition = tuple[uuid.UUID, int]
ASSIGNORS = ("uniform", "range")


@dataclass
class ClassicInfo:
    """What a member speaking the classic protocol inside a consumer group also has."""

    session_timeout_ms: int
    #: its JoinGroup protocols (name, subscription), preferred first
    protocols: list[tuple[str, bytes]]
    #: it must rejoin (JoinGroup) by then, having been told to (REBALANCE_IN_PROGRESS)
    join_deadline: float = math.inf
    #: it must sync (SyncGroup) by then, having joined
    sync_deadline: float = math.inf

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup and SyncGroup answers name: its first."""
        return self.protocols[0][0]


@dataclass
class ConsumerMember:
    """One member of a consumer-protocol group (``classic`` set: one speaking the classic one)."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    epoch: int = 0
    previous_epoch: int = -1
    rebalance_timeout_ms: int = 300_000
    topics: list[str] = field(default_factory=list)
    regex: str | None = None
    assignor: str | None = None
    #: partitions the member may use now, and those it must give up first
    assigned: set[IdPartition] = field(default_factory=set)
    revoking: set[IdPartition] = field(default_factory=set)
    #: the assignment last sent (an answer carries one only when it changed)
    sent: frozenset[IdPartition] | None = None
    deadline: float = 0.0
    #: when the partitions being revoked must be given up (the rebalance timeout)
    revoke_deadline: float = 0.0
    #: a static member that left with epoch -2: its place is kept until the deadline
    left: bool = False
    rack: str | None = None
    classic: ClassicInfo | None = None


@dataclass
class ConsumerGroupState:
    """A consumer-protocol group."""

    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "uniform"
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, set[IdPartition]] = field(default_factory=dict)
    #: each member's subscribed topics and their partition counts, at the last epoch
    signature: tuple[object, ...] = ()

    @property
    def state(self) -> str:
        """Kafka's state name: Empty, Reconciling (members short of their target) or Stable."""
        if not self.members:
            return "Empty"
        for m in self.members.values():
            if m.revoking or m.assigned != self.target.get(m.member_id, set()):
                return "Reconciling"
            if m.epoch != self.assignment_epoch:
                return "Reconciling"
        return "Stable"

    def classic_members(self) -> list[ConsumerMember]:
        """The members speaking the classic protocol."""
        return [m for m in self.members.values() if m.classic is not None]

    def unreleased(self, m: ConsumerMember) -> set[IdPartition]:
        """Partitions of ``m``'s target it does not have yet (another member still holds them)."""
        return self.target.get(m.member_id, set()) - m.assigned

    def held_by_others(self, member_id: str) -> set[IdPartition]:
        """Partitions another member may still be consuming."""
        out: set[IdPartition] = set()
        for m in self.members.values():
            if m.member_id != member_id:
                out |= m.assigned | m.revoking
        return out


def clock() -> float:
    """The coordinator's clock (monotonic seconds)."""
    return time.monotonic()


class ConsumerGroupCoordinator:
    """Every consumer-protocol group of the fake cluster.

    Args:
        heartbeat_interval_ms: what heartbeat answers tell members (Kafka's
            ``group.consumer.heartbeat.interval.ms``; pykaf's Kafka test cluster
            uses 1000 too).
        session_timeout_ms: how long a silent member keeps its place (Kafka's
            ``group.consumer.session.timeout.ms``; 10 s as on pykaf's test cluster).
    """

    def __init__(self, heartbeat_interval_ms: int = 1000, session_timeout_ms: int = 10_000) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.groups: dict[str, ConsumerGroupState] = {}
        #: called with the group and a consumer-protocol member about to be removed
        #: when only classic members would remain; True: the group is a classic
        #: group now (and no longer here)
        self.on_last_consumer_member: (
            Callable[[ConsumerGroupState, ConsumerMember], bool] | None
        ) = None

    def group(self, group_id: str) -> ConsumerGroupState | None:
        """The group with expired members removed, or None (also when it became classic)."""
        g = self.groups.get(group_id)
        if g is not None:
            now = clock()
            for m in [m for m in g.members.values() if _expired(m, now)]:
                if self.downgrades(g, m):
                    return None
                del g.members[m.member_id]  # the handlers' refresh gives the new epoch
        return g

    def downgrades(self, g: ConsumerGroupState, m: ConsumerMember) -> bool:
        """Whether removing ``m`` turned the group into a classic group (Kafka's downgrade)."""
        if m.classic is not None or self.on_last_consumer_member is None:
            return False
        rest = [o for o in g.members.values() if o is not m]
        if not rest or any(o.classic is None for o in rest):
            return False
        return self.on_last_consumer_member(g, m)

    def touch(self, m: ConsumerMember) -> None:
        """A heartbeat from ``m``: its session starts again."""
        timeout_ms = self.session_timeout_ms if m.classic is None else m.classic.session_timeout_ms
        m.deadline = clock() + timeout_ms / 1000


def _expired(m: ConsumerMember, now: float) -> bool:
    """Whether ``m`` must go: its session ran out, or it overran its rebalance timeout.

    A consumer-protocol member overruns it by not giving partitions up; a
    classic member by not rejoining, or not syncing, in time.
    """
    if m.deadline <= now:
        return True
    if m.revoking and m.classic is None and m.revoke_deadline <= now:
        return True
    c = m.classic
    return c is not None and (c.join_deadline <= now or c.sync_deadline <= now)


def subscribed(member: ConsumerMember, topics: dict[str, uuid.UUID]) -> list[str]:
    """The topics of ``topics`` (name -> id) that ``member`` subscribes to."""
    if member.regex is not None:
        pattern = re.compile(member.regex)
        return sorted(t for t in topics if pattern.fullmatch(t))
    return sorted(t for t in member.topics if t in topics)


def compute_target(
    g: ConsumerGroupState, topics: dict[str, uuid.UUID], partitions: dict[str, int]
) -> None:
    """The target assignment of the group's epoch (``uniform`` or ``range``)."""
    members = sorted(g.members.values(), key=lambda m: m.member_id)
    wanted: dict[str, list[str]] = {m.member_id: subscribed(m, topics) for m in members}
    target: dict[str, set[IdPartition]] = {m.member_id: set() for m in members}
    if g.assignor == "range":
        for topic in sorted({t for ts in wanted.values() for t in ts}):
            subs = [mid for mid in target if topic in wanted[mid]]
            n = partitions[topic]
            for i, mid in enumerate(subs):
                lo = i * n // len(subs)
                hi = (i + 1) * n // len(subs)
                target[mid] |= {(topics[topic], p) for p in range(lo, hi)}
    else:
        _uniform(g, members, wanted, target, topics, partitions)
    g.target = target
    g.assignment_epoch = g.epoch


def _uniform(
    g: ConsumerGroupState,
    members: list[ConsumerMember],
    wanted: dict[str, list[str]],
    target: dict[str, set[IdPartition]],
    topics: dict[str, uuid.UUID],
    partitions: dict[str, int],
) -> None:
    """Balanced and sticky: members keep what they had up to their share; the rest is dealt."""
    by_topic = {topics[t]: t for t in topics}
    every: list[IdPartition] = sorted(
        {(topics[t], p) for ts in wanted.values() for t in ts for p in range(partitions[t])},
        key=lambda tp: (by_topic[tp[0]], tp[1]),
    )
    eligible = {mid: {topics[t] for t in wanted[mid]} for mid in wanted}
    if not members:
        return
    share, extra = divmod(len(every), len(members))
    quota = {m.member_id: share + (1 if i < extra else 0) for i, m in enumerate(members)}
    taken: set[IdPartition] = set()
    for m in members:
        kept = sorted(
            (tp for tp in g.target.get(m.member_id, set()) if tp[0] in eligible[m.member_id]),
            key=lambda tp: (by_topic.get(tp[0], ""), tp[1]),
        )
        for tp in kept[: quota[m.member_id]]:
            if tp in every and tp not in taken:
                target[m.member_id].add(tp)
                taken.add(tp)
    for tp in every:
        if tp in taken:
            continue
        fits = [
            m.member_id
            for m in members
            if tp[0] in eligible[m.member_id] and len(target[m.member_id]) < quota[m.member_id]
        ] or [m.member_id for m in members if tp[0] in eligible[m.member_id]]
        if fits:
            owner = min(fits, key=lambda mid: (len(target[mid]), mid))
            target[owner].add(tp)
            taken.add(tp)


def reconcile(
    g: ConsumerGroupState, m: ConsumerMember, owned: Iterable[IdPartition] | None
) -> None:
    """Move ``m`` one step towards its target, given what it reports owning."""
    if owned is not None and m.revoking and not (set(owned) & m.revoking):
        m.revoking = set()  # the member gave them up
    if m.revoking:
        return
    target = g.target.get(m.member_id, set())
    gone = m.assigned - target
    if gone:
        m.assigned -= gone
        m.revoking = gone
        m.revoke_deadline = clock() + m.rebalance_timeout_ms / 1000
        return
    m.assigned |= target - g.held_by_others(m.member_id)
    if m.epoch != g.assignment_epoch:
        m.previous_epoch, m.epoch = m.epoch, g.assignment_epoch
