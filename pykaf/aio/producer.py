"""``pykaf.aio``'s producer: :class:`pykaf.Producer` seen from asyncio.

``send_nowait`` is the trio producer's own (its compiled staging path, with
no wrapper around it): asyncio and trio share the thread, and the staging
schedules its drain on the trio run itself. ``send()`` appends its record
and writes its request in the asyncio task itself when it can
(``pykaf.Producer.start_send``), and waits on an asyncio future that the
batch's settling resolves: no trio task per call. Other awaited calls, and
``send()`` when it has to wait (for buffer space, for its topic's
partitions), go through the bridge (``_bridge.call``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pykaf
from pykaf._producer.batch import ProducerBatch
from pykaf._producer.delivery import record_metadata
from pykaf._producer.records import BatchDelivery, ProducerStatistics, RecordMetadata
from pykaf._txn.manager import TxnStatus
from pykaf.aio._bridge import call, open_in_run
from pykaf.aio._channels import ReceiveChannel, SendChannel
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client


class Delivery(Wrapper[BatchDelivery]):
    """The outcome of one ``send_batch`` call; ``await wait()`` for it.

    See :class:`pykaf.BatchDelivery`.
    """

    __slots__ = ()

    wait = awaits(BatchDelivery.wait)

    @property
    def done(self) -> bool:
        """Whether every record has been acknowledged or has failed."""
        return self._trio.done

    @property
    def total(self) -> int:
        """How many records the call sent."""
        return self._trio.total

    @property
    def acked(self) -> int:
        """How many were acknowledged so far."""
        return self._trio.acked

    @property
    def failed(self) -> int:
        """How many failed so far."""
        return self._trio.failed


class _Outcome:
    """Resolves an awaited record's future once its batch settled (``ProducerBatch.when_done``)."""

    __slots__ = ("batch", "delta", "fut", "timestamp")

    def __init__(
        self, fut: asyncio.Future[RecordMetadata], batch: ProducerBatch, delta: int, timestamp: int
    ) -> None:
        self.fut = fut
        self.batch = batch
        self.delta = delta
        self.timestamp = timestamp

    def __call__(self) -> None:
        if self.fut.done():  # the caller was cancelled: the record goes on without it
            return
        batch, delta = self.batch, self.delta
        if batch.parts is not None:  # the broker found it too large: it was split
            batch, delta = batch.locate(delta)
            if not batch.done:
                self.batch, self.delta = batch, delta
                batch.when_done(self)
                return
        if batch.error is not None:
            self.fut.set_exception(batch.error)
        else:
            self.fut.set_result(record_metadata(batch, delta, self.timestamp))


class Producer(Wrapper[pykaf.Producer]):
    """Sends records to Kafka from asyncio; get one from :func:`open_producer`.

    The same methods as :class:`pykaf.Producer`: ``send_nowait()`` buffers a
    record at full speed (no await, no wrapper), ``send()`` waits for its
    acknowledgement, ``send_batch()`` takes columns, ``flush()`` waits for
    everything; transactions with ``begin_transaction()`` /
    ``commit_transaction()`` / ``abort_transaction()`` or ``async with
    producer.transaction():``.
    """

    def __init__(self, producer: pykaf.Producer, runner: Runner) -> None:
        super().__init__(producer, runner)
        # The trio producer's own path (compiled staging): nothing in between.
        self.send_nowait = producer.send_nowait  # type: ignore[method-assign]

    @property
    def client(self) -> Client:
        """The cluster client the producer sends through."""
        return Client(self._trio.client, self._runner)

    @property
    def config(self) -> pykaf.ProducerConfig:
        """The producer's options."""
        return self._trio.config

    @property
    def closed(self) -> bool:
        """Whether the producer has closed."""
        return self._trio.closed

    @property
    def producer_id(self) -> int:
        """The producer id (-1 before InitProducerId or without idempotence)."""
        return self._trio.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch (-1 before InitProducerId or without idempotence)."""
        return self._trio.producer_epoch

    @property
    def buffered_records(self) -> int:
        """Records accepted and not settled yet."""
        return self._trio.buffered_records

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the records accepted and not settled yet."""
        return self._trio.buffered_bytes

    @property
    def txn_status(self) -> TxnStatus | None:
        """The transaction state (None without ``transactional_id``)."""
        return self._trio.txn_status

    flush = awaits(pykaf.Producer.flush)
    wait_for_space = awaits(pykaf.Producer.wait_for_space)
    commit_transaction = awaits(pykaf.Producer.commit_transaction)
    abort_transaction = awaits(pykaf.Producer.abort_transaction)
    send_offsets_to_transaction = awaits(pykaf.Producer.send_offsets_to_transaction)
    aclose = awaits(pykaf.Producer.aclose)
    begin_transaction = direct(pykaf.Producer.begin_transaction)
    purge = direct(pykaf.Producer.purge)
    send_now = direct(pykaf.Producer.send_now)
    statistics = direct(pykaf.Producer.statistics)

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
        """Send one record and wait until it is acknowledged (:meth:`pykaf.Producer.send`).

        Cancelling the waiting task (``task.cancel()``, ``asyncio.timeout()``)
        stops the wait; a record already buffered then is delivered all the
        same, as under trio.
        """
        self._check_loop()
        producer = self._trio
        started = producer.start_send(
            topic, value, key=key, partition=partition, headers=headers, timestamp=timestamp
        )
        if started is None:  # it has to wait (or to refuse): the trio call does
            return await call(
                self._runner,
                producer.send,
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp=timestamp,
            )
        batch, delta, stamp = started
        fut: asyncio.Future[RecordMetadata] = self._runner.loop.create_future()
        batch.when_done(_Outcome(fut, batch, delta, stamp))
        return await fut

    def send_nowait(  # each instance has the trio producer's own method instead (__init__)
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        on_delivery: Any = None,
    ) -> None:
        """Buffer one record without waiting (:meth:`pykaf.Producer.send_nowait`).

        ``on_delivery(error, metadata)`` runs in the loop's thread once the
        record settled. Call it only from the loop the producer was opened on.
        """
        self._trio.send_nowait(
            topic,
            value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp=timestamp,
            on_delivery=on_delivery,
        )

    async def send_batch(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps: Any = None,
        partition: int | None = None,
        on_settle: Any = None,
    ) -> Delivery:
        """Buffer many records at once; return a :class:`Delivery` to ``await .wait()``.

        See :meth:`pykaf.Producer.send_batch`.
        """
        delivery = await call(
            self._runner,
            self._trio.send_batch,
            topic,
            values,
            keys=keys,
            headers=headers,
            timestamps=timestamps,
            partition=partition,
            on_settle=on_settle,
        )
        return Delivery(delivery, self._runner)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``begin_transaction()``; commit when the block ends, abort if it raises.

        Raises:
            TransactionStateError: no ``transactional_id``, or a transaction is open.
        """
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self.abort_transaction()
            raise
        await self.commit_transaction()

    def input(self) -> SendChannel[pykaf.ProducerMessage]:
        """Sarama's input channel (:meth:`pykaf.Producer.input`), for asyncio."""
        return SendChannel(self._trio.input(), self._runner)

    def successes(self) -> ReceiveChannel[pykaf.ProducerMessage]:
        """The acknowledged messages (``return_successes=True``), for asyncio."""
        return ReceiveChannel(self._trio.successes(), self._runner)

    def errors(self) -> ReceiveChannel[pykaf.ProducerError]:
        """The failed messages (``return_errors=True``), for asyncio."""
        return ReceiveChannel(self._trio.errors(), self._runner)


@asynccontextmanager
async def open_producer(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Producer]:
    """Open a producer on the running asyncio loop (see :func:`pykaf.open_producer`).

    Leaving the block delivers what is buffered, then closes it.

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
        DeliveryError: on exit, records failed that nobody was told of.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.Producer]:
        return pykaf.open_producer(unwrap_client(bootstrap_servers_or_client, runner), **config)

    async with open_in_run(opener) as (producer, runner):
        yield Producer(producer, runner)


__all__ = ["Delivery", "Producer", "ProducerStatistics", "open_producer"]
