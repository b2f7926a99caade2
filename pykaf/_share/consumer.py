"""A share group consumer (KIP-932): fetch, hand out, acknowledge.

:class:`ShareConsumer` fetches with ShareFetch from the leader of every
partition the coordinator assigned it (:class:`~pykaf._share.membership.
ShareMembership`), in one *share session* per leader. Where a partition is
led is the partition router's (:class:`~pykaf._cluster.router.PartitionRouter`):
each round places the partitions not attached to a leader, and a partition
the leader no longer serves is reported lost to it and placed again. In a
session, the session's epoch is
0 on the first request (which opens it), then counts up; a lost session
(SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH) starts again at 0.
The broker answers with record batches and the ranges of offsets it
*acquired* for this member, each with its delivery count; only those records
are handed out (:class:`~pykaf._share.records.ShareRecord`).

Acknowledgements: :meth:`ShareConsumer.acknowledge` records an outcome;
records handed out and not acknowledged are accepted when the next batch is
asked for (implicit acknowledgement), on :meth:`ShareConsumer.commit`, and on
close. Outcomes travel with the next ShareFetch to the partition's leader, or
with ShareAcknowledge on commit and close (the close one ends the session,
epoch -1). Records held but never acknowledged go back to the group when
their acquisition lock expires (``group.share.record.lock.duration.ms``) and
are delivered again with a higher delivery count.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import Client
from pykaf._cluster.metadata import Metadata
from pykaf._cluster.router import PartitionRouter, Role, Route
from pykaf._share.config import ShareConsumerConfig
from pykaf._share.membership import ShareMembership, TopicPartition
from pykaf._share.records import (
    ACCEPT,
    GAP,
    RELEASE,
    RENEW,
    AcknowledgeType,
    PendingAcks,
    ShareRecord,
    ack_batches,
)
from pykaf._util import open_service_nursery
from pykaf.codec import Record, decode_batches

log = logging.getLogger("pykaf.share")

#: ShareFetch / ShareAcknowledge v2 carry RENEW (KIP-1222, Kafka 4.2+).
_RENEW_VERSION = 2
_MAX_EPOCH = 2**31 - 1
#: A partition's fetch answers that mean "ask the metadata where it lives now".
_MOVED = (
    errors.NotLeaderOrFollowerError,
    errors.UnknownTopicOrPartitionError,
    errors.LeaderNotAvailableError,
    errors.FencedLeaderEpochError,
    errors.UnknownTopicIdError,
)
#: Answers that mean the share session is gone: open a new one.
_SESSION_LOST = (errors.ShareSessionNotFoundError, errors.InvalidShareSessionEpochError)


@dataclass
class _Session:
    """A share session with one broker: its epoch and the partitions in it."""

    node_id: int
    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.partitions.clear()


class _Leader:
    """The partitions one broker leads for this member, as the router attached them."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.partitions: set[TopicPartition] = set()

    def attach(self, tp: TopicPartition) -> None:
        self.partitions.add(tp)

    def detach(self, tp: TopicPartition) -> None:
        self.partitions.discard(tp)


class _Role(Role[TopicPartition]):
    """The share consumer's side of its partition router.

    Nothing to prepare or check: share fetches name no leader epoch.
    """

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata
        self.leaders: dict[int, _Leader] = {}

    def worker(self, node: int) -> _Leader:
        leader = self.leaders.get(node)
        if leader is None:
            leader = self.leaders[node] = _Leader(node)
        return leader

    def unplaced(self, tp: TopicPartition, failures: int, error: errors.PykafError | None) -> None:
        """No leader this round: skipped (tried again next round), unless the error is final."""
        if error is not None and not isinstance(
            error, (errors.RetriableError, errors.KafkaConnectionError)
        ):
            raise error
        # A topic the cluster will not describe (an authorization refused): final.
        known = self.metadata.topic_errors.get(tp[0])
        if known is not None and not known.retriable and tp[0] not in self.metadata.topics:
            raise known(f"topic {tp[0]!r}: {known.description}")


class ShareConsumer:
    """A member of a share group; see the module's docstring.

    Made by :func:`pykaf.open_share_consumer`. ``async for record in
    consumer`` yields :class:`ShareRecord` objects; :meth:`next_batch` gives
    the next batch at once.
    """

    def __init__(
        self,
        client: Client,
        config: ShareConsumerConfig,
        group_id: str,
        topics: Sequence[str],
    ) -> None:
        self.client = client
        self.config = config
        self.group_id = group_id
        self.membership = ShareMembership(client, config, group_id, topics)
        #: failed share fetches in a row, and the backoff they earn
        self._retries = Retries(Backoff.of(config))
        #: where each partition is led (routes of the partitions assigned or with outcomes)
        self._router = PartitionRouter(client, self._retries.policy)
        self._role = _Role(client.metadata)
        self._routes: dict[TopicPartition, Route[TopicPartition]] = {}
        self._sessions: dict[int, _Session] = {}
        self._pending = PendingAcks()
        #: Handed out and not settled, by partition and offset.
        self._handed: dict[TopicPartition, dict[int, ShareRecord]] = {}
        self._buffer: deque[ShareRecord] = deque()
        self._closed = False
        #: Acknowledgement errors the broker returned with a ShareFetch, by partition.
        self.acknowledge_errors: dict[TopicPartition, Exception] = {}
        #: The acquisition lock of the last ShareFetch answer, in seconds.
        self.acquisition_lock_timeout: float | None = None

    @property
    def member_id(self) -> str:
        """The member id (kept for the consumer's life)."""
        return self.membership.member_id

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the coordinator assigned this member."""
        return self.membership.assignment

    # -- acknowledging ------------------------------------------------------------------

    def acknowledge(self, record: ShareRecord, outcome: AcknowledgeType = ACCEPT) -> None:
        """Record ``outcome`` for ``record``; it is sent with the next ShareFetch or commit.

        A delivered record is settled once: after ACCEPT, RELEASE or REJECT
        (or the implicit ACCEPT when the next batch is asked for) another call
        raises. RENEW restarts the record's acquisition lock; it must still be
        settled, by a later call. ``record.acknowledged`` tells the outcome recorded.

        Raises:
            ValueError: ``outcome`` is not an AcknowledgeType; ``record`` was
                acknowledged already (explicitly, or accepted implicitly when the
                next batch was asked for); or it is not one this consumer handed out.
        """
        outcome = AcknowledgeType(outcome)
        tp = (record.topic, record.partition)
        handed = self._handed.get(tp)
        if handed is None or handed.get(record.offset) is not record:
            where = f"{record.topic}/{record.partition}@{record.offset}"
            if record.acknowledged is not None:
                raise ValueError(
                    f"{where} was already acknowledged ({record.acknowledged.name}): a delivered"
                    " record is settled once (records not acknowledged are accepted when the"
                    " next batch is asked for, and on commit)"
                )
            raise ValueError(
                f"{where} is not a record this consumer holds: it was not handed out here,"
                " or its share session was lost since (it will be delivered again)"
            )
        if outcome is not RENEW:
            del handed[record.offset]
        record.acknowledged = outcome
        self._pending.add(tp, record.offset, int(outcome))

    def _accept_handed(self) -> None:
        """Implicit acknowledgement: accept what was handed out and not acknowledged."""
        renewing: dict[TopicPartition, dict[int, ShareRecord]] = {}
        for tp, records in self._handed.items():
            for offset, record in records.items():
                if self._pending.get(tp, offset) == int(RENEW):
                    renewing.setdefault(tp, {})[offset] = record  # still being processed
                else:
                    self._pending.add(tp, offset, int(ACCEPT))
                    record.acknowledged = ACCEPT
        self._handed = renewing

    async def commit(self) -> None:
        """Accept the records handed out and not acknowledged, and send every outcome now.

        One task at a time should fetch and commit (the share sessions' epochs
        count the requests in order).

        Raises:
            KafkaError: the broker refused an acknowledgement (the typed error of the
                first; e.g. InvalidRecordStateError for a record whose lock expired).
        """
        self.membership.check()
        self._accept_handed()
        failures = await self._acknowledge_all(closing=False)
        if failures:
            raise next(iter(failures.values()))

    # -- fetching -------------------------------------------------------------------

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> ShareRecord:
        if self._closed:
            raise StopAsyncIteration
        record = await self.next_record()
        assert record is not None  # no timeout: waits until there is one
        return record

    async def next_batch(self, timeout: float | None = None) -> list[ShareRecord]:
        """The next records this member acquired (empty after ``timeout`` seconds).

        Records handed out before and not acknowledged are accepted first.
        Waits until there are some, or for ``timeout`` seconds (then returns an
        empty list). A request in flight is never cancelled by the timeout: what
        it acquires is handed out, not lost until its lock expires.
        """
        if self._buffer:
            batch = list(self._buffer)
            self._buffer.clear()
        else:
            deadline = math.inf if timeout is None else trio.current_time() + timeout
            batch = await self._fetch_batch(deadline)
        self._hand_out(batch)
        return batch

    async def next_record(self, timeout: float | None = None) -> ShareRecord | None:
        """The next record (from the current batch, else a new one); None after ``timeout``."""
        if not self._buffer:
            deadline = math.inf if timeout is None else trio.current_time() + timeout
            self._buffer.extend(await self._fetch_batch(deadline))
            if not self._buffer:
                return None
        record = self._buffer.popleft()
        self._hand_out([record])
        return record

    def next_nowait(self) -> ShareRecord | None:
        """The next record of the current batch if one is left, else None (no wait, no fetch).

        For a caller outside trio (``pykaf.aio``) that reads records one by one
        without crossing into trio for each.
        """
        if self._closed or not self._buffer:
            return None
        record = self._buffer.popleft()
        self._hand_out([record])
        return record

    def _hand_out(self, records: list[ShareRecord]) -> None:
        for record in records:
            self._handed.setdefault((record.topic, record.partition), {})[record.offset] = record

    async def _fetch_batch(self, deadline: float = math.inf) -> list[ShareRecord]:
        self._accept_handed()
        while True:
            if self._closed:
                raise errors.ClosedError("the share consumer is closed")
            self.membership.check()
            assigned = self.membership.assignment
            if not assigned and not self._pending.partitions():
                with trio.move_on_at(deadline):
                    await self.membership.wait_assignment_change()
                if trio.current_time() >= deadline:
                    return []
                continue
            batch = await self._fetch_once(assigned)
            if batch:
                batch.sort(key=lambda r: (r.topic, r.partition, r.offset))
                return batch
            if trio.current_time() >= deadline:
                return []
            if not assigned:
                with trio.move_on_at(deadline):
                    await self.membership.wait_assignment_change()

    async def _leaders(self, tps: set[TopicPartition]) -> dict[int, set[TopicPartition]]:
        """``tps`` by the broker leading them; those without a leader now are left out."""
        routes = self._routes
        for tp in tps:
            if tp not in routes:
                # The membership resolved the assignment from fresh metadata.
                routes[tp] = Route(tp[0], tp[1], tp, stale=False)
        unplaced = [routes[tp] for tp in sorted(tps) if routes[tp].worker is None]
        if unplaced:
            async with open_service_nursery() as nursery:  # their refreshes are shared
                for route in unplaced:
                    nursery.start_soon(self._place, route)
        out: dict[int, set[TopicPartition]] = {}
        for node_id, leader in self._role.leaders.items():
            if leader.partitions & tps:
                out[node_id] = leader.partitions & tps
        return out

    async def _place(self, route: Route[TopicPartition]) -> None:
        node = await self._router.place(route, self._role)
        if node is not None:
            route.attach(self._role.worker(node))

    def _lost(self, node_id: int, tps: set[TopicPartition]) -> None:
        """``node_id`` no longer serves ``tps``: the router places them again next round."""
        for tp in tps:
            route = self._routes.get(tp)
            if route is not None and route.worker is self._role.leaders.get(node_id):
                self._router.lost(route, node_id)

    async def _fetch_once(self, assigned: frozenset[TopicPartition]) -> list[ShareRecord]:
        wanted = set(assigned) | set(self._pending.partitions())
        for tp in [tp for tp in self._routes if tp not in wanted]:
            self._routes.pop(tp).close()  # neither assigned nor with outcomes to send
        by_leader = await self._leaders(wanted)
        for node_id in self._sessions:
            by_leader.setdefault(node_id, set())
        if not any(by_leader.values()):
            await self._retries.wait()
            return []
        found: list[ShareRecord] = []

        async def one(node_id: int, tps: set[TopicPartition]) -> None:
            # Outcomes for partitions no longer assigned here go by ShareAcknowledge:
            # naming a partition in a ShareFetch would fetch (and acquire) from it.
            stray = {tp for tp in tps - assigned if tp in self._pending.partitions()}
            if stray:
                failures = await self._share_acknowledge(node_id, stray, closing=False)
                self.acknowledge_errors.update(failures)
            found.extend(await self._share_fetch(node_id, tps & assigned))

        async with open_service_nursery() as nursery:  # its error itself, not a group
            for node_id, tps in by_leader.items():
                if tps & assigned or self._sessions.get(node_id, _Session(node_id)).partitions:
                    nursery.start_soon(one, node_id, tps)
        return found

    def _topic_id(self, topic: str) -> uuid.UUID:
        tid = self.membership.topic_id(topic)
        if tid is None:
            raise errors.UnknownTopicIdError(f"no topic id known for {topic!r}")
        return tid

    async def _share_fetch(self, node_id: int, fetch: set[TopicPartition]) -> list[ShareRecord]:
        """One ShareFetch to ``node_id``: fetch ``fetch`` and send their outcomes."""
        session = self._sessions.setdefault(node_id, _Session(node_id))
        R = P.ShareFetchRequest
        # A session's first request opens it and may carry no acknowledgements.
        acks = self._pending.take(fetch) if session.epoch > 0 else {}
        renewing = any(t == int(RENEW) for a in acks.values() for t in a.values())
        listed: dict[TopicPartition, Any] = {}
        for tp in sorted((fetch - session.partitions) | set(acks)):
            batches = ack_batches(acks.get(tp, {}), R.AcknowledgementBatch)
            listed[tp] = R.FetchPartition(partition_index=tp[1], acknowledgement_batches=batches)
        topics: dict[str, list[Any]] = {}
        for (topic, _), part in listed.items():
            topics.setdefault(topic, []).append(part)
        forgotten: dict[str, list[int]] = {}
        for topic, partition in sorted(session.partitions - fetch):
            forgotten.setdefault(topic, []).append(partition)
        request = R(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=session.epoch,
            max_wait_ms=int(self.config.fetch_max_wait * 1000),
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_max_bytes,
            max_records=self.config.max_records,
            batch_size=self.config.max_records,
            topics=[
                R.FetchTopic(topic_id=self._topic_id(t), partitions=ps) for t, ps in topics.items()
            ],
            forgotten_topics_data=[
                R.ForgottenTopic(topic_id=self._topic_id(t), partitions=ps)
                for t, ps in forgotten.items()
            ],
        )
        try:
            response = await self._send(node_id, request, acks, renewing)
        except (errors.KafkaConnectionError, errors.RetriableError) as exc:
            log.info("share group %s: ShareFetch to %s: %s", self.group_id, node_id, exc)
            session.reset()
            self._requeue(acks)
            # The node may be gone for good: ask where its partitions lead now.
            self._lost(node_id, fetch | set(acks))
            await self._retries.wait()
            return []
        err = errors.error_for_code(response.error_code)
        if err is not None:
            return await self._session_failed(session, err, response.error_message, acks)
        self._retries.reset()
        session.advance()
        session.partitions = set(fetch)
        if response.acquisition_lock_timeout_ms > 0:
            self.acquisition_lock_timeout = response.acquisition_lock_timeout_ms / 1000
        return self._read(node_id, response)

    async def _send(
        self, node_id: int, request: Any, acks: dict[TopicPartition, dict[int, int]], renew: bool
    ) -> Any:
        """Send a ShareFetch or ShareAcknowledge; one carrying RENEW needs its v2 (KIP-1222)."""
        conn = await self.client.broker_connection(node_id)
        version = conn.version_for(request.API_KEY)
        if renew:
            if version < _RENEW_VERSION:
                self._requeue(acks)  # kept: the caller may acknowledge them otherwise
                raise errors.UnsupportedVersionError(
                    f"RENEW needs {type(request).__name__.removesuffix('Request')} v2 "
                    f"(Kafka 4.2 or newer); the broker speaks v{version}"
                )
            request.is_renew_ack = True
        return await conn.request(request, version)

    def _requeue(self, acks: dict[TopicPartition, dict[int, int]]) -> None:
        # Not sent: kept for the next request (they may still arrive inside the lock).
        for tp, outcomes in acks.items():
            for offset, outcome in outcomes.items():
                self._pending.add(tp, offset, outcome)

    async def _session_failed(
        self,
        session: _Session,
        err: type[errors.KafkaError],
        message: str | None,
        acks: dict[TopicPartition, dict[int, int]],
    ) -> list[ShareRecord]:
        session.reset()
        if issubclass(err, _SESSION_LOST) or issubclass(
            err, (errors.UnknownMemberIdError, errors.FencedMemberEpochError)
        ):
            # The acquisitions of the lost session are the broker's again: the
            # outcomes are dropped and those records will be delivered again.
            log.info("share group %s: share session lost (%s)", self.group_id, err.name)
            for tp in acks:
                self._handed.pop(tp, None)
            await self._retries.wait()
            return []
        if err.retriable:
            self._requeue(acks)
            await self._retries.wait()
            return []
        raise err(f"ShareFetch {self.group_id!r}: {message or err.description}")

    def _read(self, node_id: int, response: Any) -> list[ShareRecord]:
        out: list[ShareRecord] = []
        names = {self._id_or_none(t): t for t in self.membership.topics}
        for topic_resp in response.responses:
            topic = names.get(topic_resp.topic_id)
            if topic is None:
                continue
            for part in topic_resp.partitions:
                tp = (topic, part.partition_index)
                ack_err = errors.error_for_code(part.acknowledge_error_code)
                if ack_err is not None:
                    text = part.acknowledge_error_message or ack_err.description
                    self.acknowledge_errors[tp] = ack_err(f"{topic}/{tp[1]}: {text}")
                    log.warning("share group %s: acknowledging %s/%s: %s", self.group_id, *tp, text)
                err = errors.error_for_code(part.error_code)
                if err is not None:
                    if issubclass(err, _MOVED) or err.retriable:
                        self._lost(node_id, {tp})
                        for s in self._sessions.values():
                            s.partitions.discard(tp)
                        continue
                    raise err(
                        f"ShareFetch {topic}/{tp[1]}: {part.error_message or err.description}"
                    )
                out.extend(self._acquired(tp, part))
                route = self._routes.get(tp)
                if route is not None:
                    route.succeeded()
        return out

    def _id_or_none(self, topic: str) -> uuid.UUID | None:
        return self.membership.topic_id(topic)

    def _acquired(self, tp: TopicPartition, part: Any) -> list[ShareRecord]:
        """The records of ``part`` this member acquired; acquired offsets without one are GAPs."""
        if not part.acquired_records:
            return []
        by_offset: dict[int, Record] = {}
        data = part.records
        if data:
            for batch in decode_batches(
                data, check_crc=self.config.check_crcs, topic=tp[0], partition=tp[1]
            ):
                if batch.is_control:
                    continue
                for rec in batch.records:
                    by_offset[rec.offset] = rec
        out: list[ShareRecord] = []
        for acquired in part.acquired_records:
            for offset in range(acquired.first_offset, acquired.last_offset + 1):
                record = by_offset.get(offset)
                if record is None:
                    self._pending.add(tp, offset, GAP)
                else:
                    out.append(ShareRecord(record, acquired.delivery_count))
        return out

    # -- ShareAcknowledge -------------------------------------------------------------

    async def _acknowledge_all(self, *, closing: bool) -> dict[TopicPartition, Exception]:
        """Send every pending outcome with ShareAcknowledge (ending the sessions if closing)."""
        by_leader = await self._leaders(set(self._pending.partitions()))
        if closing:
            for node_id in self._sessions:
                by_leader.setdefault(node_id, set())
        failures: dict[TopicPartition, Exception] = {}

        async def one(node_id: int, tps: set[TopicPartition]) -> None:
            failures.update(await self._share_acknowledge(node_id, tps, closing))

        async with open_service_nursery() as nursery:  # its error itself, not a group
            for node_id, tps in by_leader.items():
                nursery.start_soon(one, node_id, tps)
        return failures

    async def _share_acknowledge(
        self, node_id: int, tps: set[TopicPartition], closing: bool
    ) -> dict[TopicPartition, Exception]:
        session = self._sessions.get(node_id)
        if session is None or session.epoch == 0:
            # No session with that broker: nothing it acquired for us can be settled.
            self._pending.take(tps)
            return {}
        acks = self._pending.take(tps)
        R = P.ShareAcknowledgeRequest
        topics: dict[str, list[Any]] = {}
        for tp, outcomes in sorted(acks.items()):
            topics.setdefault(tp[0], []).append(
                R.AcknowledgePartition(
                    partition_index=tp[1],
                    acknowledgement_batches=ack_batches(outcomes, R.AcknowledgementBatch),
                )
            )
        request = R(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=-1 if closing else session.epoch,
            topics=[
                R.AcknowledgeTopic(topic_id=self._topic_id(t), partitions=ps)
                for t, ps in topics.items()
            ],
        )
        renewing = any(t == int(RENEW) for a in acks.values() for t in a.values())
        try:
            response = await self._send(node_id, request, acks, renewing)
        except (errors.KafkaConnectionError, errors.RetriableError) as exc:
            # Unknown whether it arrived; the session is gone with the connection.
            session.reset()
            return dict.fromkeys(acks, exc)
        if closing:
            session.reset()
        else:
            session.advance()
        err = errors.error_for_code(response.error_code)
        if err is not None:
            session.reset()
            text = response.error_message or err.description
            return {tp: err(f"ShareAcknowledge {self.group_id!r}: {text}") for tp in acks}
        failures: dict[TopicPartition, Exception] = {}
        names = {self._id_or_none(t): t for t in self.membership.topics}
        for topic_resp in response.responses:
            topic = names.get(topic_resp.topic_id)
            for part in topic_resp.partitions:
                perr = errors.error_for_code(part.error_code)
                if perr is not None and topic is not None:
                    text = part.error_message or perr.description
                    failures[(topic, part.partition_index)] = perr(
                        f"{topic}/{part.partition_index}: {text}"
                    )
        return failures

    # -- closing ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Settle and leave the group.

        Accepts what was handed out, releases what was fetched but not handed
        out (and what was renewed but never settled), ends the share sessions
        (ShareAcknowledge, epoch -1) and leaves (ShareGroupHeartbeat, epoch -1).
        """
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            self._accept_handed()
            for tp, records in self._handed.items():  # renewed, never finished
                for offset, record in records.items():
                    self._pending.add(tp, offset, int(RELEASE))
                    record.acknowledged = RELEASE
            self._handed.clear()
            for record in self._buffer:
                self._pending.add((record.topic, record.partition), record.offset, int(RELEASE))
            self._buffer.clear()
            try:
                with trio.move_on_after(self.config.request_timeout):
                    failures = await self._acknowledge_all(closing=True)
                    for tp, exc in failures.items():
                        log.warning("share group %s: closing %s/%s: %s", self.group_id, *tp, exc)
            except errors.PykafError as exc:
                log.warning("share group %s: acknowledging on close: %s", self.group_id, exc)
            await self.membership.leave()
