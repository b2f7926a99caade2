"""Produce requests hold at most ``max_request_bytes`` of batches (1 MiB by default).

Twelve partitions each get a batch of about 330 KB, held back by a long
linger and then made ready together by ``flush()``, so the sender task finds
them all at once (each partition got one record before, so each has met its
leader's sender; the counters below are those of the batches alone). The
broker leading the most partitions gets at least four of them (twelve over
at most three brokers), over 1 MiB: under the default the batches must go in
requests of at most 1 MiB each (a request holds one batch at least), and
with a larger limit in one request. Run on Apache Kafka, Tansu and the
librdkafka mock cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import trio

import pykaf

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker

pytestmark = pytest.mark.broker

PARTITIONS = 12
RECORDS = 3000  # per partition: about 330 KB of batch
VALUE = b"v" * 100
MIB = 1 << 20


async def _produce(broker: Broker, **options: Any) -> list[pykaf.BrokerStatistics]:
    """Fill one batch per partition, flush, and return the per-broker counters."""
    topic = bc.unique("request-size")
    broker.create(topic, PARTITIONS)
    async with pykaf.open_producer(
        broker.bootstrap, linger=3600.0, flush_bytes=0, **options
    ) as producer:
        with trio.fail_after(60):
            # One record to each partition first: every partition has met its
            # leader's sender by the time the batches are made ready.
            for p in range(PARTITIONS):
                await producer.send(topic, b"warm-up", partition=p)
            before = producer.statistics()
            deliveries = [
                await producer.send_batch(topic, [VALUE] * RECORDS, partition=p)
                for p in range(PARTITIONS)
            ]
            assert producer.statistics().batches_sent == before.batches_sent  # held back
            await producer.flush()
            assert [await d.wait() for d in deliveries] == [RECORDS] * PARTITIONS
        after = producer.statistics()
    assert after.batches_sent - before.batches_sent == PARTITIONS and after.retries == 0
    return [
        dataclasses.replace(
            b,
            requests=b.requests - before.brokers[n].requests,
            batches=b.batches - before.brokers[n].batches,
            records=b.records - before.brokers[n].records,
            bytes=b.bytes - before.brokers[n].bytes,
        )
        for n, b in after.brokers.items()
    ]


async def test_requests_hold_at_most_max_request_bytes(broker: Broker) -> None:
    assert pykaf.ProducerConfig().max_request_bytes == MIB  # Java's max.request.size
    busiest = max(await _produce(broker), key=lambda b: b.bytes)
    assert busiest.bytes > MIB  # the case worth testing: more than one request's worth
    assert busiest.batches >= 4
    # Each request holds at most 1 MiB, so the busiest broker needed at least this many.
    assert busiest.requests >= -(-busiest.bytes // MIB)
    assert busiest.requests <= busiest.batches


async def test_a_larger_limit_sends_the_same_batches_in_one_request(broker: Broker) -> None:
    busiest = max(await _produce(broker, max_request_bytes=16 * MIB), key=lambda b: b.bytes)
    assert busiest.bytes > MIB and busiest.batches >= 4
    assert busiest.requests == 1
