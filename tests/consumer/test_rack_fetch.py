"""KIP-392 on Apache Kafka: a consumer with ``client_rack`` fetches from the replica in its rack.

Three Kafka nodes, node ``i`` in rack ``r<i>``, with Kafka's
``RackAwareReplicaSelector``; one partition replicated on all three (and, as
a second opinion, librdkafka's mock cluster with a follower set). The
leader answers a consumer from another rack with the replica in that rack
(``preferred_read_replica``, no records), and the consumer fetches from that
replica: the records it reads are counted on that broker's fetcher, none on
the leader's. The named replica stands for ``metadata_max_age``, then the
leader is asked again. A consumer in the leader's rack, or without a rack,
fetches from the leader. When the replica in its rack stops, the consumer
goes back to the leader and reads on, losing nothing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

import pykaf
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf._consumer.read_committed import TransactionFilter
from pykaf.testing import open_kafka_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

SELECTOR = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
FAST = {"fetch_max_wait": 0.1, "retry_backoff": 0.05}


async def read_n(pc: pykaf.PartitionConsumer, n: int, timeout: float = 30.0) -> list[bytes | None]:
    """The values of the next ``n`` records of ``pc``; fails if they do not come in time."""
    out: list[bytes | None] = []
    with trio.move_on_after(timeout):
        while len(out) < n:
            out.extend(r.value for r in await pc.next_batch())
    assert len(out) == n, f"{len(out)} of {n} records"
    return out


def fetched_from(consumer: pykaf.Consumer) -> set[int]:
    """The brokers the consumer received record bytes from."""
    return {node for node, s in consumer.statistics().brokers.items() if s["bytes"] > 0}


async def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async with pykaf.open_producer(bootstrap) as producer:  # acks=all: every in-sync replica
        await (await producer.send_batch(topic, values, partition=0)).wait()


async def test_a_consumer_fetches_from_the_replica_in_its_rack() -> None:
    async with open_kafka_cluster(3, racks=["r1", "r2", "r3"], broker_configs=SELECTOR) as kafka:
        topic = unique("rack")
        await kafka.create_topic(topic, 1, 3)
        async with pykaf.open_admin(kafka.bootstrap) as admin:
            leader = (await admin.describe_topic(topic)).partitions[0].leader
        follower = next(n for n in kafka.node_ids if n != leader)
        first = [b"v%d" % i for i in range(2000)]
        await produce(kafka.bootstrap, topic, first)

        options: Any = FAST
        async with pykaf.open_consumer(
            kafka.bootstrap, client_rack=f"r{follower}", **options
        ) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            assert await read_n(pc, 2000) == first
            assert fetched_from(consumer) == {follower}

        # The named replica stands for metadata_max_age; then the leader is asked
        # again, and names it again: the leader sees requests, never sends records.
        async with pykaf.open_consumer(
            kafka.bootstrap, client_rack=f"r{follower}", metadata_max_age=0.5, **options
        ) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            assert await read_n(pc, 2000) == first
            await trio.sleep(2.0)
            brokers = consumer.statistics().brokers
            assert brokers[leader]["requests"] >= 3 and brokers[leader]["bytes"] == 0
            assert fetched_from(consumer) == {follower}

        for rack in (f"r{leader}", None):  # the leader's own rack, and no rack: the leader
            async with pykaf.open_consumer(kafka.bootstrap, client_rack=rack, **options) as other:
                pc = await other.consume_partition(topic, 0, pykaf.OLDEST)
                assert await read_n(pc, 2000) == first
                assert fetched_from(other) == {leader}

        # The replica in the consumer's rack stops: back to the leader, nothing lost.
        async with pykaf.open_consumer(
            kafka.bootstrap, client_rack=f"r{follower}", **options
        ) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            assert await read_n(pc, 2000) == first
            await kafka.broker_down(follower)
            try:
                more = [b"w%d" % i for i in range(500)]
                await produce(kafka.bootstrap, topic, more)
                assert await read_n(pc, 500) == more
                assert leader in fetched_from(consumer)
            finally:
                await kafka.broker_up(follower)
            # Once it is back in the in-sync set the leader may name it again;
            # either way every record comes, once.
            last = [b"x%d" % i for i in range(300)]
            await produce(kafka.bootstrap, topic, last)
            assert await read_n(pc, 300) == last


def test_client_rack_must_be_a_string() -> None:
    with pytest.raises(pykaf.errors.ConfigError, match="client_rack"):
        pykaf.ConsumerConfig(client_rack=3)  # type: ignore[arg-type]
    assert pykaf.ConsumerConfig(client_rack="r1").client_rack == "r1"
    assert pykaf.GroupConfig(client_rack="r1").client_rack == "r1"


async def test_the_mock_clusters_follower_redirect_is_followed(mock_cluster: Any) -> None:
    """A second broker implementation: librdkafka's mock names the follower set for
    the partition (KIP-392; it does so whatever the rack); pykaf reads every
    record from it, in order, and none from the leader."""
    topic = unique("rack-mock")
    mock_cluster.create_topic(topic, 1, 3)
    mock_cluster.set_partition_leader(topic, 0, 1)
    mock_cluster.set_partition_follower(topic, 0, 2)
    values = [b"m%d" % i for i in range(1500)]
    await produce(mock_cluster.bootstrap, topic, values)
    options: Any = FAST
    async with pykaf.open_consumer(mock_cluster.bootstrap, client_rack="r2", **options) as c:
        pc = await c.consume_partition(topic, 0, pykaf.OLDEST)
        assert await read_n(pc, 1500) == values
        assert fetched_from(c) == {2}


# -- the fetcher's rules, unit by unit (no broker): one fetcher, node 1 -----------------


async def _fetcher(**config: Any) -> tuple[BrokerFetcher, pykaf.PartitionConsumer]:
    consumer = pykaf.Consumer(None, pykaf.ConsumerConfig(**config), None)  # type: ignore[arg-type]
    pc = pykaf.PartitionConsumer(consumer, "t", 0, 0, TransactionFilter("read_committed"))
    pc.cursor.restart_at(5)
    fetcher = BrokerFetcher(consumer, 1)
    pc.route.attach(fetcher)
    return fetcher, pc


def _answer(error_code: int = 0, preferred: int = -1) -> Any:
    return SimpleNamespace(
        error_code=error_code,
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=None,
        records=b"",
        preferred_read_replica=preferred,
    )


async def test_a_leader_naming_a_replica_moves_the_partition_there() -> None:
    fetcher, pc = await _fetcher(metadata_max_age=60.0)
    fetcher._partition(pc.cursor, _answer(preferred=3))
    route = pc.route
    assert route.preferred == 3 and pc.fetcher is None and route.detached.is_set()
    assert route.preferred_until == pytest.approx(trio.current_time() + 60.0)
    assert pc.fetch_offset == 5  # the position is kept


@pytest.mark.parametrize(
    "code",
    [1, 6, 78],  # OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE
)
async def test_a_named_replicas_error_sends_the_partition_back_to_the_leader(code: int) -> None:
    # With auto_offset_reset=latest, an offset out of range from the leader
    # would skip to the end; from a replica it only means "ask the leader".
    fetcher, pc = await _fetcher(auto_offset_reset="latest", metadata_max_age=60.0)
    fetcher.consumer.router.prefer(pc.route, 1)  # the leader named node 1
    pc.route.attach(fetcher)
    fetcher._partition(pc.cursor, _answer(error_code=code))
    assert pc.route.preferred == -1 and pc.fetcher is None and pc.route.failures == 1
    assert pc.fetch_offset == 5 and not pc.paused
    with pytest.raises(trio.WouldBlock):
        pc.errors().receive_nowait()  # nothing reported: the leader serves it next


async def test_a_named_replica_is_left_once_its_time_is_up() -> None:
    fetcher, pc = await _fetcher(metadata_max_age=0.001)
    fetcher.consumer.router.prefer(pc.route, 1)  # the leader named node 1
    pc.route.attach(fetcher)
    await trio.sleep(0.002)
    await fetcher._fetch([pc.cursor])  # returns before any request: nothing left to fetch here
    assert pc.route.preferred == -1 and pc.fetcher is None
