"""Partition assignors of the classic consumer group protocol.

In the classic protocol (JoinGroup / SyncGroup) every member sends, for each
assignor it supports, a *subscription* (Kafka's ``ConsumerProtocolSubscription``:
its topics, assignor-specific user data and, from v1, the partitions it owns);
the coordinator picks an assignor every member supports, the group leader runs
it over all the subscriptions and sends each member its *assignment*
(``ConsumerProtocolAssignment``). Both wire formats live in the protocol layer,
:mod:`pykaf.protocol.consumer_protocol`, and are re-exported here; this module
keeps the sticky assignors' own user-data format.

The assignors are the ones Kafka clients agree on by name: ``range`` and
``roundrobin`` give exactly Java's results; ``sticky`` and
``cooperative-sticky`` read and write Java's formats (and librdkafka's) and give
a balanced assignment that moves as few partitions as possible (any member may
be the leader, so results only need to be valid, not identical to Java's).
"""

from __future__ import annotations

import abc
import heapq
import struct
from collections import deque
from collections.abc import Mapping, Sequence
from typing import ClassVar, TypeAlias

from pykaf.errors import ConfigError
from pykaf.protocol import MalformedMessageError
from pykaf.protocol._message import Data, Struct
from pykaf.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    merge_partitions,
    partition_lists,
)

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

_INT32 = struct.Struct(">i")
#: What an assignor returns: member id -> topic -> partitions.
_Assignment: TypeAlias = dict[str, dict[str, list[int]]]
_TP: TypeAlias = tuple[str, int]


# --------------------------------------------------------------------------- sticky user data


class _StickyTopicPartition(Struct):
    """One topic's partitions in the sticky assignor's user data."""

    __slots__ = ("partitions", "topic")
    topic: str
    partitions: list[int]


class _StickyAssignorUserData(Data):
    """Java's ``StickyAssignorUserData``: the previous assignment and its generation.

    It is written without a version prefix, always as v1 (v1 added the
    generation); a reader tries v1, then v0, and ignores data that is neither.
    """

    __slots__ = ("generation", "previous_assignment")
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = None
    SCHEMA = """
        PreviousAssignment []TopicPartition 0+
          Topic string 0+
          Partitions []int32 0+
        Generation int32 1+ default=-1 ignorable
    """

    TopicPartition: TypeAlias = _StickyTopicPartition

    previous_assignment: list[_StickyTopicPartition]
    generation: int


def _encode_sticky_user_data(owned: Mapping[str, Sequence[int]], generation: int) -> bytes:
    tps = [_StickyTopicPartition(topic=t, partitions=ps) for t, ps in partition_lists(owned)]
    return _StickyAssignorUserData(previous_assignment=tps, generation=generation).encode(1)


def _decode_sticky_user_data(data: bytes) -> tuple[dict[str, list[int]], int] | None:
    """The previous assignment and generation in sticky user data (None if unreadable)."""
    for version in (1, 0):
        try:
            msg = _StickyAssignorUserData.decode(data, version)
        except MalformedMessageError:
            continue
        pairs = ((tp.topic, list(tp.partitions)) for tp in msg.previous_assignment)
        return merge_partitions(pairs), msg.generation
    return None


# --------------------------------------------------------------------------- assignors


def _java_order(text: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` does (by UTF-16 unit)."""
    return text.encode("utf-16-be", "surrogatepass")


def _member_order(sub: Subscription) -> tuple[int, bytes, bytes]:
    """Java's member order: static members by instance id first, then the rest by id."""
    if sub.group_instance_id is not None:
        return (0, _java_order(sub.group_instance_id), _java_order(sub.member_id))
    return (1, b"", _java_order(sub.member_id))


def _subscribed(
    members: Mapping[str, Subscription], partitions: Mapping[str, int]
) -> dict[str, set[str]]:
    """Each member's subscribed topics that exist and have partitions."""
    return {
        mid: {t for t in sub.topics if partitions.get(t, 0) > 0} for mid, sub in members.items()
    }


def _finish(result: Mapping[str, Mapping[str, list[int]]]) -> _Assignment:
    """Topics sorted, partitions sorted, empty topics dropped."""
    return {
        mid: {t: sorted(ps) for t, ps in sorted(topics.items()) if ps}
        for mid, topics in result.items()
    }


class Assignor(abc.ABC):
    """A partition assignor: what the group leader runs to divide partitions among members.

    Attributes:
        name: the protocol name sent in JoinGroup; members agree on an assignor
            by this name, so it must match other clients' byte for byte.
        rebalance_protocol: ``"eager"`` (members give up every partition before
            rejoining) or ``"cooperative"`` (they keep them; a partition moves
            in two rebalances, revoked in the first and assigned in the second).
    """

    name: ClassVar[str]
    rebalance_protocol: ClassVar[str]
    #: The subscription version :meth:`metadata` writes.
    _subscription_version: ClassVar[int] = 0

    def metadata(
        self, topics: Sequence[str], owned: Mapping[str, Sequence[int]], generation: int
    ) -> bytes:
        """The member's subscription for JoinGroup (its protocol metadata).

        Args:
            topics: the topics the member subscribes to.
            owned: the partitions it was last assigned, by topic.
            generation: the generation of that assignment, -1 if none.
        """
        version = self._subscription_version
        return encode_subscription(
            sorted(set(topics)),
            user_data=self._user_data(owned, generation),
            owned_partitions=owned if version >= 1 else None,
            generation=generation if version >= 2 else -1,
            version=version,
        )

    def _user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        """The user data this assignor puts in a subscription (None: none)."""
        return None

    @abc.abstractmethod
    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> _Assignment:
        """Divide the partitions among the members.

        Args:
            members: member id -> its subscription.
            partitions: topic -> partition count, for the subscribed topics
                that exist.

        Returns:
            member id -> topic -> partitions (sorted). Every member has an
            entry, empty when it gets nothing.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RangeAssignor(Assignor):
    """Java's ``RangeAssignor``: each topic split into contiguous ranges.

    For each topic, its subscribers are sorted (static members by group
    instance id first, then dynamic members by member id) and each gets a
    contiguous range of partitions; the first ``count % subscribers`` get one
    more. With two members and topics t0, t1 of 3 partitions each, the first
    gets t0 [0, 1] and t1 [0, 1], the second t0 [2] and t1 [2].
    """

    name = "range"
    rebalance_protocol = "eager"

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> _Assignment:
        """Assign ranges topic by topic (see the class docstring)."""
        subscribed = _subscribed(members, partitions)
        result: dict[str, dict[str, list[int]]] = {mid: {} for mid in members}
        per_topic: dict[str, list[str]] = {}
        for mid in members:
            for topic in subscribed[mid]:
                per_topic.setdefault(topic, []).append(mid)
        for topic, mids in per_topic.items():
            mids.sort(key=lambda m: _member_order(members[m]))
            quota, extra = divmod(partitions[topic], len(mids))
            start = 0
            for i, mid in enumerate(mids):
                length = quota + (1 if i < extra else 0)
                result[mid][topic] = list(range(start, start + length))
                start += length
        return _finish(result)


class RoundRobinAssignor(Assignor):
    """Java's ``RoundRobinAssignor``: partitions dealt to members in turn.

    Every partition of every subscribed topic, sorted by topic then
    partition, goes to the next member in the sorted member list (as
    :class:`RangeAssignor` sorts them), skipping members that do not
    subscribe to its topic.
    """

    name = "roundrobin"
    rebalance_protocol = "eager"

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> _Assignment:
        """Deal the partitions round robin (see the class docstring)."""
        subscribed = _subscribed(members, partitions)
        result: dict[str, dict[str, list[int]]] = {mid: {} for mid in members}
        order = sorted(members, key=lambda m: _member_order(members[m]))
        topics = sorted(set().union(*subscribed.values()), key=_java_order)
        turn = 0
        for topic in topics:
            for partition in range(partitions[topic]):
                while topic not in subscribed[order[turn % len(order)]]:
                    turn += 1
                result[order[turn % len(order)]].setdefault(topic, []).append(partition)
                turn += 1
        return _finish(result)


class _StickyBase(Assignor):
    """What both sticky assignors share: the assignment, from each member's previous one."""

    _subscription_version = 2

    @abc.abstractmethod
    def _previous(self, sub: Subscription) -> tuple[Mapping[str, Sequence[int]], int]:
        """The partitions ``sub``'s member owned, and the generation they belong to."""

    def _plan(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> tuple[_Assignment, dict[_TP, str], dict[str, Mapping[str, Sequence[int]]]]:
        """The sticky assignment, each partition's rightful owner and every member's claims."""
        previous = {mid: self._previous(sub) for mid, sub in members.items()}
        subscribed = _subscribed(members, partitions)
        owners = _rightful_owners(subscribed, partitions, previous)
        result = _sticky_assign(subscribed, partitions, owners)
        return result, owners, {mid: owned for mid, (owned, _gen) in previous.items()}


class StickyAssignor(_StickyBase):
    """Java's ``StickyAssignor`` (eager): balanced, and moving as little as possible.

    Each member's previous assignment travels in the subscription's user data
    in Java's ``StickyAssignorUserData`` format (v1: partitions and
    generation); a member whose user data is empty is read from the
    subscription's owned partitions and generation instead, and one whose
    user data cannot be read is taken to own nothing (as Java does).
    """

    name = "sticky"
    rebalance_protocol = "eager"

    def _user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        if not any(len(ps) for ps in owned.values()) and generation < 0:
            return None  # (never assigned: Java sends no user data either)
        return _encode_sticky_user_data(owned, generation)

    def _previous(self, sub: Subscription) -> tuple[Mapping[str, Sequence[int]], int]:
        if sub.user_data:
            return _decode_sticky_user_data(sub.user_data) or ({}, -1)
        return sub.owned_partitions, sub.generation

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> _Assignment:
        """Balance the partitions, keeping each with its previous owner where possible.

        Only members' counts that must change do: with equal subscriptions the
        counts end within one of each other and the fewest partitions move
        that allow it; with different subscriptions the counts are as even as
        the subscriptions allow. A partition two members claim goes to the one
        whose claim is of the later generation (a claim both make in the same
        generation is void); partitions of topics a member no longer
        subscribes to, and partitions that no longer exist, are taken away.
        """
        return self._plan(members, partitions)[0]


class CooperativeStickyAssignor(_StickyBase):
    """Java's ``CooperativeStickyAssignor``: the sticky assignment, moved in two rebalances.

    The assignment is :class:`StickyAssignor`'s, computed from the owned
    partitions and generation in the subscription (generation from the
    4-byte user data Java writes when the subscription predates v2). Then a
    partition that would move from a member that still owns it to another
    is withheld (given to nobody): its owner revokes it on seeing its new
    assignment and rejoins, and the next rebalance gives it out.
    """

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def _user_data(self, owned: Mapping[str, Sequence[int]], generation: int) -> bytes | None:
        return _INT32.pack(generation)

    def _previous(self, sub: Subscription) -> tuple[Mapping[str, Sequence[int]], int]:
        generation = sub.generation
        if generation == -1 and sub.user_data:
            if len(sub.user_data) == 4:  # Java's: the generation alone
                (generation,) = _INT32.unpack(sub.user_data)
            else:  # librdkafka's: the sticky user data
                generation = (_decode_sticky_user_data(sub.user_data) or ({}, -1))[1]
        return sub.owned_partitions, generation

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> _Assignment:
        """The sticky assignment minus the partitions whose owner must revoke them first."""
        result, owners, claims = self._plan(members, partitions)
        claimants: dict[_TP, set[str]] = {}
        for mid, owned in claims.items():
            for topic, ps in owned.items():
                for p in ps:
                    claimants.setdefault((topic, p), set()).add(mid)
        for mid, topics in result.items():
            for topic, ps in topics.items():
                ps[:] = [
                    p
                    for p in ps
                    if owners.get((topic, p)) == mid or not claimants.get((topic, p), set()) - {mid}
                ]
        return _finish(result)


# --------------------------------------------------------------------------- sticky core


def _rightful_owners(
    subscribed: Mapping[str, set[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, tuple[Mapping[str, Sequence[int]], int]],
) -> dict[_TP, str]:
    """Who keeps each partition if balance allows: its claimant of the latest generation.

    A partition claimed by several members goes to the one whose claim is of
    the highest generation; if two claim it in that generation, neither does.
    The winner keeps it only if it still subscribes to the topic; partitions
    that no longer exist are dropped.
    """
    best: dict[_TP, tuple[int, str | None]] = {}
    for mid in sorted(previous):
        owned, generation = previous[mid]
        for topic, ps in owned.items():
            count = partitions.get(topic, 0)
            for p in set(ps):
                if not 0 <= p < count:
                    continue
                current = best.get((topic, p))
                if current is None or generation > current[0]:
                    best[(topic, p)] = (generation, mid)
                elif generation == current[0]:
                    best[(topic, p)] = (generation, None)
    return {
        tp: mid
        for tp, (_gen, mid) in best.items()
        if mid is not None and mid in subscribed and tp[0] in subscribed[mid]
    }


def _sticky_assign(
    subscribed: Mapping[str, set[str]],
    partitions: Mapping[str, int],
    owners: Mapping[_TP, str],
    *,
    shortcut: bool = True,
) -> _Assignment:
    """The balanced assignment that moves the fewest partitions from their owners.

    "Balanced" is the assignment whose member counts have the least sum of
    squares the subscriptions allow (with equal subscriptions: counts within
    one of each other); among those, the one keeping the most partitions with
    their rightful owner (``owners``). Equal subscriptions take a direct
    route; ``shortcut=False`` forces the general one (for tests).
    """
    order = sorted(subscribed, key=_java_order)
    topics = sorted(set().union(*subscribed.values()) if subscribed else (), key=_java_order)
    owned: dict[str, dict[str, list[int]]] = {mid: {} for mid in order}
    for (topic, p), mid in sorted(owners.items()):
        owned[mid].setdefault(topic, []).append(p)
    if not topics:
        return {mid: {} for mid in order}
    first = subscribed[order[0]]
    if shortcut and all(subscribed[mid] == first for mid in order):
        return _assign_equal(order, topics, partitions, owned)
    return _Balancer(order, topics, partitions, subscribed, owned).run()


def _assign_equal(
    order: list[str],
    topics: list[str],
    partitions: Mapping[str, int],
    owned: Mapping[str, Mapping[str, list[int]]],
) -> _Assignment:
    """The sticky assignment when every member subscribes to the same topics.

    ``q, r = divmod(partitions, members)``: r members get q + 1 partitions,
    the others q. The r places go to the members owning the most, so the
    fewest partitions move; a member over its count keeps its first ones.
    """
    everything = [(t, p) for t in topics for p in range(partitions[t])]
    quota, extra = divmod(len(everything), len(order))
    kept = {mid: [(t, p) for t in topics for p in owned[mid].get(t, ())] for mid in order}
    rank = {mid: i for i, mid in enumerate(order)}
    by_owned = sorted(order, key=lambda m: (-len(kept[m]), rank[m]))
    cap = {mid: quota + (1 if i < extra else 0) for i, mid in enumerate(by_owned)}
    assigned = {mid: kept[mid][: cap[mid]] for mid in order}
    taken = {tp for tps in assigned.values() for tp in tps}
    heap = [(len(assigned[m]), rank[m], m) for m in order if len(assigned[m]) < cap[m]]
    heapq.heapify(heap)
    for tp in everything:
        if tp in taken:
            continue
        count, i, mid = heapq.heappop(heap)
        assigned[mid].append(tp)
        if count + 1 < cap[mid]:
            heapq.heappush(heap, (count + 1, i, mid))
    result: dict[str, dict[str, list[int]]] = {}
    for mid in order:
        result[mid] = {}
        for topic, p in assigned[mid]:
            result[mid].setdefault(topic, []).append(p)
    return _finish(result)


class _Balancer:
    """The sticky assignment for any subscriptions, as a min-cost flow.

    Partitions of one topic are interchangeable but for who owns them, so the
    state is a count per (member, topic): ``x``, and ``own`` the partitions
    of the topic the member rightfully owns. Moving one partition of topic T
    from member a to member b costs a "move" if a gives up one of its own
    (``x[a][T] <= own[a][T]``) and saves one if b gets one of its own back
    (``x[b][T] < own[b][T]``). In the graph of members and topics (a -> T when
    a holds a T partition, T -> b when b subscribes to T) a path from member a
    to member c shifts one partition along each edge: a loses one, c gains
    one, the members between keep their counts.

    The goal, lexicographic: least sum of squared counts (balance), then
    fewest moves. The start (everyone keeps what it owns, the rest goes to
    the least loaded) has no moves, hence no negative cycle. Then (1) while a
    member a can reach a member c with ``count(c) <= count(a) - 2``, shift
    along a cheapest path; (2) while a member a can reach a member with one
    partition fewer along a path of negative cost, shift one along it.
    Shifting along cheapest paths keeps the graph free of negative cycles,
    so at the end no change improves either goal: the result is optimal.
    """

    def __init__(
        self,
        order: list[str],
        topics: list[str],
        partitions: Mapping[str, int],
        subscribed: Mapping[str, set[str]],
        owned: Mapping[str, Mapping[str, list[int]]],
    ) -> None:
        self.order = order
        self.topics = topics
        self.counts = [partitions[t] for t in topics]
        self.owned = owned
        n_members = len(order)
        self.n_members = n_members
        tindex = {t: j for j, t in enumerate(topics)}
        self.member_topics = [sorted(tindex[t] for t in subscribed[mid]) for mid in order]
        self.subscribers: list[list[int]] = [[] for _ in topics]
        for i, js in enumerate(self.member_topics):
            for j in js:
                self.subscribers[j].append(i)
        self.own = [
            {j: len(owned[mid].get(topics[j], ())) for j in self.member_topics[i]}
            for i, mid in enumerate(order)
        ]
        self.x = [dict(own) for own in self.own]
        self.load = [sum(own.values()) for own in self.own]

    # -- the start

    def _place_unowned(self) -> None:
        free = list(self.counts)
        for own in self.own:
            for j, n in own.items():
                free[j] -= n
        for j in sorted(range(len(self.topics)), key=lambda j: (len(self.subscribers[j]), j)):
            heap = [(self.load[i], i) for i in self.subscribers[j]]
            heapq.heapify(heap)
            for _ in range(free[j]):
                load, i = heapq.heappop(heap)
                self.x[i][j] += 1
                self.load[i] += 1
                heapq.heappush(heap, (load + 1, i))

    # -- paths

    def _cheapest(self, sources: list[int]) -> tuple[list[int | None], list[int]] | None:
        """Cheapest path costs from the nearest of ``sources`` (Bellman-Ford with a queue).

        Nodes are members ``0..n-1`` and topics ``n + j``. None if a negative
        cycle shows up (it cannot; this only guards against looping forever).
        """
        n = self.n_members
        size = n + len(self.topics)
        dist: list[int | None] = [None] * size
        pred = [-1] * size
        queued = [False] * size
        relaxed = [0] * size
        for source in sources:
            dist[source] = 0
            queued[source] = True
        queue = deque(sources)
        while queue:
            u = queue.popleft()
            queued[u] = False
            du = dist[u]
            assert du is not None
            if u < n:
                own, x = self.own[u], self.x[u]
                edges = [(n + j, 1 if c <= own[j] else 0) for j, c in x.items() if c > 0]
            else:
                j = u - n
                edges = [
                    (i, -1 if self.x[i][j] < self.own[i][j] else 0) for i in self.subscribers[j]
                ]
            for v, w in edges:
                dv = dist[v]
                if dv is None or du + w < dv:
                    dist[v] = du + w
                    pred[v] = u
                    if not queued[v]:
                        relaxed[v] += 1
                        if relaxed[v] > size:
                            return None
                        queued[v] = True
                        queue.append(v)
        return dist, pred

    def _path(self, pred: list[int], target: int) -> list[int]:
        path = [target]
        while pred[path[-1]] != -1:
            path.append(pred[path[-1]])
        path.reverse()
        return path

    def _capacity(self, path: list[int]) -> int:
        """How many partitions can shift along ``path`` at the same cost per partition."""
        n = self.n_members
        cap = sum(self.counts)
        for k in range(0, len(path) - 1, 2):
            giver, j, taker = path[k], path[k + 1] - n, path[k + 2]
            held, own = self.x[giver][j], self.own[giver][j]
            cap = min(cap, held - own if held > own else held)
            held, own = self.x[taker][j], self.own[taker][j]
            if held < own:
                cap = min(cap, own - held)
        return cap

    def _shift(self, path: list[int], amount: int) -> None:
        n = self.n_members
        for k in range(0, len(path) - 1, 2):
            giver, j, taker = path[k], path[k + 1] - n, path[k + 2]
            self.x[giver][j] -= amount
            self.x[taker][j] += amount
        self.load[path[0]] -= amount
        self.load[path[-1]] += amount

    # -- the two phases

    def _levels(self) -> list[tuple[int, list[int]]]:
        """The members with topics grouped by partition count, highest count first."""
        levels: dict[int, list[int]] = {}
        for i in range(self.n_members):
            if self.member_topics[i]:
                levels.setdefault(self.load[i], []).append(i)
        return sorted(levels.items(), reverse=True)

    def _balance_once(self) -> bool | None:
        """Shift partitions from a member to one with two fewer or less it can reach."""
        levels = self._levels()
        lowest = levels[-1][0]
        for load, sources in levels:
            if load - lowest < 2:
                return False
            found = self._cheapest(sources)
            if found is None:
                return None
            dist, pred = found
            best: tuple[int, int, int] | None = None
            for c in range(self.n_members):
                dc = dist[c]
                if dc is not None and self.load[c] <= load - 2:
                    key = (self.load[c], dc, c)
                    if best is None or key < best:
                        best = key
            if best is not None:
                path = self._path(pred, best[2])
                gap = (load - best[0]) // 2
                self._shift(path, min(gap, self._capacity(path)))
                return True
        return False

    def _unmove_once(self) -> bool | None:
        """Swap which of two members has the extra partition when that moves fewer."""
        for load, sources in self._levels():
            found = self._cheapest(sources)
            if found is None:
                return None
            dist, pred = found
            best: tuple[int, int] | None = None
            for c in range(self.n_members):
                dc = dist[c]
                if (
                    dc is not None
                    and dc < 0
                    and self.load[c] == load - 1
                    and (best is None or (dc, c) < best)
                ):
                    best = (dc, c)
            if best is not None:
                self._shift(self._path(pred, best[1]), 1)
                return True
        return False

    def run(self) -> _Assignment:
        """Compute the assignment (see the class docstring)."""
        self._place_unowned()
        progress = self._balance_once()
        while progress:
            progress = self._balance_once()
        if progress is not None:  # (None: gave up improving; the state is still valid)
            while self._unmove_once():
                pass
        return self._materialize()

    def _materialize(self) -> _Assignment:
        """Concrete partitions from the counts: owners keep their lowest-numbered ones."""
        result: dict[str, dict[str, list[int]]] = {mid: {} for mid in self.order}
        for j, topic in enumerate(self.topics):
            taken: set[int] = set()
            needs: list[tuple[str, int]] = []
            for i in self.subscribers[j]:
                mid = self.order[i]
                mine = self.owned[mid].get(topic, [])
                keep = mine[: min(self.x[i][j], len(mine))]
                result[mid][topic] = list(keep)
                taken.update(keep)
                needs.append((mid, self.x[i][j] - len(keep)))
            pool = (p for p in range(self.counts[j]) if p not in taken)
            for mid, need in needs:
                for _ in range(need):
                    result[mid][topic].append(next(pool))
        return _finish(result)


#: The assignors by protocol name.
ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def assignor_for(name_or_obj: str | Assignor) -> Assignor:
    """The assignor named ``name_or_obj`` (a new instance), or the assignor given.

    Raises:
        ConfigError: no assignor has that name, or the value is neither a name
            nor an :class:`Assignor`.
    """
    if isinstance(name_or_obj, Assignor):
        return name_or_obj
    if isinstance(name_or_obj, str):
        cls = ASSIGNORS.get(name_or_obj)
        if cls is None:
            known = ", ".join(repr(n) for n in ASSIGNORS)
            raise ConfigError(f"unknown partition assignor {name_or_obj!r} (known: {known})")
        return cls()
    raise ConfigError(
        f"a partition assignor is a name or an Assignor, not {type(name_or_obj).__name__}"
    )
