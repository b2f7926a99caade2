"""A consumer-protocol (KIP-848) member's state as a table: which event moves it where.

Pure: no I/O, no clock. :class:`~pykaf._group.consumer_machine.HeartbeatMachine`
(itself without I/O) decides each ConsumerGroupHeartbeat and calls
:func:`transition` for every change of state, as the classic member's machine
does with :mod:`pykaf._group.states`.

The broker assigns; the member only follows. It joins with member epoch 0
(``JOINING``); each heartbeat answer may carry a new assignment, which the
member applies (``RECONCILING``: claims of partitions no longer assigned end
and their marks are committed, then the new partitions start), then reports
on the next heartbeat (``ACKNOWLEDGING``) and is ``STABLE`` once that
heartbeat is answered. A member the coordinator fenced (FENCED_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID, or no answer for ``session_timeout``) drops every claim
without committing (``FENCED``) and joins again with epoch 0. ``consume()``
ends through ``LEAVING`` (a heartbeat with epoch -1, or -2 for a static member).
"""

from __future__ import annotations

import enum

from pykaf._state_table import StateTable
from pykaf.errors import GroupStateError


class HeartbeatState(enum.Enum):
    """Where a consumer-protocol member is."""

    #: Not in the group: before ``consume()`` and after it ended.
    UNSUBSCRIBED = "unsubscribed"
    #: Heartbeats with member epoch 0 until the coordinator answers with an assignment.
    JOINING = "joining"
    #: Applying a new assignment: revoked claims end and commit, new ones start.
    RECONCILING = "reconciling"
    #: The assignment is applied; the next heartbeat reports it.
    ACKNOWLEDGING = "acknowledging"
    #: The member consumes what the coordinator assigned and heartbeats.
    STABLE = "stable"
    #: The coordinator no longer knows this member epoch: claims are dropped uncommitted.
    FENCED = "fenced"
    #: ``consume()`` is ending: the leave heartbeat (epoch -1, or -2 for a static member).
    LEAVING = "leaving"


class HeartbeatEvent(enum.Enum):
    """What happens to a consumer-protocol member: the table's input."""

    #: A heartbeat with member epoch 0 is sent (the first, or again after fencing).
    JOIN = "join"
    #: A heartbeat answer brought an assignment that differs from the one applied.
    ASSIGNED = "assigned"
    #: The assignment is applied (revocations committed, new claims started).
    RECONCILED = "reconciled"
    #: A heartbeat carrying the applied assignment was answered.
    ACKED = "acked"
    #: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, or no answer for session_timeout.
    FENCE = "fence"
    #: ``consume()`` is ending.
    LEAVE = "leave"
    #: The leave heartbeat was sent (or not needed).
    LEFT = "left"


S = HeartbeatState
E = HeartbeatEvent

#: The state a member starts in.
INITIAL = S.UNSUBSCRIBED

_ANY_TIME = {E.FENCE: S.FENCED, E.LEAVE: S.LEAVING}

#: ``{state: {event: next state}}``: every legal move; nothing else is one.
TRANSITIONS: dict[HeartbeatState, dict[HeartbeatEvent, HeartbeatState]] = {
    S.UNSUBSCRIBED: {E.JOIN: S.JOINING, E.LEAVE: S.LEAVING},
    S.JOINING: {E.JOIN: S.JOINING, E.ASSIGNED: S.RECONCILING, **_ANY_TIME},
    S.RECONCILING: {E.ASSIGNED: S.RECONCILING, E.RECONCILED: S.ACKNOWLEDGING, **_ANY_TIME},
    S.ACKNOWLEDGING: {E.ACKED: S.STABLE, E.ASSIGNED: S.RECONCILING, **_ANY_TIME},
    S.STABLE: {E.ASSIGNED: S.RECONCILING, **_ANY_TIME},
    S.FENCED: {E.JOIN: S.JOINING, **_ANY_TIME},
    S.LEAVING: {E.LEFT: S.UNSUBSCRIBED},
}


def _refusal(state: HeartbeatState, event: HeartbeatEvent) -> GroupStateError:
    moves = ", ".join(e.value for e in TRANSITIONS[state]) or "none"
    return GroupStateError(
        f"consumer-protocol member: no move {event.value!r} from {state.value} "
        f"(moves from there: {moves})"
    )


TABLE: StateTable[HeartbeatState, HeartbeatEvent] = StateTable(TRANSITIONS, _refusal)
#: Whether an event is a legal move from a state.
allowed = TABLE.allowed
#: The state after an event; :class:`~pykaf.errors.GroupStateError` for a move not in the table.
transition = TABLE.transition


__all__ = [
    "INITIAL",
    "TABLE",
    "TRANSITIONS",
    "HeartbeatEvent",
    "HeartbeatState",
    "allowed",
    "transition",
]
