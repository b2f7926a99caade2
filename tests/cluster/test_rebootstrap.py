"""KIP-899/KIP-1102 rebootstrap, on the fake cluster and Apache Kafka.

Known brokers gone, a stuck broker, REBOOTSTRAP_REQUIRED; and
``metadata_recovery_strategy="none"`` staying on the known brokers.

A :class:`Relay` stands for the bootstrap address: the client bootstraps
through it and learns the brokers the cluster advertises (not the relay).
Those then go dead (or stop answering) while the relay is pointed at another
cluster, as a DNS name or load balancer would be after a cluster moved.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.client import Client, open_client
from pykaf.testing import FakeCluster, open_fake_cluster, open_kafka_cluster

METADATA = P.MetadataRequest.API_KEY
TOPIC = "moving"


class Relay:
    """A TCP relay on 127.0.0.1 to a target that can change (dropping what it relays)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.accepted = 0
        self._scopes: set[trio.CancelScope] = set()

    @property
    def address(self) -> str:
        """``host:port`` to bootstrap from."""
        return f"127.0.0.1:{self.port}"

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and relay until cancelled."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    def retarget(self, target: tuple[str, int]) -> None:
        """Relay new connections to ``target``; close the ones open now."""
        self.target = target
        for scope in list(self._scopes):
            scope.cancel()

    async def _relay(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                upstream = await trio.open_tcp_stream(*self.target)
            except OSError:
                await client.aclose()
                return
            async with client, upstream, trio.open_nursery() as nursery:
                nursery.start_soon(_pump, client, upstream, nursery.cancel_scope)
                nursery.start_soon(_pump, upstream, client, nursery.cancel_scope)
        self._scopes.discard(scope)


async def _pump(src: trio.SocketStream, dst: trio.SocketStream, done: trio.CancelScope) -> None:
    try:
        async for chunk in src:
            await dst.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    done.cancel()


@asynccontextmanager
async def moving_cluster() -> AsyncIterator[tuple[FakeCluster, FakeCluster, Relay]]:
    """Two one-broker clusters with the topic, and a relay pointing at the first."""
    async with (
        open_fake_cluster(1, cluster_id="moving") as old,
        open_fake_cluster(1, cluster_id="moving") as new,
        trio.open_nursery() as nursery,
    ):
        for cluster in (old, new):
            cluster.create_topic(TOPIC, 1)
        relay = Relay(old.listeners()[1])
        await nursery.start(relay.serve)
        yield old, new, relay
        nursery.cancel_scope.cancel()


def _ports(client: Client) -> list[int]:
    return sorted(b.port for b in client.metadata.brokers.values())


async def _send_and_read(client: Client, cluster: FakeCluster, value: bytes) -> None:
    """Produce one record through ``client`` and find it in ``cluster``'s log."""
    async with pykaf.open_producer(client, linger=0, delivery_timeout=20) as producer:
        await producer.send(TOPIC, value, partition=0)
    assert cluster.high_watermark(TOPIC, 0) == 1
    async with pykaf.open_consumer(client) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        with trio.fail_after(10):
            record = await pc.__anext__()
        assert record.value == value


OPTIONS: dict[str, Any] = {"request_timeout": 2.0, "retry_backoff": 0.05}


async def test_known_brokers_gone_rebootstraps_to_the_new_cluster() -> None:
    async with (
        moving_cluster() as (old, new, relay),
        open_client(relay.address, **OPTIONS) as client,
    ):
        assert _ports(client) == [old.listeners()[1][1]]  # learned, not the relay
        await _send_and_read(client, old, b"before")
        old.broker_down(1)
        relay.retarget(new.listeners()[1])
        await client.refresh_metadata()
        assert _ports(client) == [new.listeners()[1][1]]
        assert client.statistics().rebootstraps == 1
        await _send_and_read(client, new, b"after")


async def test_none_keeps_failing_with_a_typed_error() -> None:
    async with (
        moving_cluster() as (old, new, relay),
        open_client(relay.address, metadata_recovery_strategy="none", **OPTIONS) as client,
    ):
        old.broker_down(1)
        relay.retarget(new.listeners()[1])
        for _ in range(2):  # and again: it never goes back to the relay
            with pytest.raises(errors.KafkaConnectionError, match="strategy='none'"):
                await client.refresh_metadata()
        assert _ports(client) == [old.listeners()[1][1]]
        assert client.statistics().rebootstraps == 0
        old.broker_up(1)  # the known broker is back: the client is too
        await client.refresh_metadata()


async def test_a_stuck_broker_is_left_after_the_trigger() -> None:
    """The known broker accepts connections but never answers Metadata (KIP-1102's case)."""
    async with (
        moving_cluster() as (old, new, relay),
        open_client(
            relay.address, request_timeout=0.5, metadata_recovery_rebootstrap_trigger=2.0
        ) as client,
    ):
        old.push_request_errors(METADATA, *[0] * 100, rtt_ms=5000)
        relay.retarget(new.listeners()[1])
        started = trio.current_time()
        with trio.fail_after(20):
            while True:
                try:
                    await client.refresh_metadata()
                    break
                except errors.KafkaConnectionError:
                    pass
        assert trio.current_time() - started >= 2.0
        assert client.statistics().rebootstraps == 1
        assert _ports(client) == [new.listeners()[1][1]]
        old.clear_request_errors(METADATA)


async def test_rebootstrap_required_answer() -> None:
    async with (
        moving_cluster() as (old, new, relay),
        open_client(relay.address, **OPTIONS) as client,
    ):
        relay.retarget(new.listeners()[1])
        old.push_request_errors(METADATA, errors.RebootstrapRequiredError.code)
        await client.refresh_metadata()
        assert client.statistics().rebootstraps == 1
        assert _ports(client) == [new.listeners()[1][1]]


async def test_rebootstrap_required_with_none_raises_it() -> None:
    async with (
        moving_cluster() as (old, _new, relay),
        open_client(relay.address, metadata_recovery_strategy="none", **OPTIONS) as client,
    ):
        old.push_request_errors(METADATA, errors.RebootstrapRequiredError.code)
        with pytest.raises(errors.RebootstrapRequiredError, match="REBOOTSTRAP_REQUIRED"):
            await client.refresh_metadata()
        assert client.statistics().rebootstraps == 0
        await client.refresh_metadata()  # the next answer is a good one


async def test_other_top_level_metadata_errors_are_typed_and_retried() -> None:
    retriable = errors.error_for_code(7)  # REQUEST_TIMED_OUT
    final = errors.ClusterAuthorizationError
    assert retriable is not None and retriable.retriable and not final.retriable
    async with (
        moving_cluster() as (old, _new, relay),
        open_client(relay.address, **OPTIONS) as client,
    ):
        old.start_request_tracking()
        old.push_request_errors(METADATA, retriable.code)
        await client.refresh_metadata()  # retried: the next answer is good
        assert old.count_requests(METADATA) == 2
        old.push_request_errors(METADATA, final.code)
        with pytest.raises(final, match="answered Metadata with CLUSTER_AUTHORIZATION_FAILED"):
            await client.refresh_metadata()
        assert client.statistics().rebootstraps == 0
        assert _ports(client) == [old.listeners()[1][1]]


def test_option_is_checked() -> None:
    with pytest.raises(errors.ConfigError, match="metadata_recovery_strategy"):
        pykaf.ClientConfig(metadata_recovery_strategy="sometimes")
    with pytest.raises(errors.ConfigError, match="metadata_recovery_rebootstrap_trigger"):
        pykaf.ClientConfig(metadata_recovery_rebootstrap_trigger=0)


# -- Apache Kafka ---------------------------------------------------------------------


def _port(bootstrap: str) -> int:
    return int(bootstrap.rsplit(":", 1)[1])


async def _read(pc: Any, n: int) -> list[bytes]:
    out: list[bytes] = []
    with trio.fail_after(60):
        while len(out) < n:
            out.extend(r.value for r in await pc.next_batch())
    return out


async def test_kafka_restarted_on_new_ports_is_found_through_the_bootstrap_address() -> None:
    """One Kafka node stops and comes back on other ports; only the relay's address stays.

    A producer and a consumer on a rebootstrapping client keep working across
    it; a client with ``metadata_recovery_strategy="none"`` cannot find it.
    """
    async with open_kafka_cluster(1) as kafka, trio.open_nursery() as nursery:
        await kafka.create_topic(TOPIC, 1)
        relay = Relay(("127.0.0.1", _port(kafka.bootstrap)))
        await nursery.start(relay.serve)
        async with (
            open_client(relay.address, request_timeout=5.0) as client,
            open_client(
                relay.address, request_timeout=5.0, metadata_recovery_strategy="none"
            ) as stuck,
            pykaf.open_producer(client, linger=0, delivery_timeout=120) as producer,
            pykaf.open_consumer(client) as consumer,
        ):
            assert _ports(client) == [_port(kafka.bootstrap)]  # learned, not the relay
            pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
            for i in range(5):
                await producer.send(TOPIC, b"before-%d" % i, partition=0)
            assert await _read(pc, 5) == [b"before-%d" % i for i in range(5)]

            old_port = _port(kafka.bootstrap)
            await kafka.broker_down(1)
            await kafka.broker_up(1, new_ports=True)
            assert _port(kafka.bootstrap) != old_port
            relay.retarget(("127.0.0.1", _port(kafka.bootstrap)))

            for i in range(5):
                await producer.send(TOPIC, b"after-%d" % i, partition=0)
            assert await _read(pc, 5) == [b"after-%d" % i for i in range(5)]
            assert _ports(client) == [_port(kafka.bootstrap)]
            assert client.statistics().rebootstraps >= 1

            with pytest.raises(errors.KafkaConnectionError, match="strategy='none'"):
                await stuck.refresh_metadata()
            assert stuck.statistics().rebootstraps == 0
        nursery.cancel_scope.cancel()
