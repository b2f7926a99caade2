"""Exporting pykaf's request metrics to Prometheus (see docs/observability.md).

``on_request`` (a client option, so producers, consumers and the admin client
take it too) is called after every request with a ``pykaf.RequestEvent``.
Here it feeds a latency histogram and an error counter labelled by broker and
API; ``prometheus_client`` serves them for scraping. The hook only updates
in-memory metrics: it runs in a connection's reader task and must be quick.

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


async def produce_with_metrics(bootstrap: str, topic: str, count: int) -> bytes:
    """Produce ``count`` records with the hook installed; return the scrape text."""
    registry = CollectorRegistry()
    metrics = KafkaRequestMetrics(registry)
    async with pykaf.open_producer(bootstrap, on_request=metrics, linger=0.005) as producer:
        await (await producer.send_batch(topic, [b"x"] * count)).wait()
    scraped: bytes = generate_latest(registry)
    return scraped


async def main() -> None:
    """Produce to a fake cluster and print the Produce metrics."""
    from pykaf.testing import open_fake_cluster

    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("metrics-demo", 3)
        text = await produce_with_metrics(cluster.bootstrap, "metrics-demo", 10_000)
    for line in text.decode().splitlines():
        if 'api="Produce"' in line and "_count" in line:
            print(line)


if __name__ == "__main__":
    trio.run(main)
