"""Idempotence: the producer id, its epoch, sequence numbers and the KIP-360 bump.

:class:`Idempotence` gets the producer id and epoch (InitProducerId, through
the transaction coordinator for a transactional producer), stamps each batch
with its partition's next sequence numbers when the batch is first built,
and resets the epoch after a sequence gap (KIP-360): it pauses the sinks,
waits until nothing is in flight, takes a new epoch, and re-stamps every
batch already built from sequence 0. The stages above it are reached
through :class:`Pipeline`, which the sinks implement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.client import COORDINATOR_TRANSACTION
from pykaf._producer.batch import ProducerBatch, restamp
from pykaf._producer.config import ProducerConfig
from pykaf._producer.state import PartitionState

if TYPE_CHECKING:
    from pykaf._cluster.client import Client
    from pykaf._net.connection import BrokerConnection
    from pykaf._txn.manager import TransactionManager

log = logging.getLogger("pykaf.producer")

_INIT_PRODUCER_ID = P.InitProducerIdRequest.API_KEY
#: How brokers refuse a KIP-360 bump they do not support (never fencing: a fenced
#: transactional producer must not take its id back with a plain InitProducerId).
_BUMP_REFUSED = (errors.UnknownServerError, errors.InvalidPidMappingError)


class _BumpRefused(Exception):
    """The broker refused a KIP-360 epoch bump: ask for a new id instead."""

    def __init__(self, error: errors.KafkaError) -> None:
        super().__init__(str(error))
        self.error = type(error).__name__


class Pipeline(Protocol):
    """What an epoch bump needs of the stages that send batches (the sinks)."""

    def pause(self) -> None:
        """Write no new request until :meth:`resume`."""

    def resume(self) -> None:
        """Write requests again."""

    async def wait_idle(self) -> None:
        """Return once no request is in flight."""

    def partitions(self) -> Iterable[PartitionState]:
        """Every partition the producer knows."""

    def drop(self, p: PartitionState, batch: ProducerBatch, error: BaseException) -> None:
        """Take ``batch`` out of ``p`` wherever it is and fail it."""


class Idempotence:
    """The producer's identity on the brokers, and its sequence numbers."""

    def __init__(
        self,
        client: Client,
        config: ProducerConfig,
        txn: TransactionManager | None,
        nursery: trio.Nursery,
    ) -> None:
        self._client = client
        self._config = config
        self._txn = txn
        self._nursery = nursery
        self._pipeline: Pipeline | None = None
        #: Batches carry a producer id, epoch and sequence numbers.
        self.enabled = bool(config.idempotence or config.transactional_id)
        self.transactional_id: str | None = config.transactional_id
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_bumps = 0
        #: Why the idempotent producer cannot recover (a failed bump), or None.
        self.fatal: BaseException | None = None
        self._bump_requested = False
        self._bump_done = trio.Event()
        self._bump_done.set()

    def connect(self, pipeline: Pipeline) -> None:
        """Wire the stage an epoch bump pauses, drains and re-stamps."""
        self._pipeline = pipeline

    # ------------------------------------------------------------------ stamping

    def build(self, p: PartitionState, batch: ProducerBatch) -> bytes:
        """The batch's bytes: built (sequence-numbered) the first time it is sent."""
        if batch.raw is not None:
            return batch.raw
        builder = batch.builder
        assert builder is not None
        if self.enabled:
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

    # ------------------------------------------------------------------ producer id

    async def init_producer_id(self, *, bump: bool = False) -> None:
        """Get a producer id and epoch (InitProducerId); with ``bump``, a new epoch.

        Asked on the request path (``pykaf._cluster.request``): the transaction
        coordinator (or any broker without a transactional id), retriable
        answers and lost connections asked again after the retry backoff
        until ``request_timeout``.

        Raises:
            UnsupportedVersionError: the cluster has no InitProducerId.
            KafkaTimeoutError: still failing at the deadline.
            the broker's error when it is not retriable.
        """
        deadline = rq.Deadline(self._config.request_timeout)
        try:
            resp = await self._ask_id(bump, deadline)
        except _BumpRefused as refusal:
            # Kafka gives an idempotent producer a new id on a bump anyway;
            # quirk: bump-refused
            # a broker that refuses the bump (librdkafka's mock answers
            # INVALID_PRODUCER_ID_MAPPING) is asked for a new id instead.
            # With a transactional id that is the same id, next epoch
            # (Tansu answers UNKNOWN_SERVER_ERROR to a KIP-360 bump).
            log.info("InitProducerId refused the epoch bump (%s): new id", refusal.error)
            resp = await self._ask_id(False, deadline)
        self.producer_id = resp.producer_id
        self.producer_epoch = resp.producer_epoch
        log.info("producer id %d epoch %d", self.producer_id, self.producer_epoch)
        if self._txn is not None:
            self._txn.initialized()

    async def _ask_id(self, bump: bool, deadline: rq.Deadline) -> Any:
        """One InitProducerId on the request path, retried until ``deadline``; its answer.

        Raises:
            _BumpRefused: ``bump`` was asked and the broker refused it.
        """
        txn = self._txn
        cfg = self._config
        tid = self.transactional_id
        keep = False

        async def exchange(conn: BrokerConnection) -> Any:
            nonlocal keep
            version = conn.version_for(_INIT_PRODUCER_ID)
            kw: dict[str, Any] = {
                "transactional_id": tid,
                "transaction_timeout_ms": int(cfg.transaction_timeout * 1000),
            }
            keep = version >= 3 and bump and self.producer_id >= 0
            if version >= 3:
                kw["producer_id"] = self.producer_id if keep else -1
                kw["producer_epoch"] = self.producer_epoch if keep else -1
            return await conn.request(P.InitProducerIdRequest(**kw), version)

        def refused(err: errors.KafkaError) -> BaseException:
            if keep and (txn is None or isinstance(err, _BUMP_REFUSED)):
                return _BumpRefused(err)
            if txn is not None:
                txn.abortable(err)  # fatal errors make the producer fatal
            return err

        def forget(failure: BaseException) -> None:
            # A raised retriable failure may mean the coordinator moved too.
            if tid is not None and isinstance(failure, errors.RetriableError):
                self._client.forget_coordinator(COORDINATOR_TRANSACTION, tid)
            log.debug("InitProducerId: %s; retrying", failure)

        def exhausted(failure: BaseException, answer: Any) -> NoReturn:
            raise errors.KafkaTimeoutError(f"InitProducerId did not succeed: {failure}")

        return await rq.call(
            self._client,
            rq.ANY_BROKER if tid is None else rq.transaction_coordinator(tid),
            exchange,
            what="InitProducerId",
            check=lambda r: rq.error_of(r.error_code, "InitProducerId"),
            retry_raised=(errors.KafkaConnectionError, errors.RetriableError),
            timeout=max(deadline.at - rq.now(), 0.0),
            policy=Backoff.of(cfg),
            refused=refused,
            exhausted=exhausted,
            on_retry=forget,
        )

    # ------------------------------------------------------------------ epoch bumps

    def request_bump(self, reason: BaseException) -> None:
        """A sequence number was lost: bump the epoch (a transaction aborts instead)."""
        if self._txn is not None:
            # Never inside a transaction: it must abort; the abort bumps the epoch.
            self._txn.sequence_gap(reason)
            return
        if self._bump_requested:
            return
        assert self._pipeline is not None
        log.warning("resetting the idempotent producer's epoch after: %s", reason)
        self._bump_requested = True
        self._bump_done = trio.Event()
        self._pipeline.pause()
        self._nursery.start_soon(self._bump_epoch, name="pykaf producer epoch bump")

    async def wait_bump(self) -> None:
        """Return once no epoch bump is under way."""
        await self._bump_done.wait()

    async def _bump_epoch(self) -> None:
        """KIP-360: once nothing is in flight, new epoch, sequences from 0, re-stamp."""
        pipeline = self._pipeline
        assert pipeline is not None
        try:
            await pipeline.wait_idle()
            try:
                await self.init_producer_id(bump=True)
            except errors.PykafError as exc:
                self.fatal = exc
                log.error("the idempotent producer cannot recover: %s", exc)
                for p in pipeline.partitions():
                    for batch in p.batches():
                        if batch.raw is not None or batch is not p.open:
                            pipeline.drop(p, batch, exc)
                return
            self.epoch_bumps += 1
            for p in pipeline.partitions():
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
            self._bump_done.set()
            pipeline.resume()

    def adopt(self, producer_id: int, epoch: int, partitions: Iterable[PartitionState]) -> None:
        """Take the id and epoch the coordinator gave at a transaction's end (EndTxn v5).

        Transactions V2 (KIP-890 part 2) bump the epoch at every transaction's
        end (a new id once the epoch would overflow); sequences start again.
        """
        if (producer_id, epoch) != (self.producer_id, self.producer_epoch):
            log.debug("producer id %d epoch %d (transaction ended)", producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        for p in partitions:
            p.next_sequence = 0

    async def new_epoch(self, partitions: Iterable[PartitionState]) -> None:
        """A new epoch from the coordinator; every partition's sequence starts again at 0."""
        await self.init_producer_id(bump=True)
        self.epoch_bumps += 1
        for p in partitions:
            p.next_sequence = 0


__all__ = ["Idempotence", "Pipeline"]
