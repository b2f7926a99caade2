"""The async producer: sarama's pipeline as trio tasks that pass batches.

Roles (each a trio task in the producer's nursery):

- the **dispatcher** drains the sarama-style ``input()`` channel in bursts;
- one **topic task** per topic looks its partitions up, then replays the
  records that arrived before it knew them;
- one **partition task** per partition finds the partition's leader and
  attaches the partition to that broker's sender; after a retriable failure
  it backs off, refreshes metadata and attaches it again (leader moves);
- per broker, a **sender** and a **receiver** (``sender.py``) build, write
  and settle Produce requests.

Records never travel one by one between tasks: ``send_nowait()`` partitions
the record and appends it to its partition's open batch in the caller's own
call (a few attribute reads and one Cython append), so the data moves between
tasks only as whole batches and requests. Completion is tracked per batch.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, NoReturn

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.client import Client, client_for
from pykaf._columns import BinaryColumn
from pykaf._net.metrics import BatchEvent, report_batch
from pykaf._producer.batch import ORDINAL_STEP, ProducerBatch, restamp
from pykaf._producer.config import ProducerConfig
from pykaf._producer.partitioner import (
    Partitioner,
    partitioner_from_config,
    sticky_for_null_keys,
)
from pykaf._producer.records import (
    BatchDelivery,
    ProducerError,
    ProducerMessage,
    ProducerStatistics,
    RecordMetadata,
)
from pykaf._producer.sender import BrokerSender
from pykaf._producer.state import PartitionState, TopicState
from pykaf._txn.manager import Offsets, TransactionManager, TxnStatus
from pykaf._util import open_service_nursery
from pykaf.codec import COMPRESSION_NAMES, BatchBuilder, record_size
from pykaf.errors import PartitionerError, TransactionStateError

log = logging.getLogger("pykaf.producer")

_INIT_PRODUCER_ID = P.InitProducerIdRequest.API_KEY
#: Per-record bytes counted against ``buffer_bytes`` besides key and value.
RECORD_OVERHEAD = 24
_MESSAGE_TOO_LARGE = 10
_DUPLICATE_SEQUENCE = 46
#: The parts of a split batch are rebuilt without a size limit of their own: the
#: broker's answer is the limit that counts.
_PART_MAX_BYTES = 2**31 - 1
_SEQUENCE_ERRORS = (45, 59)  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID
#: How brokers refuse a KIP-360 bump they do not support (never fencing: a fenced
#: transactional producer must not take its id back with a plain InitProducerId).
_BUMP_REFUSED = (errors.UnknownServerError, errors.InvalidPidMappingError)
_STALE_COORDINATOR = (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError)
_LEADER_ERRORS = (
    errors.NotLeaderOrFollowerError,
    errors.LeaderNotAvailableError,
    errors.UnknownTopicOrPartitionError,
    errors.KafkaConnectionError,
    errors.NotEnoughReplicasError,
)
OnDelivery = Callable[[BaseException | None, RecordMetadata], Any]


_time_ns = time.time_ns


def _now_ms() -> int:
    return _time_ns() // 1_000_000


def _klen(data: Any) -> int:
    return 0 if data is None else len(data)


class Producer:
    """Sends records to Kafka; get one from :func:`open_producer`.

    Use ``send()`` to await each record's acknowledgement, ``send_nowait()``
    to buffer records at full speed (results through ``on_delivery`` or
    ``flush()``), ``send_batch()`` for columns of values, or the channels
    (``input()``, ``successes()``, ``errors()``) in sarama's style.
    """

    def __init__(self, client: Client, config: ProducerConfig, nursery: trio.Nursery) -> None:
        self.client = client
        self.config = config
        self._nursery = nursery
        self.acks = config.acks_int
        self.idempotent = bool(config.idempotence or config.transactional_id)
        self.transactional_id: str | None = config.transactional_id
        self.txn: TransactionManager | None = None
        if config.transactional_id is not None:
            self.txn = TransactionManager(self, config.transactional_id)
        # True while records may not be sent: a transactional producer outside
        # an open transaction (one check on the hot path, with ``closing``).
        self._txn_gate = self.txn is not None
        self.producer_id = -1
        self.producer_epoch = -1
        self.closing = False
        self.closed = False
        self.paused = False  # no new requests (an epoch bump is under way)
        self.flushing = 0
        self._partitioner: Partitioner = partitioner_from_config(config.partitioner)
        self._on_new_batch = getattr(self._partitioner, "on_new_batch", None)
        self._sticky_nulls = sticky_for_null_keys(self._partitioner)
        self._topics: dict[str, TopicState] = {}
        self._brokers: dict[int, BrokerSender] = {}
        self._compression = config.compression_code
        self._level = config.compression_level
        #: The ``on_batch`` hook: checked once per request sent and once per batch settled.
        self.batch_hook: Callable[[BatchEvent], object] | None = config.on_batch
        # A batch is sealed once it holds flush_bytes (when set), never above batch_bytes.
        self._fill_bytes = min(config.flush_bytes or config.batch_bytes, config.batch_bytes)
        self._max_message = config.max_message_bytes
        self._buffer_bytes_limit = config.buffer_bytes
        self._buffer_records_limit = config.buffer_records
        self.buffered_bytes = 0
        self.buffered_records = 0
        self._space = trio.lowlevel.ParkingLot()
        self._in_flight_lot = trio.lowlevel.ParkingLot()
        self._unreported: list[tuple[str, int, int, BaseException]] = []
        self._on_send = tuple(config.on_send)
        self._on_ack = tuple(config.on_acknowledgement)
        self._bump_requested = False
        self._bump_done = trio.Event()
        self._bump_done.set()
        self._fatal: BaseException | None = None
        # sarama-style channels
        self._input_send, self._input_receive = trio.open_memory_channel[ProducerMessage](1024)
        self._burst: deque[ProducerMessage] = deque()  # taken off input(), not dispatched yet
        self._dispatcher_running = True  # the dispatcher is input()'s only reader while it runs
        self._dispatched = trio.Event()  # set by the dispatcher after each burst
        self._success_send: trio.MemorySendChannel[ProducerMessage] | None = None
        self._success_receive: trio.MemoryReceiveChannel[ProducerMessage] | None = None
        self._error_send: trio.MemorySendChannel[ProducerError] | None = None
        self._error_receive: trio.MemoryReceiveChannel[ProducerError] | None = None
        if config.return_successes:
            self._success_send, self._success_receive = trio.open_memory_channel[ProducerMessage](
                math.inf
            )
        if config.return_errors:
            self._error_send, self._error_receive = trio.open_memory_channel[ProducerError](
                math.inf
            )
        # counters
        self.records_sent = 0
        self.records_acked = 0
        self.records_failed = 0
        self.batches_sent = 0
        self.retries = 0
        self.error_count = 0
        self.epoch_bumps = 0
        self.splits = 0

    # ------------------------------------------------------------------ sending

    def send_nowait(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> None:
        """Buffer one record without waiting; it is sent in the background.

        ``on_delivery(error, metadata)`` is called (in the producer's trio
        loop) once the record is acknowledged (``error`` None) or has failed.
        Without it, a failure is reported by the next :meth:`flush` (or on
        ``errors()`` for records sent through ``input()``).

        Raises:
            BufferFullError: the buffer holds ``buffer_bytes`` or ``buffer_records``.
            ClosedError: the producer is closing.
            TransactionStateError: a transactional producer has no open transaction
                (``TransactionAbortableError`` after a failure in it,
                ``ProducerFencedError`` once fenced).
            RecordTooLargeError: the record exceeds ``max_message_bytes``.
            UnknownTopicOrPartitionError: ``partition`` is out of range.
            TypeError: key, value or a header is not bytes.
        """
        if self.closing or self._txn_gate:
            self._refuse()
        if (
            self.buffered_records >= self._buffer_records_limit
            or self.buffered_bytes >= self._buffer_bytes_limit
        ):
            raise errors.BufferFullError(
                f"the producer buffers {self.buffered_records} records / "
                f"{self.buffered_bytes} bytes (limits {self._buffer_records_limit} / "
                f"{self._buffer_bytes_limit})"
            )
        if self._on_send:
            topic, value, key, partition, headers, timestamp = self._intercept(
                topic, value, key, partition, headers, timestamp
            )
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        t = self._topics.get(topic)
        if t is None or t.count == 0:
            self._park(topic, value, key, partition, headers, timestamp, on_delivery)
            return
        batch, delta = self._append(t, partition, key, value, headers, timestamp)
        if on_delivery is not None:
            self._observe(batch, delta, timestamp, on_delivery)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait until it is acknowledged.

        Waits for buffer space first when the buffer is full. For throughput,
        send many records with :meth:`send_nowait` or :meth:`send_batch` (or
        from many tasks): each ``send`` waits a whole round trip.

        Raises:
            the record's own error: ``RecordTooLargeError``, ``ClosedError``,
            ``UnknownTopicOrPartitionError``, or the broker's error once
            retries are exhausted or the delivery timeout passes.
        """
        await self._wait_for_space()
        if self._on_send:
            topic, value, key, partition, headers, timestamp = self._intercept(
                topic, value, key, partition, headers, timestamp
            )
        if timestamp is None:
            timestamp = _now_ms()
        t = await self._ready_topic(topic)
        # Again: other senders may have filled the buffer while the topic was looked up.
        await self._wait_for_space()
        batch, delta = self._append(t, partition, key, value, headers, timestamp)
        batch.add_waiter(delta)
        await batch.wait()
        if batch.parts is not None:  # the broker found the batch too large: it was split
            batch, delta = batch.locate(delta)
        if batch.error is not None:
            raise batch.error
        return self._metadata(batch, delta, timestamp)

    async def send_batch(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps: Any = None,
        partition: int | None = None,
    ) -> BatchDelivery:
        """Buffer many records at once; return a :class:`BatchDelivery` to await.

        ``values`` (and ``keys``) are sequences of ``bytes | None``, pyarrow
        binary or string arrays, or :class:`pykaf.codec.BinaryColumn`; they
        are encoded in Cython with no Python object per record. Without keys
        and ``partition`` the records fill one partition's batch after another
        (sticky); with keys each record goes where its key hashes. Returns once
        everything is buffered, waiting for space as needed.

        Raises:
            ValueError: columns of different lengths.
            ClosedError, UnknownTopicOrPartitionError.

        A record too large for any batch (over ``batch_bytes``) fails alone:
        the delivery reports it and the other records go on.
        """
        values = _column(values)
        n = len(values)
        keys = _column(keys) if keys is not None else None
        for name, col in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
            if col is not None and len(col) != n:
                raise ValueError(f"{name} has {len(col)} entries for {n} values")
        if self.closing or self._txn_gate:
            self._refuse()
        delivery = BatchDelivery(n)
        if n == 0:
            return delivery
        t = await self._ready_topic(topic)
        if partition is not None:
            self._check_partition(t, partition)
        now = _now_ms()
        if keys is not None and partition is None:
            await self._send_keyed(t, values, keys, headers, timestamps, now, delivery)
            return delivery
        start = 0
        while start < n:
            await self._wait_for_space()
            part = partition
            if part is None:
                part = self._partitioner.partition(t.name, None, t.count, t.available)
            p = t.parts[part]
            batch = p.open or self._open_batch(p)
            room = self._buffer_records_limit - self.buffered_records
            stop = min(n, start + max(1, room))
            builder = batch.builder
            assert builder is not None
            try:
                end = builder.extend(
                    values,
                    keys,
                    timestamps,
                    headers,
                    start=start,
                    stop=stop,
                    timestamp=now if timestamps is None else None,
                )
            except errors.RecordTooLargeError as exc:
                if batch.count == 0 and builder.max_bytes < self.config.batch_bytes:
                    batch.builder = self._builder(self.config.batch_bytes)
                    continue
                # This one record cannot fit any batch: it fails alone, the rest go on.
                self.records_failed += 1
                delivery._complete(t.name, part, 1, exc)
                self._report_to_flush(t.name, part, 1, exc, delivery)
                start += 1
                continue
            added = end - start
            if added:
                nbytes = _column_bytes(values, start, end) + RECORD_OVERHEAD * added
                if keys is not None:
                    nbytes += _column_bytes(keys, start, end)
                batch.count += added
                if batch.count == added and p.broker is not None:
                    p.broker.wake()
                batch.buffered += nbytes
                self.buffered_bytes += nbytes
                self.buffered_records += added
                batch.add_delivery(delivery, added, batch.count - added)
                if batch.timestamps is not None:  # on_acknowledgement sees these too
                    batch.timestamps.extend(
                        [now] * added
                        if timestamps is None
                        else [int(ts) for ts in timestamps[start:end]]
                    )
                start = end
            if end < stop or added == 0:
                self.seal(p)
        return delivery

    async def _send_keyed(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        now: int,
        delivery: BatchDelivery,
    ) -> None:
        choose = self._partitioner.partition
        name, count, available = t.name, t.count, t.available
        for i in range(len(values)):
            if (
                self.buffered_records >= self._buffer_records_limit
                or self.buffered_bytes >= self._buffer_bytes_limit
                or self.closing
                or self._txn_gate
            ):
                await self._wait_for_space()  # exact limits; raises ClosedError
            key = keys[i]
            batch, delta = self._append(
                t,
                choose(name, key, count, available),
                key,
                values[i],
                headers[i] if headers is not None else None,
                now if timestamps is None else int(timestamps[i]),
            )
            batch.add_delivery(delivery, 1, delta)

    def input(self) -> trio.MemorySendChannel[ProducerMessage]:
        """Sarama's input channel: send :class:`ProducerMessage` objects on it.

        Their outcome goes to ``successes()`` / ``errors()`` when
        ``return_successes`` / ``return_errors`` are on (failures otherwise
        to the next :meth:`flush`). Closed when the producer closes.
        """
        return self._input_send

    def successes(self) -> trio.MemoryReceiveChannel[ProducerMessage]:
        """Acknowledged ``input()`` messages, with partition, offset and timestamp set.

        Raises:
            ConfigError: ``return_successes`` is off.
        """
        if self._success_receive is None:
            raise errors.ConfigError("successes() needs return_successes=True")
        return self._success_receive

    def errors(self) -> trio.MemoryReceiveChannel[ProducerError]:
        """Failed ``input()`` messages, each with its error.

        Raises:
            ConfigError: ``return_errors`` is off.
        """
        if self._error_receive is None:
            raise errors.ConfigError("errors() needs return_errors=True")
        return self._error_receive

    async def flush(self) -> None:
        """Send everything buffered now and wait until all of it is settled.

        Raises:
            DeliveryError: records failed since the last flush and nobody
                else was told (no ``on_delivery``, no waiter, no ``errors()``).
        """
        await self._settle_all()
        self._raise_unreported()

    def statistics(self) -> ProducerStatistics:
        """Buffers, in-flight requests and counters, per producer and per broker."""
        return ProducerStatistics(
            buffered_records=self.buffered_records,
            buffered_bytes=self.buffered_bytes,
            in_flight=sum(s.in_flight for s in self._brokers.values()),
            records_sent=self.records_sent,
            records_acked=self.records_acked,
            records_failed=self.records_failed,
            batches_sent=self.batches_sent,
            batch_records_avg=self.records_sent / self.batches_sent if self.batches_sent else 0.0,
            retries=self.retries,
            errors=self.error_count,
            epoch_bumps=self.epoch_bumps,
            splits=self.splits,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            brokers={node: s.statistics() for node, s in self._brokers.items()},
        )

    async def aclose(self) -> None:
        """Deliver everything buffered (up to ``delivery_timeout``), then close.

        Records still unsettled after that fail with ``ClosedError``. Raises
        ``DeliveryError`` for failures nobody was told of. A transaction still
        open is aborted first (as Kafka's producer does: closing never commits).
        """
        if self.closed:
            return
        await self._shutdown(deliver=True)
        self._raise_unreported()

    # ------------------------------------------------------------------ transactions

    @property
    def txn_status(self) -> TxnStatus | None:
        """The transaction status (sarama's TxnStatus); None without ``transactional_id``."""
        return None if self.txn is None else self.txn.status

    def _transactions(self) -> TransactionManager:
        if self.txn is None:
            raise errors.ConfigError("transactions need the transactional_id option")
        return self.txn

    def begin_transaction(self) -> None:
        """Open a transaction: records sent from now on belong to it.

        Partitions join the transaction (AddPartitionsToTxn) as their first
        batch is about to be sent, many in one request.

        Raises:
            ConfigError: the producer has no ``transactional_id``.
            TransactionStateError: a transaction is already open, or the last
                one is still committing or aborting.
            TransactionAbortableError: the previous transaction failed and
                must be aborted first.
            ProducerFencedError: the producer was fenced (also any fatal error).
        """
        self._transactions().begin()

    async def commit_transaction(self) -> None:
        """Send everything buffered, wait until all of it is acknowledged, then commit.

        Calling it again after a ``KafkaTimeoutError`` retries the commit.

        Raises:
            TransactionStateError: no transaction is open.
            TransactionAbortableError: a record or an offset of the transaction
                failed (its cause is the error): call :meth:`abort_transaction`.
            ProducerFencedError: another producer with the same
                ``transactional_id`` took over (fatal: only close remains);
                ``InvalidTxnStateError`` and ``TransactionalIdAuthorizationError``
                are fatal too.
            KafkaTimeoutError: the coordinator kept answering with retriable
                errors for ``request_timeout``.
        """
        await self._transactions().commit()

    async def abort_transaction(self) -> None:
        """Abort the open transaction; then a new one may begin.

        Records not sent yet fail with ``TransactionAbortedError``; the
        producer waits for requests in flight, then ends the transaction
        (EndTxn, abort). Failures of the aborted records are not raised again
        by ``flush()`` or ``aclose()``.

        Raises:
            TransactionStateError: no transaction is open.
            ProducerFencedError: fenced (or any other fatal error).
            KafkaTimeoutError: as for :meth:`commit_transaction` (call again).
        """
        await self._transactions().abort()

    async def send_offsets_to_transaction(self, offsets: Offsets, group_metadata: Any) -> None:
        """Commit a consumer group's offsets with the open transaction (KIP-447).

        Args:
            offsets: the next offset to consume per partition:
                ``{(topic, partition): offset}`` (values may be
                ``(offset, metadata)`` pairs), or objects with ``topic``,
                ``partition``, ``offset`` (and optionally ``metadata``).
            group_metadata: a :class:`GroupMetadata` (``session.group_metadata()``
                of a consumer group session), a session itself, or a group id.

        The offsets become visible to the group when the transaction commits
        and are dropped when it aborts.

        Raises:
            TransactionStateError: no transaction is open.
            TransactionAbortableError: the transaction already failed.
            the coordinator's error (then the transaction must abort), e.g.
            ``IllegalGenerationError``, ``UnknownMemberIdError``,
            ``FencedInstanceIdError`` when the member was fenced from the group.
        """
        await self._transactions().send_offsets(offsets, group_metadata)

    async def _drain_input(self) -> None:
        """Return once every message already on ``input()`` is dispatched, in order.

        The dispatcher task stays the channel's only reader while it runs: a
        message it was just handed by ``receive()`` is its own before it even
        runs, so another reader would overtake it. This waits until the
        dispatcher has nothing in hand and waits on an empty channel; once the
        dispatcher has ended (the input was closed), it dispatches the rest
        itself.
        """
        receive = self._input_receive
        while self._dispatcher_running:
            stats = receive.statistics()
            if not self._burst and stats.current_buffer_used == 0 and stats.tasks_waiting_receive:
                return
            if self._dispatched.is_set():
                self._dispatched = trio.Event()
            with trio.move_on_after(0.05):
                await self._dispatched.wait()
        while True:
            await self._dispatch_burst()
            try:
                self._burst.append(receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return

    async def _flush_transaction(self) -> None:
        """Commit's flush: what was sent in the transaction, acknowledged or failed."""
        await self._settle_all()

    def _drop_unsent(self, p: PartitionState, error: BaseException) -> bool:
        """Fail ``p``'s batches not sent yet; whether one of them held sequence numbers."""
        lost = False
        batches = list(p.queue)
        if p.open is not None and p.open.count:
            batches.append(p.open)
        for batch in batches:
            lost = lost or batch.raw is not None
            self._fail_anywhere(p, batch, error)
        return lost

    async def _drop_transaction(self, error: BaseException) -> bool:
        """Abort's part: fail what is unsent, wait out what is in flight.

        Returns whether a dropped batch held sequence numbers (the epoch must
        then be bumped before the next transaction).
        """
        lost = False
        self.paused = True  # nothing new is written from here on
        try:
            while True:
                for t in list(self._topics.values()):
                    self._fail_parked(t, error)
                    for p in t.parts:
                        if p.retrying and not p.inflight:
                            self._finish_retry(p)
                        lost = self._drop_unsent(p, error) or lost
                if not any(s.in_flight for s in self._brokers.values()):
                    break
                await self._in_flight_lot.park()
        finally:
            self.paused = False
            for s in self._brokers.values():
                s.wake()
        # The transaction's failures are settled by the abort: flush() and
        # aclose() do not raise them again.
        self._unreported.clear()
        return lost

    async def _new_epoch(self) -> None:
        """A new epoch from the coordinator; every partition's sequence starts again at 0."""
        await self.init_producer_id(bump=True)
        self.epoch_bumps += 1
        for t in self._topics.values():
            for p in t.parts:
                p.next_sequence = 0

    # ------------------------------------------------------------------ the hot path

    def _append(
        self,
        t: TopicState,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
    ) -> tuple[ProducerBatch, int]:
        """Partition one record and append it to its partition's open batch."""
        if partition is None:
            p = t.null_part if key is None else None
            if p is None:
                p = t.parts[self._choose(t, key)]
        elif type(partition) is int and 0 <= partition < t.count:
            p = t.parts[partition]
        else:
            self._check_partition(t, partition)
            raise AssertionError("unreachable")
        nbytes = (0 if value is None else len(value)) + (0 if key is None else len(key))
        if nbytes > self._max_message - RECORD_OVERHEAD or headers:  # headers count too
            self._check_size(key, value, headers)
        batch = p.open
        if batch is not None:
            delta = batch.builder.append(timestamp, key, value, headers)  # type: ignore[union-attr]
            if delta < 0:
                self.seal(p)
                batch = None
                if partition is None and key is None:
                    # KIP-480: the record that filled the sticky batch goes to the next one.
                    p = t.parts[self._choose(t, key)]
                    batch = p.open
                    if batch is not None:
                        delta = batch.builder.append(timestamp, key, value, headers)  # type: ignore[union-attr]
                        if delta < 0:
                            self.seal(p)
                            batch = None
        if batch is None:
            batch = self._open_batch(p)
            delta = self._append_first(batch, timestamp, key, value, headers)
        batch.count += 1
        if batch.count == 1 and p.broker is not None:
            p.broker.wake()  # its linger starts: the sender must know of it
        nbytes += RECORD_OVERHEAD
        batch.buffered += nbytes
        self.buffered_bytes += nbytes
        self.buffered_records += 1
        if batch.timestamps is not None:
            batch.timestamps.append(timestamp)
        return batch, delta

    def _choose(self, t: TopicState, key: bytes | None) -> int:
        """Ask the partitioner; remember a sticky partition for null keys."""
        part = self._partitioner.partition(t.name, key, t.count, t.available)
        if type(part) is not int or not 0 <= part < t.count:
            raise PartitionerError(
                f"the partitioner chose {part!r} for topic {t.name!r} with {t.count} partitions"
            )
        if key is None and self._sticky_nulls:
            t.null_part = t.parts[part]
        return part

    def _append_first(
        self,
        batch: ProducerBatch,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
    ) -> int:
        """Append to an empty batch, growing it to batch_bytes for one large record."""
        builder = batch.builder
        assert builder is not None
        try:
            return builder.append(timestamp, key, value, headers)
        except errors.RecordTooLargeError:
            if builder.max_bytes >= self.config.batch_bytes:
                raise
            batch.builder = self._builder(self.config.batch_bytes)
            return batch.builder.append(timestamp, key, value, headers)

    def _builder(self, max_bytes: int) -> BatchBuilder:
        return BatchBuilder(
            compression=self._compression,
            compression_level=self._level,
            max_bytes=max_bytes,
            max_records=self.config.batch_records,
        )

    def _open_batch(self, p: PartitionState) -> ProducerBatch:
        batch = ProducerBatch(
            p.topic,
            p.partition,
            self._builder(self._fill_bytes),
            trio.current_time(),
            p.next_ordinal,
        )
        p.next_ordinal += ORDINAL_STEP
        if self._on_ack:
            batch.timestamps = []
        p.open = batch
        return batch

    def seal(self, p: PartitionState, *, wake: bool = True) -> None:
        """Move the partition's open batch to its send queue (full, lingered or flushed)."""
        batch = p.open
        if batch is None:
            return
        p.open = None
        if batch.count == 0:
            return
        p.queue.append(batch)
        t = self._topics.get(p.topic)
        if t is not None and t.null_part is p:
            t.null_part = None
        if self._on_new_batch is not None:
            self._on_new_batch(p.topic, p.partition)
        if wake and p.broker is not None:
            p.broker.wake()

    def _observe(self, batch: ProducerBatch, delta: int, timestamp: int, target: Any) -> None:
        batch.observed += 1
        if batch.extras is None:
            batch.extras = [(delta, timestamp, target)]
        else:
            batch.extras.append((delta, timestamp, target))

    def _check_partition(self, t: TopicState, partition: int) -> None:
        if type(partition) is not int or not 0 <= partition < t.count:
            raise errors.UnknownTopicOrPartitionError(
                f"topic {t.name!r} has no partition {partition!r} (it has {t.count})"
            )

    def _check_size(self, key: Any, value: Any, headers: Any) -> None:
        size = record_size(0, 0, key, value, headers)
        if size > self._max_message:
            raise errors.RecordTooLargeError(
                f"a record of {size} bytes exceeds max_message_bytes ({self._max_message})"
            )

    def _intercept(self, *record: Any) -> tuple[Any, ...]:
        topic, value, key, partition, headers, timestamp = record
        msg = ProducerMessage(topic, value, key, headers, partition, timestamp)
        for fn in self._on_send:
            out = fn(msg)
            if out is not None:
                msg = out
        return msg.topic, msg.value, msg.key, msg.partition, msg.headers, msg.timestamp

    def _park(self, topic: str, *record: Any) -> None:
        """Keep a record for a topic whose partitions are not known yet."""
        value, key = record[0], record[1]
        # A bad record fails in the caller's call here too (TypeError, RecordTooLargeError).
        self._check_size(key, value, record[3])
        t = self._topics.get(topic)
        if t is None:
            t = self._start_topic(topic)
        nbytes = _klen(value) + _klen(key) + RECORD_OVERHEAD
        t.pending.append((*record, nbytes))
        self.buffered_bytes += nbytes
        self.buffered_records += 1

    async def wait_for_space(self) -> None:
        """Wait until the buffer has room, for a ``send_nowait`` loop that met ``BufferFullError``.

        Raises:
            ClosedError: the producer is closing.
        """
        await self._wait_for_space()

    async def _wait_for_space(self) -> None:
        while (
            self.buffered_records >= self._buffer_records_limit
            or self.buffered_bytes >= self._buffer_bytes_limit
        ):
            if self.closing or self._txn_gate:
                self._refuse()
            await self._space.park()
        if self.closing or self._txn_gate:
            self._refuse()

    def _refuse(self) -> NoReturn:
        """Raise why no record may be sent now (closed, or no open transaction)."""
        if self.closing or self.txn is None:
            raise errors.ClosedError("the producer is closed")
        self.txn.refuse_send()

    async def _ready_topic(self, topic: str) -> TopicState:
        t = self._topics.get(topic)
        if t is None:
            t = self._start_topic(topic)
        if t.count == 0:
            await t.ready.wait()
            if t.error is not None:
                raise t.error
        return t

    # ------------------------------------------------------------------ topics and partitions

    def _start_topic(self, topic: str) -> TopicState:
        if not isinstance(topic, str) or not topic:
            raise errors.InvalidTopicError(f"invalid topic name {topic!r}")
        if self.closing:  # its task could not start: the nursery is closing or closed
            raise errors.ClosedError("the producer is closed")
        t = TopicState(topic)
        self._topics[topic] = t
        self._nursery.start_soon(self._topic_task, t, name=f"pykaf producer topic {topic}")
        return t

    async def _topic_task(self, t: TopicState) -> None:
        try:
            partitions = await self._lookup_topic(t.name)
        except errors.PykafError as exc:
            t.error = exc
            if self._topics.get(t.name) is t:
                del self._topics[t.name]  # a later send asks again
            self._fail_parked(t, exc)
            t.ready.set()
            return
        t.parts = [PartitionState(t.name, i) for i in range(len(partitions))]
        for p in t.parts:
            self._nursery.start_soon(
                self._partition_task, p, name=f"pykaf producer {t.name}/{p.partition}"
            )
        t.count = len(t.parts)
        self._update_available(t)
        pending, t.pending = t.pending, []
        # Their space is released in one step; _append takes it again one by one.
        self.buffered_records -= len(pending)
        self.buffered_bytes -= sum(record[-1] for record in pending)
        for record in pending:
            value, key, partition, headers, timestamp, target, _ = record
            try:
                batch, delta = self._append(t, partition, key, value, headers, timestamp)
            except (errors.PykafError, TypeError, ValueError) as exc:
                self._report_one(t.name, record, exc)
                continue
            if target is not None:
                self._observe(batch, delta, timestamp, target)
        t.ready.set()

    async def _lookup_topic(self, topic: str) -> list[int]:
        deadline = trio.current_time() + min(self.config.delivery_timeout, 60.0)
        while True:
            try:
                return await self.client.partitions(topic)
            except errors.UnknownTopicOrPartitionError:
                if not self.config.allow_auto_create_topics:
                    raise
                if trio.current_time() >= deadline:
                    raise
            except errors.RetriableError:
                if trio.current_time() >= deadline:
                    raise
            await trio.sleep(self.config.retry_backoff)
            await self.client.refresh_metadata(topic)

    def _update_available(self, t: TopicState) -> None:
        """Refresh the topic's writable partitions; adopt partitions added to it."""
        info = self.client.metadata.topics.get(t.name)
        if info is None:
            t.available = None
            return
        if t.count and len(info.partitions) > t.count:
            log.info(
                "topic %s grew from %d to %d partitions", t.name, t.count, len(info.partitions)
            )
            for i in range(t.count, len(info.partitions)):
                p = PartitionState(t.name, i)
                t.parts.append(p)
                self._nursery.start_soon(
                    self._partition_task, p, name=f"pykaf producer {t.name}/{i}"
                )
            t.count = len(t.parts)
        t.null_part = None  # availability may have changed: ask the partitioner again
        up = [i for i, p in info.partitions.items() if p.leader >= 0 and i < t.count]
        t.available = sorted(up) if len(up) < t.count else None

    async def _partition_task(self, p: PartitionState) -> None:
        """Attach the partition to its leader's sender, again after every failure."""
        cfg = self.config
        while True:
            if p.broker is None:
                if p.failures:
                    backoff = min(cfg.retry_backoff * 2 ** (p.failures - 1), cfg.retry_backoff_max)
                    await trio.sleep(backoff)
                await self._bump_done.wait()
                leader = await self._find_leader(p)
                if leader is None:
                    p.failures += 1
                    self._expire_all(p)
                    continue
                p.retrying = False
                p.needs_metadata = False
                self._sender(leader).attach(p)
            p.detached = trio.Event()
            await p.detached.wait()

    async def _find_leader(self, p: PartitionState) -> int | None:
        try:
            if p.needs_metadata:
                await self.client.refresh_metadata(p.topic)
                t = self._topics.get(p.topic)
                if t is not None:
                    self._update_available(t)
            leader = self.client.metadata.leader_of(p.topic, p.partition)
        except errors.PykafError as exc:
            log.info("no leader for %s/%d yet: %s", p.topic, p.partition, exc)
            return None
        if leader is None:
            p.needs_metadata = True
            return None
        return leader.node_id

    def _sender(self, node_id: int) -> BrokerSender:
        sender = self._brokers.get(node_id)
        if sender is None:
            sender = BrokerSender(self, node_id)
            self._brokers[node_id] = sender
            self._nursery.start_soon(sender.run_sender, name=f"pykaf producer sender {node_id}")
            self._nursery.start_soon(sender.run_receiver, name=f"pykaf producer receiver {node_id}")
        return sender

    def _detach(self, p: PartitionState) -> None:
        if p.broker is not None:
            p.broker.detach(p)
        p.detached.set()

    # ------------------------------------------------------------------ building and answers

    def build(self, p: PartitionState, batch: ProducerBatch) -> bytes:
        """The batch's bytes: built (sequence-numbered) the first time it is sent."""
        if batch.raw is not None:
            return batch.raw
        builder = batch.builder
        assert builder is not None
        if self.idempotent:
            batch.base_sequence = p.next_sequence
            p.next_sequence = (p.next_sequence + batch.count) & 0x7FFFFFFF
            raw = builder.build(
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=batch.base_sequence,
                is_transactional=self.transactional_id is not None,
            )
        else:
            raw = builder.build()
        batch.raw = raw
        batch.builder = None
        return raw

    def count_sent(self, batches: list[ProducerBatch], records: int) -> None:
        """Counters for a request about to be written."""
        self.batches_sent += len(batches)
        self.records_sent += records
        self.retries += sum(1 for b in batches if b.attempts > 1)

    def expire_queued(self, p: PartitionState, now: float) -> bool:
        """Fail queued batches past the delivery timeout; whether a batch is left to send."""
        timeout = self.config.delivery_timeout
        while p.queue and now - p.queue[0].created > timeout:
            batch = p.queue.popleft()
            error = errors.KafkaTimeoutError(
                f"{p.topic}/{p.partition}: not delivered within delivery_timeout ({timeout}s)"
            )
            self._fail(batch, error)
            if self.idempotent and batch.raw is not None:
                # It was sent before (a retry): its sequence numbers are lost, and
                # the broker would refuse every later batch of the partition.
                self._request_bump(error)
        return bool(p.queue)

    def _expire_all(self, p: PartitionState) -> None:
        now = trio.current_time()
        if (
            p.open is not None
            and p.open.count
            and now - p.open.created > self.config.delivery_timeout
        ):
            self.seal(p, wake=False)
        self.expire_queued(p, now)

    def partition_unreachable(self, p: PartitionState, error: BaseException) -> None:
        """The leader could not be reached: look the leader up again, then retry."""
        p.failures += 1
        p.needs_metadata = True
        self.client.metadata.mark_leader_unknown(p.topic, p.partition)
        self._detach(p)

    def in_flight_changed(self) -> None:
        """A response arrived; wake whoever waits for requests to drain."""
        self._in_flight_lot.unpark_all()

    def handle_response(
        self,
        sender: BrokerSender,
        batches: list[ProducerBatch],
        response: Any,
        error: BaseException | None,
    ) -> None:
        """Settle or retry each batch of one Produce request."""
        results: dict[tuple[str, int], Any] = {}
        if response is not None:
            for topic in response.responses:
                for part in topic.partition_responses:
                    results[(topic.name, part.index)] = part
        for batch in batches:
            t = self._topics.get(batch.topic)
            p = t.parts[batch.partition] if t is not None else None
            if p is not None:
                with suppress(ValueError):
                    p.inflight.remove(batch)
            if batch.done:
                continue
            if response is None and error is None:  # acks=0
                self._complete(batch, -1, -1)
                continue
            if error is not None:
                self._retry_or_fail(p, batch, error)
                continue
            r = results.get((batch.topic, batch.partition))
            if r is None:
                self._retry_or_fail(
                    p,
                    batch,
                    errors.UnknownServerError(
                        f"the Produce response has no answer for {batch.topic}/{batch.partition}"
                    ),
                )
                continue
            code = r.error_code
            if code == 0 or code == _DUPLICATE_SEQUENCE:
                offset = r.base_offset if code == 0 else -1
                self._complete(batch, offset, getattr(r, "log_append_time_ms", -1))
                if p is not None:
                    p.failures = 0
                continue
            exc_type = errors.error_for_code(code)
            assert exc_type is not None
            detail = getattr(r, "error_message", None) or exc_type.description
            exc = exc_type(f"{batch.topic}/{batch.partition}: {detail}")
            self.error_count += 1
            sender.errors += 1
            if code == _MESSAGE_TOO_LARGE and batch.count > 1 and p is not None:
                self._split(p, batch)
            elif (
                self.idempotent
                and code in _SEQUENCE_ERRORS
                and (self.txn is None or (p is not None and p.retrying))
            ):
                # While the partition is retrying, an earlier batch of it was not
                # written: the broker refuses the later ones until it is resent.
                if p is not None and not p.retrying:
                    self._request_bump(exc)
                self._retry_or_fail(p, batch, exc, count_attempt=False)
            elif exc_type.retriable:
                self._retry_or_fail(p, batch, exc)
            else:
                self._fail(batch, exc)
                if self.idempotent and batch.base_sequence >= 0:
                    self._request_bump(exc)  # the sequence now has a gap
        for batch in batches:
            t = self._topics.get(batch.topic)
            if t is not None:
                self._finish_retry(t.parts[batch.partition])

    def _retry_or_fail(
        self,
        p: PartitionState | None,
        batch: ProducerBatch,
        error: BaseException,
        *,
        count_attempt: bool = True,
    ) -> None:
        cfg = self.config
        expired = trio.current_time() - batch.created > cfg.delivery_timeout
        if p is None or (count_attempt and batch.attempts > cfg.retries) or expired:
            self._fail(batch, error)
            if self.idempotent and batch.base_sequence >= 0:
                self._request_bump(error)
            return
        log.debug("retrying %r after %s", batch, error)
        p.retry.append(batch)
        if not p.retrying:
            p.retrying = True
            p.failures += 1
            if isinstance(error, _LEADER_ERRORS):
                p.needs_metadata = True
                self.client.metadata.mark_leader_unknown(p.topic, p.partition)

    def _split(self, p: PartitionState, batch: ProducerBatch) -> None:
        """Send a batch the broker refused as too large again as two halves, in its place.

        The halves (:meth:`ProducerBatch.split`) keep the batch's producer
        id, epoch and sequence numbers: the broker wrote nothing of it, so it
        still expects the first one. They go to ``retry`` like a retried
        batch, so they are sent before anything later of the partition. A
        half still too large is split again, and a single record still too
        large fails alone. A split counts as no retry: each one halves the
        records, so splitting ends.
        """
        size = batch.size()
        parts = batch.split(lambda: self._builder(_PART_MAX_BYTES), RECORD_OVERHEAD)
        log.info(
            "%s/%d: a batch of %d records (%d bytes) is too large for the broker; "
            "sending it again as %s records",
            batch.topic,
            batch.partition,
            batch.count,
            size,
            " + ".join(str(part.count) for part in parts),
        )
        self.splits += 1
        p.retry.extend(parts)
        p.retrying = True  # no backoff, no metadata refresh: the broker is fine

    def _finish_retry(self, p: PartitionState) -> None:
        """Once nothing of a retrying partition is in flight, requeue and re-attach it."""
        if p.retrying and not p.inflight:
            p.requeue()
            self._detach(p)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        batch.base_offset = base_offset
        batch.log_append_time = log_append_time
        self.records_acked += batch.count
        self._settle(batch, None)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        log.warning("%r failed: %s", batch, error)
        if self.txn is not None:
            self.txn.record_failed(error)
            if isinstance(error, errors.InvalidProducerEpochError) and isinstance(
                self.txn.error, errors.ProducerFencedError
            ):
                # Kafka answers a fenced producer's Produce with INVALID_PRODUCER_EPOCH
                # (PRODUCER_FENCED is for the coordinator's APIs): its records fail as
                # the producer does, with ProducerFencedError (the broker's as cause).
                error = self.txn.error
        self.records_failed += batch.count
        batch.error = error
        unobserved = batch.count - batch.observed
        if batch.deliveries:
            for delivery, n, _ in batch.deliveries:
                unobserved -= n
                self._report_to_flush(batch.topic, batch.partition, n, error, delivery)
        if unobserved > 0:
            self._unreported.append((batch.topic, batch.partition, unobserved, error))
        self._settle(batch, error)

    def _report_to_flush(
        self,
        topic: str,
        partition: int,
        records: int,
        error: BaseException,
        delivery: BatchDelivery,
    ) -> None:
        """Keep a send_batch failure for flush() unless its delivery is (or gets) awaited."""
        if delivery.observed:
            return
        entry = (topic, partition, records, error)
        self._unreported.append(entry)
        delivery._claims.append(entry)
        delivery._sink = self._unreported

    def _settle(self, batch: ProducerBatch, error: BaseException | None) -> None:
        if self.batch_hook is not None:
            report_batch(self.batch_hook, self._batch_event(batch, error))
        batch.done = True
        batch.builder = None
        self._release(batch.count, batch.buffered)
        if batch.event is not None:
            batch.event.set()
        if batch.extras:
            for delta, timestamp, target in batch.extras:
                self._notify(batch, delta, timestamp, target, error)
        if batch.deliveries:
            for delivery, n, _ in batch.deliveries:
                delivery._complete(batch.topic, batch.partition, n, error)
        if self._on_ack:
            stamps = batch.timestamps or []
            for i, ts in enumerate(stamps):
                md = self._metadata(batch, i, ts)
                for fn in self._on_ack:
                    try:
                        fn(md, error)
                    except Exception:
                        log.exception("on_acknowledgement interceptor failed")

    def _batch_event(self, batch: ProducerBatch, error: BaseException | None) -> BatchEvent:
        """The ``on_batch`` hook's view of a batch that is settling now."""
        trace = batch.trace
        if trace is None:  # never sent: nothing reached a broker
            builder = batch.builder
            node_id, seconds = -1, None
            uncompressed = None if builder is None else builder.size
        else:
            node_id, uncompressed = trace.node_id, trace.uncompressed
            seconds = trio.current_time() - trace.first_sent
        return BatchEvent(
            kind="produce",
            topic=batch.topic,
            partition=batch.partition,
            node_id=node_id,
            records=batch.count,
            bytes=0 if batch.raw is None else len(batch.raw),
            uncompressed_bytes=uncompressed,
            compression=COMPRESSION_NAMES[self._compression],
            base_offset=batch.base_offset if error is None and batch.base_offset >= 0 else None,
            error=error,
            seconds=seconds,
            retries=max(0, batch.attempts - 1),
            dropped=0,
        )

    def _metadata(self, batch: ProducerBatch, delta: int, timestamp: int) -> RecordMetadata:
        offset = batch.base_offset + delta if batch.base_offset >= 0 else -1
        ts = batch.log_append_time if batch.log_append_time >= 0 else timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, ts)

    def _notify(
        self,
        batch: ProducerBatch,
        delta: int,
        timestamp: int,
        target: Any,
        error: BaseException | None,
    ) -> None:
        md = self._metadata(batch, delta, timestamp)
        if isinstance(target, ProducerMessage):
            self._route_message(target, md, error)
            return
        try:
            target(error, md)
        except Exception:
            log.exception("on_delivery callback failed")

    def _route_message(
        self, msg: ProducerMessage, md: RecordMetadata, error: BaseException | None
    ) -> None:
        if error is None:
            msg.partition, msg.offset, msg.timestamp = md.partition, md.offset, md.timestamp
            if self._success_send is not None:
                self._success_send.send_nowait(msg)
        elif self._error_send is not None:
            self._error_send.send_nowait(ProducerError(msg, error))

    def _report_one(self, topic: str, record: tuple[Any, ...], error: BaseException) -> None:
        """A parked record failed before it reached a batch."""
        target = record[5]
        timestamp = record[4]
        if self.txn is not None:
            self.txn.record_failed(error)
        self.records_failed += 1
        md = RecordMetadata(topic, -1 if record[2] is None else record[2], -1, timestamp)
        if isinstance(target, ProducerMessage):
            if self._error_send is not None:
                self._error_send.send_nowait(ProducerError(target, error))
                return
        elif target is not None:
            try:
                target(error, md)
            except Exception:
                log.exception("on_delivery callback failed")
            return
        self._unreported.append((topic, md.partition, 1, error))

    def _fail_parked(self, t: TopicState, error: BaseException) -> None:
        """Fail the records waiting for ``t``'s partitions to be known."""
        pending, t.pending = t.pending, []
        for record in pending:
            self._release(1, record[-1])
            self._report_one(t.name, record, error)

    def _release(self, records: int, nbytes: int) -> None:
        self.buffered_records -= records
        self.buffered_bytes -= nbytes
        if len(self._space):
            self._space.unpark_all()

    def _raise_unreported(self) -> None:
        if self._unreported:
            failures = list(self._unreported)
            self._unreported.clear()  # cleared in place: deliveries hold this list
            total = sum(n for _, _, n, _ in failures)
            raise errors.DeliveryError(
                f"{total} records failed: {failures[0][3]!r}"
                + (f" (and {len(failures) - 1} more failures)" if len(failures) > 1 else ""),
                failures,
            )

    # ------------------------------------------------------------------ idempotence

    async def init_producer_id(self, *, bump: bool = False) -> None:
        """Get a producer id and epoch (InitProducerId); with ``bump``, a new epoch.

        Raises:
            UnsupportedVersionError: the cluster has no InitProducerId.
            the broker's error when it is not retriable.
        """
        deadline = trio.current_time() + self.config.request_timeout
        stale = False  # the transaction coordinator must be looked up again
        while True:
            try:
                if self.txn is not None:
                    conn = await self.txn._connection(None, stale)
                else:
                    conn = await self.client.any_connection()
                version = conn.version_for(_INIT_PRODUCER_ID)
                kw: dict[str, Any] = {
                    "transactional_id": self.transactional_id,
                    "transaction_timeout_ms": int(self.config.transaction_timeout * 1000),
                }
                keep = version >= 3 and bump and self.producer_id >= 0
                if version >= 3:
                    kw["producer_id"] = self.producer_id if keep else -1
                    kw["producer_epoch"] = self.producer_epoch if keep else -1
                resp = await conn.request(P.InitProducerIdRequest(**kw), version)
                err = errors.error_for_code(resp.error_code)
                if err is None:
                    self.producer_id = resp.producer_id
                    self.producer_epoch = resp.producer_epoch
                    log.info("producer id %d epoch %d", self.producer_id, self.producer_epoch)
                    if self.txn is not None:
                        self.txn.initialized()
                    return
                if not err.retriable:
                    if keep and (self.txn is None or issubclass(err, _BUMP_REFUSED)):
                        # Kafka gives an idempotent producer a new id on a bump anyway;
                        # a broker that refuses the bump (librdkafka's mock answers
                        # INVALID_PRODUCER_ID_MAPPING) is asked for a new id instead.
                        # With a transactional id that is the same id, next epoch
                        # (Tansu answers UNKNOWN_SERVER_ERROR to a KIP-360 bump).
                        log.info("InitProducerId refused the epoch bump (%s): new id", err.__name__)
                        bump = False
                        continue
                    exc = err(f"InitProducerId: {err.description}")
                    if self.txn is not None:
                        self.txn.abortable(exc)  # fatal errors make the producer fatal
                    raise exc
                stale = issubclass(err, _STALE_COORDINATOR)
                last: BaseException = err(err.description)
            except (errors.KafkaConnectionError, errors.RetriableError) as exc:
                stale = True
                last = exc
            if trio.current_time() >= deadline:
                raise errors.KafkaTimeoutError(f"InitProducerId did not succeed: {last}")
            await trio.sleep(self.config.retry_backoff)

    def _request_bump(self, reason: BaseException) -> None:
        if self.txn is not None:
            # Never inside a transaction: it must abort; the abort bumps the epoch.
            self.txn.sequence_gap(reason)
            return
        if self._bump_requested:
            return
        log.warning("resetting the idempotent producer's epoch after: %s", reason)
        self._bump_requested = True
        self._bump_done = trio.Event()
        self.paused = True
        self._nursery.start_soon(self._bump_epoch, name="pykaf producer epoch bump")

    async def _bump_epoch(self) -> None:
        """KIP-360: once nothing is in flight, new epoch, sequences from 0, re-stamp."""
        try:
            while any(s.in_flight for s in self._brokers.values()):
                await self._in_flight_lot.park()
            try:
                await self.init_producer_id(bump=True)
            except errors.PykafError as exc:
                self._fatal = exc
                log.error("the idempotent producer cannot recover: %s", exc)
                for t in self._topics.values():
                    for p in t.parts:
                        for batch in p.batches():
                            if batch.raw is not None or batch is not p.open:
                                self._fail_anywhere(p, batch, exc)
                return
            self.epoch_bumps += 1
            for t in self._topics.values():
                for p in t.parts:
                    p.requeue()
                    seq = 0
                    for batch in p.queue:
                        if batch.raw is None:
                            continue
                        batch.base_sequence = seq
                        batch.raw = restamp(batch.raw, self.producer_id, self.producer_epoch, seq)
                        seq = (seq + batch.count) & 0x7FFFFFFF
                    p.next_sequence = seq
        finally:
            self._bump_requested = False
            self.paused = False
            self._bump_done.set()
            for s in self._brokers.values():
                s.wake()

    def _fail_anywhere(self, p: PartitionState, batch: ProducerBatch, error: BaseException) -> None:
        for place in (p.queue, p.inflight):
            with suppress(ValueError):
                place.remove(batch)
        if batch in p.retry:
            p.retry.remove(batch)
        if batch is p.open:
            p.open = None
        if not batch.done:
            self._fail(batch, error)

    # ------------------------------------------------------------------ dispatcher and shutdown

    async def _dispatcher(self) -> None:
        """Drain ``input()`` in bursts into the same path ``send_nowait`` takes."""
        receive = self._input_receive
        try:
            while True:
                try:
                    msg = await receive.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                burst = self._burst
                burst.append(msg)
                while len(burst) < 4096:
                    try:
                        burst.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                        break
                await self._dispatch_burst()
                self._dispatched.set()
        finally:
            self._dispatcher_running = False
            self._dispatched.set()

    async def _dispatch_burst(self) -> None:
        """Dispatch the messages taken off ``input()`` and not dispatched yet, in order."""
        burst = self._burst
        while burst:
            await self._wait_for_space_lenient()
            if burst:
                self._dispatch(burst.popleft())

    def _dispatch(self, msg: ProducerMessage) -> None:
        """One ``input()`` message into the ``send_nowait`` path; its errors to errors()."""
        observe = self.config.return_errors or self.config.return_successes
        try:
            self.send_nowait(
                msg.topic,
                msg.value,
                key=msg.key,
                partition=msg.partition,
                headers=msg.headers,
                timestamp=msg.timestamp,
                on_delivery=msg if observe else None,  # type: ignore[arg-type]
            )
        except (errors.PykafError, TypeError, ValueError) as exc:
            self.records_failed += 1
            if self.txn is not None and not isinstance(exc, TransactionStateError):
                self.txn.record_failed(exc)  # the transaction lost a record: abort only
            if self._error_send is not None:
                self._error_send.send_nowait(ProducerError(msg, exc))
            else:
                self._unreported.append(
                    (msg.topic, -1 if msg.partition is None else msg.partition, 1, exc)
                )

    async def _deliver_all(self) -> None:
        """Everything accepted so far, input() included, acknowledged or failed."""
        await self._drain_input()  # messages already on input() must be delivered too
        self.closing = True
        self._space.unpark_all()
        await self._settle_all()

    async def _settle_all(self) -> None:
        """Send at once everything buffered now and wait until it is all settled."""
        self.flushing += 1
        try:
            for t in list(self._topics.values()):
                if t.pending:
                    await t.ready.wait()
            batches = [b for t in self._topics.values() for p in t.parts for b in p.batches()]
            for sender in self._brokers.values():
                sender.wake()
            for batch in batches:
                await batch.wait()
        finally:
            self.flushing -= 1

    async def _wait_for_space_lenient(self) -> None:
        while (
            self.buffered_records >= self._buffer_records_limit
            or self.buffered_bytes >= self._buffer_bytes_limit
        ) and not self.closing:
            await self._space.park()

    async def _shutdown(self, *, deliver: bool) -> None:
        with trio.CancelScope(shield=True):
            self._input_send.close()
            if self.txn is not None:
                await self.txn.abort_on_close()  # closing never commits
            if deliver:
                with trio.move_on_after(self.config.delivery_timeout):
                    await self._deliver_all()
            self.closing = True
            self._space.unpark_all()
            closed = errors.ClosedError("the producer closed before the record was delivered")
            for t in list(self._topics.values()):
                self._fail_parked(t, closed)
                for p in t.parts:
                    for batch in p.batches():
                        self._fail_anywhere(p, batch, closed)
            self.closed = True
            for ch in (self._success_send, self._error_send):
                if ch is not None:
                    ch.close()
            self._nursery.cancel_scope.cancel()


def _column(values: Any) -> Any:
    """Arrow arrays become BinaryColumns; sequences and BinaryColumns pass through."""
    if isinstance(values, (BinaryColumn, list, tuple)):
        return values
    if hasattr(values, "buffers") and hasattr(values, "type"):
        return BinaryColumn.from_arrow(values)
    return values


def _column_bytes(col: Any, start: int, stop: int) -> int:
    if isinstance(col, BinaryColumn):
        return col.span_bytes(start, stop)
    return sum(0 if v is None else len(v) for v in col[start:stop])


@asynccontextmanager
async def open_producer(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Producer]:
    """Open a producer; leaving the block delivers what is buffered, then closes it.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        **config: options of :class:`pykaf.ProducerConfig` (client options too).

    Raises:
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
        DeliveryError: on exit, records failed that nobody was told of.
    """
    async with AsyncExitStack() as stack:
        client, cfg = await client_for(stack, ProducerConfig, bootstrap_servers_or_client, config)
        # The producer's tasks get a nursery of their own, inside the client's
        # lifetime: closing the producer cancels them and leaves the client be.
        async with open_service_nursery() as nursery:
            producer = await _start(client, cfg, nursery)
            async with _run(producer):
                yield producer


async def _start(client: Client, cfg: ProducerConfig, nursery: trio.Nursery) -> Producer:
    producer = Producer(client, cfg, nursery)
    if producer.idempotent:
        await producer.init_producer_id()
    if producer.txn is not None:
        nursery.start_soon(producer.txn.run_adder, name="pykaf producer transaction partitions")
    nursery.start_soon(producer._dispatcher, name="pykaf producer dispatcher")
    return producer


@asynccontextmanager
async def _run(producer: Producer) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        await producer._shutdown(deliver=False)
        raise
    await producer.aclose()
