"""The broker side of the producer: one sender and one receiver task per broker.

The sender collects ready batches from the partitions this broker leads (one
batch per partition per request, up to ``max_request_bytes``), builds the
Produce request and writes it in order on the broker's connection; the
written request travels on a memory channel (a request, never a record) to
the receiver, which reads the answers in the order they come and hands each
partition's outcome back to the producer. Up to ``max_in_flight`` requests
are outstanding per broker.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import trio

from pykaf import protocol as P
from pykaf._producer.batch import ProducerBatch
from pykaf._producer.records import BrokerStatistics
from pykaf.errors import PykafError

if TYPE_CHECKING:
    from pykaf._net.connection import PendingResponse
    from pykaf._producer.producer import Producer
    from pykaf._producer.state import PartitionState

log = logging.getLogger("pykaf.producer")

_PRODUCE = P.ProduceRequest.API_KEY


class BrokerSender:
    """Sends the batches of the partitions one broker leads."""

    def __init__(self, producer: Producer, node_id: int) -> None:
        self.producer = producer
        self.node_id = node_id
        self.parts: dict[PartitionState, None] = {}  # insertion-ordered set
        self.in_flight = 0
        self._wake = trio.Event()
        self._send, self._receive = trio.open_memory_channel[
            tuple["PendingResponse", list[ProducerBatch]]
        ](producer.config.max_in_flight)
        self.requests = 0
        self.batches = 0
        self.records = 0
        self.bytes = 0
        self.errors = 0

    def wake(self) -> None:
        """Tell the sender something may be ready (a batch opened or sealed, a slot freed)."""
        self._wake.set()

    def attach(self, part: PartitionState) -> None:
        """Start sending ``part``'s batches."""
        part.broker = self
        self.parts[part] = None
        self.wake()

    def detach(self, part: PartitionState) -> None:
        """Stop sending ``part``'s batches (its leader is being looked up again)."""
        self.parts.pop(part, None)
        if part.broker is self:
            part.broker = None

    def statistics(self) -> BrokerStatistics:
        """The counters of this broker's sender."""
        return BrokerStatistics(
            self.node_id,
            self.in_flight,
            self.requests,
            self.batches,
            self.records,
            self.bytes,
            self.errors,
        )

    # -- the sender task ---------------------------------------------------------

    def _collect(self, now: float) -> tuple[list[PartitionState], float]:
        """The partitions with a batch to send now, and when to look again."""
        pr = self.producer
        cfg = pr.config
        urgent = pr.flushing > 0 or pr.closing
        linger = cfg.linger
        limit = cfg.max_request_bytes
        per_partition = 5 if pr.idempotent else cfg.max_in_flight
        txn = pr.txn
        ready: list[PartitionState] = []
        size = 0
        deadline = math.inf
        for part in list(self.parts):
            if part.retrying or len(part.inflight) >= per_partition:
                continue
            if not part.queue:
                batch = part.open
                if batch is None or batch.count == 0:
                    continue
                due = batch.created + linger
                if urgent or now >= due:
                    pr.seal(part, wake=False)
                else:
                    deadline = min(deadline, due)
                    continue
            if not pr.expire_queued(part, now):
                continue
            if txn is not None and part.txn_added != txn.serial:
                txn.need(part)  # held until AddPartitionsToTxn added it
                continue
            est = part.queue[0].size()
            if ready and size + est > limit:
                deadline = now
                break
            size += est
            ready.append(part)
        return ready, deadline

    async def run_sender(self) -> None:
        """Build and write Produce requests while there is something to send."""
        pr = self.producer
        max_in_flight = pr.config.max_in_flight
        while True:
            self._wake = trio.Event()
            deadline = math.inf
            if not pr.paused and self.in_flight < max_in_flight and self.parts:
                ready, deadline = self._collect(trio.current_time())
                if ready:
                    await self._send_request(ready)
                    continue
            with trio.move_on_at(deadline):
                await self._wake.wait()

    async def _send_request(self, ready: list[PartitionState]) -> None:
        pr = self.producer
        try:
            conn = await pr.client.broker_connection(self.node_id)
            version = conn.version_for(_PRODUCE)
        except PykafError as exc:
            log.info("broker %d unreachable for producing: %s", self.node_id, exc)
            self.errors += 1
            pr.error_count += 1
            for part in ready:
                pr.partition_unreachable(part, exc)
            return
        txn = pr.txn
        if pr.paused or txn is not None:
            # While the connection was awaited, an epoch bump may have begun, or
            # a transaction ended (an abort drops batches) and another begun.
            ready = [
                part
                for part in ready
                if part.queue and (txn is None or part.txn_added == txn.serial)
            ]
            if pr.paused or not ready:
                return
        batches: list[ProducerBatch] = []
        topics: dict[str, list[Any]] = {}
        partition_data = P.ProduceRequest.PartitionProduceData
        if pr.batch_hook is not None:  # one check per request while no hook is set
            now = trio.current_time()
            for part in ready:
                part.queue[0].note_send(self.node_id, now)
        for part in ready:
            batch = part.queue.popleft()
            raw = pr.build(part, batch)
            part.inflight.append(batch)
            batches.append(batch)
            topics.setdefault(part.topic, []).append(
                partition_data(index=part.partition, records=raw)
            )
        req = P.ProduceRequest(
            transactional_id=pr.transactional_id,
            acks=pr.acks,
            timeout_ms=int(pr.config.request_timeout * 1000),
            topic_data=[
                P.ProduceRequest.TopicProduceData(name=name, partition_data=data)
                for name, data in topics.items()
            ],
        )
        nbytes = 0
        nrecords = 0
        for batch in batches:
            batch.attempts += 1
            nbytes += len(batch.raw or b"")
            nrecords += batch.count
        self.requests += 1
        self.batches += len(batches)
        self.records += nrecords
        self.bytes += nbytes
        pr.count_sent(batches, nrecords)
        # In flight from here on: an epoch bump waits until no request is.
        self.in_flight += 1
        try:
            pending = await conn.send(req, version, expect_response=pr.acks != 0)
        except PykafError as exc:
            self.errors += 1
            pr.error_count += 1
            self._settled_here(batches, exc)
            return
        if pending is None:  # acks=0: nothing will come back
            self._settled_here(batches, None)
            return
        await self._send.send((pending, batches))

    def _settled_here(self, batches: list[ProducerBatch], error: PykafError | None) -> None:
        self.in_flight -= 1
        self.producer.handle_response(self, batches, None, error)
        self.producer.in_flight_changed()

    # -- the receiver task -------------------------------------------------------

    async def run_receiver(self) -> None:
        """Read the answers in order and settle their batches."""
        pr = self.producer
        async for pending, batches in self._receive:
            try:
                resp = await pending.response()
                error: PykafError | None = None
            except PykafError as exc:
                resp, error = None, exc
                self.errors += 1
                pr.error_count += 1
            except trio.Cancelled:
                raise
            self.in_flight -= 1
            pr.handle_response(self, batches, resp, error)
            self.wake()
            pr.in_flight_changed()


__all__ = ["BrokerSender"]
