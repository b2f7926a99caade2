"""``pykaf.sync.Producer``: the async producer driven from plain threads through the portal."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import _base as _futures  # the states a Future moves through
from contextlib import suppress
from functools import partial
from types import TracebackType
from typing import Any, cast, overload

import trio

from pykaf._config import bootstrap_argument
from pykaf._producer.producer import Producer as AsyncProducer
from pykaf._producer.producer import open_producer
from pykaf._producer.records import (
    BatchDelivery,
    ProducerStatistics,
    RecordMetadata,
)
from pykaf._sync.portal import ContextHandle, Portal, get_portal, wait_future
from pykaf._txn.manager import Offsets, TxnStatus
from pykaf.codec import RecordStager
from pykaf.errors import (
    BufferFullError,
    ClosedError,
    ConfigError,
    DeliveryError,
    KafkaTimeoutError,
    PurgedError,
    TransactionAbortedError,
)

__all__ = ["DEFAULT_PRODUCE_BLOCK_TIMEOUT", "MAX_PENDING", "Producer"]

MAX_PENDING = 10_000
"""Records a sync producer accepts ahead of its async producer's buffer.

They are in transit to the loop, or waiting there for buffer space. Past that,
``send_async`` blocks its caller: the backpressure a full buffer exerts.
"""

#: Seconds ``produce`` waits for room when :data:`MAX_PENDING` records are
#: staged ahead of a full buffer, before it raises ``BufferFullError`` (the
#: ``produce_block_timeout`` option's default).
DEFAULT_PRODUCE_BLOCK_TIMEOUT = 5.0

#: A run of at least this many plain ``produce`` records (same topic and
#: partition, no headers or timestamp; all with a callback or none) goes to the
#: async producer's bulk path (``send_batch``) whole; shorter runs go record by
#: record.
BULK_RUN = 16

Headers = Sequence[tuple[str, bytes | None]]
_DONE = (_futures.CANCELLED, _futures.CANCELLED_AND_NOTIFIED, _futures.FINISHED)
OnDelivery = Callable[[BaseException | None, RecordMetadata], object]
Failure = tuple[str, int, int, BaseException]
#: RecordMetadata from a (topic, partition, offset, timestamp) tuple, in C.
_new_metadata = partial(tuple.__new__, RecordMetadata)


class _Batch:
    """One ``send_many`` call on its way to ``send_batch``."""

    __slots__ = ("future", "headers", "keys", "partition", "timestamps", "topic", "values")

    def __init__(
        self,
        topic: str,
        values: Any,
        keys: Any,
        headers: Sequence[Headers | None] | None,
        timestamps: Any,
        partition: int | None,
        future: Future[int],
    ) -> None:
        self.topic = topic
        self.values = values
        self.keys = keys
        self.headers = headers
        self.timestamps = timestamps
        self.partition = partition
        self.future = future


class _Run:
    """Plain ``produce`` records staged in a row: one topic and partition, keyed or not.

    Callers append to ``values`` (and ``keys`` and ``timestamps`` when the
    records have them, and ``callbacks`` when they have an ``on_delivery``:
    all of a run's records have one, or none has; with ``futures`` they are
    all ``send_async`` futures) under the
    feeder's lock while the run is the last thing staged; the loop hands a
    long run to ``send_batch`` whole. ``start`` is how many of them the loop
    has buffered.
    """

    __slots__ = (
        "callbacks",
        "futures",
        "keys",
        "partition",
        "start",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(
        self,
        topic: str,
        partition: int | None,
        value: bytes,
        key: bytes | None,
        timestamp: int | None,
        callback: OnDelivery | None,
        futures: bool,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.values = [value]
        self.keys: list[bytes] | None = None if key is None else [key]
        self.timestamps: list[int] | None = None if timestamp is None else [timestamp]
        self.callbacks: list[OnDelivery] | None = None if callback is None else [callback]
        self.futures = futures  # the callbacks are send_async futures
        self.start = 0


class _RunSettled:
    """``send_batch``'s ``on_settle`` for a run of records with callbacks.

    In the loop, queues each settled record's callback with its metadata for
    ``poll``/``flush``, one pass per settled range. Should ``send_batch``
    raise after buffering some of the run, :meth:`fail_rest` names the records
    that have not settled, and later settlements are ignored: each callback
    runs once.
    """

    __slots__ = ("callbacks", "feeder", "ignore", "settled", "stamps", "start", "topic")

    def __init__(self, feeder: _Feeder, run: _Run) -> None:
        assert run.callbacks is not None
        self.feeder = feeder
        self.topic = run.topic
        self.callbacks = run.callbacks
        self.stamps = run.timestamps  # the records' own timestamps, if they have them
        self.start = run.start
        self.settled = bytearray(len(run.values) - run.start)
        self.ignore = False

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        if self.ignore:
            return
        self.settled[index : index + count] = b"\1" * count
        first = self.start + index
        feeder = self.feeder
        stamps = self.stamps
        # One entry for the range: the metadata is made as each callback runs.
        feeder.ready.append(
            _Settled(
                self.callbacks[first : first + count],
                error,
                self.topic,
                partition,
                offset,
                timestamp,
                None if stamps is None or timestamp >= 0 else stamps[first : first + count],
            )
        )
        if feeder.pollers:
            feeder.ready_event.set()

    def fail_rest(self) -> list[int]:
        """The run's indices of the records not settled yet; ignore them from now on."""
        self.ignore = True
        start = self.start
        return [start + i for i, done in enumerate(self.settled) if not done]


class _RunResolved:
    """``send_batch``'s ``on_settle`` for a run of ``send_async`` records.

    In the loop, resolves the futures of each settled range at once, under
    one hold of the shared condition: what ``Future.set_result`` /
    ``set_exception`` do for each, their metadata made here. It stays in the
    feeder's ``open_hooks`` until every future is resolved, for ``fail_all``.
    """

    __slots__ = ("feeder", "futures", "left", "stamps", "topic")

    def __init__(self, feeder: _Feeder, run: _Run) -> None:
        assert run.callbacks is not None
        self.feeder = feeder
        self.topic = run.topic
        self.futures: list[_DeliveryFuture] = run.callbacks[run.start :]  # type: ignore[assignment]
        stamps = run.timestamps  # the records' own timestamps, if they have them
        self.stamps = None if stamps is None else stamps[run.start :]
        self.left = len(self.futures)
        feeder.open_hooks.add(self)

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        feeder = self.feeder
        futures = self.futures[index : index + count]
        running, finished = _futures.RUNNING, _futures.FINISHED
        noted: list[_DeliveryFuture] = []  # with waiters or done-callbacks
        with feeder.condition:
            if error is not None:
                for future in futures:
                    if future._state is running:
                        future._exception = error
                        future._state = finished
                        if future._lazy_waiters or future._lazy_callbacks:
                            noted.append(future)
            else:
                where = (self.topic, partition, timestamp)
                stamps = self.stamps if timestamp < 0 else None
                step = 1 if offset >= 0 else 0  # acks=0: no offsets
                for i, future in enumerate(futures):
                    if future._state is running:
                        if stamps is not None:
                            where = (self.topic, partition, stamps[index + i])
                        future._where = where
                        future._offset = offset + step * i
                        future._state = finished
                        if future._lazy_waiters or future._lazy_callbacks:
                            noted.append(future)
            if noted:
                _tell_waiters(noted)
            feeder.condition.notify_all()
        self.left -= count
        if self.left <= 0:
            feeder.open_hooks.discard(self)
        for future in noted:
            if future._lazy_callbacks:
                future._invoke_callbacks()  # type: ignore[attr-defined]

    def fail(self, error: BaseException) -> None:
        """Fail the futures not resolved yet (the producer closed or was abandoned)."""
        self.feeder.open_hooks.discard(self)
        for future in self.futures:
            _settle(future, error)


def _tell_waiters(futures: list[_DeliveryFuture]) -> None:
    """Under the condition: the ``wait``/``as_completed`` waiters of finished futures."""
    for future in futures:
        failed = future._exception is not None
        for waiter in future._lazy_waiters or ():
            if failed:
                waiter.add_exception(future)
            else:
                waiter.add_result(future)


class _Settled:
    """Records of a run settled together, waiting in ``ready`` for ``poll``/``flush``.

    ``callbacks[i]`` hears of the record at ``offset + i`` (-1 for all when
    ``offset`` is -1), stamped ``timestamp`` or ``stamps[i]``; those before
    ``next`` have run.
    """

    __slots__ = (
        "callbacks",
        "error",
        "next",
        "offset",
        "partition",
        "stamps",
        "timestamp",
        "topic",
    )

    def __init__(
        self,
        callbacks: list[OnDelivery],
        error: BaseException | None,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        stamps: list[int] | None = None,
    ) -> None:
        self.callbacks = callbacks
        self.error = error
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.stamps = stamps  # each record's own timestamp, where it gave one
        self.next = 0


class _Deliver:
    """The async producer's ``on_delivery`` for records with a callback.

    In the loop it only queues ``(callback, error, metadata)`` for the
    caller's ``poll``/``flush``, which run the callback in the caller's thread.
    One object serves every record with the same callback.
    """

    __slots__ = ("callback", "feeder")

    def __init__(self, feeder: _Feeder, callback: OnDelivery) -> None:
        self.feeder = feeder
        self.callback = callback

    def __call__(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        feeder = self.feeder
        feeder.ready.append((self.callback, error, metadata))
        if feeder.pollers:
            feeder.ready_event.set()


class _DeliveryFuture(Future[RecordMetadata]):
    """A ``send_async`` future: light to make per record, resolved in the loop.

    A ``concurrent.futures.Future`` builds a ``threading.Condition`` (a lock
    and its bookkeeping) when made; these share their producer's, so making
    one costs a few attributes. The future is its record's ``on_delivery``
    target in the async producer: the outcomes of a settled batch are queued
    and resolved together, under one hold of the shared condition
    (:meth:`_Feeder.resolve_futures`). Waiting is looped (``result``,
    ``exception``) because a shared condition also wakes waiters of other futures.
    Its lists of waiters and done-callbacks are made when first used: most
    futures never need them, and fewer objects per record spare the cyclic
    garbage collector, which otherwise costs as much as the rest of the path.
    """

    # Future's own fields as slots too (they shadow the instance dict): a
    # smaller object, quicker to make.
    __slots__ = (
        "_condition",
        "_exception",
        "_feeder",
        "_lazy_callbacks",
        "_lazy_waiters",
        "_metadata",
        "_offset",
        "_state",
        "_where",
    )

    def __init__(self, feeder: _Feeder) -> None:
        # Future.__init__ is not called: it would build a Condition of its own.
        self._condition = feeder.condition
        self._state = _futures.PENDING
        self._metadata: RecordMetadata | None = None
        self._where: tuple[str, int, int] | None = None
        self._offset = -1
        self._exception: BaseException | None = None
        self._feeder = feeder
        self._lazy_waiters: list[Any] | None = None
        self._lazy_callbacks: list[Callable[[Future[RecordMetadata]], object]] | None = None

    @property
    def _result(self) -> RecordMetadata | None:
        """The metadata, made when first read.

        Resolving a settled batch's futures gives each only a shared
        ``(topic, partition, timestamp)`` and its offset, so that it allocates
        nothing the cyclic garbage collector would track.
        """
        metadata = self._metadata
        if metadata is None and self._where is not None:
            topic, partition, timestamp = self._where
            metadata = self._metadata = RecordMetadata(topic, partition, self._offset, timestamp)
        return metadata

    @_result.setter
    def _result(self, metadata: RecordMetadata | None) -> None:
        self._metadata = metadata

    @property
    def _waiters(self) -> list[Any]:
        if self._lazy_waiters is None:
            self._lazy_waiters = []
        return self._lazy_waiters

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._lazy_waiters = waiters

    @property
    def _done_callbacks(self) -> list[Callable[[Future[RecordMetadata]], object]]:
        if self._lazy_callbacks is None:
            self._lazy_callbacks = []
        return self._lazy_callbacks

    @_done_callbacks.setter
    def _done_callbacks(self, callbacks: list[Callable[[Future[RecordMetadata]], object]]) -> None:
        self._lazy_callbacks = callbacks

    def start(self) -> bool:
        """In the loop, before the record is buffered: False if it was cancelled."""
        if self._state == _futures.RUNNING:  # a retry after a full buffer
            return True
        with self._condition:
            state = self._state
            if state == _futures.PENDING:
                self._state = _futures.RUNNING
            else:
                if state == _futures.CANCELLED:  # its waiters are told once
                    self.set_running_or_notify_cancel()
                return False  # cancelled (and told), or already failed
        self._feeder.unsettled.add(self)
        return True

    def __call__(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        """The async producer's ``on_delivery``: keep the outcome, to be resolved soon.

        ``_result``/``_exception`` are only read once the state is FINISHED,
        which :meth:`_Feeder.resolve_futures` sets.
        """
        feeder = self._feeder
        if error is None:
            self._result = metadata
        else:
            self._exception = error
        if not feeder.settled_futures:
            feeder.portal.call_soon(feeder.resolve_futures)  # once the batch is settled
        feeder.settled_futures.append(self)

    def _wait_done(self, timeout: float | None) -> None:
        if self._state not in _DONE and timeout != 0:
            # Someone waits for the record: its batch need not wait for linger.
            self._feeder.hurry_up()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._state not in _DONE:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                self._condition.wait(left)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; see ``concurrent.futures.Future.result``."""
        self._wait_done(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The record's error or None; see ``concurrent.futures.Future.exception``."""
        self._wait_done(timeout)
        return super().exception(0)


_Item = _Batch | _Run | tuple[Any, ...] | trio.Event


def _future_of(item: _Item) -> _DeliveryFuture | None:
    """The future of a staged ``send_async`` record; None for anything else."""
    if isinstance(item, tuple) and type(item[6]) is _DeliveryFuture:
        return item[6]
    return None


def _count(item: _Item) -> int:
    """How many records ``item`` carries (a marker or a send_many batch: 0)."""
    if isinstance(item, _Run):
        return len(item.values)
    return 1 if isinstance(item, tuple) else 0


def _settle(future: Future[Any], error: BaseException | None, result: Any = None) -> None:
    """Resolve ``future`` unless it is already resolved or was cancelled."""
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:
        pass


class _Feeder(RecordStager):
    """Hands records from plain threads to the async producer, in order, in the loop.

    Threads append to ``incoming`` (under ``lock``) and schedule one ``take``
    callback for a burst. In the loop, short runs and single records go
    straight into the async producer's buffer with ``send_nowait``, long runs
    to ``send_batch``; when the buffer is full they wait in ``backlog`` (in
    order, never dropped) for a drainer task that feeds them as space frees.
    Batches and flush markers travel the same queue, so one thread's records
    keep their order whatever the mix of calls.

    ``produce`` and ``send_async`` records are staged in the caller's thread
    as :class:`_Run` objects (records without headers in a row, all without
    a callback, all with one, or all ``send_async`` futures; keyed or not,
    stamped or not), appended by the compiled fast path of
    :class:`~pykaf.codec.RecordStager` once a run is open; long runs are
    handed to ``send_batch`` whole, their callbacks and futures told through
    its ``on_settle``. Records with headers are staged as tuples and sent
    with ``send_nowait``. Callbacks are queued in ``ready`` for the callers'
    ``poll``/``flush``, futures resolved in the loop; failures of records
    without either are kept in ``unreported`` for the next ``flush``.
    """

    ready: deque[tuple[OnDelivery, BaseException | None, RecordMetadata] | _Settled]

    def __init__(self, portal: Portal, producer: AsyncProducer, block: float) -> None:
        # The per-record fast path (RecordStager, compiled): a plain record
        # for the open run (its topic and partition, a produce run without
        # callbacks or a keyless send_async run) is appended under ``lock``
        # with no Python frame; every other call comes to stage() or
        # stage_future(). Records not yet in the async producer's buffer =
        # queued - accepted. Each counter has one writer (threads under
        # ``lock``; the loop), so neither needs a lock of its own.
        super().__init__(
            threading.Lock(),
            self.stage,
            self.stage_future,
            self.poll_wait,
            _DeliveryFuture,
            deque(),
            small=max(producer.config.max_message_bytes // 2 - 1024, 0),
            max_pending=MAX_PENDING,
        )
        self.portal = portal
        self.producer = producer
        self.block = block  # produce's wait for room (produce_block_timeout)
        self.incoming: list[_Item] = []
        self.run: _Run | None = None  # the last item of ``incoming``, if it is a run
        self.scheduled = False
        self.hurry = False  # a send() waits: send what the loop takes at once (under lock)
        self.closed = False  # no more records (set by Producer.close, under lock)
        self.room = threading.Event()
        self.waiting = False
        # produce records not yet delivered = queued - futures - settled - served:
        # ``futures`` (send_async records) is written under ``lock``, ``settled``
        # by the loop (records without a callback, once settled), ``served``
        # under ``ready_lock`` (callbacks run by poll/flush).
        self.settled = 0
        self.served = 0
        self.ready_lock = threading.Lock()
        self.ready_event = threading.Event()
        self.pollers = 0  # threads waiting in poll (under ready_lock)
        self.unreported: list[Failure] = []
        self._deliver: _Deliver | None = None  # the last callback's wrapper, reused
        # Loop side:
        self.backlog: deque[_Item] = deque()
        self.draining = False
        self.hurry_after_drain = False  # a send()'s record waits in the backlog
        self.sending: _Item | None = None  # the backlog item the drainer hands to send_batch
        self.unsettled: set[Future[Any]] = set()
        self.open_hooks: set[_RunResolved] = set()  # send_async runs not all resolved
        self.condition = threading.Condition()  # shared by the send_async futures
        self.settled_futures: list[_DeliveryFuture] = []  # settled, not resolved yet
        self.staged_futures: list[_DeliveryFuture] = []  # since the last take (under lock)
        self.open_runs: deque[tuple[BatchDelivery, int]] = deque()
        self.watching = False
        self.finished = False

    # -- thread side -------------------------------------------------------------

    def put(self, item: _Item) -> None:
        """Queue a ``send_many`` batch or a marker for the loop (any thread)."""
        with self.lock:
            if self.closed:
                raise ClosedError("the producer is closed")
            self.incoming.append(item)
            self.end_run()
            if self.scheduled:
                return
            self.scheduled = True
        self._schedule(item)

    def stage(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        on_delivery: OnDelivery | None,
    ) -> None:
        """``produce`` records the fast path does not take (any thread)."""
        self.stage_record(topic, value, key, partition, headers, timestamp, on_delivery, None)

    def stage_future(
        self,
        future: _DeliveryFuture,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        timeout: float | None,
    ) -> _DeliveryFuture:
        """``send_async`` records the fast path does not take (any thread)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.stage_record(topic, value, key, partition, headers, timestamp, future, deadline)
        return future

    def poll_wait(self, timeout: float | None) -> int:
        """``poll`` unless it has nothing to do at once: wait up to ``timeout``, serve."""
        if not self.ready:
            if timeout == 0:
                return 0
            self.wait_ready(timeout)
        return self.serve()

    def stage_record(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        on_delivery: OnDelivery | None,
        deadline: float | None,
    ) -> None:
        """Stage one record (any thread); wake the loop if it is idle.

        A ``produce`` record waits ``block`` seconds for room, then raises
        BufferFullError; a ``send_async`` record (its future as
        ``on_delivery``) waits until ``deadline``, then raises KafkaTimeoutError.
        """
        future = type(on_delivery) is _DeliveryFuture
        if self.queued - self.accepted >= MAX_PENDING:
            if future:
                self._wait_for_room(deadline)
            else:
                self._wait_for_room(time.monotonic() + self.block, full=True)
        plain = (
            type(value) is bytes
            and headers is None
            and (timestamp is None or (type(timestamp) is int and -(2**63) <= timestamp < 2**63))
            and (key is None or type(key) is bytes)
            and (partition is None or type(partition) is int)
            and len(value) <= self.small
            and (key is None or len(key) <= self.small)
        )
        with self.lock:
            if self.closed:
                raise ClosedError("the producer is closed")
            self.queued += 1
            if future:
                self.futures += 1
            if plain:
                run = self.run
                if (
                    run is not None
                    and run.topic == topic
                    and run.partition == partition
                    and (run.keys is None) is (key is None)
                    and (run.timestamps is None) is (timestamp is None)
                    and (run.callbacks is None) is (on_delivery is None)
                    and run.futures is future
                ):
                    run.values.append(value)
                    if key is not None:
                        run.keys.append(key)  # type: ignore[union-attr]
                    if timestamp is not None:
                        run.timestamps.append(timestamp)  # type: ignore[union-attr]
                    if on_delivery is not None:
                        run.callbacks.append(on_delivery)  # type: ignore[union-attr]
                else:
                    run = self.run = _Run(
                        topic, partition, value, key, timestamp, on_delivery, future
                    )
                    self.incoming.append(run)
                    targets = cast("list[Any]", run.callbacks)
                    stamps = run.timestamps
                    if on_delivery is None:
                        self.open_run(topic, partition, run.values, run.keys, stamps)
                    elif future:
                        self.open_future_run(
                            topic, partition, run.values, targets, run.keys, stamps
                        )
                    else:
                        self.open_callback_run(
                            topic, partition, run.values, targets, run.keys, stamps
                        )
            else:
                if future:  # started with the others when the loop takes them
                    self.staged_futures.append(on_delivery)  # type: ignore[arg-type]
                self.incoming.append(
                    (topic, value, key, partition, headers, timestamp, on_delivery)
                )
                self.end_run()
            if self.scheduled:
                return
            self.scheduled = True
            item = self.incoming[-1]
            index = len(item.values) - 1 if type(item) is _Run else -1
        self._schedule(item, index)

    def _schedule(self, own: _Item, index: int = -1) -> None:
        """Ask the loop to take what is staged; ``own`` is the caller's item.

        ``index`` is the caller's record in ``own`` when it is a run. Should
        the portal refuse (it has shut down), the caller's record is
        withdrawn (the caller gets the error) and every other record staged
        meanwhile by other threads fails through its callback, future or the
        next ``flush``: none is dropped unreported. Had the loop taken the
        caller's record meanwhile (a flush or close took what was staged), it
        is the loop's to report, and the caller gets no error.
        """
        try:
            self.portal.call_soon(self.take)
        except BaseException as exc:
            if self._unstage(own, index, exc):
                raise

    def hurry_up(self) -> None:
        """Have the loop send what is buffered or staged now, without linger (any thread)."""
        with self.lock:
            self.hurry = True
            if self.scheduled or self.closed:
                return  # the take already asked for (or close's) sends it
            self.scheduled = True
        try:
            self.portal.call_soon(self.take)
        except BaseException as exc:  # the portal shut down: fail what others staged
            self._unstage(None, -1, exc)

    def _unstage(self, own: _Item | None, index: int, exc: BaseException) -> bool:
        """Withdraw the caller's record, fail the others staged; False: the loop has it."""
        with self.lock:
            self.scheduled = False
            items, self.incoming = self.incoming, []
            self.staged_futures = []
            self.end_run()
            if not any(item is own for item in items):
                withdrawn = False
            elif index >= 0:
                assert isinstance(own, _Run)
                del own.values[index]
                if own.keys is not None:
                    del own.keys[index]
                if own.timestamps is not None:
                    del own.timestamps[index]
                if own.callbacks is not None:
                    del own.callbacks[index]
                self.queued -= 1
                if own.futures:
                    self.futures -= 1
                if not own.values:
                    items = [item for item in items if item is not own]
                withdrawn = True
            else:
                assert own is not None  # None is never in items
                items = [item for item in items if item is not own]
                self.queued -= _count(own)
                if _future_of(own) is not None:
                    self.futures -= 1
                withdrawn = True
        if items:
            error = ClosedError("the pykaf portal shut down before the record was sent")
            error.__cause__ = exc
            for item in items:
                self._fail(item, error)
        return withdrawn

    def _wait_for_room(self, deadline: float | None, full: bool = False) -> None:
        if self.portal.in_loop_thread():  # waiting here would stop the loop that makes room
            raise BufferFullError(f"{MAX_PENDING} records are waiting for buffer space")
        while self.queued - self.accepted >= MAX_PENDING:
            if self.closed:
                raise ClosedError("the producer is closed")
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                if full:
                    raise BufferFullError(
                        f"{MAX_PENDING} records wait for space in the producer's full buffer"
                    )
                raise KafkaTimeoutError("no buffer space within the timeout")
            self.room.clear()
            self.waiting = True
            if self.queued - self.accepted >= MAX_PENDING:
                self.room.wait(wait)

    def pending(self) -> int:
        """``produce`` records not yet delivered, or whose callback has not run yet."""
        return self.queued - self.futures - self.settled - self.served

    def end_run(self) -> None:
        """Under ``lock``: the next plain record starts a new run."""
        self.run = None
        self.close_runs()

    def serve(self) -> int:
        """Run the callbacks of delivered records in this thread; return how many ran.

        A callback's exception propagates (the others stay for the next call).
        """
        ready = self.ready
        count = 0
        try:
            while True:
                try:
                    entry = ready.popleft()
                except IndexError:
                    return count
                if type(entry) is tuple:
                    count += 1
                    entry[0](entry[1], entry[2])
                    continue
                assert isinstance(entry, _Settled)
                callbacks, error, i, n = (
                    entry.callbacks,
                    entry.error,
                    entry.next,
                    len(entry.callbacks),
                )
                topic, partition, offset, ts = (
                    entry.topic,
                    entry.partition,
                    entry.offset,
                    entry.timestamp,
                )
                stamps = entry.stamps
                try:
                    while i < n:
                        callback = callbacks[i]
                        i += 1
                        count += 1
                        if stamps is not None:
                            ts = stamps[i - 1]
                        md = _new_metadata(
                            (topic, partition, offset + i - 1 if offset >= 0 else -1, ts)
                        )
                        callback(error, md)
                finally:
                    if i < n:  # a callback raised: the rest stay first in line
                        entry.next = i
                        ready.appendleft(entry)
        finally:
            if count:
                with self.ready_lock:
                    self.served += count

    def wait_ready(self, timeout: float | None) -> None:
        """Wait until a callback is ready, nothing is pending, or ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.ready_lock:
            self.pollers += 1
        try:
            while not self.ready and self.pending() > 0 and not self.finished:
                wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
                if wait <= 0:
                    return
                self.ready_event.clear()
                if self.ready or self.pending() <= 0:
                    return
                self.ready_event.wait(wait)
        finally:
            with self.ready_lock:
                self.pollers -= 1

    def _done_with(self, count: int = 1) -> None:
        """In the loop: ``count`` records left the queue (buffered, failed or withdrawn)."""
        self.accepted += count
        if self.waiting and self.queued - self.accepted < MAX_PENDING // 2:
            self.waiting = False
            self.room.set()

    # -- loop side ---------------------------------------------------------------

    def take(self) -> None:
        with self.lock:
            items, self.incoming = self.incoming, []
            futures, self.staged_futures = self.staged_futures, []
            self.end_run()
            self.scheduled = False
            hurry, self.hurry = self.hurry, False
        started = bool(futures) and not (self.backlog or self.draining or self.finished)
        if started:  # they are offered now: start them all under one hold of the lock
            self._start_all(futures)
        i, n = 0, len(items)
        while i < n:
            item = items[i]
            if type(item) is tuple and not (self.backlog or self.draining or self.finished):
                # Staged records in a row go in one loop (the usual case).
                stop = self._offer_records(items, i)
                if stop > i:
                    i = stop
                    continue
            self.submit(item)  # another kind of item, or the buffer is full
            if started and self.backlog:
                # The buffer filled: the rest wait, and may still be cancelled.
                self._unstart(items[i:])
                started = False
            i += 1
        if hurry:  # a send() waits for one of these records: no linger for it
            if self.backlog or self.draining:
                self.hurry_after_drain = True
            else:
                self.producer.send_now()

    def _start_all(self, futures: list[_DeliveryFuture]) -> None:
        """``set_running_or_notify_cancel`` for many futures at once."""
        pending, running = _futures.PENDING, _futures.RUNNING
        started = []
        with self.condition:
            for future in futures:
                state = future._state
                if state == pending:
                    future._state = running
                    started.append(future)
                elif state == _futures.CANCELLED:
                    future.set_running_or_notify_cancel()  # tells its waiters, once
        self.unsettled.update(started)

    def _unstart(self, items: list[_Item]) -> None:
        """Back to pending: the futures of records that wait for buffer space."""
        futures = [future for future in map(_future_of, items) if future is not None]
        with self.condition:
            for future in futures:
                if future._state == _futures.RUNNING:
                    future._state = _futures.PENDING
        self.unsettled.difference_update(futures)

    def submit(self, item: _Item) -> None:
        if self.finished:
            self._fail(item, ClosedError("the producer is closed"))
        elif self.backlog or self.draining:
            self.backlog.append(item)
        elif isinstance(item, trio.Event):
            item.set()
        elif not (self._offer_now(item)):
            self.backlog.append(item)
            self.draining = True
            try:
                self.portal.start_soon(self._drain)
            except BaseException as exc:
                self.draining = False
                self.fail_all(exc)

    def _offer_now(self, item: _Item) -> bool:
        """Buffer ``item`` without waiting; False when it must wait (in the backlog)."""
        if isinstance(item, tuple):
            return self._offer_produce(item)
        if isinstance(item, _Run):
            if len(item.values) - item.start >= BULK_RUN:
                return False  # send_batch is async: the drainer sends it
            return self._offer_run(item)
        return False

    def resolve_futures(self) -> None:
        """In the loop: resolve the futures of settled records, under one hold of the condition.

        What ``Future.set_result``/``set_exception`` do for each, then their
        done-callbacks (in this thread, the loop's).
        """
        settled = self.settled_futures
        if not settled:
            return
        items = settled[:]
        settled.clear()
        with_callbacks = []
        finished, running = _futures.FINISHED, _futures.RUNNING
        with self.condition:
            for future in items:
                if future._state != running:  # failed already (the producer closed)
                    continue
                future._state = finished
                if future._lazy_waiters or future._lazy_callbacks:  # made when used
                    with_callbacks.append(future)
            _tell_waiters(with_callbacks)
            self.condition.notify_all()
        self.unsettled.difference_update(items)
        for future in with_callbacks:
            if future._lazy_callbacks:
                future._invoke_callbacks()  # type: ignore[attr-defined]

    def _settled_one(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        """The async producer's ``on_delivery`` for a ``produce`` record without a callback."""
        self.settled += 1
        if error is not None:
            self.unreported.append((metadata.topic, metadata.partition, 1, error))
        if self.pollers:
            self.ready_event.set()

    def _failed(self, topic: str, partition: int | None, count: int, error: BaseException) -> None:
        """``count`` plain ``produce`` records failed before reaching the buffer."""
        self.settled += count
        self.unreported.append((topic, -1 if partition is None else partition, count, error))
        if self.pollers:
            self.ready_event.set()

    def _callback(self, on_delivery: OnDelivery) -> _Deliver:
        deliver = self._deliver
        if deliver is None or deliver.callback is not on_delivery:
            deliver = self._deliver = _Deliver(self, on_delivery)
        return deliver

    def _target(self, on_delivery: OnDelivery | None) -> OnDelivery:
        """The async producer's ``on_delivery`` for a staged record's own."""
        if on_delivery is None:
            return self._settled_one
        if type(on_delivery) is _DeliveryFuture:
            return on_delivery  # resolved in the loop
        return self._callback(on_delivery)  # run by poll/flush

    def _offer_produce(self, rec: tuple[Any, ...]) -> bool:
        """Buffer one staged record that is not in a run; False when the buffer is full."""
        return self._offer_records((rec,), 0) == 1

    def _offer_records(self, items: Sequence[Any], start: int) -> int:
        """Buffer the staged records (tuples) from ``items[start]`` on, one by one.

        Stops at the first item that is not one, or at a record the full
        buffer refuses; returns its index (``len(items)`` when all went).
        """
        send = self.producer.send_nowait
        settled = self._settled_one
        running = _futures.RUNNING
        i, n = start, len(items)
        try:
            while i < n:
                rec = items[i]
                if type(rec) is not tuple:
                    break
                topic, value, key, partition, headers, timestamp, on_delivery = rec
                if on_delivery is None:
                    target: OnDelivery = settled
                elif type(on_delivery) is _DeliveryFuture:
                    if on_delivery._state != running and not on_delivery.start():
                        i += 1  # cancelled while it waited
                        continue
                    target = on_delivery
                else:
                    target = self._callback(on_delivery)
                try:
                    send(
                        topic,
                        value,
                        key=key,
                        partition=partition,
                        headers=headers,
                        timestamp=timestamp,
                        on_delivery=target,
                    )
                except BufferFullError:
                    break
                except Exception as exc:
                    part = partition if type(partition) is int else -1
                    ts = -1 if timestamp is None else timestamp
                    target(exc, RecordMetadata(topic, part, -1, ts))
                i += 1
        finally:
            self._done_with(i - start)
        return i

    def _offer_run(self, run: _Run) -> bool:
        """Buffer a run's records one by one; False when the buffer filled first."""
        send = self.producer.send_nowait
        topic, partition, values, keys = run.topic, run.partition, run.values, run.keys
        callbacks, futures, stamps = run.callbacks, run.futures, run.timestamps
        target: OnDelivery = self._settled_one
        running = _futures.RUNNING
        start = done = run.start
        try:
            for i in range(start, len(values)):
                if callbacks is not None:
                    target = callbacks[i]
                    if not futures:
                        target = self._callback(target)
                    elif target._state != running and not target.start():  # type: ignore[attr-defined]
                        done = i + 1  # cancelled while it waited
                        continue
                try:
                    send(
                        topic,
                        values[i],
                        key=None if keys is None else keys[i],
                        partition=partition,
                        timestamp=None if stamps is None else stamps[i],
                        on_delivery=target,
                    )
                except BufferFullError:
                    run.start = i
                    return False
                except Exception as exc:
                    if callbacks is None:
                        self._failed(topic, partition, 1, exc)
                    else:
                        part = -1 if partition is None else partition
                        ts = -1 if stamps is None else stamps[i]
                        target(exc, RecordMetadata(topic, part, -1, ts))
                done = i + 1
            run.start = done
            return True
        finally:
            self._done_with(done - start)

    async def _send_run(self, run: _Run) -> None:
        """Hand a long run to ``send_batch``; watch its delivery for ``len`` and ``flush``."""
        hook: _RunSettled | _RunResolved | None = None
        if run.futures:
            self._done_with(self._start_run(run))
            if not run.values:
                return
            hook = _RunResolved(self, run)
        elif run.callbacks is not None:
            hook = _RunSettled(self, run)
        values, keys, stamps = run.values, run.keys, run.timestamps
        if run.start:
            values = values[run.start :]
            keys = None if keys is None else keys[run.start :]
            stamps = None if stamps is None else stamps[run.start :]
        count = len(values)
        try:
            delivery = await self.producer.send_batch(
                run.topic,
                values,
                keys=keys,
                timestamps=stamps,
                partition=run.partition,
                on_settle=hook,
            )
        except trio.Cancelled:
            self._done_with(count)
            self._fail_run(run, ClosedError("the pykaf portal shut down"), hook)
            raise
        except Exception as exc:
            self._done_with(count)
            self._fail_run(run, exc, hook)
            return
        self._done_with(count)
        if hook is not None:
            return  # each record's callback hears of it: nothing to count or keep
        # Its failures come to this feeder (for flush), not to the async
        # producer's flush as well.
        delivery.observed = True
        self.open_runs.append((delivery, count))
        if not self.watching:
            self.watching = True
            try:
                self.portal.start_soon(self._watch_runs)
            except BaseException:
                self.watching = False
                raise

    def _start_run(self, run: _Run) -> int:
        """Start the futures of a ``send_async`` run; drop the cancelled ones, return how many.

        What ``set_running_or_notify_cancel`` does for each, under one hold of
        the shared condition.
        """
        every = cast("list[_DeliveryFuture]", run.callbacks)
        futures = every[run.start :]
        pending, running = _futures.PENDING, _futures.RUNNING
        cancelled = False
        with self.condition:
            for future in futures:
                state = future._state
                if state == pending:
                    future._state = running
                elif state != running:
                    cancelled = True
            if cancelled:
                for future in futures:
                    if future._state == _futures.CANCELLED:
                        future.set_running_or_notify_cancel()  # tells its waiters, once
        if not cancelled:
            return 0
        keep = [i for i in range(run.start, len(run.values)) if every[i]._state == running]
        dropped = len(run.values) - run.start - len(keep)
        run.values = [run.values[i] for i in keep]
        if run.keys is not None:
            run.keys = [run.keys[i] for i in keep]
        if run.timestamps is not None:
            run.timestamps = [run.timestamps[i] for i in keep]
        run.callbacks = [every[i] for i in keep]
        run.start = 0
        return dropped

    def _fail_run(
        self, run: _Run, error: BaseException, hook: _RunSettled | _RunResolved | None = None
    ) -> None:
        """The records of ``run`` not buffered yet (not settled, with ``hook``) failed."""
        callbacks = run.callbacks
        if callbacks is None:
            self._failed(run.topic, run.partition, len(run.values) - run.start, error)
            return
        if run.futures:  # those resolved already keep their outcome
            if isinstance(hook, _RunResolved):
                hook.fail(error)
                return
            for future in callbacks[run.start :]:
                self.unsettled.discard(future)
                _settle(future, error)  # type: ignore[arg-type]
            return
        assert not isinstance(hook, _RunResolved)
        indices = range(run.start, len(callbacks)) if hook is None else hook.fail_rest()
        topic, part, stamps = (
            run.topic,
            -1 if run.partition is None else run.partition,
            run.timestamps,
        )
        md = RecordMetadata(topic, part, -1, -1)
        if stamps is None:
            self.ready.extend([(callbacks[i], error, md) for i in indices])
        else:  # each record's own timestamp
            self.ready.extend(
                [
                    (callbacks[i], error, _new_metadata((topic, part, -1, stamps[i])))
                    for i in indices
                ]
            )
        if self.pollers:
            self.ready_event.set()

    async def _watch_runs(self) -> None:
        """Count the records of bulk-sent runs as they settle (in order)."""
        try:
            while self.open_runs:
                delivery = self.open_runs[0][0]
                with suppress(DeliveryError):
                    await delivery.wait()
                await self.collect_runs()
        finally:
            self.watching = False

    async def collect_runs(self) -> None:
        """Account for the settled runs at the front of ``open_runs`` (never blocks).

        The futures of settled ``send_async`` records are resolved too.
        """
        self.resolve_futures()
        runs = self.open_runs
        while runs and runs[0][0].done:
            delivery, count = runs.popleft()
            try:
                await delivery.wait()  # settled: returns at once
            except DeliveryError as exc:
                self.unreported.extend(exc.failures)
            self.settled += count
            if self.pollers:
                self.ready_event.set()

    async def _drain(self) -> None:
        try:
            while self.backlog:
                item = self.backlog[0]
                if isinstance(item, _Run):
                    if len(item.values) - item.start >= BULK_RUN:
                        await self._hand_over(item)
                        continue
                    if not self._offer_run(item):
                        if not await self._wait_for_space():
                            return
                        continue
                elif isinstance(item, tuple):
                    if not self._offer_produce(item):
                        if not await self._wait_for_space():
                            return
                        continue
                elif isinstance(item, _Batch):
                    await self._hand_over(item)
                    continue
                else:
                    item.set()
                self.backlog.popleft()
            if self.hurry_after_drain:
                self.hurry_after_drain = False
                self.producer.send_now()
        finally:
            self.draining = False
            if self.backlog:  # cancelled: the portal is shutting down
                self.fail_all(ClosedError("the pykaf portal shut down"))

    async def _hand_over(self, item: _Run | _Batch) -> None:
        """Send the backlog's first item with ``send_batch``, then take it off.

        While it is ``sending``, ``fail_all`` and ``purge`` leave it in place:
        whatever happens to the call (buffered, failed, cancelled), the send
        reports each of its records once, and it leaves the backlog here.
        """
        self.sending = item
        try:
            if isinstance(item, _Run):
                await self._send_run(item)
            else:
                await self._send_batch(item)
        finally:
            self.sending = None
            if self.backlog and self.backlog[0] is item:
                self.backlog.popleft()

    async def _wait_for_space(self) -> bool:
        """Space frees as acknowledgements arrive; False: the producer closed."""
        try:
            await self.producer.wait_for_space()
        except ClosedError as exc:
            self.fail_all(exc)
            return False
        return True

    async def _send_batch(self, batch: _Batch) -> None:
        future = batch.future
        if not future.set_running_or_notify_cancel():
            return
        self.unsettled.add(future)
        try:
            delivery = await self.producer.send_batch(
                batch.topic,
                batch.values,
                keys=batch.keys,
                headers=batch.headers,
                timestamps=batch.timestamps,
                partition=batch.partition,
            )
        except trio.Cancelled:
            self.unsettled.discard(future)
            _settle(future, ClosedError("the pykaf portal shut down"))
            raise
        except Exception as exc:
            self.unsettled.discard(future)
            _settle(future, exc)
            return
        # Someone waits for these records: their failures are reported through
        # the future, not again by flush() (wait() sets this too, but only once
        # the waiting task runs).
        delivery.observed = True
        self.portal.start_soon(self._await_delivery, delivery, future)

    async def _await_delivery(self, delivery: Any, future: Future[int]) -> None:
        try:
            count = await delivery.wait()
        except trio.Cancelled:
            _settle(future, ClosedError("the pykaf portal shut down"))
            raise
        except Exception as exc:
            _settle(future, exc)
        else:
            _settle(future, None, count)
        finally:
            self.unsettled.discard(future)

    async def wait_backlog(self) -> None:
        """Wait until everything queued before this call reached the async producer."""
        self.take()
        if self.backlog or self.draining:
            marker = trio.Event()
            self.backlog.append(marker)
            await marker.wait()

    def _fail(self, item: _Item, error: BaseException) -> None:
        if isinstance(item, trio.Event):
            item.set()
        elif isinstance(item, _Run):
            self._done_with(len(item.values) - item.start)
            self._fail_run(item, error)
        elif isinstance(item, tuple):
            self._done_with()
            topic, partition, timestamp, on_delivery = item[0], item[3], item[5], item[6]
            if on_delivery is None:
                self._failed(topic, partition, 1, error)
            elif type(on_delivery) is _DeliveryFuture:
                self.unsettled.discard(on_delivery)
                _settle(on_delivery, error)
            else:
                part = partition if type(partition) is int else -1
                self._callback(on_delivery)(
                    error, RecordMetadata(topic, part, -1, -1 if timestamp is None else timestamp)
                )
        else:
            _settle(item.future, error)

    def fail_all(self, error: BaseException) -> None:
        """Fail everything not yet settled (the producer closed or was abandoned)."""
        self.finished = True
        self.resolve_futures()  # those settled get their own outcome
        self.take()
        # The item the drainer is handing to send_batch stays: its call fails
        # (or settles) what of it is not buffered, once, when it returns.
        busy = self.backlog.popleft() if self.backlog and self.backlog[0] is self.sending else None
        while self.backlog:
            self._fail(self.backlog.popleft(), error)
        if busy is not None:
            self.backlog.append(busy)
        unsettled, self.unsettled = self.unsettled, set()
        for future in unsettled:
            _settle(future, error)
        for hook in list(self.open_hooks):
            hook.fail(error)

    async def purge(self, in_queue: bool, in_flight: bool) -> int:
        """In the loop: ``Producer.purge``; how many records were purged.

        With ``in_queue``, what is staged here fails first with ``PurgedError``
        (``incoming``, then the ``backlog``), then the async producer purges
        its own. The backlog's first item stays when the drainer is handing
        it to ``send_batch`` at that moment (``sending``): what of it is
        buffered is purged there, and a ``send_batch`` waiting for space
        fails the rest (the async purge). A purged item of the backlog leaves
        a marker in its place, so the drainer pops the slot it is working on.
        Purged failures of records without a callback are never raised by
        ``flush`` (``_merged`` leaves them out: this call told of them), also
        those of a run still being handed over, which settle later.
        """

        def records(item: _Item) -> int:
            if isinstance(item, _Batch):
                return len(item.values)
            return len(item.values) - item.start if isinstance(item, _Run) else _count(item)

        purged = 0
        if in_queue:
            error = PurgedError("purged from the producer before it was sent")
            with self.lock:
                items, self.incoming = self.incoming, []
                self.staged_futures = []  # the futures of ``items``: failed below, never started
                self.end_run()
            for item in items:
                purged += records(item)
                self._fail(item, error)
            # The item the drainer is handing to send_batch now stays: the
            # async purge fails what of it is buffered or waits for space.
            first = 1 if self.backlog and self.backlog[0] is self.sending else 0
            for i in range(first, len(self.backlog)):
                item = self.backlog[i]
                if isinstance(item, trio.Event):
                    continue
                purged += records(item)
                self._fail(item, error)
                self.backlog[i] = trio.Event()
        purged += self.producer.purge(in_queue=in_queue, in_flight=in_flight)
        await self.collect_runs()
        return purged


class Producer:
    """A blocking Kafka producer: :func:`pykaf.open_producer` for plain threads.

    Thread-safe: any number of threads may send through one producer at once;
    each thread's records keep their order. Close it (or use it as a context
    manager); a producer left open is closed at interpreter exit, delivering
    what it buffered for a few seconds.

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        produce_block_timeout: seconds :meth:`produce` waits for room when the
            buffer is full before it raises ``BufferFullError`` (0: raise at
            once, as confluent-kafka does). Default
            :data:`DEFAULT_PRODUCE_BLOCK_TIMEOUT` (5 s).
        **config: options of :class:`pykaf.ProducerConfig` (client options too),
            as for :func:`pykaf.open_producer`: ``acks``, ``linger``,
            ``compression``, ``idempotence``, ``buffer_bytes``, ...

    Raises:
        ConfigError: an invalid option.
        KafkaConnectionError: no broker could be reached.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        produce_block_timeout: float = DEFAULT_PRODUCE_BLOCK_TIMEOUT,
        **config: Any,
    ) -> None:
        if (
            not isinstance(produce_block_timeout, (int, float))
            or isinstance(produce_block_timeout, bool)
            or not produce_block_timeout >= 0
        ):
            raise ConfigError(
                f"produce_block_timeout must be a number of seconds >= 0, "
                f"not {produce_block_timeout!r}"
            )
        self._portal = get_portal()
        servers = bootstrap_argument(bootstrap_servers)
        producer, handle = self._portal.start_context(partial(open_producer, servers, **config))
        self._producer: AsyncProducer = producer
        self._handle: ContextHandle[AsyncProducer] = handle
        self._feeder = feeder = _Feeder(self._portal, producer, float(produce_block_timeout))
        _feeders.add(feeder)
        # The per-record calls go straight to the feeder's compiled fast path
        # (these shadow the methods below, which do the same with one more
        # Python frame).
        self.produce = feeder.produce  # type: ignore[method-assign]
        self.poll = feeder.poll  # type: ignore[method-assign]
        self.send_async = feeder.send_async  # type: ignore[method-assign]
        # Records still queued for the buffer go out before the producer
        # closes, also when it is closed at interpreter exit.
        handle.before_exit = self._feeder.wait_backlog
        self._close_lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._feeder.closed

    def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """Send one record and wait until it is acknowledged (sarama's SyncProducer).

        Each call waits a whole round trip; for throughput use
        :meth:`send_async` or :meth:`send_many`, or send from many threads.

        Args:
            topic: the topic.
            value: the record's value (bytes, or None for a tombstone).
            key: the record's key; with the default partitioner it picks the partition.
            partition: a partition, overriding the partitioner.
            headers: ``(name, value)`` pairs.
            timestamp: milliseconds since the epoch; None: now.
            timeout: seconds to wait in all (buffer space and acknowledgement).

        Returns:
            Where the record was written: ``topic``, ``partition``, ``offset``,
            ``timestamp``.

        Raises:
            KafkaTimeoutError: ``timeout`` passed. The record may still be
                delivered if it had already been buffered.
            ClosedError: the producer is closed.
            PykafError: the record's own error: ``RecordTooLargeError``,
                ``UnknownTopicOrPartitionError``, or the broker's error once
                retries are exhausted or ``delivery_timeout`` passes
                (``TypeError`` for a value that is not bytes).
        """
        self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        feeder = self._feeder
        future = _DeliveryFuture(feeder)
        feeder.stage_record(topic, value, key, partition, headers, timestamp, future, deadline)
        feeder.hurry_up()  # the record's batch is sent without waiting for linger
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        return wait_future(future, remaining)

    def send_async(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> Future[RecordMetadata]:
        """Send one record without waiting; return a future of its metadata.

        The future resolves once the record is acknowledged (or fails with its
        error). Its done-callbacks run in the portal's loop thread: keep them
        short, and do not call blocking pykaf methods from them.

        When the async producer's buffer is full, the record waits for space in
        the loop (it is never dropped); once :data:`MAX_PENDING` records wait,
        this call blocks until there is room, at most ``timeout`` seconds.
        Cancelling the future withdraws the record only while it still waits.

        Arguments are those of :meth:`send`.

        Raises:
            KafkaTimeoutError: no room within ``timeout``.
            ClosedError: the producer is closed.
        """
        future: Future[RecordMetadata] = self._feeder.send_async(
            topic,
            value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp=timestamp,
            timeout=timeout,
        )
        return future

    def produce(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> None:
        """Stage one record and return at once (confluent-kafka's ``produce``).

        The record is staged in this thread and handed to the portal's loop
        with the others staged meanwhile, in one hop per chunk, never one per
        record. ``on_delivery(error, metadata)`` runs in the thread that calls
        :meth:`poll` or :meth:`flush` once the record is acknowledged (``error``
        None) or has failed. A record without ``on_delivery`` that fails is
        reported by the next :meth:`flush` (``DeliveryError``).

        Arguments are those of :meth:`send`; ``on_delivery`` is called with
        ``(error, metadata)`` from ``poll``/``flush``.

        Raises:
            BufferFullError: the buffer stayed full for ``produce_block_timeout``
                seconds (:data:`MAX_PENDING` records wait ahead of a full buffer).
            ClosedError: the producer is closed.
        """
        self._feeder.produce(
            topic,
            value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp=timestamp,
            on_delivery=on_delivery,
        )

    def poll(self, timeout: float | None = 0) -> int:
        """Run the ``on_delivery`` callbacks of delivered records, in this thread.

        Args:
            timeout: seconds to wait for a first callback when none is ready
                (0: do not wait; None: until one is ready). Returns early when
                no ``produce`` record is waiting for delivery.

        Returns:
            How many callbacks ran.

        Raises:
            Exception: whatever a callback raised (the callbacks after it run at
                the next call).
        """
        return self._feeder.poll(timeout)

    def __len__(self) -> int:
        """``produce`` records not yet delivered, or whose callback has not run yet."""
        return self._feeder.pending()

    def send_many(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Sequence[Headers | None] | None = None,
        timestamps: Any = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Send many records at once and wait until all are acknowledged.

        The bulk path (the async ``send_batch``): values are encoded in Cython
        with no Python object per record when they come as pyarrow arrays or
        :class:`pykaf.codec.BinaryColumn`.

        Args:
            topic: the topic.
            values: a sequence of ``bytes | None`` (any iterable is read into a
                list), a pyarrow binary or string array, or a BinaryColumn.
            keys: the same kinds, one key per value; None: no keys.
            headers: one header list (or None) per value.
            timestamps: one timestamp (ms) per value; None: now.
            partition: one partition for all; None: the partitioner decides
                (sticky without keys, by key otherwise).
            timeout: seconds to wait in all.

        Returns:
            How many records were acknowledged (all of them).

        Raises:
            DeliveryError: some records failed; ``.failures`` says which and why.
            KafkaTimeoutError: ``timeout`` passed (records already buffered are
                still delivered).
            ValueError: columns of different lengths.
            ClosedError: the producer is closed.
        """
        future = self.send_many_async(
            topic, values, keys=keys, headers=headers, timestamps=timestamps, partition=partition
        )
        return wait_future(future, timeout)

    def send_many_async(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Sequence[Headers | None] | None = None,
        timestamps: Any = None,
        partition: int | None = None,
    ) -> Future[int]:
        """Like :meth:`send_many`, but return at once with a future of the count.

        Batches sent this way are pipelined: the next one is encoded while
        earlier ones are in flight. They queue without a bound, so a caller
        sending many keeps only a few futures outstanding (wait for the oldest
        before sending more).

        Returns:
            A ``concurrent.futures.Future`` that gets the number of records
            once all are acknowledged, or :class:`~pykaf.errors.DeliveryError`.

        Raises:
            ValueError: columns of different lengths (through the future).
            ClosedError: the producer is closed.
        """
        self._portal.check_caller()
        values = _as_column(values)
        keys = None if keys is None else _as_column(keys)
        if headers is not None:
            headers = _as_column(headers)
        if timestamps is not None:
            timestamps = _as_column(timestamps)
        future: Future[int] = Future()
        self._feeder.put(_Batch(topic, values, keys, headers, timestamps, partition, future))
        return future

    def send_now(self) -> None:
        """Send what is staged or buffered now without waiting for ``linger``; return at once.

        :meth:`send` and a wait on a ``send_async`` future's ``result()`` or
        ``exception()`` do this themselves; call it before waiting for records
        some other way (``concurrent.futures.wait``, ``on_delivery`` callbacks
        from :meth:`poll`) when they should not linger.

        Raises:
            ClosedError: the producer is closed.
        """
        if self._feeder.closed:
            raise ClosedError("the producer is closed")
        self._feeder.hurry_up()

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every record sent so far is acknowledged or has failed.

        Results still arrive through each call's own return value or future;
        the ``on_delivery`` callbacks of :meth:`produce` records run here, in
        this thread, before flush returns (or raises).

        Returns:
            How many ``produce`` records are still not delivered (``len(self)``):
            0, unless other threads produced meanwhile.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first (unlike confluent-kafka,
                which returns the count left instead).
            DeliveryError: records failed that nobody was told of (no future,
                no ``on_delivery``).
        """
        try:
            self._portal.run(self._aflush, timeout=timeout)
        except Exception:
            self._feeder.serve()
            raise
        self._feeder.serve()
        return self._feeder.pending()

    async def _aflush(self) -> None:
        feeder = self._feeder
        await feeder.wait_backlog()
        try:
            await self._producer.flush()
        except DeliveryError as exc:
            await feeder.collect_runs()
            raise _merged(feeder, exc) from None
        await feeder.collect_runs()
        error = _merged(feeder, None)
        if error is not None:
            raise error

    def purge(self, in_queue: bool = True, in_flight: bool = True) -> int:
        """Give up records not delivered yet (librdkafka's purge); return how many.

        Each purged record fails with :class:`~pykaf.errors.PurgedError`: its
        ``on_delivery`` runs at the next :meth:`poll` or :meth:`flush`, its
        future raises it; a purged record without either is not reported by
        :meth:`flush` (this call told of it).

        Args:
            in_queue: purge records not in a request now: those staged in this
                object and not handed to the loop yet, and those buffered in
                the async producer (``PurgedError.in_flight`` False).
            in_flight: purge the records of Produce requests already written:
                they fail now with ``in_flight`` True and the broker's answer
                is ignored, so the broker may have written them (sending them
                again may duplicate them).

        As :meth:`pykaf.Producer.purge`: an idempotent producer bumps its
        epoch after purging batches that held sequence numbers, and a
        transaction with purged records must be aborted. A ``send_many``
        batch or a long run of ``produce`` records the loop is handing to a
        full buffer at that moment is purged too: what of it was buffered,
        and the rest of it. Returns once the purge is done.
        """
        self._portal.check_caller()
        if self.closed:
            return 0
        return self._portal.run(self._feeder.purge, in_queue, in_flight)

    # -- transactions ------------------------------------------------------------

    @property
    def txn_status(self) -> TxnStatus | None:
        """The transaction status; None without ``transactional_id``."""
        return self._producer.txn_status

    def begin_transaction(self) -> None:
        """Open a transaction: records sent from now on belong to it.

        Raises:
            KafkaError: as the async :meth:`pykaf.Producer.begin_transaction`:
                ``TransactionStateError``, ``TransactionAbortableError``,
                ``ProducerFencedError``, ``ConfigError`` (no ``transactional_id``).
        """
        self._portal.check_caller()
        self._portal.run_sync(self._producer.begin_transaction)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record sent so far (from any thread), then commit.

        Raises:
            KafkaTimeoutError: ``timeout`` passed; calling it again retries.
            KafkaError: as the async :meth:`pykaf.Producer.commit_transaction`:
                ``TransactionAbortableError`` (abort, then begin again),
                ``ProducerFencedError`` (close), ``TransactionStateError``.
        """
        self._portal.check_caller()
        self._portal.run(self._end_transaction, True, timeout=timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction; its unsent records fail with TransactionAbortedError.

        Raises:
            KafkaTimeoutError: ``timeout`` passed; calling it again retries.
            TransactionStateError: no transaction is open.
            ProducerFencedError: another producer took the transactional id.
        """
        self._portal.check_caller()
        self._portal.run(self._end_transaction, False, timeout=timeout)

    async def _end_transaction(self, commit: bool) -> None:
        # Records other threads handed over before this call belong to the transaction.
        await self._feeder.wait_backlog()
        if commit:
            await self._producer.commit_transaction()
        else:
            await self._producer.abort_transaction()

    def send_offsets_to_transaction(
        self, offsets: Offsets, group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a consumer group's offsets with the open transaction.

        Arguments are those of :meth:`pykaf.Producer.send_offsets_to_transaction`
        (``{(topic, partition): next_offset}`` and a :class:`pykaf.GroupMetadata`
        or group id).
        """
        self._portal.check_caller()
        self._portal.run(
            self._producer.send_offsets_to_transaction, offsets, group_metadata, timeout=timeout
        )

    def statistics(self) -> ProducerStatistics:
        """Buffers, in-flight requests and counters, as the async producer reports them."""
        return self._portal.run_sync(self._producer.statistics)

    def close(self, timeout: float | None = None) -> None:
        """Deliver everything sent so far, then close. Idempotent.

        Args:
            timeout: seconds to wait for delivery; after them the producer is
                abandoned and records still unsettled fail with ClosedError.
                None: up to the producer's ``delivery_timeout``.

        The ``on_delivery`` callbacks of delivered :meth:`produce` records run
        here, in this thread, before it returns.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first.
            DeliveryError: records failed that nobody was told of.
        """
        self._close(None, timeout)

    def _close(self, exc: BaseException | None, timeout: float | None) -> bool:
        self._portal.check_caller()
        with self._close_lock:
            with self._feeder.lock:
                if self._feeder.closed:
                    return False
                self._feeder.closed = True
                self._feeder.end_run()
            try:
                return self._portal.run(self._aclose, exc, timeout=timeout)
            finally:
                if exc is None:  # the callbacks of what close() delivered
                    self._feeder.serve()

    async def _aclose(self, exc: BaseException | None) -> bool:
        feeder = self._feeder
        try:
            if exc is not None:  # like the async producer left by an exception: no delivery
                feeder.fail_all(ClosedError("the producer closed after an error"))
            try:
                suppressed = await self._handle.aexit(exc)
            except DeliveryError as error:
                await feeder.collect_runs()
                raise _merged(feeder, error) from None
            await feeder.collect_runs()
            unreported = _merged(feeder, None) if exc is None else None
            if unreported is not None:
                raise unreported
            return suppressed
        except BaseException:
            self._handle.abandon()
            raise
        finally:
            self._feeder.fail_all(
                ClosedError("the producer closed before the record was delivered")
            )

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the producer; after an exception, buffered records are dropped.

        As with ``async with open_producer()``: a block left normally delivers
        everything first, a block left by an exception (Ctrl-C included) closes
        at once and fails what was not delivered yet with ClosedError.
        """
        self._close(exc, None)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<pykaf.sync.Producer {state}>"


@overload
def _merged(feeder: _Feeder, error: DeliveryError) -> DeliveryError: ...
@overload
def _merged(feeder: _Feeder, error: None) -> DeliveryError | None: ...
def _merged(feeder: _Feeder, error: DeliveryError | None) -> DeliveryError | None:
    """``error`` (the async producer's) with the feeder's unreported failures added."""
    if not feeder.unreported:
        return error
    # A purged record was told of by purge() itself, an aborted one by the
    # abort (abort_transaction(), or close() aborting an open transaction), as
    # the async producer's flush() and aclose() do not raise them again.
    told = (PurgedError, TransactionAbortedError)
    failures = [f for f in feeder.unreported if not isinstance(f[3], told)]
    feeder.unreported.clear()
    if not failures:
        return error
    if error is not None:
        failures = error.failures + failures
    total = sum(n for _, _, n, _ in failures)
    return DeliveryError(
        f"{total} records failed: {failures[0][3]!r}"
        + (f" (and {len(failures) - 1} more failures)" if len(failures) > 1 else ""),
        failures,
    )


#: Every feeder of this process, for the reset after a fork.
_feeders: weakref.WeakSet[_Feeder] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A child cannot use the parent's producers (their loop thread is not
    # there): no staged run may take records without a call to the portal,
    # which raises RuntimeError in the child. The lock may have been held by
    # a thread that does not exist here.
    for feeder in list(_feeders):
        feeder.reset_lock(threading.Lock())
        feeder.end_run()
        feeder.scheduled = False
        # The parent's staged records are the parent's to send and report.
        feeder.incoming = []
        feeder.staged_futures = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _as_column(values: Any) -> Any:
    """Lists, tuples, arrays and columns pass; other iterables become lists."""
    if hasattr(values, "__len__") and hasattr(values, "__getitem__"):
        return values
    return list(values)
