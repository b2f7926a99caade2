"""KIP-392 on Apache Kafka: a consumer with ``client_rack`` fetches from the replica in its rack.

Three Kafka nodes, node ``i`` in rack ``r<i>``, with Kafka's
``RackAwareReplicaSelector``; one partition replicated on all three. The
leader answers a consumer from another rack with the replica in that rack
(``preferred_read_replica``, no records), and the consumer fetches from that
replica: the records it reads are counted on that broker's fetcher, none on
the leader's. The named replica stands for ``metadata_max_age``, then the
leader is asked again. A consumer in the leader's rack, or without a rack,
fetches from the leader. When the replica in its rack stops, the consumer
goes back to the leader and reads on, losing nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
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
