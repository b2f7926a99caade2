"""``pykaf.sync.Producer``: the async producer driven from plain threads through the portal."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from functools import partial
from types import TracebackType
from typing import Any

import trio

from pykaf._config import bootstrap_argument
from pykaf._producer.producer import Producer as AsyncProducer
from pykaf._producer.producer import open_producer
from pykaf._producer.records import ProducerStatistics, RecordMetadata
from pykaf._sync.portal import ContextHandle, Portal, get_portal, wait_future
from pykaf._txn.manager import Offsets, TxnStatus
from pykaf.errors import (
    BufferFullError,
    ClosedError,
    KafkaTimeoutError,
)

__all__ = ["MAX_PENDING", "Producer"]

#: Records a sync producer accepts ahead of its async producer's buffer (in
#: transit to the loop, or waiting there for buffer space). Past that,
#: ``send_async`` blocks its caller: the backpressure a full buffer exerts.
MAX_PENDING = 10_000

Headers = Sequence[tuple[str, bytes | None]]


class _Record:
    """One ``send_async`` record on its way to the async producer."""

    __slots__ = ("future", "headers", "key", "partition", "started", "timestamp", "topic", "value")

    def __init__(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        future: Future[RecordMetadata],
    ) -> None:
        self.topic = topic
        self.value = value
        self.key = key
        self.partition = partition
        self.headers = headers
        self.timestamp = timestamp
        self.future = future
        self.started = False


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


_Item = _Record | _Batch | trio.Event


def _settle(future: Future[Any], error: BaseException | None, result: Any = None) -> None:
    """Resolve ``future`` unless it is already resolved or was cancelled."""
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:
        pass


class _Feeder:
    """Hands records from plain threads to the async producer, in order, in the loop.

    Threads append to ``incoming`` (under ``lock``) and schedule one ``take``
    callback for a burst. In the loop, records go straight into the async
    producer's buffer with ``send_nowait``; when that buffer is full they wait
    in ``backlog`` (in order, never dropped) for a drainer task that feeds them
    as space frees. Batches and flush markers travel the same queue, so one
    thread's records keep their order whatever the mix of calls.
    """

    def __init__(self, portal: Portal, producer: AsyncProducer) -> None:
        self.portal = portal
        self.producer = producer
        self.lock = threading.Lock()
        self.incoming: list[_Item] = []
        self.scheduled = False
        self.closed = False  # no more records (set by Producer.close, under lock)
        # Records not yet in the async producer's buffer = queued - accepted.
        # Each counter has one writer (threads under ``lock``; the loop), so
        # neither needs a lock of its own on the per-record path.
        self.queued = 0
        self.accepted = 0
        self.room = threading.Event()
        self.waiting = False
        # Loop side:
        self.backlog: deque[_Item] = deque()
        self.draining = False
        self.unsettled: set[Future[Any]] = set()
        self.finished = False

    # -- thread side -------------------------------------------------------------

    def put(self, item: _Item, deadline: float | None = None) -> None:
        """Queue ``item`` for the loop (any thread).

        A record first waits (until ``deadline``) while :data:`MAX_PENDING`
        records are not yet in the async producer's buffer.
        """
        record = isinstance(item, _Record)
        if record and self.queued - self.accepted >= MAX_PENDING:
            self._wait_for_room(deadline)
        with self.lock:
            if self.closed:
                raise ClosedError("the producer is closed")
            self.incoming.append(item)
            if record:
                self.queued += 1
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.portal.call_soon(self.take)
        except BaseException:
            with self.lock:
                self.scheduled = False
                if item in self.incoming:
                    self.incoming.remove(item)
                    self.queued -= record
            raise

    def _wait_for_room(self, deadline: float | None) -> None:
        if self.portal.in_loop_thread():  # waiting here would stop the loop that makes room
            raise BufferFullError(f"{MAX_PENDING} records are waiting for buffer space")
        while self.queued - self.accepted >= MAX_PENDING:
            if self.closed:
                raise ClosedError("the producer is closed")
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                raise KafkaTimeoutError("no buffer space within the timeout")
            self.room.clear()
            self.waiting = True
            if self.queued - self.accepted >= MAX_PENDING:
                self.room.wait(wait)

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
            self.scheduled = False
        for item in items:
            self.submit(item)

    def submit(self, item: _Item) -> None:
        if self.finished:
            self._fail(item, ClosedError("the producer is closed"))
        elif self.backlog or self.draining:
            self.backlog.append(item)
        elif isinstance(item, trio.Event):
            item.set()
        elif not (isinstance(item, _Record) and self._offer(item)):
            self.backlog.append(item)
            self.draining = True
            try:
                self.portal.start_soon(self._drain)
            except BaseException as exc:
                self.draining = False
                self.fail_all(exc)

    def _offer(self, rec: _Record) -> bool:
        """Try to buffer ``rec``; False when the buffer is full (try again later)."""
        future = rec.future
        if not rec.started:
            rec.started = True
            if not future.set_running_or_notify_cancel():  # cancelled while queued
                self._done_with()
                return True
        self.unsettled.add(future)
        try:
            self.producer.send_nowait(
                rec.topic,
                rec.value,
                key=rec.key,
                partition=rec.partition,
                headers=rec.headers,
                timestamp=rec.timestamp,
                on_delivery=partial(self._delivered, future),
            )
        except BufferFullError:
            self.unsettled.discard(future)
            return False
        except Exception as exc:
            self.unsettled.discard(future)
            _settle(future, exc)
        self._done_with()
        return True

    def _delivered(
        self, future: Future[RecordMetadata], error: BaseException | None, metadata: RecordMetadata
    ) -> None:
        self.unsettled.discard(future)
        _settle(future, error, metadata)

    async def _drain(self) -> None:
        try:
            while self.backlog:
                item = self.backlog[0]
                if isinstance(item, _Record):
                    if not self._offer(item):
                        # Space frees as acknowledgements arrive.
                        try:
                            await self.producer.wait_for_space()
                        except ClosedError as exc:
                            self.fail_all(exc)
                            return
                        continue
                elif isinstance(item, _Batch):
                    await self._send_batch(item)
                else:
                    item.set()
                self.backlog.popleft()
        finally:
            self.draining = False
            if self.backlog:  # cancelled: the portal is shutting down
                self.fail_all(ClosedError("the pykaf portal shut down"))

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
            return
        if isinstance(item, _Record):
            self._done_with()
        _settle(item.future, error)

    def fail_all(self, error: BaseException) -> None:
        """Fail everything not yet settled (the producer closed or was abandoned)."""
        self.finished = True
        self.take()
        while self.backlog:
            self._fail(self.backlog.popleft(), error)
        unsettled, self.unsettled = self.unsettled, set()
        for future in unsettled:
            _settle(future, error)


class Producer:
    """A blocking Kafka producer: :func:`pykaf.open_producer` for plain threads.

    Thread-safe: any number of threads may send through one producer at once;
    each thread's records keep their order. Close it (or use it as a context
    manager); a producer left open is closed at interpreter exit, delivering
    what it buffered for a few seconds.

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        **config: options of :class:`pykaf.ProducerConfig` (client options too),
            as for :func:`pykaf.open_producer`: ``acks``, ``linger``,
            ``compression``, ``idempotence``, ``buffer_bytes``, ...

    Raises:
        ConfigError: an invalid option.
        KafkaConnectionError: no broker could be reached.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str], **config: Any) -> None:
        self._portal = get_portal()
        servers = bootstrap_argument(bootstrap_servers)
        producer, handle = self._portal.start_context(partial(open_producer, servers, **config))
        self._producer: AsyncProducer = producer
        self._handle: ContextHandle[AsyncProducer] = handle
        self._feeder = _Feeder(self._portal, producer)
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
            The record's own error: ``RecordTooLargeError``, ``TypeError``,
            ``UnknownTopicOrPartitionError``, or the broker's error once retries
            are exhausted or ``delivery_timeout`` passes.
        """
        self._portal.check_caller()
        deadline = None if timeout is None else time.monotonic() + timeout
        future = self._send_async(topic, value, key, partition, headers, timestamp, deadline)
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
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._send_async(topic, value, key, partition, headers, timestamp, deadline)

    def _send_async(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        deadline: float | None,
    ) -> Future[RecordMetadata]:
        feeder = self._feeder
        if feeder.closed:
            raise ClosedError("the producer is closed")
        future: Future[RecordMetadata] = Future()
        feeder.put(_Record(topic, value, key, partition, headers, timestamp, future), deadline)
        return future

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

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or has failed.

        Results still arrive through each call's own return value or future;
        flush only waits.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first.
            DeliveryError: records failed that nobody was told of.
        """
        self._portal.run(self._aflush, timeout=timeout)

    async def _aflush(self) -> None:
        await self._feeder.wait_backlog()
        await self._producer.flush()

    # -- transactions ------------------------------------------------------------

    @property
    def txn_status(self) -> TxnStatus | None:
        """The transaction status; None without ``transactional_id``."""
        return self._producer.txn_status

    def begin_transaction(self) -> None:
        """Open a transaction: records sent from now on belong to it.

        Raises:
            as the async :meth:`pykaf.Producer.begin_transaction`:
            ``TransactionStateError``, ``TransactionAbortableError``,
            ``ProducerFencedError``, ``ConfigError`` (no ``transactional_id``).
        """
        self._portal.check_caller()
        self._portal.run_sync(self._producer.begin_transaction)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record sent so far (from any thread), then commit.

        Raises:
            KafkaTimeoutError: ``timeout`` passed; calling it again retries.
            as the async :meth:`pykaf.Producer.commit_transaction`:
            ``TransactionAbortableError`` (abort, then begin again),
            ``ProducerFencedError`` (close), ``TransactionStateError``.
        """
        self._portal.check_caller()
        self._portal.run(self._end_transaction, True, timeout=timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction; its unsent records fail with TransactionAbortedError.

        Raises:
            KafkaTimeoutError: ``timeout`` passed; calling it again retries.
            ``TransactionStateError``, ``ProducerFencedError``.
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
            return self._portal.run(self._aclose, exc, timeout=timeout)

    async def _aclose(self, exc: BaseException | None) -> bool:
        try:
            if exc is not None:  # like the async producer left by an exception: no delivery
                self._feeder.fail_all(ClosedError("the producer closed after an error"))
            return await self._handle.aexit(exc)
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


def _as_column(values: Any) -> Any:
    """Lists, tuples, arrays and columns pass; other iterables become lists."""
    if hasattr(values, "__len__") and hasattr(values, "__getitem__"):
        return values
    return list(values)
