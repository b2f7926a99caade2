"""The partition router: where each partition is led, and which worker serves it there.

A role reads or writes partitions through per-broker workers (the producer's
broker sinks, the consumer's broker fetchers). Every such partition has one
:class:`Route`: its leader and the leader epoch it was attached under, the
replica a rack-aware leader named for fetching (KIP-392) and until when that
stands, its failures in a row, and whether the metadata must be asked again
before the next attach. Only this module writes those fields
(``tests/test_private_access.py`` checks it).

One task per route runs :meth:`PartitionRouter.follow`: it looks the leader up
(refreshing the topic's metadata when the last attempt lost it), refuses a
leader older than the one the route was attached under (epoch fencing), lets
the role check a new leader epoch (the consumer's truncation check, KIP-320),
picks the node (the leader, or the named replica while it stands), and
attaches the route to the role's worker for that node. Then it waits until the
route is detached, and starts over after the one backoff
(:mod:`pykaf._cluster.backoff`) its failures earn.

The roles report what they see (:meth:`PartitionRouter.lost`,
:meth:`PartitionRouter.prefer`, :meth:`PartitionRouter.expire_preferred`,
:meth:`Route.succeeded`, :meth:`Route.detach`) and react to an attach or a
detach (:class:`Worker`); none of them looks a leader up itself.

A request sent once to a partition's leader (ListOffsets, a watermark Fetch,
DeleteRecords), with no route, asks :meth:`PartitionRouter.leader` (the
client's router, ``Client.router``) and, after an answer saying the leader
moved, :meth:`PartitionRouter.forget_leader`: the same reading of the metadata
as the routes'. The partitions a partitioner may pick from (those with a
leader) are :meth:`PartitionRouter.available`.
"""

from __future__ import annotations

import logging
import math
import uuid
from typing import Generic, Protocol, TypeVar

import trio

from pykaf import errors
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.metadata import Metadata, PartitionInfo, as_topic_uuid

__all__ = ["PartitionRouter", "Role", "Route", "Worker"]

log = logging.getLogger("pykaf.cluster")

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Worker(Protocol[T_contra]):
    """A role's per-broker worker (a broker sink, a broker fetcher): what it does on a move."""

    def attach(self, owner: T_contra) -> None:
        """Start serving ``owner``'s partition."""

    def detach(self, owner: T_contra) -> None:
        """Stop serving it."""


class Role(Protocol[T_contra]):
    """What :meth:`PartitionRouter.follow` asks of the role that owns a route.

    A role that subclasses it keeps the defaults of the first four (nothing
    to prepare, refresh, check or wait for).
    """

    async def prepare(self, owner: T_contra) -> bool:
        """Before a leader lookup: get ready (False: start over at once, no failure counted)."""
        return True

    def metadata_refreshed(self, topic: str) -> None:
        """The router refreshed ``topic``'s metadata for one of the role's routes."""
        return None

    async def validate(self, owner: T_contra, leader: int, previous: int, epoch: int) -> bool:
        """A leader under a new epoch (``previous`` was the last attached under; -1: none).

        False starts over at once (no failure counted); True attaches under ``epoch``.
        """
        return True

    def ready(self, owner: T_contra) -> bool:
        """Whether ``owner`` can be attached now that its node is known."""
        return True

    def worker(self, node: int) -> Worker[T_contra]:
        """The role's worker for broker ``node`` (started on first use)."""
        ...

    def unplaced(self, owner: T_contra, failures: int, error: errors.PykafError | None) -> None:
        """No node was found this time (``error``: why, when something raised)."""
        ...


class Route(Generic[T]):
    """One partition's place in the cluster, as the role that owns ``owner`` sees it.

    Attributes:
        topic, partition: the partition.
        owner: the role's object for it (a producer's partition state, a
            partition consumer); what its workers are handed.
        worker: the worker serving it now, or None (detached).
        leader: the leader it was last attached under (-1: none yet).
        leader_epoch: the leader epoch it was last attached under (-1: none);
            what a Fetch names as the current epoch (KIP-320).
        preferred: the replica a rack-aware leader named for fetching
            (KIP-392), -1 for the leader; ``preferred_until`` the trio clock
            time it stands until.
        failures: failed rounds in a row, for the backoff before the next attach.
        stale: whether the metadata must be asked again before the next attach.
        closed: the owner is closed; the route is never attached again.
    """

    __slots__ = (
        "closed",
        "detached",
        "failures",
        "leader",
        "leader_epoch",
        "owner",
        "partition",
        "preferred",
        "preferred_until",
        "stale",
        "topic",
        "topic_id",
        "worker",
    )

    def __init__(self, topic: str, partition: int, owner: T, *, stale: bool = True) -> None:
        self.topic = topic
        self.partition = partition
        self.owner = owner
        self.worker: Worker[T] | None = None
        self.leader = -1
        self.leader_epoch = -1
        #: the topic id ``leader_epoch`` belongs to (epochs start again with a new
        #: topic; without ids, as from old brokers, epochs are not compared)
        self.topic_id: uuid.UUID | None = None
        self.preferred = -1
        self.preferred_until = 0.0
        self.failures = 0
        self.stale = stale
        self.closed = False
        self.detached = trio.Event()

    def attach(self, worker: Worker[T]) -> None:
        """``worker`` serves the partition from now on."""
        self.worker = worker
        worker.attach(self.owner)

    def detach(self) -> None:
        """No worker serves it any more: its task finds its place again."""
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.detach(self.owner)
        self.detached.set()

    def close(self) -> None:
        """The owner is closed: detached, and never attached again."""
        self.closed = True
        self.detach()

    def failed(self) -> int:
        """One more failed round (the backoff before the next attach grows); how many now."""
        self.failures += 1
        return self.failures

    def succeeded(self) -> None:
        """The partition was served: the next failure starts the backoff again."""
        self.failures = 0

    def leader_unknown(self) -> None:
        """The leader answered as though it no longer leads: ask the metadata before attaching."""
        self.stale = True

    def next_detach(self) -> trio.Event:
        """A fresh event, set when the route is next detached."""
        self.detached = trio.Event()
        return self.detached

    def __repr__(self) -> str:
        return (
            f"<Route {self.topic}/{self.partition} leader={self.leader} "
            f"epoch={self.leader_epoch} preferred={self.preferred} failures={self.failures}>"
        )


class _Client(Protocol):
    """What the router needs of the cluster client (``pykaf._cluster.client.Client``)."""

    metadata: Metadata

    async def refresh_metadata(self, *topics: str) -> None: ...


class PartitionRouter:
    """Leaders, leader epochs and named replicas of one role's partitions; see the module.

    Args:
        client: the cluster client (its metadata cache and refreshes).
        policy: the backoff before a route that failed is attached again.
        preferred_for: seconds a replica named by the leader (KIP-392) stands
            (the role's ``metadata_max_age``).
    """

    def __init__(self, client: _Client, policy: Backoff, preferred_for: float = math.inf) -> None:
        self.client = client
        self.policy = policy
        self.preferred_for = preferred_for

    # -- the route task ----------------------------------------------------------

    async def follow(self, route: Route[T], role: Role[T]) -> None:
        """Keep ``route`` attached to the worker of its node until it is closed."""
        while not route.closed:
            if route.worker is None:
                if route.failures:
                    await self.policy.wait(route.failures)
                node = await self.place(route, role)
                if node is None:
                    continue
                route.attach(role.worker(node))
            await route.next_detach().wait()

    async def place(self, route: Route[T], role: Role[T]) -> int | None:
        """The node to attach ``route`` to now, or None to try again (failures counted)."""
        owner = route.owner
        try:
            if not await role.prepare(owner):
                return None
            leader, epoch = await self._leader(route, role)
            if leader < 0:
                role.unplaced(owner, route.failed(), None)
                return None
            if epoch != route.leader_epoch:
                if not await role.validate(owner, leader, route.leader_epoch, epoch):
                    return None
                route.leader_epoch = epoch
        except errors.PykafError as exc:
            log.info("%s/%d: no leader to attach to yet: %s", route.topic, route.partition, exc)
            role.unplaced(owner, route.failed(), exc)
            return None
        if route.closed or not role.ready(owner):
            return None
        route.leader = leader
        return self._node(route, leader)

    async def _leader(self, route: Route[T], role: Role[T]) -> tuple[int, int]:
        """The partition's leader and leader epoch from the metadata ((-1, -1): none)."""
        client = self.client
        if route.stale:
            await client.refresh_metadata(route.topic)
            route.stale = False
            role.metadata_refreshed(route.topic)
        metadata = client.metadata
        topic = metadata.topics.get(route.topic)
        info = topic.partitions.get(route.partition) if topic is not None else None
        if info is None or not self._led(info):
            route.stale = True
            return -1, -1
        topic_id = as_topic_uuid(topic.topic_id) if topic is not None else None
        if 0 <= info.leader_epoch < route.leader_epoch and (
            topic_id is not None and topic_id == route.topic_id
        ):
            # Epoch fencing: an answer older than the leader the route was
            # attached under (a stale broker, a cache that lost the topic).
            log.info(
                "%s/%d: metadata names leader %d under epoch %d, older than %d; asking again",
                route.topic,
                route.partition,
                info.leader,
                info.leader_epoch,
                route.leader_epoch,
            )
            route.stale = True
            return -1, -1
        route.topic_id = topic_id
        return info.leader, info.leader_epoch

    def _node(self, route: Route[T], leader: int) -> int:
        """Where to attach: the replica the leader named (KIP-392) while it stands, else the leader.

        The named replica stands until ``preferred_for`` has passed since the
        leader named it, as long as the metadata knows the broker.
        """
        preferred = route.preferred
        if preferred < 0 or preferred == leader:
            return leader
        if trio.current_time() >= route.preferred_until or (
            preferred not in self.client.metadata.brokers
        ):
            route.preferred = -1
            return leader
        return preferred

    # -- what the roles report ---------------------------------------------------

    def lost(self, route: Route[T], node: int = -1, *, detach: bool = True) -> None:
        """``node`` failed the partition (a leader error, a lost connection).

        A replica the leader named (KIP-392) is given up for the leader; a
        leader is forgotten, and the metadata asked again before the next
        attach. With ``detach`` (the default) the route is detached now;
        otherwise its role detaches it when it is ready to (the producer, once
        nothing of the partition is in flight).
        """
        route.failures += 1
        if route.preferred >= 0 and route.preferred == node:
            route.preferred = -1
        else:
            route.stale = True
            self.forget_leader(route.topic, route.partition)
        if detach:
            route.detach()

    def prefer(self, route: Route[T], node: int) -> None:
        """The leader named ``node`` to fetch from (KIP-392): move there, for ``preferred_for``."""
        route.preferred = node
        route.preferred_until = trio.current_time() + self.preferred_for
        route.detach()

    def expire_preferred(self, route: Route[T], node: int, now: float) -> bool:
        """If ``route`` is at ``node`` as a named replica whose time is up: back to the leader.

        The leader is asked again (it may name the same replica). Returns
        whether the route was detached.
        """
        if route.preferred != node or now < route.preferred_until:
            return False
        route.preferred = -1
        route.detach()
        return True

    # -- one-shot lookups ----------------------------------------------------------

    async def leader(self, topic: str, partition: int) -> int:
        """The node leading ``topic``/``partition`` now, for a request sent once (no route).

        The metadata is asked again when it names no leader it knows; the
        caller retries on its own (the request path's backoff).

        Raises:
            UnknownTopicOrPartitionError: the metadata has no such partition.
            LeaderNotAvailableError: the partition has no leader right now.
        """
        info = self.client.metadata.partition(topic, partition)
        if info is None or not self._led(info):
            await self.client.refresh_metadata(topic)
            info = self.client.metadata.partition(topic, partition)
        if info is None:
            raise errors.UnknownTopicOrPartitionError(f"{topic}/{partition} is not in the metadata")
        if not self._led(info):
            raise errors.LeaderNotAvailableError(f"{topic}/{partition} has no leader right now")
        return info.leader

    def available(self, topic: str) -> list[int]:
        """The partitions of ``topic`` the metadata names a leader for, in order.

        What a partitioner may pick from (Java's available partitions); none
        while the metadata does not know the topic. No refresh.
        """
        info = self.client.metadata.topics.get(topic)
        if info is None:
            return []
        return sorted(i for i, p in info.partitions.items() if self._led(p))

    def forget_leader(self, topic: str, partition: int) -> None:
        """The leader answered as though it no longer leads: the next lookup asks the metadata."""
        self.client.metadata.mark_leader_unknown(topic, partition)

    def _led(self, info: PartitionInfo) -> bool:
        """Whether the metadata names a leader for the partition, among the brokers it knows."""
        return info.leader >= 0 and info.leader in self.client.metadata.brokers
