"""``pykaf.aio``'s partition consumers: :class:`pykaf.Consumer` seen from asyncio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pykaf
from pykaf._consumer.partition import lag_of
from pykaf.aio._bridge import call, open_in_run
from pykaf.aio._reader import RecordReader
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client


class PartitionConsumer(RecordReader[pykaf.PartitionConsumer]):
    """One partition's records, for asyncio (see :class:`pykaf.PartitionConsumer`).

    ``async for record in pc`` or ``await pc.next_batch()``; ``seek()``,
    ``pause()``, ``resume()`` and the positions work as in trio.
    """

    __slots__ = ()

    @property
    def last_stable_offset(self) -> int:
        """The partition's last stable offset at the last fetch (-1 before one)."""
        return self._trio.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        """The partition's log start offset at the last fetch (-1 before one)."""
        return self._trio.log_start_offset

    @property
    def lag(self) -> int:
        """High watermark minus position (0 when unknown)."""
        return lag_of(self._trio.high_water_mark, self.position)

    @property
    def paused(self) -> bool:
        """Whether fetching is paused."""
        return self._trio.paused

    pause = direct(pykaf.PartitionConsumer.pause)
    resume = direct(pykaf.PartitionConsumer.resume)
    aclose = awaits(pykaf.PartitionConsumer.aclose)


class Consumer(Wrapper[pykaf.Consumer]):
    """Reads partitions from asyncio; get one from :func:`open_consumer`.

    See :class:`pykaf.Consumer`.
    """

    __slots__ = ()

    @property
    def client(self) -> Client:
        """The cluster client the consumer fetches through."""
        return Client(self._trio.client, self._runner)

    @property
    def config(self) -> pykaf.ConsumerConfig:
        """The consumer's options."""
        return self._trio.config

    async def consume_partition(
        self,
        topic: str,
        partition: int,
        offset: int = -1,
        *,
        timestamp: int | None = None,
        leader_epoch: int | None = None,
    ) -> PartitionConsumer:
        """Start reading one partition (see :meth:`pykaf.Consumer.consume_partition`)."""
        pc = await call(
            self._runner,
            self._trio.consume_partition,
            topic,
            partition,
            offset,
            timestamp=timestamp,
            leader_epoch=leader_epoch,
        )
        return PartitionConsumer(pc, self._runner)

    partitions = awaits(pykaf.Consumer.partitions)
    topics = awaits(pykaf.Consumer.topics)
    aclose = awaits(pykaf.Consumer.aclose)
    statistics = direct(pykaf.Consumer.statistics)


@asynccontextmanager
async def open_consumer(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Consumer]:
    """Open a consumer on the running asyncio loop (see :func:`pykaf.open_consumer`).

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.Consumer]:
        return pykaf.open_consumer(unwrap_client(bootstrap_servers_or_client, runner), **config)

    async with open_in_run(opener) as (consumer, runner):
        yield Consumer(consumer, runner)


__all__ = ["Consumer", "PartitionConsumer", "open_consumer"]
