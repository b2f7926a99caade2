"""A fetch cursor: where one partition is fetched from, and what its fetches said.

A partition consumer (:mod:`pykaf._consumer.partition`) is the reader's side
of a partition; its :class:`FetchCursor` is the fetcher's side: the offset to
fetch next (or the start still to resolve), the fetch size, paused or stopped,
the watermarks of the last answer, the leader epochs of what was fetched
(KIP-320), the read_committed filter's transaction state, the generation that
makes answers to fetches from before a seek stale, and the channel of answers
handed to the reader. The router attaches the cursor to a broker's fetcher
(its :class:`~pykaf._cluster.router.Route`'s owner is the cursor).

Only this module writes a cursor's fields (``tests/test_private_access.py``
checks it): the fetcher, the consumer and the reader call the methods below,
each named for the change. A change that makes what the reader holds stale (a
seek, a truncation, a corrupt piece) bumps the generation and has the reader
drop its buffer (:class:`Reader`).
"""

from __future__ import annotations

import contextlib
import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

import trio

from pykaf._cluster.router import Route
from pykaf._consumer.fetched import Fetched
from pykaf.errors import ConsumerError

if TYPE_CHECKING:
    from pykaf._consumer.config import ConsumerConfig
    from pykaf._consumer.fetched import ByteBudget
    from pykaf._consumer.read_committed import TransactionFilter

#: leader epoch changes a cursor remembers (the oldest are forgotten)
_EPOCHS_KEPT = 32


class Configured(Protocol):
    """What a partition consumer reads of its consumer: the options and the byte budget."""

    @property
    def config(self) -> ConsumerConfig:
        """The consumer's options (buffer and fetch sizes)."""
        ...

    @property
    def budget(self) -> ByteBudget:
        """The fetched bytes held over all partitions, against ``fetch_buffer_bytes``."""
        ...


class Fetching(Protocol):
    """The broker fetcher a cursor is attached to, as the cursor sees it."""

    def wake(self) -> None:
        """Something changed: look at the partitions again."""
        ...

    def attach(self, cursor: FetchCursor) -> None:
        """Start fetching ``cursor``'s partition."""
        ...

    def detach(self, cursor: FetchCursor) -> None:
        """Stop fetching it."""
        ...


class Reader(Protocol):
    """What a cursor does to its partition's reader when the fetch position moves."""

    def discard_buffer(self) -> int:
        """Drop what was fetched and not handed out; returns the reader's position."""
        ...

    def continue_at(self, offset: int) -> None:
        """Hand out records from ``offset`` on (-1: from the start, once resolved)."""
        ...


class FetchCursor:
    """One partition's fetch state; see the module.

    Attributes:
        topic, partition: the partition.
        fetch_offset: the next offset to fetch (-1 until ``start`` is resolved).
        start: where to start when ``fetch_offset`` is -1: an offset, ``OLDEST``,
            ``NEWEST``, or a timestamp (``start_is_time``).
        max_bytes: the partition's fetch size (grown for an oversized batch).
        filter: read_committed's transaction state of what was fetched.
        route: where the partition is led, and the fetcher it is attached to.
        generation: bumped when the position moves (answers to older fetches are dropped).
        paused, stopped: paused (by the reader, or by an error), closed.
        high_water_mark, last_stable_offset, log_start_offset: the last answer's.
        bytes_fetched: record-set bytes handed to the reader so far.
        buffered_bytes: those the reader has not read yet.
        errors: the reader's end of the partition's errors.
    """

    __slots__ = (
        "_epoch_offsets",
        "_epochs",
        "_errors_send",
        "_reader",
        "_receive",
        "_send",
        "_waiting",
        "buffered_bytes",
        "bytes_fetched",
        "consumer",
        "errors",
        "fetch_offset",
        "filter",
        "generation",
        "high_water_mark",
        "last_stable_offset",
        "log_start_offset",
        "max_bytes",
        "partition",
        "paused",
        "route",
        "start",
        "start_is_time",
        "stopped",
        "topic",
    )

    def __init__(
        self,
        consumer: Configured,
        topic: str,
        partition: int,
        start: int,
        tx_filter: TransactionFilter,
        reader: Reader,
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.partition = partition
        self._reader = reader
        self.fetch_offset = -1
        self.start = start
        self.start_is_time = False
        self.max_bytes = consumer.config.max_partition_fetch_bytes
        self.filter = tx_filter
        self.route: Route[FetchCursor] = Route(topic, partition, self)
        self.generation = 0
        self.paused = False
        self.stopped = False
        self.high_water_mark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.bytes_fetched = 0
        self.buffered_bytes = 0
        # Leader epochs (KIP-320) of the fetched batches: where they changed,
        # as (first offset, epoch) pairs, both increasing.
        self._epochs: list[tuple[int, int]] = []
        self._epoch_offsets: list[int] = []
        # (generation, record set): one per fetch answer; an answer with no
        # pieces moves the position past what was skipped (an oversized batch).
        self._send, self._receive = trio.open_memory_channel[tuple[int, Fetched]](
            consumer.config.partition_buffer
        )
        self._errors_send, self.errors = trio.open_memory_channel[ConsumerError](math.inf)
        self._waiting = False  # the reader waits with nothing buffered

    @property
    def fetcher(self) -> Fetching | None:
        """The broker fetcher the partition is attached to (None while detached)."""
        return cast("Fetching | None", self.route.worker)

    # -- the fetcher's side -------------------------------------------------------

    def fetchable(self) -> bool:
        """Whether the next request should include this partition.

        Not while its buffer is full or it is paused; not while the
        consumer's ``fetch_buffer_bytes`` are held, unless its reader waits
        with nothing buffered (the budget is held by other partitions).
        """
        return (
            not self.paused
            and not self.stopped
            and self.fetch_offset >= 0
            and self._send.statistics().current_buffer_used < self.consumer.config.partition_buffer
            and (not self.consumer.budget.full or self._waiting)
        )

    def answered(
        self, high_water_mark: int, last_stable_offset: int, log_start_offset: int
    ) -> None:
        """A fetch answer (with no error) gave the partition's watermarks."""
        self.high_water_mark = high_water_mark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset

    def fetched_whole(self) -> None:
        """A whole batch came: the fetch size goes back to ``max_partition_fetch_bytes``."""
        self.max_bytes = self.consumer.config.max_partition_fetch_bytes

    def grow(self, size: int) -> bool:
        """A batch of ``size`` bytes did not fit: fetch more, up to ``fetch_max_bytes``.

        Returns False when the size is at ``fetch_max_bytes`` already.
        """
        limit = self.consumer.config.fetch_max_bytes
        if self.max_bytes >= limit:
            return False
        self.max_bytes = min(limit, max(self.max_bytes * 2, size))
        return True

    def deliver(self, answer: Fetched) -> bool:
        """Hand the record set fetched from ``answer.start`` up to ``answer.end`` to the reader.

        Never blocks: the fetcher only asks for partitions with room. If the
        channel is full anyway, the fetch position goes back to the start and
        the next fetch brings the records again. Returns whether the reader
        got them; if so, ``answer.size`` bytes count against the budget until
        they are read.
        """
        try:
            self._send.send_nowait((self.generation, answer))
        except trio.WouldBlock:
            self.fetch_offset = answer.start
            return False
        except trio.ClosedResourceError:
            return False
        self.fetch_offset = answer.end
        self._waiting = False  # the reader has it (it runs later): fetch no more for it
        self.bytes_fetched += answer.size
        self.buffered_bytes += answer.size
        self.consumer.budget.take(answer.size)
        return True

    def note_batches(self, batches: Sequence[tuple[int, int]], start: int, end: int) -> None:
        """Remember the leader epochs of the batches fetched from ``start`` up to ``end``.

        ``batches`` are (base offset, leader epoch) pairs, in offset order.
        """
        last = self._epochs[-1][1] if self._epochs else -2
        if not batches or batches[0][1] == last == batches[-1][1]:
            return  # epochs never go down in a log: nothing changed in between
        for base, epoch in batches:
            if epoch != last and epoch >= 0:
                if base >= end:
                    break
                self._note_epoch(max(base, start), epoch)
                last = epoch

    def report(self, error: BaseException) -> None:
        """Put an error on this partition's errors channel."""
        with contextlib.suppress(trio.ClosedResourceError):
            self._errors_send.send_nowait(ConsumerError(self.topic, self.partition, error))

    def fail(self, error: BaseException) -> None:
        """A fatal error: reported, and the partition is no longer fetched (as sarama does)."""
        self.report(error)
        self.paused = True

    # -- where to fetch from ------------------------------------------------------

    def start_at_time(self, timestamp: int) -> None:
        """Start at the first record whose timestamp (ms) is at or after ``timestamp``."""
        self.start, self.start_is_time = timestamp, True

    def restart_at(self, offset: int, epoch: int = -1) -> None:
        """Fetch from ``offset`` on, with fresh transaction state; the reader continues there.

        ``epoch`` is the leader epoch of the record before ``offset`` when
        known; the epochs of what was fetched before are forgotten.
        """
        self.fetch_offset = offset
        self._reader.continue_at(offset)
        self.filter.reset()
        self._epochs, self._epoch_offsets = [], []
        if epoch >= 0:
            self._note_epoch(offset - 1, epoch)

    def resolve_again(self, start: int) -> None:
        """Start again at ``start`` (``OLDEST`` or ``NEWEST``), once the partition task finds it.

        A seek to either end, or a reset after an offset out of range: fetching
        stops until the partition task has looked the offset up.
        """
        self.start, self.start_is_time = start, False
        self.fetch_offset = -1
        if self.route.worker is not None:
            self.route.detach()

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); the buffer is dropped."""
        self._stale()
        if offset >= 0:
            self.restart_at(offset)
        else:
            self._reader.continue_at(-1)
            self.resolve_again(offset)
        if self.fetcher is not None:
            self.fetcher.wake()

    def reset_to(self, start: int) -> None:
        """Drop what is buffered and start again at ``start`` (``OLDEST`` or ``NEWEST``)."""
        self._stale()
        self.resolve_again(start)

    def truncated_to(self, offset: int) -> int:
        """The log diverges from ``offset`` on: fetch again from there; returns the new position.

        What was buffered is dropped; when the reader is behind ``offset``,
        fetching restarts at the reader's position instead.
        """
        position = self._stale()
        restart = min(position, offset) if position >= 0 else offset
        self.restart_at(restart, self.epoch_at(restart - 1) if restart > 0 else -1)
        return restart

    def corrupt(self, error: BaseException) -> None:
        """The reader found a corrupt piece: reported; buffer dropped, paused at its position."""
        self.fail(error)
        position = self._stale()
        self.restart_at(position, self.epoch_at(position - 1) if position > 0 else -1)

    def _stale(self) -> int:
        """Answers in flight and buffered are stale now: the reader drops them; its position."""
        self.generation += 1
        return self._reader.discard_buffer()

    # -- the reader's side ----------------------------------------------------------

    def pause(self) -> None:
        """Stop fetching this partition (what is already buffered can still be read)."""
        self.paused = True

    def resume(self) -> None:
        """Fetch this partition again."""
        self.paused = False
        if self.fetcher is not None:
            self.fetcher.wake()

    async def receive(self) -> Fetched:
        """Wait for the next fetch answer of the current generation (older ones are released).

        Raises:
            trio.EndOfChannel: the cursor was closed and every answer read.
        """
        while True:
            buffered = self._receive.statistics().current_buffer_used
            was_full = buffered >= self.consumer.config.partition_buffer
            fetcher = self.fetcher
            if not buffered:
                # Nothing to read: this partition is fetched even when the
                # budget is held by others, so that no reader starves.
                self._waiting = True
                if fetcher is not None and self.consumer.budget.full:
                    fetcher.wake()
            try:
                generation, answer = await self._receive.receive()
            finally:
                self._waiting = False
            fetcher = self.fetcher
            if was_full and fetcher is not None:
                fetcher.wake()  # room again: fetch this partition again
            if generation != self.generation:
                self.released(answer)  # fetched before a seek
                continue
            return answer

    def released(self, answer: Fetched) -> None:
        """``answer`` was read or dropped: its bytes leave the budget."""
        self.buffered_bytes -= answer.size
        self.consumer.budget.give_back(answer.size)
        answer.size = 0

    def drop_answers(self) -> None:
        """Release every answer the reader has not taken yet."""
        while True:
            try:
                _, answer = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            self.released(answer)

    def close(self) -> None:
        """Closed: detached for good, and the reader's iteration ends."""
        self.route.close()
        self.stopped = True
        self._send.close()
        self._errors_send.close()

    # -- leader epochs (KIP-320) --------------------------------------------------

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the fetched batch holding ``offset`` (-1 when unknown).

        Known for offsets fetched since the last seek (or for the offset before
        a start given with its epoch); the epoch of an offset past what was
        fetched is the last one seen, as Kafka's consumer assumes.
        """
        i = bisect_right(self._epoch_offsets, offset) - 1
        return self._epochs[i][1] if i >= 0 else -1

    @property
    def fetched_epoch(self) -> int:
        """The leader epoch of the last record fetched (-1 when unknown): what validation asks."""
        return self.epoch_at(self.fetch_offset - 1) if self._epochs else -1

    def _note_epoch(self, offset: int, epoch: int) -> None:
        if self._epochs and self._epochs[-1][1] == epoch:
            return
        while self._epoch_offsets and self._epoch_offsets[-1] >= offset:
            self._epochs.pop()  # refetched after a truncation: the new history wins
            self._epoch_offsets.pop()
        self._epochs.append((offset, epoch))
        self._epoch_offsets.append(offset)
        if len(self._epochs) > _EPOCHS_KEPT:
            del self._epochs[0], self._epoch_offsets[0]

    def __repr__(self) -> str:
        return (
            f"<FetchCursor {self.topic}/{self.partition} fetch_offset={self.fetch_offset} "
            f"generation={self.generation} hwm={self.high_water_mark}>"
        )


__all__ = ["Configured", "FetchCursor", "Fetching", "Reader"]
