"""What a partition consumer and a group's claim share on asyncio: reading one partition.

``async for`` hands out the records already decoded with no crossing into
trio (``next_nowait``); only when it must wait for a fetch does it go
through the bridge.
"""

from __future__ import annotations

from asyncio import _get_running_loop
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, TypeVar, overload

import trio

from pykaf._column_batch import ColumnBatch
from pykaf.aio._bridge import call_keeping, wrong_loop
from pykaf.aio._channels import ReceiveChannel
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper
from pykaf.codec import Record


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
    def next_nowait(self) -> Record | None: ...
    async def __anext__(self) -> Record: ...
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    def errors(self) -> trio.MemoryReceiveChannel[Any]: ...
    def seek(self, offset: int) -> None: ...


R = TypeVar("R", bound=TrioReader)


class RecordReader(Wrapper[R]):
    """Reads one partition's records from asyncio (``async for``, ``next_batch``, ``seek``)."""

    # The per-record path's own: the loop and the trio reader's next_nowait, bound once.
    __slots__ = ("_loop", "_next_nowait")

    def __init__(self, trio_object: R, runner: Runner) -> None:
        super().__init__(trio_object, runner)
        self._loop = runner.loop
        self._next_nowait = trio_object.next_nowait

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
        return self._trio.position

    @property
    def high_water_mark(self) -> int:
        """The partition's high watermark at the last fetch (-1 before one)."""
        return self._trio.high_water_mark

    def __aiter__(self) -> AsyncIterator[Record]:
        return self

    async def __anext__(self) -> Record:
        # ``_check_loop`` inline: this runs once a record. asyncio's own
        # ``_get_running_loop`` answers None outside a loop instead of raising.
        if _get_running_loop() is not self._loop:
            wrong_loop(self._loop)
        record = self._next_nowait()
        if record is not None:
            return record
        return await call_keeping(self._runner, self._unread, self._trio.__anext__)

    @overload
    async def next_batch(self, *, columnar: Literal[False] = False) -> list[Record]: ...
    @overload
    async def next_batch(self, *, columnar: Literal[True]) -> ColumnBatch: ...
    @overload
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    async def next_batch(self, *, columnar: bool = False) -> list[Record] | ColumnBatch:
        """The next records: one decoded piece of a fetch answer (a ColumnBatch with ``columnar``).

        See :meth:`pykaf.PartitionConsumer.next_batch` (a claim's is empty once it ended).

        Raises:
            ClosedError: the partition consumer was closed.
        """
        return await call_keeping(
            self._runner, self._unread, self._trio.next_batch, columnar=columnar
        )

    def _unread(self, taken: Record | list[Record] | ColumnBatch) -> None:
        """Records a cancelled caller never got: read them again (seek back to the first)."""
        if isinstance(taken, ColumnBatch):
            first = taken.offsets[0] if len(taken) else -1
        elif isinstance(taken, list):
            first = taken[0].offset if taken else -1
        else:
            first = taken.offset
        if first >= 0:
            self._trio.seek(first)

    def next_nowait(self) -> Record | None:
        """The next record if one is decoded and waiting, else None (no wait, no fetch)."""
        return self._trio.next_nowait()

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); drops the buffer."""
        self._check_loop()
        self._trio.seek(offset)

    def errors(self) -> ReceiveChannel[Any]:
        """The partition's errors (``return_errors=True``), for asyncio."""
        return ReceiveChannel(self._trio.errors(), self._runner)


__all__ = ["RecordReader", "TrioReader"]
