"""The fake cluster's share groups (KIP-932): members, epochs, the simple assignor, share state.

State only, no I/O (the handlers are in ``share_groups.py`` and
``share_fetch.py``). A share group hands out records, not partitions, so
there is nothing to revoke: a member's epoch is the group's as soon as the
target assignment of that epoch is computed, and it gets its target at once.
The ``simple`` assignor spreads the partitions of a subscription: with no
more members than partitions each partition goes to one member, balanced;
with more members, every member gets one and each partition is shared by
ceil(members / partitions) of them. Members keep what they had while that
stays balanced. A partition assigned for the first time gets share state
(:class:`~pykaf.testing._fake.share_partition.SharePartitionState`), which
a share fetch needs. Members whose session (``share.session.timeout.ms``)
ran out are removed when the group is next looked at. Leaving the group
does not end the member's share sessions or give back its records: Kafka
keeps them until the session closes or the locks expire.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from pykaf.testing._fake.share_partition import SharePartitionState

#: A partition by topic id.
IdPartition = tuple[uuid.UUID, int]
ASSIGNOR = "simple"


@dataclass
class ShareMember:
    """One member of a share group."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    topics: list[str] = field(default_factory=list)
    assigned: frozenset[IdPartition] = frozenset()
    #: the assignment last sent (an answer carries one only when it changed)
    sent: frozenset[IdPartition] | None = None
    deadline: float = 0.0


@dataclass
class ShareGroup:
    """A share group: epochs, members, target assignment and the share state of its partitions."""

    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, frozenset[IdPartition]] = field(default_factory=dict)
    signature: tuple[object, ...] = ()
    partitions: dict[IdPartition, SharePartitionState] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's state name: Empty or Stable."""
        return "Stable" if self.members else "Empty"


def clock() -> float:
    """The share coordinator's clock (trio's, as every handler runs in the cluster's loop)."""
    return trio.current_time()


class ShareGroupCoordinator:
    """Every share group of the fake cluster, and the wakeup of fetches waiting on them."""

    def __init__(self) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self._waiters: set[trio.Event] = set()

    def group(self, group_id: str, session_timeout_ms: int | None = None) -> ShareGroup | None:
        """The group, members whose session ran out removed (when the timeout is given)."""
        g = self.groups.get(group_id)
        if g is not None and session_timeout_ms is not None:
            now = clock()
            for m in [m for m in g.members.values() if m.deadline <= now]:
                del g.members[m.member_id]
        return g

    def touch(self, m: ShareMember, session_timeout_ms: int) -> None:
        """A heartbeat from ``m``: its session starts again."""
        m.deadline = clock() + session_timeout_ms / 1000

    # -- waking waiting fetches --------------------------------------------------------

    def add_waiter(self, event: trio.Event) -> None:
        """Set ``event`` when records may have become available (released, expired, altered)."""
        self._waiters.add(event)

    def remove_waiter(self, event: trio.Event) -> None:
        """Stop waking ``event``."""
        self._waiters.discard(event)

    def notify(self) -> None:
        """Records may have become available: wake the waiting fetches."""
        for event in self._waiters:
            event.set()
        self._waiters.clear()


def refresh(g: ShareGroup, topics: dict[str, uuid.UUID], partitions: dict[str, int]) -> None:
    """A new group epoch and target when the members or what they subscribe to changed.

    ``topics`` maps the cluster's topic names to ids, ``partitions`` to counts.
    """
    subscriptions = {
        mid: tuple(sorted(t for t in m.topics if t in topics)) for mid, m in g.members.items()
    }
    signature = tuple(
        (mid, tuple((t, partitions[t]) for t in subs)) for mid, subs in subscriptions.items()
    )
    if signature == g.signature:
        return
    g.signature = signature
    g.epoch += 1
    g.target = simple_assignment(g, subscriptions, topics, partitions)
    g.assignment_epoch = g.epoch
    for parts in g.target.values():
        for tp in parts:
            g.partitions.setdefault(tp, SharePartitionState())


def simple_assignment(
    g: ShareGroup,
    subscriptions: dict[str, tuple[str, ...]],
    topics: dict[str, uuid.UUID],
    partitions: dict[str, int],
) -> dict[str, frozenset[IdPartition]]:
    """The ``simple`` assignor's target, per set of members subscribing to the same topics."""
    target: dict[str, set[IdPartition]] = {mid: set() for mid in subscriptions}
    buckets: dict[tuple[str, ...], list[str]] = {}
    for mid, subs in subscriptions.items():  # members in join order
        if subs:
            buckets.setdefault(subs, []).append(mid)
    for subs, members in buckets.items():
        every = [(topics[t], p) for t in subs for p in range(partitions[t])]
        _spread(members, every, g.target, target)
    return {mid: frozenset(parts) for mid, parts in target.items()}


def _spread(
    members: list[str],
    every: list[IdPartition],
    before: dict[str, frozenset[IdPartition]],
    target: dict[str, set[IdPartition]],
) -> None:
    per = max(1, math.ceil(len(members) / len(every))) if every else 0
    share, extra = divmod(per * len(every), len(members))
    quota = {mid: share + (1 if i < extra else 0) for i, mid in enumerate(members)}
    sharing: dict[IdPartition, int] = dict.fromkeys(every, 0)
    for mid in members:  # sticky: keep what stays within quota and sharing
        for tp in sorted(before.get(mid, ()), key=_order(every)):
            if tp in sharing and sharing[tp] < per and len(target[mid]) < quota[mid]:
                target[mid].add(tp)
                sharing[tp] += 1
    for mid in members:
        while len(target[mid]) < quota[mid]:
            free = [tp for tp in every if sharing[tp] < per and tp not in target[mid]]
            if not free:
                break
            tp = min(free, key=lambda x: sharing[x])
            target[mid].add(tp)
            sharing[tp] += 1


def _order(every: list[IdPartition]) -> Callable[[IdPartition], int]:
    index = {tp: i for i, tp in enumerate(every)}
    return lambda tp: index.get(tp, len(index))
