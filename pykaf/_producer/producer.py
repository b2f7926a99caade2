"""The async producer: sarama's pipeline as trio tasks that pass batches.

:class:`Producer` is the public face; it wires the stages, each in its own
module and owning its own state (the record path, in order):

- ``dispatcher.py``: the ``input()`` channel, drained in bursts;
- ``accumulator.py``: records into their partition's open batch, the
  buffer limits, sealing;
- ``routing.py``: the topic table, topic and partition tasks, leaders,
  records parked for topics not known yet;
- ``sink.py``: per broker, requests built, written and answered; retry,
  split or fail;
- ``idempotence.py``: producer id, epoch, sequence numbers, epoch bumps;
- ``delivery.py``: waiters, callbacks, channels and ``flush()`` reports.

Records never travel one by one between tasks. ``send_nowait()`` stages a
plain record (a bytes value, no key, no headers; a key too for a topic not
known yet) in a run, in compiled code (``staging.py``); runs are appended in
bulk at the caller's next checkpoint, or before anything else touches the
buffer, or parked on their topic until its partitions are known. Any other record is partitioned
and appended to its partition's open batch in the caller's own call. The
data moves between tasks only as whole batches and requests; completion is
tracked per batch.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from pykaf import errors
from pykaf._cluster.client import Client, client_for
from pykaf._cluster.telemetry import close_telemetry, start_telemetry
from pykaf._producer.accumulator import Accumulator, column
from pykaf._producer.batch import ProducerBatch
from pykaf._producer.config import ProducerConfig
from pykaf._producer.delivery import OnDelivery, Reports, record_metadata
from pykaf._producer.dispatcher import Dispatcher
from pykaf._producer.idempotence import Idempotence
from pykaf._producer.records import (
    BatchDelivery,
    ProducerError,
    ProducerMessage,
    ProducerStatistics,
    RecordMetadata,
    SettleHook,
)
from pykaf._producer.routing import Router
from pykaf._producer.sink import Sinks
from pykaf._producer.staging import Staging
from pykaf._producer.state import PartitionState, Sender, TopicState
from pykaf._producer.telemetry import producer_points
from pykaf._txn.host import TxnPartition
from pykaf._txn.manager import Offsets, TransactionManager, TxnStatus
from pykaf._util import open_service_nursery, require_trio

_time_ns = time.time_ns


def _now_ms() -> int:
    return _time_ns() // 1_000_000


def _in_trio() -> bool:
    """Whether this runs inside trio (staging schedules its drains on the loop)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


class Producer:
    """Sends records to Kafka; get one from :func:`open_producer`.

    Use ``send()`` to await each record's acknowledgement, ``send_nowait()``
    to buffer records at full speed (results through ``on_delivery`` or
    ``flush()``), ``send_batch()`` for columns of values, or the channels
    (``input()``, ``successes()``, ``errors()``) in sarama's style.
    """

    def __init__(self, client: Client, config: ProducerConfig, nursery: trio.Nursery) -> None:
        #: The cluster client the producer sends through.
        self.client = client
        #: The producer's options.
        self.config = config
        #: Whether records carry a producer id and sequence numbers.
        self.idempotent = bool(config.idempotence or config.transactional_id)
        #: The transaction manager (None without ``transactional_id``).
        self.txn: TransactionManager | None = None
        #: Whether the producer has closed.
        self.closed = False
        self._nursery = nursery
        link = _TxnLink(client, config)
        if config.transactional_id is not None:
            self.txn = TransactionManager(link, config.transactional_id)
        txn = self.txn
        topics: dict[str, TopicState] = {}
        self._topics = topics
        self._acc = acc = Accumulator(config, topics, txn)
        self._reports = reports = Reports(config, txn, acc.release)
        acc.connect(reports.fail_alone)
        self._ids = ids = Idempotence(client, config, txn, nursery)
        self._sinks = sinks = Sinks(client, config, topics, nursery, acc, reports, ids, txn)
        self._router = Router(client, config, topics, nursery, acc, reports, ids, sinks)
        self._dispatcher = Dispatcher(
            self.send_nowait,
            acc,
            reports,
            track=config.return_errors or config.return_successes,
        )
        link.connect(
            self._acc, self._reports, self._ids, self._sinks, self._router, self._dispatcher
        )
        self._append = acc.append  # the hot path: one bound method, looked up once
        self._on_send = tuple(config.on_send)
        self._staging: Staging | None = None
        if not self._on_send and self.txn is None and _in_trio():
            # Plain records are staged in runs by compiled code (staging.py);
            # the method below stays the path of every other record.
            self._staging = Staging(
                acc,
                topics,
                reports,
                Producer.send_nowait.__get__(self),
                self._router.topic_state,
                pump=sinks.pump,
            )
            self.send_nowait = self._staging.stager.produce  # type: ignore[method-assign]

    def open_staging(self) -> Staging:
        """The producer's staging, for callers outside its loop (``pykaf.sync``).

        Made now when the producer stages nothing itself (transactional, or
        with ``on_send`` interceptors, which then see each record: no record
        opens a run). Call it in the producer's loop.
        """
        if self._staging is None:
            self._staging = Staging(
                self._acc,
                self._topics,
                self._reports,
                Producer.send_nowait.__get__(self),
                self._router.topic_state,
                runs=not self._on_send,
            )
        return self._staging

    # ------------------------------------------------------------------ state

    @property
    def producer_id(self) -> int:
        """The producer id (-1 before InitProducerId or without idempotence)."""
        return self._ids.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch (-1 before InitProducerId or without idempotence)."""
        return self._ids.producer_epoch

    @property
    def buffered_records(self) -> int:
        """Records accepted and not settled yet."""
        self._acc.drain_staged()
        return self._acc.buffered_records

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the records accepted and not settled yet (uncompressed, with overhead)."""
        self._acc.drain_staged()
        return self._acc.buffered_bytes

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

        A plain record (a ``bytes`` value up to 2 KiB, no key, no headers) is
        staged by compiled code and appended with the records staged around
        it at the caller's next checkpoint, or before anything else touches
        the buffer (see "Ways to send" in ``docs/producer.md``); others are
        appended in this call. Either way the order and the limits hold. For
        a topic whose partitions are not known yet, keyed records are staged
        too, and all wait for the partitions (the partitioner is asked then).
        A call that fills a batch also writes the Produce requests ready and
        reads the answers already in, without waiting (up to
        ``max_in_flight``): a loop without checkpoints sends while it runs.

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
        acc = self._acc
        if acc.closing or acc.gated:
            acc.refuse()
        # Accumulator.full(), inlined: one call less per record.
        if acc.buffered_records >= acc.max_records or acc.buffered_bytes >= acc.max_bytes:
            acc.refuse_full()
        if self._on_send:
            topic, value, key, partition, headers, timestamp = self._intercept(
                topic, value, key, partition, headers, timestamp
            )
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        t = self._topics.get(topic)
        if t is None or t.count == 0:
            if acc.staged:  # runs staged for the topic go first (input() comes here directly)
                acc.drain_staged()
            self._router.park(topic, value, key, partition, headers, timestamp, on_delivery)
            return
        batch, delta = self._append(t, partition, key, value, headers, timestamp)
        if on_delivery is not None:
            batch.observe(delta, timestamp, on_delivery)
        if acc.filled:  # a full batch: on the wire now, not at the caller's next checkpoint
            self._sinks.pump()

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
            PykafError: the record's own error: ``RecordTooLargeError``,
                ``ClosedError``, ``UnknownTopicOrPartitionError``, or the
                broker's error once retries are exhausted or the delivery
                timeout passes.
            PurgedError: :meth:`purge` gave it up (also while it waited for
                buffer space or its topic).
        """
        acc = self._acc
        purges = acc.purges
        if acc.closing or acc.gated or acc.full():
            await acc.wait_for_space()  # (which raises when closing or gated)
        if self._on_send:
            topic, value, key, partition, headers, timestamp = self._intercept(
                topic, value, key, partition, headers, timestamp
            )
        if timestamp is None:
            timestamp = _now_ms()
        t = self._topics.get(topic)
        if t is None or t.count == 0:
            t = await self._router.ready_topic(topic)
            # Again: other senders may have filled the buffer while the topic was looked up.
            await acc.wait_for_space()
        if acc.purges != purges:
            raise errors.PurgedError("purged from the producer before it was sent")
        batch, delta, broker = self._append_awaited(t, partition, key, value, headers, timestamp)
        if broker is not None:
            await broker.send_inline()  # (which wakes the sender task if it cannot)
        await batch.wait()
        if batch.parts is not None:  # the broker found the batch too large: it was split
            batch, delta = batch.locate(delta)
        if batch.error is not None:
            raise batch.error
        return record_metadata(batch, delta, timestamp)

    def _append_awaited(
        self,
        t: TopicState,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
    ) -> tuple[ProducerBatch, int, Sender | None]:
        """Append a record whose sender waits for it; return its batch and offset delta.

        An awaited record makes its batch ready: it is sent without waiting
        for linger. When the record opened the batch and nothing is in flight
        to its broker, the request is written here, at once
        (``BrokerSink.write_now``); else the sender task sends it, and
        senders that append meanwhile (or while requests are in flight) share
        the batch. The third value is the broker sink that could not write at
        once although nothing is in flight (a connection to open, a TLS
        stream): the caller sends from its task (``send_inline``) or wakes
        the sink's sender task. None: nothing more to do.
        """
        sinks = self._sinks
        sinks.hold_wakes()  # the sender need not wake for a batch written here
        try:
            batch, delta = self._append(t, partition, key, value, headers, timestamp)
        except BaseException:
            sinks.release_wakes()
            raise
        if batch.waiters is not None:
            sinks.release_wakes()
            batch.add_waiter(delta)
            return batch, delta, None
        batch.add_waiter(delta)
        broker = t.parts[batch.partition].broker
        sinks.release_wakes(broker)
        if broker is not None and broker.write_now():
            broker = None
        return batch, delta, broker

    def start_send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
    ) -> tuple[ProducerBatch, int, int] | None:
        """:meth:`send`'s part up to the wait, for code that is no trio task (``pykaf.aio``).

        Appends the record and gets its batch going as :meth:`send` does,
        with no checkpoint; the caller then waits for the batch
        (``ProducerBatch.when_done``) and reads the record's outcome from it
        (:func:`~pykaf._producer.delivery.record_metadata`; once split,
        ``ProducerBatch.locate``). Returns the batch, the record's offset
        delta and its timestamp, or None, having done nothing, when
        :meth:`send` itself would have to wait or to refuse: the buffer is
        full, the topic's partitions are not known yet, the producer is
        closing or gated (a transaction), or ``on_send`` interceptors are set.

        Raises:
            RecordTooLargeError, UnknownTopicOrPartitionError, TypeError: as
                :meth:`send` (the record is not buffered).
        """
        acc = self._acc
        if acc.closing or acc.gated or acc.full() or self._on_send:
            return None
        t = self._topics.get(topic)
        if t is None or t.count == 0:
            return None
        if timestamp is None:
            timestamp = _now_ms()
        batch, delta, broker = self._append_awaited(t, partition, key, value, headers, timestamp)
        if broker is not None:
            broker.wake()
        return batch, delta, timestamp

    async def send_batch(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps: Any = None,
        partition: int | None = None,
        on_settle: SettleHook | None = None,
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
            ClosedError, UnknownTopicOrPartitionError: before any record was
                buffered. Once some are, an error (the producer closing while
                this waits for space) fails the records not buffered through
                the delivery instead, so records that may still be delivered
                are never reported failed.

        A record too large for any batch (over ``batch_bytes``) fails alone,
        keyed or not: the delivery reports it and the other records go on.

        ``on_settle`` becomes the delivery's hook for each range of records as
        it settles, with their partition, offsets and timestamp (see
        :class:`BatchDelivery`); it is in place before any of them settles.
        """
        values = column(values)
        n = len(values)
        keys = column(keys) if keys is not None else None
        for name, col in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
            if col is not None and len(col) != n:
                raise ValueError(f"{name} has {len(col)} entries for {n} values")
        acc = self._acc
        if acc.closing or acc.gated:
            acc.refuse()
        delivery = BatchDelivery(n)
        delivery.on_settle = on_settle
        # The hook hears of every failure: they are not kept for flush() too.
        delivery.observed = on_settle is not None
        if n == 0:
            return delivery
        purges = acc.purges  # a purge while this waits for metadata purges these too
        t = await self._router.ready_topic(topic)
        if partition is not None:
            acc.check_partition(t, partition)
        now = _now_ms()
        if timestamps is None:
            delivery.timestamp = now
        await acc.append_columns(
            t, values, keys, headers, timestamps, partition, now, delivery, purges
        )
        return delivery

    def _intercept(self, *record: Any) -> tuple[Any, ...]:
        """Run the ``on_send`` interceptors on one record."""
        topic, value, key, partition, headers, timestamp = record
        msg = ProducerMessage(topic, value, key, headers, partition, timestamp)
        for fn in self._on_send:
            out = fn(msg)
            if out is not None:
                msg = out
        return msg.topic, msg.value, msg.key, msg.partition, msg.headers, msg.timestamp

    async def wait_for_space(self) -> None:
        """Wait until the buffer has room, for a ``send_nowait`` loop that met ``BufferFullError``.

        Raises:
            ClosedError: the producer is closing.
        """
        self._acc.drain_staged()
        await self._acc.wait_for_space()

    def input(self) -> trio.MemorySendChannel[ProducerMessage]:
        """Sarama's input channel: send :class:`ProducerMessage` objects on it.

        Their outcome goes to ``successes()`` / ``errors()`` when
        ``return_successes`` / ``return_errors`` are on (failures otherwise
        to the next :meth:`flush`). Closed when the producer closes.
        """
        return self._dispatcher.input

    def successes(self) -> trio.MemoryReceiveChannel[ProducerMessage]:
        """Acknowledged ``input()`` messages, with partition, offset and timestamp set.

        Raises:
            ConfigError: ``return_successes`` is off.
        """
        return self._reports.successes()

    def errors(self) -> trio.MemoryReceiveChannel[ProducerError]:
        """Failed ``input()`` messages, each with its error.

        Raises:
            ConfigError: ``return_errors`` is off.
        """
        return self._reports.errors()

    def send_now(self) -> None:
        """Send what is buffered now, without waiting for ``linger``; return at once.

        The batches open now are sealed and sent as soon as their partition
        may send (in-flight limits still apply), and so are records waiting
        for their topic's metadata once it arrives; records buffered
        afterwards linger as usual. :meth:`send` does this for its own
        record's batch.
        """
        self._acc.drain_staged()
        self._sinks.send_now()

    async def flush(self) -> None:
        """Send everything buffered now and wait until all of it is settled.

        Raises:
            DeliveryError: records failed since the last flush and nobody
                else was told (no ``on_delivery``, no waiter, no ``errors()``).
        """
        self._acc.drain_staged()
        await self._sinks.flush()
        self._reports.raise_unreported()

    def purge(self, *, in_queue: bool = True, in_flight: bool = True) -> int:
        """Give up records not acknowledged yet; return how many were purged.

        librdkafka's ``rd_kafka_purge``. Each purged record fails with
        :class:`~pykaf.errors.PurgedError`, reported at once as any failure is
        (its ``on_delivery``, ``send()``'s waiter, ``send_batch``'s delivery,
        ``errors()``); one nobody waits for is not kept for ``flush()`` or
        ``aclose()``: this call told of it.

        Args:
            in_queue: purge the records not in a request now: buffered
                (``PurgedError.in_flight`` False), those waiting for their
                topic's metadata, and batches waiting to be retried (an
                earlier attempt of such a batch may have been written).
            in_flight: purge the records of Produce requests written and not
                answered yet (``in_flight`` True): the request is not taken
                back, its answer is ignored, so the broker may have written
                them and sending them again may duplicate them.

        With idempotence, a purged batch that held sequence numbers (in
        flight, or waiting to be retried) leaves a gap the broker would
        refuse, so the producer bumps its epoch (KIP-360) before it sends
        anything else: it waits until every request in flight is answered,
        as an epoch bump after a failure does. In a transaction, purging
        makes the transaction fail (``TransactionAbortableError``): it must
        be aborted. With ``in_queue``, calls waiting for buffer space give
        up too: ``send()`` raises ``PurgedError``, and ``send_batch`` fails
        the records it has not buffered yet (as they wake; they are not in
        the count returned). Messages still in the ``input()`` channel, not
        taken by the producer yet, are not purged.

        Call it from the producer's trio loop; it does not wait.
        """
        if self.closed:
            return 0
        self._acc.drain_staged()  # staged records are buffered ones
        if in_queue:
            self._acc.purges += 1
        return self._sinks.purge(
            queued=in_queue, in_flight=in_flight, fail_parked=self._router.fail_parked
        )

    def statistics(self) -> ProducerStatistics:
        """Buffers, in-flight requests and counters, per producer and per broker."""
        acc, sinks, reports, ids = self._acc, self._sinks, self._reports, self._ids
        acc.drain_staged()
        return ProducerStatistics(
            buffered_records=acc.buffered_records,
            buffered_bytes=acc.buffered_bytes,
            in_flight=sinks.in_flight,
            records_sent=sinks.records_sent,
            records_acked=reports.records_acked,
            records_failed=reports.records_failed,
            batches_sent=sinks.batches_sent,
            batch_records_avg=(
                sinks.records_sent / sinks.batches_sent if sinks.batches_sent else 0.0
            ),
            retries=sinks.retries,
            errors=sinks.error_count,
            epoch_bumps=ids.epoch_bumps,
            splits=sinks.splits,
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            brokers=sinks.statistics(),
            transaction_version=0 if self.txn is None else self.txn.transaction_version,
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
        self._reports.raise_unreported()

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
            KafkaError: the coordinator's error (then the transaction must
                abort), e.g. ``IllegalGenerationError``, ``UnknownMemberIdError``,
                ``FencedInstanceIdError`` when the member was fenced from the group.
        """
        await self._transactions().send_offsets(offsets, group_metadata)

    # ------------------------------------------------------------------ starting and closing

    async def _start(self) -> None:
        """InitProducerId when idempotent; start the transaction adder and the dispatcher."""
        if self.idempotent:
            await self._ids.init_producer_id()
        if self.txn is not None:
            self._nursery.start_soon(
                self.txn.run_adder, name="pykaf producer transaction partitions"
            )
        self._nursery.start_soon(self._dispatcher.run, name="pykaf producer dispatcher")

    async def _deliver_all(self) -> None:
        """Everything accepted so far, input() included, acknowledged or failed."""
        await self._dispatcher.drain()  # messages already on input() must be delivered too
        self._acc.close()
        await self._sinks.flush()

    async def _shutdown(self, *, deliver: bool) -> None:
        with trio.CancelScope(shield=True):
            self._dispatcher.close()
            if self.txn is not None:
                await self.txn.abort_on_close()  # closing never commits
            if deliver:
                with trio.move_on_after(self.config.delivery_timeout):
                    await self._deliver_all()
            self._acc.close()
            closed = errors.ClosedError("the producer closed before the record was delivered")
            for t in list(self._topics.values()):
                self._router.fail_parked(t, closed)
                for p in t.parts:
                    for batch in p.batches():
                        self._sinks.drop(p, batch, closed)
            self.closed = True
            self._reports.close_channels()
            self._nursery.cancel_scope.cancel()


class _TxnLink:
    """The producer as its transaction manager drives it (``pykaf._txn.host.TxnHost``)."""

    def __init__(self, client: Client, config: ProducerConfig) -> None:
        self.client = client
        self.config = config

    def connect(
        self,
        accumulator: Accumulator,
        reports: Reports,
        ids: Idempotence,
        sinks: Sinks,
        router: Router,
        dispatcher: Dispatcher,
    ) -> None:
        """Wire the stages (they are built after the manager, which they use)."""
        self._acc = accumulator
        self._reports = reports
        self._ids = ids
        self._sinks = sinks
        self._router = router
        self._dispatcher = dispatcher

    @property
    def producer_id(self) -> int:
        """The producer id."""
        return self._ids.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch."""
        return self._ids.producer_epoch

    def allow_sends(self, allowed: bool) -> None:
        """Accept records (a transaction is open) or refuse them."""
        self._acc.gated = not allowed

    def forget_failures(self) -> None:
        """Drop the failures kept for ``flush()``: the transaction's error told them."""
        self._reports.forget_unreported()

    async def drain_input(self) -> None:
        """Return once every message already on ``input()`` is dispatched."""
        await self._dispatcher.drain()

    async def flush_transaction(self) -> None:
        """Commit's flush: what was sent in the transaction, acknowledged or failed."""
        await self._sinks.flush()

    async def drop_transaction(self, error: BaseException) -> bool:
        """Abort's part: fail what is unsent, wait out what is in flight.

        Returns whether a dropped batch held sequence numbers (the epoch must
        then be bumped before the next transaction).
        """
        lost = await self._sinks.drop_transaction(error, self._router.fail_parked)
        # The transaction's failures are settled by the abort: flush() and
        # aclose() do not raise them again.
        self._reports.forget_unreported()
        return lost

    def drop_unsent(self, part: TxnPartition, error: BaseException) -> bool:
        """Fail ``part``'s batches not sent yet; whether one of them held sequence numbers."""
        assert isinstance(part, PartitionState)
        return self._sinks.drop_unsent(part, error)

    async def new_epoch(self) -> None:
        """A new epoch from the coordinator; every partition's sequence starts again at 0."""
        await self._ids.new_epoch(self._sinks.partitions())

    def adopt_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """The id and epoch EndTxn v5 returned (transactions V2); sequences start at 0."""
        self._ids.adopt(producer_id, producer_epoch, self._sinks.partitions())


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
    require_trio("pykaf.open_producer()")
    async with AsyncExitStack() as stack:
        client, cfg = await client_for(stack, ProducerConfig, bootstrap_servers_or_client, config)
        # The producer's tasks get a nursery of their own, inside the client's
        # lifetime: closing the producer cancels them and leaves the client be.
        async with open_service_nursery() as nursery:
            producer = Producer(client, cfg, nursery)
            await producer._start()
            telemetry = start_telemetry(
                client, cfg, nursery, "producer", lambda: producer_points(producer)
            )
            try:
                async with _run(producer):
                    yield producer
            finally:
                await close_telemetry(telemetry)  # the final push, after the last delivery


@asynccontextmanager
async def _run(producer: Producer) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        await producer._shutdown(deliver=False)
        raise
    await producer.aclose()
