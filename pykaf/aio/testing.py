"""Brokers for asyncio tests: ``pykaf.testing``'s fake cluster and Apache Kafka.

::

    async with pykaf.aio.testing.open_fake_cluster() as cluster:
        async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
            await producer.send("t", b"v")

The fake cluster runs in the loop's own trio guest run, so its controls
(``broker_down``, ``push_request_errors``, ...) are called directly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pykaf.aio._bridge import open_in_run
from pykaf.aio._wrap import Wrapper, awaits
from pykaf.testing import AsyncKafkaCluster, FakeCluster
from pykaf.testing import KafkaCluster as _SyncKafkaCluster
from pykaf.testing import open_fake_cluster as _trio_fake_cluster
from pykaf.testing import open_kafka_cluster as _trio_kafka_cluster


class KafkaCluster(Wrapper[AsyncKafkaCluster]):
    """An Apache Kafka cluster for asyncio tests (see :class:`pykaf.testing.KafkaCluster`).

    Its waiting controls are awaitable; everything else is the cluster's own
    (``bootstrap``, ``node_ids``, ``log_text``, ...).
    """

    __slots__ = ()

    @property
    def cluster(self) -> _SyncKafkaCluster:
        """The cluster itself (its blocking controls)."""
        return self._trio.cluster

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every node."""
        return self._trio.cluster.bootstrap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trio.cluster, name)

    create_topic = awaits(AsyncKafkaCluster.create_topic)
    delete_topic = awaits(AsyncKafkaCluster.delete_topic)
    reset = awaits(AsyncKafkaCluster.reset)
    broker_down = awaits(AsyncKafkaCluster.broker_down)
    broker_up = awaits(AsyncKafkaCluster.broker_up)
    close = awaits(AsyncKafkaCluster.close)


@asynccontextmanager
async def open_kafka_cluster(brokers: int = 1, **options: Any) -> AsyncIterator[KafkaCluster]:
    """Run an Apache Kafka cluster while the block runs.

    See :func:`pykaf.testing.open_kafka_cluster`.
    """
    async with open_in_run(lambda _: _trio_kafka_cluster(brokers, **options)) as (cluster, runner):
        yield KafkaCluster(cluster, runner)


@asynccontextmanager
async def open_fake_cluster(brokers: int = 3, **options: Any) -> AsyncIterator[FakeCluster]:
    """Run a :class:`pykaf.testing.FakeCluster` in the loop's trio run while the block runs."""
    async with open_in_run(lambda _: _trio_fake_cluster(brokers, **options)) as (cluster, _):
        yield cluster


__all__ = ["FakeCluster", "KafkaCluster", "open_fake_cluster", "open_kafka_cluster"]
