"""The consumer-protocol (KIP-848) member's machine without sockets: every event, every move."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from pykaf import errors
from pykaf import protocol as P
from pykaf._group import consumer_machine as K
from pykaf._group.heartbeat_states import TRANSITIONS, HeartbeatEvent, HeartbeatState, transition

S = HeartbeatState
E = HeartbeatEvent
GROUP = "g"
TID, OTHER = uuid.UUID(int=1), uuid.UUID(int=2)
OPTIONS = K.HeartbeatOptions(rebalance_timeout=30.0)


def machine(options: K.HeartbeatOptions = OPTIONS, regex: str | None = None) -> K.HeartbeatMachine:
    return K.HeartbeatMachine(GROUP, "member-1", [] if regex else ["t"], regex, options)


def state_of(m: K.HeartbeatMachine) -> S:
    """The machine's state (read anew: an event may have moved it)."""
    return m.state


def due(m: K.HeartbeatMachine, now: float = 0.0, owned: K.Owned = ()) -> K.SendHeartbeat:
    (send,) = m.handle(K.HeartbeatDue(owned, now))
    assert isinstance(send, K.SendHeartbeat)
    return send


def answer(
    sent: K.SendHeartbeat,
    now: float = 0.0,
    epoch: int = 1,
    assignment: dict[uuid.UUID, list[int]] | None = None,
    code: int = 0,
) -> K.HeartbeatAnswered:
    return K.HeartbeatAnswered(sent, code, now, None, "", epoch, 2000, assignment)


def stable(m: K.HeartbeatMachine, partitions: list[int] | None = None) -> None:
    """Join, reconcile the first assignment and have it acknowledged."""
    target = {TID: [0, 1] if partitions is None else partitions}
    actions = m.handle(answer(due(m), epoch=1, assignment=target))
    assert actions == [K.Reconcile(1, target)]
    assert m.handle(K.Reconciled(1)) == [K.HeartbeatNow()]
    assert m.state is S.ACKNOWLEDGING
    owned = ((TID, tuple(target[TID])),)
    ack = due(m, 1.0, owned)
    assert ack.acknowledges and ack.owned == owned
    assert m.handle(answer(ack, 1.0, epoch=1, assignment=target)) == []
    assert state_of(m) is S.STABLE


# -- scenarios -------------------------------------------------------------------------


def joining_and_the_first_assignment() -> None:
    m = machine(
        replace(OPTIONS, group_instance_id="i-1", client_rack="r", group_remote_assignor="uniform")
    )
    send = due(m, owned=((TID, (9,)),))
    assert m.state is S.JOINING
    assert (send.member_id, send.member_epoch, send.owned) == (
        "member-1",
        0,
        (),
    )  # joining owns nothing
    assert (send.instance_id, send.rack_id, send.server_assignor) == ("i-1", "r", "uniform")
    assert send.rebalance_timeout_ms == 30_000
    request = send.build(1)
    assert isinstance(request, P.ConsumerGroupHeartbeatRequest)
    assert request.subscribed_topic_names == ["t"] and request.subscribed_topic_regex == ""
    # no assignment yet: the member heartbeats again with epoch 0
    m.handle(answer(send, epoch=0))
    assert due(m).member_epoch == 0 and m.state is S.JOINING
    stable(m)
    assert m.member_epoch == 1 and m.heartbeat_interval == 2.0 and m.heartbeats == 3


def a_regular_expression_subscription() -> None:
    m = machine(regex="orders-.*")
    send = due(m)
    request = send.build(1)
    assert request.subscribed_topic_names == [] and request.subscribed_topic_regex == "orders-.*"

    class V0:
        def version_for(self, api_key: int) -> int:
            return 0

    with pytest.raises(errors.UnsupportedVersionError, match=r"Kafka 4\.0"):
        send.version(V0())


def a_new_assignment_while_reconciling_and_acknowledging() -> None:
    m = machine()
    first = {TID: [0]}
    m.handle(answer(due(m), assignment=first))
    assert m.state is S.RECONCILING
    second = {TID: [0, 1]}
    assert m.handle(answer(due(m), epoch=2, assignment=second)) == [K.Reconcile(2, second)]
    assert m.handle(K.Reconciled(1)) == []  # an older one applied: the newer is next
    assert m.state is S.RECONCILING and m.pending
    m.handle(K.Reconciled(2))
    assert state_of(m) is S.ACKNOWLEDGING and not m.pending
    third = {TID: [1]}
    assert m.handle(answer(due(m), epoch=3, assignment=third)) == [K.Reconcile(3, third)]
    assert m.state is S.RECONCILING
    m.handle(K.Reconciled(3))
    stale = due(m)  # acknowledges reconciliation 3 ...
    m.handle(answer(due(m), epoch=4, assignment={OTHER: [0]}))  # ... but 4 came first
    m.handle(K.Reconciled(4))
    m.handle(answer(stale, epoch=4))
    assert m.state is S.ACKNOWLEDGING  # an answer to an older report acknowledges nothing
    # a heartbeat sent while reconciling, answered with a new target once reconciled
    other = machine()
    other.handle(answer(due(other), assignment={TID: [0]}))
    sent_while_reconciling = due(other)
    other.handle(K.Reconciled(1))
    assert other.state is S.ACKNOWLEDGING
    moved = {TID: [1]}
    assert other.handle(answer(sent_while_reconciling, epoch=2, assignment=moved)) == [
        K.Reconcile(2, moved)
    ]
    assert state_of(other) is S.RECONCILING


def the_same_assignment_again() -> None:
    m = machine()
    stable(m)
    assert m.handle(answer(due(m), epoch=1, assignment={TID: [1, 0]})) == []
    changed = {TID: [0]}
    assert m.handle(answer(due(m), epoch=2, assignment=changed)) == [K.Reconcile(2, changed)]
    assert m.state is S.RECONCILING


def fenced_by_the_coordinator() -> None:
    for error in K.FENCED:
        m = machine()
        stable(m)
        actions = m.handle(answer(due(m, 5.0), 5.0, code=error.code))
        assert actions == [K.DropClaims(error.name)]
        assert m.state is S.FENCED and m.fenced
        assert m.handle(K.HeartbeatDue((), 6.0)) == []  # heartbeats wait for the drop
        assert m.handle(K.Dropped()) == [K.HeartbeatNow()]
        assert (m.member_epoch, m.target, m.pending) == (0, None, False)
        assert due(m, 7.0).member_epoch == 0 and state_of(m) is S.JOINING


def fenced_in_every_state() -> None:
    for walk in (
        lambda m: due(m),
        lambda m: m.handle(answer(due(m), assignment={TID: [0]})),
        lambda m: (m.handle(answer(due(m), assignment={TID: [0]})), m.handle(K.Reconciled(1))),
    ):
        m = machine()
        walk(m)
        before = m.state
        assert m.handle(K.Fence("a test")) == [K.DropClaims("a test")]
        assert m.state is S.FENCED, before
    m = machine()
    stable(m)
    m.handle(K.Fence("once"))
    assert m.handle(K.Fence("twice")) == [K.DropClaims("twice")]  # FENCED -> FENCED
    with pytest.raises(errors.GroupStateError, match="not fenced"):
        machine().handle(K.Dropped())


def no_answer_for_the_session_timeout() -> None:
    m = machine()
    stable(m)
    m.session_timeout = 10.0
    lost = errors.KafkaConnectionError("gone")
    assert m.handle(K.HeartbeatFailed(lost, 5.0)) == [K.BackOff(lost, 1), K.HeartbeatNow()]
    moved = m.handle(answer(due(m), 8.0, code=errors.NotCoordinatorError.code))
    assert isinstance(moved[0], K.BackOff) and moved[0].failures == 2
    assert moved[1:] == [K.HeartbeatNow()]
    # the last answer came at 1.0: 11.5 is past the session timeout
    assert m.handle(K.HeartbeatFailed(lost, 11.5)) == [
        K.DropClaims("no heartbeat answer for session_timeout")
    ]
    assert m.state is S.FENCED
    fresh = machine()
    due(fresh, 100.0)  # the session starts with the first heartbeat
    fresh.session_timeout = 10.0
    assert isinstance(fresh.handle(K.HeartbeatFailed(lost, 105.0))[0], K.BackOff)


def a_fatal_answer() -> None:
    m = machine()
    send = due(m)
    event = K.HeartbeatAnswered(
        send, errors.UnsupportedAssignorError.code, 0.0, "no such assignor", None
    )
    (fail,) = m.handle(event)
    assert isinstance(fail, K.Fail) and isinstance(fail.error, errors.UnsupportedAssignorError)
    assert "no such assignor" in str(fail.error)


def leaving() -> None:
    for instance, epoch in ((None, K.LEAVE_EPOCH), ("i-1", K.STATIC_LEAVE_EPOCH)):
        m = machine(replace(OPTIONS, group_instance_id=instance))
        stable(m)
        (send,) = m.handle(K.LeaveRequested())
        assert isinstance(send, K.SendHeartbeat)
        assert send.member_epoch == epoch and send.owned == ()
        request = send.build(1)
        assert request.member_epoch == epoch and request.topic_partitions is None
        assert m.state is S.LEAVING
        assert m.handle(K.LeaveDone()) == []
        assert (m.state, m.member_epoch) == (S.UNSUBSCRIBED, 0)


def leaving_from_every_state() -> None:
    never = machine()
    assert never.handle(K.LeaveRequested()) == []  # not in the group: nothing to send
    assert never.state is S.UNSUBSCRIBED
    joining = machine()
    due(joining)
    assert joining.handle(K.LeaveRequested()) == []  # epoch 0: nothing to leave
    for steps in (1, 2, 3):
        m = machine()
        m.handle(answer(due(m), epoch=1, assignment={TID: [0]}))  # RECONCILING
        if steps >= 2:
            m.handle(K.Reconciled(1))  # ACKNOWLEDGING
        if steps >= 3:
            m.handle(K.Fence("x"))  # FENCED, still with its epoch
        assert len(m.handle(K.LeaveRequested())) == 1 and m.state is S.LEAVING


def closing_stops_the_changes() -> None:
    m = machine()
    stable(m)
    m.handle(K.Closing())
    assert m.handle(K.HeartbeatDue((), 2.0)) == []
    assert m.handle(answer(due_anyway(m), 2.0, epoch=5, assignment={TID: [3]})) == []
    assert m.member_epoch == 1 and m.state is S.STABLE
    assert m.handle(K.Fence("late")) == []
    assert m.handle(K.Reconciled(1)) == []


def due_anyway(m: K.HeartbeatMachine) -> K.SendHeartbeat:
    """The heartbeat a member sent just before closing."""
    return K.SendHeartbeat(
        GROUP, m.member_id, m.member_epoch, None, None, 30_000, None, ("t",), None, ()
    )


def events_out_of_place() -> None:
    m = machine()
    with pytest.raises(errors.GroupStateError):
        m.handle(K.LeaveDone())
    assert m.state is S.UNSUBSCRIBED
    stable(m)
    with pytest.raises(errors.GroupStateError, match="no move 'reconciled' from stable"):
        m.handle(K.Reconciled(m.target_seq))


SCENARIOS: list[Callable[[], None]] = [
    joining_and_the_first_assignment,
    a_regular_expression_subscription,
    a_new_assignment_while_reconciling_and_acknowledging,
    the_same_assignment_again,
    fenced_by_the_coordinator,
    fenced_in_every_state,
    no_answer_for_the_session_timeout,
    a_fatal_answer,
    leaving,
    leaving_from_every_state,
    closing_stops_the_changes,
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

    monkeypatch.setattr(K, "transition", recording)
    yield moves


def test_the_scenarios_walk_every_move_of_the_table(recorded_moves: set[tuple[S, E]]) -> None:
    """Every move of ``heartbeat_states.TRANSITIONS`` (docs/design.md's table) is the machine's."""
    for scenario in SCENARIOS:
        scenario()
    table = {(s, e) for s, moves in TRANSITIONS.items() for e in moves}
    assert recorded_moves == table, sorted(table - recorded_moves, key=str)
