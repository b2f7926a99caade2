"""A member of a consumer-protocol group (KIP-848): the broker assigns, the member follows.

``open_consumer_group(..., group_protocol="consumer")`` gives a
:class:`HeartbeatMember`. It sends ConsumerGroupHeartbeat at the interval the
coordinator returns, with its member id (made here, kept for its life), its
member epoch (0 to join), its subscription (topic names, or a regular
expression the broker evaluates), rebalance timeout, assignor, rack and the
partitions it owns. Every heartbeat carries that whole state, never only what
changed: after an error or a lost answer the coordinator may not have seen the
previous heartbeat, and KIP-848 asks for the full state then. (A heartbeat
whose epoch-bumping answer was lost is sent again with the previous epoch and
the partitions still owned, which the coordinator accepts.) An answer may
carry a new assignment, by topic id; the member resolves the ids to names from
metadata and **reconciles** it incrementally:

1. claims of partitions no longer assigned end (their consume_claim returns,
   or is cancelled after ``rebalance_timeout``) and their marks are committed;
2. the session of the old assignment is cleaned up and one for the new one is
   set up (as the classic group does per generation);
3. claims of newly assigned partitions start;
4. a heartbeat reports the partitions now owned: only then may the
   coordinator hand the revoked ones to other members.

FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID (or no answer for the broker's
default session timeout,
:data:`~pykaf._group.consumer_machine.PRESUMED_SESSION_TIMEOUT`: the broker does not
say its own) mean the coordinator has given this member's partitions
away: its claims end without a commit and it joins again with epoch 0. Leaving
sends epoch -1 (-2 for a static member, whose assignment the coordinator keeps
for the group's session timeout). Claims, marks, commits and the handler
contract are those of every member (:class:`~pykaf._group.group.ConsumerGroup`,
whose claim machinery this class shares with the classic member); commits
carry the member epoch (OffsetCommit v9).

What each heartbeat carries and what its answer means (the epoch, the
interval, a new target, fencing, the session timeout, backoff, leaving) is
:mod:`pykaf._group.consumer_machine`'s decision, made without I/O; this class
performs its actions (heartbeats through
:class:`~pykaf._group.runner.MemberRunner`, as the classic member's requests go)
and applies the assignments.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Mapping, Sequence

import trio

from pykaf import errors
from pykaf._cluster.client import Client
from pykaf._consumer.consumer import Consumer
from pykaf._group import consumer_machine as K
from pykaf._group.config import GroupConfig
from pykaf._group.group import ConsumerGroup, TopicPartition
from pykaf._group.heartbeat_states import HeartbeatState
from pykaf._group.session import ConsumerGroupHandler, GroupSession

log = logging.getLogger("pykaf.group")


def new_member_id() -> str:
    """A member id as Kafka's clients make them (KIP-1082): a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class HeartbeatMember(ConsumerGroup):
    """A member of a consumer-protocol (KIP-848) group; see the module's docstring.

    ``topics`` is a list of topic names or a compiled regular expression
    (``re.compile("orders-.*")``), whose ``pattern`` the broker evaluates with
    RE2/J syntax over the cluster's topics.
    """

    def __init__(
        self,
        client: Client,
        config: GroupConfig,
        group_id: str,
        topics: Sequence[str] | re.Pattern[str],
        consumer: Consumer,
        nursery: trio.Nursery,
    ) -> None:
        self.topic_regex: str | None = None
        if isinstance(topics, re.Pattern):
            self.topic_regex = topics.pattern
            topics = []
        super().__init__(client, config, group_id, topics, consumer, nursery)
        self.offsets.commit_cap = None  # OffsetCommit v9+: Kafka's rule for these members
        self._machine = K.HeartbeatMachine(
            group_id,
            new_member_id(),
            self.topics,
            self.topic_regex,
            K.HeartbeatOptions.of(config),
        )
        self.member_id = self._machine.member_id
        self.generation_id = -1  # the member epoch once in the group (what commits carry)
        self.protocol = config.group_remote_assignor or "consumer"
        self._wake = trio.Event()  # a new target, a fence, or closing
        self._heartbeat_now = trio.Event()
        self._rejoin_allowed = trio.Event()
        self._rejoin_allowed.set()

    # -- the machine's fields --------------------------------------------------------

    @property
    def state(self) -> HeartbeatState:
        """Where the member is (``pykaf._group.heartbeat_states``)."""
        return self._machine.state

    @property
    def member_epoch(self) -> int:
        """The member epoch: 0 to join, the coordinator's once in the group."""
        return self._machine.member_epoch

    @member_epoch.setter
    def member_epoch(self, epoch: int) -> None:
        self._machine.member_epoch = epoch

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between heartbeats, as the coordinator says."""
        return self._machine.heartbeat_interval

    @property
    def session_timeout(self) -> float:
        """How long without a heartbeat answer before the member presumes itself fenced.

        The broker sets the session timeout and does not tell members: by
        default this is its default,
        :data:`~pykaf._group.consumer_machine.PRESUMED_SESSION_TIMEOUT`.
        """
        return self._machine.session_timeout

    @session_timeout.setter
    def session_timeout(self, seconds: float) -> None:
        self._machine.session_timeout = seconds

    @property
    def heartbeats(self) -> int:
        """Heartbeats answered."""
        return self._machine.heartbeats

    def _handle(self, event: K.Event) -> list[K.Action]:
        """Feed the machine ``event``; the member's public fields follow it."""
        machine = self._machine
        actions = machine.handle(event)
        self.member_id = machine.member_id
        epoch = machine.member_epoch
        self.generation_id = epoch if epoch > 0 and not machine.fenced else self.generation_id
        return actions

    def _perform(self, actions: list[K.Action]) -> None:
        """Perform the actions that only wake a task (the others are their callers')."""
        for action in actions:
            if isinstance(action, K.HeartbeatNow):
                self._heartbeat_now.set()
            elif isinstance(action, K.Reconcile):
                self._wake.set()
            else:
                assert isinstance(action, K.DropClaims), action
                self._on_fenced(action.why)

    # -- consume, close, commit ------------------------------------------------------

    async def _membership(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """Heartbeat and reconcile the coordinator's assignments until closed, then leave.

        What :meth:`consume` runs: it raises UnreleasedInstanceIdError,
        UnsupportedAssignorError, InvalidRegularExpressionError,
        GroupAuthorizationFailedError and the like as the coordinator answers them.
        """
        left_normally = False
        try:
            await self._run(handler, claims)
            left_normally = True
        finally:
            with trio.CancelScope(shield=True):
                await self._end_claims(list(self._claims), commit=not self._machine.fenced)
                if left_normally and self.session is not None:
                    await handler.cleanup(self.session)
                self.session = None
                await self._leave()

    def _wake_for_close(self) -> None:
        self._handle(K.Closing())
        self._wake.set()
        self._heartbeat_now.set()
        self._rejoin_allowed.set()

    def _generation_over(self) -> None:
        self._heartbeat_now.set()  # its answer says what became of the member

    async def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit the marked offsets now, with the member epoch.

        With ``offsets`` (the next offset to consume by ``(topic, partition)``),
        commit exactly those and nothing else: the marks stay as they are.

        Without a member epoch (joining, or fenced and about to join again)
        the marks wait for the next commit, but ``offsets`` cannot: that raises.

        Raises:
            CommitError: the coordinator refused some partitions (they stay marked);
                STALE_MEMBER_EPOCH among them when the epoch moved meanwhile.
            RebalanceInProgressError: ``offsets`` given while the member has no
                epoch (joining); nothing was committed.
            FencedMemberEpochError: ``offsets`` given while the member is fenced.
            ClosedError: ``offsets`` given after the group closed.
        """
        fenced = self._machine.fenced
        if fenced and offsets and not self._closed:
            names = ", ".join(f"{t}/{p}" for t, p in sorted(offsets))
            raise errors.FencedMemberEpochError(
                f"group {self.group_id!r}: {names} not committed: the member is fenced"
            )
        if self.member_epoch <= 0 or fenced:
            if offsets:
                raise self._not_committed(offsets, "it has no member epoch (joining)")
            return
        await self.offsets.commit(self.member_epoch, self.member_id, offsets)

    # -- the loop -----------------------------------------------------------------

    async def _run(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        async with trio.open_nursery() as tasks:
            tasks.start_soon(self._heartbeats)
            if self.config.auto_commit:
                tasks.start_soon(self._auto_commit_loop)
            while not self._closed:
                await self._wake.wait()
                self._wake = trio.Event()
                if self._closed:
                    break
                if self._machine.fenced:
                    await self._drop_everything(handler)
                    continue
                if self._machine.pending:
                    await self._reconcile(handler, claims)
            tasks.cancel_scope.cancel()

    # -- heartbeats ---------------------------------------------------------------

    def _owned(self) -> K.Owned:
        """The claimed partitions by topic id (those whose id the metadata knows)."""
        owned: dict[uuid.UUID, list[int]] = {}
        for topic, partition in sorted(self._claims):
            tid = self.client.metadata.topic_id(topic)
            if tid is not None:
                owned.setdefault(tid, []).append(partition)
        return tuple((tid, tuple(ps)) for tid, ps in owned.items())

    async def _heartbeats(self) -> None:
        """Heartbeat until closed; fence on a lost membership; raise a fatal error."""
        first = True
        while not self._closed:
            if not first:
                with trio.move_on_after(self.heartbeat_interval):
                    await self._heartbeat_now.wait()
            first = False
            self._heartbeat_now = trio.Event()
            await self._rejoin_allowed.wait()
            if self._closed:
                return
            due = self._handle(K.HeartbeatDue(self._owned(), trio.current_time()))
            if not due:
                continue
            (send,) = due
            assert isinstance(send, K.SendHeartbeat), send
            event: K.Event
            try:
                response = await self._runner.send(send)
            except (errors.KafkaConnectionError, errors.RetriableError) as exc:
                event = K.HeartbeatFailed(exc, trio.current_time())
            else:
                event = K.HeartbeatAnswered.of(send, response, trio.current_time())
            for action in self._handle(event):
                if isinstance(action, K.Fail):
                    raise action.error
                if isinstance(action, K.BackOff):
                    log.info("group %s: heartbeat: %s", self.group_id, action.failure)
                    await self._runner.back_off(action.failure, action.failures)
                else:
                    self._perform([action])

    def _fence(self, why: str) -> None:
        """Presume the member fenced (``why``): drop its claims and join again."""
        self._perform(self._handle(K.Fence(why)))

    def _on_fenced(self, why: str) -> None:
        """The coordinator gave this member's partitions away: drop them and join again."""
        self._rejoin_allowed = trio.Event()  # heartbeats wait until the claims are dropped
        self._wake.set()
        log.info("group %s: member %s fenced (%s)", self.group_id, self.member_id, why)

    async def _drop_everything(self, handler: ConsumerGroupHandler) -> None:
        # Another member may own these partitions already: nothing is committed.
        await self._end_claims(list(self._claims), commit=False)
        if self.session is not None:
            await handler.cleanup(self.session)
            self.session = None
        self.generation_id = -1
        self._perform(self._handle(K.Dropped()))
        self._rejoin_allowed.set()

    # -- reconciliation -------------------------------------------------------------

    async def _reconcile(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """Apply the coordinator's latest assignment: revoke first, then start the new."""
        machine = self._machine
        assert machine.target is not None
        seq, wanted = machine.target_seq, machine.target
        names = await self._resolve(set(wanted))
        if names is None:
            return  # the metadata did not name every topic id yet: tried again later
        target: set[TopicPartition] = {(names[tid], p) for tid, ps in wanted.items() for p in ps}
        revoked = [tp for tp in self._claims if tp not in target]
        if revoked:
            log.info("group %s: revoking %s", self.group_id, sorted(revoked))
            # The coordinator fences a member that has not given the partitions up
            # within rebalance_timeout: half of it for consume_claim leaves time
            # for the commit and the acknowledging heartbeat.
            await self._end_claims(revoked, commit=True, wait=self.config.rebalance_timeout / 2)
            if machine.fenced or self._closed:
                return
        added = sorted(tp for tp in target if tp not in self._claims)
        self.rebalances += 1
        if self.session is not None and (revoked or added):
            await handler.cleanup(self.session)
        if self.session is None or revoked or added:
            assignment: dict[str, list[int]] = {}
            for topic, partition in sorted(target):
                assignment.setdefault(topic, []).append(partition)
            self._assignment = assignment
            session = GroupSession(
                self.group_id,
                self.member_epoch,
                self.member_id,
                {t: list(ps) for t, ps in assignment.items()},
                group_instance_id=self.config.group_instance_id,
                mark=self._mark,
                reset=self._reset,
                commit=self.commit,
                live_epoch=lambda: self.member_epoch,
            )
            self.session = session
            new = await self._open_claims()
            await handler.setup(session)
            for claim in new:
                claims.start_soon(self._claim_task, handler, session, claim)
        if machine.fenced or self._closed:
            return
        self._perform(self._handle(K.Reconciled(seq)))

    async def _resolve(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str] | None:
        """Topic names of the assigned topic ids from metadata (refreshed when one is unknown)."""
        names = self.client.metadata.names_of(ids)
        if len(names) < len(ids):
            try:
                if self.topic_regex is None and self.topics:
                    await self.client.refresh_metadata(*self.topics)
                names = self.client.metadata.names_of(ids)
                if len(names) < len(ids):
                    await self.client.refresh_metadata()
                    names = self.client.metadata.names_of(ids)
            except errors.PykafError as exc:
                log.info("group %s: metadata for the assignment: %s", self.group_id, exc)
        if len(names) < len(ids):
            log.info(
                "group %s: topic ids %s not in the metadata yet; trying again",
                self.group_id,
                sorted(str(i) for i in ids - set(names)),
            )
            self._nursery.start_soon(self._wake_later)
            return None
        return names

    async def _wake_later(self) -> None:
        await self._runner.policy.wait()
        self._wake.set()

    # -- leaving --------------------------------------------------------------------

    async def _leave(self) -> None:
        for action in self._handle(K.LeaveRequested()):
            assert isinstance(action, K.SendHeartbeat), action
            try:
                with trio.move_on_after(self.config.request_timeout):
                    response = await self._runner.send(action)
                    err = errors.error_for_code(response.error_code)
                    if err is not None:
                        log.info("group %s: leaving: %s", self.group_id, err.name)
            except errors.PykafError as exc:
                log.info("group %s: leave heartbeat failed: %s", self.group_id, exc)
            self._handle(K.LeaveDone())
        self.generation_id = -1
