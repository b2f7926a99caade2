"""confluent-kafka's ``confluent_kafka.aio`` (2.13+) on pykaf: ``AIOProducer`` and ``AIOConsumer``.

::

    from pykaf.compat.confluent_kafka.aio import AIOConsumer, AIOProducer

    async with AIOProducer({"bootstrap.servers": "localhost:9092"}) as producer:
        delivered = await producer.produce("orders", b"one")   # a future
        msg = await delivered                                    # the delivered Message

confluent-kafka runs its blocking clients in a thread pool. Here
``AIOProducer`` is :func:`pykaf.aio.open_producer` itself: ``produce`` stages
the record in the loop's own thread (no thread hop, no buffer of its own) and
returns a future its delivery settles. ``AIOConsumer`` runs the shim's
:class:`~pykaf.compat.confluent_kafka.Consumer` in worker threads, one call at
a time, as confluent-kafka runs its own: a ``poll`` or ``consume`` is one hop,
and rebalance callbacks that are coroutine functions run in the loop.
``docs/migrating.md`` lists where they differ from confluent-kafka's.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import pykaf.sync
from pykaf import aio
from pykaf import errors as pykaf_errors
from pykaf.compat._lifetime import Held
from pykaf.compat.confluent_kafka._config import client_options, translate
from pykaf.compat.confluent_kafka._consumer import Consumer, _fail
from pykaf.compat.confluent_kafka._error import LOCAL_CODES, KafkaError, KafkaException, from_pykaf
from pykaf.compat.confluent_kafka._producer import _delivery_error, _seconds, checked_record
from pykaf.compat.confluent_kafka._types import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Message,
    TopicPartition,
)
from pykaf.compat.confluent_kafka.admin import ClusterMetadata, cluster_metadata

T = TypeVar("T")

log = logging.getLogger(__name__)

#: librdkafka's default ``message.max.bytes``, checked at ``produce`` as librdkafka does.
_LARGEST = 1_000_000


def _no_sasl_update() -> KafkaException:
    return _fail(
        "_NOT_IMPLEMENTED",
        "set_sasl_credentials is not supported: give sasl.username and sasl.password in the conf",
    )


async def _within(timeout: float | None, call: Awaitable[T], what: str) -> T:
    """``call``, cancelled (and ``_TIMED_OUT`` raised) after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(call, _seconds(timeout))
    except asyncio.TimeoutError:
        raise _fail("_TIMED_OUT", f"{what} timed out after {timeout} s") from None


class AIOProducer:
    """confluent-kafka's ``AIOProducer(conf)`` on :func:`pykaf.aio.open_producer`.

    Made inside a running event loop (as confluent-kafka's); connects at the
    first call that needs the cluster. ``max_workers`` and ``executor`` serve
    only the metadata calls (``list_topics``, ``cluster_id``); ``batch_size``
    and ``buffer_timeout`` are taken for compatibility: records go straight
    into pykaf's own batches, which ``linger.ms`` and ``batch.size`` shape.

    Raises:
        RuntimeError: no running event loop.
        KafkaException: an unsupported key or a bad value (``_INVALID_ARG``).
    """

    def __init__(
        self,
        producer_conf: Mapping[str, Any],
        max_workers: int = 4,
        executor: concurrent.futures.Executor | None = None,
        batch_size: int = 1000,
        buffer_timeout: float = 1.0,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        settings = translate(producer_conf, "producer")
        settings.options.setdefault("max_message_bytes", _LARGEST)
        self._largest: int = settings.options["max_message_bytes"]
        self._bootstrap = settings.bootstrap
        self._options = settings.options
        self._default_callback = settings.on_delivery
        self._error_cb = settings.error_cb
        self._transactional = "transactional_id" in settings.options
        self._client_options = client_options(settings.options)
        self._max_workers = max_workers
        self._executor = executor
        self._owns_executor = executor is None
        self._held: Held[aio.Producer] = Held()
        self._producer: aio.Producer | None = None
        self._opening = asyncio.Lock()
        self._admin: pykaf.sync.Admin | None = None
        self._pending = 0
        self._closed = False

    async def __aenter__(self) -> AIOProducer:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _open(self) -> aio.Producer:
        async with self._opening:
            if self._producer is not None and self._held.alive:
                return self._producer
            if self._closed:
                raise _fail("_DESTROY", "the producer is closed")
            error = self._held.error
            if error is not None:
                raise KafkaException(from_pykaf(error)) from error
            try:
                self._producer = await self._held.open(
                    lambda: aio.open_producer(self._bootstrap, **self._options)
                )
            except pykaf_errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc)) from exc
            return self._producer

    def __len__(self) -> int:
        """Records produced whose delivery has not settled yet."""
        return self._pending

    async def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        on_delivery: Callable[[KafkaError | None, Message], object] | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        *,
        callback: Callable[[KafkaError | None, Message], object] | None = None,
    ) -> asyncio.Future[Message]:
        """Stage one record; return a future of the delivered :class:`Message`.

        The future fails with :class:`KafkaException` when the record fails
        (``MSG_SIZE_TOO_LARGE`` at once when key, value and headers exceed
        ``message.max.bytes``); a delivery callback (``on_delivery``,
        ``callback`` or the conf's) runs too, in the loop. Waits for room
        when the buffer is full.

        Raises:
            KafkaException: ``_DESTROY`` (closed), or another refusal
                (transactional state, a bad argument).
            TypeError: a value, key or header that is not bytes, str or None.
        """
        producer = self._producer if self._held.alive else None
        if producer is None:
            producer = await self._open()
        value_bytes, key_bytes, header_list, too_large = checked_record(
            topic, value, key, partition, headers, self._largest
        )
        user = on_delivery or callback or self._default_callback
        future: asyncio.Future[Message] = self._loop.create_future()
        if too_large is not None:
            # As confluent-kafka's AIOProducer: the record's future fails.
            future.set_exception(KafkaException(too_large))
            return future
        created = timestamp or time.time_ns() // 1_000_000
        started = time.monotonic()

        def delivered(error: BaseException | None, metadata: Any) -> None:
            self._pending -= 1
            kafka_error = None if error is None else _delivery_error(error, partition)
            stamp = metadata.timestamp
            kind = TIMESTAMP_CREATE_TIME if stamp == created else TIMESTAMP_LOG_APPEND_TIME
            msg = Message(
                metadata.topic,
                metadata.partition,
                metadata.offset if metadata.offset >= 0 else None,
                key_bytes,
                value_bytes,
                None,  # as confluent-kafka's delivery reports: no headers
                kafka_error,
                (kind, stamp),
                time.monotonic() - started,
            )
            if not future.done():
                if kafka_error is not None:
                    future.set_exception(KafkaException(kafka_error))
                else:
                    future.set_result(msg)
            if user is not None:
                try:
                    user(kafka_error, msg)
                except Exception:  # the future is settled; the callback's fault is logged
                    log.exception("delivery callback of %s/%s failed", msg.topic(), partition)

        while True:
            try:
                producer.send_nowait(
                    topic,
                    value_bytes,
                    key=key_bytes,
                    partition=None if partition == -1 else partition,
                    headers=header_list,
                    timestamp=created,
                    on_delivery=delivered,
                )
            except pykaf_errors.BufferFullError:
                try:
                    await producer.wait_for_space()
                except pykaf_errors.PykafError as exc:
                    raise KafkaException(from_pykaf(exc)) from exc
                continue
            except pykaf_errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc)) from exc
            self._pending += 1
            return future

    async def poll(self, timeout: float = 0, *args: Any, **kwargs: Any) -> int:
        """Yield to the loop for up to ``timeout`` seconds; returns 0.

        Deliveries settle their futures and run their callbacks as they are
        acknowledged, so there is nothing to serve here (confluent-kafka's
        poll serves librdkafka's queue).
        """
        await asyncio.sleep(max(0.0, timeout or 0.0))
        return 0

    async def flush(self, timeout: float | None = None) -> int:
        """Wait for every record produced so far; how many are still undelivered.

        Raises:
            KafkaException: records without a delivery callback or future
                reader failed (with ``error_cb``, it is called with each instead).
        """
        if self._producer is None or not self._held.alive:
            return self._pending
        try:
            await _within(timeout, self._producer.flush(), "flush")
        except KafkaException as exc:
            if exc.args[0].code() != LOCAL_CODES["_TIMED_OUT"]:
                raise
        except pykaf_errors.DeliveryError as exc:
            if self._error_cb is None:
                raise KafkaException(from_pykaf(exc)) from exc
            for _, _, _, error in exc.failures:
                self._error_cb(from_pykaf(error))
        return self._pending

    async def purge(
        self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True
    ) -> None:
        """Give up records not delivered yet (their futures fail with ``_PURGE_*``)."""
        if self._producer is None or not self._held.alive:
            return
        try:
            self._producer.purge(in_queue=in_queue, in_flight=in_flight)
        except pykaf_errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc)) from exc

    # -- metadata ---------------------------------------------------------------

    async def _in_thread(self, call: Callable[[], T]) -> T:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="pykaf-aio-producer"
            )
        return await self._loop.run_in_executor(self._executor, call)

    def _metadata(self, topic: str | None) -> ClusterMetadata:
        if self._admin is None:
            self._admin = pykaf.sync.Admin(self._bootstrap, **self._client_options)
        return cluster_metadata(self._admin, topic)

    async def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (or only ``topic``).

        Raises:
            KafkaException: the cluster could not be asked.
        """
        return await _within(timeout, self._in_thread(lambda: self._metadata(topic)), "list_topics")

    async def cluster_id(self, timeout: float = -1) -> str:
        """The cluster's id."""
        metadata = await self.list_topics(timeout=timeout)
        return str(metadata.cluster_id)

    # -- transactions -----------------------------------------------------------

    async def _txn(
        self, call: Callable[[aio.Producer], Any], timeout: float | None, what: str
    ) -> None:
        if not self._transactional:
            raise _fail(
                "_NOT_CONFIGURED", "the transactional calls need transactional.id to be configured"
            )
        producer = await self._open()
        try:
            result = call(producer)
            if inspect.isawaitable(result):
                await _within(timeout, result, what)
        except pykaf_errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc)) from exc

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Open the producer and check it is transactional (pykaf initialises it as it opens).

        Raises:
            KafkaException: ``_NOT_CONFIGURED``: no ``transactional.id``.
        """
        await self._txn(lambda p: None, timeout, "init_transactions")

    async def begin_transaction(self) -> None:
        """Open a transaction. Raises KafkaException (``_NOT_CONFIGURED``, ``_STATE``, ...)."""
        await self._txn(lambda p: p.begin_transaction(), None, "begin_transaction")

    async def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a group's next offsets (``positions``) with the transaction.

        ``group_metadata`` is the consumer's ``consumer_group_metadata()``.
        """
        offsets = {(tp.topic, tp.partition): tp.offset for tp in positions}
        await self._txn(
            lambda p: p.send_offsets_to_transaction(offsets, group_metadata),
            timeout,
            "send_offsets_to_transaction",
        )

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver what is staged, then commit. Raises KafkaException."""
        await self._txn(lambda p: p.commit_transaction(), timeout, "commit_transaction")

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction. Raises KafkaException."""
        await self._txn(lambda p: p.abort_transaction(), timeout, "abort_transaction")

    async def set_sasl_credentials(self, username: str, password: str) -> None:
        """Not supported: pykaf takes SASL credentials when a client is made.

        Raises:
            KafkaException: ``_NOT_IMPLEMENTED``, always.
        """
        raise _no_sasl_update()

    async def close(self) -> None:
        """Deliver what is staged and close; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._held.close()
        except pykaf_errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc)) from exc
        finally:
            self._producer = None
            admin, self._admin = self._admin, None
            executor = self._executor
            if admin is not None:
                await self._loop.run_in_executor(executor, admin.close)
            if executor is not None and self._owns_executor:
                await self._loop.run_in_executor(None, functools.partial(executor.shutdown, True))


#: Set while a rebalance callback runs in the loop: a call it makes is admitted
#: at once (the poll that ran the callback holds the consumer meanwhile).
_IN_CALLBACK: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pykaf_aio_consumer_callback", default=False
)


class AIOConsumer:
    """confluent-kafka's ``AIOConsumer(conf)``: the shim's :class:`Consumer` in worker threads.

    Every method is a coroutine. Calls run one at a time (a second waits for
    the first), except those a rebalance callback makes while the ``poll``
    that ran it waits. A rebalance callback may be a coroutine function (run
    in the loop) or a plain one (run in the worker thread); either gets this
    ``AIOConsumer`` as its first argument.

    Raises:
        RuntimeError: no running event loop.
        ValueError: ``max_workers`` below 1.
        KafkaException: an unsupported key or a bad value (``_INVALID_ARG``).
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, Any],
        max_workers: int = 2,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        if executor is None and max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=max(2, max_workers), thread_name_prefix="pykaf-aio-consumer"
        )
        self._owns_executor = executor is None
        self._consumer = Consumer(dict(consumer_conf))
        self._lock = asyncio.Lock()
        #: Messages a cancelled poll or consume took: handed out before any other.
        self._unread: collections.deque[Message] = collections.deque()
        self._closed = False

    async def __aenter__(self) -> AIOConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        task = functools.partial(method, *args, **kwargs)
        if _IN_CALLBACK.get():
            return await self._loop.run_in_executor(self._executor, task)
        async with self._lock:
            running = self._loop.run_in_executor(self._executor, task)
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                # The thread goes on: hold the lock until it is done (one call at a
                # time), and keep what a poll or consume took for the next one.
                while not running.done():
                    try:
                        await asyncio.shield(running)
                    except asyncio.CancelledError:
                        continue
                    except Exception:
                        break
                if not running.cancelled() and running.exception() is None:
                    taken = running.result()
                    if isinstance(taken, Message):
                        self._unread.append(taken)
                    elif isinstance(taken, list):
                        self._unread.extend(m for m in taken if isinstance(m, Message))
                raise

    def _in_loop(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """A rebalance callback as the worker thread calls it: with this object, in the loop."""

        async def in_loop(partitions: list[TopicPartition]) -> Any:
            _IN_CALLBACK.set(True)
            return await callback(self, partitions)

        def run(_: Consumer, partitions: list[TopicPartition]) -> Any:
            if inspect.iscoroutinefunction(callback):
                return asyncio.run_coroutine_threadsafe(in_loop(partitions), self._loop).result()
            return callback(self, partitions)

        return run

    async def poll(self, timeout: float | None = None) -> Message | None:
        """One message (or error event), or None after ``timeout`` seconds (-1/None: no limit).

        A message a cancelled ``poll`` or ``consume`` took is handed out first.
        """
        if self._unread:
            return self._unread.popleft()
        return await self._call(self._consumer.poll, timeout)

    async def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` messages, waiting at most ``timeout`` s for a first.

        Messages a cancelled ``poll`` or ``consume`` took are handed out first.
        """
        if self._unread:
            count = min(num_messages, len(self._unread))
            return [self._unread.popleft() for _ in range(count)]
        return await self._call(self._consumer.consume, num_messages, timeout)

    async def subscribe(
        self,
        topics: list[str],
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics``; see :meth:`Consumer.subscribe`."""
        await self._call(
            self._consumer.subscribe,
            topics,
            on_assign=None if on_assign is None else self._in_loop(on_assign),
            on_revoke=None if on_revoke is None else self._in_loop(on_revoke),
            on_lost=None if on_lost is None else self._in_loop(on_lost),
        )

    async def unsubscribe(self) -> None:
        """Leave the group."""
        await self._call(self._consumer.unsubscribe)

    async def commit(self, *args: Any, **kwargs: Any) -> Any:
        """Commit; the arguments of :meth:`Consumer.commit`."""
        return await self._call(self._consumer.commit, *args, **kwargs)

    async def store_offsets(self, *args: Any, **kwargs: Any) -> None:
        """Store offsets for the next commit; see :meth:`Consumer.store_offsets`."""
        await self._call(self._consumer.store_offsets, *args, **kwargs)

    async def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets of ``partitions``."""
        return await self._call(self._consumer.committed, partitions, timeout)

    async def assign(self, partitions: list[TopicPartition]) -> None:
        """Read ``partitions`` without a group's assignment."""
        await self._call(self._consumer.assign, partitions)

    async def unassign(self) -> None:
        """Stop reading the assigned partitions."""
        await self._call(self._consumer.unassign)

    async def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment."""
        await self._call(self._consumer.incremental_assign, partitions)

    async def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Remove ``partitions`` from the assignment."""
        await self._call(self._consumer.incremental_unassign, partitions)

    async def assignment(self) -> list[TopicPartition]:
        """The partitions read now."""
        return await self._call(self._consumer.assignment)

    async def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The next offset to read of each of ``partitions``."""
        return await self._call(self._consumer.position, partitions)

    async def seek(self, partition: TopicPartition) -> None:
        """Read ``partition`` from its ``offset`` on."""
        await self._call(self._consumer.seek, partition)

    async def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching ``partitions`` until resumed."""
        await self._call(self._consumer.pause, partitions)

    async def resume(self, partitions: list[TopicPartition]) -> None:
        """Fetch ``partitions`` again."""
        await self._call(self._consumer.resume, partitions)

    async def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int] | None:
        """``(low, high)`` of a partition; see :meth:`Consumer.get_watermark_offsets`."""
        return await self._call(self._consumer.get_watermark_offsets, *args, **kwargs)

    async def offsets_for_times(self, *args: Any, **kwargs: Any) -> list[TopicPartition]:
        """The first offsets at or after the given times; see :meth:`Consumer.offsets_for_times`."""
        return await self._call(self._consumer.offsets_for_times, *args, **kwargs)

    async def consumer_group_metadata(self) -> Any:
        """The member's group metadata, for ``AIOProducer.send_offsets_to_transaction``."""
        return await self._call(self._consumer.consumer_group_metadata)

    async def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (or only ``topic``)."""
        return await self._call(self._consumer.list_topics, topic, timeout)

    async def cluster_id(self, timeout: float = -1) -> str:
        """The cluster's id."""
        metadata = await self.list_topics(timeout=timeout)
        return str(metadata.cluster_id)

    async def set_sasl_credentials(self, username: str, password: str) -> None:
        """Not supported: pykaf takes SASL credentials when a client is made.

        Raises:
            KafkaException: ``_NOT_IMPLEMENTED``, always.
        """
        raise _no_sasl_update()

    async def close(self) -> None:
        """Leave the group (committing, with auto commit on) and close; idempotent."""
        if self._closed:
            return
        try:
            await self._call(self._consumer.close)
        finally:
            self._closed = True
            if self._owns_executor:
                await self._loop.run_in_executor(
                    None, functools.partial(self._executor.shutdown, True)
                )


__all__ = ["AIOConsumer", "AIOProducer"]
