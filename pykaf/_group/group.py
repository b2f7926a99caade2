"""Consumer groups on Kafka's classic group protocol, in trio tasks.

``ConsumerGroup.consume(handler)`` runs generation after generation:

1. **Join and sync.** JoinGroup with one protocol per configured assignor
   (its subscription, with the partitions owned so far); the leader runs the
   chosen assignor over every member's subscription and sends the result in
   SyncGroup; every member gets its assignment back.
2. **Claims.** Partitions new to this member are started at the group's
   committed offset (``auto_offset_reset`` where there is none) on the
   group's partition consumers, and ``handler.consume_claim`` runs for each
   in a task. A **heartbeat** task and an **auto-commit** task run meanwhile.
3. **The end of a generation** comes from a heartbeat answered
   REBALANCE_IN_PROGRESS, a lost membership, or ``aclose``. With an eager
   protocol every claim ends; the group waits for their consume_claim (up to
   ``rebalance_timeout``, then cancels it), commits the marks and calls
   ``handler.cleanup``. With the cooperative protocol (every assignor
   cooperative, as Java decides) claims keep running through the rebalance:
   only partitions the new assignment takes away are ended and committed,
   and the member rejoins at once so that they can be handed on.

``async for record in group`` runs the same loop with a built-in handler and
marks each record done when the loop asks for the next one (or, for the last
one, when the group's ``async with`` block is left without an error).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import NEWEST, OLDEST, Client
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._consumer.consumer import Consumer
from pykaf._consumer.partition import PartitionConsumer
from pykaf._group.assignors import (
    Assignor,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pykaf._group.config import GroupConfig
from pykaf._group.offsets import OffsetManager
from pykaf._group.session import Claim, ConsumerGroupHandler, GroupSession, end_claim
from pykaf._group.states import INITIAL, MemberEvent, transition
from pykaf._util import open_service_nursery
from pykaf.codec import Record
from pykaf.errors import CommitError
from pykaf.protocol import versions
from pykaf.protocol.consumer_protocol import with_rack

log = logging.getLogger("pykaf.group")

PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]

#: Errors after which the member must rejoin under a new member id.
_MEMBER_LOST = (errors.UnknownMemberIdError, errors.IllegalGenerationError)
_COORDINATOR_MOVED = (
    errors.NotCoordinatorError,
    errors.CoordinatorNotAvailableError,
    errors.CoordinatorLoadInProgressError,
)


@dataclass(frozen=True, slots=True)
class GroupPartitionStatistics:
    """One claimed partition: position, committed offset and lag."""

    topic: str
    partition: int
    position: int
    committed: int
    high_water_mark: int
    lag: int


@dataclass(frozen=True, slots=True)
class GroupStatistics:
    """A snapshot of a group member."""

    group_id: str
    member_id: str
    generation_id: int
    protocol: str | None
    leader: bool
    rebalances: int
    commits: int
    commit_errors: int
    partitions: list[GroupPartitionStatistics]

    @property
    def lag(self) -> int:
        """Total lag of the claimed partitions."""
        return sum(p.lag for p in self.partitions)


class _Rejoin(Exception):
    """Internal: the join/sync round must start again."""


class ConsumerGroup:
    """A member of a consumer group; get one from :func:`open_consumer_group`."""

    def __init__(
        self,
        client: Client,
        config: GroupConfig,
        group_id: str,
        topics: Sequence[str],
        consumer: Consumer,
        nursery: trio.Nursery,
    ) -> None:
        self.client = client
        self.config = config
        #: failed coordinator round trips in a row, and the backoff they earn
        self._retries = Retries(Backoff.of(config))
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self._consumer = consumer
        self._nursery = nursery
        self._assignors: list[Assignor] = config.build_assignors()
        self.cooperative = all(a.rebalance_protocol == "cooperative" for a in self._assignors)
        self.offsets = OffsetManager(client, group_id, config.group_instance_id)
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader = False
        #: Where the member is in join, sync, generation and leave
        #: (``pykaf._group.states``); changed only by :meth:`_move`.
        self._state = INITIAL
        self.rebalances = 0
        # SyncGroup answers of INVALID_REQUEST in a row (see _join_once).
        self._sync_refusals = 0
        self.session: GroupSession | None = None
        self._claims: dict[TopicPartition, Claim] = {}
        self._assignment: dict[str, list[int]] = {}
        self._rejoin = trio.Event()
        self._assigned_counts: dict[str, int] = {}
        self._closed = False
        self._consuming = False
        self._consume_done = trio.Event()
        self._consume_done.set()
        self._iter_receive: trio.MemoryReceiveChannel[tuple[Claim, list[Record]]] | None = None
        # ``async for``'s cursor: the claim and batch it hands out, and the next index.
        self._iter_claim: Claim | None = None
        self._iter_batch: list[Record] = []
        self._iter_next = 0
        # The record ``async for`` handed out last, not yet marked: it counts
        # as done when the loop asks for the next one, or when the group's
        # block is left normally (after a ``break``).
        self._handed: tuple[str | None, int, int] | None = None

    # -- the public surface -----------------------------------------------------

    async def consume(self, handler: ConsumerGroupHandler) -> None:
        """Run ``handler`` over generation after generation until the group closes.

        Raises:
            ConfigError: consume is already running.
            ClosedError: the group is closed.
            KafkaError: a non-retriable group error (e.g. FencedInstanceIdError,
                GroupAuthorizationFailedError); whatever a handler raises.
        """
        if self._closed:
            raise errors.ClosedError("the consumer group is closed")
        if self._consuming:
            raise errors.ConfigError("consume() is already running on this group")
        self._consuming = True
        self._consume_done = trio.Event()
        try:
            # A service nursery: consume raises the error itself, not a group of one.
            async with open_service_nursery() as claims:
                await self._membership(handler, claims)
        finally:
            self._consuming = False
            self._consume_done.set()

    async def _membership(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """The protocol's part of :meth:`consume`: generations until closed, then leave."""
        try:
            while not self._closed:
                await self._join_and_sync(handler, claims)
                if self._closed:
                    break
                await self._run_generation(handler, claims)
        finally:
            with trio.CancelScope(shield=True):
                await self._end_claims(list(self._claims), commit=True)
                await self._leave()

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Record]:
        next_nowait = self.next_nowait
        while True:
            record = next_nowait()
            if record is None:
                record = await self.next_record()
                if record is None:
                    return
            yield record

    def next_nowait(self) -> Record | None:
        """The next record of ``async for``'s stream if one is fetched, else None (no wait).

        Like asking ``async for`` for the next record, it marks the one handed
        out before. For a caller outside trio (``pykaf.aio``) that reads the
        stream one record at a time without crossing into trio for each.
        """
        self._settle_handed()
        i, batch = self._iter_next, self._iter_batch
        if i >= len(batch):
            return None
        claim = self._iter_claim
        if claim is not None and claim.revoked:  # the rest of the batch is no longer ours
            self._iter_batch, self._iter_next = [], 0
            return None
        record = batch[i]
        self._iter_next = i + 1
        self._handed = (record.topic, record.partition, record.offset + 1)
        return record

    async def next_record(self) -> Record | None:
        """The next record of ``async for``'s stream, waiting for one; None once the group stops."""
        if self._iter_receive is None:
            send, receive = trio.open_memory_channel[tuple[Claim, list[Record]]](1)
            self._iter_receive = receive
            self._nursery.start_soon(self.consume, _ForwardingHandler(send))
        while True:
            record = self.next_nowait()
            if record is not None:
                return record
            try:
                claim, batch = await self._iter_receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return None
            self._iter_claim, self._iter_batch, self._iter_next = claim, batch, 0

    def _settle_handed(self) -> None:
        """Mark the record ``async for`` handed out last as done.

        The loop marks a record when it is asked for the next one; a block
        left normally after a ``break`` calls this, so the record the loop
        stopped at is committed too (as :class:`pykaf.sync.ConsumerGroup`
        commits everything handed out on a normal ``close``).
        """
        handed, self._handed = self._handed, None
        if handed is not None:
            self._mark(handed[0], handed[1], handed[2], None)

    async def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit the marked offsets of the current generation now.

        With ``offsets`` (the next offset to consume by ``(topic, partition)``),
        commit exactly those and nothing else: the marks stay as they are.
        Without a generation (the group is joining or rebalancing) the marks
        wait for the next commit, but ``offsets`` cannot: that raises.

        Raises:
            CommitError: the coordinator refused some partitions (they stay marked).
            RebalanceInProgressError: ``offsets`` given while the member has no
                generation; nothing was committed.
            ClosedError: ``offsets`` given after the group closed.
        """
        if self.generation_id < 0:
            if offsets:
                raise self._not_committed(offsets, "it has no generation (joining or rebalancing)")
            return
        await self.offsets.commit(self.generation_id, self.member_id, offsets)

    def _not_committed(self, offsets: Mapping[tuple[str, int], int], why: str) -> errors.PykafError:
        """The error for ``commit(offsets=)`` that the member cannot send now."""
        names = ", ".join(f"{t}/{p}" for t, p in sorted(offsets))
        if self._closed:
            return errors.ClosedError(f"group {self.group_id!r} is closed: {names} not committed")
        return errors.RebalanceInProgressError(
            f"group {self.group_id!r}: {names} not committed: {why}"
        )

    def group_metadata(self) -> GroupMetadata:
        """The member and its generation, for ``producer.send_offsets_to_transaction``.

        With ``async for record in group``, pass it with the offsets after the
        records a transaction consumed (and open the group with
        ``auto_commit=False``: the transaction commits the offsets).
        """
        return GroupMetadata(
            self.group_id, self.generation_id, self.member_id, self.config.group_instance_id
        )

    def assignment(self) -> dict[str, list[int]]:
        """The partitions this member consumes now, by topic."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self._claims):
            out.setdefault(topic, []).append(partition)
        return out

    def statistics(self) -> GroupStatistics:
        """The member's generation, commits, and lag per claimed partition."""
        parts = []
        for (topic, partition), claim in sorted(self._claims.items()):
            position = claim.position
            hwm = claim.high_water_mark
            lag = max(0, hwm - position) if hwm >= 0 and position >= 0 else 0
            parts.append(
                GroupPartitionStatistics(
                    topic,
                    partition,
                    position,
                    self.offsets.committed(topic, partition),
                    hwm,
                    lag,
                )
            )
        return GroupStatistics(
            self.group_id,
            self.member_id,
            self.generation_id,
            self.protocol,
            self.leader,
            self.rebalances,
            self.offsets.commits,
            self.offsets.commit_errors,
            parts,
        )

    async def aclose(self) -> None:
        """Leave the group: end every claim, commit the marks (with auto_commit), LeaveGroup."""
        if self._closed:
            return
        self._closed = True
        self._wake_for_close()
        await self._consume_done.wait()  # consume() ends its claims, commits, leaves
        await self._consumer.aclose()

    def _wake_for_close(self) -> None:
        """Wake whatever :meth:`consume` waits on, so that it sees the group closing."""
        self._rejoin.set()

    # -- marks ----------------------------------------------------------------------

    def _mark(self, topic: str | None, partition: int, offset: int, metadata: str | None) -> None:
        # Marks count until the claim is dropped, after its consume_claim has
        # returned and the group has committed: a handler finishing its last
        # record after the claim ended still gets that record committed.
        if topic is None or (topic, partition) not in self._claims:
            return
        epoch = self._epoch_before(topic, partition, offset)
        self.offsets.mark(topic, partition, offset, metadata, epoch)

    def _reset(self, topic: str, partition: int, offset: int, metadata: str | None) -> None:
        if (topic, partition) in self._claims:
            epoch = self._epoch_before(topic, partition, offset)
            self.offsets.reset(topic, partition, offset, metadata, epoch)

    def _epoch_before(self, topic: str, partition: int, offset: int) -> int:
        """The leader epoch of the record before ``offset``, if this member fetched it, else -1."""
        return self._claims[(topic, partition)].epoch_before(offset)

    # -- joining --------------------------------------------------------------------

    def _move(self, event: MemberEvent) -> None:
        """The one place the member's state changes: by the table (``pykaf._group.states``)."""
        self._state = transition(self._state, event)

    async def _coordinator(self) -> Any:
        broker = await self.client.coordinator(self.group_id)
        return await self.client.connect_to(broker)

    async def _retry_later(self, error: BaseException) -> None:
        # The request path's pause: the next _coordinator() looks the
        # coordinator up again after NOT_COORDINATOR or a lost connection.
        target = rq.group_coordinator(self.group_id)
        await rq.retry_later(self.client, target, error, self._retries.policy, self._retries.fail())

    async def _join_and_sync(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """Join and sync until this member holds an assignment of a generation."""
        while not self._closed:
            try:
                assignment = await self._join_once()
            except _Rejoin:
                continue
            except (errors.KafkaConnectionError, errors.RetriableError) as exc:
                log.info("group %s: %s; joining again", self.group_id, exc)
                await self._retry_later(exc)
                continue
            self._retries.reset()
            self.rebalances += 1
            assigned = {(t, p) for t, ps in assignment.items() for p in ps}
            revoked = [tp for tp in self._claims if tp not in assigned]
            if revoked:
                await self._end_claims(revoked, commit=True)
            self._assignment = assignment
            if self.cooperative and revoked:
                # Incremental rebalancing: rejoin at once so that the partitions
                # this member gave up can go to their new owners.
                self._move(MemberEvent.REBALANCE)
                continue
            return

    def _subscription(
        self, assignor: Assignor, owned: dict[str, list[int]], rack: str | None
    ) -> bytes:
        """The assignor's subscription, with the member's rack (v3) when it has one."""
        metadata = assignor.metadata(self.topics, owned, self.generation_id)
        return metadata if rack is None else with_rack(metadata, rack)

    async def _join_once(self) -> dict[str, list[int]]:
        self._move(MemberEvent.JOIN)
        cfg = self.config
        conn = await self._coordinator()
        version = versions.JOIN_GROUP.pick(conn)
        owned = self._assignment  # the last assignment (empty after a lost membership)
        J = P.JoinGroupRequest
        request = J(
            group_id=self.group_id,
            session_timeout_ms=int(cfg.session_timeout * 1000),
            rebalance_timeout_ms=int(cfg.rebalance_timeout * 1000),
            member_id=self.member_id,
            group_instance_id=cfg.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                J.JoinGroupRequestProtocol(
                    name=a.name, metadata=self._subscription(a, owned, cfg.client_rack)
                )
                for a in self._assignors
            ],
        )
        response = await conn.request(
            request, version, timeout=cfg.rebalance_timeout + cfg.request_timeout
        )
        err = errors.error_for_code(response.error_code)
        if err is not None:
            if issubclass(err, errors.MemberIdRequiredError):
                self.member_id = response.member_id  # KIP-394: join again with it
                raise _Rejoin
            if issubclass(err, _MEMBER_LOST):
                self._lose_membership()
                raise _Rejoin
            if issubclass(err, errors.RebalanceInProgressError):
                await self._retries.wait()
                raise _Rejoin
            raise err(f"JoinGroup {self.group_id!r}: {err.description}")
        self.member_id = response.member_id
        generation = response.generation_id
        protocol = response.protocol_name
        self.leader = response.leader == self.member_id
        self._move(MemberEvent.JOINED)
        log.info(
            "group %s: joined generation %d as %s (%s, %s)",
            self.group_id,
            generation,
            self.member_id,
            protocol,
            "leader" if self.leader else "follower",
        )
        assignments: list[Any] = []
        if self.leader and not getattr(response, "skip_assignment", False):
            assignments = await self._assign(protocol, response.members)
        S = P.SyncGroupRequest
        sync = S(
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=cfg.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=protocol,
            assignments=assignments,
        )
        sync_version = versions.SYNC_GROUP.pick(conn)
        answer = await conn.request(
            sync, sync_version, timeout=cfg.rebalance_timeout + cfg.request_timeout
        )
        err = errors.error_for_code(answer.error_code)
        if err is not None:
            if issubclass(err, _MEMBER_LOST):
                self._lose_membership()
                raise _Rejoin
            if issubclass(err, errors.RebalanceInProgressError):
                raise _Rejoin
            if issubclass(err, errors.InvalidRequestError) and self._sync_refusals < 2:
                # quirk: mock-late-sync-refused
                # librdkafka's mock cluster ends a generation as soon as the
                # leader's SyncGroup carries every assignment; a follower whose
                # SyncGroup arrives after that is refused as INVALID_REQUEST.
                # Joining again recovers (as librdkafka does); a refusal that
                # repeats is a real malformed request and is raised.
                self._sync_refusals += 1
                log.info("group %s: SyncGroup refused (%s); joining again", self.group_id, err)
                raise _Rejoin
            raise err(f"SyncGroup {self.group_id!r}: {err.description}")
        self._sync_refusals = 0
        self.generation_id = generation
        self._move(MemberEvent.SYNCED)
        self.protocol = protocol
        assignment = decode_assignment(answer.assignment or b"")
        return {t: sorted(ps) for t, ps in assignment.items() if t in self.topics}

    async def _assign(self, protocol: str, members: list[Any]) -> list[Any]:
        """The leader's part: run the chosen assignor over every member's subscription."""
        assignor = next((a for a in self._assignors if a.name == protocol), None)
        if assignor is None:
            raise errors.InconsistentGroupProtocolError(
                f"the group chose assignor {protocol!r}, which this member does not offer"
            )
        subscriptions = {
            m.member_id: decode_subscription(m.member_id, m.group_instance_id, m.metadata)
            for m in members
        }
        wanted = sorted({t for s in subscriptions.values() for t in s.topics})
        if wanted:
            await self.client.refresh_metadata(*wanted)
        counts: dict[str, int] = {}
        for topic in wanted:
            try:
                counts[topic] = len(await self.client.partitions(topic))
            except errors.UnknownTopicOrPartitionError:
                log.info("group %s: topic %s does not exist (yet)", self.group_id, topic)
        result = assignor.assign(subscriptions, counts)
        self._assigned_counts = {t: counts.get(t, 0) for t in wanted}
        S = P.SyncGroupRequest
        return [
            S.SyncGroupRequestAssignment(member_id=mid, assignment=encode_assignment(parts))
            for mid, parts in result.items()
        ]

    def _lose_membership(self, event: MemberEvent = MemberEvent.LOSE) -> None:
        self._move(event)
        self.member_id = ""
        self.generation_id = -1
        self._assignment = {}

    # -- a generation ---------------------------------------------------------------

    async def _run_generation(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        self._rejoin = trio.Event()
        if self._closed:
            self._rejoin.set()
        session = GroupSession(
            self.group_id,
            self.generation_id,
            self.member_id,
            {t: list(ps) for t, ps in self._assignment.items()},
            group_instance_id=self.config.group_instance_id,
            mark=self._mark,
            reset=self._reset,
            commit=self.commit,
        )
        self.session = session
        new = await self._open_claims()
        await handler.setup(session)
        for claim in new:
            claims.start_soon(self._claim_task, handler, session, claim)
        lost = False
        async with trio.open_nursery() as tasks:

            async def heartbeat() -> None:
                nonlocal lost
                lost = await self._heartbeat_loop()
                self._rejoin.set()

            tasks.start_soon(heartbeat)
            if self.leader:
                tasks.start_soon(self._watch_partitions)
            if self.config.auto_commit:
                tasks.start_soon(self._auto_commit_loop)
            await self._rejoin.wait()
            tasks.cancel_scope.cancel()
        self._move(MemberEvent.REBALANCE)
        if lost or not self.cooperative or self._closed:
            await self._end_claims(list(self._claims), commit=not lost)
        elif self.config.auto_commit:
            await self._commit_quietly()
        if lost:
            self._lose_membership()
        await handler.cleanup(session)

    async def _open_claims(self) -> list[Claim]:
        """Claims for the assigned partitions this member does not consume yet."""
        new = [
            (t, p) for t, ps in self._assignment.items() for p in ps if (t, p) not in self._claims
        ]
        if not new:
            return []
        committed = await self.offsets.fetch(new)
        reset = OLDEST if self.config.auto_offset_reset == "earliest" else NEWEST
        opened = []
        for tp in new:
            topic, partition = tp
            start = committed.get(tp, -1)
            # the committed epoch: the start is checked against the log first (KIP-320)
            epoch = self.offsets.committed_epoch(topic, partition) if start >= 0 else None
            pc: PartitionConsumer = await self._consumer.consume_partition(
                topic, partition, start if start >= 0 else reset, leader_epoch=epoch
            )
            claim = Claim(topic, partition, start, pc)
            self._claims[tp] = claim
            opened.append(claim)
            if start < 0:
                self._nursery.start_soon(self._note_initial_offset, claim)
        return opened

    async def _note_initial_offset(self, claim: Claim) -> None:
        with trio.move_on_after(self.config.request_timeout):
            while claim.position < 0 and not claim.revoked:
                await trio.sleep(0.01)
        claim.initial_offset = claim.position

    async def _claim_task(
        self, handler: ConsumerGroupHandler, session: GroupSession, claim: Claim
    ) -> None:
        try:
            with claim.cancel_scope:
                await handler.consume_claim(session, claim)
        finally:
            claim.done.set()

    async def _end_claims(
        self, tps: list[TopicPartition], *, commit: bool, wait: float | None = None
    ) -> None:
        """End these claims, wait for their consume_claim, commit, and drop them.

        A consume_claim still running after ``wait`` seconds (``rebalance_timeout``
        by default) is cancelled.
        """
        ending = [self._claims[tp] for tp in tps if tp in self._claims]
        if not ending:
            return
        for claim in ending:
            await end_claim(claim)
        limit = self.config.rebalance_timeout if wait is None else wait
        with trio.move_on_after(limit) as waited:
            for claim in ending:
                await claim.done.wait()
        if waited.cancelled_caught:
            stuck = [c for c in ending if not c.done.is_set()]
            log.warning(
                "group %s: consume_claim of %s did not return within %g s; cancelled",
                self.group_id,
                stuck,
                limit,
            )
            for claim in stuck:
                claim.cancel_scope.cancel()
        if commit and self.config.auto_commit and self.generation_id >= 0:
            await self._commit_quietly()
        for claim in ending:
            self._claims.pop((claim.topic, claim.partition), None)
        self.offsets.forget([(c.topic, c.partition) for c in ending])

    async def _commit_quietly(self) -> None:
        try:
            await self.commit()
        except (CommitError, errors.PykafError) as exc:
            log.warning("group %s: commit failed: %s", self.group_id, exc)

    async def _heartbeat_loop(self) -> bool:
        """Heartbeat until a rebalance starts (False) or the membership is lost (True)."""
        cfg = self.config
        H = P.HeartbeatRequest
        last_ok = trio.current_time()
        while True:
            await trio.sleep(cfg.heartbeat_interval)
            try:
                conn = await self._coordinator()
                version = versions.HEARTBEAT.pick(conn)
                response = await conn.request(
                    H(
                        group_id=self.group_id,
                        generation_id=self.generation_id,
                        member_id=self.member_id,
                        group_instance_id=cfg.group_instance_id,
                    ),
                    version,
                )
                err = errors.error_for_code(response.error_code)
            except errors.PykafError as exc:
                err = None
                if trio.current_time() - last_ok > cfg.session_timeout:
                    log.warning(
                        "group %s: no heartbeat for session_timeout: %s", self.group_id, exc
                    )
                    return True
                await self._retry_later(exc)
                continue
            if err is None:
                last_ok = trio.current_time()
                self._retries.reset()
                continue
            if issubclass(err, errors.RebalanceInProgressError):
                log.info("group %s: rebalance", self.group_id)
                return False
            if issubclass(err, _MEMBER_LOST):
                log.info("group %s: %s; rejoining", self.group_id, err.description)
                return True
            if issubclass(err, _COORDINATOR_MOVED):
                await self._retry_later(err(err.description))
                if trio.current_time() - last_ok > cfg.session_timeout:
                    return True
                continue
            raise err(f"Heartbeat {self.group_id!r}: {err.description}")

    async def _watch_partitions(self) -> None:
        """The leader's watch: a subscribed topic created or grown means a new assignment."""
        topics = sorted(self._assigned_counts)
        while topics:
            await trio.sleep(self.config.partition_watch_interval)
            try:
                await self.client.refresh_metadata(*topics)
                counts: dict[str, int] = {}
                for topic in topics:
                    try:
                        counts[topic] = len(await self.client.partitions(topic))
                    except errors.UnknownTopicOrPartitionError:
                        counts[topic] = 0
            except errors.PykafError as exc:
                log.info("group %s: metadata for the partition watch: %s", self.group_id, exc)
                continue
            if counts != self._assigned_counts:
                log.info(
                    "group %s: partitions changed (%s, were %s); rebalancing",
                    self.group_id,
                    counts,
                    self._assigned_counts,
                )
                self._rejoin.set()
                return

    async def _auto_commit_loop(self) -> None:
        while True:
            await trio.sleep(self.config.auto_commit_interval)
            try:
                await self.commit()
            except CommitError as exc:
                if any(
                    isinstance(e, (*_MEMBER_LOST, errors.RebalanceInProgressError))
                    for e in exc.failures.values()
                ):
                    self._rejoin.set()
                log.info("group %s: auto-commit: %s", self.group_id, exc)
            except errors.PykafError as exc:
                log.info("group %s: auto-commit: %s", self.group_id, exc)

    async def _leave(self) -> None:
        self._move(MemberEvent.LEAVE)
        if not self.member_id or self.config.group_instance_id is not None:
            self._move(MemberEvent.LEFT)
            return  # a static member keeps its place for session_timeout
        L = P.LeaveGroupRequest
        try:
            conn = await self._coordinator()
            version = versions.LEAVE_GROUP.pick(conn)
            if version >= 3:
                request = L(
                    group_id=self.group_id,
                    members=[L.MemberIdentity(member_id=self.member_id, group_instance_id=None)],
                )
            else:
                request = L(group_id=self.group_id, member_id=self.member_id)
            with trio.move_on_after(self.config.request_timeout):
                await conn.request(request, version)
        except errors.PykafError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self._lose_membership(MemberEvent.LEFT)


class _ForwardingHandler:
    """The handler behind ``async for record in group``: claims' batches into one channel."""

    def __init__(self, send: trio.MemorySendChannel[tuple[Claim, list[Record]]]) -> None:
        self._send = send

    async def setup(self, session: GroupSession) -> None:
        return None

    async def consume_claim(self, session: GroupSession, claim: Claim) -> None:
        # Waiting for the reader must not hold up a rebalance: end at once.
        claim.cancel_on_end = True
        while True:
            batch = await claim.next_batch()
            if not batch:
                return
            await self._send.send((claim, batch))

    async def cleanup(self, session: GroupSession) -> None:
        return None


@asynccontextmanager
async def membership_block(group: ConsumerGroup) -> AsyncIterator[ConsumerGroup]:
    """The user's ``async with`` block over ``group``: closes it, settling ``async for``.

    A block left normally marks the record ``async for`` handed out last (it
    is committed on close); one left by an error does not (it is read again).
    """
    try:
        yield group
    except BaseException:
        group._handed = None
        raise
    else:
        group._settle_handed()
    finally:
        with trio.CancelScope(shield=True):
            await group.aclose()
