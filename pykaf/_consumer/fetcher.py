"""One fetch task per broker: a single Fetch request for all its partitions.

The fetcher asks its broker for every attached partition that has room in its
buffer, while the consumer holds less than ``fetch_buffer_bytes``. It does not
decode what comes back: it reads each partition's batch headers
(:func:`~pykaf._consumer.fetched.scan_record_set`) for the next fetch offset
and the leader epochs, and hands each partition's fetch cursor
(:mod:`pykaf._consumer.fetch_cursor`) the record set's bytes, which its
reader decodes piece by piece and filters (read_committed: aborted
transactions and control records). It changes a cursor only through the
cursor's methods. Errors that a leader lookup may
cure detach the partition (the partition router finds the new leader, or
gives up a replica the leader named for the leader); an offset
out of range is reset as configured; a batch larger than the fetch size grows
the size. With an ``on_batch`` hook, each batch whose records were handed to
the reader is reported as the reader decodes it.

With ``fetch_sessions`` (the default) the fetcher keeps a KIP-227 session with
its broker (:mod:`pykaf._consumer.fetch_session`): a request names only the
partitions whose fetch state changed, and an answer that leaves a partition
out means nothing new for it. A session error drops the session and the next
request is a full one, from the positions as they are.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import NEWEST, OLDEST
from pykaf._consumer.fetch_session import SESSION_ERRORS, FetchSession
from pykaf._consumer.fetched import Fetched, scan_record_set
from pykaf.protocol import quirks, versions

if TYPE_CHECKING:
    from pykaf._cluster.client import Client
    from pykaf._cluster.router import PartitionRouter
    from pykaf._consumer.config import ConsumerConfig
    from pykaf._consumer.fetch_cursor import FetchCursor
    from pykaf._consumer.fetch_session import FetchState, PartitionKey
    from pykaf._consumer.fetched import ByteBudget
    from pykaf._net.metrics import BatchEvent

log = logging.getLogger("pykaf.consumer")

_OFFSET_OUT_OF_RANGE = 1
#: Errors a leader lookup may cure: the partition is detached and its task
#: looks for the leader again.
LEADER_ERRORS = (
    errors.NotLeaderOrFollowerError,
    errors.LeaderNotAvailableError,
    errors.UnknownTopicOrPartitionError,
    errors.FencedLeaderEpochError,
    errors.UnknownLeaderEpochError,
    errors.ReplicaNotAvailableError,
    errors.KafkaStorageError,
)
# baseOffset int64, batchLength int32, leaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32: enough of a v2 header to skip a batch.
_HEADER = struct.Struct(">qiibIhi")


class FetchOwner(Protocol):
    """What a fetcher uses of its consumer: the cluster client, the options, the byte budget."""

    @property
    def client(self) -> Client:
        """The client: broker connections and the metadata cache."""
        ...

    @property
    def config(self) -> ConsumerConfig:
        """The consumer's options."""
        ...

    @property
    def budget(self) -> ByteBudget:
        """The fetched bytes held over all partitions, against ``fetch_buffer_bytes``."""
        ...

    @property
    def router(self) -> PartitionRouter:
        """The partition router: where each partition is fetched from."""
        ...


class BrokerFetcher:
    """Fetches the partitions one broker leads."""

    def __init__(self, consumer: FetchOwner, node_id: int) -> None:
        self.consumer = consumer
        self.node_id = node_id
        self.parts: dict[FetchCursor, None] = {}
        self._wake = trio.Event()
        self.requests = 0
        self.bytes = 0
        self.errors = 0
        self.aborted_records = 0
        self.batch_hook: Callable[[BatchEvent], object] | None = consumer.config.on_batch
        #: the KIP-227 fetch session with this broker
        self.session = FetchSession(enabled=consumer.config.fetch_sessions)
        #: failed Fetch answers in a row, and the backoff they earn
        self._retries = Retries(Backoff.of(consumer.config))
        self._in_flight = False
        consumer.budget.on_room(self.wake)

    def wake(self) -> None:
        """Something changed (a partition attached, resumed, or has room again)."""
        self._wake.set()

    def attach(self, cursor: FetchCursor) -> None:
        """Start fetching ``cursor`` (its route was attached here)."""
        self.parts[cursor] = None
        self.wake()

    def detach(self, cursor: FetchCursor) -> None:
        """Stop fetching ``cursor`` (its route was detached from here)."""
        self.parts.pop(cursor, None)

    async def run(self) -> None:
        """Fetch while there are partitions to fetch."""
        while True:
            self._wake = trio.Event()
            ready = [cursor for cursor in self.parts if cursor.fetchable()]
            if not ready:
                await self._wake.wait()
                continue
            await self._fetch(ready)

    async def _fetch(self, parts: list[FetchCursor]) -> None:
        consumer = self.consumer
        cfg = consumer.config
        now = trio.current_time()
        expire, node = consumer.router.expire_preferred, self.node_id
        # KIP-392: a named replica stands for metadata_max_age; then the leader
        # is asked again (it may name the same one).
        if any(
            [expire(cursor.route, node, now) for cursor in parts if cursor.route.preferred == node]
        ):
            parts = [cursor for cursor in parts if cursor.fetcher is self]
            if not parts:
                return
        try:
            conn = await consumer.client.broker_connection(self.node_id)
            version = versions.FETCH.pick(conn)
        except errors.PykafError as exc:
            log.info("broker %d unreachable for fetching: %s", self.node_id, exc)
            self.errors += 1
            for cursor in parts:
                self._lost_leader(cursor, exc)
            return
        F = P.FetchRequest
        asked: dict[tuple[str, int], tuple[FetchCursor, int, int]] = {}
        wanted: dict[PartitionKey, FetchState] = {}
        for cursor in parts:
            key = (cursor.topic, cursor.partition)
            asked[key] = (cursor, cursor.generation, cursor.fetch_offset)
            wanted[key] = (cursor.fetch_offset, -1, cursor.max_bytes, cursor.route.leader_epoch)
        plan = self.session.plan(wanted, version)
        topics: dict[str, list[Any]] = {}
        for key in plan.send:
            offset, log_start, max_bytes, leader_epoch = wanted[key]
            topics.setdefault(key[0], []).append(
                F.FetchPartition(
                    partition=key[1],
                    fetch_offset=offset,
                    log_start_offset=log_start,
                    partition_max_bytes=max_bytes,
                    # KIP-320: the leader fences a stale epoch (v9+; -1 checks nothing)
                    current_leader_epoch=leader_epoch,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, partition in plan.forgotten:
            forgotten.setdefault(topic, []).append(partition)
        # Ask for no more than the budget has room for (at least 1 byte: a broker
        # answers with one whole batch anyway, KIP-74). A broker may send more.
        budget = consumer.budget
        max_bytes = max(1, min(cfg.fetch_max_bytes, budget.limit - budget.used))
        request = F(
            replica_id=-1,
            max_wait_ms=int(cfg.fetch_max_wait * 1000),
            min_bytes=min(cfg.fetch_min_bytes, max_bytes),
            max_bytes=max_bytes,
            isolation_level=cfg.isolation_code,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            # KIP-392 (v11+): a rack-aware leader names a replica in this rack to fetch from
            rack_id=cfg.client_rack or "",
            forgotten_topics_data=[
                F.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()
            ],
        )
        timeout = cfg.request_timeout + cfg.fetch_max_wait
        self._in_flight = True
        try:
            response = await conn.request(request, version, timeout=timeout)
        except errors.PykafError as exc:
            self.session.failed()
            self.errors += 1
            for cursor in parts:
                self._lost_leader(cursor, exc)
            return
        except BaseException:
            # Cancelled while the broker may still serve it: the epoch is unknown,
            # and the session is not closed behind this Fetch.
            self.session.failed()
            raise
        finally:
            self._in_flight = False
        self.requests += 1
        code = getattr(response, "error_code", 0) or 0
        usable = self.session.answered(plan, code, getattr(response, "session_id", 0) or 0)
        top = errors.error_for_code(code)
        if top is not None and code in SESSION_ERRORS:
            # The session is gone (evicted, or an epoch out of step): the next
            # request is a full fetch from the positions as they are.
            log.info("Fetch from broker %d: %s; fetching in full", self.node_id, top.description)
            return
        if top is not None:
            self.errors += 1
            log.warning("Fetch from broker %d: %s", self.node_id, top.description)
            await self._retries.wait()
            return
        if not usable:
            log.info("Fetch from broker %d: an answer for another session, dropped", self.node_id)
            return
        self._retries.reset()
        # Record sets are views of the whole answer: with more than one, each is
        # copied, so that reading one partition frees its bytes whatever the others do.
        shared = sum(1 for rt in response.responses for rp in rt.partitions if rp.records) > 1
        for rt in response.responses:
            for rp in rt.partitions:
                entry = asked.get((rt.topic, rp.partition_index))
                if entry is None:
                    continue
                cursor, generation, offset = entry
                if (
                    cursor.generation != generation
                    or cursor.fetch_offset != offset
                    or cursor.stopped
                ):
                    continue  # a seek or close happened meanwhile: this answer is stale
                self._partition(cursor, rp, copy=shared)

    def _partition(self, cursor: FetchCursor, rp: Any, *, copy: bool = False) -> None:
        code = rp.error_code
        if code:
            err = errors.error_for_code(code)
            assert err is not None
            self.errors += 1
            if cursor.route.preferred == self.node_id and (
                code == _OFFSET_OUT_OF_RANGE or issubclass(err, LEADER_ERRORS) or err.retriable
            ):
                # A replica the leader named (KIP-392) that cannot serve the
                # position (it lags, or left the in-sync set): ask the leader again.
                self._lost_leader(
                    cursor, err(f"{cursor.topic}/{cursor.partition}: {err.description}")
                )
            elif code == _OFFSET_OUT_OF_RANGE:
                self._out_of_range(
                    cursor, err(f"{cursor.topic}/{cursor.partition}: offset {cursor.fetch_offset}")
                )
            elif issubclass(err, LEADER_ERRORS) or err.retriable:
                self._lost_leader(
                    cursor, err(f"{cursor.topic}/{cursor.partition}: {err.description}")
                )
            else:
                cursor.fail(err(f"{cursor.topic}/{cursor.partition}: {err.description}"))
            return
        self._records(cursor, rp, copy)
        preferred = getattr(rp, "preferred_read_replica", -1)
        if preferred >= 0 and preferred != self.node_id:
            # KIP-392: the leader names a replica in the consumer's rack.
            log.debug("%s/%d: fetching from replica %d", cursor.topic, cursor.partition, preferred)
            self.consumer.router.prefer(cursor.route, preferred)

    def _records(self, cursor: FetchCursor, rp: Any, copy: bool) -> None:
        """Hand a partition's answer (no error) to its reader."""
        consumer = self.consumer
        lso = getattr(rp, "last_stable_offset", -1)
        cursor.answered(rp.high_watermark, lso, getattr(rp, "log_start_offset", -1))
        data = rp.records or b""
        self.bytes += len(data)
        if not data:
            return
        cfg = consumer.config
        start = cursor.fetch_offset
        try:
            scanned = scan_record_set(
                data,
                start,
                lso if cursor.filter.read_committed and lso >= 0 else -1,
                cfg.max_partition_fetch_bytes,
            )
        except errors.CorruptRecordError as exc:
            cursor.fail(exc)
            return
        if not scanned.cuts:
            if scanned.incomplete:
                self._oversized(cursor, data, scanned.partial_size)
            return
        cursor.route.succeeded()
        cursor.fetched_whole()  # the fetch size back from any growth
        if scanned.end <= start:
            return  # only batches before the position
        if copy:
            data = bytes(memoryview(data)[: scanned.cuts[-1]])
        answer = Fetched(
            data,
            scanned.cuts,
            start,
            scanned.end,
            [
                (a.producer_id, a.first_offset)
                for a in (getattr(rp, "aborted_transactions", None) or [])
            ],
            lso,
            self,
            len(data),
        )
        if cursor.deliver(answer):
            cursor.note_batches(scanned.epochs, start, scanned.end)

    def _lost_leader(self, cursor: FetchCursor, error: BaseException) -> None:
        """The broker failed ``cursor`` (a leader error, a lost connection): the router moves it.

        From a replica the leader named (KIP-392) back to the leader (it may
        name another); from the leader, to the leader the metadata names next.
        """
        if cursor.route.preferred == self.node_id:
            log.info(
                "%s/%d: %s from replica %d; back to the leader",
                cursor.topic,
                cursor.partition,
                error,
                self.node_id,
            )
        else:
            log.info("%s/%d: %s; looking for the leader", cursor.topic, cursor.partition, error)
        self.consumer.router.lost(cursor.route, self.node_id)

    def _out_of_range(self, cursor: FetchCursor, error: BaseException) -> None:
        """The position is outside the log: reset it as configured, or report."""
        reset = self.consumer.config.auto_offset_reset
        if reset == "none":
            cursor.fail(error)
            return
        log.info("%s; resetting to the %s offset", error, reset)
        cursor.resolve_again(OLDEST if reset == "earliest" else NEWEST)

    def _oversized(self, cursor: FetchCursor, data: bytes, size: int) -> None:
        """One batch is larger than the partition's fetch size: grow it, or skip it."""
        cfg = self.consumer.config
        if cursor.grow(size):
            return
        error = errors.RecordTooLargeError(
            f"{cursor.topic}/{cursor.partition}: a batch of {size} bytes at offset "
            f"{cursor.fetch_offset} exceeds fetch_max_bytes ({cfg.fetch_max_bytes})"
        )
        if cfg.skip_oversized_records and len(data) >= _HEADER.size:
            base, _, _, _, _, _, last_delta = _HEADER.unpack_from(data)
            cursor.report(error)
            start = cursor.fetch_offset
            cursor.deliver(Fetched(b"", [], start, max(start, base + last_delta + 1)))
            return
        cursor.fail(error)

    async def close_session(self, timeout: float) -> bool:
        """Close the fetch session on the broker (epoch -1), if that is cheap.

        Only when no Fetch is in flight: the broker answers requests on a
        connection in order, so a close behind a waiting Fetch would wait up
        to ``fetch_max_wait``. Otherwise the broker evicts the session from
        its cache in time. Returns whether the broker answered the close.
        """
        if self._in_flight or not self.session.open:
            return False
        plan = self.session.closing()
        if plan is None:
            return False
        F = P.FetchRequest
        with trio.move_on_after(timeout):
            try:
                conn = await self.consumer.client.broker_connection(self.node_id)
                version = versions.FETCH.pick(conn)
                await conn.request(
                    F(
                        replica_id=-1,
                        # quirk: tansu-fetch-zero-wait
                        max_wait_ms=int(quirks.TANSU_MIN_FETCH_WAIT * 1000),
                        min_bytes=0,
                        max_bytes=0,
                        isolation_level=self.consumer.config.isolation_code,
                        session_id=plan.session_id,
                        session_epoch=plan.epoch,
                        topics=[],
                        forgotten_topics_data=[],
                    ),
                    version,
                    timeout=timeout,
                )
            except errors.PykafError as exc:
                log.debug("closing the fetch session with broker %d: %s", self.node_id, exc)
                return False
            return True
        return False

    def statistics(self) -> dict[str, int]:
        """Counters of this broker's fetcher.

        ``session_id``, ``full_fetches``, ``incremental_fetches`` and
        ``session_resets`` are the KIP-227 fetch session's.
        """
        return {
            "node_id": self.node_id,
            "partitions": len(self.parts),
            "requests": self.requests,
            "bytes": self.bytes,
            "errors": self.errors,
            "aborted_records": self.aborted_records,
            "session_id": self.session.session_id,
            "full_fetches": self.session.full_fetches,
            "incremental_fetches": self.session.incremental_fetches,
            "session_resets": self.session.resets,
        }
