"""``pykaf.sync.Consumer`` and ``pykaf.sync.ConsumerGroup``: core cursors read from threads."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

import trio

from pykaf import _codec_py
from pykaf._cluster.client import NEWEST, OLDEST
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._column_batch import ColumnBatch
from pykaf._config import bootstrap_argument
from pykaf._consumer.consumer import Consumer as AsyncConsumer
from pykaf._consumer.consumer import ConsumerStatistics, open_consumer
from pykaf._consumer.partition import PartitionConsumer, lag_of
from pykaf._group.group import ConsumerGroup as AsyncConsumerGroup
from pykaf._group.group import GroupStatistics
from pykaf._group.opener import open_consumer_group
from pykaf._group.session import Claim, GroupSession
from pykaf._sync.portal import ContextHandle, Portal, get_portal
from pykaf._util import open_service_nursery
from pykaf.codec import LockedTake, Record
from pykaf.errors import (
    ClosedError,
    ConfigError,
    UnknownTopicOrPartitionError,
)

__all__ = ["Consumer", "ConsumerGroup"]

# -- consumers ------------------------------------------------------------------
#
# Positions live in the core only. Each assigned partition is a core
# PartitionConsumer (a group's: a Claim), whose cursor (its decoded list and
# the index of the next record, compiled) is the partition's one position. A
# feeder task per partition, in the portal's loop, waits until the core has
# decoded a list (``decoded()``: decoding happens in trio) and puts the
# partition's _Feed on the _Ready queue; then it waits until the callers have
# read that list out. Callers take records straight from the head feed's
# cursor (``next_nowait``, ``take_nowait``: no decoding, and the loop leaves
# the list alone meanwhile), under the consumer's lock; a cursor read out is
# popped and its feeder woken with one ``call_soon``. Crossing the thread
# boundary costs a deque append, an event and a call_soon per decoded list,
# nothing per record. Whatever changes a partition in the loop (seek, pause,
# assign) runs there while the caller holds the lock, so no record is taken
# meanwhile.

#: How long a waiting caller sleeps between checks for Ctrl-C and a dead loop.
_WAIT_SLICE = 0.1

TopicPartition = tuple[str, int]
Source = PartitionConsumer | Claim

_Stats = TypeVar("_Stats", ConsumerStatistics, GroupStatistics)
_T = TypeVar("_T")


def _nothing() -> Record | None:
    """The per-record take while no cursor is at the head: nothing."""
    return None


def _refuse_rows() -> Record | None:
    raise ConfigError("this consumer hands out columns (columnar=True): use consume_columns()")


class _Feed:
    """One assigned partition (or one group claim): its core reader, as both threads see it.

    The loop sets ``batch`` (columnar), ``drained`` and ``live``; callers,
    under their consumer's lock, take records from ``source`` and write
    ``done``. Plain attributes: neither side needs the other's lock.
    """

    __slots__ = ("batch", "done", "drained", "live", "scope", "session", "source", "take")

    def __init__(self, source: Source, session: GroupSession | None = None) -> None:
        self.source = source
        #: The cursor's per-record take (``next_nowait``), bound once.
        self.take: Callable[[], Record | None] = source.next_nowait
        self.session = session
        #: False once the partition is unassigned or its claim has ended.
        self.live = True
        #: Columnar: the batch decoded and not handed out yet (the position is before it).
        self.batch: ColumnBatch | None = None
        #: Groups: the offset up to which the caller is done with records (-1: none).
        self.done = -1
        self.drained = trio.Event()
        self.scope = trio.CancelScope()

    @property
    def topic(self) -> str:
        return self.source.topic

    @property
    def partition(self) -> int:
        return self.source.partition

    def position(self) -> int:
        """The offset of the next record to hand out (-1: not known yet)."""
        batch = self.batch
        if batch is not None:
            return int(batch.offsets[0])
        return self.source.position

    def wake(self) -> None:
        """(Loop) The callers have read the list out: decode the next."""
        self.drained.set()


def _handed_out(stats: _Stats, feeds: Mapping[TopicPartition, _Feed]) -> _Stats:
    """``stats`` with a columnar batch not handed out yet taken off positions and lag."""
    partitions = []
    for ps in stats.partitions:
        feed = feeds.get((ps.topic, ps.partition))
        if feed is not None and feed.batch is not None:
            position = feed.position()
            lag = lag_of(ps.high_water_mark, position)
            ps = dataclasses.replace(ps, position=position, lag=lag)
        partitions.append(ps)
    return dataclasses.replace(stats, partitions=partitions)


class _Failure:
    """A partition's error (a ConsumerError), raised to the caller in its turn."""

    __slots__ = ("error", "feed")

    def __init__(self, feed: _Feed, error: BaseException) -> None:
        self.feed = feed
        self.error = error


class _Ready:
    """Feeds whose cursor holds records for the callers, in the order they were decoded.

    Filled in the loop (``put``: one append and one event per decoded list),
    read and popped by callers under their consumer's lock.
    """

    def __init__(self, portal: Portal, columnar: bool) -> None:
        self.portal = portal
        self.items: deque[_Feed | _Failure] = deque()
        #: The feeders decode columns (``next_batch(columnar=True)``) instead of records.
        self.columnar = columnar
        self.event = threading.Event()
        #: An error that ended the loop side (the group's consume() failed).
        self.fatal: BaseException | None = None

    def put(self, item: _Feed | _Failure) -> None:
        """(Loop) Hand a feed with records, or a partition's error, to the callers."""
        self.items.append(item)
        self.event.set()

    def fail(self, error: BaseException) -> None:
        """(Loop) The loop side cannot go on: callers get ``error`` once the records run out."""
        if self.fatal is None:
            self.fatal = error
        self.event.set()

    async def feed(self, feed: _Feed) -> None:
        """(Loop) One partition's feeder: each decoded list (or batch) to the callers, in turn.

        Returns once the partition consumer is closed or the claim has ended.
        """
        source = feed.source
        async with open_service_nursery() as nursery:
            nursery.start_soon(self._forward_errors, feed)
            while True:
                feed.drained = trio.Event()
                if self.columnar:
                    try:
                        batch = await source.next_batch(columnar=True)
                    except ClosedError:
                        break
                    if not len(batch):  # a claim's, once it ended
                        break
                    feed.batch = batch
                elif not await source.decoded():
                    break
                self.put(feed)
                await feed.drained.wait()
            nursery.cancel_scope.cancel()

    async def _forward_errors(self, feed: _Feed) -> None:
        async for error in feed.source.errors():
            self.put(_Failure(feed, error))

    def pop(self) -> _Feed:
        """(Callers) The head feed is read out: off the queue, and its feeder woken."""
        feed = self.items.popleft()
        assert isinstance(feed, _Feed)
        feed.batch = None
        with suppress(ClosedError):
            self.portal.call_soon(feed.wake)
        return feed


def _check_offset(offset: object) -> int:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < OLDEST:
        raise ConfigError(
            f"not an offset: {offset!r} (use an offset, pykaf.OLDEST or pykaf.NEWEST)"
        )
    return offset


def _parse_assignment(partitions: Iterable[Any]) -> list[tuple[str, int, int | None]]:
    if isinstance(partitions, (str, bytes)):
        raise ConfigError(f"partitions must be a list of (topic, partition) tuples: {partitions!r}")
    wanted: list[tuple[str, int, int | None]] = []
    seen: set[TopicPartition] = set()
    for entry in partitions:
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
            raise ConfigError(f"not (topic, partition) or (topic, partition, offset): {entry!r}")
        topic, partition = entry[0], entry[1]
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"not a topic name: {topic!r}")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ConfigError(f"not a partition: {partition!r}")
        if (topic, partition) in seen:
            raise ConfigError(f"{topic}/{partition} is listed twice")
        seen.add((topic, partition))
        offset = _check_offset(entry[2]) if len(entry) == 3 else None
        wanted.append((topic, partition, offset))
    return wanted


class _Reader:
    """What the sync consumers share: handing out the ready cursors' records to callers."""

    #: Groups: remember how far each call handed records out (marked at the next call).
    _marking = False

    def __init__(self, columnar: bool = False) -> None:
        if not isinstance(columnar, bool):
            raise ConfigError(f"columnar must be True or False, not {columnar!r}")
        self._portal = get_portal()
        self._forks = _codec_py.forks
        self._columnar = columnar
        self._ready = _Ready(self._portal, columnar)
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        #: The take while no cursor is at the head: nothing, or refusing rows (columnar).
        self._idle: Callable[[], Record | None] = _refuse_rows if columnar else _nothing
        #: The head cursor's take: poll's whole per-record path; and its feed.
        self._take: Callable[[], Record | None] = self._idle
        self._current: _Feed | None = None
        #: A plain consumer's compiled poll(), whose cursor follows the head (see Consumer).
        self._cursor_take: LockedTake | None = None
        #: Groups: (feed, offset) handed out by the last call: done at the next one.
        self._handed: list[tuple[_Feed, int]] = []
        self._closed = False
        self._handle: ContextHandle[Any] | None = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    # -- handing records out (under _lock) --------------------------------------------

    def _mark_handed(self) -> None:
        """The caller is done with what it was handed so far (groups: committable)."""
        for feed, offset in self._handed:
            if offset > feed.done:
                feed.done = offset
        self._handed.clear()

    def _head(self, quiet: bool = False) -> _Feed | None:
        """The head feed, a partition's error raised first (left queued when ``quiet``)."""
        items = self._ready.items
        while items:
            item = items[0]
            if isinstance(item, _Feed):
                return item
            if quiet and item.feed.live:
                return None
            items.popleft()
            if item.feed.live:
                raise item.error
        return None

    def _pop(self) -> None:
        self._take = self._idle  # the loop may refill the cursor from now on
        if self._cursor_take is not None:
            self._cursor_take.cursor = None
        if self._marking:  # trailing control records: done once the list is
            feed = self._ready.items[0]
            assert isinstance(feed, _Feed)
            # Read before the feeder is woken: it may decode (columns: move) past it.
            self._handed.append((feed, feed.source.position))
        self._ready.pop()

    def _take_one(self) -> Record | None:
        """The next record, the head cursor's take kept for the next call; None if none waits."""
        while (feed := self._head()) is not None:
            record = feed.take()
            if record is not None:
                self._take, self._current = feed.take, feed
                if self._cursor_take is not None:
                    self._cursor_take.cursor = feed.source  # type: ignore[assignment]
                if self._marking:
                    self._handed.append((feed, record.offset + 1))
                return record
            self._pop()
        return None

    def _take_many(self, max_records: int) -> list[Record] | None:
        out: list[Record] = []
        while len(out) < max_records and (feed := self._head(quiet=bool(out))) is not None:
            records = feed.source.take_nowait(max_records - len(out))
            if not records:
                self._pop()
                continue
            out = out + records if out else records
            if self._marking:
                self._handed.append((feed, records[-1].offset + 1))
        return out or None

    def _take_columns(self) -> ColumnBatch | None:
        """The head batch of columns, whole (``columnar=True``); None when there is none."""
        while (feed := self._head()) is not None:
            batch = feed.batch
            self._pop()
            if batch is not None:  # else dropped by a seek or pause
                if self._marking:
                    self._handed.append((feed, batch.next_offset))
                return batch
        return None

    def _wait(self, deadline: float | None) -> bool:
        """Wait (without the lock) for the loop to hand something over; False past deadline."""
        if deadline is None:
            wait = _WAIT_SLICE
        else:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return False
            wait = min(wait, _WAIT_SLICE)
        portal = self._portal
        portal.check_caller()
        if portal.closed:
            raise ClosedError("the pykaf portal has shut down")
        self._ready.event.wait(wait)
        return True

    def _wait_for(
        self, take: Callable[[], _T | None], timeout: float | None, iterating: bool = False
    ) -> _T | None:
        """``take()``'s first answer that is not None, under the lock; None past ``timeout``.

        What every reading call shares: a closed consumer raises (an iteration
        ends), the caller's earlier records count as done (groups), and a
        fatal error comes once nothing is left to take.
        """
        if self._forks != _codec_py.forks:
            self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        ready = self._ready
        while True:
            with self._lock:
                if self._closed:
                    if iterating:
                        return None
                    raise ClosedError("the consumer is closed")
                if self._handed:
                    self._mark_handed()
                got = take()
                if got is not None:
                    return got
                if ready.fatal is not None:
                    raise ready.fatal
                ready.event.clear()
                if ready.items:
                    continue
            if not self._wait(deadline):
                return None

    # -- the public reading API ---------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Record | None:
        """The next record, waiting up to ``timeout`` seconds for one.

        Args:
            timeout: seconds to wait; None: until a record comes; 0: only what
                is already fetched.

        Returns:
            A :class:`pykaf.codec.Record` (``topic``, ``partition``, ``offset``,
            ``key``, ``value``, ``headers``, ``timestamp``, ``timestamp_type``),
            or None when ``timeout`` passed first.

        Raises:
            ClosedError: the consumer is closed (also when closed while waiting).
            ConsumerError: a partition's error (e.g. its offset is out of range
                and ``auto_offset_reset`` is ``"none"``); raised once, in the
                order it happened, and the next call goes on.
            KeyboardInterrupt: Ctrl-C while waiting in the main thread; nothing
                is lost (the records stay for the next call).
            KafkaError: groups only: a fatal group error (e.g.
                FencedInstanceIdError) once the records already fetched are out.
        """
        # The per-record path: one take from the head cursor, under the lock
        # (a group's marks first: ConsumerGroup's own). Else the general way.
        if self._forks == _codec_py.forks:
            with self._lock:
                record = self._take()
            if record is not None:
                return record
        return self._poll_general(timeout)

    def _poll_general(self, timeout: float | None) -> Record | None:
        """poll()'s general way: errors in their turn, the next partition, the wait."""
        if self._columnar:
            _refuse_rows()
        return self._wait_for(self._take_one, timeout)

    def consume(self, max_records: int = 500, timeout: float | None = None) -> list[Record]:
        """The records fetched so far, up to ``max_records``; waits only for the first.

        The bulk path: whole decoded lists are handed over at once.

        Args:
            max_records: the most records to return (>= 1).
            timeout: seconds to wait while nothing is fetched; None: until
                something is; 0: do not wait.

        Returns:
            Records in order per partition (partitions interleave by batch);
            an empty list when ``timeout`` passed first.

        Raises:
            ClosedError, ConsumerError, KeyboardInterrupt: as for :meth:`poll`.
        """
        if not isinstance(max_records, int) or isinstance(max_records, bool) or max_records < 1:
            raise ConfigError(f"max_records must be an integer >= 1, not {max_records!r}")
        if self._columnar:
            _refuse_rows()
        return self._wait_for(partial(self._take_many, max_records), timeout) or []

    def consume_columns(self, timeout: float | None = None) -> ColumnBatch | None:
        """The next fetched piece of one partition as columns (``columnar=True`` consumers).

        The loop decodes each fetched piece straight into a
        :class:`pykaf.ColumnBatch` (``next_batch(columnar=True)``: no
        ``Record`` per record) and hands it over whole; ``batch.topic`` and
        ``batch.partition`` say whose it is, ``batch.to_arrow()`` makes it a
        ``pyarrow.RecordBatch`` without a copy. In a group, a batch handed out
        counts as done (marked) once the caller asks for the next one or
        calls ``commit``, as records do.

        Args:
            timeout: seconds to wait while nothing is fetched; None: until
                something is; 0: do not wait.

        Returns:
            A non-empty ColumnBatch, or None when ``timeout`` passed first.

        Raises:
            ConfigError: the consumer was not opened with ``columnar=True``.
            ClosedError, ConsumerError, KeyboardInterrupt: as for :meth:`poll`.
        """
        if not self._columnar:
            raise ConfigError("consume_columns() needs a consumer opened with columnar=True")
        return self._wait_for(self._take_columns, timeout)

    def __iter__(self) -> Iterator[Record]:
        if self._columnar:
            _refuse_rows()
        return self

    def __next__(self) -> Record:
        """The next record, waiting as long as it takes; the iteration ends on close()."""
        if self._forks == _codec_py.forks:
            with self._lock:
                record = self._take()
            if record is not None:
                return record
        return self._next_waiting()

    def _next_waiting(self) -> Record:
        """The next record however long it takes (StopIteration once closed): the general way."""
        record = self._wait_for(self._take_one, None, iterating=True)
        if record is None:
            raise StopIteration
        return record

    # -- calls into the loop ------------------------------------------------------------

    def _run_sync(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the loop, under the lock, on an open consumer."""
        self._portal.check_caller()
        with self._lock:
            if self._closed:
                raise ClosedError("the consumer is closed")
            return self._portal.run_sync(fn, *args)

    def _close(self, exc: BaseException | None, timeout: float | None) -> None:
        self._portal.check_caller()
        with self._close_lock:
            with self._lock:
                if self._closed:
                    return
                if exc is None and self._handed:
                    self._mark_handed()
                self._closed = True
                self._take = self._idle
                if self._cursor_take is not None:
                    self._cursor_take.cursor = None
                self._ready.event.set()  # wake callers waiting in poll()
            assert self._handle is not None
            self._handle.exit(None, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop consuming and release the connections. Idempotent.

        Callers waiting in :meth:`poll` or :meth:`consume` get ClosedError, an
        iteration ends.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first (the consumer is then
                abandoned).
        """
        self._close(None, timeout)


class _LoopConsumer:
    """The loop's side of a sync :class:`Consumer`: a partition consumer and a feeder each."""

    def __init__(self, consumer: AsyncConsumer, nursery: trio.Nursery, ready: _Ready) -> None:
        self.consumer = consumer
        self.nursery = nursery
        self.ready = ready
        self.feeds: dict[TopicPartition, _Feed] = {}

    def _feed(self, topic: str, partition: int) -> _Feed:
        feed = self.feeds.get((topic, partition))
        if feed is None:
            raise ConfigError(f"{topic}/{partition} is not assigned")
        return feed

    def _pc(self, topic: str, partition: int) -> PartitionConsumer:
        source = self._feed(topic, partition).source
        assert isinstance(source, PartitionConsumer)
        return source

    async def assign(self, wanted: list[tuple[str, int, int | None]]) -> None:
        # Check every new partition first: a bad one changes nothing.
        for topic, partition, _ in wanted:
            if (topic, partition) not in self.feeds and partition not in (
                await self.consumer.partitions(topic)
            ):
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        keep = {(topic, partition) for topic, partition, _ in wanted}
        for tp in [tp for tp in self.feeds if tp not in keep]:
            await self._stop(self.feeds.pop(tp))
        for topic, partition, offset in wanted:
            if (topic, partition) in self.feeds:
                if offset is not None:
                    self.seek(topic, partition, offset)
                continue
            pc = await self.consumer.consume_partition(
                topic, partition, NEWEST if offset is None else offset
            )
            feed = _Feed(pc)
            self.feeds[(topic, partition)] = feed
            self.nursery.start_soon(self._run, feed, name=f"pykaf sync {topic}/{partition}")

    async def unassign(self) -> None:
        feeds, self.feeds = self.feeds, {}
        for feed in feeds.values():
            await self._stop(feed)

    async def _stop(self, feed: _Feed) -> None:
        feed.live = False
        feed.scope.cancel()
        assert isinstance(feed.source, PartitionConsumer)
        await feed.source.aclose()

    async def _run(self, feed: _Feed) -> None:
        try:
            with feed.scope:
                await self.ready.feed(feed)
        except Exception as exc:
            self.ready.fail(exc)

    # These run while the caller holds the consumer's lock: no record is taken meanwhile.

    def seek(self, topic: str, partition: int, offset: int) -> None:
        pc = self._pc(topic, partition)
        self.feeds[(topic, partition)].batch = None
        pc.seek(offset)

    def pause(self, topic: str, partition: int) -> None:
        feed = self._feed(topic, partition)
        pc = self._pc(topic, partition)
        if pc.paused:
            return
        position = feed.position()
        pc.pause()
        # Records fetched but not handed out yet are dropped, and fetched again
        # after resume(): nothing of a paused partition reaches the callers.
        if position >= 0:
            feed.batch = None
            pc.seek(position)

    def resume(self, topic: str, partition: int) -> None:
        self._pc(topic, partition).resume()

    def position(self, topic: str, partition: int) -> int:
        return self._feed(topic, partition).position()

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.feeds)

    def statistics(self) -> ConsumerStatistics:
        return _handed_out(self.consumer.statistics(), self.feeds)


@asynccontextmanager
async def _open_loop_consumer(
    servers: str | list[str], config: dict[str, Any], ready: _Ready
) -> AsyncIterator[_LoopConsumer]:
    async with open_consumer(servers, **config) as consumer, open_service_nursery() as nursery:
        loop = _LoopConsumer(consumer, nursery, ready)
        try:
            yield loop
        finally:
            for feed in loop.feeds.values():
                feed.live = False
            nursery.cancel_scope.cancel()


class Consumer(_Reader):
    """A blocking Kafka consumer of assigned partitions: :func:`pykaf.open_consumer` for threads.

    ::

        with pykaf.sync.Consumer("localhost:9092") as consumer:
            consumer.assign([("orders", 0, pykaf.OLDEST), ("orders", 1)])
            for record in consumer:
                print(record.partition, record.offset, record.value)

    Records of all assigned partitions come through one stream: in order
    within a partition, partitions interleaved batch by batch. The portal's
    loop decodes; the calling thread takes records straight from the core's
    partition consumers (their positions are the only ones), so reading costs
    no thread switch per record.

    Thread-safe: several threads may read one consumer; each record goes to
    one of them. No group, no commits: see :class:`ConsumerGroup` for that.

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        columnar: hand fetched pieces out as :class:`pykaf.ColumnBatch`
            columns through :meth:`consume_columns` (``poll``, ``consume`` and
            iteration then raise ConfigError).
        **config: options of :class:`pykaf.ConsumerConfig` (client options too),
            as for :func:`pykaf.open_consumer`: ``fetch_max_wait``,
            ``isolation_level``, ``auto_offset_reset``, ``partition_buffer``, ...

    Raises:
        ConfigError: an invalid option.
        KafkaConnectionError: no broker could be reached.
    """

    def __init__(
        self, bootstrap_servers: str | Sequence[str], *, columnar: bool = False, **config: Any
    ) -> None:
        super().__init__(columnar)
        loop, handle = self._portal.start_context(
            partial(_open_loop_consumer, bootstrap_argument(bootstrap_servers), config, self._ready)
        )
        self._loop: _LoopConsumer = loop
        self._handle = handle
        if not columnar:
            # poll() as documented above, compiled: the class's poll stays
            # the reference (and the pure-Python codec's LockedTake does it
            # the same way); this one has no Python frame per record.
            self._cursor_take = LockedTake(self._lock, self._poll_general)
            self.poll = self._cursor_take  # type: ignore[method-assign]

    def assign(self, partitions: Iterable[tuple[str, int] | tuple[str, int, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment).

        Args:
            partitions: ``(topic, partition)`` or ``(topic, partition, offset)``
                tuples; the offset is a number, ``pykaf.OLDEST`` or
                ``pykaf.NEWEST`` (the default: only records written from now
                on). A partition already assigned keeps its position unless an
                offset is given; one no longer listed stops, and its records
                not handed out yet are dropped.

        Raises:
            ConfigError: a malformed entry or offset.
            UnknownTopicOrPartitionError: no such topic or partition (nothing
                changes then).
            ClosedError: the consumer is closed.
        """
        wanted = _parse_assignment(partitions)
        self._portal.check_caller()
        with self._lock:
            if self._closed:
                raise ClosedError("the consumer is closed")
            self._portal.run(self._loop.assign, wanted)

    def unassign(self) -> None:
        """Stop consuming every partition."""
        self._portal.check_caller()
        with self._lock:
            if self._closed:
                raise ClosedError("the consumer is closed")
            self._portal.run(self._loop.unassign)

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions, as sorted ``(topic, partition)`` tuples."""
        result: list[TopicPartition] = self._run_sync(self._loop.assignment)
        return result

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Continue a partition from ``offset`` (a number, ``pykaf.OLDEST`` or ``pykaf.NEWEST``).

        Its records fetched but not handed out yet are dropped; the next one
        handed out is the one at ``offset``.

        Raises:
            ConfigError: not an offset, or the partition is not assigned.
        """
        _check_offset(offset)
        self._run_sync(self._loop.seek, topic, partition, offset)

    def pause(self, topic: str, partition: int) -> None:
        """Stop fetching a partition; none of its records is handed out until :meth:`resume`.

        Records already fetched are dropped and fetched again after resume,
        so the partition continues exactly where the caller stopped.

        Raises:
            ConfigError: the partition is not assigned.
        """
        self._run_sync(self._loop.pause, topic, partition)

    def resume(self, topic: str, partition: int) -> None:
        """Fetch a paused partition again.

        Raises:
            ConfigError: the partition is not assigned.
        """
        self._run_sync(self._loop.resume, topic, partition)

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record of a partition to be handed out (-1: not known yet).

        It moves past a record when the record is handed out (and past
        transaction markers once the records before them are).

        Raises:
            ConfigError: the partition is not assigned.
        """
        result: int = self._run_sync(self._loop.position, topic, partition)
        return result

    def statistics(self) -> ConsumerStatistics:
        """Positions (as handed out), high watermarks, lag and fetch counters."""
        result: ConsumerStatistics = self._run_sync(self._loop.statistics)
        return result

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the consumer."""
        self._close(exc, None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<pykaf.sync.Consumer {state}>"


class _LoopGroup:
    """The loop's side of a sync :class:`ConsumerGroup`: the handler feeding claims to callers."""

    def __init__(self, group: AsyncConsumerGroup, ready: _Ready) -> None:
        self.group = group
        self.ready = ready
        self.feeds: dict[TopicPartition, _Feed] = {}

    async def run(self) -> None:
        try:
            await self.group.consume(self)
        except Exception as exc:
            self.ready.fail(exc)

    async def sync_marks(self) -> None:
        """Bring the callers' marks into the group's offsets, for auto-commit."""
        interval = max(0.05, min(self.group.config.auto_commit_interval / 2, 1.0))
        while True:
            await trio.sleep(interval)
            self.apply_marks()

    def apply_marks(self) -> None:
        for feed in list(self.feeds.values()):
            claim, session = feed.source, feed.session
            assert isinstance(claim, Claim)
            if feed.done < 0 or not feed.live or session is None or claim.revoked:
                continue
            session.mark_offset(claim.topic, claim.partition, feed.done)

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        if offsets is None:
            self.apply_marks()
        await self.group.commit(offsets)

    # -- the handler (sarama's contract) ---------------------------------------------

    async def setup(self, session: GroupSession) -> None:
        return None

    async def cleanup(self, session: GroupSession) -> None:
        return None

    async def consume_claim(self, session: GroupSession, claim: Claim) -> None:
        claim.cancel_on_end = True  # waiting for the callers must not hold up a rebalance
        tp = (claim.topic, claim.partition)
        feed = _Feed(claim, session)
        self.feeds[tp] = feed
        try:
            await self.ready.feed(feed)
        finally:
            feed.live = False
            if self.feeds.get(tp) is feed:
                del self.feeds[tp]
            if feed.done >= 0:
                # The claim ended (revoked, or the group is closing): the commit
                # that follows covers what the caller was done with. (The claim
                # is revoked already, so the group's own _mark would ignore it.)
                self.group.offsets.mark(
                    claim.topic,
                    claim.partition,
                    feed.done,
                    leader_epoch=claim.epoch_before(feed.done),
                )

    def mark(self, topic: str, partition: int, offset: int) -> None:
        """The caller is done before ``offset`` (``ConsumerGroup.mark``)."""
        feed = self.feeds.get((topic, partition))
        if feed is None or not feed.live:
            raise ConfigError(f"{topic}/{partition} is not assigned to this member")
        if offset > feed.done:
            feed.done = offset

    def statistics(self) -> GroupStatistics:
        return _handed_out(self.group.statistics(), self.feeds)


@asynccontextmanager
async def _open_loop_group(
    servers: str | list[str],
    group_id: str,
    topics: Sequence[str],
    config: dict[str, Any],
    ready: _Ready,
) -> AsyncIterator[_LoopGroup]:
    async with open_consumer_group(servers, group_id, topics, **config) as group:
        loop = _LoopGroup(group, ready)
        async with open_service_nursery() as nursery:
            nursery.start_soon(loop.run)
            nursery.start_soon(loop.sync_marks)
            try:
                yield loop
            finally:
                # Ends every claim (their marks join the final commit), commits, leaves.
                await group.aclose()
                nursery.cancel_scope.cancel()


class ConsumerGroup(_Reader):
    """A blocking consumer group member: :func:`pykaf.open_consumer_group` for threads.

    ::

        with pykaf.sync.ConsumerGroup("localhost:9092", "billing", ["orders"]) as group:
            for record in group:
                bill(record)

    The group assigns this member partitions of ``topics`` and rebalances as
    members come and go; records of the assigned partitions come through one
    stream, as with :class:`Consumer`. Where the group has no committed
    offset, consumption starts as ``auto_offset_reset`` says ("earliest" by
    default).

    At-least-once: a record handed out counts as done once the caller asks
    for the next record (``poll``, ``consume``, the next iteration) or calls
    :meth:`commit`; the group commits what is done every
    ``auto_commit_interval``, whenever partitions are revoked, and on close.
    A record handed out but not done yet is delivered again (here or to the
    next owner of its partition) after a rebalance or a crash. With
    ``auto_commit=False`` only :meth:`commit` commits (or a transaction:
    ``producer.send_offsets_to_transaction(offsets, group.group_metadata())``).

    With ``auto_mark=False`` nothing counts as done until the caller says so
    with :meth:`mark` (librdkafka's ``enable.auto.offset.store=false`` and
    ``store_offsets``): auto-commits, :meth:`commit`, revokes and close then
    commit the marked offsets only.

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        group_id: the group to join.
        topics: the topics to consume.
        auto_mark: mark records done as they are handed out (the default);
            False: only :meth:`mark` marks.
        columnar: hand fetched pieces out as :class:`pykaf.ColumnBatch`
            columns through :meth:`consume_columns` (``poll``, ``consume`` and
            iteration then raise ConfigError).
        **config: options of :class:`pykaf.GroupConfig` (consumer and client
            options too): ``assignors``, ``session_timeout``,
            ``heartbeat_interval``, ``auto_commit``, ``auto_commit_interval``,
            ``group_instance_id``, ...

    Raises:
        ConfigError: an invalid option, an empty group id or topic list.
        KafkaConnectionError: no broker could be reached.
    """

    _marking = True

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        topics: Sequence[str],
        *,
        auto_mark: bool = True,
        columnar: bool = False,
        **config: Any,
    ) -> None:
        super().__init__(columnar)
        #: Whether records are marked done as they are handed out (else only :meth:`mark`).
        self.auto_mark = auto_mark
        self._marking = auto_mark
        # a str is refused by open_consumer_group; a re.Pattern is a regex subscription
        topic_list: Any = topics if isinstance(topics, (str, re.Pattern)) else list(topics)
        loop, handle = self._portal.start_context(
            partial(
                _open_loop_group,
                bootstrap_argument(bootstrap_servers),
                group_id,
                topic_list,
                config,
                self._ready,
            )
        )
        self._loop: _LoopGroup = loop
        self._handle = handle
        self.group_id = group_id

    # The per-record path of a member: marks what the last call handed out
    # (with auto_mark) and takes from the head cursor, under the lock.

    def _take_marking(self) -> Record | None:
        with self._lock:
            handed = self._handed
            if handed and not self._closed:  # _mark_handed, inline: once a record
                for feed, offset in handed:
                    if offset > feed.done:
                        feed.done = offset
                handed.clear()
            record = self._take()
            if record is not None and self._marking:
                assert self._current is not None
                handed.append((self._current, record.offset + 1))
            return record

    def poll(self, timeout: float | None = None) -> Record | None:
        """The next record, waiting up to ``timeout`` seconds for one (see :meth:`Consumer.poll`).

        Asking for it makes the records handed out before count as done
        (with ``auto_mark``).
        """
        if self._columnar:
            _refuse_rows()
        if self._forks == _codec_py.forks and (record := self._take_marking()) is not None:
            return record
        return self._wait_for(self._take_one, timeout)

    def __next__(self) -> Record:
        """The next record, waiting as long as it takes; the iteration ends on close()."""
        if self._columnar:
            _refuse_rows()
        if self._forks == _codec_py.forks and (record := self._take_marking()) is not None:
            return record
        return self._next_waiting()

    def commit(
        self,
        timeout: float | None = None,
        *,
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Commit every record handed out so far, and wait until the coordinator has it.

        Marks all records handed out as done (the last one included), then
        commits; without a commit, they are committed on the next
        auto-commit, revoke or close anyway. With ``auto_mark=False`` it
        commits what :meth:`mark` marked, and nothing else.

        With ``offsets`` (the next offset to consume by ``(topic,
        partition)``, as confluent-kafka's ``commit(offsets=)``), it commits
        exactly those and nothing else: the marks stay as they are, and the
        next commit without ``offsets`` commits them.

        Raises:
            CommitError: the coordinator refused some partitions.
            RebalanceInProgressError: ``offsets`` given while the member is
                joining or rebalancing (FencedMemberEpochError while fenced,
                with ``group_protocol="consumer"``); nothing was committed.
            KafkaTimeoutError: ``timeout`` passed first.
            ClosedError: the group is closed.
        """
        self._portal.check_caller()
        with self._lock:
            if self._closed:
                raise ClosedError("the consumer group is closed")
            if offsets is None:
                self._mark_handed()
        chosen = None if offsets is None else dict(offsets)
        self._portal.run(partial(self._loop.commit, chosen), timeout=timeout)

    def mark(self, topic: str, partition: int, offset: int) -> None:
        """Mark ``offset`` as the next offset to consume of an assigned partition.

        What the next commit (auto-commit, :meth:`commit`, a revoke, close)
        commits for it: the caller is done with the records before
        ``offset``. Marks only move forward (a lower one is ignored), and
        count while the partition stays assigned to this member. Needed with
        ``auto_mark=False``; with auto marking, handing records out marks too.

        Raises:
            ConfigError: the partition is not assigned to this member.
            ClosedError: the group is closed.
        """
        self._portal.check_caller()

        self._run_sync(self._loop.mark, topic, partition, offset)

    def assignment(self) -> dict[str, list[int]]:
        """The partitions this member consumes now: topic -> sorted partitions."""
        result: dict[str, list[int]] = self._run_sync(self._loop.group.assignment)
        return result

    def group_metadata(self) -> GroupMetadata:
        """The member and its generation, for ``send_offsets_to_transaction``."""
        result: GroupMetadata = self._run_sync(self._loop.group.group_metadata)
        return result

    def statistics(self) -> GroupStatistics:
        """Generation, commits, and per partition: position (as handed out), committed, lag."""
        result: GroupStatistics = self._run_sync(self._loop.statistics)
        return result

    def close(self, timeout: float | None = None) -> None:
        """Commit every record handed out so far, leave the group and close. Idempotent.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first (the member is then
                abandoned; the coordinator drops it after ``session_timeout``).
        """
        self._close(None, timeout)

    def __enter__(self) -> ConsumerGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close; after an exception the last records handed out are not committed.

        Left normally, the block commits everything handed out (as
        :meth:`close`; not with ``auto_commit=False``). Left by an exception
        (Ctrl-C included), the records of the last call are taken as not done:
        they are delivered again later.
        """
        self._close(exc, None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<pykaf.sync.ConsumerGroup {self.group_id!r} {state}>"
