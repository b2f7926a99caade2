"""The consumer: partition consumers fed by one fetch task per broker.

Roles (trio tasks in the consumer's nursery):

- one **partition task** per partition consumer resolves where to start
  (an offset, ``OLDEST``, ``NEWEST`` or a timestamp), finds the leader and
  attaches the partition to that broker's fetcher; after a leader error or a
  lost connection it backs off, refreshes metadata and attaches it again;
- one **fetcher** per broker (``fetcher.py``) fetches all of that broker's
  partitions with one request and hands each partition consumer its records
  as one list per answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from pykaf import errors
from pykaf._cluster.client import NEWEST, OLDEST, Client, client_for
from pykaf._consumer.config import ConsumerConfig
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf._consumer.partition import PartitionConsumer
from pykaf._consumer.read_committed import TransactionFilter
from pykaf._util import open_service_nursery, start_task_nursery

log = logging.getLogger("pykaf.consumer")


@dataclass(frozen=True, slots=True)
class PartitionStatistics:
    """One partition consumer's position and lag."""

    topic: str
    partition: int
    position: int
    high_water_mark: int
    last_stable_offset: int
    lag: int
    records_fetched: int
    paused: bool


@dataclass(frozen=True, slots=True)
class ConsumerStatistics:
    """A snapshot of the consumer: per partition and per broker."""

    partitions: list[PartitionStatistics]
    brokers: dict[int, dict[str, int]]

    @property
    def lag(self) -> int:
        """Total lag over all partitions."""
        return sum(p.lag for p in self.partitions)


class Consumer:
    """Reads partitions; get one from :func:`open_consumer`."""

    def __init__(self, client: Client, config: ConsumerConfig, nursery: trio.Nursery) -> None:
        self.client = client
        self.config = config
        self._nursery = nursery
        self._partitions: dict[tuple[str, int], PartitionConsumer] = {}
        self._fetchers: dict[int, BrokerFetcher] = {}
        self._closed = False

    async def topics(self) -> list[str]:
        """The cluster's topics."""
        return await self.client.topics()

    async def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic``."""
        return await self.client.partitions(topic)

    async def consume_partition(
        self,
        topic: str,
        partition: int,
        offset: int = NEWEST,
        *,
        timestamp: int | None = None,
    ) -> PartitionConsumer:
        """Start reading ``topic``/``partition``.

        Args:
            topic: the topic.
            partition: the partition's index.
            offset: the first offset to read, or ``OLDEST`` / ``NEWEST``.
            timestamp: instead of ``offset``, start at the first record whose
                timestamp (ms) is at or after it (at the end if there is none).

        Raises:
            ConfigError: the partition is already being consumed, or the offset is invalid.
            UnknownTopicOrPartitionError: no such topic or partition.
            ClosedError: the consumer is closed.
        """
        if self._closed:
            raise errors.ClosedError("the consumer is closed")
        if (topic, partition) in self._partitions:
            raise errors.ConfigError(f"{topic}/{partition} is already being consumed")
        if timestamp is None and (
            not isinstance(offset, int) or isinstance(offset, bool) or offset < -2
        ):
            raise errors.ConfigError(f"not an offset: {offset!r} (use an offset, OLDEST or NEWEST)")
        if partition not in await self.client.partitions(topic):
            raise errors.UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition}"
            )
        pc = PartitionConsumer(
            self, topic, partition, offset, TransactionFilter(self.config.isolation_level)
        )
        if timestamp is not None:
            pc.start, pc.start_is_time = timestamp, True
        elif offset >= 0:
            pc.restart_at(offset)
        self._partitions[(topic, partition)] = pc
        self._nursery.start_soon(
            self._partition_task, pc, name=f"pykaf consumer {topic}/{partition}"
        )
        return pc

    def statistics(self) -> ConsumerStatistics:
        """Positions, lag and counters (cheap to call)."""
        return ConsumerStatistics(
            partitions=[
                PartitionStatistics(
                    pc.topic,
                    pc.partition,
                    pc.position,
                    pc.high_water_mark,
                    pc.last_stable_offset,
                    pc.lag,
                    pc.records_fetched,
                    pc.paused,
                )
                for pc in self._partitions.values()
            ],
            brokers={node: f.statistics() for node, f in self._fetchers.items()},
        )

    async def aclose(self) -> None:
        """Stop every partition consumer (their iteration ends) and the fetchers."""
        if self._closed:
            return
        self._closed = True
        for pc in list(self._partitions.values()):
            self._forget(pc)
        self._nursery.cancel_scope.cancel()

    # -- partition tasks --------------------------------------------------------

    async def _partition_task(self, pc: PartitionConsumer) -> None:
        cfg = self.config
        while not pc.stopped:
            if pc.fetcher is None:
                if pc.failures:
                    backoff = min(cfg.retry_backoff * 2 ** (pc.failures - 1), 5.0)
                    await trio.sleep(backoff)
                try:
                    if pc.fetch_offset < 0:
                        await self._resolve_start(pc)
                    node = await self._leader(pc)
                except errors.PykafError as exc:
                    pc.failures += 1
                    if pc.failures == 1 and not getattr(exc, "retriable", False):
                        # Reported once per run of failures; the task keeps trying
                        # with backoff (an ACL or a topic may yet appear).
                        pc.report(exc)
                    log.info("%s/%d: %s", pc.topic, pc.partition, exc)
                    continue
                if node is None:
                    pc.failures += 1
                    continue
                if pc.stopped:
                    return
                self._fetcher(node).attach(pc)
            pc.detached = trio.Event()
            await pc.detached.wait()

    async def _resolve_start(self, pc: PartitionConsumer) -> None:
        # read_committed: NEWEST is the last stable offset (as Java's seekToEnd).
        level = self.config.isolation_code
        get_offset = self.client.get_offset
        if pc.start_is_time:
            offset = await get_offset(pc.topic, pc.partition, pc.start)
            if offset < 0:  # no record that late: start at the end
                offset = await get_offset(pc.topic, pc.partition, NEWEST, isolation_level=level)
        elif pc.start in (OLDEST, NEWEST):
            offset = await get_offset(pc.topic, pc.partition, pc.start, isolation_level=level)
        else:
            offset = pc.start
        pc.restart_at(offset)

    async def _leader(self, pc: PartitionConsumer) -> int | None:
        if pc.needs_metadata:
            await self.client.refresh_metadata(pc.topic)
            pc.needs_metadata = False
        leader = self.client.metadata.leader_of(pc.topic, pc.partition)
        if leader is None:
            pc.needs_metadata = True
            return None
        return leader.node_id

    def _fetcher(self, node_id: int) -> BrokerFetcher:
        fetcher = self._fetchers.get(node_id)
        if fetcher is None:
            fetcher = BrokerFetcher(self, node_id)
            self._fetchers[node_id] = fetcher
            self._nursery.start_soon(fetcher.run, name=f"pykaf consumer fetcher {node_id}")
        return fetcher

    def _lost_leader(self, pc: PartitionConsumer, error: BaseException) -> None:
        """A leader error or a lost connection: look the leader up again, then go on."""
        log.info("%s/%d: %s; looking for the leader", pc.topic, pc.partition, error)
        pc.failures += 1
        pc.needs_metadata = True
        self.client.metadata.mark_leader_unknown(pc.topic, pc.partition)
        if pc.fetcher is not None:
            pc.fetcher.detach(pc)

    def _out_of_range(self, pc: PartitionConsumer, error: BaseException) -> None:
        """The position is outside the log: reset it as configured, or report."""
        reset = self.config.auto_offset_reset
        if reset == "none":
            pc.report(error)
            pc.paused = True
            return
        log.info("%s; resetting to the %s offset", error, reset)
        pc.start, pc.start_is_time = (OLDEST if reset == "earliest" else NEWEST), False
        self._resolve_later(pc)

    def _resolve_later(self, pc: PartitionConsumer) -> None:
        """Resolve ``pc.start`` again (a seek to OLDEST/NEWEST, or a reset)."""
        pc.fetch_offset = -1
        if pc.fetcher is not None:
            pc.fetcher.detach(pc)

    def _forget(self, pc: PartitionConsumer) -> None:
        self._partitions.pop((pc.topic, pc.partition), None)
        if pc.fetcher is not None:
            pc.fetcher.detach(pc)
        pc.close_channels()
        pc.detached.set()


@asynccontextmanager
async def open_consumer(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Consumer]:
    """Open a consumer; leaving the block stops every partition consumer.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        **config: options of :class:`pykaf.ConsumerConfig` (client options too).

    Raises:
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
    """
    async with AsyncExitStack() as stack:
        client, cfg = await client_for(stack, ConsumerConfig, bootstrap_servers_or_client, config)
        async with open_service_nursery() as nursery:
            # The consumer's tasks live in a nursery of their own, so that
            # aclose() inside the block stops them and not the block.
            consumer = Consumer(client, cfg, await start_task_nursery(nursery))
            try:
                yield consumer
            finally:
                with trio.CancelScope(shield=True):
                    await consumer.aclose()
                nursery.cancel_scope.cancel()
