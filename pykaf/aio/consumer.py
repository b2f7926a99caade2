"""``pykaf.aio``'s partition consumers: :class:`pykaf.Consumer` seen from asyncio."""

from __future__ import annotations

from asyncio import _get_running_loop
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, overload

import pykaf
from pykaf._column_batch import ColumnBatch
from pykaf._consumer.partition import lag_of
from pykaf.aio._bridge import call, open_in_run, wrong_loop
from pykaf.aio._reader import RecordReader
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client
from pykaf.codec import Record, RecordCursor


class _Cursor(RecordCursor):
    """The records ``async for`` hands out on asyncio: the codec's compiled cursor.

    ``_local`` is the next piece of what trio fetched, decoded in this task
    and taken at once (``take_decoded``); the cursor's ``__anext__`` hands it
    out record by record with no coroutine, as trio's partition consumer does.
    When the list is read out, :meth:`_refill_next` decodes the next piece, or
    asks trio to wait for the next fetch answer (``fetched``).
    """

    __slots__ = ("_loop", "_reader", "_runner", "_trio")

    def __init__(
        self, reader: PartitionConsumer, trio_object: pykaf.PartitionConsumer, runner: Runner
    ) -> None:
        self._reader = reader
        self._trio = trio_object
        self._runner = runner
        self._loop = runner.loop

    async def _refill_next(self) -> Record:
        # Checked once a list, where trio is asked: handing out records
        # already taken touches nothing of trio's.
        if _get_running_loop() is not self._loop:
            wrong_loop(self._loop)
        reader = self._reader
        # Trio only waits for the next fetch answer; it is decoded here, a
        # piece at a time, as this task comes to it (``fetched``). Nothing is
        # taken in trio, so a cancelled wait loses nothing.
        while not reader._take_more():
            if not await call(self._runner, self._trio.fetched):
                raise StopAsyncIteration
        self._next = 1
        return self._local[0]


class PartitionConsumer(RecordReader[pykaf.PartitionConsumer]):
    """One partition's records, for asyncio (see :class:`pykaf.PartitionConsumer`).

    ``async for record in pc`` or ``await pc.next_batch()``; ``seek()``,
    ``pause()``, ``resume()`` and the positions work as in trio.
    """

    # ``async for`` iterates ``_cursor`` (``__aiter__`` returns it): every
    # record fetched is taken at once and handed out by the compiled cursor.
    # ``_start`` is the position before the cursor's list.
    __slots__ = ("_cursor", "_start")

    def __init__(self, trio_object: pykaf.PartitionConsumer, runner: Runner) -> None:
        super().__init__(trio_object, runner)
        self._cursor = _Cursor(self, trio_object, runner)
        self._start = -1

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._cursor

    def __anext__(self) -> Awaitable[Record]:  # type: ignore[override]
        return self._cursor.__anext__()

    def _take_more(self) -> bool:
        """Take what trio has fetched into the cursor; False when only a wait gives more."""
        cursor = self._cursor
        # The list read out is dropped before the next piece is decoded (as
        # trio's partition consumer drops its own): its records' memory is
        # then reused by the new ones, not added to.
        cursor._local, cursor._next = [], 0
        start = self._trio.position
        taken = self._trio.take_decoded()
        cursor._local, self._start = taken, start
        return bool(taken)

    def _rest(self) -> list[Record]:
        """The taken records not handed out, handed out now."""
        cursor = self._cursor
        i, taken = cursor._next, cursor._local
        cursor._local, cursor._next = [], 0
        return taken[i:] if i < len(taken) else []

    def next_nowait(self) -> Record | None:
        """The next record if one is fetched, else None (no wait, no fetch)."""
        self._check_loop()
        record = self._cursor.next_nowait()
        if record is None and self._take_more():
            record = self._cursor.next_nowait()
        return record

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
        cursor = self._cursor
        i, taken = cursor._next, cursor._local
        if i >= len(taken):
            return self._trio.position
        return taken[i - 1].offset + 1 if i else self._start

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); drops the buffer."""
        super().seek(offset)
        self._cursor._local, self._cursor._next = [], 0

    def _unread(self, taken: Record | list[Record] | ColumnBatch) -> None:
        self._cursor._local, self._cursor._next = [], 0
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
