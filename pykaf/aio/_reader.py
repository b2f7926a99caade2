"""What a partition consumer and a group's claim share on asyncio: reading one partition.

Trio only waits for the next fetch answer (``fetched()``); the asyncio task
that reads decodes it, a piece at a time, as it comes to it
(``take_decoded()``), as a trio reader decodes in its own step. ``async for``
hands the records out with the codec's compiled cursor (no coroutine per
record) and ``next_batch()`` returns what is taken; only a wait for a fetch
crosses into trio, and it takes nothing there, so a cancelled wait loses
nothing.
"""

from __future__ import annotations

from asyncio import _get_running_loop
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Literal, Protocol, TypeVar, overload

import trio

from pykaf._column_batch import ColumnBatch
from pykaf.aio._bridge import call, call_keeping, wrong_loop
from pykaf.aio._channels import ReceiveChannel
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper
from pykaf.codec import Record, RecordCursor


class TrioReader(Protocol):
    """A trio reader of one partition (``pykaf.PartitionConsumer``, ``pykaf.Claim``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def high_water_mark(self) -> int: ...
    async def fetched(self) -> bool: ...
    def take_decoded(self) -> list[Record]: ...
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    def errors(self) -> trio.MemoryReceiveChannel[Any]: ...
    def seek(self, offset: int) -> None: ...


R = TypeVar("R", bound=TrioReader)


class _Cursor(RecordCursor):
    """The records ``async for`` hands out on asyncio: the codec's compiled cursor.

    ``_local`` is the piece of what trio fetched that this task decoded and
    took at once (``take_decoded``); the cursor's ``__anext__`` hands it out
    record by record with no coroutine. When the list is read out,
    :meth:`_refill_next` takes the next piece, or asks trio to wait for the
    next fetch answer.
    """

    __slots__ = ("_reader",)

    def __init__(self, reader: RecordReader[Any]) -> None:
        self._reader = reader

    async def _refill_next(self) -> Record:
        if not await self._reader._take_waiting():
            raise StopAsyncIteration
        self._next = 1
        return self._local[0]


class RecordReader(Wrapper[R]):
    """Reads one partition's records from asyncio (``async for``, ``next_batch``, ``seek``)."""

    # ``async for`` iterates ``_cursor`` (``__aiter__`` returns it). ``_start``
    # is the position before the cursor's list.
    __slots__ = ("_cursor", "_loop", "_start")

    def __init__(self, trio_object: R, runner: Runner) -> None:
        super().__init__(trio_object, runner)
        self._loop = runner.loop
        self._cursor = _Cursor(self)
        self._start = -1

    @property
    def topic(self) -> str:
        """The topic."""
        return self._trio.topic

    @property
    def partition(self) -> int:
        """The partition."""
        return self._trio.partition

    @property
    def position(self) -> int:
        """The offset of the next record to be handed out (-1 before the start is known)."""
        cursor = self._cursor
        i, taken = cursor._next, cursor._local
        if i >= len(taken):
            return self._trio.position
        return taken[i - 1].offset + 1 if i else self._start

    @property
    def high_water_mark(self) -> int:
        """The partition's high watermark at the last fetch (-1 before one)."""
        return self._trio.high_water_mark

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._cursor

    def __anext__(self) -> Awaitable[Record]:
        return self._cursor.__anext__()

    def _take_more(self) -> bool:
        """Take the next decoded piece into the cursor; False when only a wait gives more."""
        # The list read out is dropped before the next piece is decoded (as
        # trio's partition consumer drops its own): its records' memory is
        # then reused by the new ones, not added to.
        self._drop_taken()
        start = self._trio.position
        taken = self._trio.take_decoded()
        self._cursor._local, self._start = taken, start
        return bool(taken)

    async def _take_waiting(self) -> bool:
        """Take the next piece into the cursor, waiting for a fetch if none is there.

        False once the reader has ended (closed, or the claim revoked).
        """
        # Checked once a list, where trio is asked: handing out records
        # already taken touches nothing of trio's.
        if _get_running_loop() is not self._loop:
            wrong_loop(self._loop)
        while not self._take_more():
            if not await call(self._runner, self._trio.fetched):
                return False
        return True

    def _rest(self) -> list[Record]:
        """The taken records not handed out, handed out now."""
        i, taken = self._cursor._next, self._cursor._local
        self._drop_taken()
        return taken[i:] if i < len(taken) else []

    def _drop_taken(self) -> None:
        """Forget the records taken and not handed out (a seek, a revoke)."""
        self._cursor._local, self._cursor._next = [], 0

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
        :meth:`pykaf.PartitionConsumer.next_batch` (a claim's is empty once it ended).

        Raises:
            ClosedError: the partition consumer was closed.
        """
        self._check_loop()
        rest = self._rest()
        if rest:
            if columnar:
                return ColumnBatch.from_records(
                    rest,
                    topic=self.topic,
                    partition=self.partition,
                    next_offset=self._trio.position,
                )
            return rest
        if columnar:  # decoded straight into columns, in trio
            return await call_keeping(
                self._runner, self._unread, self._trio.next_batch, columnar=True
            )
        if await self._take_waiting():
            return self._rest()
        # Ended: the trio reader's own answer (a claim's [], a closed consumer's ClosedError).
        return await call(self._runner, self._trio.next_batch, columnar=False)

    def _unread(self, taken: list[Record] | ColumnBatch) -> None:
        """Columns a cancelled caller never got: read them again (seek back to the first)."""
        self._drop_taken()
        first = taken.offsets[0] if isinstance(taken, ColumnBatch) and len(taken) else -1
        if first >= 0:
            self._trio.seek(first)

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); drops the buffer."""
        self._check_loop()
        self._trio.seek(offset)
        self._drop_taken()

    def errors(self) -> ReceiveChannel[Any]:
        """The partition's errors (``return_errors=True``), for asyncio."""
        return ReceiveChannel(self._trio.errors(), self._runner)


__all__ = ["RecordReader", "TrioReader"]
