"""The consumer-protocol (KIP-848) member's state table, apart from any I/O."""

from __future__ import annotations

import itertools

import pytest

from pykaf import errors
from pykaf._group.heartbeat_states import (
    INITIAL,
    TRANSITIONS,
    HeartbeatEvent,
    HeartbeatState,
    allowed,
    transition,
)

S = HeartbeatState
E = HeartbeatEvent

#: The member's path as heartbeat_member.py walks it, written out again on purpose.
LEGAL = {
    (S.UNSUBSCRIBED, E.JOIN): S.JOINING,
    (S.UNSUBSCRIBED, E.LEAVE): S.LEAVING,  # closed before the first heartbeat
    (S.JOINING, E.JOIN): S.JOINING,  # epoch 0 again: the answer was lost
    (S.JOINING, E.ASSIGNED): S.RECONCILING,
    (S.RECONCILING, E.ASSIGNED): S.RECONCILING,  # a newer assignment while applying one
    (S.RECONCILING, E.RECONCILED): S.ACKNOWLEDGING,
    (S.ACKNOWLEDGING, E.ACKED): S.STABLE,
    (S.ACKNOWLEDGING, E.ASSIGNED): S.RECONCILING,
    (S.STABLE, E.ASSIGNED): S.RECONCILING,
    (S.FENCED, E.JOIN): S.JOINING,
    (S.LEAVING, E.LEFT): S.UNSUBSCRIBED,
}
for _state in (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE, S.FENCED):
    LEGAL[(_state, E.FENCE)] = S.FENCED
    LEGAL[(_state, E.LEAVE)] = S.LEAVING
ILLEGAL = [pair for pair in itertools.product(S, E) if pair not in LEGAL]


def test_the_table_is_exactly_the_legal_moves() -> None:
    assert INITIAL is S.UNSUBSCRIBED
    assert set(TRANSITIONS) == set(S)
    table = {(s, e): to for s, moves in TRANSITIONS.items() for e, to in moves.items()}
    assert table == LEGAL


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=lambda x: x.value)
def test_an_illegal_move_is_refused(state: HeartbeatState, event: HeartbeatEvent) -> None:
    assert not allowed(state, event)
    with pytest.raises(errors.GroupStateError, match=f"no move '{event.value}'"):
        transition(state, event)


def test_no_reconciliation_is_acknowledged_before_it_is_applied() -> None:
    # ACKED only follows RECONCILED: a heartbeat cannot report partitions the
    # member has not finished revoking.
    for state in (S.JOINING, S.RECONCILING, S.STABLE, S.FENCED):
        assert not allowed(state, E.ACKED)
