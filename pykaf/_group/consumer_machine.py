"""A consumer-protocol (KIP-848) member as a sans-I/O state machine: events in, actions out.

:class:`HeartbeatMachine` decides what each ConsumerGroupHeartbeat carries
and what its answer means, without sending anything or reading a clock:
events go in (a heartbeat due with the partitions owned, a heartbeat answered
with an error code or an assignment at a given time, a heartbeat without an
answer, an assignment applied, the claims of a fenced member dropped, a
fence, closing, leaving) and actions come out (send a heartbeat with these
fields, reconcile the new target assignment, drop every claim uncommitted,
heartbeat at once, back off, fail with a typed error).
:class:`~pykaf._group.heartbeat_member.HeartbeatMember` performs them and
feeds back what came of them. Every state change goes through the table of
:mod:`pykaf._group.heartbeat_states`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf._group.heartbeat_states import INITIAL, HeartbeatEvent, HeartbeatState, transition
from pykaf._group.machine import (
    COORDINATOR_MOVED,
    BackOff,
    Fail,
    HeartbeatFailed,
    LeaveDone,
    LeaveRequested,
)

E = HeartbeatEvent
S = HeartbeatState

#: The member epoch that joins, and the ones that leave (dynamic, static member).
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
#: Heartbeat answers after which the member must join again with epoch 0.
FENCED = (errors.FencedMemberEpochError, errors.UnknownMemberIdError)
#: The interval used until the coordinator has said one.
FIRST_INTERVAL = 0.5
#: Kafka's default ``group.consumer.session.timeout.ms``, in seconds.
PRESUMED_SESSION_TIMEOUT = 45.0

#: Partitions by topic id, as heartbeats carry them.
Owned = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


# -- actions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Send a ConsumerGroupHeartbeat with these fields.

    Answer with :class:`HeartbeatAnswered` or :class:`HeartbeatFailed` (a
    leave heartbeat, ``member_epoch`` < 0, with :class:`LeaveDone`).
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    topics: tuple[str, ...]
    topic_regex: str | None
    owned: Owned
    #: Whether the answer acknowledges the applied assignment (the member reported it).
    acknowledges: bool = False
    #: The reconciliation this heartbeat reports (see :attr:`HeartbeatMachine.applied_seq`).
    applied_seq: int = 0
    timeout: float | None = None

    def version(self, conn: Any) -> int:
        """The coordinator's version.

        Raises:
            UnsupportedVersionError: a regular expression subscription and a
                coordinator with v0 only.
        """
        version: int = conn.version_for(P.ConsumerGroupHeartbeatRequest.API_KEY)
        if self.topic_regex is not None and version < 1:
            raise errors.UnsupportedVersionError(
                "the coordinator speaks ConsumerGroupHeartbeat v0 only: no regular "
                "expression subscriptions (Kafka 4.0 or newer needed)"
            )
        return version

    def build(self, version: int) -> Any:
        """The request, for ``version``."""
        H = P.ConsumerGroupHeartbeatRequest
        request = H(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
        )
        if self.member_epoch < 0:
            return request
        # Both fields, the unused one empty (Kafka reads "" as no regular
        # expression), as librdkafka sends them: its mock aborts the process on
        # a heartbeat that carries only one. quirk: mock-heartbeat-both-subscriptions
        request.subscribed_topic_names = [] if self.topic_regex is not None else list(self.topics)
        if version >= 1:
            request.subscribed_topic_regex = self.topic_regex or ""
        request.topic_partitions = [
            H.TopicPartitions(topic_id=tid, partitions=list(ps)) for tid, ps in self.owned
        ]
        return request


@dataclass(frozen=True, slots=True)
class Reconcile:
    """A new target assignment (by topic id): apply it, then answer with :class:`Reconciled`."""

    seq: int
    target: Mapping[uuid.UUID, list[int]]


@dataclass(frozen=True, slots=True)
class DropClaims:
    """The member was fenced: end every claim uncommitted, then answer with :class:`Dropped`."""

    why: str


@dataclass(frozen=True, slots=True)
class HeartbeatNow:
    """Send the next heartbeat without waiting for the interval."""


Action = SendHeartbeat | Reconcile | DropClaims | HeartbeatNow | BackOff | Fail


# -- events -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatDue:
    """The interval passed (or a heartbeat was asked for now), at ``now``; ``owned`` by topic id."""

    owned: Owned = ()
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class HeartbeatAnswered:
    """The answer to ``sent``, at ``now``."""

    sent: SendHeartbeat
    error_code: int
    now: float
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The target assignment by topic id; None when the answer carries none.
    assignment: Mapping[uuid.UUID, list[int]] | None = None

    @classmethod
    def of(cls, sent: SendHeartbeat, response: Any, now: float) -> HeartbeatAnswered:
        """The event of a ConsumerGroupHeartbeat response."""
        assignment = None
        if response.assignment is not None:
            assignment = {
                tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions
            }
        return cls(
            sent,
            response.error_code,
            now,
            response.error_message,
            response.member_id,
            response.member_epoch,
            response.heartbeat_interval_ms,
            assignment,
        )


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The assignment of :class:`Reconcile` ``seq`` is applied (claims ended and started)."""

    seq: int


@dataclass(frozen=True, slots=True)
class Fence:
    """The member is presumed fenced (``why``), e.g. a commit told so."""

    why: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """The fenced member's claims are dropped: it joins again."""


@dataclass(frozen=True, slots=True)
class Closing:
    """The group is closing: answers no longer change the member."""


Event = (
    HeartbeatDue
    | HeartbeatAnswered
    | HeartbeatFailed
    | Reconciled
    | Fence
    | Dropped
    | Closing
    | LeaveRequested
    | LeaveDone
)


@dataclass(frozen=True, slots=True)
class HeartbeatOptions:
    """What the machine needs of the member's options."""

    rebalance_timeout: float
    group_instance_id: str | None = None
    client_rack: str | None = None
    group_remote_assignor: str | None = None

    @classmethod
    def of(cls, config: Any) -> HeartbeatOptions:
        """The options of a :class:`~pykaf.GroupConfig`."""
        return cls(
            config.rebalance_timeout,
            config.group_instance_id,
            config.client_rack,
            config.group_remote_assignor,
        )


class HeartbeatMachine:
    """One consumer-protocol member: :meth:`handle` an event, get the actions to perform.

    Attributes:
        state: where the member is (:class:`~pykaf._group.heartbeat_states.HeartbeatState`).
        member_id: made by the member (KIP-1082), or the one the coordinator gave.
        member_epoch: 0 to join; the coordinator's once in the group.
        heartbeat_interval: seconds between heartbeats, as the coordinator says.
        session_timeout: seconds without an answer after which the member
            presumes itself fenced (the broker's default: it does not say its own).
        target: the coordinator's latest assignment, by topic id.
        target_seq, applied_seq: the number of the latest target, and of the
            one applied last.
        fenced: fenced, and its claims not dropped yet (heartbeats wait).
        heartbeats: heartbeats answered.
        failures: failed heartbeats in a row (the backoff grows with them).
    """

    def __init__(
        self,
        group_id: str,
        member_id: str,
        topics: Sequence[str],
        topic_regex: str | None,
        options: HeartbeatOptions,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.topics = tuple(sorted(set(topics)))
        self.topic_regex = topic_regex
        self.options = options
        self.state: HeartbeatState = INITIAL
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval = FIRST_INTERVAL
        self.session_timeout = PRESUMED_SESSION_TIMEOUT
        self.target: dict[uuid.UUID, list[int]] | None = None
        self.target_seq = 0
        self.applied_seq = 0
        self.fenced = False
        self.closed = False
        self.heartbeats = 0
        self.failures = 0
        self._last_ok: float | None = None

    @property
    def pending(self) -> bool:
        """Whether a target assignment waits to be applied."""
        return self.target is not None and self.applied_seq != self.target_seq

    def handle(self, event: Event) -> list[Action]:
        """Take in ``event``; the actions to perform, in order.

        Raises:
            GroupStateError: the event is not one the member's state takes.
        """
        if isinstance(event, HeartbeatDue):
            return self._due(event.owned, event.now)
        if isinstance(event, HeartbeatAnswered):
            return self._answered(event)
        if isinstance(event, HeartbeatFailed):
            return self._no_answer(event.error, event.now)
        if isinstance(event, Reconciled):
            return self._reconciled(event.seq)
        if isinstance(event, Fence):
            return self._fence(event.why)
        if isinstance(event, Dropped):
            return self._dropped()
        if isinstance(event, Closing):
            self.closed = True
            return []
        if isinstance(event, LeaveRequested):
            return self._leave()
        return self._left()

    def _move(self, event: HeartbeatEvent) -> None:
        self.state = transition(self.state, event)

    def _request(self, epoch: int, owned: Owned, acknowledges: bool = False) -> SendHeartbeat:
        opts = self.options
        return SendHeartbeat(
            self.group_id,
            self.member_id,
            epoch,
            opts.group_instance_id,
            opts.client_rack,
            int(opts.rebalance_timeout * 1000),
            opts.group_remote_assignor,
            self.topics,
            self.topic_regex,
            owned if epoch > 0 else (),
            acknowledges,
            self.applied_seq,
        )

    # -- heartbeats -------------------------------------------------------------------

    def _due(self, owned: Owned, now: float) -> list[Action]:
        if self._last_ok is None:
            self._last_ok = now  # the session starts with the first heartbeat
        if self.closed or self.fenced:
            return []  # a fenced member heartbeats again once its claims are dropped
        if self.member_epoch == JOIN_EPOCH:
            self._move(E.JOIN)
        acking = self.state is S.ACKNOWLEDGING
        return [self._request(self.member_epoch, owned, acking)]

    def _answered(self, answer: HeartbeatAnswered) -> list[Action]:
        self.heartbeats += 1
        err = errors.error_for_code(answer.error_code)
        if err is not None and not issubclass(err, FENCED):
            if not (err.retriable or issubclass(err, COORDINATOR_MOVED)):
                message = answer.error_message or err.description
                return [Fail(err(f"ConsumerGroupHeartbeat {self.group_id!r}: {message}"))]
            return self._no_answer(err(err.description), answer.now)
        self._last_ok = answer.now
        if err is not None:
            return self._fence(err.name)
        self.failures = 0
        if self.fenced or self.closed:
            return []
        if answer.member_id:
            self.member_id = answer.member_id
        self.member_epoch = answer.member_epoch
        if answer.heartbeat_interval_ms > 0:
            self.heartbeat_interval = answer.heartbeat_interval_ms / 1000
        sent = answer.sent
        if sent.acknowledges and sent.applied_seq == self.applied_seq:
            self._move(E.ACKED)
        if answer.assignment is None:
            return []
        target = {tid: sorted(ps) for tid, ps in answer.assignment.items()}
        if target == self.target and self.state is not S.JOINING:
            return []
        self.target = target
        self.target_seq += 1
        self._move(E.ASSIGNED)
        return [Reconcile(self.target_seq, target)]

    def _no_answer(self, failure: BaseException, now: float) -> list[Action]:
        if self._last_ok is not None and now - self._last_ok > self.session_timeout:
            # The coordinator has dropped this member by now.
            self._last_ok = now
            return self._fence("no heartbeat answer for session_timeout")
        self.failures += 1
        return [BackOff(failure, self.failures), HeartbeatNow()]

    def _fence(self, why: str) -> list[Action]:
        if self.closed:
            return []
        self._move(E.FENCE)
        self.fenced = True
        return [DropClaims(why)]

    def _dropped(self) -> list[Action]:
        if not self.fenced:
            raise errors.GroupStateError(
                f"consumer-protocol member: claims dropped in {self.state.value}, not fenced"
            )
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.applied_seq = self.target_seq
        self.fenced = False
        return [HeartbeatNow()]

    # -- reconciliation ---------------------------------------------------------------

    def _reconciled(self, seq: int) -> list[Action]:
        if self.fenced or self.closed:
            return []
        if seq != self.target_seq:
            self.applied_seq = seq
            return []  # a newer target came meanwhile: it is applied next
        self._move(E.RECONCILED)
        self.applied_seq = seq
        return [HeartbeatNow()]  # the acknowledgement: the partitions now owned

    # -- leaving ------------------------------------------------------------------------

    def _leave(self) -> list[Action]:
        self._move(E.LEAVE)
        if self.member_epoch <= 0:
            return self._left()
        static = self.options.group_instance_id is not None
        return [self._request(STATIC_LEAVE_EPOCH if static else LEAVE_EPOCH, ())]

    def _left(self) -> list[Action]:
        self._move(E.LEFT)
        self.member_epoch = JOIN_EPOCH
        self._last_ok = None  # a next consume() starts a new session
        return []


__all__ = [
    "COORDINATOR_MOVED",
    "FENCED",
    "FIRST_INTERVAL",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "PRESUMED_SESSION_TIMEOUT",
    "STATIC_LEAVE_EPOCH",
    "Action",
    "BackOff",
    "Closing",
    "DropClaims",
    "Dropped",
    "Event",
    "Fail",
    "Fence",
    "HeartbeatAnswered",
    "HeartbeatDue",
    "HeartbeatFailed",
    "HeartbeatMachine",
    "HeartbeatNow",
    "HeartbeatOptions",
    "LeaveDone",
    "LeaveRequested",
    "Owned",
    "Reconcile",
    "Reconciled",
    "SendHeartbeat",
]
