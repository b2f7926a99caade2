"""The consumer's KIP-714 metrics, under the names Kafka's Java consumer pushes.

Pushed (``org.apache.kafka.consumer.`` +): the connection metrics of
:func:`pykaf._cluster.telemetry.client_points`, ``request.latency.avg``/``.max``
and the fetch manager's ``fetch.manager.records.consumed.total``,
``fetch.manager.bytes.consumed.total``, ``fetch.manager.fetch.total``,
``fetch.manager.records.lag.max`` and ``fetch.manager.fetch.latency.avg``/``.max``.
A consumer group adds the coordinator's (``pykaf._group.telemetry``). What
the Java consumer has and pykaf does not measure is listed in
docs/observability.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pykaf._cluster.client import Client
from pykaf._cluster.otlp import MetricPoint
from pykaf._cluster.telemetry import client_points, latency, overall

PREFIX = "org.apache.kafka.consumer."


class _Partition(Protocol):
    @property
    def records_fetched(self) -> int: ...
    @property
    def lag(self) -> int: ...


class _Statistics(Protocol):
    @property
    def partitions(self) -> Sequence[_Partition]: ...
    @property
    def brokers(self) -> Mapping[int, Mapping[str, int]]: ...
    @property
    def records_fetched(self) -> int: ...


class Measured(Protocol):
    """What the metrics are read from: the consumer."""

    client: Client

    def statistics(self) -> _Statistics:
        """The consumer's counters."""
        ...


def consumer_points(consumer: Measured) -> list[MetricPoint]:
    """The consumer's metrics now."""
    stats = consumer.statistics()
    client = consumer.client
    requests = client.statistics().requests
    mean, longest, _ = overall(latency(requests))
    fetch_mean, fetch_longest, _ = overall(latency(requests, "Fetch"))
    fm = PREFIX + "fetch.manager."
    consumed = stats.records_fetched  # closed partitions' records included
    fetched_bytes = sum(b.get("bytes", 0) for b in stats.brokers.values())
    fetches = sum(b.get("requests", 0) for b in stats.brokers.values())
    return [
        *client_points(client, PREFIX),
        MetricPoint(PREFIX + "request.latency.avg", mean),
        MetricPoint(PREFIX + "request.latency.max", longest),
        MetricPoint(fm + "records.consumed.total", consumed, True),
        MetricPoint(fm + "bytes.consumed.total", fetched_bytes, True),
        MetricPoint(fm + "fetch.total", fetches, True),
        MetricPoint(fm + "records.lag.max", max((p.lag for p in stats.partitions), default=0)),
        MetricPoint(fm + "fetch.latency.avg", fetch_mean),
        MetricPoint(fm + "fetch.latency.max", fetch_longest),
    ]
