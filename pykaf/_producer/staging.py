"""``send_nowait``'s staging: plain records join runs, handed to the accumulator in bulk.

A plain record (a bytes value of at most ``SMALL`` bytes and within
``max_message_bytes``, no key, no headers, an int timestamp or none, a valid
partition or, with the default sticky partitioner, none, of a topic whose
partitions are known) is appended to the open run of records for its topic
and partition by :class:`pykaf.codec.RecordStager`, compiled, with no Python
frame. Runs are appended to their partitions' batches by the column path
(``BatchBuilder.extend``, a range of records per call) when the producer's
loop next runs a scheduled callback, that is, at the caller's next
checkpoint, or before anything else touches the buffer: every other way of
appending, ``flush``, ``purge`` and the statistics drain the runs first, so
records keep their order and the counts are exact.

Records for a topic whose partitions are not known yet (its lookup is
started by the first of them) are staged the same way, keys too (a bytes key
of at most ``SMALL`` bytes, with the default partitioner or an explicit
partition): a drain then *parks* their run on the topic (``TopicState.pending``,
after the records parked before it, in order) as a :class:`ParkedRun`, counted
in the buffer for its exact bytes. Once the partitions are known the topic
task replays the run through the column path: the partitioner applied then
(keyed records grouped by partition, each partition's in their order), or
the run fails as a whole with the lookup's error, each record's delivery
report told.

The buffer's limits hold exactly: a run that opens reserves room in the
buffer for up to ``CHUNK`` records at ``SMALL`` bytes each (what the other
paths then see as taken), and the compiled path stages no more records than
reserved; a drain gives the reservation back and counts the records
themselves. A plain record that finds no room left after a drain, and any
other record, takes ``send_nowait``'s own path (after the runs), which
raises ``BufferFullError`` on a full buffer as before. A record without its
own timestamp is stamped when its run is drained.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from itertools import repeat
from typing import Any, Protocol

import trio

from pykaf import errors
from pykaf._producer.accumulator import RECORD_OVERHEAD, Accumulator
from pykaf._producer.delivery import OnDelivery, Reports
from pykaf._producer.partitioner import Murmur2Partitioner
from pykaf._producer.records import BatchDelivery, RecordMetadata
from pykaf._producer.state import TopicState
from pykaf.codec import RecordStager, StagerLock

log = logging.getLogger("pykaf.producer")

#: Records a run reserves room for at a time (the compiled path stages that many).
CHUNK = 4096
#: Records a loop's run reserves at a time while requests it wrote are pending:
#: the loop's own call then reads their answers and writes on (``pump``) this
#: often, so a loop without checkpoints keeps the broker busy.
PUMP_CHUNK = 1024
#: The largest value staged (bytes); larger ones take ``send_nowait``'s own path.
SMALL = 2048
#: The buffer bytes one staged record reserves: the most it can count for.
PER_RECORD = SMALL + RECORD_OVERHEAD
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

SendNowait = Callable[..., None]
OnSettle = Callable[[int, int, int, int, int, BaseException | None], None]
#: Makes a RecordMetadata from a tuple without the named tuple's Python ``__new__``.
_new_metadata = tuple.__new__


class _Run:
    """Staged records for one topic and partition, in order (keyed or not)."""

    __slots__ = ("callbacks", "futures", "keys", "mark", "partition", "stamps", "topic", "values")

    def __init__(
        self,
        topic: TopicState | str,
        partition: int | None,
        values: list[bytes],
        keys: list[bytes] | None,
        stamps: list[int] | None,
        callbacks: list[OnDelivery] | None,
        mark: int,
        futures: bool = False,
    ) -> None:
        #: Its topic's state; its name when staged from another thread (the
        #: state is looked up by the drain, in the loop).
        self.topic = topic
        self.partition = partition
        self.values = values
        self.keys = keys
        self.stamps = stamps
        self.callbacks = callbacks
        #: The stager's ``joined_bytes`` when the run opened: its records'
        #: values and keys are the bytes from there to the next run's mark.
        self.mark = mark
        #: The callbacks are ``pykaf.sync`` futures (``send_async`` records).
        self.futures = futures


class _Loose:
    """A record staged from another thread that no run takes, in its place in the order.

    The drain replays it through the producer's own ``send_nowait``;
    ``extra`` is the buffer room it reserved beyond ``PER_RECORD``.
    """

    __slots__ = (
        "extra",
        "headers",
        "key",
        "mark",
        "on_delivery",
        "partition",
        "timestamp",
        "topic",
        "value",
    )

    def __init__(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: Any,
        headers: Any,
        timestamp: Any,
        on_delivery: OnDelivery | None,
        extra: int,
        mark: int,
    ) -> None:
        self.topic = topic
        self.value = value
        self.key = key
        self.partition = partition
        self.headers = headers
        self.timestamp = timestamp
        self.on_delivery = on_delivery
        self.extra = extra
        self.mark = mark  # the stager's joined_bytes: where the run before it ends


def _size(data: Any) -> int:
    """The bytes a value or key counts for in the buffer (0 for what is not bytes-like)."""
    try:
        return 0 if data is None else len(data)
    except TypeError:
        return 0


class _Barrier:
    """A call the records staged after it wait for (``pykaf.sync``'s ``send_many``).

    The drain stops at it and starts ``call`` in the loop; once the call has
    returned it is taken off and the drain goes on. ``fail`` tells its
    caller of an error instead, when it is failed unstarted.
    """

    __slots__ = ("call", "done", "fail", "mark", "records", "started")

    def __init__(
        self,
        call: Callable[[], Awaitable[None]],
        fail: Callable[[BaseException], None],
        records: int,
        mark: int,
    ) -> None:
        self.call = call
        self.fail = fail
        self.records = records
        self.mark = mark
        self.started = False
        self.done = trio.Event()


class Owner(Protocol):
    """What staging asks of an owner outside the loop (``pykaf.sync``).

    Without one, callbacks run in the loop (the async producer's way).
    """

    def hook(self, run: _Run) -> tuple[OnSettle | None, bool]:
        """The run's ``on_settle`` hook, and whether its failures are told by it."""

    def target(self, on_delivery: Any) -> OnDelivery | None:
        """``send_nowait``'s ``on_delivery`` for a loose record; None: withdrawn."""

    def fail_one(self, on_delivery: Any, error: BaseException, metadata: RecordMetadata) -> None:
        """A loose record failed before it was sent."""

    def start(self, run: _Run) -> bool:
        """Start a run of futures, dropping the cancelled ones; False: none is left."""

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: Any) -> None:
        """Start ``fn(*args)`` as a task of the loop (called in the loop)."""

    def poll_wait(self, timeout: float | None) -> int:
        """The stager's ``poll`` when callbacks are ready or it may wait."""


class ParkedRun:
    """A staged run waiting for its topic's partitions (an item of ``TopicState.pending``).

    The routing stage calls :meth:`replay` once the partitions are known, or
    :meth:`fail` (the lookup failed, a purge, an abort, closing); either
    gives the run's room in the buffer back.
    """

    __slots__ = ("_staging", "nbytes", "now", "records", "run")

    def __init__(self, staging: Staging, run: _Run, now: int, data: int) -> None:
        assert isinstance(run.topic, TopicState)
        self._staging = staging
        self.run = run
        self.now = now  # when it was parked: the stamp of records without their own
        #: The records in the run, and the bytes they count for in the buffer
        #: (``data``: their values and keys).
        self.records = len(run.values)
        self.nbytes = data + RECORD_OVERHEAD * self.records

    def replay(self, t: TopicState) -> None:
        """Append the records to ``t``'s batches, now that its partitions are known."""
        self._staging.acc.unreserve(self.records, self.nbytes)  # appending counts them again
        self._staging.append(t, self.run, self.now)

    def fail(self, error: BaseException) -> None:
        """Fail every record of the run with ``error`` (each one's report is told)."""
        staging = self._staging
        staging.acc.release(self.records, self.nbytes)
        staging.fail(self.run, staging.delivery(self.run, self.now), error, 0)


class _Callbacks:
    """A run's ``on_settle`` hook: each record's ``on_delivery(error, metadata)``."""

    __slots__ = ("callbacks", "stamps", "topic")

    def __init__(self, topic: str, callbacks: list[OnDelivery], stamps: list[int] | None) -> None:
        self.topic = topic
        self.callbacks = callbacks
        self.stamps = stamps

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        topic = self.topic
        made = _new_metadata
        offsets: Iterable[int] = range(offset, offset + count) if offset >= 0 else repeat(-1, count)
        stamps = self.stamps
        # -1: the records carried their own timestamps (the broker did not stamp them).
        times: Iterable[int] = (
            stamps[index : index + count]
            if timestamp == -1 and stamps is not None
            else repeat(timestamp, count)
        )
        for callback, where, stamp in zip(
            self.callbacks[index : index + count], offsets, times, strict=True
        ):
            try:
                callback(error, made(RecordMetadata, (topic, partition, where, stamp)))
            except Exception:
                log.exception("on_delivery callback failed")


def _no_futures(*args: Any) -> Any:
    raise TypeError("the async producer stages no futures")


def _no_poll(timeout: float | None) -> int:
    raise TypeError("the async producer has no poll")


_Item = _Run | _Loose | _Barrier


class Staging:
    """The async producer's staged runs (see the module's docstring).

    ``send_nowait`` is :attr:`stager`'s ``produce``; records it does not
    stage go to ``fallback`` (the producer's own ``send_nowait``).
    ``topic_state`` gives a topic's state, starting its lookup when it is
    new (the routing stage's ``Router.topic_state``). With ``runs`` False
    no record opens a run (on_send interceptors must see each one): every
    record is staged loose and replayed through ``fallback``.

    Other threads may stage too (``pykaf.sync``, the :attr:`owner`), and
    touch nothing the loop owns: a record's topic is looked up, its
    partition checked, by the drain. Their room in the buffer is granted by
    the loop, ``CHUNK`` records at a time (:meth:`_grant`, through
    :attr:`call_in_loop`); a thread that finds none waits up to
    :attr:`block` seconds for it, then raises ``BufferFullError``. A record
    no run takes (headers, a value over ``SMALL``, a key another partitioner
    must see) is staged as it is, after the runs before it, and replayed by
    the drain through ``fallback``; a call that must wait in the loop
    (``send_many``) is staged as a barrier the drain stops at. Each
    thread's records keep their order whatever the mix, with no call to the
    loop per record. Runs are appended to, and the list swapped, under
    :attr:`stager`'s lock.
    """

    def __init__(
        self,
        acc: Accumulator,
        topics: dict[str, TopicState],
        reports: Reports,
        fallback: SendNowait,
        topic_state: Callable[[str], TopicState],
        *,
        runs: bool = True,
        pump: Callable[[], bool] | None = None,
    ) -> None:
        #: The accumulator the runs are appended to.
        self.acc = acc
        self._topics = topics
        self._reports = reports
        self._fallback = fallback
        self._topic_state = topic_state
        self._token = trio.lowlevel.current_trio_token()
        # The accumulator holds the same list: it drains before anything else appends.
        self.runs: list[_Item] = acc.staged
        acc.drain_staged = self.drain
        self._scheduled = False
        self._reserved = 0  # records reserved in the buffer (PER_RECORD bytes each)
        small = min(SMALL, acc.max_message - RECORD_OVERHEAD) if runs else -1
        self.stager = RecordStager(
            StagerLock(),
            self._stage,
            self._stage_future,
            self._poll_wait,
            _no_futures,
            [],
            small=small,
            max_pending=0,
        )
        # The sticky partitioner picks one partition per batch for null keys, as
        # the bulk path does; another partitioner is asked for every record.
        self._sticky = acc.sticky_nulls
        # Keyed records are staged for topics not known yet, with the default
        # partitioner (hashed in bulk once the partitions are known) or an
        # explicit partition, when a key and a value of ``small`` bytes each
        # fit ``max_message_bytes``.
        self._keyed = 2 * small <= acc.max_message - RECORD_OVERHEAD
        self._hashed = type(acc.partitioner) is Murmur2Partitioner
        # Staging from other threads (see the class's docstring):
        self._loop_thread = threading.get_ident()
        self._extra = 0  # room reserved beyond PER_RECORD per record, for loose records
        self._extra_used = 0  # of it, what staged loose records take
        self._threads = False  # a drain's records came from other threads
        self._barriers = 0  # barriers in ``runs``
        #: The owner outside the loop; None: the async producer's own staging.
        self.owner: Owner | None = None
        #: Set by the owner: no more records (ClosedError).
        self.closed = False
        #: Seconds a record from another thread waits for room before ``BufferFullError``.
        self.block = 0.0
        #: Called at the end of a record's call in the loop once an append
        #: filled a batch (``Accumulator.filled``): the sinks' ``pump``, which
        #: writes requests while a loop without checkpoints runs. None: nothing.
        self.pump = pump
        self._pumping = False  # the last pump left requests pending
        #: How another thread runs ``await fn(*args)`` in the loop (the owner's portal).
        self.call_in_loop: Callable[..., Any] = partial(
            trio.from_thread.run, trio_token=self._token
        )

    @property
    def staged(self) -> int:
        """Records staged and not appended (or parked) yet."""
        return self.stager.queued - self.stager.accepted

    def _reserve(self, extra: int = 0, chunk: int = CHUNK) -> bool:
        """Reserve buffer room for up to ``chunk`` more records; False when there is none.

        ``extra``: bytes for a loose record beyond its ``PER_RECORD``.
        """
        acc = self.acc
        with self.stager.lock:
            room = min(
                chunk,
                acc.max_records - acc.buffered_records,
                (acc.max_bytes - acc.buffered_bytes - extra) // PER_RECORD,
            )
            if room <= 0:
                return False
            acc.reserve(room, room * PER_RECORD + extra)
            self._reserved += room
            self._extra += extra
            self.stager.max_pending = self.staged + room
        return True

    def _plain(self, value: Any, headers: Any, stamp: Any) -> bool:
        """Whether the record's value, headers and timestamp let it join a run."""
        return (
            type(value) is bytes
            and len(value) <= self.stager.small
            and headers is None
            and (stamp is None or (type(stamp) is int and _INT64_MIN <= stamp <= _INT64_MAX))
        )

    def _routable(self, key: Any, partition: Any) -> bool:
        """Whether a run can go where the record goes, its topic not looked at.

        The partition is checked, and the partitioner asked, by the drain.
        """
        if key is not None and not (
            type(key) is bytes and len(key) <= self.stager.small and self._keyed
        ):
            return False
        if partition is None:
            return self._sticky if key is None else self._hashed
        return type(partition) is int

    def _stageable(
        self, t: TopicState | None, key: Any, value: Any, partition: Any, headers: Any, stamp: Any
    ) -> bool:
        """Whether the record may open a run (see the module's docstring)."""
        if not self._plain(value, headers, stamp) or self.acc.closing or self.acc.gated:
            return False
        if t is not None and t.count > 0:  # known partitions: unkeyed records only
            return key is None and (
                (partition is None and self._sticky)
                or (type(partition) is int and 0 <= partition < t.count)
            )
        return self._routable(key, partition)  # not known yet

    def _stage(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: Any,
        headers: Any,
        timestamp: Any,
        on_delivery: OnDelivery | None,
    ) -> None:
        """A record the compiled path did not take: open a run for it, or send it alone."""
        if self.owner is not None or threading.get_ident() != self._loop_thread:
            self._stage_outside(
                (topic, value, key, partition, headers, timestamp, on_delivery),
                False,
                self.block,
                errors.BufferFullError,
            )
            return
        t = self._topics.get(topic)
        plain = self._stageable(t, key, value, partition, headers, timestamp)
        drained = False  # staged records appended here: no checkpoint drained them
        if plain and self.staged >= self.stager.max_pending:  # the reservation is used up
            drained = self.staged > 0
            self.drain()
            plain = self._reserve(0, PUMP_CHUNK if self._pumping else CHUNK)
        if not plain:
            self.drain()  # the staged records go first
            self._fallback(
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp=timestamp,
                on_delivery=on_delivery,
            )
            return  # (the fallback pumps when it filled a batch)
        if t is None:  # its lookup starts now (InvalidTopicError, ClosedError: raised here)
            t = self._topic_state(topic)
        self.runs.append(self._open(t, topic, partition, value, key, timestamp, on_delivery))
        if not self._scheduled:
            self._scheduled = True
            self._token.run_sync_soon(self._drain_soon)
        # Last: what the pump settles may call back into send_nowait, after this record.
        if (drained or self.acc.filled) and self.pump is not None:
            self._pumping = self.pump()

    def _stage_future(
        self,
        future: Any,
        topic: str,
        value: Any,
        key: Any,
        partition: Any,
        headers: Any,
        timestamp: Any,
        timeout: float | None,
    ) -> Any:
        """The owner's ``send_async`` record the compiled path did not take; its future."""
        if self.owner is None:
            _no_futures()
        record = (topic, value, key, partition, headers, timestamp, future)
        self._stage_outside(record, True, timeout, errors.KafkaTimeoutError)
        return future

    def _poll_wait(self, timeout: float | None) -> int:
        if self.owner is None:
            return _no_poll(timeout)
        return self.owner.poll_wait(timeout)

    def _stage_outside(
        self,
        record: tuple[Any, ...],
        future: bool,
        wait: float | None,
        full: type[errors.PykafError],
    ) -> None:
        """``_stage`` for the owner's callers: a run or a loose record, in order.

        ``record`` is ``(topic, value, key, partition, headers, timestamp,
        on_delivery)`` (the future of a ``send_async`` record).

        Raises:
            BufferFullError, KafkaTimeoutError (``full``): no room within
                ``wait`` seconds (None: no limit).
            ClosedError: the owner closed, or the loop has stopped (the
                record is withdrawn; what other threads staged meanwhile
                fails through its own reports).
        """
        _, value, key, partition, headers, timestamp, _ = record
        run = self._plain(value, headers, timestamp) and self._routable(key, partition)
        extra = 0
        if not run:  # a loose record counts for its own bytes (one too large fails on replay)
            nbytes = _size(value) + _size(key) + RECORD_OVERHEAD
            extra = 0 if nbytes > self.acc.max_message else max(nbytes - PER_RECORD, 0)
        stager = self.stager
        deadline = None
        while True:
            with stager.lock:
                if self.closed:
                    raise errors.ClosedError("the producer is closed")
                if self.staged < stager.max_pending and self._extra_used + extra <= self._extra:
                    item = self._put(run, extra, record, future)
                    schedule = not self._scheduled
                    self._scheduled = self._threads = True
                    break
            now = time.monotonic()
            if deadline is None:
                deadline = now + (math.inf if wait is None else wait)
            if not self._room(extra, max(deadline - now, 0.0)):
                raise full(f"no room in the producer's buffer within {wait} s")
        if schedule:
            self._schedule(item, future)

    def _room(self, extra: int, timeout: float) -> bool:
        """Room for the caller's next records, from the loop; False: none came in time."""
        if threading.get_ident() == self._loop_thread:  # a callback in the loop: no waiting
            self.drain()
            return self._reserve(extra)
        granted: bool = self.call_in_loop(self._grant, extra, timeout)
        return granted

    def _schedule(self, item: _Item, future: bool = False) -> None:
        """Ask the loop to drain soon; if it has stopped, withdraw ``item`` and raise.

        (Unless the loop took ``item`` before it stopped: then it tells its fate.)
        """
        try:
            self._token.run_sync_soon(self._drain_soon)
        except BaseException as exc:  # the loop has stopped
            if self._unstage(item, future, exc):
                raise errors.ClosedError("the producer's loop has stopped") from exc

    def _put(self, run: bool, extra: int, record: tuple[Any, ...], future: bool) -> _Item:
        """Under the lock: stage a record from another thread, as a new run or loose."""
        topic, value, key, partition, headers, timestamp, on_delivery = record
        stager = self.stager
        item: _Item
        if run:
            item = self._open(topic, topic, partition, value, key, timestamp, on_delivery, future)
        else:
            stager.close_runs()  # the records after it open a run of their own
            stager.queued += 1
            self._extra_used += extra
            item = _Loose(
                topic,
                value,
                key,
                partition,
                headers,
                timestamp,
                on_delivery,
                extra,
                stager.joined_bytes,
            )
        if future:
            stager.futures += 1
        self.runs.append(item)
        return item

    def _open(
        self,
        where: TopicState | str,
        topic: str,
        partition: Any,
        value: bytes,
        key: bytes | None,
        timestamp: int | None,
        on_delivery: Any,
        future: bool = False,
    ) -> _Run:
        """A new run of the record, open for the compiled path to join.

        Under the lock when other threads stage; ``where`` is the topic's
        state, or its name.
        """
        values = [value]
        keys = None if key is None else [key]
        stamps = None if timestamp is None else [timestamp]
        stager = self.stager
        # The run's bytes are from its mark to the next run's: its first record's too.
        mark = stager.joined_bytes
        stager.joined_bytes += len(value) + (0 if key is None else len(key))
        stager.queued += 1
        if on_delivery is None:
            stager.open_run(topic, partition, values, keys, stamps)
            return _Run(where, partition, values, keys, stamps, None, mark)
        callbacks = [on_delivery]
        if future:
            stager.open_future_run(topic, partition, values, callbacks, keys, stamps)
        else:
            stager.open_callback_run(topic, partition, values, callbacks, keys, stamps)
        return _Run(where, partition, values, keys, stamps, callbacks, mark, future)

    def stage_call(
        self,
        call: Callable[[], Awaitable[None]],
        fail: Callable[[BaseException], None],
        records: int,
    ) -> None:
        """Stage a call the records staged after it wait for (any thread but the loop's).

        The drain starts ``call`` in the loop once what was staged before it
        is appended; ``fail(error)`` instead if it is failed unstarted
        (``records``: how many records it carries, for the purge's count).

        Raises:
            ClosedError: the owner closed, or the loop has stopped.
        """
        stager = self.stager
        with stager.lock:
            if self.closed:
                raise errors.ClosedError("the producer is closed")
            stager.close_runs()
            barrier = _Barrier(call, fail, records, stager.joined_bytes)
            self.runs.append(barrier)
            self._barriers += 1
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._schedule(barrier)

    async def _grant(self, extra: int, timeout: float) -> bool:
        """In the loop, for another thread: room for ``CHUNK`` records and ``extra`` bytes.

        Waits up to ``timeout`` seconds for it; False when none came. A call
        staged ahead (``send_many``) is given the buffer first: no room is
        granted until it is done.

        Raises:
            ClosedError, TransactionStateError: no record may be sent now.
        """
        with trio.move_on_after(timeout):
            while True:
                self.drain()
                runs = self.runs
                if runs and isinstance(runs[0], _Barrier):
                    await runs[0].done.wait()  # its call comes first to the buffer
                    continue
                if self._reserve(extra):
                    return True
                await self.acc.wait_for_room(PER_RECORD + extra)
        return False

    def _unstage(self, own: _Item, future: bool, exc: BaseException) -> bool:
        """The loop has stopped: withdraw the caller's item, fail what others staged.

        Returns False when the loop took the item before it stopped: then it
        is the loop's to report, and the caller's call succeeded.
        """
        stager = self.stager
        with stager.lock:
            withdrawn = any(item is own for item in self.runs)
            if withdrawn:
                if isinstance(own, _Run) and len(own.values) > 1:
                    for column in (own.values, own.keys, own.stamps, own.callbacks):
                        if column is not None:
                            del column[0]  # the caller's record opened the run
                else:
                    self.runs.remove(own)
                    if isinstance(own, _Barrier):
                        self._barriers -= 1
                if not isinstance(own, _Barrier):
                    stager.queued -= 1
                    stager.futures -= future
        error = errors.ClosedError("the producer's loop stopped before the record was sent")
        error.__cause__ = exc
        self.fail_staged(error)
        return withdrawn

    def fail_staged(self, error: BaseException) -> int:
        """Fail what is staged (a call already started stays); return how many records.

        Each record is told through its own report, as a failure to send it.
        """
        stager = self.stager
        with stager.lock:
            items = self.runs.copy()
            self.runs.clear()
            if items and isinstance(items[0], _Barrier) and items[0].started:
                self.runs.append(items.pop(0))  # its call fails what of it is unsent
            self._barriers = len(self.runs)
            stager.close_runs()
            stager.max_pending = 0
            stager.accepted = stager.queued
            reserved, self._reserved = self._reserved, 0
            extra, self._extra, self._extra_used = self._extra, 0, 0
        self.acc.unreserve(reserved, reserved * PER_RECORD + extra)
        self.acc.release(0, 0)
        now = time.time_ns() // 1_000_000
        count = 0
        for item in items:
            if isinstance(item, _Barrier):
                count += item.records
                item.fail(error)
            elif isinstance(item, _Loose):
                count += 1
                self._fail_loose(item, error, now)
            else:
                count += len(item.values)
                self.fail(item, self.delivery(item, now), error, 0)
        return count

    def forget_after_fork(self) -> None:
        """In a forked child: a fresh lock, nothing staged, no room (all the parent's)."""
        stager = self.stager
        stager.reset_lock(StagerLock())
        stager.close_runs()
        self.runs.clear()
        self._barriers = 0
        self._scheduled = False
        stager.max_pending = 0
        stager.accepted = stager.queued
        self._reserved = self._extra = self._extra_used = 0

    def _drain_soon(self) -> None:
        with self.stager.lock:
            self._scheduled = False
            threads, self._threads = self._threads, False
        self.drain()
        acc = self.acc
        if threads and not (self.closed or acc.closing or acc.gated or self._barriers):
            self._reserve()  # more will come: their room is there already

    async def settle(self) -> None:
        """Drain everything staged before this call, waiting for the staged calls."""
        while True:
            self.drain()
            runs = self.runs
            first = runs[0] if runs and isinstance(runs[0], _Barrier) else None
            if first is None:
                return
            await first.done.wait()

    def drain(self) -> None:
        """Append every staged run to its partitions' batches, in order; never raises.

        A run whose topic's partitions are not known yet is parked on the
        topic instead (:class:`ParkedRun`), after what was parked before it.
        Records staged from other threads are given their topic's state
        here, and loose ones replayed through ``fallback``; the drain stops
        at a staged call (which it starts). The reservation is given back,
        but for the records still staged.
        """
        stager = self.stager
        if not (self.runs or self._reserved):
            return
        left = left_extra = 0
        barrier: _Barrier | None = None
        with stager.lock:
            items = self.runs
            cut = len(items)
            if self._barriers:
                cut = next(i for i, item in enumerate(items) if isinstance(item, _Barrier))
                barrier = items[cut]  # type: ignore[assignment]
                for item in items[cut + 1 :]:
                    if isinstance(item, _Loose):
                        left += 1
                        left_extra += item.extra
                    elif isinstance(item, _Run):
                        left += len(item.values)
            runs = items[:cut]
            del items[:cut]
            if barrier is None:
                stager.close_runs()
            # The next record reserves again. Records behind a staged call
            # give their room back too: the call may need all of the buffer
            # (a send_many larger than it), and no room is granted until the
            # call is done (_grant); they count for themselves when appended.
            stager.max_pending = left
            reserved, self._reserved = self._reserved, 0
            extra, self._extra = self._extra, 0
            self._extra_used = left_extra
            stager.accepted = stager.queued - left  # each item before the cut is taken over
            end = stager.joined_bytes if barrier is None else barrier.mark
        acc = self.acc
        # The records count for themselves now.
        acc.unreserve(reserved, reserved * PER_RECORD + extra)
        now = time.time_ns() // 1_000_000
        ends = [item.mark for item in runs[1:]]
        if runs:
            ends.append(end)
        owner = self.owner
        for run, end in zip(runs, ends, strict=True):
            if isinstance(run, _Loose):
                self._replay(run, now)
                continue
            assert isinstance(run, _Run)
            if run.futures and not owner.start(run):  # type: ignore[union-attr]
                continue  # every future of it was cancelled
            t = run.topic
            if isinstance(t, str):  # staged from another thread
                try:
                    if acc.closing or acc.gated:
                        acc.refuse()
                    t = run.topic = self._topic_state(t)
                except errors.PykafError as exc:
                    self.fail(run, self.delivery(run, now), exc, 0)
                    continue
            if t.count == 0 and t.error is None:  # its partitions are still being looked up
                parked = ParkedRun(self, run, now, end - run.mark)
                acc.reserve(parked.records, parked.nbytes)
                t.pending.append(parked)
            else:
                self.append(t, run, now)
        acc.release(0, 0)  # what the reservation held and the records do not: wake who waits
        if barrier is not None and not barrier.started and self.runs[0] is barrier:
            barrier.started = True
            owner.start_soon(self._pass, barrier)  # type: ignore[union-attr]

    async def _pass(self, barrier: _Barrier) -> None:
        """Run a staged call; then the records staged after it go on."""
        try:
            await barrier.call()
        finally:
            with self.stager.lock:
                self.runs.remove(barrier)
                self._barriers -= 1
            barrier.done.set()
            self.drain()

    def _replay(self, item: _Loose, now: int) -> None:
        """Send a loose record through ``fallback``; its error goes to its report."""
        on_delivery = item.on_delivery
        if self.owner is not None:
            on_delivery = self.owner.target(on_delivery)
            if on_delivery is None:
                return  # a future cancelled while it was staged
        acc = self.acc
        acc.pumps_held += 1  # no answer is settled inline in the middle of a drain
        try:
            self._fallback(
                item.topic,
                item.value,
                key=item.key,
                partition=item.partition,
                headers=item.headers,
                timestamp=item.timestamp,
                on_delivery=on_delivery,
            )
        except Exception as exc:  # told as send_nowait would have raised it
            self._fail_loose(item, exc, now)
        finally:
            acc.pumps_held -= 1

    def _fail_loose(self, item: _Loose, error: BaseException, now: int) -> None:
        """Fail a loose record through its ``on_delivery``, or for the next flush."""
        stamp = item.timestamp if type(item.timestamp) is int else None
        partition = item.partition if type(item.partition) is int else None
        if self.owner is not None:
            where = (item.topic, -1 if partition is None else partition, -1, stamp or -1)
            self.owner.fail_one(item.on_delivery, error, _new_metadata(RecordMetadata, where))
            return
        run = _Run(
            item.topic,
            partition,
            [item.value],
            None,
            None if stamp is None else [stamp],
            None if item.on_delivery is None else [item.on_delivery],
            item.mark,
        )
        self.fail(run, self.delivery(run, now), error, 0)

    def delivery(self, run: _Run, now: int) -> BatchDelivery:
        """The delivery that tracks ``run``'s records (the callbacks' hook, or the owner's)."""
        delivery = BatchDelivery(len(run.values))
        if run.stamps is None:
            delivery.timestamp = now
        if self.owner is not None:
            delivery.on_settle, delivery.observed = self.owner.hook(run)
        elif run.callbacks is not None:
            delivery.on_settle = _Callbacks(_name(run), run.callbacks, run.stamps)
            delivery.observed = True
        return delivery

    def append(self, t: TopicState, run: _Run, now: int) -> None:
        """Append ``run`` to ``t``'s batches (whose partitions are known), or fail it."""
        delivery = self.delivery(run, now)
        done = [0, self.acc.purges]
        try:
            if t.count == 0:  # the topic's lookup failed
                assert t.error is not None
                raise t.error
            if run.partition is not None:
                self.acc.check_partition(t, run.partition)
            self.acc.append_run_now(
                t, run.values, run.keys, run.stamps, run.partition, now, delivery, done
            )
        except errors.PykafError as exc:  # the topic's, or an explicit partition out of range
            self.fail(run, delivery, exc, done[0])
        except Exception as exc:  # not expected: fail the rest, never lose them silently
            log.exception("appending staged records failed")
            self.fail(run, delivery, exc, done[0])

    def fail(self, run: _Run, delivery: BatchDelivery, error: BaseException, start: int) -> None:
        """Fail ``run``'s records from ``start`` on, through ``delivery``."""
        part = -1 if run.partition is None else run.partition
        n = len(run.values)
        self._reports.fail_alone(_name(run), part, error, delivery, start, n - start)


def _name(run: _Run) -> str:
    """The name of the run's topic."""
    t = run.topic
    return t if isinstance(t, str) else t.name


__all__ = ["CHUNK", "SMALL", "Owner", "ParkedRun", "Staging"]
