"""The consumer: partition consumers fed by one fetch task per broker.

Roles (trio tasks in the consumer's nursery):

- one **partition task** per partition consumer follows the route of its
  fetch cursor (``fetch_cursor.py``, the partition's fetch state; the
  partition consumer is its reader) on the
  :class:`~pykaf._cluster.router.PartitionRouter`: the consumer resolves
  where to start (an offset, ``OLDEST``, ``NEWEST`` or a timestamp), the
  router finds the leader (or the replica it named, KIP-392) and attaches the
  partition to that broker's fetcher; after a leader error or a lost
  connection the router backs off, refreshes metadata and attaches it again;
- one **fetcher** per broker (``fetcher.py``) fetches all of that broker's
  partitions with one request and hands each fetch cursor its record set
  as bytes, one per answer; the partition consumer (the reader) decodes them
  a piece at a time (``fetched.py``). The bytes held unread, over all
  partitions, are bounded by ``fetch_buffer_bytes`` (a :class:`ByteBudget`).

Log truncation (KIP-320): each Fetch carries the leader epoch the router
attached the partition under, and the fetch cursor remembers the leader
epoch of the batches it fetched. When the router attaches a partition under a
new leader epoch (a leader change, a FENCED_LEADER_EPOCH answer, or a start given
with its epoch), it first asks the leader, with OffsetForLeaderEpoch, where
the epoch of the last fetched record ends there. An end below the position
means the log was truncated (an unclean leader election): reported as
LogTruncationError, or, with an ``auto_offset_reset`` policy, fetching goes on
from the first divergent offset.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.client import NEWEST, OLDEST, Client, client_for
from pykaf._cluster.router import PartitionRouter, Role
from pykaf._cluster.telemetry import close_telemetry, start_telemetry
from pykaf._consumer.config import ConsumerConfig
from pykaf._consumer.fetch_cursor import FetchCursor
from pykaf._consumer.fetched import ByteBudget
from pykaf._consumer.fetcher import LEADER_ERRORS, BrokerFetcher
from pykaf._consumer.partition import PartitionConsumer
from pykaf._consumer.read_committed import TransactionFilter
from pykaf._consumer.telemetry import consumer_points
from pykaf._util import open_service_nursery, require_trio, start_task_nursery

log = logging.getLogger("pykaf.consumer")

_OFFSET_FOR_LEADER_EPOCH = P.OffsetForLeaderEpochRequest.API_KEY
#: v3+ names the consumer (replica id -1), so the leader answers as to a consumer;
#: an older broker gets no validation (as Kafka's consumer does).
MIN_EPOCH_VERSION = 3
#: the longest a closing consumer waits for a broker to close its fetch session
_CLOSE_SESSION_TIMEOUT = 1.0


@dataclass(frozen=True, slots=True)
class PartitionStatistics:
    """One partition consumer's position and lag."""

    topic: str
    partition: int
    position: int
    high_water_mark: int
    last_stable_offset: int
    lag: int
    records_fetched: int
    paused: bool
    buffered_bytes: int = 0  # record-set bytes fetched and not yet read


@dataclass(frozen=True, slots=True)
class ConsumerStatistics:
    """A snapshot of the consumer: per partition and per broker.

    ``buffered_bytes`` are the record-set bytes held fetched and unread over
    all partitions (bounded by ``fetch_buffer_bytes``, give or take one answer
    per broker), ``peak_buffered_bytes`` the most held at once so far.
    """

    partitions: list[PartitionStatistics]
    brokers: dict[int, dict[str, int]]
    buffered_bytes: int = 0
    peak_buffered_bytes: int = 0
    #: records handed to readers over the consumer's life, closed partitions included
    records_fetched: int = 0

    @property
    def lag(self) -> int:
        """Total lag over all partitions."""
        return sum(p.lag for p in self.partitions)


class Consumer:
    """Reads partitions; get one from :func:`open_consumer`."""

    def __init__(self, client: Client, config: ConsumerConfig, nursery: trio.Nursery) -> None:
        self.client = client
        self.config = config
        #: leaders, leader epochs and named replicas (KIP-392) of the partitions;
        #: attaches them to their fetchers, after the one retry backoff on failure
        self.router = PartitionRouter(client, Backoff.of(config), config.metadata_max_age)
        self._nursery = nursery
        self._partitions: dict[tuple[str, int], PartitionConsumer] = {}
        self._fetchers: dict[int, BrokerFetcher] = {}
        self._closed = False
        #: the fetched, unread bytes of all partitions, against ``fetch_buffer_bytes``
        self.budget = ByteBudget(config.fetch_buffer_bytes)
        self._closed_records_fetched = 0  # of partition consumers closed since
        self._role = _Role(self)

    async def topics(self) -> list[str]:
        """The cluster's topics."""
        return await self.client.topics()

    async def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic``."""
        return await self.client.partitions(topic)

    async def consume_partition(
        self,
        topic: str,
        partition: int,
        offset: int = NEWEST,
        *,
        timestamp: int | None = None,
        leader_epoch: int | None = None,
    ) -> PartitionConsumer:
        """Start reading ``topic``/``partition``.

        Args:
            topic: the topic.
            partition: the partition's index.
            offset: the first offset to read, or ``OLDEST`` / ``NEWEST``.
            timestamp: instead of ``offset``, start at the first record whose
                timestamp (ms) is at or after it (at the end if there is none).
            leader_epoch: with an ``offset``, the leader epoch of the record
                before it (a saved ``PartitionConsumer.position_epoch``, or a
                group's committed epoch): before the first fetch the leader is
                asked whether that epoch's log still reaches ``offset``; if it
                was truncated below, LogTruncationError (or a reset, see
                ``auto_offset_reset``). None or -1: no check.

        Raises:
            ConfigError: the partition is already being consumed, the offset is
                invalid, or ``leader_epoch`` is not an epoch or comes without an offset.
            UnknownTopicOrPartitionError: no such topic or partition.
            ClosedError: the consumer is closed.
        """
        if self._closed:
            raise errors.ClosedError("the consumer is closed")
        if (topic, partition) in self._partitions:
            raise errors.ConfigError(f"{topic}/{partition} is already being consumed")
        if timestamp is None and (
            not isinstance(offset, int) or isinstance(offset, bool) or offset < -2
        ):
            raise errors.ConfigError(f"not an offset: {offset!r} (use an offset, OLDEST or NEWEST)")
        if leader_epoch is not None:
            if (
                not isinstance(leader_epoch, int)
                or isinstance(leader_epoch, bool)
                or not -1 <= leader_epoch < 2**31
            ):
                raise errors.ConfigError(f"not a leader epoch: {leader_epoch!r}")
            if leader_epoch >= 0 and (timestamp is not None or offset < 0):
                raise errors.ConfigError(
                    "leader_epoch goes with an offset, not OLDEST, NEWEST or a timestamp"
                )
        if partition not in await self.client.partitions(topic):
            raise errors.UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition}"
            )
        pc = PartitionConsumer(
            self,
            topic,
            partition,
            offset,
            TransactionFilter(self.config.isolation_level),
            on_close=self._forget,
        )
        if timestamp is not None:
            pc.cursor.start_at_time(timestamp)
        elif offset >= 0:
            pc.cursor.restart_at(offset, -1 if leader_epoch is None else leader_epoch)
        self._partitions[(topic, partition)] = pc
        self._nursery.start_soon(
            self._partition_task, pc, name=f"pykaf consumer {topic}/{partition}"
        )
        return pc

    def statistics(self) -> ConsumerStatistics:
        """Positions, lag and counters (cheap to call)."""
        return ConsumerStatistics(
            partitions=[
                PartitionStatistics(
                    pc.topic,
                    pc.partition,
                    pc.position,
                    pc.high_water_mark,
                    pc.last_stable_offset,
                    pc.lag,
                    pc.records_fetched,
                    pc.paused,
                    pc.buffered_bytes,
                )
                for pc in self._partitions.values()
            ],
            brokers={node: f.statistics() for node, f in self._fetchers.items()},
            buffered_bytes=self.budget.used,
            peak_buffered_bytes=self.budget.peak,
            records_fetched=self._closed_records_fetched
            + sum(pc.records_fetched for pc in self._partitions.values()),
        )

    async def aclose(self) -> None:
        """Stop every partition consumer (their iteration ends) and the fetchers."""
        if self._closed:
            return
        self._closed = True
        for pc in list(self._partitions.values()):
            await pc.aclose()
        # Free the brokers' session slots where that costs one round trip.
        timeout = min(self.config.request_timeout, _CLOSE_SESSION_TIMEOUT)
        async with trio.open_nursery() as nursery:
            for fetcher in self._fetchers.values():
                nursery.start_soon(fetcher.close_session, timeout)
        self._nursery.cancel_scope.cancel()

    # -- partition tasks --------------------------------------------------------

    async def _partition_task(self, pc: PartitionConsumer) -> None:
        await self.router.follow(pc.cursor.route, self._role)

    async def _resolve_start(self, cursor: FetchCursor) -> None:
        # read_committed: NEWEST is the last stable offset (as Java's seekToEnd).
        level = self.config.isolation_code
        generation = cursor.generation  # a seek while the offset is looked up wins
        get_offset = self.client.get_offset
        if cursor.start_is_time:
            offset = await get_offset(cursor.topic, cursor.partition, cursor.start)
            if offset < 0:  # no record that late: start at the end
                offset = await get_offset(
                    cursor.topic, cursor.partition, NEWEST, isolation_level=level
                )
        elif cursor.start in (OLDEST, NEWEST):
            offset = await get_offset(
                cursor.topic, cursor.partition, cursor.start, isolation_level=level
            )
        else:
            offset = cursor.start
        if cursor.generation == generation:
            cursor.restart_at(offset)

    async def _validate(self, cursor: FetchCursor, node: int, current: int) -> bool:
        """Before fetching under a new leader epoch, check that the log was not truncated.

        Asks the leader ``node`` (OffsetForLeaderEpoch) where the epoch of the
        last fetched record ends. Returns False when the position was reset to
        an offset still to resolve (OLDEST/NEWEST) or moved by a seek meanwhile,
        True to go on fetching under ``current``.

        Raises:
            KafkaError: the leader's error (a retriable one: after a metadata refresh).
        """
        last = cursor.fetched_epoch
        if last < 0 or current < 0:
            return True
        conn = await self.client.broker_connection(node)
        try:
            version = min(
                conn.version_for(_OFFSET_FOR_LEADER_EPOCH),
                P.OffsetForLeaderEpochRequest.MAX_VERSION,
            )
        except errors.UnsupportedVersionError:
            version = -1
        if version < MIN_EPOCH_VERSION:
            log.debug("%s/%d: the leader cannot validate positions", cursor.topic, cursor.partition)
            return True
        R = P.OffsetForLeaderEpochRequest
        request = R(
            replica_id=-1,
            topics=[
                R.OffsetForLeaderTopic(
                    topic=cursor.topic,
                    partitions=[
                        R.OffsetForLeaderPartition(
                            partition=cursor.partition,
                            current_leader_epoch=current,
                            leader_epoch=last,
                        )
                    ],
                )
            ],
        )
        position, generation = cursor.fetch_offset, cursor.generation
        response = await conn.request(request, version)
        answer = next(
            (
                p
                for t in response.topics
                if t.topic == cursor.topic
                for p in t.partitions
                if p.partition == cursor.partition
            ),
            None,
        )
        if answer is None:
            raise errors.UnknownTopicOrPartitionError(
                f"{cursor.topic}/{cursor.partition}: OffsetForLeaderEpoch left the partition out"
            )
        err = errors.error_for_code(answer.error_code)
        if err is not None:
            if issubclass(err, LEADER_ERRORS) or err.retriable:
                cursor.route.leader_unknown()
            raise err(f"{cursor.topic}/{cursor.partition}: OffsetForLeaderEpoch: {err.description}")
        if cursor.fetch_offset != position or cursor.generation != generation:
            return False  # a seek meanwhile: the answer is about a position gone; again
        end, epoch = answer.end_offset, answer.leader_epoch
        if end >= 0 and epoch >= 0 and end >= position:
            return True
        return self._truncated(cursor, position, None if end < 0 or epoch < 0 else end, epoch)

    def _truncated(self, cursor: FetchCursor, position: int, end: int | None, epoch: int) -> bool:
        """The log lost records below ``position``: report, or go on as configured."""
        error = errors.LogTruncationError(cursor.topic, cursor.partition, position, end, epoch)
        reset = self.config.auto_offset_reset
        if reset == "none":
            log.warning("%s", error)
            cursor.fail(error)
            return True
        if end is None:
            # The leader does not know the epoch: no divergence point, so the
            # reset policy decides (as Kafka's consumer does).
            log.warning("%s; resetting to the %s offset", error, reset)
            cursor.reset_to(OLDEST if reset == "earliest" else NEWEST)
            return False
        restart = cursor.truncated_to(end)
        log.warning("%s; continuing from offset %d", error, restart)
        return True

    def _fetcher(self, node_id: int) -> BrokerFetcher:
        fetcher = self._fetchers.get(node_id)
        if fetcher is None:
            fetcher = BrokerFetcher(self, node_id)
            self._fetchers[node_id] = fetcher
            self._nursery.start_soon(fetcher.run, name=f"pykaf consumer fetcher {node_id}")
        return fetcher

    def _forget(self, pc: PartitionConsumer) -> None:
        """A partition consumer closed: it is no longer this consumer's."""
        if self._partitions.get((pc.topic, pc.partition)) is pc:
            del self._partitions[(pc.topic, pc.partition)]
            self._closed_records_fetched += pc.records_fetched


class _Role(Role[FetchCursor]):
    """The consumer's side of its partition router."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    async def prepare(self, cursor: FetchCursor) -> bool:
        """Before a leader lookup: resolve where to start (False: a seek to an end meanwhile)."""
        if cursor.fetch_offset < 0:
            await self.consumer._resolve_start(cursor)
        return cursor.fetch_offset >= 0

    async def validate(self, cursor: FetchCursor, leader: int, previous: int, epoch: int) -> bool:
        """A new leader epoch: check the log was not truncated below the position (KIP-320)."""
        return await self.consumer._validate(cursor, leader, epoch)

    def ready(self, cursor: FetchCursor) -> bool:
        """Whether ``cursor`` can be attached now.

        Not once closed; not after a seek to OLDEST or NEWEST that came while
        the leader was looked up: attached now, the partition would never be
        fetchable (no offset) and never detached again. It resolves that first.
        """
        return not cursor.stopped and cursor.fetch_offset >= 0

    def worker(self, node: int) -> BrokerFetcher:
        """The fetcher of broker ``node``."""
        return self.consumer._fetcher(node)

    def unplaced(self, cursor: FetchCursor, failures: int, error: errors.PykafError | None) -> None:
        """No node this time: report a refusal once per run of failures (it is tried again)."""
        if error is not None and failures == 1 and not getattr(error, "retriable", False):
            # The router keeps trying with backoff (an ACL or a topic may yet appear).
            cursor.report(error)


@asynccontextmanager
async def open_consumer(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Consumer]:
    """Open a consumer; leaving the block stops every partition consumer.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        **config: options of :class:`pykaf.ConsumerConfig` (client options too).

    Raises:
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
    """
    require_trio("pykaf.open_consumer()")
    async with AsyncExitStack() as stack:
        client, cfg = await client_for(stack, ConsumerConfig, bootstrap_servers_or_client, config)
        async with open_service_nursery() as nursery:
            # The consumer's tasks live in a nursery of their own, so that
            # aclose() inside the block stops them and not the block.
            consumer = Consumer(client, cfg, await start_task_nursery(nursery))
            telemetry = start_telemetry(
                client, cfg, nursery, "consumer", lambda: consumer_points(consumer)
            )
            try:
                yield consumer
            finally:
                with trio.CancelScope(shield=True):
                    await consumer.aclose()
                    await close_telemetry(telemetry)
                nursery.cancel_scope.cancel()
