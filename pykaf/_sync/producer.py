"""``pykaf.sync.Producer``: the async producer driven from plain threads.

Callers stage records straight into the async producer's own staging
(``pykaf._producer.staging.Staging``, its compiled ``RecordStager``): the
same runs, the same room in the same buffer, the same drain. This module
is that staging's owner outside the loop (:class:`_Bridge`): ``produce``
callbacks are queued for the caller's ``poll``/``flush``, ``send_async``
futures resolved in the loop a settled range at a time, and ``send_many``
staged as a call the records after it wait for.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import _base as _futures  # the states a Future moves through
from functools import partial
from types import TracebackType
from typing import Any, cast, overload

import trio

from pykaf._config import bootstrap_argument
from pykaf._producer.producer import Producer as AsyncProducer
from pykaf._producer.producer import open_producer
from pykaf._producer.records import BatchDelivery, ProducerStatistics, RecordMetadata
from pykaf._producer.staging import OnSettle, Staging, _Run
from pykaf._sync.portal import ContextHandle, Portal, get_portal, wait_future
from pykaf._txn.manager import Offsets, TxnStatus
from pykaf.codec import gc_track
from pykaf.errors import (
    ClosedError,
    ConfigError,
    DeliveryError,
    PurgedError,
    TransactionAbortedError,
)

__all__ = ["DEFAULT_PRODUCE_BLOCK_TIMEOUT", "Producer"]

#: Seconds ``produce`` waits for room in a full buffer before it raises
#: ``BufferFullError`` (the ``produce_block_timeout`` option's default).
DEFAULT_PRODUCE_BLOCK_TIMEOUT = 5.0

Headers = Sequence[tuple[str, bytes | None]]
_DONE = (_futures.CANCELLED, _futures.CANCELLED_AND_NOTIFIED, _futures.FINISHED)
OnDelivery = Callable[[BaseException | None, RecordMetadata], object]
Failure = tuple[str, int, int, BaseException]
#: RecordMetadata from a (topic, partition, offset, timestamp) tuple, in C.
_new_metadata = partial(tuple.__new__, RecordMetadata)


class _Queued:
    """A run's ``on_settle`` for records with callbacks: queued for ``poll``/``flush``.

    In the loop, one entry per settled range; the metadata is made as each
    callback runs, in the caller's thread.
    """

    __slots__ = ("bridge", "callbacks", "stamps", "topic")

    def __init__(self, bridge: _Bridge, run: _Run) -> None:
        self.bridge = bridge
        self.topic = _topic_name(run)
        self.callbacks = cast("list[OnDelivery]", run.callbacks)
        self.stamps = run.stamps  # the records' own timestamps, if they have them

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        stamps = self.stamps
        bridge = self.bridge
        bridge.ready.append(
            _Settled(
                self.callbacks[index : index + count],
                error,
                self.topic,
                partition,
                offset,
                timestamp,
                None if stamps is None or timestamp >= 0 else stamps[index : index + count],
            )
        )
        if bridge.pollers:
            bridge.ready_event.set()


class _Resolved:
    """A run's ``on_settle`` for ``send_async`` records: their futures resolved at once.

    In the loop, under one hold of the shared condition: what
    ``Future.set_result``/``set_exception`` do for each, their metadata made
    when first read. It stays in the bridge's ``open_hooks`` until every
    future is resolved, for ``fail_all``.
    """

    __slots__ = ("bridge", "futures", "left", "stamps", "topic")

    def __init__(self, bridge: _Bridge, run: _Run) -> None:
        self.bridge = bridge
        self.topic = _topic_name(run)
        self.futures = cast("list[_DeliveryFuture]", run.callbacks)
        self.stamps = run.stamps  # the records' own timestamps, if they have them
        self.left = len(self.futures)
        bridge.open_hooks.add(self)

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        bridge = self.bridge
        futures = self.futures[index : index + count]
        running, finished = _futures.RUNNING, _futures.FINISHED
        unstarted = _futures.PENDING  # a run failed while staged (a purge, a stopped loop)
        noted: list[_DeliveryFuture] = []  # with waiters or done-callbacks
        with bridge.condition:
            if error is not None:
                for future in futures:
                    if future._state is running or future._state is unstarted:
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
            bridge.condition.notify_all()
        self.left -= count
        if self.left <= 0:
            bridge.open_hooks.discard(self)
        for future in noted:
            if future._lazy_callbacks:
                future._invoke_callbacks()  # type: ignore[attr-defined]

    def fail(self, error: BaseException) -> None:
        """Fail the futures not resolved yet (the producer closed or was abandoned)."""
        self.bridge.open_hooks.discard(self)
        for future in self.futures:
            _settle(future, error)


def _topic_name(run: _Run) -> str:
    topic = run.topic
    return topic if isinstance(topic, str) else topic.name


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

    __slots__ = ("bridge", "callback")

    def __init__(self, bridge: _Bridge, callback: OnDelivery) -> None:
        self.bridge = bridge
        self.callback = callback

    def __call__(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        bridge = self.bridge
        bridge.ready.append((self.callback, error, metadata))
        if bridge.pollers:
            bridge.ready_event.set()


class _DeliveryFuture(Future[RecordMetadata]):
    """A ``send_async`` future: light to make per record, resolved in the loop.

    A ``concurrent.futures.Future`` builds a ``threading.Condition`` (a lock
    and its bookkeeping) when made; these share their producer's, so making
    one costs a few attributes. The future is its record's ``on_delivery``
    target in the async producer: the outcomes of a settled batch are queued
    and resolved together, under one hold of the shared condition
    (:meth:`_Bridge.resolve_futures`). Waiting is looped (``result``,
    ``exception``) because a shared condition also wakes waiters of other futures.
    Its lists of waiters and done-callbacks are made when first used: most
    futures never need them, and fewer objects per record spare the cyclic
    garbage collector, which otherwise costs as much as the rest of the path.
    """

    # Future's own fields as slots too (they shadow the instance dict): a
    # smaller object, quicker to make.
    __slots__ = (
        "_condition",
        "_error",
        "_lazy_callbacks",
        "_lazy_waiters",
        "_metadata",
        "_offset",
        "_state",
        "_where",
    )

    #: The producer's bridge: each producer has a subclass of its own
    #: (:attr:`_Bridge.future_type`), made by the compiled ``send_async``.
    _bridge: _Bridge

    def __init__(self, stager: object = None) -> None:
        # Future.__init__ is not called: it would build a Condition of its own.
        self._condition = self._bridge.condition
        self._state = _futures.PENDING
        self._metadata: RecordMetadata | None = None
        self._where: tuple[str, int, int] | None = None
        self._offset = -1
        self._error: BaseException | None = None
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

    # The compiled send_async makes each future untracked by the cyclic
    # garbage collector: until it holds a waiter, a done-callback or an
    # error, nothing it holds can lead back to it. Each of those tracks it.

    @property
    def _exception(self) -> BaseException | None:
        return self._error

    @_exception.setter
    def _exception(self, error: BaseException | None) -> None:
        if error is not None:
            gc_track(self)  # a traceback's frames may hold the future
        self._error = error

    @property
    def _waiters(self) -> list[Any]:
        if self._lazy_waiters is None:
            gc_track(self)
            self._lazy_waiters = []
        return self._lazy_waiters

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        gc_track(self)
        self._lazy_waiters = waiters

    @property
    def _done_callbacks(self) -> list[Callable[[Future[RecordMetadata]], object]]:
        if self._lazy_callbacks is None:
            gc_track(self)  # a callback may hold the future
            self._lazy_callbacks = []
        return self._lazy_callbacks

    @_done_callbacks.setter
    def _done_callbacks(self, callbacks: list[Callable[[Future[RecordMetadata]], object]]) -> None:
        gc_track(self)
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
        self._bridge.unsettled.add(self)
        return True

    def __call__(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        """The async producer's ``on_delivery``: keep the outcome, to be resolved soon.

        ``_result``/``_exception`` are only read once the state is FINISHED,
        which :meth:`_Bridge.resolve_futures` sets.
        """
        bridge = self._bridge
        if error is None:
            self._result = metadata
        else:
            self._exception = error
        if not bridge.settled_futures:
            bridge.portal.call_soon(bridge.resolve_futures)  # once the batch is settled
        bridge.settled_futures.append(self)

    def _wait_done(self, timeout: float | None) -> None:
        if self._state not in _DONE and timeout != 0:
            # Someone waits for the record: its batch need not wait for linger.
            self._bridge.hurry_up()
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


def _settle(future: Future[Any], error: BaseException | None, result: Any = None) -> None:
    """Resolve ``future`` unless it is already resolved or was cancelled."""
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:
        pass


class _Bridge:
    """The sync producer's side of the async producer's staging (its owner).

    Threads stage through :attr:`stager` (``produce``, ``send_async``,
    ``poll`` compiled); this object tells each record's outcome the sync
    way: ``produce`` callbacks queued in ``ready`` for the callers'
    ``poll``/``flush`` (:meth:`serve`), ``send_async`` futures resolved in
    the loop, failures of records without either kept in ``unreported``
    for the next ``flush`` (or, for runs, in the async producer's own).
    ``produce`` records not delivered yet = ``queued - futures - settled -
    served``: ``settled`` is written by the loop (records without a
    callback), ``served`` under ``ready_lock`` (callbacks run).
    """

    ready: deque[tuple[OnDelivery, BaseException | None, RecordMetadata] | _Settled]

    def __init__(self, portal: Portal, producer: AsyncProducer, staging: Staging) -> None:
        self.portal = portal
        self.producer = producer
        self.staging = staging
        self.stager = stager = staging.stager
        self.ready = stager.ready = deque()
        self.future_type = stager.future_type = type(
            "_DeliveryFuture", (_DeliveryFuture,), {"__slots__": (), "_bridge": self}
        )
        self.settled = 0
        self.served = 0
        self.ready_lock = threading.Lock()
        self.ready_event = threading.Event()
        self.pollers = 0  # threads waiting in poll (under ready_lock)
        self.unreported: list[Failure] = []
        self.hurry = False  # a send_now is asked for (under the stager's lock)
        self.finished = False
        self._deliver: _Deliver | None = None  # the last callback's wrapper, reused
        self.condition = threading.Condition()  # shared by the send_async futures
        self.settled_futures: list[_DeliveryFuture] = []  # settled, not resolved yet
        self.unsettled: set[Future[Any]] = set()  # started loose futures, send_many's
        self.open_hooks: set[_Resolved] = set()  # send_async runs not all resolved

    # -- Owner: what the staging asks (in the loop) ------------------------------

    def hook(self, run: _Run) -> tuple[OnSettle | None, bool]:
        """The run's ``on_settle`` hook, and whether it tells the run's failures."""
        if run.futures:
            return _Resolved(self, run), True
        if run.callbacks is not None:
            return _Queued(self, run), True
        return self._count, False  # failures go to the async producer's flush

    def _count(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        self.settled += count
        if self.pollers:
            self.ready_event.set()

    def target(self, on_delivery: Any) -> OnDelivery | None:
        """``send_nowait``'s ``on_delivery`` for a loose record; None: a cancelled future."""
        if on_delivery is None:
            return self._settled_one
        if isinstance(on_delivery, _DeliveryFuture):
            return on_delivery if on_delivery.start() else None
        deliver = self._deliver
        if deliver is None or deliver.callback is not on_delivery:
            deliver = self._deliver = _Deliver(self, on_delivery)
        return deliver

    def fail_one(self, on_delivery: Any, error: BaseException, metadata: RecordMetadata) -> None:
        """A loose record failed before it was sent."""
        if on_delivery is None:
            self.settled += 1
            self.unreported.append((metadata.topic, metadata.partition, 1, error))
        elif isinstance(on_delivery, _DeliveryFuture):
            self.unsettled.discard(on_delivery)
            _settle(on_delivery, error)
            return
        else:
            self.ready.append((on_delivery, error, metadata))
        if self.pollers:
            self.ready_event.set()

    def start(self, run: _Run) -> bool:
        """Start the futures of a ``send_async`` run; drop the cancelled ones.

        What ``set_running_or_notify_cancel`` does for each, under one hold
        of the shared condition. False: none is left.
        """
        futures = cast("list[_DeliveryFuture]", run.callbacks)
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
        if cancelled:
            keep = [i for i, future in enumerate(futures) if future._state == running]
            run.values = [run.values[i] for i in keep]
            if run.keys is not None:
                run.keys = [run.keys[i] for i in keep]
            if run.stamps is not None:
                run.stamps = [run.stamps[i] for i in keep]
            run.callbacks = [futures[i] for i in keep]
        return bool(run.values)

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Start ``fn(*args)`` as a task of the portal (in the loop)."""
        self.portal.start_soon(fn, *args)

    def poll_wait(self, timeout: float | None) -> int:
        """``poll`` unless it has nothing to do at once: wait up to ``timeout``, serve."""
        if not self.ready:
            if timeout == 0:
                return 0
            self.wait_ready(timeout)
        return self.serve()

    # -- loop side ---------------------------------------------------------------

    def _settled_one(self, error: BaseException | None, metadata: RecordMetadata) -> None:
        """``on_delivery`` of a loose ``produce`` record without a callback."""
        self.settled += 1
        if error is not None:
            self.unreported.append((metadata.topic, metadata.partition, 1, error))
        if self.pollers:
            self.ready_event.set()

    def resolve_futures(self) -> None:
        """In the loop: resolve the futures of settled loose records, under one hold.

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

    def fail_all(self, error: BaseException) -> None:
        """Fail everything not settled yet (the producer closed or was abandoned)."""
        self.finished = True
        self.resolve_futures()  # those settled get their own outcome
        self.staging.fail_staged(error)
        unsettled, self.unsettled = self.unsettled, set()
        for future in unsettled:
            _settle(future, error)
        for hook in list(self.open_hooks):
            hook.fail(error)
        self.ready_event.set()

    async def await_delivery(self, delivery: BatchDelivery, future: Future[int]) -> None:
        """Resolve a ``send_many`` future once its records are settled."""
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

    def _send_now(self) -> None:
        self.hurry = False
        if not self.producer.closed:
            self.producer.send_now()

    # -- thread side ---------------------------------------------------------------

    def hurry_up(self) -> None:
        """Have the loop send what is staged or buffered now, without linger (any thread)."""
        with self.stager.lock:
            if self.hurry or self.staging.closed:
                return
            self.hurry = True
        try:
            self.portal.call_soon(self._send_now)
        except BaseException:  # the portal shut down: nothing to hurry
            self.hurry = False

    def pending(self) -> int:
        """``produce`` records not yet delivered, or whose callback has not run yet."""
        return self.stager.queued - self.stager.futures - self.settled - self.served

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
        try:
            staging = self._portal.run_sync(producer.open_staging)
        except BaseException:
            handle.exit(timeout=1.0)
            raise
        self._staging = staging
        self._bridge = bridge = _Bridge(self._portal, producer, staging)
        staging.owner = bridge
        staging.block = float(produce_block_timeout)
        staging.call_in_loop = self._portal.run
        _bridges.add(bridge)
        # The per-record calls go straight to the staging's compiled fast path
        # (these shadow the methods below, which do the same with one more
        # Python frame).
        self.produce = staging.stager.produce  # type: ignore[method-assign]
        self.poll = staging.stager.poll  # type: ignore[method-assign]
        self.send_async = staging.stager.send_async  # type: ignore[method-assign]
        # Records still staged go out before the producer closes, also when
        # it is closed at interpreter exit.
        handle.before_exit = staging.settle
        self._close_lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._staging.closed

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
        future = self._staging.stager.send_async(
            topic,
            value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp=timestamp,
            timeout=timeout,
        )
        self._bridge.hurry_up()  # the record's batch is sent without waiting for linger
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        metadata: RecordMetadata = wait_future(future, remaining)
        return metadata

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

        When the async producer's buffer is full, this call blocks until there
        is room, at most ``timeout`` seconds. Cancelling the future withdraws
        the record only while it is still staged.

        Arguments are those of :meth:`send`.

        Raises:
            KafkaTimeoutError: no room within ``timeout``.
            ClosedError: the producer is closed.
        """
        future: Future[RecordMetadata] = self._staging.stager.send_async(
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

        The record is staged in this thread, straight into the async
        producer's staging, and appended to its batch with the others staged
        meanwhile when the loop next drains: never one hop per record.
        ``on_delivery(error, metadata)`` runs in the thread that calls
        :meth:`poll` or :meth:`flush` once the record is acknowledged
        (``error`` None) or has failed. A record without ``on_delivery`` that fails is
        reported by the next :meth:`flush` (``DeliveryError``).

        Arguments are those of :meth:`send`; ``on_delivery`` is called with
        ``(error, metadata)`` from ``poll``/``flush``.

        Raises:
            BufferFullError: the buffer stayed full for ``produce_block_timeout``
                seconds.
            ClosedError: the producer is closed.
        """
        self._staging.stager.produce(
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
        return self._staging.stager.poll(timeout)

    def __len__(self) -> int:
        """``produce`` records not yet delivered, or whose callback has not run yet."""
        return self._bridge.pending()

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
        bridge, producer = self._bridge, self._producer

        async def send() -> None:
            if not future.set_running_or_notify_cancel():
                return
            bridge.unsettled.add(future)
            try:
                delivery = await producer.send_batch(
                    topic,
                    values,
                    keys=keys,
                    headers=headers,
                    timestamps=timestamps,
                    partition=partition,
                )
            except trio.Cancelled:
                bridge.unsettled.discard(future)
                _settle(future, ClosedError("the pykaf portal shut down"))
                raise
            except Exception as exc:
                bridge.unsettled.discard(future)
                _settle(future, exc)
                return
            # Its failures are told through the future, not again by flush().
            delivery.observed = True
            bridge.start_soon(bridge.await_delivery, delivery, future)

        self._staging.stage_call(send, partial(_settle, future), len(values))
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
        if self._staging.closed:
            raise ClosedError("the producer is closed")
        self._bridge.hurry_up()

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
            self._bridge.serve()
            raise
        self._bridge.serve()
        return self._bridge.pending()

    async def _aflush(self) -> None:
        bridge = self._bridge
        await self._staging.settle()
        try:
            await self._producer.flush()
        except DeliveryError as exc:
            bridge.resolve_futures()
            raise _merged(bridge, exc) from None
        bridge.resolve_futures()
        error = _merged(bridge, None)
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
        batch the loop is buffering at that moment (waiting for room) is
        purged too: what of it was buffered, and the rest of it, through its
        future. Returns once the purge is done.
        """
        self._portal.check_caller()
        if self.closed:
            return 0
        return self._portal.run(self._apurge, in_queue, in_flight)

    async def _apurge(self, in_queue: bool, in_flight: bool) -> int:
        purged = 0
        if in_queue:  # what is staged fails first (a send_many under way stays)
            error = PurgedError("purged from the producer before it was sent")
            purged = self._staging.fail_staged(error)
        purged += self._producer.purge(in_queue=in_queue, in_flight=in_flight)
        self._bridge.resolve_futures()
        return purged

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
        # Records other threads staged before this call belong to the transaction.
        await self._staging.settle()
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
        staging = self._staging
        with self._close_lock:
            with staging.stager.lock:
                if staging.closed:
                    return False
                staging.closed = True
                staging.stager.close_runs()
            try:
                return self._portal.run(self._aclose, exc, timeout=timeout)
            finally:
                if exc is None:  # the callbacks of what close() delivered
                    self._bridge.serve()

    async def _aclose(self, exc: BaseException | None) -> bool:
        bridge = self._bridge
        try:
            if exc is not None:  # like the async producer left by an exception: no delivery
                bridge.fail_all(ClosedError("the producer closed after an error"))
            else:
                await self._staging.settle()
            try:
                suppressed = await self._handle.aexit(exc)
            except DeliveryError as error:
                bridge.resolve_futures()
                raise _merged(bridge, error) from None
            bridge.resolve_futures()
            unreported = _merged(bridge, None) if exc is None else None
            if unreported is not None:
                raise unreported
            return suppressed
        except BaseException:
            self._handle.abandon()
            raise
        finally:
            bridge.fail_all(ClosedError("the producer closed before the record was delivered"))

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
def _merged(bridge: _Bridge, error: DeliveryError) -> DeliveryError: ...
@overload
def _merged(bridge: _Bridge, error: None) -> DeliveryError | None: ...
def _merged(bridge: _Bridge, error: DeliveryError | None) -> DeliveryError | None:
    """``error`` (the async producer's) with the bridge's unreported failures added."""
    if not bridge.unreported:
        return error
    # A purged record was told of by purge() itself, an aborted one by the
    # abort (abort_transaction(), or close() aborting an open transaction), as
    # the async producer's flush() and aclose() do not raise them again.
    told = (PurgedError, TransactionAbortedError)
    failures = [f for f in bridge.unreported if not isinstance(f[3], told)]
    bridge.unreported.clear()
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


#: Every bridge of this process, for the reset after a fork.
_bridges: weakref.WeakSet[_Bridge] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A child cannot use the parent's producers (their loop thread is not
    # there): no staged run may take records without a call to the portal,
    # which raises RuntimeError in the child. The lock may have been held by
    # a thread that does not exist here; the parent's staged records are
    # the parent's to send and report.
    for bridge in list(_bridges):
        bridge.staging.forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _as_column(values: Any) -> Any:
    """Lists, tuples, arrays and columns pass; other iterables become lists."""
    if hasattr(values, "__len__") and hasattr(values, "__getitem__"):
        return values
    return list(values)
