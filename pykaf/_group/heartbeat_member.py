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
default session timeout, :data:`PRESUMED_SESSION_TIMEOUT`: the broker does not
say its own) mean the coordinator has given this member's partitions
away: its claims end without a commit and it joins again with epoch 0. Leaving
sends epoch -1 (-2 for a static member, whose assignment the coordinator keeps
for the group's session timeout). Claims, marks, commits and the handler
contract are those of every member (:class:`~pykaf._group.group.ConsumerGroup`,
whose claim machinery this class shares with the classic member); commits
carry the member epoch (OffsetCommit v9). Requests go to the coordinator
through :class:`~pykaf._group.runner.MemberRunner`, as the classic member's do.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import Client
from pykaf._consumer.consumer import Consumer
from pykaf._group.config import GroupConfig
from pykaf._group.group import ConsumerGroup, TopicPartition
from pykaf._group.heartbeat_states import INITIAL, HeartbeatEvent, HeartbeatState, transition
from pykaf._group.session import ConsumerGroupHandler, GroupSession

log = logging.getLogger("pykaf.group")

E = HeartbeatEvent

#: The member epoch that joins, and the ones that leave (dynamic, static member).
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
#: Heartbeat answers after which the member must join again with epoch 0.
_FENCED = (errors.FencedMemberEpochError, errors.UnknownMemberIdError)
_COORDINATOR_MOVED = (
    errors.NotCoordinatorError,
    errors.CoordinatorNotAvailableError,
    errors.CoordinatorLoadInProgressError,
)
#: The interval used until the coordinator has said one.
_FIRST_INTERVAL = 0.5
#: Kafka's default ``group.consumer.session.timeout.ms``, in seconds.
PRESUMED_SESSION_TIMEOUT = 45.0


def new_member_id() -> str:
    """A member id as Kafka's clients make them (KIP-1082): a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class _Heartbeat:
    """A ConsumerGroupHeartbeat with ``epoch``, for :class:`~pykaf._group.runner.MemberRunner`."""

    member: HeartbeatMember
    epoch: int
    timeout: float | None = None

    def version(self, conn: Any) -> int:
        """The coordinator's version (remembered: the request's fields depend on it)."""
        version: int = conn.version_for(P.ConsumerGroupHeartbeatRequest.API_KEY)
        self.member._version = version
        if self.member.topic_regex is not None and version < 1:
            raise errors.UnsupportedVersionError(
                "the coordinator speaks ConsumerGroupHeartbeat v0 only: no regular "
                "expression subscriptions (Kafka 4.0 or newer needed)"
            )
        return version

    def build(self, version: int) -> Any:
        """The request."""
        return self.member._request(self.epoch)


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
        #: failed coordinator round trips in a row, and the backoff they earn
        self._retries = Retries(Backoff.of(config))
        self.offsets.commit_cap = None  # OffsetCommit v9+: Kafka's rule for these members
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.generation_id = -1  # the member epoch once in the group (what commits carry)
        self.protocol = config.group_remote_assignor or "consumer"
        self.heartbeat_interval = _FIRST_INTERVAL
        #: How long without a heartbeat answer before the member presumes the
        #: coordinator dropped it. The broker sets the session timeout and does
        #: not tell members: this is its default.
        self.session_timeout = PRESUMED_SESSION_TIMEOUT
        self.heartbeats = 0
        self._version = 1  # ConsumerGroupHeartbeat's, as the coordinator speaks it
        self._hb_state = INITIAL
        # The coordinator's latest assignment by topic id, and what it resolves to.
        self._target: dict[uuid.UUID, list[int]] | None = None
        self._target_seq = 0
        self._applied_seq = 0
        self._wake = trio.Event()  # a new target, a fence, or closing
        self._heartbeat_now = trio.Event()
        self._rejoin_allowed = trio.Event()
        self._rejoin_allowed.set()
        self._fenced = False

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
                await self._end_claims(list(self._claims), commit=not self._fenced)
                if left_normally and self.session is not None:
                    await handler.cleanup(self.session)
                self.session = None
                await self._leave()

    def _wake_for_close(self) -> None:
        self._wake.set()
        self._heartbeat_now.set()
        self._rejoin_allowed.set()

    def _generation_over(self) -> None:
        self._heartbeat_now.set()  # its answer says what became of the member

    async def _retry_later(self, failure: BaseException) -> None:
        # The next request looks the coordinator up again after NOT_COORDINATOR
        # or a lost connection.
        await self._runner.back_off(failure, self._retries.fail())

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
        if self._fenced and offsets and not self._closed:
            names = ", ".join(f"{t}/{p}" for t, p in sorted(offsets))
            raise errors.FencedMemberEpochError(
                f"group {self.group_id!r}: {names} not committed: the member is fenced"
            )
        if self.member_epoch <= 0 or self._fenced:
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
                if self._fenced:
                    await self._drop_everything(handler)
                    continue
                if self._target is not None and self._applied_seq != self._target_seq:
                    await self._reconcile(handler, claims)
            tasks.cancel_scope.cancel()

    def _move(self, event: Any) -> None:  # the consumer protocol's own table
        self._hb_state = transition(self._hb_state, event)

    @property
    def state(self) -> HeartbeatState:
        """Where the member is (``pykaf._group.heartbeat_states``)."""
        return self._hb_state

    # -- heartbeats ---------------------------------------------------------------

    def _request(self, epoch: int) -> Any:
        H = P.ConsumerGroupHeartbeatRequest
        cfg = self.config
        joining = epoch == JOIN_EPOCH
        owned: dict[uuid.UUID, list[int]] = {}
        if not joining and epoch > 0:
            for topic, partition in sorted(self._claims):
                tid = self.client.metadata.topic_id(topic)
                if tid is not None:
                    owned.setdefault(tid, []).append(partition)
        request = H(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=cfg.group_instance_id,
            rack_id=cfg.client_rack,
            rebalance_timeout_ms=int(cfg.rebalance_timeout * 1000),
            server_assignor=cfg.group_remote_assignor,
        )
        if epoch < 0:
            return request
        # Both fields, the unused one empty (Kafka reads "" as no regular
        # expression), as librdkafka sends them: its mock aborts the process on
        # a heartbeat that carries only one. quirk: mock-heartbeat-both-subscriptions
        request.subscribed_topic_names = [] if self.topic_regex is not None else list(self.topics)
        if self._version >= 1:
            request.subscribed_topic_regex = self.topic_regex or ""
        request.topic_partitions = [
            H.TopicPartitions(topic_id=tid, partitions=ps) for tid, ps in owned.items()
        ]
        return request

    async def _send(self, epoch: int) -> Any:
        """Send a heartbeat with ``epoch``, at the coordinator's version."""
        return await self._runner.send(_Heartbeat(self, epoch))

    async def _heartbeats(self) -> None:
        """Heartbeat until closed; fence on a lost membership; raise a fatal error."""
        last_ok = trio.current_time()
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
            epoch = self.member_epoch
            if epoch == JOIN_EPOCH:
                self._move(E.JOIN)
            acking = self._hb_state is HeartbeatState.ACKNOWLEDGING
            seq = self._applied_seq
            failure: BaseException | None = None
            try:
                response = await self._send(epoch)
            except (errors.KafkaConnectionError, errors.RetriableError) as exc:
                failure = exc
            else:
                self.heartbeats += 1
                err = errors.error_for_code(response.error_code)
                if err is None:
                    last_ok = trio.current_time()
                    self._answered(response, acking and seq == self._applied_seq)
                    continue
                if issubclass(err, _FENCED):
                    log.info("group %s: %s; joining again", self.group_id, err.name)
                    self._fence(err.name)
                    last_ok = trio.current_time()
                    continue
                if not (err.retriable or issubclass(err, _COORDINATOR_MOVED)):
                    message = response.error_message or err.description
                    raise err(f"ConsumerGroupHeartbeat {self.group_id!r}: {message}")
                failure = err(err.description)
            # No answer, or a retriable one (the coordinator moving or loading):
            # after session_timeout the coordinator has dropped this member.
            if trio.current_time() - last_ok > self.session_timeout:
                log.warning(
                    "group %s: no heartbeat for session_timeout: %s", self.group_id, failure
                )
                self._fence("no heartbeat answer for session_timeout")
                last_ok = trio.current_time()
                continue
            await self._retry_later(failure)
            self._heartbeat_now.set()

    def _answered(self, response: Any, acked: bool) -> None:
        """A heartbeat answered without error: the epoch, the interval, maybe an assignment."""
        self._retries.reset()
        if self._fenced or self._closed:
            return
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self.generation_id = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval = response.heartbeat_interval_ms / 1000
        if acked:
            self._move(E.ACKED)
        if response.assignment is None:
            return
        target = {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}
        if target == self._target and self._hb_state is not HeartbeatState.JOINING:
            return
        self._target = target
        self._target_seq += 1
        self._move(E.ASSIGNED)
        self._wake.set()

    def _fence(self, why: str) -> None:
        """The coordinator gave this member's partitions away: drop them and join again."""
        if self._closed:
            return
        self._move(E.FENCE)
        self._fenced = True
        self._rejoin_allowed = trio.Event()  # heartbeats wait until the claims are dropped
        self._wake.set()
        log.info("group %s: member %s fenced (%s)", self.group_id, self.member_id, why)

    async def _drop_everything(self, handler: ConsumerGroupHandler) -> None:
        # Another member may own these partitions already: nothing is committed.
        await self._end_claims(list(self._claims), commit=False)
        if self.session is not None:
            await handler.cleanup(self.session)
            self.session = None
        self.member_epoch = JOIN_EPOCH
        self.generation_id = -1
        self._target = None
        self._applied_seq = self._target_seq
        self._fenced = False
        self._rejoin_allowed.set()
        self._heartbeat_now.set()

    # -- reconciliation -------------------------------------------------------------

    async def _reconcile(self, handler: ConsumerGroupHandler, claims: trio.Nursery) -> None:
        """Apply the coordinator's latest assignment: revoke first, then start the new."""
        assert self._target is not None
        seq = self._target_seq
        names = await self._resolve(set(self._target))
        if names is None:
            return  # the metadata did not name every topic id yet: tried again later
        target: set[TopicPartition] = {
            (names[tid], p) for tid, ps in self._target.items() for p in ps
        }
        revoked = [tp for tp in self._claims if tp not in target]
        if revoked:
            log.info("group %s: revoking %s", self.group_id, sorted(revoked))
            # The coordinator fences a member that has not given the partitions up
            # within rebalance_timeout: half of it for consume_claim leaves time
            # for the commit and the acknowledging heartbeat.
            await self._end_claims(revoked, commit=True, wait=self.config.rebalance_timeout / 2)
            if self._fenced or self._closed:
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
        if self._fenced or self._closed:
            return
        self._applied_seq = seq
        if seq != self._target_seq:
            return  # a newer assignment came meanwhile: the loop applies it next
        self._move(E.RECONCILED)
        self._heartbeat_now.set()  # the acknowledgement: the partitions now owned

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
        await self._retries.policy.wait()
        self._wake.set()

    # -- leaving --------------------------------------------------------------------

    async def _leave(self) -> None:
        if self._hb_state is HeartbeatState.UNSUBSCRIBED:
            return
        self._move(E.LEAVE)
        static = self.config.group_instance_id is not None
        epoch = STATIC_LEAVE_EPOCH if static else LEAVE_EPOCH
        if self.member_epoch > 0:
            try:
                with trio.move_on_after(self.config.request_timeout):
                    response = await self._send(epoch)
                    err = errors.error_for_code(response.error_code)
                    if err is not None:
                        log.info("group %s: leaving: %s", self.group_id, err.name)
            except errors.PykafError as exc:
                log.info("group %s: leave heartbeat failed: %s", self.group_id, exc)
        self.member_epoch = JOIN_EPOCH
        self.generation_id = -1
        self._move(E.LEFT)
