"""``pykaf.aio``'s partition consumers: :class:`pykaf.Consumer` seen from asyncio."""

from __future__ import annotations

from asyncio import _get_running_loop
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, overload

import pykaf
from pykaf._column_batch import ColumnBatch
from pykaf.aio._bridge import call, call_keeping, open_in_run, wrong_loop
from pykaf.aio._reader import RecordReader
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client
from pykaf.codec import Record


class PartitionConsumer(RecordReader[pykaf.PartitionConsumer]):
    """One partition's records, for asyncio (see :class:`pykaf.PartitionConsumer`).

    ``async for record in pc`` or ``await pc.next_batch()``; ``seek()``,
    ``pause()``, ``resume()`` and the positions work as in trio.
    """

    # ``async for`` takes every record fetched at once (``take_decoded``) and
    # hands them out from ``_taken`` by index: the per-record path is a list
    # index, as trio's is. ``_start`` is the position before ``_taken``.
    __slots__ = ("_start", "_taken", "_taken_next")

    def __init__(self, trio_object: pykaf.PartitionConsumer, runner: Runner) -> None:
        super().__init__(trio_object, runner)
        self._taken: list[Record] = []
        self._taken_next = 0
        self._start = -1

    async def __anext__(self) -> Record:
        i = self._taken_next
        taken = self._taken
        if i < len(taken):
            self._taken_next = i + 1
            return taken[i]
        # Checked once a list, where trio is asked: handing out records
        # already taken touches nothing of trio's.
        if _get_running_loop() is not self._loop:
            wrong_loop(self._loop)
        if self._take_more():
            self._taken_next = 1
            return self._taken[0]
        return await call_keeping(self._runner, self._unread, self._trio.__anext__)

    def _take_more(self) -> bool:
        """Take what trio has fetched into ``_taken``; False when only a wait gives more."""
        start = self._trio.position
        taken = self._trio.take_decoded()
        self._taken, self._taken_next, self._start = taken, 0, start
        return bool(taken)

    def _rest(self) -> list[Record]:
        """The taken records not handed out, handed out now."""
        i, taken = self._taken_next, self._taken
        self._taken, self._taken_next = [], 0
        return taken[i:] if i < len(taken) else []

    def next_nowait(self) -> Record | None:
        """The next record if one is fetched, else None (no wait, no fetch)."""
        self._check_loop()
        i = self._taken_next
        if i >= len(self._taken):
            if not self._take_more():
                return None
            i = 0
        self._taken_next = i + 1
        return self._taken[i]

    @overload
    async def next_batch(self, *, columnar: Literal[False] = False) -> list[Record]: ...
    @overload
    async def next_batch(self, *, columnar: Literal[True]) -> ColumnBatch: ...
    @overload
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    async def next_batch(self, *, columnar: bool = False) -> list[Record] | ColumnBatch:
        """The next records: one decoded piece of a fetch answer (a ColumnBatch with ``columnar``).

        What ``async for`` took and did not hand out comes first. See
        :meth:`pykaf.PartitionConsumer.next_batch`.

        Raises:
            ClosedError: the partition consumer was closed.
        """
        self._check_loop()
        rest = self._rest()
        if not rest:
            return await super().next_batch(columnar=columnar)
        if columnar:
            return ColumnBatch.from_records(
                rest, topic=self.topic, partition=self.partition, next_offset=self._trio.position
            )
        return rest

    @property
    def position(self) -> int:
        """The offset of the next record to be handed out (-1 before the start is known)."""
        i, taken = self._taken_next, self._taken
        if i >= len(taken):
            return self._trio.position
        return taken[i - 1].offset + 1 if i else self._start

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); drops the buffer."""
        super().seek(offset)
        self._taken, self._taken_next = [], 0

    def _unread(self, taken: Record | list[Record] | ColumnBatch) -> None:
        self._taken, self._taken_next = [], 0
        super()._unread(taken)

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
        high, position = self._trio.high_water_mark, self.position
        if high < 0 or position < 0:
            return 0
        return max(0, high - position)

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
