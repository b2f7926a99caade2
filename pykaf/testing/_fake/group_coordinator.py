"""The fake cluster's group coordinator state: groups, members, committed offsets; no requests.

Groups follow Kafka's state machine (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead); :class:`GroupCoordinator` holds them, applies
their timeouts and ends join phases. The request handlers (``groups.py``)
drive it; it knows nothing of requests, connections or the cluster.

Offsets a transaction commits (TxnOffsetCommit) wait in ``pending`` under the
producer id until the transaction ends: :meth:`GroupCoordinator.complete_transaction`
makes them the group's committed offsets on commit and drops them on abort.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import trio

from pykaf import protocol as P

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)
STATES = (EMPTY, PREPARING, COMPLETING, STABLE, DEAD)


@dataclass(slots=True)
class CommittedOffset:
    """A committed offset of one partition for one group."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1


TopicPartition = tuple[str, int]


@dataclass
class Member:
    """One member of a group, as the coordinator sees it."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    deadline: float = 0.0
    assignment: bytes = b""
    #: in the current join phase, this member sent its JoinGroup
    awaiting_join: bool = False
    join_result: P.JoinGroupResponse | None = None
    #: requests of this member waiting in a handler: it is alive meanwhile
    busy: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for ``protocol`` (empty when it has none)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def touch(self, now: float) -> None:
        """The member was heard from: its session runs from now."""
        self.deadline = now + self.session_timeout_ms / 1000


@dataclass
class Group:
    """A classic group: its state, generation, members and leader."""

    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: member ids handed out with MEMBER_ID_REQUIRED, not joined yet, by deadline
    pending: dict[str, float] = field(default_factory=dict)
    #: group instance id -> member id, for static members
    static: dict[str, str] = field(default_factory=dict)
    rebalance_deadline: float = math.inf
    initial_delay: bool = False
    rebalance_started: float = 0.0
    changed: trio.Event = field(default_factory=trio.Event)

    def notify(self) -> None:
        """Wake every handler waiting on this group."""
        self.changed.set()
        self.changed = trio.Event()

    def fenced(self, member_id: str, instance_id: str | None) -> bool:
        """Whether ``instance_id`` now belongs to a member id other than ``member_id``."""
        if instance_id is None:
            return False
        current = self.static.get(instance_id)
        return current is not None and current != member_id

    def next_deadline(self) -> float:
        """When something may time out in this group."""
        times = [m.deadline for m in self.members.values() if not m.busy]
        times.extend(self.pending.values())
        if self.state == PREPARING:
            times.append(self.rebalance_deadline)
        return min(times, default=math.inf)


def clock() -> float:
    """The groups' clock (trio's, so tests may drive it)."""
    return trio.current_time()


def wall_ms() -> int:
    """Wall-clock milliseconds (commit timestamps)."""
    return int(time.time() * 1000)


class GroupCoordinator:
    """Groups and committed offsets by group, and the offsets transactions hold until they end."""

    def __init__(self, initial_rebalance_delay_ms: int = 0) -> None:
        #: how long the first join of an empty group waits for more members
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        #: producer id -> group -> partition -> offset, for open transactions
        self.pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}

    # -- offsets -----------------------------------------------------------------

    def commit(self, group_id: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        """Store a committed offset for a group."""
        self.offsets.setdefault(group_id, {})[tp] = committed

    def committed(self, group_id: str, tp: TopicPartition) -> CommittedOffset | None:
        """The group's committed offset for a partition, or None."""
        return self.offsets.get(group_id, {}).get(tp)

    def add_transaction_offset(
        self, producer_id: int, group_id: str, tp: TopicPartition, committed: CommittedOffset
    ) -> None:
        """Hold an offset a transaction commits until the transaction ends."""
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = committed

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for this group and partition."""
        return any(tp in groups.get(group_id, {}) for groups in self.pending.values())

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction ended: apply its offsets (commit) or drop them (abort)."""
        groups = self.pending.pop(producer_id, {})
        if committed:
            for group_id, offsets in groups.items():
                for tp, off in offsets.items():
                    self.commit(group_id, tp, off)

    # -- group state ---------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        """The group, its timeouts applied, or None when it does not exist."""
        g = self.groups.get(group_id)
        if g is not None:
            self.tick(g)
        return g

    def get_or_create(self, group_id: str) -> Group:
        """The group, created Empty when it does not exist."""
        g = self.group(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    def state_of(self, group_id: str) -> str:
        """The group's state name (Dead when it does not exist)."""
        g = self.group(group_id)
        return DEAD if g is None else g.state

    def exists(self, group_id: str) -> bool:
        """Whether the group has members, a state or committed offsets."""
        return group_id in self.groups or bool(self.offsets.get(group_id))

    def tick(self, g: Group) -> None:
        """Expire sessions and end the join phase when its time came (Kafka's timers)."""
        now = clock()
        for mid, deadline in list(g.pending.items()):
            if deadline <= now:
                del g.pending[mid]
        expired = [m for m in g.members.values() if not m.busy and m.deadline <= now]
        for m in expired:
            self.remove_member(g, m)
        if expired and g.state in (STABLE, COMPLETING):
            self.prepare_rebalance(g)
        self.maybe_complete_join(g)

    def remove_member(self, g: Group, m: Member) -> None:
        """Take a member out of the group (no rebalance started here)."""
        g.members.pop(m.member_id, None)
        if m.instance_id is not None and g.static.get(m.instance_id) == m.member_id:
            del g.static[m.instance_id]
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)
        if not g.members and g.state in (STABLE, COMPLETING):
            g.state = EMPTY
            g.generation += 1
            g.protocol = None
            g.leader = None
        g.notify()

    def members_left(self, g: Group) -> None:
        """Members left: rebalance the rest (or settle an empty group)."""
        if g.state in (STABLE, COMPLETING) and g.members:
            self.prepare_rebalance(g)
        self.maybe_complete_join(g)

    def prepare_rebalance(self, g: Group) -> None:
        """Start a join phase: every member must rejoin."""
        now = clock()
        initial = g.state == EMPTY
        for m in g.members.values():
            # A result not yet picked up by its waiting JoinGroup stays: that
            # member was answered (as Kafka answers it at once) and learns of
            # this new rebalance from its SyncGroup or heartbeat.
            m.awaiting_join = False
        g.state = PREPARING
        g.rebalance_started = now
        g.initial_delay = initial and self.initial_rebalance_delay_ms > 0
        if g.initial_delay:
            g.rebalance_deadline = now + self.initial_rebalance_delay_ms / 1000
        else:
            g.rebalance_deadline = now + self._rebalance_timeout(g)
        g.notify()

    def _rebalance_timeout(self, g: Group) -> float:
        return max((m.rebalance_timeout_ms for m in g.members.values()), default=0) / 1000

    def maybe_complete_join(self, g: Group) -> None:
        """End the join phase when everyone rejoined (or its time ran out)."""
        if g.state != PREPARING:
            return
        now = clock()
        everyone = all(m.awaiting_join for m in g.members.values())
        if not (now >= g.rebalance_deadline or (everyone and not g.initial_delay)):
            return
        for m in [m for m in g.members.values() if not m.awaiting_join]:
            self.remove_member(g, m)
        g.generation += 1
        if not g.members:
            g.state = EMPTY
            g.protocol = None
            g.leader = None
            g.notify()
            return
        g.protocol = self.select_protocol(g.members.values())
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING
        for m in g.members.values():
            m.assignment = b""
            m.join_result = self.join_response(g, m, skip_assignment=False)
            m.touch(now)
        g.notify()

    @staticmethod
    def candidates(members: Iterable[Member]) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in members]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self, members: Iterable[Member]) -> str:
        """The protocol every member offers with the most first votes (Kafka's choice)."""
        ms = list(members)
        candidates = self.candidates(ms)
        votes: dict[str, int] = {}
        for m in ms:
            vote = next(name for name, _ in m.protocols if name in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        # Kafka: the most votes wins; ties go to the first member's preference.
        first = [name for name, _ in ms[0].protocols if name in candidates]
        return max(first, key=lambda name: (votes.get(name, 0), -first.index(name)))

    def join_response(self, g: Group, m: Member, *, skip_assignment: bool) -> P.JoinGroupResponse:
        leader = m.member_id == g.leader
        members = (
            [
                P.JoinGroupResponse.JoinGroupResponseMember(
                    member_id=o.member_id,
                    group_instance_id=o.instance_id,
                    metadata=o.metadata(g.protocol),
                )
                for o in g.members.values()
            ]
            if leader
            else []
        )
        return P.JoinGroupResponse(
            throttle_time_ms=0,
            error_code=0,
            generation_id=g.generation,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol,
            leader=g.leader or "",
            skip_assignment=skip_assignment,
            member_id=m.member_id,
            members=members,
        )

    async def wait(self, g: Group, m: Member | None, done: Callable[[], bool]) -> None:
        """Wait until ``done()``, applying the group's timeouts as they fall due."""
        if m is not None:
            m.busy += 1
        try:
            while not done():
                event = g.changed
                with trio.move_on_at(g.next_deadline()):
                    await event.wait()
                self.tick(g)
        finally:
            if m is not None:
                m.busy -= 1
                m.touch(clock())
