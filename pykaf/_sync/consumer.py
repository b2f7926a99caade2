"""``pykaf.sync.Consumer`` and ``pykaf.sync.ConsumerGroup``: batches handed across threads."""

from __future__ import annotations

import dataclasses
import os
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

from pykaf._cluster.client import NEWEST, OLDEST
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._column_batch import ColumnBatch
from pykaf._config import bootstrap_argument
from pykaf._consumer.consumer import Consumer as AsyncConsumer
from pykaf._consumer.consumer import ConsumerStatistics, open_consumer
from pykaf._consumer.partition import PartitionConsumer
from pykaf._group.group import ConsumerGroup as AsyncConsumerGroup
from pykaf._group.group import GroupStatistics
from pykaf._group.opener import open_consumer_group
from pykaf._group.session import Claim, GroupSession
from pykaf._sync.portal import ContextHandle, Portal, get_portal
from pykaf._util import open_service_nursery
from pykaf.codec import Record
from pykaf.errors import (
    ClosedError,
    ConfigError,
    UnknownTopicOrPartitionError,
)

__all__ = ["Consumer", "ConsumerGroup"]

# -- consumers ------------------------------------------------------------------
#
# The loop forwards each partition consumer's fetched batches, as whole lists,
# into an _Inbox (a deque plus a threading.Event); callers take records out of
# the head batch under the consumer's lock. Crossing the thread boundary costs
# one deque append and one event per batch, never anything per record.

#: Fetched batches the loop holds ready for a sync consumer's callers. Past
#: that, the loop stops taking batches from its partition consumers, which stop
#: fetching once their own buffers (``partition_buffer``) are full.
_INBOX_BATCHES = 16

#: How long a waiting caller sleeps between checks for Ctrl-C and a dead loop.
_WAIT_SLICE = 0.1

#: Bumped in the child at every ``os.fork()``: a cheap way for the per-record
#: path to notice that it runs in another process than its consumer's portal.
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)

TopicPartition = tuple[str, int]


_Stats = TypeVar("_Stats", ConsumerStatistics, GroupStatistics)
_T = TypeVar("_T")


def _as_handed_out(stats: _Stats, parts: dict[TopicPartition, _Part]) -> _Stats:
    """``stats`` with positions and lag as the callers were handed records, not as fetched."""
    partitions = []
    for ps in stats.partitions:
        part = parts.get((ps.topic, ps.partition))
        if part is not None and part.position >= 0:
            hwm = ps.high_water_mark
            lag = max(0, hwm - part.position) if hwm >= 0 else 0
            ps = dataclasses.replace(ps, position=part.position, lag=lag)
        partitions.append(ps)
    return dataclasses.replace(stats, partitions=partitions)


class _Part:
    """One assigned partition (or one group claim), as both threads see it.

    The loop writes ``epoch`` and ``live``; callers, under their consumer's
    lock, write ``position`` and ``marked`` as they hand records out. These are
    plain int and bool attributes, so neither side needs the other's lock.
    """

    __slots__ = (
        "claim",
        "epoch",
        "live",
        "marked",
        "partition",
        "paused",
        "pc",
        "position",
        "scope",
        "session",
        "topic",
    )

    def __init__(self, topic: str, partition: int, position: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        #: Bumped in the loop by seek and pause: batches of an older epoch are dropped.
        self.epoch = 0
        #: False once the partition is unassigned or its claim has ended.
        self.live = True
        #: The offset of the next record to hand out (-1: not known yet).
        self.position = position
        #: Groups: the offset up to which the caller is done with records (-1: none).
        self.marked = -1
        self.paused = False
        self.pc: PartitionConsumer | None = None
        self.claim: Claim | None = None
        self.session: GroupSession | None = None
        self.scope = trio.CancelScope()


class _Fetched:
    """The records of one fetch of one partition, on their way to the callers.

    ``records`` is a list of records, or a :class:`ColumnBatch` for a
    consumer opened with ``columnar=True`` (handed out whole).
    """

    __slots__ = ("end", "epoch", "part", "records")

    def __init__(
        self, part: _Part, epoch: int, records: list[Record] | ColumnBatch, end: int
    ) -> None:
        self.part = part
        self.epoch = epoch
        self.records = records
        self.end = end  # the partition's position once all of them are handed out


class _Failure:
    """A partition's error (a ConsumerError), raised to the caller in its turn."""

    __slots__ = ("error", "part")

    def __init__(self, part: _Part, error: BaseException) -> None:
        self.part = part
        self.error = error


class _Inbox:
    """Batches ready for the callers: filled in the loop, emptied by plain threads.

    ``put`` (loop) appends a whole batch and sets ``ready``; while ``limit``
    batches wait it waits itself, until a caller that took batches wakes it
    with one ``call_soon``. Callers read ``items`` and ``pop`` only under
    their consumer's lock.
    """

    def __init__(self, portal: Portal, limit: int, columnar: bool = False) -> None:
        self.portal = portal
        self.items: deque[_Fetched | _Failure] = deque()
        self.limit = limit
        #: The loop fetches columns (``next_batch(columnar=True)``) instead of records.
        self.columnar = columnar
        self.ready = threading.Event()
        self.waiting = False
        #: An error that ended the loop side (the group's consume() failed).
        self.fatal: BaseException | None = None
        self._space = trio.Event()

    # -- the loop's side -----------------------------------------------------------

    async def put(self, batch: _Fetched) -> None:
        """Hand a batch to the callers, once fewer than ``limit`` wait."""
        items = self.items
        while len(items) >= self.limit:
            self.waiting = True
            if len(items) >= self.limit:  # a caller may have taken some meanwhile
                await self._space.wait()
        items.append(batch)
        self.ready.set()

    def put_failure(self, failure: _Failure) -> None:
        """Queue a partition's error behind the records fetched before it."""
        self.items.append(failure)
        self.ready.set()

    def fail(self, error: BaseException) -> None:
        """The loop side cannot go on: callers get ``error`` once the records run out."""
        if self.fatal is None:
            self.fatal = error
        self.ready.set()

    def _wake(self) -> None:
        space, self._space = self._space, trio.Event()
        space.set()

    # -- the callers' side -----------------------------------------------------------

    def pop(self) -> None:
        """Drop the head item; wake the loop when it waits for room."""
        items = self.items
        items.popleft()
        if self.waiting and len(items) <= self.limit // 2:
            self.waiting = False
            with suppress(ClosedError):
                self.portal.call_soon(self._wake)


def _first_offset(records: list[Record] | ColumnBatch) -> int:
    """The offset of the first record of a non-empty fetched piece."""
    if isinstance(records, ColumnBatch):
        return int(records.offsets[0])
    return records[0].offset


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
    """What the sync consumers share: handing out the inbox's records to callers."""

    #: Groups: remember which partitions the last call handed records of (to mark).
    _track_marks = False

    def __init__(self, columnar: bool = False) -> None:
        if not isinstance(columnar, bool):
            raise ConfigError(f"columnar must be True or False, not {columnar!r}")
        self._portal = get_portal()
        self._forks = _forks
        self._columnar = columnar
        self._inbox = _Inbox(self._portal, _INBOX_BATCHES, columnar)
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._head = 0  # records of the head batch already handed out
        self._handed: list[_Part] = []
        self._closed = False
        self._handle: ContextHandle[Any] | None = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    # -- handing records out (under _lock) --------------------------------------------

    def _mark_handed(self) -> None:
        """The caller is done with what it was handed so far (groups: committable)."""
        for part in self._handed:
            part.marked = part.position
        self._handed.clear()

    def _take_one(self) -> Record | None:
        inbox = self._inbox
        items = inbox.items
        while items:
            item = items[0]
            if isinstance(item, _Failure):
                inbox.pop()
                if item.part.live:
                    raise item.error
                continue
            part = item.part
            if item.epoch != part.epoch or not part.live:  # seeked, paused or unassigned since
                self._head = 0
                inbox.pop()
                continue
            records: list[Record] = item.records  # type: ignore[assignment]  # rows: a list
            i = self._head
            record = records[i]
            i += 1
            if i < len(records):
                self._head = i
                part.position = record.offset + 1
            else:
                self._head = 0
                part.position = item.end
                inbox.pop()
            if self._track_marks:
                self._handed.append(part)
            return record
        return None

    def _take_many(self, max_records: int) -> list[Record]:
        inbox = self._inbox
        items = inbox.items
        out: list[Record] = []
        while items and len(out) < max_records:
            item = items[0]
            if isinstance(item, _Failure):
                if out:
                    break  # these records first, the error on the next call
                inbox.pop()
                if item.part.live:
                    raise item.error
                continue
            part = item.part
            if item.epoch != part.epoch or not part.live:
                self._head = 0
                inbox.pop()
                continue
            records: list[Record] = item.records  # type: ignore[assignment]  # rows: a list
            i = self._head
            n = len(records)
            j = min(n, i + max_records - len(out))
            if not out and i == 0 and j == n:
                out = records  # the batch's own list: nobody else holds it
            else:
                out += records[i:j]
            if j < n:
                self._head = j
                part.position = records[j - 1].offset + 1
            else:
                self._head = 0
                part.position = item.end
                inbox.pop()
            if self._track_marks:
                self._handed.append(part)
        return out

    def _take_columns(self) -> ColumnBatch | None:
        """The head batch of columns, whole (``columnar=True``); None when there is none."""
        inbox = self._inbox
        items = inbox.items
        while items:
            item = items[0]
            inbox.pop()
            if isinstance(item, _Failure):
                if item.part.live:
                    raise item.error
                continue
            part = item.part
            if item.epoch != part.epoch or not part.live:  # seeked, paused or unassigned since
                continue
            part.position = item.end
            if self._track_marks:
                self._handed.append(part)
            assert isinstance(item.records, ColumnBatch)
            return item.records
        return None

    def _refuse_rows(self) -> None:
        raise ConfigError("this consumer hands out columns (columnar=True): use consume_columns()")

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
        self._inbox.ready.wait(wait)
        return True

    def _wait_for(self, take: Callable[[], _T | None], deadline: float | None) -> _T | None:
        """``take()``'s first answer that is not None, under the lock; None past ``deadline``.

        What ``consume`` and ``consume_columns`` share: a closed consumer
        raises, the caller's earlier records count as done (groups), and a
        fatal error comes once nothing is left to take.
        """
        inbox = self._inbox
        while True:
            with self._lock:
                if self._closed:
                    raise ClosedError("the consumer is closed")
                if self._handed:
                    self._mark_handed()
                got = take()
                if got is not None:
                    return got
                if inbox.fatal is not None:
                    raise inbox.fatal
                inbox.ready.clear()
                if inbox.items:
                    continue
            if not self._wait(deadline):
                return None

    def _get_one(self, deadline: float | None, iterating: bool) -> Record | None:
        # The per-record path (poll, iteration): _wait_for's loop, inline, one
        # call less per record (calling _wait_for(self._take_one, ...) instead
        # measured 704-734 ns against 644-688 ns per poll() on the fake
        # cluster), and an iteration ends quietly on close().
        inbox = self._inbox
        while True:
            with self._lock:
                if self._closed:
                    if iterating:
                        return None
                    raise ClosedError("the consumer is closed")
                if self._handed:
                    self._mark_handed()
                record = self._take_one()
                if record is not None:
                    return record
                if inbox.fatal is not None:
                    raise inbox.fatal
                inbox.ready.clear()
                if inbox.items:
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
        if self._columnar:
            self._refuse_rows()
        if self._forks != _forks:
            self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._get_one(deadline, False)

    def consume(self, max_records: int = 500, timeout: float | None = None) -> list[Record]:
        """The records fetched so far, up to ``max_records``; waits only for the first.

        The bulk path: whole fetched batches are handed over at once.

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
            self._refuse_rows()
        if self._forks != _forks:
            self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._wait_for(lambda: self._take_many(max_records) or None, deadline) or []

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
        if self._forks != _forks:
            self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._wait_for(self._take_columns, deadline)

    def __iter__(self) -> Iterator[Record]:
        if self._columnar:
            self._refuse_rows()
        return self

    def __next__(self) -> Record:
        """The next record, waiting as long as it takes; the iteration ends on close()."""
        if self._columnar:
            self._refuse_rows()
        if self._forks != _forks:
            self._portal.check_caller()
        record = self._get_one(None, True)
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
                self._inbox.ready.set()  # wake callers waiting in poll()
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
    """The loop's side of a sync :class:`Consumer`: forwards partition consumers' batches."""

    def __init__(self, consumer: AsyncConsumer, nursery: trio.Nursery, inbox: _Inbox) -> None:
        self.consumer = consumer
        self.nursery = nursery
        self.inbox = inbox
        self.parts: dict[TopicPartition, _Part] = {}

    def _part(self, topic: str, partition: int) -> _Part:
        part = self.parts.get((topic, partition))
        if part is None:
            raise ConfigError(f"{topic}/{partition} is not assigned")
        return part

    async def assign(self, wanted: list[tuple[str, int, int | None]]) -> None:
        # Check every new partition first: a bad one changes nothing.
        for topic, partition, _ in wanted:
            if (topic, partition) not in self.parts and partition not in (
                await self.consumer.partitions(topic)
            ):
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        keep = {(topic, partition) for topic, partition, _ in wanted}
        for tp in [tp for tp in self.parts if tp not in keep]:
            await self._stop(self.parts.pop(tp))
        for topic, partition, offset in wanted:
            if (topic, partition) in self.parts:
                if offset is not None:
                    self.seek(topic, partition, offset)
                continue
            start = NEWEST if offset is None else offset
            pc = await self.consumer.consume_partition(topic, partition, start)
            part = _Part(topic, partition, start if start >= 0 else -1)
            part.pc = pc
            self.parts[(topic, partition)] = part
            self.nursery.start_soon(self._run_part, part, name=f"pykaf sync {topic}/{partition}")

    async def unassign(self) -> None:
        parts, self.parts = self.parts, {}
        for part in parts.values():
            await self._stop(part)

    async def _stop(self, part: _Part) -> None:
        part.live = False
        part.scope.cancel()
        assert part.pc is not None
        await part.pc.aclose()

    async def _run_part(self, part: _Part) -> None:
        try:
            with part.scope:
                async with open_service_nursery() as nursery:
                    nursery.start_soon(self._forward_errors, part)
                    await self._forward(part)
                    nursery.cancel_scope.cancel()
        except Exception as exc:
            self.inbox.fail(exc)

    async def _forward(self, part: _Part) -> None:
        pc = part.pc
        assert pc is not None
        put = self.inbox.put
        columnar = self.inbox.columnar
        while True:
            try:
                records = await pc.next_batch(columnar=columnar)
            except ClosedError:
                return
            if not records:
                continue
            if part.position < 0:
                part.position = _first_offset(records)
            # Tagged with the epoch now: a seek while it waits for room makes it stale.
            await put(_Fetched(part, part.epoch, records, pc.position))

    async def _forward_errors(self, part: _Part) -> None:
        assert part.pc is not None
        async for error in part.pc.errors():
            self.inbox.put_failure(_Failure(part, error))

    def seek(self, topic: str, partition: int, offset: int) -> None:
        part = self._part(topic, partition)
        assert part.pc is not None
        part.epoch += 1
        part.position = offset if offset >= 0 else -1
        part.pc.seek(offset)

    def pause(self, topic: str, partition: int) -> None:
        part = self._part(topic, partition)
        pc = part.pc
        assert pc is not None
        if part.paused:
            return
        part.paused = True
        pc.pause()
        # Records fetched but not handed out yet are dropped, and fetched again
        # after resume(): nothing of a paused partition reaches the callers.
        position = part.position if part.position >= 0 else pc.position
        if position >= 0:
            part.epoch += 1
            part.position = position
            pc.seek(position)

    def resume(self, topic: str, partition: int) -> None:
        part = self._part(topic, partition)
        assert part.pc is not None
        part.paused = False
        part.pc.resume()

    def position(self, topic: str, partition: int) -> int:
        part = self._part(topic, partition)
        assert part.pc is not None
        return part.position if part.position >= 0 else part.pc.position

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.parts)

    def statistics(self) -> ConsumerStatistics:
        return _as_handed_out(self.consumer.statistics(), self.parts)


@asynccontextmanager
async def _open_loop_consumer(
    servers: str | list[str], config: dict[str, Any], inbox: _Inbox
) -> AsyncIterator[_LoopConsumer]:
    async with open_consumer(servers, **config) as consumer, open_service_nursery() as nursery:
        loop = _LoopConsumer(consumer, nursery, inbox)
        try:
            yield loop
        finally:
            for part in loop.parts.values():
                part.live = False
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
    loop forwards whole fetched batches; the calling thread hands records out
    of them, so reading costs no thread switch per record.

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
            partial(_open_loop_consumer, bootstrap_argument(bootstrap_servers), config, self._inbox)
        )
        self._loop: _LoopConsumer = loop
        self._handle = handle

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
    """The loop's side of a sync :class:`ConsumerGroup`: the handler forwarding claims."""

    def __init__(self, group: AsyncConsumerGroup, inbox: _Inbox) -> None:
        self.group = group
        self.inbox = inbox
        self.parts: dict[TopicPartition, _Part] = {}

    async def run(self) -> None:
        try:
            await self.group.consume(self)
        except Exception as exc:
            self.inbox.fail(exc)

    async def sync_marks(self) -> None:
        """Bring the callers' marks into the group's offsets, for auto-commit."""
        interval = max(0.05, min(self.group.config.auto_commit_interval / 2, 1.0))
        while True:
            await trio.sleep(interval)
            self.apply_marks()

    def apply_marks(self) -> None:
        for part in list(self.parts.values()):
            claim, session = part.claim, part.session
            if part.marked < 0 or not part.live or claim is None or session is None:
                continue
            if not claim.revoked:
                session.mark_offset(part.topic, part.partition, part.marked)

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
        part = _Part(claim.topic, claim.partition)
        part.claim, part.session = claim, session
        self.parts[tp] = part
        put = self.inbox.put
        try:
            async with open_service_nursery() as nursery:
                nursery.start_soon(self._forward_errors, part, claim)
                columnar = self.inbox.columnar
                while True:
                    records = await claim.next_batch(columnar=columnar)
                    if not records:
                        break
                    if part.position < 0:
                        part.position = _first_offset(records)
                    await put(_Fetched(part, 0, records, claim.position))
                nursery.cancel_scope.cancel()
        finally:
            part.live = False
            if self.parts.get(tp) is part:
                del self.parts[tp]
            if part.marked >= 0:
                # The claim ended (revoked, or the group is closing): the commit
                # that follows covers what the caller was done with. (The claim
                # is revoked already, so the group's own _mark would ignore it.)
                self.group.offsets.mark(
                    part.topic,
                    part.partition,
                    part.marked,
                    leader_epoch=claim.epoch_before(part.marked),
                )

    async def _forward_errors(self, part: _Part, claim: Claim) -> None:
        async for error in claim.errors():
            self.inbox.put_failure(_Failure(part, error))

    def statistics(self) -> GroupStatistics:
        return _as_handed_out(self.group.statistics(), self.parts)


@asynccontextmanager
async def _open_loop_group(
    servers: str | list[str],
    group_id: str,
    topics: Sequence[str],
    config: dict[str, Any],
    inbox: _Inbox,
) -> AsyncIterator[_LoopGroup]:
    async with open_consumer_group(servers, group_id, topics, **config) as group:
        loop = _LoopGroup(group, inbox)
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

    _track_marks = True

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
        self._track_marks = auto_mark
        # a str is refused by open_consumer_group; a re.Pattern is a regex subscription
        topic_list: Any = topics if isinstance(topics, (str, re.Pattern)) else list(topics)
        loop, handle = self._portal.start_context(
            partial(
                _open_loop_group,
                bootstrap_argument(bootstrap_servers),
                group_id,
                topic_list,
                config,
                self._inbox,
            )
        )
        self._loop: _LoopGroup = loop
        self._handle = handle
        self.group_id = group_id

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

        def store() -> None:
            part = self._loop.parts.get((topic, partition))
            if part is None or not part.live:
                raise ConfigError(f"{topic}/{partition} is not assigned to this member")
            if offset > part.marked:
                part.marked = offset

        self._run_sync(store)

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
