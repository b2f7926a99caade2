"""Idempotent produce with each codec, and partition consumers, on one Kafka release."""

from __future__ import annotations

import pytest
import trio
from compat_support import new_topic, read_partition

import pykaf
from pykaf.testing import KafkaCluster


@pytest.mark.compat("KIP-98", "Idempotent produce")
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_idempotent_produce_with_each_codec(kafka: KafkaCluster, compression: str) -> None:
    topic = await new_topic(kafka, f"codec-{compression}", 2)
    values = [b"%s-%d" % (compression.encode(), i) for i in range(200)]
    async with pykaf.open_producer(
        kafka.bootstrap, idempotence=True, compression=compression, linger=0.02
    ) as producer:
        first = await producer.send(topic, values[0], key=b"k", partition=0)
        await producer.send_batch(topic, values[1:], partition=0)
        await producer.send(topic, b"other", partition=1, headers=[("h", b"v")])
        assert producer.idempotent
    assert first.offset == 0
    got = await read_partition(kafka.bootstrap, topic, 0, len(values))
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(len(values)))
    assert got[0].key == b"k"
    other = await read_partition(kafka.bootstrap, topic, 1, 1)
    assert other[0].value == b"other" and list(other[0].headers) == [("h", b"v")]


@pytest.mark.compat("KIP-79", "Partition consumers: seek by offset and time")
async def test_partition_consumer_seeks_by_offset_and_time(kafka: KafkaCluster) -> None:
    topic = await new_topic(kafka, "seek")
    base = 1_700_000_000_000
    async with pykaf.open_producer(kafka.bootstrap) as producer:
        for i in range(10):
            await producer.send(topic, b"v%d" % i, partition=0, timestamp=base + i * 1000)
    async with pykaf.open_consumer(kafka.bootstrap) as consumer:
        assert await consumer.client.get_offset(topic, 0, pykaf.OLDEST) == 0
        assert await consumer.client.get_offset(topic, 0, pykaf.NEWEST) == 10
        pc = await consumer.consume_partition(topic, 0, 4)
        with trio.fail_after(30):
            record = await pc.__anext__()
        assert (record.offset, record.value, record.timestamp) == (4, b"v4", base + 4000)
        # by time: the first record at or after base + 7.5 s is offset 8
        assert await consumer.client.get_offset(topic, 0, base + 7500) == 8
        await pc.aclose()
        end = await consumer.client.get_offset(topic, 0, pykaf.NEWEST)
        pc = await consumer.consume_partition(topic, 0, end)  # waits at the end
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            await producer.send(topic, b"late", partition=0)
        with trio.fail_after(30):
            record = await pc.__anext__()
        assert (record.offset, record.value) == (10, b"late")
