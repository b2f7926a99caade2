"""Exporting pykaf's request and batch metrics to Prometheus (see docs/observability.md).

Two client options (so producers, consumers and groups take them too) feed
``prometheus_client`` metrics:

- ``on_request`` is called after every request with a ``pykaf.RequestEvent``:
  a latency histogram and an error counter labelled by broker and API;
- ``on_batch`` is called once per record batch produced (when it is
  acknowledged or fails for good) or fetched (when the consumer hands it
  out) with a ``pykaf.BatchEvent``: a histogram of records per batch and a
  counter of batch bytes by direction and topic, and a counter of produced
  batches that failed.

Both hooks only update in-memory metrics: they run in pykaf's tasks and must
be quick. ``prometheus_client`` serves the registry for scraping.

Run it (a fake cluster on loopback stands in for Kafka)::

    python docs/examples/prometheus_metrics.py

``tests/net/test_prometheus_example.py`` imports and runs it.
"""

from __future__ import annotations

import trio
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

import pykaf


class KafkaRequestMetrics:
    """Prometheus metrics fed by pykaf's ``on_request`` hook."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.latency = Histogram(
            "kafka_request_seconds",
            "Kafka request round trips, by broker and API",
            ["broker", "api"],
            registry=registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
        )
        self.failures = Counter(
            "kafka_request_failures",
            "Kafka requests that got no response (connection lost or timed out)",
            ["broker", "api"],
            registry=registry,
        )

    def __call__(self, event: pykaf.RequestEvent) -> None:
        """The hook: one observation per request."""
        labels = (str(event.node_id), event.api)
        self.latency.labels(*labels).observe(event.seconds)
        if event.error is not None:
            self.failures.labels(*labels).inc()


class KafkaBatchMetrics:
    """Prometheus metrics fed by pykaf's ``on_batch`` hook."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Histogram(
            "kafka_batch_records",
            "Records per record batch, produced or fetched, by topic",
            ["kind", "topic"],
            registry=registry,
            buckets=(1, 10, 100, 500, 1000, 5000, 10000),
        )
        self.bytes = Counter(
            "kafka_batch_bytes",
            "Record batch bytes on the wire (compressed), produced or fetched, by topic",
            ["kind", "topic"],
            registry=registry,
        )
        self.failures = Counter(
            "kafka_produce_batch_failures",
            "Produced record batches that failed for good, by topic and error",
            ["topic", "error"],
            registry=registry,
        )

    def __call__(self, event: pykaf.BatchEvent) -> None:
        """The hook: one observation per record batch."""
        if event.error is not None:
            self.failures.labels(event.topic, type(event.error).__name__).inc()
            return
        self.records.labels(event.kind, event.topic).observe(event.records)
        self.bytes.labels(event.kind, event.topic).inc(event.bytes)


async def produce_and_consume_with_metrics(bootstrap: str, topic: str, count: int) -> bytes:
    """Produce ``count`` records, read them back, with both hooks; return the scrape text."""
    registry = CollectorRegistry()
    hooks = {
        "on_request": KafkaRequestMetrics(registry),
        "on_batch": KafkaBatchMetrics(registry),
    }
    async with pykaf.open_producer(bootstrap, linger=0.005, **hooks) as producer:
        keys = [b"%d" % i for i in range(count)]  # keyed: spread over the partitions
        await (await producer.send_batch(topic, [b"x"] * count, keys=keys)).wait()
    async with pykaf.open_consumer(bootstrap, fetch_max_wait=0.1, **hooks) as consumer:
        read = 0
        all_read = trio.Event()

        async def drain(reader: pykaf.PartitionConsumer) -> None:
            nonlocal read
            while True:
                records = await reader.next_batch()
                read += len(records)
                if read >= count:
                    all_read.set()

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for p in await consumer.partitions(topic):
                    reader = await consumer.consume_partition(topic, p, pykaf.OLDEST)
                    nursery.start_soon(drain, reader)
                await all_read.wait()
                nursery.cancel_scope.cancel()
    scraped: bytes = generate_latest(registry)
    return scraped


async def main() -> None:
    """Produce to and consume from a fake cluster; print the Produce and batch metrics."""
    from pykaf.testing import open_fake_cluster

    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("metrics-demo", 3)
        text = await produce_and_consume_with_metrics(cluster.bootstrap, "metrics-demo", 10_000)
    for line in text.decode().splitlines():
        if line.startswith("#") or "_bucket" in line or "_created" in line:
            continue
        if 'api="Produce"' in line or "kafka_batch" in line:
            print(line)


if __name__ == "__main__":
    trio.run(main)
