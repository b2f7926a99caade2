"""The partition router on the fake cluster: attach and detach as leaders move.

A route is followed by :meth:`PartitionRouter.follow` for a stand-in role whose
workers record what is attached to them, as a producer's sinks and a
consumer's fetchers do. Leaders are moved with the fake cluster's controls.
"""

from __future__ import annotations

import ast
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.router import PartitionRouter, Route
from pykaf.testing import FakeCluster, open_fake_cluster

PKG = Path(__file__).parents[2] / "pykaf"
FAST = Backoff(0.01, 0.05)


class Owner:
    """What a role routes (a producer's partition state, a partition consumer)."""

    def __init__(self, name: str) -> None:
        self.name = name


class Worker:
    """A broker's worker: which owners are attached to it now."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.owners: list[Owner] = []

    def attach(self, owner: Owner) -> None:
        self.owners.append(owner)

    def detach(self, owner: Owner) -> None:
        self.owners.remove(owner)


class Role:
    """A role that records what the router asks of it."""

    def __init__(self) -> None:
        self.workers: dict[int, Worker] = {}
        self.epochs: list[tuple[int, int, int]] = []  # (leader, previous, epoch) validated
        self.misses: list[tuple[int, errors.PykafError | None]] = []  # (failures, error)
        self.refreshed: list[str] = []

    async def prepare(self, owner: Owner) -> bool:
        return True

    def metadata_refreshed(self, topic: str) -> None:
        self.refreshed.append(topic)

    async def validate(self, owner: Owner, leader: int, previous: int, epoch: int) -> bool:
        self.epochs.append((leader, previous, epoch))
        return True

    def ready(self, owner: Owner) -> bool:
        return True

    def worker(self, node: int) -> Worker:
        return self.workers.setdefault(node, Worker(node))

    def unplaced(self, owner: Owner, failures: int, error: errors.PykafError | None) -> None:
        self.misses.append((failures, error))


class Following:
    """A route followed in a task, and what its role saw."""

    def __init__(self, router: PartitionRouter, route: Route[Owner], role: Role) -> None:
        self.router = router
        self.route = route
        self.role = role

    @property
    def node(self) -> int | None:
        """The node whose worker holds the route now (None: detached)."""
        worker = self.route.worker
        assert worker is None or self.route.owner in worker.owners  # type: ignore[attr-defined]
        return None if worker is None else worker.node  # type: ignore[attr-defined]


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait (polling the trio clock) until ``check()`` holds; fail after 10 s."""
    with trio.move_on_after(10.0):
        while not check():
            await trio.sleep(0.005)
        return
    raise AssertionError(f"never: {what}")


@asynccontextmanager
async def following(
    cluster: FakeCluster, topic: str = "t", *, preferred_for: float = math.inf
) -> AsyncIterator[Following]:
    async with pykaf.open_client(cluster.bootstrap) as client, trio.open_nursery() as nursery:
        router = PartitionRouter(client, FAST, preferred_for)
        route: Route[Owner] = Route(topic, 0, Owner(f"{topic}/0"))
        role = Role()
        nursery.start_soon(router.follow, route, role)
        yield Following(router, route, role)
        route.close()


def leader_in(cluster: FakeCluster, topic: str = "t") -> int:
    return int(cluster.topics[topic].partitions[0].leader)


async def test_a_route_is_attached_to_its_leader_and_moves_with_it() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        first = leader_in(cluster)
        async with following(cluster) as f:
            await until(lambda: f.node == first, "attached to the leader")
            assert (f.route.leader, f.route.leader_epoch) == (first, 0)
            assert f.role.epochs == [(first, -1, 0)]  # the first epoch is checked too

            # The leader moves; the worker serving the route loses it (NOT_LEADER).
            second = next(n for n in (1, 2, 3) if n != first)
            cluster.set_partition_leader("t", 0, second)
            f.router.lost(f.route, first)
            assert f.route.worker is None and f.role.workers[first].owners == []
            assert f.route.failures == 1 and f.route.stale
            await until(lambda: f.node == second, "attached to the new leader")
            assert f.route.leader_epoch == 1
            assert f.role.epochs[-1] == (second, 0, 1)
            assert "t" in f.role.refreshed  # the metadata was asked again

            # Detached with the leader unchanged: back to the same worker, no new epoch.
            f.route.succeeded()
            f.route.detach()
            await until(lambda: f.node == second, "attached again")
            assert len(f.role.epochs) == 2 and f.route.failures == 0


async def test_a_partition_without_a_leader_waits_and_is_told_to_its_role() -> None:
    async with open_fake_cluster(2) as cluster:
        cluster.create_topic("t", 1)
        first = leader_in(cluster)
        async with following(cluster) as f:
            await until(lambda: f.node == first, "attached")
            cluster.topics["t"].partitions[0].leader = -1  # an election under way
            f.router.lost(f.route, first)
            await until(lambda: len(f.role.misses) >= 2, "no leader, twice")
            assert f.route.worker is None and f.route.stale
            assert f.role.misses[:2] == [(2, None), (3, None)]  # the backoff grows

            other = 2 if first == 1 else 1
            cluster.set_partition_leader("t", 0, other)
            await until(lambda: f.node == other, "attached to the new leader")
            f.route.succeeded()
            assert f.route.failures == 0


async def test_epoch_fencing_refuses_a_leader_older_than_the_one_attached() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        first = leader_in(cluster)
        second, third = (n for n in (1, 2, 3) if n != first)
        async with following(cluster) as f:
            cluster.set_partition_leader("t", 0, second)  # epoch 1
            await until(lambda: f.node == second and f.route.leader_epoch == 1, "at epoch 1")

            # A stale answer names another leader under epoch 0, and the client's
            # cache has lost the topic (so its own check cannot refuse it).
            stale = cluster.topics["t"].partitions[0]
            stale.leader, stale.leader_epoch = third, 0
            f.router.client.metadata.topics.pop("t")
            f.router.lost(f.route, second)
            await until(lambda: len(f.role.misses) >= 2, "refused twice")
            assert f.route.worker is None and f.role.workers.get(third) is None
            assert f.route.leader_epoch == 1 and f.route.stale
            assert [error for _, error in f.role.misses] == [None] * len(f.role.misses)

            # The cluster moves on (epochs 1 and 2): attached under the newer one.
            cluster.set_partition_leader("t", 0, first)
            cluster.set_partition_leader("t", 0, third)
            await until(lambda: f.node == third, "attached under epoch 2")
            assert f.route.leader_epoch == 2
            assert f.role.epochs[-1] == (third, 1, 2)


async def test_a_new_topic_of_the_same_name_starts_its_epochs_again() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        async with following(cluster) as f:
            for n in (1, 2, 3):
                cluster.set_partition_leader("t", 0, n)
            await until(lambda: f.route.leader_epoch == 3, "at epoch 3")
            old_id = f.route.topic_id
            assert old_id is not None
            cluster.delete_topic("t")
            cluster.create_topic("t", 1)
            f.router.lost(f.route, f.route.leader)
            await until(lambda: f.route.leader_epoch == 0, "attached under the new topic")
            assert f.route.topic_id not in (None, old_id)


@asynccontextmanager
async def at_a_replica(preferred_for: float) -> AsyncIterator[tuple[Following, int, int]]:
    """A route moved to a replica its leader named (KIP-392): it, the leader, the replica."""
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        leader = leader_in(cluster)
        replica = next(n for n in (1, 2, 3) if n != leader)
        async with following(cluster, preferred_for=preferred_for) as f:
            await until(lambda: f.node == leader, "attached to the leader")
            f.router.prefer(f.route, replica)
            await until(lambda: f.node == replica, "attached to the replica")
            yield f, leader, replica


async def test_a_named_replica_stands_until_its_time_is_up() -> None:
    async with at_a_replica(0.3) as (f, leader, replica):
        assert f.route.leader == leader  # the leader is still the leader
        assert not f.router.expire_preferred(f.route, replica, trio.current_time())
        assert not f.router.expire_preferred(f.route, leader, math.inf)  # not a replica

        await trio.sleep_until(f.route.preferred_until)
        assert f.router.expire_preferred(f.route, replica, trio.current_time())
        await until(lambda: f.node == leader, "back at the leader")
        assert f.route.preferred == -1 and f.route.failures == 0


async def test_a_failing_replica_sends_the_route_back_to_the_leader_without_metadata() -> None:
    async with at_a_replica(60.0) as (f, leader, replica):
        refreshes = len(f.role.refreshed)

        f.router.lost(f.route, replica)  # the replica cannot serve the position
        assert f.route.preferred == -1 and f.route.failures == 1
        assert not f.route.stale  # the leader is not in question
        assert f.router.client.metadata.partition("t", 0).leader == leader
        await until(lambda: f.node == leader, "back at the leader")
        assert len(f.role.refreshed) == refreshes


async def test_a_replica_the_metadata_does_not_know_is_not_attached_to() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        leader = leader_in(cluster)
        async with following(cluster, preferred_for=60.0) as f:
            await until(lambda: f.node == leader, "attached to the leader")
            f.router.prefer(f.route, 99)
            await until(lambda: f.node == leader and f.route.preferred == -1, "at the leader")


async def test_a_closed_route_is_detached_and_its_task_ends() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            router = PartitionRouter(client, FAST)
            route: Route[Owner] = Route("t", 0, Owner("t/0"))
            role = Role()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(router.follow, route, role)
                await until(lambda: route.worker is not None, "attached")
                worker = route.worker
                route.close()
            # The nursery closed: the task ended by itself.
            assert route.worker is None and worker.owners == []  # type: ignore[union-attr]


def _leader_lookups(
    path: Path, names: set[str], calls: tuple[str, ...]
) -> list[tuple[str, int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        text = ast.unparse(node)
        if node.attr in names or text.endswith(calls):
            found.append((path.name, node.lineno, text))
    return found


def test_no_role_tracks_leaders_itself() -> None:
    """Leaders, their epochs and the metadata's leader marks are the router's alone."""
    looked_up = {"leader_of", "mark_leader_unknown", "preferred_until", "preferred_replica"}
    found = []
    for role in ("_producer", "_consumer", "_share"):
        for path in sorted((PKG / role).rglob("*.py")):
            found += _leader_lookups(path, looked_up, ("metadata.partition", "client.leader"))
    assert found == []


def test_only_the_router_forgets_a_leader() -> None:
    """A request to a partition's leader (``request.leader``) is routed by the client's router.

    Outside the router (and the metadata, which keeps the marks) nothing
    clears a leader mark or reads one with ``leader_of``.
    """
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel in ("_cluster/router.py", "_cluster/metadata.py") or rel.startswith("testing/"):
            continue
        found += _leader_lookups(path, {"leader_of", "mark_leader_unknown"}, ())
    assert found == []


async def test_a_one_shot_lookup_reads_the_metadata_as_routes_do() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            router = client.router
            leader = leader_in(cluster)
            assert await router.leader("t", 0) == leader
            assert (await client.leader("t", 0)).node_id == leader
            # The leader moves; an answer says so: the next lookup asks the metadata.
            moved = next(n for n in (1, 2, 3) if n != leader)
            cluster.set_partition_leader("t", 0, moved)
            assert await router.leader("t", 0) == leader  # the cache, until told
            router.forget_leader("t", 0)
            assert client.metadata.partition("t", 0).leader == -1
            assert await router.leader("t", 0) == moved
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await router.leader("t", 5)


async def test_the_available_partitions_are_those_with_a_leader() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 3)
        async with pykaf.open_client(cluster.bootstrap) as client:
            assert client.router.available("other") == []  # a topic it does not know
            assert await client.writable_partitions("t") == [0, 1, 2]
            client.router.forget_leader("t", 1)
            assert client.router.available("t") == [0, 2]


def test_the_leader_check_finds_a_lookup() -> None:
    tree = ast.parse("leader = self.client.metadata.leader_of(p.topic, p.partition)")
    assert any(isinstance(n, ast.Attribute) and n.attr == "leader_of" for n in ast.walk(tree))
