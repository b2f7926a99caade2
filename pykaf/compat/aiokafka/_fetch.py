"""The consumer's assigned partitions: each one's reader, fetched records and position.

A partition is read by a ``pykaf.aio`` reader: a :class:`pykaf.aio.PartitionConsumer`
(``assign``, or ``subscribe`` without a group) or a group's
:class:`pykaf.aio.Claim`. A pump (an asyncio task, or the group's
``consume_claim``) awaits the reader's next batch whenever the partition's
records have all been handed out, so ``getmany`` takes records from memory
and waits only when no partition has any.

A seek bumps the partition's generation: a batch the pump was awaiting
across the seek is dropped and the reader sought again, so no record from
before a seek is ever handed out after it.

The position reported and committed is the shim's own: the offset after
what was handed to the pump (``fetched_to``), never the reader's live
position, which a batch the pump has not taken yet has already moved.

A partition's errors (``errors()``: offset out of range with no reset, a
non-retriable broker error, a corrupt or oversized batch) pause it in
pykaf; the pump passes each to ``Records.failed``, which the consumer
raises from its next ``getmany``/``getone``, as aiokafka does.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import trio

from pykaf.codec import Record
from pykaf.compat.aiokafka.structs import TopicPartition

#: How often a pump whose records wait to be handed out checks that its claim still runs.
_REVOKE_CHECK = 0.1
#: How often a pump checks whether its reader knows its start offset yet.
_START_CHECK = 0.01


class Signal:
    """Wakes the tasks waiting on it; a wait may time out.

    Not ``asyncio.wait_for(event.wait(), t)``: on Python 3.10 and 3.11 that
    may swallow a cancellation that arrives with the timeout, and a pump or
    ``getmany`` cancelled then would run on.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def set(self) -> None:
        """Wake every task waiting now."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until :meth:`set` is called, or ``timeout`` seconds pass."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None
        if timeout is not None:
            timer = loop.call_later(max(timeout, 0), _settle, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Part:
    """One assigned partition."""

    __slots__ = (
        "drained",
        "fetched_to",
        "generation",
        "paused",
        "polled_at",
        "reader",
        "records",
        "seek_to",
        "task",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        #: The pykaf.aio reader (None until the partition consumer or claim exists).
        self.reader: Any = None
        #: Fetched records not handed out yet, oldest first.
        self.records: deque[Record] = deque()
        #: Set when ``records`` runs empty: the pump may fetch again.
        self.drained = Signal()
        self.generation = 0
        #: The offset after the records handed to the pump (None: not known yet).
        self.fetched_to: int | None = None
        #: The offset of the last seek (applied when the reader comes, if it had not yet).
        self.seek_to: int | None = None
        self.paused = False
        #: When the last fetch answer for the partition came (ms since the epoch; None: none).
        self.polled_at: int | None = None
        #: The pump task of a partition consumer (a claim's pump is its consume_claim).
        self.task: asyncio.Task[None] | None = None

    def position(self) -> int:
        """The offset of the next record to hand out (-1 while the start is not known)."""
        if self.records:
            return self.records[0].offset
        if self.fetched_to is not None:
            return self.fetched_to
        if self.reader is None and self.seek_to is not None and self.seek_to >= 0:
            return self.seek_to
        return -1

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (or ``OLDEST``/``NEWEST``): drops what was fetched.

        A partition consumer that an error paused (and the user did not) fetches again.
        """
        self.generation += 1
        self.seek_to = offset
        self.fetched_to = offset if offset >= 0 else None
        self.records.clear()
        self.drained.set()
        if self.reader is not None:
            self.reader.seek(offset)
            if not self.paused and hasattr(self.reader, "resume"):
                # A fatal error (offset out of range, ...) paused the reader: a seek
                # is how an aiokafka user goes on from one.
                self.reader.resume()


class Records:
    """The assigned partitions and the wait for any of them to have records."""

    def __init__(self, failed: Callable[[BaseException], None]) -> None:
        self.parts: dict[TopicPartition, Part] = {}
        #: Called with each partition's error (the consumer raises it from its next read).
        self.failed = failed
        #: Set when a partition's records arrive (and when the consumer stops).
        self.arrived = Signal()
        self._start = 0  # where the next take starts: partitions take turns

    def add(self, tp: TopicPartition) -> Part:
        """The partition's entry (made if new)."""
        part = self.parts.get(tp)
        if part is None:
            part = self.parts[tp] = Part(tp)
        return part

    def drop(self, tp: TopicPartition) -> Part | None:
        """Forget a partition; return its entry (its pump is the caller's to stop)."""
        part = self.parts.pop(tp, None)
        if part is not None:
            part.records.clear()
            part.drained.set()
        return part

    async def pump(self, part: Part, ended: Callable[[], bool] = lambda: False) -> None:
        """Fetch ``part``'s batches whenever its records are handed out, until ``ended()``.

        A claim's ``ended`` says whether the group took it back: its records
        not handed out are then dropped (the next owner reads them).
        """
        reader = part.reader
        if part.seek_to is not None:
            reader.seek(part.seek_to)
        watcher = asyncio.get_running_loop().create_task(self._report_errors(reader))
        try:
            await self._fetch(part, reader, ended)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            part.records.clear()
            part.drained.set()

    async def _fetch(self, part: Part, reader: Any, ended: Callable[[], bool]) -> None:
        while not ended():
            while part.records and not ended():
                await part.drained.wait(_REVOKE_CHECK)
            if ended():
                break
            generation = part.generation
            if reader.position < 0:
                # The start is not resolved yet: a next_batch now would move the
                # reader past records before the pump knows where they began.
                await asyncio.sleep(_START_CHECK)
                continue
            part.fetched_to = reader.position  # all handed out: the reader is where we are
            batch = await reader.next_batch()
            part.polled_at = int(time.time() * 1000)
            if generation != part.generation:
                reader.seek(part.seek_to)  # fetched across a seek: fetch again from there
                continue
            part.fetched_to = reader.position
            if not batch:
                continue
            part.records.extend(batch)
            self.arrived.set()

    async def _report_errors(self, reader: Any) -> None:
        """Pass each of the reader's errors to :attr:`failed` until the reader closes."""
        channel = reader.errors()
        while True:
            try:
                error = await channel.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return
            self.failed(error)

    def take(
        self, wanted: Iterable[TopicPartition], limit: int
    ) -> dict[TopicPartition, list[Record]]:
        """Up to ``limit`` fetched records of ``wanted`` (all: empty) partitions, by partition."""
        chosen = list(wanted) or list(self.parts)
        out: dict[TopicPartition, list[Record]] = {}
        if not chosen:
            return out
        start = self._start % len(chosen)
        self._start += 1
        for tp in chosen[start:] + chosen[:start]:
            part = self.parts.get(tp)
            if part is None or part.paused or not part.records:
                continue
            records = part.records
            n = min(limit, len(records))
            out[tp] = [records.popleft() for _ in range(n)]
            if not records:
                part.drained.set()
            limit -= n
            if limit <= 0:
                break
        return out


__all__ = ["Part", "Records"]
