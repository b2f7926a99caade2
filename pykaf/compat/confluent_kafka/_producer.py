"""confluent-kafka's ``Producer`` on :class:`pykaf.sync.Producer`'s ``produce`` path."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pykaf.sync
from pykaf import errors
from pykaf.compat.confluent_kafka._config import (
    DEFAULT_PARTITIONER,
    PARTITIONERS,
    client_options,
    translate,
)
from pykaf.compat.confluent_kafka._error import (
    LOCAL_CODES,
    KafkaError,
    KafkaException,
    from_pykaf,
)
from pykaf.compat.confluent_kafka._types import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Headers,
    Message,
    TopicPartition,
)
from pykaf.compat.confluent_kafka.admin import ClusterMetadata, cluster_metadata

DeliveryCallback = Callable[[KafkaError | None, Message], object]


def _bytes(name: str, value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{name} must be bytes, str or None, not {type(value).__name__}")


def _headers(headers: object) -> Headers | None:
    if headers is None:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: Headers = []
    for pair in pairs:  # type: ignore[attr-defined]
        if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], str):
            raise TypeError(f"headers must be (str, value) pairs or a dict, not {pair!r}")
        out.append((pair[0], _bytes("a header value", pair[1])))
    return out


class _Report:
    """A record's delivery callback as confluent-kafka calls it: ``(KafkaError, Message)``."""

    __slots__ = ("created", "key", "partition", "started", "user", "value")

    def __init__(
        self,
        user: DeliveryCallback,
        key: bytes | None,
        value: bytes | None,
        partition: int,
        created: int,
    ) -> None:
        self.user = user
        self.key = key
        self.value = value
        self.partition = partition
        self.created = created  # the record's CreateTime, to tell a LogAppendTime from it
        self.started = time.monotonic()

    def __call__(self, error: BaseException | None, metadata: Any) -> None:
        """The ``on_delivery`` of the record: run the user's callback with a report."""
        kafka_error = None if error is None else _delivery_error(error, self.partition)
        stamp = metadata.timestamp
        kind = TIMESTAMP_CREATE_TIME if stamp == self.created else TIMESTAMP_LOG_APPEND_TIME
        msg = Message(
            metadata.topic,
            metadata.partition,
            # None when unknown (a failed record; acks=0), as confluent-kafka's
            metadata.offset if metadata.offset >= 0 else None,
            self.key,
            self.value,
            None,  # as confluent-kafka's delivery reports: no headers
            kafka_error,
            (kind, stamp),
            time.monotonic() - self.started,
        )
        self.user(kafka_error, msg)


def checked_record(
    topic: object,
    value: object,
    key: object,
    partition: object,
    headers: object,
    largest: int,
) -> tuple[bytes | None, bytes | None, Headers | None, KafkaError | None]:
    """A record's value, key and headers as bytes, and ``MSG_SIZE_TOO_LARGE`` if it is.

    Raises:
        TypeError: a topic, partition, value, key or header of the wrong type.
    """
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise TypeError(f"partition must be an int, not {partition!r}")
    value_bytes = _bytes("value", value)
    key_bytes = _bytes("key", key)
    header_list = _headers(headers)
    size = (0 if value_bytes is None else len(value_bytes)) + (
        0 if key_bytes is None else len(key_bytes)
    )
    if header_list:
        size += sum(len(k) + (0 if v is None else len(v)) for k, v in header_list)
    if size <= largest:
        return value_bytes, key_bytes, header_list, None
    error = KafkaError(
        KafkaError.MSG_SIZE_TOO_LARGE,  # type: ignore[attr-defined]
        f"Broker: Message size too large ({size} bytes of key, value and headers "
        f"exceed message.max.bytes {largest})",
    )
    return value_bytes, key_bytes, header_list, error


def _delivery_error(error: BaseException, partition: int) -> KafkaError:
    """A failed record's error; a partition or topic the client does not know, as librdkafka's."""
    if isinstance(error, errors.UnknownTopicOrPartitionError):
        code = "_UNKNOWN_PARTITION" if partition != -1 else "_UNKNOWN_TOPIC"
        return KafkaError(LOCAL_CODES[code], str(error))
    return from_pykaf(error)


def _seconds(timeout: float | None) -> float | None:
    """confluent-kafka's timeouts: seconds, where -1 (or None) means no limit."""
    if timeout is None or timeout < 0:
        return None
    return float(timeout)


class Producer:
    """confluent-kafka's ``Producer(conf)`` on :class:`pykaf.sync.Producer`.

    Args:
        conf: librdkafka's keys (``docs/migrating.md`` lists those taken), and
            ``on_delivery``: the default delivery callback.

    Raises:
        KafkaException: an unsupported key or bad value (``_INVALID_ARG``),
            or no broker reachable (``_TRANSPORT``).
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        settings = translate(conf, "producer")
        self._names = settings.names
        self._default_callback = settings.on_delivery
        self._error_cb = settings.error_cb
        self._transactional = "transactional_id" in settings.options
        self._bootstrap = settings.bootstrap
        self._client_options = client_options(settings.options)
        self._admin: pykaf.sync.Admin | None = None
        # librdkafka's default message.max.bytes, checked by produce() as librdkafka does
        settings.options.setdefault("max_message_bytes", 1_000_000)
        # librdkafka's producer defaults: keys on the partitions confluent-kafka
        # picks (CRC-32), and topics auto-created when the broker allows it.
        settings.options.setdefault("partitioner", PARTITIONERS[DEFAULT_PARTITIONER]())
        settings.options.setdefault("allow_auto_create_topics", True)
        settings.options.setdefault("delivery_timeout", 300.0)  # message.timeout.ms
        self._largest = settings.options["max_message_bytes"]
        try:
            self._producer = pykaf.sync.Producer(
                settings.bootstrap, produce_block_timeout=0, **settings.options
            )
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._stage = self._producer.produce
        self._poll = self._producer.poll

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        *,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Stage one record; its delivery callback runs from :meth:`poll` or :meth:`flush`.

        Raises:
            BufferError: the buffer is full (call ``poll`` and try again), as
                confluent-kafka raises it.
            KafkaException: ``MSG_SIZE_TOO_LARGE``: key, value and headers
                exceed ``message.max.bytes`` (1,000,000 by default, as librdkafka's).
            KafkaException: a bad argument (``_INVALID_ARG``) or a closed
                producer (``_DESTROY``).
            TypeError: a value, key or header that is not bytes, str or None.
        """
        user = on_delivery or callback or self._default_callback
        if (
            user is not None
            and headers is None
            and type(value) is bytes
            and (key is None or type(key) is bytes)
            and type(topic) is str
            and type(partition) is int
            and type(timestamp) is int
            and len(value) + (0 if key is None else len(key)) <= self._largest
        ):
            # A record with a callback (confluent-kafka's README idiom): staged
            # with its creation time, so that it rides a run of such records.
            created = timestamp or time.time_ns() // 1_000_000
            try:
                self._stage(
                    topic,
                    value,
                    key=key,
                    partition=None if partition == -1 else partition,
                    timestamp=created,
                    on_delivery=_Report(user, key, value, partition, created),
                )
            except errors.BufferFullError as exc:
                raise BufferError(f"Local: Queue full ({exc})") from exc
            except errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc, self._names)) from exc
            return
        if (
            user is None
            and headers is None
            and not timestamp
            and type(value) is bytes
            and (key is None or type(key) is bytes)
            and type(topic) is str
            and type(partition) is int
            and len(value) + (0 if key is None else len(key)) <= self._largest
        ):
            # The common record (bytes, no callback or headers) goes straight to
            # pykaf's per-record path; the others are checked and converted below.
            try:
                self._stage(topic, value, key=key, partition=None if partition == -1 else partition)
            except errors.BufferFullError as exc:
                raise BufferError(f"Local: Queue full ({exc})") from exc
            except errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc, self._names)) from exc
            return
        value_bytes, key_bytes, header_list, too_large = checked_record(
            topic, value, key, partition, headers, self._largest
        )
        if too_large is not None:
            raise KafkaException(too_large)
        deliver = None
        sent = timestamp or None
        if user is not None:
            if sent is None:
                # Known here, so a broker's LogAppendTime can be told from it.
                sent = time.time_ns() // 1_000_000
            deliver = _Report(user, key_bytes, value_bytes, partition, sent)
        try:
            self._producer.produce(
                topic,
                value_bytes,
                key=key_bytes,
                partition=None if partition == -1 else partition,
                headers=header_list,
                timestamp=sent,
                on_delivery=deliver,
            )
        except errors.BufferFullError as exc:
            raise BufferError(f"Local: Queue full ({exc})") from exc
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc

    def poll(self, timeout: float | None = None) -> int:
        """Run delivery callbacks; wait up to ``timeout`` s (-1/None: no limit) for a first."""
        if timeout == 0:
            return self._poll(0)
        return self._poll(_seconds(timeout))

    def flush(self, timeout: float | None = None) -> int:
        """Wait for every record to be delivered and run their callbacks.

        Returns:
            How many records are still undelivered (0 unless ``timeout`` passed).

        Raises:
            KafkaException: records without a delivery callback failed
                (the first failure's error); with ``error_cb`` in the conf,
                it is called with each failed partition's error instead.
        """
        try:
            self._producer.flush(_seconds(timeout))
        except errors.KafkaTimeoutError:
            self._producer.poll(0)
        except errors.DeliveryError as exc:
            if self._error_cb is None:
                raise KafkaException(from_pykaf(exc, self._names)) from exc
            for _, _, _, error in exc.failures:
                self._error_cb(from_pykaf(error, self._names))
        return len(self._producer)

    def __len__(self) -> int:
        return len(self._producer)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Give up records not delivered yet (librdkafka's ``rd_kafka_purge``).

        Their delivery callbacks run from the next :meth:`poll` or
        :meth:`flush` with ``KafkaError._PURGE_QUEUE`` (still buffered) or
        ``KafkaError._PURGE_INFLIGHT`` (in a request already sent: the broker
        may have written them, so producing them again may duplicate them).
        A purged record without a callback is dropped, as librdkafka does.
        ``blocking`` is taken and has no effect: the purge is always done
        when the call returns. An idempotent producer bumps its epoch after
        purging records that held sequence numbers; in a transaction, purged
        records make ``commit_transaction`` fail: abort it.

        Raises:
            KafkaException: pykaf's purge failed (with its error's code);
                a closed producer has nothing to purge and raises nothing.
        """
        try:
            self._producer.purge(in_queue=in_queue, in_flight=in_flight)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (or only ``topic``).

        Raises:
            KafkaException: the cluster could not be asked.
        """
        if self._admin is None:
            self._admin = pykaf.sync.Admin(self._bootstrap, **self._client_options)
        return cluster_metadata(self._admin, topic)

    def _txn(self, call: Callable[..., None], *args: Any) -> None:
        if not self._transactional:
            raise KafkaException(
                KafkaError(
                    LOCAL_CODES["_NOT_CONFIGURED"],
                    "the transactional calls need transactional.id to be configured",
                )
            )
        try:
            call(*args)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc

    def init_transactions(self, timeout: float | None = None) -> None:
        """Check the producer is transactional: pykaf initialises it when it is made.

        Raises:
            KafkaException: ``_NOT_CONFIGURED``: no ``transactional.id``.
        """
        self._txn(lambda: None)

    def begin_transaction(self) -> None:
        """Open a transaction. Raises KafkaException (``_NOT_CONFIGURED``, ``_STATE``, ...)."""
        self._txn(self._producer.begin_transaction)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver what is staged, then commit. Raises KafkaException."""
        self._txn(self._producer.commit_transaction, _seconds(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction. Raises KafkaException."""
        self._txn(self._producer.abort_transaction, _seconds(timeout))

    def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a group's next offsets (``positions``) with the transaction.

        ``group_metadata`` is the consumer's ``consumer_group_metadata()``.
        """
        offsets = {(tp.topic, tp.partition): tp.offset for tp in positions}
        self._txn(
            self._producer.send_offsets_to_transaction, offsets, group_metadata, _seconds(timeout)
        )

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is staged and close (the shim's own; confluent-kafka closes on GC)."""
        self._producer.close(_seconds(timeout))
        if self._admin is not None:
            self._admin.close()
