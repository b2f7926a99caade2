"""``KafkaProducer``: kafka-python's producer on :class:`pykaf.sync.Producer`'s produce path."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pykaf import errors as pykaf_errors
from pykaf.compat.kafka import _config
from pykaf.compat.kafka._shared import AdminLink, serializer_function
from pykaf.compat.kafka.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    from_pykaf,
)
from pykaf.compat.kafka.structs import OffsetAndMetadata, RecordMetadata, TopicPartition
from pykaf.sync import Producer as SyncProducer

log = logging.getLogger(__name__)

_BYTES = (bytes, bytearray, memoryview)

#: Guards every future's settling against callbacks added from other threads.
_SETTLE = threading.Lock()


class FutureRecordMetadata:
    """The result of :meth:`KafkaProducer.send`: resolves to a :class:`RecordMetadata`.

    Callbacks and errbacks run in the thread that calls ``get``, ``send``,
    ``flush`` or ``close`` (pykaf's ``poll`` step), not in a background
    thread as in kafka-python. An exception a callback raises is logged and
    does not stop the others, as in kafka-python.
    """

    __slots__ = (
        "_callbacks",
        "_errbacks",
        "_producer",
        "_sizes",
        "_topic",
        "exception",
        "is_done",
        "value",
    )

    def __init__(self, producer: KafkaProducer, topic: str, sizes: tuple[int, int, int]) -> None:
        self.is_done = False
        self.value: RecordMetadata | None = None
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[Any], object]] | None = None
        self._errbacks: list[Callable[[Any], object]] | None = None
        self._producer = producer
        self._topic = topic
        self._sizes = sizes

    def succeeded(self) -> bool:
        """True once the record is acknowledged."""
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        """True once the record has failed."""
        return self.is_done and self.exception is not None

    def retriable(self) -> bool:
        """True if the record failed with a retriable error."""
        return self.failed() and bool(getattr(self.exception, "retriable", False))

    def add_callback(
        self, f: Callable[..., object], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``f(*args, metadata, **kwargs)`` once the record is acknowledged."""
        callback = (lambda value: f(*args, value, **kwargs)) if args or kwargs else f
        with _SETTLE:
            if not self.is_done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return self
        if self.exception is None:
            _run(callback, self.value)
        return self

    def add_errback(
        self, f: Callable[..., object], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``f(*args, exception, **kwargs)`` if the record fails."""
        errback = (lambda error: f(*args, error, **kwargs)) if args or kwargs else f
        with _SETTLE:
            if not self.is_done:
                if self._errbacks is None:
                    self._errbacks = []
                self._errbacks.append(errback)
                return self
        if self.exception is not None:
            _run(errback, self.exception)
        return self

    def add_both(self, f: Callable[..., object], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """Add ``f`` as both callback and errback."""
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the record's metadata, up to ``timeout`` seconds (None: no limit).

        Raises:
            KafkaTimeoutError: not settled within ``timeout``.
            KafkaError: the record's error (a :mod:`pykaf.compat.kafka.errors` class).
        """
        if not self.is_done:
            self._producer.wait_for(self, timeout)
        if self.exception is not None:
            raise self.exception
        assert self.value is not None
        return self.value

    def deliver(self, error: BaseException | None, metadata: Any) -> None:
        """Settle the future (pykaf's ``on_delivery``); runs the callbacks or errbacks."""
        value: RecordMetadata | None = None
        translated: BaseException | None = None
        if error is None:
            key_size, value_size, header_size = self._sizes
            value = RecordMetadata(
                metadata.topic,
                metadata.partition,
                TopicPartition(metadata.topic, metadata.partition),
                metadata.offset,
                metadata.timestamp,
                None,
                key_size,
                value_size,
                header_size,
            )
        else:
            translated = from_pykaf(error, self._producer._names)
            if translated is not error:
                translated.__cause__ = error
        with _SETTLE:
            self.value = value
            self.exception = translated
            self.is_done = True
            callbacks = self._callbacks if error is None else self._errbacks
            self._callbacks = self._errbacks = None
        if callbacks:
            argument = value if error is None else translated
            for callback in callbacks:
                _run(callback, argument)


def _run(callback: Callable[[Any], object], argument: Any) -> None:
    try:
        callback(argument)
    except Exception:
        log.exception("Error processing callback")


class KafkaProducer:
    """kafka-python's ``KafkaProducer`` on pykaf: ``KafkaProducer(**configs)``.

    Takes kafka-python's configuration names (``bootstrap_servers``,
    ``acks``, ``linger_ms``, ``key_serializer``, ...; see
    ``docs/migrating.md``). A name pykaf does not support raises
    :class:`KafkaConfigurationError` naming it. Options not given take
    pykaf's defaults.

    Raises:
        KafkaConfigurationError: an unknown, unsupported or invalid option.
        NoBrokersAvailable: no bootstrap server could be reached.
    """

    def __init__(self, **configs: Any) -> None:
        self._key_serializer = serializer_function("key_serializer", configs.get("key_serializer"))
        self._value_serializer = serializer_function(
            "value_serializer", configs.get("value_serializer")
        )
        self._servers = _config.servers(configs.get("bootstrap_servers", "localhost:9092"))
        own = frozenset({"bootstrap_servers", "key_serializer", "value_serializer"})
        self._client_options = _config.translate(
            configs, (_config.CLIENT,), own | frozenset(_config.PRODUCER), "KafkaProducer"
        )
        options = _config.translate(
            configs, (_config.CLIENT, _config.PRODUCER), own, "KafkaProducer"
        )
        self._names = _config.user_names(configs, (_config.CLIENT, _config.PRODUCER))
        if (
            options.get("acks", "all") != "all"
            and configs.get("enable_idempotence") is None
            and options.get("transactional_id") is None
        ):
            # As kafka-python (KIP-679): idempotence on by default yields to
            # acks 0/1 unless it was asked for explicitly.
            log.warning("acks=%s: idempotence disabled", options["acks"])
            options["idempotence"] = False
        # kafka-python's defaults: allow_auto_create_topics=True (the broker
        # decides) and murmur2 keys (whatever pykaf's own default becomes).
        options.setdefault("allow_auto_create_topics", True)
        options.setdefault("produce_block_timeout", 60.0)  # max_block_ms
        options["partitioner"] = "murmur2"
        self._transactional = options.get("transactional_id") is not None
        self._txn_ready = False
        self._closed = False
        self._admin = AdminLink(self._servers, self._client_options, "KafkaProducer", self._names)
        try:
            self._producer = SyncProducer(self._servers, **options)
        except pykaf_errors.KafkaConnectionError as exc:
            raise NoBrokersAvailable(str(exc)) from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Publish a record; return a future of its :class:`RecordMetadata`.

        The record is staged in this thread (pykaf's ``produce`` path) and
        callbacks of records delivered meanwhile run here.

        Raises:
            IllegalStateError: the producer is closed.
            ValueError: both key and value are None.
            TypeError: headers not a list of ``(str, bytes)``; a serialized key
                or value not bytes.
            KafkaTimeoutError: the buffer stayed full for ``max_block_ms``.
        """
        if self._closed:
            raise IllegalStateError("KafkaProducer already closed!")
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if headers is None:
            headers = []
        if not isinstance(headers, list):
            raise TypeError("headers must be list-type")
        for item in headers:
            if not (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], bytes)
            ):
                raise TypeError("All headers items must be (str, bytes) tuples")
        key_bytes = _serialized("key", self._key_serializer, topic, headers, key)
        value_bytes = _serialized("value", self._value_serializer, topic, headers, value)
        sizes = (
            -1 if key_bytes is None else len(key_bytes),
            -1 if value_bytes is None else len(value_bytes),
            sum(len(name.encode()) + len(data) for name, data in headers) if headers else -1,
        )
        future = FutureRecordMetadata(self, topic, sizes)
        try:
            self._producer.produce(
                topic,
                value_bytes,
                key=key_bytes,
                partition=partition,
                headers=headers or None,
                timestamp=timestamp_ms,
                on_delivery=future.deliver,
            )
            self._producer.poll(0)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc
        return future

    def wait_for(self, future: FutureRecordMetadata, timeout: float | None) -> None:
        """Run delivery callbacks in this thread until ``future`` is settled.

        Raises:
            KafkaTimeoutError: ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not future.is_done:
            try:
                self._producer.send_now()  # an awaited record does not linger
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, self._names) from exc
        while not future.is_done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
            step = 0.1 if remaining is None else min(remaining, 0.1)
            try:
                ran = self._producer.poll(step)
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, self._names) from exc
            if not ran and not future.is_done:
                time.sleep(0.001)  # another thread is running the callbacks

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait for it, running the callbacks here.

        Raises:
            KafkaTimeoutError: ``timeout`` seconds passed first.
        """
        try:
            self._producer.flush(timeout)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (up to ``timeout`` seconds), then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._producer.close(timeout)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc
        finally:
            self._admin.close()

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        description = self._admin.call("describe_topic", topic)
        return {p.partition for p in description.partitions}

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        """A few of Java's producer metrics, from pykaf's statistics (``raw`` is ignored).

        ``producer-metrics``: ``record-send-total`` (retries count again),
        ``record-error-total``, ``record-retry-total`` (batches) and
        ``requests-in-flight``.
        """
        stats = self._producer.statistics()
        return {
            "producer-metrics": {
                "record-send-total": float(stats.records_sent),
                "record-error-total": float(stats.records_failed),
                "record-retry-total": float(stats.retries),
                "requests-in-flight": float(stats.in_flight),
            }
        }

    # -- transactions ------------------------------------------------------------

    def _check_transactional(self) -> None:
        if not self._transactional:
            raise IllegalStateError(
                "Cannot use transactional methods without enabling transactions"
            )

    def init_transactions(self) -> None:
        """Make the producer ready for transactions (pykaf registers it when made).

        Raises:
            IllegalStateError: no ``transactional_id``.
        """
        self._check_transactional()
        self._txn_ready = True

    def _txn_call(self, call: Callable[..., None], *args: Any) -> None:
        self._check_transactional()
        if not self._txn_ready:
            raise IllegalStateError("Cannot use transactions before init_transactions()")
        try:
            call(*args)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc

    def begin_transaction(self) -> None:
        """Open a transaction.

        Raises:
            IllegalStateError: no ``transactional_id``, no ``init_transactions()``,
                or a transaction already open.
        """
        self._txn_call(self._producer.begin_transaction)

    def commit_transaction(self) -> None:
        """Deliver every record sent so far, then commit the transaction.

        Raises:
            IllegalStateError: no open transaction.
            ProducerFencedError: another producer took the transactional id.
        """
        self._txn_call(self._producer.commit_transaction)

    def abort_transaction(self) -> None:
        """Abort the open transaction."""
        self._txn_call(self._producer.abort_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_metadata: Any
    ) -> None:
        """Commit a consumer group's offsets with the open transaction.

        Args:
            offsets: ``{TopicPartition: OffsetAndMetadata}`` (the next offsets to read).
            group_metadata: ``KafkaConsumer.group_metadata()`` or the group id.
        """
        plain = {
            (tp[0], tp[1]): (om.offset if isinstance(om, OffsetAndMetadata) else int(om))
            for tp, om in offsets.items()
        }
        self._txn_call(self._producer.send_offsets_to_transaction, plain, group_metadata)

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<pykaf.compat.kafka.KafkaProducer {self._servers} closed={self._closed}>"


def _serialized(
    what: str,
    serializer: Callable[[str, Any, Any], Any] | None,
    topic: str,
    headers: Any,
    data: Any,
) -> bytes | None:
    if serializer is not None:
        data = serializer(topic, headers, data)
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, _BYTES):
        return bytes(data)
    raise TypeError(f"Unsupported type for serialized {what}: {type(data)}")


__all__ = ["FutureRecordMetadata", "KafkaProducer"]
