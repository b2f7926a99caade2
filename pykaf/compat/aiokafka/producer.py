"""``AIOKafkaProducer``: aiokafka's producer on :func:`pykaf.aio.open_producer`.

``send`` stages the record with the pykaf producer's ``send_nowait`` (in the
loop's own thread: no hop) and returns an asyncio future that the record's
delivery settles. ``start``/``stop`` open and close the pykaf producer
through an :class:`~contextlib.AsyncExitStack`, since aiokafka's objects are
started and stopped rather than entered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple

from pykaf import aio
from pykaf import errors as pykaf_errors
from pykaf.compat._lifetime import Held
from pykaf.compat.aiokafka import _config
from pykaf.compat.aiokafka.errors import (
    IllegalOperation,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaConnectionError,
    MessageSizeTooLargeError,
    ProducerClosed,
    from_pykaf,
)
from pykaf.compat.aiokafka.partitioner import DefaultPartitioner, pykaf_partitioner
from pykaf.compat.aiokafka.structs import OffsetAndMetadata, RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

#: aiokafka's "acks not given" sentinel (``aiokafka.producer.producer._missing``).
_missing: Any = object()

_BYTES = (bytes, bytearray, memoryview)
_RECORD_OVERHEAD = 21  # attributes, deltas and varint lengths of one record, at most
_BATCH_OVERHEAD = 61  # a record batch v2 header


def _serialized(what: str, serializer: Callable[[Any], Any] | None, data: Any) -> bytes | None:
    if serializer is not None:
        data = serializer(data)
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, _BYTES):
        return bytes(data)
    raise TypeError(f"{what} must be bytes (or set {what}_serializer), not {type(data).__name__}")


def _record_size(key: bytes | None, value: bytes | None, headers: Sequence[Any]) -> int:
    size = _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for name, data in headers:
        size += len(name) + (len(data) if data else 0) + 10
    return size


def _check_headers(headers: Any) -> list[tuple[str, bytes]]:
    if headers is None:
        return []
    out = list(headers)
    for item in out:
        if not (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], bytes))
        ):
            raise TypeError(f"headers must be (str, bytes) tuples, not {item!r}")
    return out


def _metadata(topic: str, partition: int, offset: int, stamp: int, sent: int) -> RecordMetadata:
    """The aiokafka metadata of a record sent stamped ``sent`` and written at ``stamp``.

    A stamp other than the one sent is the broker's: LogAppendTime (1).
    """
    kind = 0 if stamp == sent else 1
    return RecordMetadata(
        topic, partition, TopicPartition(topic, partition), offset, stamp, kind, None
    )


class BatchRecordMetadata(NamedTuple):
    """What :meth:`BatchBuilder.append` returns: the record's place in the batch."""

    offset: int
    timestamp: int
    size: int
    crc: int | None = None


class BatchBuilder:
    """Records gathered for one partition, sent with :meth:`AIOKafkaProducer.send_batch`.

    Made by :meth:`AIOKafkaProducer.create_batch`; holds at most
    ``max_batch_size`` bytes (one record always fits).
    """

    def __init__(
        self,
        limit: int,
        key_serializer: Callable[[Any], Any] | None,
        value_serializer: Callable[[Any], Any] | None,
    ) -> None:
        self._limit = limit
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._size = _BATCH_OVERHEAD
        self._closed = False
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[list[tuple[str, bytes]] | None] = []
        self.timestamps: list[int] = []

    def append(
        self,
        *,
        timestamp: int | None,
        key: Any,
        value: Any,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> BatchRecordMetadata | None:
        """Add a record (``timestamp`` in ms, None: now); None when the batch is full or closed."""
        if self._closed:
            return None
        key_bytes = _serialized("key", self._key_serializer, key)
        value_bytes = _serialized("value", self._value_serializer, value)
        checked = _check_headers(headers)
        size = _record_size(key_bytes, value_bytes, checked)
        if self.keys and self._size + size > self._limit:
            self.close()
            return None
        stamp = int(time.time() * 1000) if timestamp is None else int(timestamp)
        self._size += size
        self.keys.append(key_bytes)
        self.values.append(value_bytes)
        self.headers.append(checked or None)
        self.timestamps.append(stamp)
        return BatchRecordMetadata(len(self.keys) - 1, stamp, size)

    def close(self) -> None:
        """Accept no more records."""
        self._closed = True

    def size(self) -> int:
        """The batch's estimated size in bytes."""
        return self._size

    def record_count(self) -> int:
        """How many records the batch holds."""
        return len(self.keys)


class _TransactionContext:
    """``async with producer.transaction()``: begin; commit on success, abort on an error."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> _TransactionContext:
        await self._producer.begin_transaction()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
            return
        if self._producer.transaction_failed_fatally():
            return
        await self._producer.abort_transaction()


class AIOKafkaProducer:
    """aiokafka's ``AIOKafkaProducer`` on pykaf: ``AIOKafkaProducer(**configs)``, then ``start()``.

    Takes aiokafka's arguments (``bootstrap_servers``, ``acks``,
    ``linger_ms``, ``compression_type``, ``enable_idempotence``,
    ``transactional_id``, ``key_serializer``, ...; see
    ``docs/migrating.md``). aiokafka's defaults are kept where they change
    what is written: ``acks=1`` and no idempotence unless asked for (or a
    ``transactional_id`` is given). Other options take pykaf's defaults.

    Raises:
        KafkaConfigurationError: an unsupported or invalid option.
        ValueError: an invalid ``acks``, or ``acks`` other than ``"all"``
            with idempotence (as aiokafka).
        TypeError: an unknown keyword argument.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str | list[str] = "localhost",
        acks: Any = _missing,
        key_serializer: Callable[[Any], Any] | None = None,
        value_serializer: Callable[[Any], Any] | None = None,
        partitioner: Any = DefaultPartitioner,
        **configs: Any,
    ) -> None:
        if acks not in (0, 1, -1, "all", _missing) or isinstance(acks, bool):
            raise ValueError("Invalid ACKS parameter")
        if configs.get("compression_type") not in ("gzip", "snappy", "lz4", "zstd", None):
            raise ValueError("Invalid compression type!")  # as aiokafka: a ValueError
        serializers = {"key_serializer": key_serializer, "value_serializer": value_serializer}
        for name, fn in serializers.items():
            if fn is not None and not callable(fn):
                raise KafkaConfigurationError(f"{name} must be callable, not {fn!r}")
        self._servers: list[str] = _config.servers("bootstrap_servers", bootstrap_servers)
        options = _config.translate(
            configs, (_config.CLIENT, _config.PRODUCER), frozenset(), "AIOKafkaProducer"
        )
        self._transactional_id: str | None = options.get("transactional_id")
        idempotent = bool(options.get("idempotence")) or self._transactional_id is not None
        if idempotent:
            if acks is _missing:
                acks = "all"
            elif acks not in ("all", -1):
                raise ValueError(f"acks={acks} not supported if enable_idempotence=True")
        elif acks is _missing:
            acks = 1
        options["acks"] = "all" if acks in ("all", -1) else acks
        # With acks=0 the broker answers nothing: aiokafka's futures resolve to None.
        self._no_acks = options["acks"] == 0
        options["idempotence"] = idempotent
        options["partitioner"] = pykaf_partitioner(partitioner)
        # aiokafka's metadata requests let the broker create a topic a record is sent to.
        options["allow_auto_create_topics"] = True
        self._options = options
        self._max_batch = int(options.get("flush_bytes", 16384))
        self._max_message = int(options.get("max_message_bytes", 1048576))
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._held: Held[aio.Producer] | None = None
        self._producer: aio.Producer | None = None
        self._closed = False
        self._txn_open = False
        self._fatal = False

    # -- lifetime -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (and register the transactional id, if any).

        Raises:
            KafkaConnectionError: no bootstrap server could be reached.
            IllegalStateError: already started.
        """
        if self._held is not None:
            raise IllegalStateError("AIOKafkaProducer is already started")
        if self._closed:
            raise ProducerClosed("AIOKafkaProducer is stopped")
        held: Held[aio.Producer] = Held()
        try:
            self._producer = await held.open(
                lambda: aio.open_producer(self._servers, **self._options)
            )
        except pykaf_errors.KafkaConnectionError as exc:
            raise KafkaConnectionError(f"Unable to bootstrap from {self._servers}: {exc}") from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc) from exc
        self._held = held

    async def stop(self) -> None:
        """Deliver what is buffered, then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        held, self._held = self._held, None
        self._producer = None
        if held is None:
            return
        try:
            await held.close()
        except pykaf_errors.DeliveryError:
            pass  # each record's failure went to its future
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ProducerClosed) from exc

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _open(self) -> aio.Producer:
        producer = self._producer
        held = self._held
        if held is not None and held.error is not None:
            raise from_pykaf(held.error, ProducerClosed) from held.error
        if producer is None:
            if self._closed:
                raise ProducerClosed("AIOKafkaProducer is stopped")
            raise IllegalStateError("AIOKafkaProducer is not started: await start() first")
        return producer

    # -- sending --------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Buffer a record; return a future of its :class:`RecordMetadata`.

        Returns once the record is buffered (waiting for buffer space when it
        is full). Cancelling the future does not stop the record.

        Raises:
            ProducerClosed: the producer is stopped.
            IllegalOperation: a transactional producer outside a transaction.
            MessageSizeTooLargeError: the record exceeds ``max_request_size``.
            TypeError: a key, value or header that is not bytes.
        """
        producer = self._open()
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if self._transactional_id is not None and not self._txn_open:
            raise IllegalOperation("Can't send messages while not in transaction")
        checked = _check_headers(headers)
        key_bytes = _serialized("key", self._key_serializer, key)
        value_bytes = _serialized("value", self._value_serializer, value)
        size = _record_size(key_bytes, value_bytes, checked)
        if size > self._max_message:
            raise MessageSizeTooLargeError(
                f"The message is {size} bytes when serialized which is larger than the "
                "maximum request size you have configured with the max_request_size "
                "configuration"
            )
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        stamp = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)

        no_acks = self._no_acks

        def delivered(error: BaseException | None, metadata: Any) -> None:
            if future.done():
                return
            if error is not None:
                translated = from_pykaf(error, ProducerClosed)
                if translated is not error:
                    translated.__cause__ = error
                future.set_exception(translated)
                return
            if no_acks:
                future.set_result(None)  # type: ignore[arg-type]  # aiokafka's acks=0 answer
                return
            future.set_result(
                _metadata(
                    metadata.topic, metadata.partition, metadata.offset, metadata.timestamp, stamp
                )
            )

        while True:
            try:
                producer.send_nowait(
                    topic,
                    value_bytes,
                    key=key_bytes,
                    partition=partition,
                    headers=checked or None,
                    timestamp=stamp,
                    on_delivery=delivered,
                )
                return future
            except pykaf_errors.BufferFullError:
                try:
                    await producer.wait_for_space()
                except pykaf_errors.PykafError as exc:
                    raise from_pykaf(exc, ProducerClosed) from exc
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, ProducerClosed) from exc

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> RecordMetadata:
        """Send a record and wait until it is acknowledged."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` of at most ``max_batch_size`` bytes."""
        return BatchBuilder(self._max_batch, self._key_serializer, self._value_serializer)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """Send a batch's records to ``partition``; return a future of the first one's metadata.

        Raises:
            ProducerClosed: the producer is stopped.
            IllegalOperation: a transactional producer outside a transaction.
            UnknownTopicOrPartitionError: no such partition.
        """
        producer = self._open()
        if self._transactional_id is not None and not self._txn_open:
            raise IllegalOperation("Can't send messages while not in transaction")
        batch.close()
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        count = batch.record_count()
        settled = [0, -1, -1]  # records settled, first offset, first timestamp

        def on_settle(
            part: int, index: int, n: int, offset: int, stamp: int, error: BaseException | None
        ) -> None:
            if future.done():
                return
            if error is not None:
                translated = from_pykaf(error, ProducerClosed)
                future.set_exception(translated)
                return
            if index == 0:
                settled[1] = offset
                settled[2] = stamp if stamp >= 0 else batch.timestamps[0]
            settled[0] += n
            if settled[0] >= count:
                future.set_result(
                    _metadata(topic, partition, settled[1], settled[2], batch.timestamps[0])
                )

        try:
            await producer.send_batch(
                topic,
                batch.values,
                keys=batch.keys,
                headers=batch.headers,
                timestamps=batch.timestamps,
                partition=partition,
                on_settle=on_settle,
            )
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ProducerClosed) from exc
        if count == 0 and not future.done():
            future.set_result(_metadata(topic, partition, -1, -1, -1))
        return future

    async def flush(self) -> None:
        """Send everything buffered and wait until all of it is settled."""
        producer = self._open()
        try:
            await producer.flush()
        except pykaf_errors.DeliveryError:
            pass  # each record's failure went to its future
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ProducerClosed) from exc

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers (looked up, and the topic made where the cluster may)."""
        producer = self._open()
        try:
            return set(await producer.client.partitions(topic))
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ProducerClosed) from exc

    # -- transactions ------------------------------------------------------------------

    def _transactional(self) -> Any:
        if self._transactional_id is None:
            raise IllegalOperation("You need to configure transaction_id to use transactions")
        return self._open()

    def transaction_failed_fatally(self) -> bool:
        """Whether the producer was fenced (``async with transaction()`` then aborts nothing)."""
        return self._fatal

    async def _txn_call(self, call: Callable[[], Any]) -> None:
        try:
            result = call()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                await result
        except pykaf_errors.ProducerFencedError as exc:
            self._fatal = True
            raise from_pykaf(exc, ProducerClosed) from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ProducerClosed) from exc

    async def begin_transaction(self) -> None:
        """Open a transaction.

        Raises:
            IllegalOperation: no ``transactional_id``.
            IllegalStateError: a transaction is already open.
        """
        producer = self._transactional()
        await self._txn_call(producer.begin_transaction)
        self._txn_open = True

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it."""
        await self._end_transaction("commit_transaction")

    async def abort_transaction(self) -> None:
        """Abort the open transaction (its records are never read by read_committed consumers)."""
        await self._end_transaction("abort_transaction")

    async def _end_transaction(self, how: str) -> None:
        producer = self._transactional()
        try:
            await self._txn_call(getattr(producer, how))
        finally:
            self._txn_open = False

    def transaction(self) -> _TransactionContext:
        """``async with producer.transaction():`` commits on success and aborts on an exception."""
        return _TransactionContext(self)

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_id: str
    ) -> None:
        """Commit a consumer group's offsets (the next ones to read) with the open transaction.

        Raises:
            IllegalOperation: no ``transactional_id``, or no open transaction.
            ValueError: an empty or non-string ``group_id``.
        """
        producer = self._transactional()
        if not self._txn_open:
            raise IllegalOperation("Not in the middle of a transaction")
        if not group_id or not isinstance(group_id, str):
            raise ValueError(group_id)
        plain = {}
        for tp, om in offsets.items():
            offset = om.offset if isinstance(om, OffsetAndMetadata) else om
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise ValueError(f"offset of {tp} must be an int >= 0, not {om!r}")
            plain[(tp[0], tp[1])] = offset
        await self._txn_call(lambda: producer.send_offsets_to_transaction(plain, group_id))

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "started" if self._producer else "not started"
        return f"<pykaf.compat.aiokafka.AIOKafkaProducer {self._servers} {state}>"


__all__ = ["AIOKafkaProducer", "BatchBuilder", "BatchRecordMetadata"]
