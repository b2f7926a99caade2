"""The producer's KIP-714 metrics, under the names Kafka's Java producer pushes.

Pushed (``org.apache.kafka.producer.`` +): the connection metrics of
:func:`pykaf._cluster.telemetry.client_points`, ``record.send.total``,
``record.error.total``, ``requests.in.flight``, ``buffer.total.bytes``,
``buffer.available.bytes`` and ``request.latency.avg``/``.max`` (every
request's round trip). What the Java producer has and pykaf does not measure
is listed in docs/observability.md.
"""

from __future__ import annotations

from typing import Protocol

from pykaf._cluster.client import Client
from pykaf._cluster.otlp import MetricPoint
from pykaf._cluster.telemetry import client_points, latency, overall
from pykaf._producer.config import ProducerConfig
from pykaf._producer.records import ProducerStatistics

PREFIX = "org.apache.kafka.producer."


class Measured(Protocol):
    """What the metrics are read from: the producer."""

    client: Client
    config: ProducerConfig

    def statistics(self) -> ProducerStatistics:
        """The producer's counters."""
        ...


def producer_points(producer: Measured) -> list[MetricPoint]:
    """The producer's metrics now."""
    stats = producer.statistics()
    client = producer.client
    mean, longest, _ = overall(latency(client.statistics().requests))
    buffer_bytes = producer.config.buffer_bytes
    return [
        *client_points(client, PREFIX),
        MetricPoint(PREFIX + "record.send.total", stats.records_sent, True),
        MetricPoint(PREFIX + "record.error.total", stats.records_failed, True),
        MetricPoint(PREFIX + "requests.in.flight", stats.in_flight),
        MetricPoint(PREFIX + "buffer.total.bytes", buffer_bytes),
        MetricPoint(PREFIX + "buffer.available.bytes", max(0, buffer_bytes - stats.buffered_bytes)),
        MetricPoint(PREFIX + "request.latency.avg", mean),
        MetricPoint(PREFIX + "request.latency.max", longest),
    ]
