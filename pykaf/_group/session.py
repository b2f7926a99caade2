"""What a consumer group hands its handler: the session of a generation and its claims.

sarama's contract, on trio: for each generation the group calls
``handler.setup(session)``, then ``handler.consume_claim(session, claim)`` in a
task of its own for every partition the member was given, and, once the
generation ends and those tasks have returned, ``handler.cleanup(session)``.
A claim's records end (``async for`` stops, ``next_batch`` returns ``[]``)
when its partition is revoked or the group closes; consume_claim should then
return promptly: the group waits up to ``rebalance_timeout`` and then cancels
it.

This module does not know the group: a session is handed the functions its
marks, resets and commits go to.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import trio

from pykaf import errors
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf.codec import ColumnBatch, Record

if TYPE_CHECKING:
    from pykaf._consumer.partition import PartitionConsumer

#: ``mark(topic, partition, offset, metadata)``: a forward-only mark of a claimed
#: partition (a record without a topic is ignored).
MarkFunction = Callable[[str | None, int, int, str | None], None]
#: ``reset(topic, partition, offset, metadata)``: the offset to commit, even a lower one.
ResetFunction = Callable[[str, int, int, str | None], None]


class Claim:
    """One partition given to this member, from its first offset on.

    ``async for record in claim`` yields its records; ``await
    claim.next_batch()`` returns them a fetch at a time (``[]`` once the claim
    has ended).

    Attributes:
        topic, partition: the partition.
        initial_offset: where consumption started (committed offset, or the reset).
    """

    def __init__(self, topic: str, partition: int, initial_offset: int, pc: PartitionConsumer):
        self.topic = topic
        self.partition = partition
        self.initial_offset = initial_offset
        self._pc = pc
        self._revoked = False
        self.done = trio.Event()  # set when consume_claim returned
        self.cancel_scope = trio.CancelScope()
        #: Cancel consume_claim as soon as the claim ends instead of waiting for it.
        self.cancel_on_end = False
        #: Called (with no argument) as the claim ends, before its records stop:
        #: a reader outside trio (``pykaf.aio``) drops the records it took
        #: (:meth:`take_decoded`) and has not handed out, as the claim drops its own.
        self.on_end: Callable[[], object] | None = None

    @property
    def high_water_mark(self) -> int:
        """The partition's high watermark at the last fetch (-1 before one)."""
        return self._pc.high_water_mark

    @property
    def position(self) -> int:
        """The offset of the next record the claim hands out."""
        return self._pc.position

    def epoch_before(self, offset: int) -> int:
        """The leader epoch of the record before ``offset`` if it was fetched, else -1.

        What a commit of ``offset`` carries (KIP-320).
        """
        pc = self._pc
        return pc.epoch_at(offset - 1) if 0 < offset <= pc.fetch_offset else -1

    @property
    def revoked(self) -> bool:
        """Whether the claim has ended (partition revoked, membership lost, group closing)."""
        return self._revoked

    def __aiter__(self) -> Claim:
        return self

    async def __anext__(self) -> Record:
        if self._revoked:
            raise StopAsyncIteration
        try:
            return await self._pc.__anext__()
        except errors.ClosedError:
            raise StopAsyncIteration from None

    def next_nowait(self) -> Record | None:
        """The next record if one is decoded and waiting, else None (no wait; None once revoked)."""
        if self._revoked:
            return None
        return self._pc.next_nowait()

    async def decoded(self) -> bool:
        """Wait until decoded records wait (``PartitionConsumer.decoded``); False once ended."""
        return not self._revoked and await self._pc.decoded() and not self._revoked

    async def fetched(self) -> bool:
        """Wait until records wait, decoded or not (``PartitionConsumer.fetched``); False: ended.

        For a reader outside trio (``pykaf.aio``), which decodes them as it
        reads with :meth:`take_decoded`.
        """
        if self._revoked:
            return False
        try:
            waiting = await self._pc.fetched()
        except errors.ClosedError:
            return False
        return waiting and not self._revoked

    def take_decoded(self) -> list[Record]:
        """Every fetched record not handed out yet, decoded and handed out now; ``[]`` if none.

        ``[]`` once the claim ended. See ``PartitionConsumer.take_decoded``.
        """
        return [] if self._revoked else self._pc.take_decoded()

    def take_nowait(self, limit: int) -> list[Record]:
        """Up to ``limit`` decoded records, handed out now (``[]``: none waits, or revoked)."""
        return [] if self._revoked else self._pc.take_nowait(limit)

    @overload
    async def next_batch(self, *, columnar: Literal[False] = False) -> list[Record]: ...
    @overload
    async def next_batch(self, *, columnar: Literal[True]) -> ColumnBatch: ...
    @overload
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    async def next_batch(self, *, columnar: bool = False) -> list[Record] | ColumnBatch:
        """The next records as the partition consumer decoded them; empty when the claim ended.

        With ``columnar=True`` they come as a :class:`~pykaf.ColumnBatch`
        (``PartitionConsumer.next_batch``); mark it with
        ``session.mark_batch(batch)``. Once the claim ended: ``[]``, or an
        empty ColumnBatch.
        """
        if not self._revoked:
            try:
                return await self._pc.next_batch(columnar=columnar)
            except errors.ClosedError:
                pass
        if columnar:
            return ColumnBatch.from_records(
                [], topic=self.topic, partition=self.partition, next_offset=self._pc.position
            )
        return []

    def errors(self) -> trio.MemoryReceiveChannel[Any]:
        """The partition consumer's errors (``pykaf.ConsumerError``)."""
        return self._pc.errors()

    def seek(self, offset: int) -> None:
        """Continue the claim from ``offset``; records fetched but not handed out are dropped.

        For reprocessing after an aborted transaction: seek back to the first
        offset the transaction consumed. Marks are not touched (a mark only
        moves forward; use ``session.reset_offset`` to commit a lower one).

        Raises:
            ValueError: ``offset`` is not an offset (``OLDEST`` and ``NEWEST`` are).
        """
        self._pc.seek(offset)

    async def _end(self) -> None:
        self._revoked = True
        if self.on_end is not None:
            self.on_end()
        self._pc.discard_buffer()
        await self._pc.aclose()
        if self.cancel_on_end:
            self.cancel_scope.cancel()

    def __repr__(self) -> str:
        return f"<Claim {self.topic}/{self.partition} from {self.initial_offset}>"


async def end_claim(claim: Claim) -> None:
    """End ``claim`` at a generation's end (the group's side; handlers never call it).

    Its records stop, the partition consumer closes, and with
    ``cancel_on_end`` its ``consume_claim`` is cancelled.
    """
    await claim._end()


class GroupSession:
    """One generation of the group, as this member sees it.

    Attributes:
        group_id: the group.
        member_id: this member's id in the generation.
        generation_id: the generation; in a consumer-protocol (KIP-848) group, the
            member's current member epoch.
        claims: topic -> partitions assigned to this member in the generation.

    The group makes one per generation and passes what its methods act on:
    ``mark`` and ``reset`` (the group's marks) and ``commit``.
    """

    def __init__(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        claims: dict[str, list[int]],
        *,
        group_instance_id: str | None,
        mark: MarkFunction,
        reset: ResetFunction,
        commit: Callable[[], Awaitable[None]],
        live_epoch: Callable[[], int] | None = None,
    ) -> None:
        self.group_id = group_id
        self._generation_id = generation_id
        # A consumer-protocol (KIP-848) member's epoch moves without a new
        # session; its sessions read the member's current one.
        self._live_epoch = live_epoch
        self.member_id = member_id
        self.claims = claims
        self._group_instance_id = group_instance_id
        self._mark = mark
        self._reset = reset
        self._commit = commit

    @property
    def generation_id(self) -> int:
        """The generation (a consumer-protocol member's current member epoch)."""
        if self._live_epoch is not None:
            return self._live_epoch()
        return self._generation_id

    def mark_message(self, record: Record, metadata: str | None = None) -> None:
        """Mark ``record`` consumed: the group commits the offset after it.

        Marks only move forward. They count until the claim is dropped (after
        its consume_claim returned and the group committed); a mark for a
        partition this member no longer owns is ignored.
        """
        self._mark(record.topic, record.partition, record.offset + 1, metadata)

    def mark_batch(self, batch: ColumnBatch, metadata: str | None = None) -> None:
        """Mark every record of a columnar batch consumed: commits its ``next_offset``.

        An empty batch (the claim ended) marks nothing.
        """
        if len(batch) and batch.topic is not None and batch.next_offset >= 0:
            self._mark(batch.topic, batch.partition, batch.next_offset, metadata)

    def mark_offset(
        self, topic: str, partition: int, offset: int, metadata: str | None = None
    ) -> None:
        """Mark ``offset`` as the next offset to consume of a partition (forward only)."""
        self._mark(topic, partition, offset, metadata)

    def reset_offset(
        self, topic: str, partition: int, offset: int, metadata: str | None = None
    ) -> None:
        """Set the offset to commit for a partition even if it is lower than the marked one."""
        self._reset(topic, partition, offset, metadata)

    def group_metadata(self) -> GroupMetadata:
        """The member and generation, for ``producer.send_offsets_to_transaction``."""
        return GroupMetadata(
            self.group_id,
            self.generation_id,
            self.member_id,
            self._group_instance_id,
        )

    async def commit(self) -> None:
        """Commit the marked offsets now (also done on an interval and on every revoke).

        Raises:
            CommitError: the coordinator refused some partitions.
        """
        await self._commit()

    def __repr__(self) -> str:
        return (
            f"<GroupSession {self.group_id} generation={self.generation_id} "
            f"member={self.member_id!r} claims={self.claims}>"
        )


class ConsumerGroupHandler(Protocol):
    """What ``ConsumerGroup.consume`` runs (sarama's ConsumerGroupHandler)."""

    async def setup(self, session: GroupSession) -> None:
        """A generation starts, before any consume_claim of it."""

    async def consume_claim(self, session: GroupSession, claim: Claim) -> None:
        """Consume one claim; return once its records end."""

    async def cleanup(self, session: GroupSession) -> None:
        """A generation ended, after its revoked claims' consume_claim returned."""
