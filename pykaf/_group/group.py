"""A consumer group member's claims, marks and commits, whichever protocol it speaks.

:class:`ConsumerGroup` is what ``open_consumer_group`` gives: the public
surface (``consume(handler)``, ``async for``, ``commit``, ``assignment``,
``statistics``, ``aclose``) and the claim machinery both protocols share.
Partitions newly assigned are started at the group's committed offset
(``auto_offset_reset`` where there is none) on the group's partition
consumers, and ``handler.consume_claim`` runs for each in a task; a claim
that ends (revoked, the membership lost, the group closing) is waited for up
to ``rebalance_timeout`` (then cancelled), its marks are committed unless the
membership was lost, and it is dropped. An **auto-commit** task commits the
marks meanwhile.

The protocol is a subclass's: :class:`~pykaf._group.classic_member.ClassicMember`
(JoinGroup and SyncGroup, driven by the state machine of
:mod:`pykaf._group.classic`) or
:class:`~pykaf._group.heartbeat_member.HeartbeatMember` (KIP-848's
ConsumerGroupHeartbeat).

``async for record in group`` runs :meth:`ConsumerGroup.consume` with a
built-in handler and marks each record done when the loop asks for the next
one (or, for the last one, when the group's ``async with`` block is left
without an error).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from pykaf import errors
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.client import NEWEST, OLDEST, Client
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._consumer.consumer import Consumer
from pykaf._consumer.partition import PartitionConsumer, lag_of
from pykaf._group.config import GroupConfig
from pykaf._group.offsets import OffsetManager
from pykaf._group.runner import MemberRunner
from pykaf._group.session import Claim, ConsumerGroupHandler, GroupSession, end_claim
from pykaf._util import open_service_nursery
from pykaf.codec import Record
from pykaf.errors import CommitError

log = logging.getLogger("pykaf.group")

TopicPartition = tuple[str, int]

#: Commit refusals after which the member's generation is over.
_GENERATION_OVER = (
    errors.UnknownMemberIdError,
    errors.IllegalGenerationError,
    errors.RebalanceInProgressError,
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


class ConsumerGroup(abc.ABC):
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
        #: The member's requests to its coordinator, and its backoff.
        self._runner = MemberRunner(client, group_id, Backoff.of(config))
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self._consumer = consumer
        self._nursery = nursery
        self.offsets = OffsetManager(client, group_id, config.group_instance_id)
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader = False
        self.rebalances = 0
        self.session: GroupSession | None = None
        self._claims: dict[TopicPartition, Claim] = {}
        self._assignment: dict[str, list[int]] = {}
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

    @abc.abstractmethod
    async def _membership(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """The protocol's part of :meth:`consume`: generations until closed, then leave."""

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
            lag = lag_of(hwm, position)
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

    @abc.abstractmethod
    def _wake_for_close(self) -> None:
        """Wake whatever :meth:`consume` waits on, so that it sees the group closing."""

    @abc.abstractmethod
    def _generation_over(self) -> None:
        """A commit found the member's generation over (or its epoch stale)."""

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

    async def _auto_commit_loop(self) -> None:
        while True:
            await trio.sleep(self.config.auto_commit_interval)
            try:
                await self.commit()
            except CommitError as exc:
                if any(isinstance(e, _GENERATION_OVER) for e in exc.failures.values()):
                    self._generation_over()
                log.info("group %s: auto-commit: %s", self.group_id, exc)
            except errors.PykafError as exc:
                log.info("group %s: auto-commit: %s", self.group_id, exc)


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
