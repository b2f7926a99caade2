"""Routing: topics looked up, partitions attached to their leader's sink.

:class:`Router` owns the producer's topic table. A record for a topic not
known yet is parked on it; one **topic task** per topic looks its
partitions up, then replays the parked records through the accumulator.
One **partition task** per partition (sarama's partition producer) follows
the partition's route (:class:`~pykaf._cluster.router.PartitionRouter`):
the cluster's router finds the leader and attaches the partition to that
broker's sink; when the sink detaches it (a retriable failure, a leader
move), the router backs off, refreshes metadata and attaches it again. This
class is the producer's side of that (:class:`~pykaf._cluster.router.Role`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from pykaf import errors
from pykaf._cluster.backoff import Retries
from pykaf._cluster.router import Role
from pykaf._producer.accumulator import RECORD_OVERHEAD, Accumulator
from pykaf._producer.config import ProducerConfig
from pykaf._producer.delivery import Reports
from pykaf._producer.idempotence import Idempotence
from pykaf._producer.sink import Sinks
from pykaf._producer.state import PartitionState, TopicState

if TYPE_CHECKING:
    from pykaf._cluster.client import Client
    from pykaf._producer.sink import BrokerSink

log = logging.getLogger("pykaf.producer")


def _klen(data: Any) -> int:
    return 0 if data is None else len(data)


class Router(Role[PartitionState]):
    """The topic table, topic and partition tasks, and parked records.

    The producer's side of its partition router: a new leader epoch needs no
    check for producing (the leader fences writes), and a partition can always
    be attached once its leader is known.
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
        sinks: Sinks,
    ) -> None:
        self._client = client
        self._config = config
        #: Topic name -> its state; written here only.
        self.topics = topics
        self._nursery = nursery
        self._acc = accumulator
        self._reports = reports
        self._ids = ids
        self._sinks = sinks

    # ------------------------------------------------------------------ topics

    def park(self, topic: str, *record: Any) -> None:
        """Keep a record for a topic whose partitions are not known yet.

        ``record`` is ``value, key, partition, headers, timestamp, target``.
        """
        value, key = record[0], record[1]
        # A bad record fails in the caller's call here too (TypeError, RecordTooLargeError).
        self._acc.check_size(key, value, record[3])
        t = self.topics.get(topic)
        if t is None:
            t = self._start_topic(topic)
        nbytes = _klen(value) + _klen(key) + RECORD_OVERHEAD
        t.pending.append((*record, nbytes))
        self._acc.reserve(1, nbytes)

    def topic_state(self, topic: str) -> TopicState:
        """The topic's state; its lookup starts now if it is new.

        Raises:
            InvalidTopicError: not a topic name. ClosedError: the producer is closed.
        """
        t = self.topics.get(topic)
        if t is None:
            t = self._start_topic(topic)
        return t

    async def ready_topic(self, topic: str) -> TopicState:
        """The topic, once its partitions are known.

        Raises:
            the lookup's error (``UnknownTopicOrPartitionError``, ...).
        """
        t = self.topics.get(topic)
        if t is None:
            t = self._start_topic(topic)
        if t.count == 0:
            await t.ready.wait()
            if t.error is not None:
                raise t.error
        return t

    def fail_parked(self, t: TopicState, error: BaseException) -> int:
        """Fail the records waiting for ``t``'s partitions to be known; return how many."""
        pending, t.pending = t.pending, []
        failed = 0
        for record in pending:
            if type(record) is not tuple:  # a run send_nowait staged (staging.ParkedRun)
                failed += record.records
                record.fail(error)
                continue
            failed += 1
            self._acc.release(1, record[-1])
            self._reports.parked_failed(t.name, record, error)
        return failed

    def _start_topic(self, topic: str) -> TopicState:
        if not isinstance(topic, str) or not topic:
            raise errors.InvalidTopicError(f"invalid topic name {topic!r}")
        if self._acc.closing:  # its task could not start: the nursery is closing or closed
            raise errors.ClosedError("the producer is closed")
        t = TopicState(topic)
        self.topics[topic] = t
        self._nursery.start_soon(self._topic_task, t, name=f"pykaf producer topic {topic}")
        return t

    async def _topic_task(self, t: TopicState) -> None:
        try:
            partitions = await self._lookup_topic(t.name)
        except errors.PykafError as exc:
            self._acc.drain_staged()  # runs staged for the topic are parked: they fail too
            t.error = exc
            if self.topics.get(t.name) is t:
                del self.topics[t.name]  # a later send asks again
            self.fail_parked(t, exc)
            t.ready.set()
            return
        # Runs staged for the topic join the records parked for it, after them.
        self._acc.drain_staged()
        t.parts = [PartitionState(t.name, i) for i in range(len(partitions))]
        for p in t.parts:
            self._nursery.start_soon(
                self._partition_task, p, name=f"pykaf producer {t.name}/{p.partition}"
            )
        t.count = len(t.parts)
        self._update_available(t)
        pending, t.pending = t.pending, []
        records = [record for record in pending if type(record) is tuple]
        # Their space is released in one step; append takes it again one by one.
        self._acc.unreserve(len(records), sum(record[-1] for record in records))
        append = self._acc.append
        for record in pending:
            if type(record) is not tuple:  # a staged run: appended in bulk, or failed
                record.replay(t)
                continue
            value, key, partition, headers, timestamp, target, _ = record
            try:
                batch, delta = append(t, partition, key, value, headers, timestamp)
            except (errors.PykafError, TypeError, ValueError) as exc:
                self._reports.parked_failed(t.name, record, exc)
                continue
            if target is not None:
                batch.observe(delta, timestamp, target)
        if t.hurry:  # send_now() was called while they waited: no linger for them
            t.hurry = False
            for p in t.parts:
                self._acc.seal(p)
        t.ready.set()

    async def _lookup_topic(self, topic: str) -> list[int]:
        cfg = self._config
        deadline = trio.current_time() + min(cfg.delivery_timeout, 60.0)
        retries = Retries(self._sinks.policy)
        while True:
            try:
                return await self._client.partitions(topic)
            except errors.UnknownTopicOrPartitionError:
                if not cfg.allow_auto_create_topics:
                    raise
                if trio.current_time() >= deadline:
                    raise
            except errors.RetriableError:
                if trio.current_time() >= deadline:
                    raise
            await retries.wait()
            await self._client.refresh_metadata(topic)

    def _update_available(self, t: TopicState) -> None:
        """Refresh the topic's writable partitions; adopt partitions added to it."""
        info = self._client.metadata.topics.get(t.name)
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
        up = [i for i in self._sinks.router.available(t.name) if i < t.count]
        t.available = sorted(up) if len(up) < t.count else None

    # ------------------------------------------------------------------ partitions

    async def _partition_task(self, p: PartitionState) -> None:
        """Keep the partition attached to its leader's sink (the router's loop)."""
        await self._sinks.router.follow(p.route, self)

    # The producer's side of the router (pykaf._cluster.router.Role).

    async def prepare(self, p: PartitionState) -> bool:
        """Before a leader lookup: no attach while the producer epoch is being bumped."""
        await self._ids.wait_bump()
        return True

    def metadata_refreshed(self, topic: str) -> None:
        """The topic's metadata was refreshed: its writable partitions may have changed."""
        t = self.topics.get(topic)
        if t is not None:
            self._update_available(t)

    def worker(self, node: int) -> BrokerSink:
        """The sink of broker ``node``."""
        return self._sinks.sink_for(node)

    def unplaced(self, p: PartitionState, failures: int, error: errors.PykafError | None) -> None:
        """No leader this time: fail what is past the delivery timeout meanwhile."""
        self._sinks.expire(p)


__all__ = ["Router"]
