"""The classic member's state machine without sockets: every event, every action, every move."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pytest

from pykaf import errors
from pykaf import protocol as P
from pykaf._group import classic as C
from pykaf._group.assignors import (
    assignor_for,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pykaf._group.states import TRANSITIONS, MemberEvent, MemberState, transition

S = MemberState
E = MemberEvent
GROUP = "g"
TOPIC = "t"
OPTIONS = C.ClassicOptions(session_timeout=10.0, rebalance_timeout=30.0, request_timeout=5.0)


@dataclass
class _Member:
    """A JoinGroup answer's member, as the codec gives it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


def code(error: type[errors.KafkaError]) -> int:
    return error.code


def machine(
    assignor: str = "range", options: C.ClassicOptions = OPTIONS, topics: tuple[str, ...] = (TOPIC,)
) -> C.ClassicMachine:
    return C.ClassicMachine(GROUP, topics, [assignor_for(assignor)], options)


def state_of(m: C.ClassicMachine) -> S:
    """The machine's state (read anew: an event may have moved it)."""
    return m.state


def only(actions: list[C.Action]) -> C.Action:
    assert len(actions) == 1, actions
    return actions[0]


def join(m: C.ClassicMachine) -> C.SendJoinGroup:
    send = only(m.handle(C.JoinRequested()))
    assert isinstance(send, C.SendJoinGroup)
    return send


def joined_as_leader(m: C.ClassicMachine, generation: int = 1) -> C.SendSyncGroup:
    """Join as the only member and leader; the SyncGroup the machine sends."""
    send = join(m)
    member = _Member("m1", None, send.protocols[0][1])
    ask = only(m.handle(C.JoinAnswered(0, "m1", generation, send.protocols[0][0], "m1", [member])))
    assert ask == C.FetchPartitionCounts((TOPIC,))
    sync = only(m.handle(C.PartitionCounts({TOPIC: 2, "unsubscribed": 5})))
    assert isinstance(sync, C.SendSyncGroup)
    return sync


def synced(m: C.ClassicMachine, partitions: list[int], generation: int = 1) -> list[C.Action]:
    """A follower's round: joined, then SyncGroup answered with ``partitions``."""
    join(m)
    sync = only(m.handle(C.JoinAnswered(0, "m1", generation, "range", "leader-id")))
    assert isinstance(sync, C.SendSyncGroup)
    assert sync.assignments == ()
    return m.handle(C.SyncAnswered(0, encode_assignment({TOPIC: partitions})))


def stable(m: C.ClassicMachine, partitions: list[int] | None = None, now: float = 0.0) -> None:
    actions = synced(m, [0, 1] if partitions is None else partitions)
    assert isinstance(actions[-1], C.StartGeneration)
    m.handle(C.GenerationRunning(now))
    assert m.state is S.STABLE


# -- scenarios: each walks the machine and checks what it asks for -----------------------


def leader_round() -> None:
    m = machine()
    sync = joined_as_leader(m, generation=7)
    assert (sync.generation_id, sync.member_id, sync.protocol) == (7, "m1", "range")
    ((member, data),) = sync.assignments
    assert member == "m1" and decode_assignment(data) == {TOPIC: [0, 1]}
    assert m.assigned_counts == {TOPIC: 2}
    assert m.leader and m.state is S.SYNCING
    assert m.generation_id == -1  # not a generation's member before SyncGroup answers
    actions = m.handle(C.SyncAnswered(0, data))
    assert actions == [C.StartGeneration({TOPIC: [0, 1]})]
    assert (m.state, m.generation_id, m.protocol, m.rebalances) == (S.STABLE, 7, "range", 1)
    assert m.claimed == {(TOPIC, 0), (TOPIC, 1)}


def follower_round() -> None:
    m = machine()
    actions = synced(m, [1])
    assert actions == [C.StartGeneration({TOPIC: [1]})]
    assert not m.leader and m.state is S.STABLE and m.member_id == "m1"


def the_join_request() -> None:
    opts = replace(OPTIONS, group_instance_id="static-1", client_rack="rack-a")
    m = machine("cooperative-sticky", opts)
    send = join(m)
    assert send.group_id == GROUP
    assert (send.session_timeout_ms, send.rebalance_timeout_ms) == (10_000, 30_000)
    assert (send.member_id, send.group_instance_id) == ("", "static-1")
    assert send.timeout == 35.0  # the coordinator holds the answer for the rebalance
    ((name, metadata),) = send.protocols
    sub = decode_subscription("x", None, metadata)
    assert (name, sub.topics, sub.rack_id) == ("cooperative-sticky", [TOPIC], "rack-a")
    request = send.build(5)
    assert isinstance(request, P.JoinGroupRequest)
    assert request.protocol_type == "consumer" and request.member_id == ""
    assert [p.name for p in request.protocols] == ["cooperative-sticky"]


def member_id_required() -> None:
    m = machine()
    join(m)
    again = only(m.handle(C.JoinAnswered(code(errors.MemberIdRequiredError), "given-id")))
    assert isinstance(again, C.SendJoinGroup) and again.member_id == "given-id"
    assert state_of(m) is S.JOINING


def join_with_a_lost_member_id() -> None:
    for error in (errors.UnknownMemberIdError, errors.IllegalGenerationError):
        m = machine()
        stable(m)
        m.handle(C.HeartbeatAnswered(code(errors.RebalanceInProgressError), 1.0))
        m.handle(C.GenerationEnded(closing=False))
        join(m)
        again = only(m.handle(C.JoinAnswered(code(error))))
        assert isinstance(again, C.SendJoinGroup) and again.member_id == ""
        assert m.state is S.JOINING and m.generation_id == -1 and m.assignment == {}


def join_while_a_rebalance_is_in_progress() -> None:
    m = machine()
    join(m)
    wait = only(m.handle(C.JoinAnswered(code(errors.RebalanceInProgressError))))
    assert isinstance(wait, C.BackOff) and wait.failures == 1
    assert isinstance(wait.failure, errors.RebalanceInProgressError)
    assert isinstance(only(m.handle(C.BackedOff())), C.SendJoinGroup)
    wait = only(m.handle(C.JoinAnswered(code(errors.RebalanceInProgressError))))
    assert isinstance(wait, C.BackOff) and wait.failures == 2  # the backoff grows
    m.handle(C.BackedOff())
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    m.handle(C.SyncAnswered(0, encode_assignment({TOPIC: [0]})))
    assert m.failures == 0  # a round that succeeded starts the backoff over


def join_refused() -> None:
    m = machine()
    join(m)
    fail = only(m.handle(C.JoinAnswered(code(errors.GroupAuthorizationError))))
    assert isinstance(fail, C.Fail)
    assert isinstance(fail.error, errors.GroupAuthorizationError)
    assert "JoinGroup 'g'" in str(fail.error)


def the_coordinator_moved_or_is_loading() -> None:
    m = machine()
    join(m)
    wait = only(m.handle(C.JoinAnswered(code(errors.NotCoordinatorError))))
    assert isinstance(wait, C.BackOff) and wait.failures == 1
    assert isinstance(wait.failure, errors.NotCoordinatorError)  # looked up again after the wait
    m.handle(C.BackedOff())
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    wait = only(m.handle(C.SyncAnswered(code(errors.CoordinatorLoadInProgressError))))
    assert isinstance(wait, C.BackOff) and wait.failures == 2
    again = only(m.handle(C.BackedOff()))
    assert isinstance(again, C.SendJoinGroup) and again.member_id == "m1"


def requests_without_an_answer() -> None:
    m = machine()
    join(m)
    lost = errors.KafkaConnectionError("gone")
    assert m.handle(C.RequestFailed(lost)) == [C.BackOff(lost, 1)]
    assert isinstance(only(m.handle(C.BackedOff())), C.SendJoinGroup)
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    assert m.state is S.SYNCING
    assert m.handle(C.RequestFailed(lost)) == [C.BackOff(lost, 2)]
    again = only(m.handle(C.BackedOff()))  # a SyncGroup lost: join again
    assert isinstance(again, C.SendJoinGroup) and again.member_id == "m1"
    assert state_of(m) is S.JOINING


def sync_answers() -> None:
    m = machine()
    join(m)
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    again = only(m.handle(C.SyncAnswered(code(errors.RebalanceInProgressError))))
    assert isinstance(again, C.SendJoinGroup) and again.member_id == "m1"
    m.handle(C.JoinAnswered(0, "m1", 2, "range", "other"))
    again = only(m.handle(C.SyncAnswered(code(errors.UnknownMemberIdError))))
    assert isinstance(again, C.SendJoinGroup) and again.member_id == ""
    # quirk: mock-late-sync-refused: two refusals in a row are joined again, a third raised
    for _ in range(C.SYNC_REFUSALS_TOLERATED):
        m.handle(C.JoinAnswered(0, "m2", 3, "range", "other"))
        assert isinstance(
            only(m.handle(C.SyncAnswered(code(errors.InvalidRequestError)))), C.SendJoinGroup
        )
    m.handle(C.JoinAnswered(0, "m2", 3, "range", "other"))
    fail = only(m.handle(C.SyncAnswered(code(errors.InvalidRequestError))))
    assert isinstance(fail, C.Fail) and isinstance(fail.error, errors.InvalidRequestError)
    other = machine()
    synced_fail = synced_error(other, errors.GroupAuthorizationError)
    assert isinstance(synced_fail.error, errors.GroupAuthorizationError)


def synced_error(m: C.ClassicMachine, error: type[errors.KafkaError]) -> C.Fail:
    join(m)
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    fail = only(m.handle(C.SyncAnswered(code(error))))
    assert isinstance(fail, C.Fail)
    return fail


def the_leader_lacks_the_chosen_assignor() -> None:
    m = machine()
    join(m)
    fail = only(m.handle(C.JoinAnswered(0, "m1", 1, "roundrobin", "m1", [])))
    assert isinstance(fail, C.Fail)
    assert isinstance(fail.error, errors.InconsistentGroupProtocolError)


def a_static_leader_skips_the_assignment() -> None:
    m = machine()
    join(m)
    sync = only(m.handle(C.JoinAnswered(0, "m1", 1, "range", "m1", [], skip_assignment=True)))
    assert isinstance(sync, C.SendSyncGroup) and sync.assignments == ()


def heartbeats() -> None:
    m = machine()
    stable(m, now=100.0)
    send = only(m.handle(C.HeartbeatDue()))
    assert send == C.SendHeartbeat(GROUP, 1, "m1", None)
    assert isinstance(send.build(3), P.HeartbeatRequest)
    assert m.handle(C.HeartbeatAnswered(0, 101.0)) == []
    moved = only(m.handle(C.HeartbeatAnswered(code(errors.NotCoordinatorError), 105.0)))
    assert isinstance(moved, C.BackOff) and isinstance(moved.failure, errors.NotCoordinatorError)
    lost = errors.KafkaConnectionError("gone")
    assert m.handle(C.HeartbeatFailed(lost, 110.0)) == [C.BackOff(lost, 2)]
    assert not m.lost
    # no answer for longer than session_timeout since the last (at 101): the member is gone
    assert m.handle(C.HeartbeatFailed(lost, 111.5)) == [C.EndGeneration()]
    assert m.lost
    fatal = machine()
    stable(fatal)
    fail = only(fatal.handle(C.HeartbeatAnswered(code(errors.FencedInstanceIdError), 1.0)))
    assert isinstance(fail, C.Fail) and isinstance(fail.error, errors.FencedInstanceIdError)
    late = machine()
    stable(late)
    ended = late.handle(C.HeartbeatAnswered(code(errors.CoordinatorLoadInProgressError), 20.0))
    assert ended == [C.EndGeneration()] and late.lost


def an_eager_rebalance() -> None:
    m = machine()
    stable(m)
    assert m.handle(C.HeartbeatAnswered(code(errors.RebalanceInProgressError), 1.0)) == [
        C.EndGeneration()
    ]
    assert m.handle(C.GenerationEnded(closing=False)) == [
        C.Revoke(((TOPIC, 0), (TOPIC, 1)), commit=True)
    ]
    assert m.state is S.REBALANCING and m.claimed == set() and m.member_id == "m1"
    send = join(m)  # the next generation, with the partitions owned in the subscription
    assert send.member_id == "m1"
    assert state_of(m) is S.JOINING


def a_lost_membership() -> None:
    m = machine()
    stable(m)
    m.handle(C.HeartbeatAnswered(code(errors.UnknownMemberIdError), 1.0))
    assert m.handle(C.GenerationEnded(closing=False)) == [
        C.Revoke(((TOPIC, 0), (TOPIC, 1)), commit=False)  # they may be another's already
    ]
    assert (m.state, m.member_id, m.generation_id, m.assignment) == (S.UNJOINED, "", -1, {})
    assert not m.lost
    assert join(m).member_id == ""


def a_cooperative_member() -> None:
    m = machine("cooperative-sticky")
    stable(m, [0, 1, 2])
    # a rebalance keeps the claims, committing the marks
    m.handle(C.HeartbeatAnswered(code(errors.RebalanceInProgressError), 1.0))
    assert m.handle(C.GenerationEnded(closing=False)) == [C.Commit()]
    assert m.claimed == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}
    send = join(m)
    owned = decode_subscription("x", None, send.protocols[0][1]).owned_partitions
    assert owned == {TOPIC: [0, 1, 2]}
    m.handle(C.JoinAnswered(0, "m1", 2, "cooperative-sticky", "other"))
    # partitions taken away: revoke them and rejoin at once so they can move
    actions = m.handle(C.SyncAnswered(0, encode_assignment({TOPIC: [0]})))
    assert actions[0] == C.Revoke(((TOPIC, 1), (TOPIC, 2)), commit=True)
    assert isinstance(actions[1], C.SendJoinGroup) and len(actions) == 2
    assert m.state is S.JOINING and m.claimed == {(TOPIC, 0)} and m.generation_id == 2
    m.handle(C.JoinAnswered(0, "m1", 3, "cooperative-sticky", "other"))
    actions = m.handle(C.SyncAnswered(0, encode_assignment({TOPIC: [0, 3]})))
    assert actions == [C.StartGeneration({TOPIC: [0, 3]})]
    assert m.claimed == {(TOPIC, 0), (TOPIC, 3)}
    m.handle(C.GenerationRunning(2.0))
    # closing ends every claim
    assert m.handle(C.GenerationEnded(closing=True)) == [
        C.Revoke(((TOPIC, 0), (TOPIC, 3)), commit=True)
    ]
    without_auto_commit = machine("cooperative-sticky", replace(OPTIONS, auto_commit=False))
    stable(without_auto_commit)
    assert without_auto_commit.handle(C.GenerationEnded(closing=False)) == []


def an_assignment_of_other_topics_is_ignored() -> None:
    m = machine()
    join(m)
    m.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    actions = m.handle(C.SyncAnswered(0, encode_assignment({TOPIC: [1, 0], "elsewhere": [0]})))
    assert actions == [C.StartGeneration({TOPIC: [0, 1]})]


def leaving() -> None:
    m = machine()
    stable(m)
    actions = m.handle(C.LeaveRequested())
    assert actions == [
        C.Revoke(((TOPIC, 0), (TOPIC, 1)), commit=True),
        C.SendLeaveGroup(GROUP, "m1"),
    ]
    assert m.state is S.LEAVING
    v2, v3 = actions[1].build(2), actions[1].build(3)  # type: ignore[union-attr]
    assert v2.member_id == "m1"
    assert [x.member_id for x in v3.members] == ["m1"]
    assert m.handle(C.LeaveDone()) == []
    assert (m.state, m.member_id, m.generation_id) == (S.UNJOINED, "", -1)


def leaving_from_every_state() -> None:
    never = machine()
    assert never.handle(C.LeaveRequested()) == []  # no member id: nothing to send
    assert never.state is S.UNJOINED
    joining = machine()
    join(joining)
    joining.handle(C.JoinAnswered(code(errors.MemberIdRequiredError), "m9"))
    assert joining.handle(C.LeaveRequested()) == [C.SendLeaveGroup(GROUP, "m9")]
    syncing = machine()
    join(syncing)
    syncing.handle(C.JoinAnswered(0, "m1", 1, "range", "other"))
    assert syncing.handle(C.LeaveRequested()) == [C.SendLeaveGroup(GROUP, "m1")]
    rebalancing = machine()
    stable(rebalancing)
    rebalancing.handle(C.GenerationEnded(closing=True))
    assert rebalancing.handle(C.LeaveRequested()) == [C.SendLeaveGroup(GROUP, "m1")]
    assert rebalancing.state is S.LEAVING


def a_static_member_keeps_its_place() -> None:
    m = machine(options=replace(OPTIONS, group_instance_id="static-1"))
    stable(m)
    assert m.handle(C.LeaveRequested()) == [C.Revoke(((TOPIC, 0), (TOPIC, 1)), commit=True)]
    assert m.state is S.UNJOINED and m.member_id == "m1"


def events_out_of_place() -> None:
    m = machine()
    for event in (
        C.HeartbeatDue(),
        C.HeartbeatAnswered(0, 1.0),
        C.HeartbeatFailed(errors.KafkaConnectionError("x"), 1.0),
        C.GenerationRunning(1.0),
        C.JoinAnswered(0, "m1", 1, "range", "m1"),
        C.SyncAnswered(0),
        C.PartitionCounts({}),
        C.RequestFailed(errors.KafkaConnectionError("x")),
        C.GenerationEnded(closing=False),
        C.LeaveDone(),
    ):
        with pytest.raises(errors.GroupStateError):
            m.handle(event)
        assert m.state is S.UNJOINED  # nothing changed
    stable(m)
    with pytest.raises(errors.GroupStateError, match="no move 'join' from stable"):
        m.handle(C.JoinRequested())  # a generation ends before the next join
    with pytest.raises(errors.GroupStateError):
        m.handle(C.SyncAnswered(0))


SCENARIOS: list[Callable[[], None]] = [
    leader_round,
    follower_round,
    the_join_request,
    member_id_required,
    join_with_a_lost_member_id,
    join_while_a_rebalance_is_in_progress,
    join_refused,
    the_coordinator_moved_or_is_loading,
    requests_without_an_answer,
    sync_answers,
    the_leader_lacks_the_chosen_assignor,
    a_static_leader_skips_the_assignment,
    heartbeats,
    an_eager_rebalance,
    a_lost_membership,
    a_cooperative_member,
    an_assignment_of_other_topics_is_ignored,
    leaving,
    leaving_from_every_state,
    a_static_member_keeps_its_place,
    events_out_of_place,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_scenario(scenario: Callable[[], None]) -> None:
    scenario()


@pytest.fixture
def recorded_moves(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[tuple[S, E]]]:
    moves: set[tuple[S, E]] = set()

    def recording(state: S, event: E) -> S:
        after = transition(state, event)
        moves.add((state, event))  # a move made, not one refused
        return after

    monkeypatch.setattr(C, "transition", recording)
    yield moves


def test_the_scenarios_walk_every_move_of_the_table(recorded_moves: set[tuple[S, E]]) -> None:
    """Every move of ``states.TRANSITIONS`` (the table docs/design.md shows) is the machine's."""
    for scenario in SCENARIOS:
        scenario()
    table = {(s, e) for s, moves in TRANSITIONS.items() for e in moves}
    assert recorded_moves == table, sorted(table - recorded_moves, key=str)
