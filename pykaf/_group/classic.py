"""A classic-protocol group member as a sans-I/O state machine: events in, actions out.

:class:`ClassicMachine` holds everything the member knows of its group (member
id, generation, leader, the chosen assignor, the partitions it claims, the
failures in a row) and decides every step of the protocol; it sends nothing
and reads no clock. :meth:`ClassicMachine.handle` takes an event (JoinGroup
answered with an error code, SyncGroup answered, a heartbeat answered, a
request that got no answer, the partition counts the leader asked for, a
backoff passed, the generation ending, leaving) and returns the actions to
perform, in order: send JoinGroup, SyncGroup, Heartbeat or LeaveGroup (each
action carries the request's fields and builds it for a version), look up
partition counts, revoke claims (with or without a commit), start a
generation, commit, back off, end the generation, or fail with a typed error.

:class:`~pykaf._group.classic_member.ClassicMember` performs the actions
(requests through :class:`~pykaf._group.runner.MemberRunner`) and feeds back
what came of them, as h11's ``Connection`` is driven by the code that owns the
socket. Every state change goes through the table of
:mod:`pykaf._group.states`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf._group.assignors import (
    Assignor,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pykaf._group.machine import (
    COORDINATOR_MOVED,
    BackOff,
    Fail,
    HeartbeatFailed,
    LeaveDone,
    LeaveRequested,
)
from pykaf._group.states import INITIAL, MemberEvent, MemberState, transition
from pykaf.protocol import versions
from pykaf.protocol.consumer_protocol import with_rack

PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]

#: Errors after which the member must rejoin under a new member id.
MEMBER_LOST = (errors.UnknownMemberIdError, errors.IllegalGenerationError)
#: SyncGroup refusals of INVALID_REQUEST in a row that are answered by joining again.
SYNC_REFUSALS_TOLERATED = 2

M = MemberEvent


# -- events -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequested:
    """``consume()`` starts a round (the first, or after a generation ended)."""


@dataclass(frozen=True, slots=True)
class JoinAnswered:
    """JoinGroup answered."""

    error_code: int
    member_id: str = ""
    generation_id: int = -1
    protocol: str | None = None
    leader: str = ""
    #: The members and their subscriptions (the leader's answer only).
    members: Sequence[Any] = ()
    #: KIP-814: the leader of a static group whose assignment the coordinator kept.
    skip_assignment: bool = False

    @classmethod
    def of(cls, response: Any) -> JoinAnswered:
        """The event of a JoinGroup response."""
        return cls(
            response.error_code,
            response.member_id,
            response.generation_id,
            response.protocol_name,
            response.leader,
            list(response.members or ()),
            bool(getattr(response, "skip_assignment", False)),
        )


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """The leader's lookup answered: partition counts of the existing subscribed topics."""

    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class SyncAnswered:
    """SyncGroup answered."""

    error_code: int
    assignment: bytes = b""

    @classmethod
    def of(cls, response: Any) -> SyncAnswered:
        """The event of a SyncGroup response."""
        return cls(response.error_code, response.assignment or b"")


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """JoinGroup, SyncGroup or the leader's lookup got no answer (a retriable failure)."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class BackedOff:
    """The wait of a :class:`BackOff` has passed: the round starts again."""


@dataclass(frozen=True, slots=True)
class GenerationRunning:
    """The generation's claims are set up and heartbeats start, at ``now``."""

    now: float


@dataclass(frozen=True, slots=True)
class HeartbeatDue:
    """The heartbeat interval has passed."""


@dataclass(frozen=True, slots=True)
class HeartbeatAnswered:
    """Heartbeat answered, at ``now``."""

    error_code: int
    now: float


@dataclass(frozen=True, slots=True)
class GenerationEnded:
    """The generation is over (heartbeat, partition watch, commit, close); ``closing``: for good."""

    closing: bool


Event = (
    JoinRequested
    | JoinAnswered
    | PartitionCounts
    | SyncAnswered
    | RequestFailed
    | BackedOff
    | GenerationRunning
    | HeartbeatDue
    | HeartbeatAnswered
    | HeartbeatFailed
    | GenerationEnded
    | LeaveRequested
    | LeaveDone
)


# -- actions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendJoinGroup:
    """Send JoinGroup; answer with :class:`JoinAnswered` or :class:`RequestFailed`."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    #: (assignor name, subscription), in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    #: Seconds to wait for the answer: the coordinator holds it for the rebalance.
    timeout: float

    def version(self, conn: Any) -> int:
        """The version to send on ``conn``."""
        return versions.JOIN_GROUP.pick(conn)

    def build(self, version: int) -> Any:
        """The request, for ``version``."""
        J = P.JoinGroupRequest
        return J(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[J.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in self.protocols],
        )


@dataclass(frozen=True, slots=True)
class FetchPartitionCounts:
    """The leader's lookup of ``topics``' partition counts; answer with :class:`PartitionCounts`."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SendSyncGroup:
    """Send SyncGroup; answer with :class:`SyncAnswered` or :class:`RequestFailed`."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol: str | None
    #: (member id, encoded assignment): the leader's, else empty.
    assignments: tuple[tuple[str, bytes], ...]
    timeout: float

    def version(self, conn: Any) -> int:
        """The version to send on ``conn``."""
        return versions.SYNC_GROUP.pick(conn)

    def build(self, version: int) -> Any:
        """The request, for ``version``."""
        S = P.SyncGroupRequest
        return S(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol,
            assignments=[
                S.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in self.assignments
            ],
        )


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Send Heartbeat; answer with :class:`HeartbeatAnswered` or :class:`HeartbeatFailed`."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    timeout: float | None = None

    def version(self, conn: Any) -> int:
        """The version to send on ``conn``."""
        return versions.HEARTBEAT.pick(conn)

    def build(self, version: int) -> Any:
        """The request, for ``version``."""
        return P.HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
        )


@dataclass(frozen=True, slots=True)
class SendLeaveGroup:
    """Send LeaveGroup; answer with :class:`LeaveDone` whatever comes of it."""

    group_id: str
    member_id: str
    #: No limit here: the member bounds the whole exchange by ``request_timeout``.
    timeout: float | None = None

    def version(self, conn: Any) -> int:
        """The version to send on ``conn``."""
        return versions.LEAVE_GROUP.pick(conn)

    def build(self, version: int) -> Any:
        """The request, for ``version`` (v3 names the member in a list)."""
        L = P.LeaveGroupRequest
        if version >= 3:
            member = L.MemberIdentity(member_id=self.member_id, group_instance_id=None)
            return L(group_id=self.group_id, members=[member])
        return L(group_id=self.group_id, member_id=self.member_id)


@dataclass(frozen=True, slots=True)
class Revoke:
    """End these claims (their consume_claim returns), commit the marks if ``commit``, drop them."""

    partitions: tuple[TopicPartition, ...]
    commit: bool


@dataclass(frozen=True, slots=True)
class StartGeneration:
    """The generation's assignment: claim what is new, set up the handler, heartbeat."""

    assignment: Mapping[str, list[int]]


@dataclass(frozen=True, slots=True)
class Commit:
    """Commit the marks now (a cooperative rebalance keeps its claims)."""


@dataclass(frozen=True, slots=True)
class EndGeneration:
    """The heartbeat says the generation is over: stop it (answer with :class:`GenerationEnded`)."""


Action = (
    SendJoinGroup
    | FetchPartitionCounts
    | SendSyncGroup
    | SendHeartbeat
    | SendLeaveGroup
    | Revoke
    | StartGeneration
    | Commit
    | BackOff
    | EndGeneration
    | Fail
)


@dataclass(frozen=True, slots=True)
class ClassicOptions:
    """What the machine needs of the member's options."""

    session_timeout: float
    rebalance_timeout: float
    request_timeout: float
    group_instance_id: str | None = None
    client_rack: str | None = None
    auto_commit: bool = True

    @classmethod
    def of(cls, config: Any) -> ClassicOptions:
        """The options of a :class:`~pykaf.GroupConfig`."""
        return cls(
            config.session_timeout,
            config.rebalance_timeout,
            config.request_timeout,
            config.group_instance_id,
            config.client_rack,
            config.auto_commit,
        )


class ClassicMachine:
    """One classic-protocol member: :meth:`handle` an event, get the actions to perform.

    Attributes:
        state: where the member is (:class:`~pykaf._group.states.MemberState`).
        member_id, generation_id, protocol, leader: the member of the
            current generation ("" and -1 when it has none).
        assignment: the partitions of the last SyncGroup, by topic (empty
            after a lost membership).
        claimed: the partitions whose claims run (started by
            :class:`StartGeneration`, ended by :class:`Revoke`).
        assigned_counts: the leader's partition counts at the last assignment.
        rebalances: SyncGroup rounds completed.
        failures: failed round trips in a row (the backoff grows with them).
    """

    def __init__(
        self,
        group_id: str,
        topics: Sequence[str],
        assignors: Sequence[Assignor],
        options: ClassicOptions,
    ) -> None:
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.assignors = list(assignors)
        self.options = options
        self.cooperative = all(a.rebalance_protocol == "cooperative" for a in self.assignors)
        self.state: MemberState = INITIAL
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader = False
        self.assignment: dict[str, list[int]] = {}
        self.claimed: set[TopicPartition] = set()
        self.assigned_counts: dict[str, int] = {}
        self.rebalances = 0
        self.failures = 0
        self.sync_refusals = 0
        #: Whether the heartbeat found the membership lost (the generation ends without commits).
        self.lost = False
        self._last_ok = 0.0
        # The JoinGroup answer being synced: generation, and the leader's members.
        self._joined: JoinAnswered | None = None

    # -- the one entry --------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        """Take in ``event``; the actions to perform, in order.

        Raises:
            GroupStateError: the event is not one the member's state takes.
        """
        if isinstance(event, JoinRequested | BackedOff):
            return [self._join()]
        if isinstance(event, JoinAnswered):
            return self._join_answered(event)
        if isinstance(event, PartitionCounts):
            return self._counted(event)
        if isinstance(event, SyncAnswered):
            return self._sync_answered(event)
        if isinstance(event, RequestFailed):
            if self.state not in (MemberState.JOINING, MemberState.SYNCING):
                self._require(MemberState.JOINING, event)
            return [self._back_off(event.error)]
        if isinstance(event, GenerationRunning):
            self._require(MemberState.STABLE, event)
            self._last_ok = event.now
            return []
        if isinstance(event, HeartbeatDue):
            self._require(MemberState.STABLE, event)
            return [self._heartbeat()]
        if isinstance(event, HeartbeatAnswered):
            return self._heartbeat_answered(event)
        if isinstance(event, HeartbeatFailed):
            return self._heartbeat_failed(event.error, event.now)
        if isinstance(event, GenerationEnded):
            return self._generation_ended(event.closing)
        if isinstance(event, LeaveRequested):
            return self._leave()
        return self._left()

    # -- joining --------------------------------------------------------------------

    def _move(self, event: MemberEvent) -> None:
        self.state = transition(self.state, event)

    def _require(self, state: MemberState, event: Event) -> None:
        if self.state is not state:
            raise errors.GroupStateError(
                f"group member: {type(event).__name__} in {self.state.value}, not {state.value}"
            )

    def _subscription(self, assignor: Assignor) -> bytes:
        metadata = assignor.metadata(self.topics, self.assignment, self.generation_id)
        rack = self.options.client_rack
        return metadata if rack is None else with_rack(metadata, rack)

    def _join(self) -> SendJoinGroup:
        self._move(M.JOIN)
        opts = self.options
        return SendJoinGroup(
            self.group_id,
            int(opts.session_timeout * 1000),
            int(opts.rebalance_timeout * 1000),
            self.member_id,
            opts.group_instance_id,
            tuple((a.name, self._subscription(a)) for a in self.assignors),
            opts.rebalance_timeout + opts.request_timeout,
        )

    def _lose(self, event: MemberEvent = M.LOSE) -> None:
        self._move(event)
        self.member_id = ""
        self.generation_id = -1
        self.assignment = {}

    def _back_off(self, failure: BaseException) -> BackOff:
        self.failures += 1
        return BackOff(failure, self.failures)

    def _refused(self, api: str, err: type[errors.KafkaError]) -> Action:
        """A JoinGroup or SyncGroup error: joined again after a backoff if retriable, else fatal.

        A retriable one (the coordinator moved or is loading) also makes the
        next request look the coordinator up again.
        """
        error = err(f"{api} {self.group_id!r}: {err.description}")
        if issubclass(err, errors.RetriableError):
            return self._back_off(error)
        return Fail(error)

    def _join_answered(self, answer: JoinAnswered) -> list[Action]:
        self._require(MemberState.JOINING, answer)
        err = errors.error_for_code(answer.error_code)
        if err is not None:
            if issubclass(err, errors.MemberIdRequiredError):
                self.member_id = answer.member_id  # KIP-394: join again with it
                return [self._join()]
            if issubclass(err, MEMBER_LOST):
                self._lose()
                return [self._join()]
            if issubclass(err, errors.RebalanceInProgressError):
                return [self._back_off(err(err.description))]
            return [self._refused("JoinGroup", err)]
        self.member_id = answer.member_id
        self.leader = answer.leader == self.member_id
        self._move(M.JOINED)
        self._joined = answer
        if not self.leader or answer.skip_assignment:
            return [self._sync(())]
        if not any(a.name == answer.protocol for a in self.assignors):
            return [
                Fail(
                    errors.InconsistentGroupProtocolError(
                        f"the group chose assignor {answer.protocol!r}, "
                        "which this member does not offer"
                    )
                )
            ]
        wanted = sorted({t for s in self._subscriptions(answer).values() for t in s.topics})
        return [FetchPartitionCounts(tuple(wanted))]

    @staticmethod
    def _subscriptions(answer: JoinAnswered) -> dict[str, Any]:
        return {
            m.member_id: decode_subscription(m.member_id, m.group_instance_id, m.metadata)
            for m in answer.members
        }

    def _counted(self, event: PartitionCounts) -> list[Action]:
        """The leader's part: run the chosen assignor over every member's subscription."""
        self._require(MemberState.SYNCING, event)
        answer = self._joined
        assert answer is not None  # set by the JoinGroup answer that asked for the counts
        assignor = next(a for a in self.assignors if a.name == answer.protocol)
        subscriptions = self._subscriptions(answer)
        wanted = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = {t: n for t, n in event.counts.items() if t in wanted}
        result = assignor.assign(subscriptions, counts)
        self.assigned_counts = {t: counts.get(t, 0) for t in wanted}
        return [self._sync(tuple((m, encode_assignment(ps)) for m, ps in result.items()))]

    def _sync(self, assignments: tuple[tuple[str, bytes], ...]) -> SendSyncGroup:
        answer = self._joined
        assert answer is not None
        opts = self.options
        return SendSyncGroup(
            self.group_id,
            answer.generation_id,
            self.member_id,
            opts.group_instance_id,
            answer.protocol,
            assignments,
            opts.rebalance_timeout + opts.request_timeout,
        )

    def _sync_answered(self, answer: SyncAnswered) -> list[Action]:
        self._require(MemberState.SYNCING, answer)
        err = errors.error_for_code(answer.error_code)
        if err is not None:
            if issubclass(err, MEMBER_LOST):
                self._lose()
                return [self._join()]
            if issubclass(err, errors.RebalanceInProgressError):
                return [self._join()]
            if (
                issubclass(err, errors.InvalidRequestError)
                and self.sync_refusals < SYNC_REFUSALS_TOLERATED
            ):
                # quirk: mock-late-sync-refused
                # librdkafka's mock cluster ends a generation as soon as the
                # leader's SyncGroup carries every assignment; a follower whose
                # SyncGroup arrives after that is refused as INVALID_REQUEST.
                # Joining again recovers (as librdkafka does); a refusal that
                # repeats is a real malformed request and is raised.
                self.sync_refusals += 1
                return [self._join()]
            return [self._refused("SyncGroup", err)]
        joined = self._joined
        assert joined is not None
        self._joined = None
        self.sync_refusals = 0
        self.failures = 0
        self.rebalances += 1
        self.generation_id = joined.generation_id
        self.protocol = joined.protocol
        self._move(M.SYNCED)
        decoded = decode_assignment(answer.assignment)
        assignment = {t: sorted(ps) for t, ps in decoded.items() if t in self.topics}
        assigned = {(t, p) for t, ps in assignment.items() for p in ps}
        revoked = tuple(sorted(tp for tp in self.claimed if tp not in assigned))
        self.assignment = assignment
        actions: list[Action] = []
        if revoked:
            actions.append(self._revoke(revoked, commit=True))
            if self.cooperative:
                # Incremental rebalancing: rejoin at once so that the partitions
                # this member gave up can go to their new owners.
                self._move(M.REBALANCE)
                actions.append(self._join())
                return actions
        self.claimed |= assigned
        self.lost = False
        actions.append(StartGeneration({t: list(ps) for t, ps in assignment.items()}))
        return actions

    def _revoke(self, partitions: Sequence[TopicPartition], *, commit: bool) -> Revoke:
        self.claimed.difference_update(partitions)
        return Revoke(tuple(partitions), commit)

    # -- the generation -------------------------------------------------------------

    def _heartbeat(self) -> SendHeartbeat:
        return SendHeartbeat(
            self.group_id, self.generation_id, self.member_id, self.options.group_instance_id
        )

    def _heartbeat_answered(self, answer: HeartbeatAnswered) -> list[Action]:
        self._require(MemberState.STABLE, answer)
        err = errors.error_for_code(answer.error_code)
        if err is None:
            self._last_ok = answer.now
            self.failures = 0
            return []
        if issubclass(err, errors.RebalanceInProgressError):
            return [EndGeneration()]
        if issubclass(err, MEMBER_LOST):
            self.lost = True
            return [EndGeneration()]
        if issubclass(err, COORDINATOR_MOVED):
            return self._heartbeat_failed(err(err.description), answer.now)
        return [Fail(err(f"Heartbeat {self.group_id!r}: {err.description}"))]

    def _heartbeat_failed(self, failure: BaseException, now: float) -> list[Action]:
        self._require(MemberState.STABLE, HeartbeatFailed(failure, now))
        if now - self._last_ok > self.options.session_timeout:
            # The coordinator has dropped this member by now.
            self.lost = True
            return [EndGeneration()]
        return [self._back_off(failure)]

    def _generation_ended(self, closing: bool) -> list[Action]:
        self._move(M.REBALANCE)
        lost = self.lost
        actions: list[Action] = []
        if lost or not self.cooperative or closing:
            if self.claimed:
                actions.append(self._revoke(sorted(self.claimed), commit=not lost))
        elif self.options.auto_commit:
            actions.append(Commit())
        if lost:
            self.lost = False
            self._lose()
        return actions

    # -- leaving --------------------------------------------------------------------

    def _leave(self) -> list[Action]:
        actions: list[Action] = []
        if self.claimed:
            actions.append(self._revoke(sorted(self.claimed), commit=True))
        self._move(M.LEAVE)
        if not self.member_id or self.options.group_instance_id is not None:
            self._move(M.LEFT)  # a static member keeps its place for session_timeout
            return actions
        actions.append(SendLeaveGroup(self.group_id, self.member_id))
        return actions

    def _left(self) -> list[Action]:
        self._lose(M.LEFT)
        return []


__all__ = [
    "COORDINATOR_MOVED",
    "MEMBER_LOST",
    "PROTOCOL_TYPE",
    "Action",
    "BackOff",
    "BackedOff",
    "ClassicMachine",
    "ClassicOptions",
    "Commit",
    "EndGeneration",
    "Event",
    "Fail",
    "FetchPartitionCounts",
    "GenerationEnded",
    "GenerationRunning",
    "HeartbeatAnswered",
    "HeartbeatDue",
    "HeartbeatFailed",
    "JoinAnswered",
    "JoinRequested",
    "LeaveDone",
    "LeaveRequested",
    "PartitionCounts",
    "RequestFailed",
    "Revoke",
    "SendHeartbeat",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
    "StartGeneration",
    "SyncAnswered",
    "TopicPartition",
]
