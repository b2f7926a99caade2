"""The sinks: per broker, requests built, written in order and answered.

One :class:`BrokerSink` per broker runs two tasks: the **sender** collects
ready batches from the partitions the broker leads (one batch per partition
per request, up to ``max_request_bytes``), builds the Produce request
(sequence numbers stamped by :class:`~pykaf._producer.idempotence.Idempotence`)
and writes it on the broker's connection; the written request travels on a
memory channel (a request, never a record) to the **receiver**, which reads
the answers in order. Up to ``max_in_flight`` requests are outstanding per
broker.

:class:`Sinks` holds them all and what they share, and is the one place
where answers are classified: acknowledged, retried (the partition detaches,
its batches go back in front of its queue in order once nothing of it is in
flight, and its route re-attaches it after a backoff), split (too
large) or failed. Ordering and gating (epoch bumps, transactions, the
delivery timeout) are decided here too.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.router import PartitionRouter
from pykaf._net.connection import fresh_error
from pykaf._producer.accumulator import RECORD_OVERHEAD, Accumulator
from pykaf._producer.batch import ProducerBatch
from pykaf._producer.config import ProducerConfig
from pykaf._producer.delivery import Reports
from pykaf._producer.idempotence import Idempotence
from pykaf._producer.records import BrokerStatistics
from pykaf._producer.state import PartitionState, Sender, TopicState
from pykaf.errors import PykafError
from pykaf.protocol import versions

if TYPE_CHECKING:
    from pykaf._cluster.client import Client
    from pykaf._net.connection import BrokerConnection, Slot
    from pykaf._txn.manager import TransactionManager

log = logging.getLogger("pykaf.producer")

_PRODUCE = P.ProduceRequest.API_KEY
_MESSAGE_TOO_LARGE = 10
_DUPLICATE_SEQUENCE = 46
_SEQUENCE_ERRORS = (45, 59)  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID
#: The parts of a split batch are rebuilt without a size limit of their own: the
#: broker's answer is the limit that counts.
_PART_MAX_BYTES = 2**31 - 1
_LEADER_ERRORS = (
    errors.NotLeaderOrFollowerError,
    errors.LeaderNotAvailableError,
    errors.UnknownTopicOrPartitionError,
    errors.KafkaConnectionError,
    errors.NotEnoughReplicasError,
)


class Sinks:
    """Every broker's sink, and the retry, split and fail decisions for their answers.

    ``topics`` is the routing stage's table (read here, never written).
    """

    def __init__(
        self,
        client: Client,
        config: ProducerConfig,
        topics: dict[str, TopicState],
        nursery: trio.Nursery,
        accumulator: Accumulator,
        reports: Reports,
        ids: Idempotence,
        txn: TransactionManager | None,
    ) -> None:
        self.client = client
        self.config = config
        #: the one retry backoff (exponential, jittered) of every detached partition
        self.policy = Backoff.of(config)
        #: leaders and leader epochs of the partitions: attaches them to their sinks
        self.router = PartitionRouter(client, self.policy)
        self.acc = accumulator
        self.reports = reports
        self.ids = ids
        self.txn = txn
        self._topics = topics
        self._nursery = nursery
        self.brokers: dict[int, BrokerSink] = {}
        self.acks = config.acks_int
        self.paused = False  # no new requests (an epoch bump or an abort is under way)
        #: While an awaited send() appends its record: the senders to wake after
        #: (see hold_wakes); None otherwise.
        self.held_wakes: set[BrokerSink] | None = None
        self.flushing = 0  # flushes waiting: everything open is sent at once
        self.pumping = False  # pump() runs (callbacks it settles may send again)
        self._in_flight_lot = trio.lowlevel.ParkingLot()
        # counters
        self.records_sent = 0
        self.batches_sent = 0
        self.retries = 0
        self.error_count = 0
        self.splits = 0
        ids.connect(self)

    # ------------------------------------------------------------------ the sinks

    def sink_for(self, node_id: int) -> BrokerSink:
        """The broker's sink, started on first use."""
        sink = self.brokers.get(node_id)
        if sink is None:
            sink = BrokerSink(self, node_id)
            self.brokers[node_id] = sink
            self._nursery.start_soon(sink.run_sender, name=f"pykaf producer sender {node_id}")
            self._nursery.start_soon(sink.run_receiver, name=f"pykaf producer receiver {node_id}")
        return sink

    @property
    def in_flight(self) -> int:
        """Requests written and not answered yet, over every broker."""
        return sum(s.in_flight for s in self.brokers.values())

    def hold_wakes(self) -> None:
        """Collect the sender wake-ups from here until :meth:`release_wakes`."""
        self.held_wakes = set()

    def release_wakes(self, inline: Sender | None = None) -> None:
        """Wake the senders woken since :meth:`hold_wakes`, but ``inline``.

        ``inline`` is the broker an awaited send() is about to send to from its
        own task (:meth:`BrokerSink.send_inline`): it wakes its sender itself
        if it cannot send at once or leaves batches lingering, so a wake-up for
        the batch the record opened would be a scheduler pass for nothing.
        """
        held, self.held_wakes = self.held_wakes, None
        if held:
            for sink in held:
                if sink is not inline:
                    sink.wake()

    def pump(self) -> bool:
        """Batches were filled without a checkpoint: read answers and write requests now.

        Called by ``send_nowait`` at the end of its call once its records
        sealed a full batch (``Accumulator.filled``), and by the staging
        each time a loop's run is appended without a checkpoint: a loop that
        never yields then still has requests on the wire while it runs, up
        to ``max_in_flight`` per broker, and their answers settled as they
        come (:meth:`BrokerSink.pump`). Nothing waits here.

        Returns whether requests are in flight (the caller may look again soon).
        """
        acc = self.acc
        if acc.pumps_held or self.pumping:
            return False  # (a drain's replay, or what a pump settled sending again)
        acc.filled = False
        if self.paused or self.acks == 0:
            return False
        self.pumping = True
        pending = False
        try:
            for sink in list(self.brokers.values()):
                sink.pump()
                pending = pending or sink.in_flight > 0
        finally:
            self.pumping = False
        return pending

    def wake_all(self) -> None:
        """Have every sender look for ready batches."""
        for s in self.brokers.values():
            s.wake()

    def statistics(self) -> dict[int, BrokerStatistics]:
        """Each broker's counters."""
        return {node: s.statistics() for node, s in self.brokers.items()}

    # ------------------------------------------------------------------ Pipeline (epoch bumps)

    def pause(self) -> None:
        """Write no new request until :meth:`resume`."""
        self.paused = True

    def resume(self) -> None:
        """Write requests again."""
        self.paused = False
        self.wake_all()

    async def wait_idle(self) -> None:
        """Return once no request is in flight."""
        while any(s.in_flight for s in self.brokers.values()):
            await self._in_flight_lot.park()

    def partitions(self) -> Iterator[PartitionState]:
        """Every partition of every known topic."""
        for t in self._topics.values():
            yield from t.parts

    def drop(self, p: PartitionState, batch: ProducerBatch, error: BaseException) -> None:
        """Take ``batch`` out of ``p`` wherever it is and fail it (unless settled)."""
        for place in (p.queue, p.inflight):
            with suppress(ValueError):
                place.remove(batch)
        if batch in p.retry:
            p.retry.remove(batch)
        if batch is p.open:
            p.closed()
        if not batch.done:
            self.reports.fail(batch, error)

    # ------------------------------------------------------------------ flush and transactions

    def send_now(self) -> None:
        """Make every open batch ready to send, without waiting for its linger."""
        seal = self.acc.seal
        for t in self._topics.values():
            if t.pending:  # sent once the topic's partitions are known
                t.hurry = True
            for p in t.parts:
                batch = p.open
                if batch is not None and batch.count:
                    seal(p)

    async def flush(self) -> None:
        """Send at once everything buffered now and wait until it is all settled."""
        self.flushing += 1
        try:
            for t in list(self._topics.values()):
                if t.pending:
                    await t.ready.wait()
            batches = [b for t in self._topics.values() for p in t.parts for b in p.batches()]
            self.wake_all()
            for batch in batches:
                await batch.wait()
        finally:
            self.flushing -= 1

    def drop_unsent(self, p: PartitionState, error: BaseException) -> bool:
        """Fail ``p``'s batches not sent yet; whether one of them held sequence numbers."""
        lost = False
        batches = list(p.queue)
        if p.open is not None and p.open.count:
            batches.append(p.open)
        for batch in batches:
            lost = lost or batch.raw is not None
            self.drop(p, batch, error)
        return lost

    async def drop_transaction(
        self,
        error: BaseException,
        fail_parked: Callable[[TopicState, BaseException], object],
    ) -> bool:
        """Abort's part: fail what is unsent, wait out what is in flight.

        ``fail_parked`` fails the records still waiting for their topic.
        Returns whether a dropped batch held sequence numbers (the epoch must
        then be bumped before the next transaction).
        """
        lost = False
        self.paused = True  # nothing new is written from here on
        try:
            while True:
                for t in list(self._topics.values()):
                    fail_parked(t, error)
                    for p in t.parts:
                        if p.retrying and not p.inflight:
                            self._finish_retry(p)
                        lost = self.drop_unsent(p, error) or lost
                if not any(s.in_flight for s in self.brokers.values()):
                    break
                await self._in_flight_lot.park()
        finally:
            self.resume()
        return lost

    def purge(
        self,
        *,
        queued: bool,
        in_flight: bool,
        fail_parked: Callable[[TopicState, BaseException], int],
    ) -> int:
        """``Producer.purge``'s part: fail buffered and/or in-flight records; how many.

        ``queued``: every batch not in a request now (open, sealed, waiting
        for a retry) and the records parked for their topic fail with
        ``PurgedError(in_flight=False)``. ``in_flight``: the batches of the
        requests written and not answered fail with ``PurgedError(in_flight=True)``;
        they stay in their partition's ``inflight`` until the answer comes
        (which :meth:`settle` ignores for a settled batch), so the per-partition
        request limit still holds. With idempotence, a purged batch that
        held sequence numbers leaves a gap the broker would refuse: the epoch
        is bumped (after every request in flight is answered, and before
        anything else is sent), or the transaction must abort.
        """
        unsent = errors.PurgedError("purged from the producer before it was sent")
        abandoned = errors.PurgedError(
            "purged while its Produce request was in flight: the broker may have written it",
            in_flight=True,
        )
        purged = 0
        lost = False
        for t in list(self._topics.values()):
            if queued and t.pending:
                purged += fail_parked(t, unsent)
            for p in t.parts:
                if in_flight:
                    for batch in p.inflight:
                        if not batch.done:
                            purged += batch.count
                            lost = True
                            self.reports.fail(batch, abandoned)
                if queued:
                    if p.retrying and not p.inflight:
                        self._finish_retry(p)  # its retried batches back in its queue
                    for batch in list(p.retry):
                        purged += batch.count
                        lost = lost or batch.raw is not None
                        self.drop(p, batch, unsent)
                    purged += sum(b.count for b in p.queue)
                    if p.open is not None:
                        purged += p.open.count
                    lost = self.drop_unsent(p, unsent) or lost
        if lost and self.ids.enabled:
            self.ids.request_bump(abandoned if in_flight else unsent)
        return purged

    # ------------------------------------------------------------------ gating

    def expire_queued(self, p: PartitionState, now: float) -> bool:
        """Fail queued batches past the delivery timeout; whether a batch is left to send."""
        timeout = self.config.delivery_timeout
        while p.queue and now - p.queue[0].created > timeout:
            batch = p.queue.popleft()
            error = errors.KafkaTimeoutError(
                f"{p.topic}/{p.partition}: not delivered within delivery_timeout ({timeout}s)"
            )
            self.reports.fail(batch, error)
            if self.ids.enabled and batch.raw is not None:
                # It was sent before (a retry): its sequence numbers are lost, and
                # the broker would refuse every later batch of the partition.
                self.ids.request_bump(error)
        return bool(p.queue)

    def expire(self, p: PartitionState) -> None:
        """Fail what of an unattached partition is past the delivery timeout."""
        now = trio.current_time()
        if (
            p.open is not None
            and p.open.count
            and now - p.open.created > self.config.delivery_timeout
        ):
            self.acc.seal(p, wake=False)
        self.expire_queued(p, now)

    def detach(self, p: PartitionState) -> None:
        """Take ``p`` from its sink; its route finds its leader again."""
        p.route.detach()

    def count_sent(self, batches: int, records: int, retried: int) -> None:
        """Counters for a request about to be written (``retried``: batches sent before)."""
        self.batches_sent += batches
        self.records_sent += records
        self.retries += retried

    def in_flight_changed(self) -> None:
        """A response arrived; wake whoever waits for requests to drain."""
        if self._in_flight_lot:
            self._in_flight_lot.unpark_all()

    # ------------------------------------------------------------------ answers

    def settle(
        self,
        sink: BrokerSink,
        batches: list[ProducerBatch],
        response: Any,
        error: BaseException | None,
    ) -> None:
        """Settle, retry or split each batch of one Produce request."""
        results: dict[tuple[str, int], Any] = {}
        if response is not None:
            for topic in response.responses:
                for part in topic.partition_responses:
                    results[(topic.name, part.index)] = part
        reports = self.reports
        for batch in batches:
            t = self._topics.get(batch.topic)
            p = t.parts[batch.partition] if t is not None else None
            if p is not None and batch in p.inflight:  # (no context manager per batch)
                p.inflight.remove(batch)
            if batch.done:
                continue
            if response is None and error is None:  # acks=0
                reports.complete(batch, -1, -1)
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
                reports.complete(batch, offset, getattr(r, "log_append_time_ms", -1))
                if p is not None:
                    p.route.succeeded()
                continue
            exc_type = errors.error_for_code(code)
            assert exc_type is not None
            detail = getattr(r, "error_message", None) or exc_type.description
            exc = exc_type(f"{batch.topic}/{batch.partition}: {detail}")
            self.error_count += 1
            sink.errors += 1
            if code == _MESSAGE_TOO_LARGE and batch.count > 1 and p is not None:
                self._split(p, batch)
            elif (
                self.ids.enabled
                and code in _SEQUENCE_ERRORS
                and (self.txn is None or (p is not None and p.retrying))
            ):
                # While the partition is retrying, an earlier batch of it was not
                # written: the broker refuses the later ones until it is resent.
                if p is not None and not p.retrying:
                    self.ids.request_bump(exc)
                self._retry_or_fail(p, batch, exc, count_attempt=False)
            elif exc_type.retriable:
                self._retry_or_fail(p, batch, exc)
            else:
                reports.fail(batch, exc)
                if self.ids.enabled and batch.base_sequence >= 0:
                    self.ids.request_bump(exc)  # the sequence now has a gap
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
            self.reports.fail(batch, error)
            if self.ids.enabled and batch.base_sequence >= 0:
                self.ids.request_bump(error)
            return
        log.debug("retrying %r after %s", batch, error)
        p.retry.append(batch)
        if p.retry_round():  # a round's first batch: one failure, whatever comes back after
            if isinstance(error, _LEADER_ERRORS):
                # Detached once nothing of it is in flight (_finish_retry).
                self.router.lost(p.route, detach=False)
            else:
                p.route.failed()

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
        parts = batch.split(lambda: self.acc.builder(_PART_MAX_BYTES), RECORD_OVERHEAD)
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
        p.resend_now()  # no backoff, no metadata refresh: the broker is fine

    def _finish_retry(self, p: PartitionState) -> None:
        """Once nothing of a retrying partition is in flight, requeue and re-attach it."""
        if p.retrying and not p.inflight:
            p.requeue()
            self.detach(p)


class _Answer:
    """One Produce request's batches, settled when its answer is read or it fails."""

    __slots__ = ("batches", "conn", "settled", "sink", "slot")

    def __init__(self, sink: BrokerSink, batches: list[ProducerBatch]) -> None:
        self.sink = sink
        self.batches = batches
        self.settled = False
        self.conn: BrokerConnection | None = None
        self.slot: Slot | None = None

    def __call__(self, response: Any) -> None:
        """The answer, as the connection's reader reads it: settle the batches now."""
        if not self.settled:
            self.settled = True
            sink = self.sink
            sink.answered(self.batches, response, None)
            watched = sink.watched
            while watched and watched[0].settled:  # answers come in order: this one, mostly
                watched.popleft()
            if watched and watched[0].slot is not None and watched[0].slot.failed:
                sink.watchdog.unpark_all()  # a failure that waited behind this answer

    def failed(self) -> None:
        """The request failed (the connection broke or timed out): the watchdog settles it."""
        self.sink.watchdog.unpark_all()


class BrokerSink:
    """Sends the batches of the partitions one broker leads."""

    def __init__(self, sinks: Sinks, node_id: int) -> None:
        self.sinks = sinks
        self.node_id = node_id
        self.parts: dict[PartitionState, None] = {}  # insertion-ordered set
        self.in_flight = 0
        self.sending = False  # a request is being built and written (by either path)
        self._missed = False  # the sender task was woken while send_inline was sending
        self._wake = trio.Event()
        #: The requests written and not settled yet, in order (the watchdog's).
        self.watched: deque[_Answer] = deque()
        #: Where the watchdog waits; a failed request wakes it.
        self.watchdog = trio.lowlevel.ParkingLot()
        self.requests = 0
        self.batches = 0
        self.records = 0
        self.bytes = 0
        self.errors = 0

    def wake(self) -> None:
        """Tell the sender something may be ready (a batch opened or sealed, a slot freed)."""
        held = self.sinks.held_wakes
        if held is not None:
            held.add(self)
        else:
            self._wake.set()

    def attach(self, part: PartitionState) -> None:
        """Start sending ``part``'s batches."""
        part.attached(self)
        self.parts[part] = None
        self.wake()

    def detach(self, part: PartitionState) -> None:
        """Stop sending ``part``'s batches (its leader is being looked up again)."""
        self.parts.pop(part, None)
        part.detached_from(self)

    def statistics(self) -> BrokerStatistics:
        """The counters of this broker's sink."""
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
        sinks = self.sinks
        cfg = sinks.config
        acc = sinks.acc
        urgent = sinks.flushing > 0 or acc.closing
        linger = cfg.linger
        limit = cfg.max_request_bytes
        per_partition = 5 if sinks.ids.enabled else cfg.max_in_flight
        txn = sinks.txn
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
                # A batch some send() awaits is ready at once (see Producer.send).
                if urgent or now >= due or batch.waiters is not None:
                    acc.seal(part, wake=False)
                else:
                    deadline = min(deadline, due)
                    continue
            if not sinks.expire_queued(part, now):
                continue
            if txn is not None and part.txn_added != txn.serial and not txn.need(part):
                continue  # held until AddPartitionsToTxn added it
            est = part.queue[0].size()
            if ready and size + est > limit:
                deadline = now
                break
            size += est
            ready.append(part)
        return ready, deadline

    async def run_sender(self) -> None:
        """Build and write Produce requests while there is something to send."""
        sinks = self.sinks
        max_in_flight = sinks.config.max_in_flight
        while True:
            self._wake = trio.Event()
            deadline = math.inf
            if self.sending:
                self._missed = True  # send_inline wakes this task again when it is done
            elif not sinks.paused and self.in_flight < max_in_flight and self.parts:
                ready, deadline = self._collect(trio.current_time())
                if ready:
                    await self._send_request(ready)
                    continue
            if deadline == math.inf:
                await self._wake.wait()
            else:
                with trio.move_on_at(deadline):
                    await self._wake.wait()

    def write_now(self) -> bool:
        """Write what is ready now, from the calling code and without waiting, if it can.

        An awaited ``send()`` whose record opened a batch calls this: the
        request is built and handed to the kernel in the caller's own call,
        with no checkpoint and no other task (``pykaf.aio`` calls it from an
        asyncio task, outside any trio task). Only while no request is in
        flight to this broker (concurrent senders then share the next batch,
        which the sender task sends) and the broker's connection can take the
        request at once (``BrokerConnection.can_submit_now``). Requests are
        built and written by one path at a time (``sending``), so they reach
        the wire in the order their sequence numbers were given.

        Returns whether a request was written; if not, nothing changed (the
        caller wakes the sender task, or writes from its own task).
        """
        sinks = self.sinks
        if self.sending or self.in_flight or sinks.paused or not self.parts or sinks.acks == 0:
            return False
        conn = sinks.client.live_connection(self.node_id)
        if conn is None or not conn.can_submit_now():
            return False
        written, deadline = self._write_ready(conn)
        # Other partitions' batches linger or wait: the sender task's.
        if written and deadline != math.inf:
            self.wake()
        return written

    def pump(self) -> None:
        """Read the answers that are in and write what is ready, up to ``max_in_flight``.

        For a loop that fills batches without a checkpoint (``send_nowait``
        in a tight loop, :meth:`Sinks.pump`): neither this broker's sender
        task nor the connection's reader runs until the loop yields, so the
        loop's own call reads the answers the kernel holds
        (``BrokerConnection.read_nowait``: their batches are settled, their
        slots freed) and writes the requests of the batches ready, as the
        sender task would, as long as the connection takes each at once.
        Nothing waits: what it cannot do now stays the tasks'. One writer at
        a time (``sending``), so requests reach the wire in sequence order.
        """
        sinks = self.sinks
        if self.sending or sinks.acks == 0:
            return
        conn = sinks.client.live_connection(self.node_id)
        if conn is None:
            return
        if self.in_flight:
            conn.read_nowait()
        max_in_flight = sinks.config.max_in_flight
        while self.in_flight < max_in_flight and self.parts and not sinks.paused:
            if not (conn.write_backlog_nowait() and conn.can_submit_now()):
                return
            written, _ = self._write_ready(conn)
            if not written:
                return

    def _write_ready(self, conn: BrokerConnection) -> tuple[bool, float]:
        """Build and write one request of the batches ready now on ``conn`` (it can take it).

        Returns whether one was written, and when lingering batches are due.
        """
        ready, deadline = self._collect(trio.current_time())
        ready = self._sendable(ready)
        if not ready:
            return False, deadline
        answer, version, request = self._build(conn, ready)
        slot = conn.submit_nowait(request, version, answer, answer.failed)
        assert slot is not None  # can_submit_now() said it would
        self._watch(answer, conn, slot)
        return True, deadline

    async def send_inline(self) -> bool:
        """Send what is ready now from the calling task, if nothing is in flight.

        :meth:`write_now`, for when it cannot write at once (a connection to
        open, a TLS stream): the request is built and written in the caller's
        task, without waking the sender task first. The caller is not
        cancelled in the middle: the batches are in flight from the build on.

        Returns whether a request was sent (False: the sender task was woken).
        """
        sinks = self.sinks
        if self.sending or self.in_flight or sinks.paused or not self.parts:
            self.wake()
            return False
        ready, deadline = self._collect(trio.current_time())
        if not ready:
            self.wake()
            return False
        with trio.CancelScope(shield=True):
            await self._send_request(ready)
        # Other partitions' batches linger or wait, or batches were sealed while
        # this task wrote: the sender task's.
        if deadline != math.inf or self._missed:
            self._missed = False
            self.wake()
        return True

    async def _send_request(self, ready: list[PartitionState]) -> None:
        self.sending = True
        try:
            await self._build_and_send(ready)
        finally:
            self.sending = False

    def _sendable(self, ready: list[PartitionState]) -> list[PartitionState]:
        """``ready`` less what may not be sent now (an epoch bump, a transaction's gate)."""
        sinks = self.sinks
        txn = sinks.txn
        if sinks.paused:
            return []
        if txn is not None:
            # An abort drops batches, and another transaction may have begun.
            ready = [part for part in ready if part.queue and part.txn_added == txn.serial]
        return ready

    async def _build_and_send(self, ready: list[PartitionState]) -> None:
        sinks = self.sinks
        try:
            conn = await sinks.client.broker_connection(self.node_id)
        except PykafError as exc:
            log.info("broker %d unreachable for producing: %s", self.node_id, exc)
            self.errors += 1
            sinks.error_count += 1
            for part in ready:  # look the leader up again, then retry
                sinks.router.lost(part.route, self.node_id)
            return
        # While the connection was awaited, an epoch bump may have begun, or a
        # transaction ended and another begun.
        ready = self._sendable(ready)
        if not ready:
            return
        answer, version, request = self._build(conn, ready)
        batches = answer.batches
        if sinks.acks == 0:  # nothing will come back
            try:
                await conn.send(request, version, expect_response=False)
            except PykafError as exc:
                self._failed_here(batches, exc)
                return
            self._settled_here(batches, None)
            return
        try:
            slot = await conn.submit(request, version, answer, answer.failed)
        except PykafError as exc:  # nothing was written
            self._failed_here(batches, exc)
            return
        self._watch(answer, conn, slot)

    def _build(
        self, conn: BrokerConnection, ready: list[PartitionState]
    ) -> tuple[_Answer, int, Any]:
        """The Produce request of ``ready``'s first batches, counted as in flight from here on.

        Returns the answer that settles them, the request's version and the request.
        """
        sinks = self.sinks
        version = conn.version_for(_PRODUCE)
        if sinks.txn is not None and not sinks.txn.v2:
            version = min(version, versions.PRODUCE_TXN_V1.max_version)
        batches: list[ProducerBatch] = []
        topics: dict[str, list[Any]] = {}
        partition_data = P.ProduceRequest.PartitionProduceData
        if sinks.reports.batch_hook is not None:  # one check per request while no hook is set
            now = trio.current_time()
            for part in ready:
                part.queue[0].note_send(self.node_id, now)
        build = sinks.ids.build
        nbytes = 0
        nrecords = 0
        retried = 0
        for part in ready:
            batch = part.queue.popleft()
            raw = build(part, batch)
            part.inflight.append(batch)
            batches.append(batch)
            topics.setdefault(part.topic, []).append(
                partition_data(index=part.partition, records=raw)
            )
            if batch.attempts:
                retried += 1
            batch.attempts += 1
            nbytes += len(raw)
            nrecords += batch.count
        request = P.ProduceRequest(
            transactional_id=sinks.ids.transactional_id,
            acks=sinks.acks,
            timeout_ms=int(sinks.config.request_timeout * 1000),
            topic_data=[
                P.ProduceRequest.TopicProduceData(name=name, partition_data=data)
                for name, data in topics.items()
            ],
        )
        self.requests += 1
        self.batches += len(batches)
        self.records += nrecords
        self.bytes += nbytes
        sinks.count_sent(len(batches), nrecords, retried)
        # In flight from here on: an epoch bump waits until no request is.
        self.in_flight += 1
        return _Answer(self, batches), version, request

    def _watch(self, answer: _Answer, conn: BrokerConnection, slot: Slot) -> None:
        """Have the watchdog follow a request just written (unless already answered)."""
        answer.conn = conn
        answer.slot = slot
        if not answer.settled:
            self.watched.append(answer)
        if slot.failed:  # the write failed: the watchdog settles it, in order
            self.watchdog.unpark_all()

    def _failed_here(self, batches: list[ProducerBatch], error: PykafError) -> None:
        self.errors += 1
        self.sinks.error_count += 1
        self._settled_here(batches, error)

    def _settled_here(self, batches: list[ProducerBatch], error: PykafError | None) -> None:
        self.in_flight -= 1
        self.sinks.settle(self, batches, None, error)
        self.sinks.in_flight_changed()

    def answered(
        self, batches: list[ProducerBatch], response: Any, error: PykafError | None
    ) -> None:
        """One request's answer (or failure) is in: settle its batches, free its slot."""
        self.in_flight -= 1
        sinks = self.sinks
        sinks.settle(self, batches, response, error)
        if self._has_work():
            self.wake()
        sinks.in_flight_changed()

    def _has_work(self) -> bool:
        """Whether a freed slot may let the sender send something (it waits for a wake).

        A loop of awaited sends leaves nothing queued or open when its answer
        comes: waking the sender then would cost a pass through trio's
        scheduler per record for nothing. Whatever opens or seals a batch
        later wakes it.
        """
        if not self.sinks.acc.buffered_records:  # nothing open, queued or retrying anywhere
            return False
        for part in self.parts:
            if part.queue or part.retrying:
                return True
            batch = part.open
            if batch is not None and batch.count:
                return True
        return False

    # -- the watchdog task -------------------------------------------------------

    async def run_receiver(self) -> None:
        """The watchdog: settle the requests that failed, in order; time out the late.

        An answer is settled by the connection's reader as it reads it
        (:class:`_Answer`), and its in-flight slot freed by the connection:
        this task is not woken per request. It wakes when a request fails
        (the connection broke: :meth:`_Answer.failed`) and when the oldest
        request in flight may have waited ``request_timeout``: it sleeps until
        that request's deadline, or ``request_timeout`` from now when none is
        in flight (a request written meanwhile is due no earlier), then looks
        again. A request that is late fails its connection, and with it every
        request pending there (answers come in order).
        """
        sinks = self.sinks
        timeout = sinks.config.request_timeout
        watched = self.watched
        while True:
            now = trio.current_time()
            while watched:
                answer = watched[0]
                slot = answer.slot
                assert slot is not None and answer.conn is not None
                if answer.settled:
                    watched.popleft()
                elif slot.error is not None:
                    watched.popleft()
                    answer.settled = True
                    self.errors += 1
                    sinks.error_count += 1
                    error = fresh_error(slot.error)
                    assert isinstance(error, PykafError)
                    self.answered(answer.batches, None, error)
                elif now - slot.sent_at >= timeout:
                    answer.conn.time_out(timeout)  # fails it: settled on the next pass
                else:
                    break
            first = watched[0].slot if watched else None
            deadline = (now if first is None else first.sent_at) + timeout
            with trio.move_on_at(deadline):
                await self.watchdog.park()


__all__ = ["BrokerSink", "Sinks"]
