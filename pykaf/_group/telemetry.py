"""A consumer group member's KIP-714 metrics: the consumer's and the coordinator's.

Adds (``org.apache.kafka.consumer.coordinator.`` +) ``commit.latency.avg``/``.max``
(OffsetCommit round trips), ``commit.total``, ``rebalance.total``,
``assigned.partitions``, ``heartbeat.total`` and ``heartbeat.response.time.max``
to :func:`pykaf._consumer.telemetry.consumer_points`.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Protocol

from pykaf._cluster.otlp import MetricPoint
from pykaf._cluster.telemetry import latency, overall
from pykaf._consumer.telemetry import PREFIX, Measured, consumer_points


class _Statistics(Protocol):
    @property
    def rebalances(self) -> int: ...
    @property
    def commits(self) -> int: ...
    @property
    def partitions(self) -> Sized: ...


class Member(Protocol):
    """What the metrics are read from: the group member."""

    def statistics(self) -> _Statistics:
        """The member's counters."""
        ...


def group_points(member: Member, consumer: Measured) -> list[MetricPoint]:
    """The member's metrics now (its consumer's included)."""
    stats = member.statistics()
    requests = consumer.client.statistics().requests
    commit_mean, commit_longest, _ = overall(latency(requests, "OffsetCommit"))
    _, beat_longest, beats = overall(latency(requests, "Heartbeat"))
    co = PREFIX + "coordinator."
    return [
        *consumer_points(consumer),
        MetricPoint(co + "commit.latency.avg", commit_mean),
        MetricPoint(co + "commit.latency.max", commit_longest),
        MetricPoint(co + "commit.total", stats.commits, True),
        MetricPoint(co + "rebalance.total", stats.rebalances, True),
        MetricPoint(co + "assigned.partitions", len(stats.partitions)),
        MetricPoint(co + "heartbeat.total", beats, True),
        MetricPoint(co + "heartbeat.response.time.max", beat_longest),
    ]
