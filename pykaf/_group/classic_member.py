"""A member of a classic-protocol consumer group: the I/O around :class:`ClassicMachine`.

``ConsumerGroup.consume(handler)`` runs generation after generation:

1. **Join and sync.** JoinGroup with one protocol per configured assignor
   (its subscription, with the partitions owned so far); the leader runs the
   chosen assignor over every member's subscription and sends the result in
   SyncGroup; every member gets its assignment back.
2. **Claims.** Partitions new to this member are claimed
   (:class:`~pykaf._group.group.ConsumerGroup`) and ``handler.consume_claim``
   runs for each. A **heartbeat** task, the leader's **partition watch** and an
   **auto-commit** task run meanwhile.
3. **The end of a generation** comes from a heartbeat answered
   REBALANCE_IN_PROGRESS, a lost membership, the partitions of a subscribed
   topic changing, or ``aclose``. With an eager protocol every claim ends;
   the group waits for their consume_claim (up to ``rebalance_timeout``, then
   cancels it), commits the marks and calls ``handler.cleanup``. With the
   cooperative protocol (every assignor cooperative, as Java decides) claims
   keep running through the rebalance: only partitions the new assignment
   takes away are ended and committed, and the member rejoins at once so that
   they can be handed on.

What to send and what an answer means is :mod:`pykaf._group.classic`'s
decision; this module performs its actions (requests through
:class:`~pykaf._group.runner.MemberRunner`) and tells it what came of them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import trio

from pykaf import errors
from pykaf._cluster.client import Client
from pykaf._consumer.consumer import Consumer
from pykaf._group import classic as C
from pykaf._group.config import GroupConfig
from pykaf._group.group import ConsumerGroup
from pykaf._group.session import ConsumerGroupHandler, GroupSession
from pykaf._group.states import MemberState

log = logging.getLogger("pykaf.group")


class ClassicMember(ConsumerGroup):
    """A member of a classic-protocol group; see the module's docstring."""

    def __init__(
        self,
        client: Client,
        config: GroupConfig,
        group_id: str,
        topics: Sequence[str],
        consumer: Consumer,
        nursery: trio.Nursery,
    ) -> None:
        super().__init__(client, config, group_id, topics, consumer, nursery)
        self._machine = C.ClassicMachine(
            group_id, self.topics, config.build_assignors(), C.ClassicOptions.of(config)
        )
        self.cooperative = self._machine.cooperative
        self._rejoin = trio.Event()

    @property
    def state(self) -> MemberState:
        """Where the member is (``pykaf._group.states``)."""
        return self._machine.state

    def _handle(self, event: C.Event) -> list[C.Action]:
        """Feed the machine ``event``; the member's public fields follow it."""
        machine = self._machine
        actions = machine.handle(event)
        self.member_id = machine.member_id
        self.generation_id = machine.generation_id
        self.protocol = machine.protocol
        self.leader = machine.leader
        self.rebalances = machine.rebalances
        return actions

    def _wake_for_close(self) -> None:
        self._rejoin.set()

    def _generation_over(self) -> None:
        self._rejoin.set()

    # -- the rounds -------------------------------------------------------------------

    async def _membership(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        try:
            while not self._closed:
                if await self._join_and_sync():
                    await self._run_generation(handler, claims)
        finally:
            with trio.CancelScope(shield=True):
                await self._leave()

    async def _perform(self, action: C.Action) -> C.Event | None:
        """Perform one action of the join round; the event it comes to (None: nothing to say)."""
        if isinstance(action, C.Fail):
            raise action.error
        if isinstance(action, C.Revoke):
            await self._end_claims(list(action.partitions), commit=action.commit)
            return None
        if isinstance(action, C.BackOff):
            log.info("group %s: %s; joining again", self.group_id, action.failure)
            await self._runner.back_off(action.failure, action.failures)
            return C.BackedOff()
        try:
            if isinstance(action, C.FetchPartitionCounts):
                counts = await self._partition_counts(action.topics)
                for topic in sorted(set(action.topics) - set(counts)):
                    log.info("group %s: topic %s does not exist (yet)", self.group_id, topic)
                return C.PartitionCounts(counts)
            if isinstance(action, C.SendJoinGroup):
                return C.JoinAnswered.of(await self._runner.send(action))
            assert isinstance(action, C.SendSyncGroup), action
            return C.SyncAnswered.of(await self._runner.send(action))
        except (errors.KafkaConnectionError, errors.RetriableError) as exc:
            return C.RequestFailed(exc)

    async def _join_and_sync(self) -> bool:
        """Join and sync until this member holds a generation's assignment (False: closed).

        Once the group is closing nothing more is sent: the member leaves from
        where it is (revocations the machine asked for are still performed).
        """
        pending = self._handle(C.JoinRequested())
        while pending:
            action = pending.pop(0)
            if isinstance(action, C.StartGeneration):
                self._assignment = {t: list(ps) for t, ps in action.assignment.items()}
                log.info(
                    "group %s: generation %d as %s (%s, %s): %s",
                    self.group_id,
                    self.generation_id,
                    self.member_id,
                    self.protocol,
                    "leader" if self.leader else "follower",
                    self._assignment,
                )
                return not self._closed
            if self._closed and not isinstance(action, C.Revoke | C.Fail):
                return False
            event = await self._perform(action)
            if event is not None:
                pending.extend(self._handle(event))
        raise AssertionError(f"the classic machine stopped in {self.state}")  # pragma: no cover

    async def _partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Partition counts of those of ``topics`` that exist, from fresh metadata."""
        if topics:
            await self.client.refresh_metadata(*topics)
        counts: dict[str, int] = {}
        for topic in topics:
            # a topic not created yet is left out (the assignor skips it)
            with contextlib.suppress(errors.UnknownTopicOrPartitionError):
                counts[topic] = len(await self.client.partitions(topic))
        return counts

    # -- a generation -------------------------------------------------------------------

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
        async with trio.open_nursery() as tasks:

            async def heartbeat() -> None:
                await self._heartbeat_loop()
                self._rejoin.set()

            self._handle(C.GenerationRunning(trio.current_time()))
            tasks.start_soon(heartbeat)
            if self.leader:
                tasks.start_soon(self._watch_partitions)
            if self.config.auto_commit:
                tasks.start_soon(self._auto_commit_loop)
            await self._rejoin.wait()
            tasks.cancel_scope.cancel()
        for action in self._handle(C.GenerationEnded(self._closed)):
            if isinstance(action, C.Revoke):
                await self._end_claims(list(action.partitions), commit=action.commit)
            else:
                assert isinstance(action, C.Commit), action
                await self._commit_quietly()
        await handler.cleanup(session)

    async def _heartbeat_loop(self) -> None:
        """Heartbeat until the machine says the generation is over."""
        while True:
            await trio.sleep(self.config.heartbeat_interval)
            (send,) = self._handle(C.HeartbeatDue())
            assert isinstance(send, C.SendHeartbeat), send
            event: C.Event
            try:
                response = await self._runner.send(send)
            except errors.PykafError as exc:
                event = C.HeartbeatFailed(exc, trio.current_time())
            else:
                event = C.HeartbeatAnswered(response.error_code, trio.current_time())
            for action in self._handle(event):
                if isinstance(action, C.Fail):
                    raise action.error
                if isinstance(action, C.EndGeneration):
                    why = "the membership is lost" if self._machine.lost else "a rebalance"
                    log.info("group %s: %s", self.group_id, why)
                    return
                assert isinstance(action, C.BackOff), action
                await self._runner.back_off(action.failure, action.failures)

    async def _watch_partitions(self) -> None:
        """The leader's watch: a subscribed topic created or grown means a new assignment."""
        assigned = dict(self._machine.assigned_counts)
        topics = sorted(assigned)
        while topics:
            await trio.sleep(self.config.partition_watch_interval)
            try:
                found = await self._partition_counts(topics)
                counts = {topic: found.get(topic, 0) for topic in topics}
            except errors.PykafError as exc:
                log.info("group %s: metadata for the partition watch: %s", self.group_id, exc)
                continue
            if counts != assigned:
                log.info(
                    "group %s: partitions changed (%s, were %s); rebalancing",
                    self.group_id,
                    counts,
                    assigned,
                )
                self._rejoin.set()
                return

    # -- leaving ------------------------------------------------------------------------

    async def _leave(self) -> None:
        """End every claim (committing), then LeaveGroup unless a static member keeps its place."""
        for action in self._handle(C.LeaveRequested()):
            if isinstance(action, C.Revoke):
                await self._end_claims(list(action.partitions), commit=action.commit)
                continue
            assert isinstance(action, C.SendLeaveGroup), action
            try:
                with trio.move_on_after(self.config.request_timeout):
                    await self._runner.send(action)
            except errors.PykafError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
            self._handle(C.LeaveDone())


__all__ = ["ClassicMember"]
