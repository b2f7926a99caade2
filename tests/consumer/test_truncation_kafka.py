"""Log truncation detection (KIP-320) on Apache Kafka: a real unclean leader election.

Three KRaft nodes; a topic with two replicas that allows unclean elections.
The follower stops, so records written with acks=1 reach only the leader; the
consumer reads them. Then the leader stops and the stale follower starts: the
controller elects it uncleanly, and its log lacks what the consumer read.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def _read_n(pc: pykaf.PartitionConsumer, n: int) -> list[Any]:
    out: list[Any] = []
    with trio.fail_after(30):
        while len(out) < n:
            out.extend(await pc.next_batch())
    return out


async def _leader(kafka: Any, topic: str, want: int | None = None) -> tuple[int, int, list[int]]:
    """(leader, leader epoch, replicas) of partition 0, once the leader is ``want`` if given."""
    with trio.fail_after(90):
        while True:
            async with pykaf.open_admin(kafka.bootstrap) as admin:
                p = (await admin.describe_topic(topic)).partitions[0]
            if want is None or p.leader == want:
                return p.leader, p.leader_epoch, list(p.replicas)
            await trio.sleep(0.5)


async def test_unclean_election_below_the_position_is_a_log_truncation(
    kafka_cluster3: Any,
) -> None:
    kafka = kafka_cluster3
    topic = bc.unique("trunc-kafka")
    configs = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    await trio.to_thread.run_sync(lambda: kafka.create_topic(topic, 1, 2, configs))
    leader, _, replicas = await _leader(kafka, topic)
    follower = next(r for r in replicas if r != leader)
    down: list[int] = []
    try:
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            for i in range(5):  # on both replicas
                await producer.send(topic, b"both-%d" % i, partition=0)
        await trio.to_thread.run_sync(kafka.broker_down, follower)
        down.append(follower)
        async with pykaf.open_producer(kafka.bootstrap, acks=1, idempotence=False) as producer:
            for i in range(5):  # on the leader only
                await producer.send(topic, b"leader-only-%d" % i, partition=0)

        async with pykaf.open_consumer(
            kafka.bootstrap, auto_offset_reset="none", retry_backoff=0.1
        ) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            got = await _read_n(pc, 10)
            assert [r.offset for r in got] == list(range(10))
            read_epoch = pc.position_epoch
            assert read_epoch >= 0

            # the leader goes, the stale follower comes back and is elected uncleanly
            await trio.to_thread.run_sync(kafka.broker_down, leader)
            down.append(leader)
            await trio.to_thread.run_sync(kafka.broker_up, follower)
            down.remove(follower)
            _, new_epoch, _ = await _leader(kafka, topic, want=follower)
            assert new_epoch > read_epoch
            async with pykaf.open_producer(kafka.bootstrap) as producer:
                await producer.send(topic, b"after", partition=0)

            with trio.fail_after(60):
                report = await pc.errors().receive()
            error = report.error
            assert isinstance(error, errors.LogTruncationError), error
            assert error.fetch_offset == 10
            assert error.divergent_offset == 5  # where the follower's log ended
            assert pc.paused
            # the caller takes it from there: the new leader's record at offset 5
            pc.seek(error.divergent_offset)
            pc.resume()
            after = await _read_n(pc, 1)
            assert [(r.offset, r.value) for r in after] == [(5, b"after")]
    finally:
        for node in down:
            await trio.to_thread.run_sync(kafka.broker_up, node)
