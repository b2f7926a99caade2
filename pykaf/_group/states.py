"""A group member's state as a table: which event moves it where.

Pure: no I/O, no group, no clock. :class:`~pykaf._group.classic.ClassicMachine`
(itself without I/O) decides JoinGroup, SyncGroup, Heartbeat and LeaveGroup and
calls :func:`transition` for every change of state, as h11's ``_state.py`` and
sarama's ``transitionTo`` do. A move the table does not hold raises
:class:`~pykaf.errors.GroupStateError` before anything changes
(:class:`pykaf._state_table.StateTable`).

One round of the classic protocol: JoinGroup (``JOINING``), SyncGroup
(``SYNCING``), the generation (``STABLE``), its end (``REBALANCING``: claims
end, marks are committed) and back to JoinGroup. A member that the coordinator
no longer knows (unknown member id, illegal generation, no heartbeat for
``session_timeout``) drops its member id (``LOSE``, back to ``UNJOINED``) and
joins as a new one. ``consume()`` ends through ``LEAVING`` (LeaveGroup, unless
a static member keeps its place).
"""

from __future__ import annotations

import enum

from pykaf._state_table import StateTable
from pykaf.errors import GroupStateError


class MemberState(enum.Enum):
    """Where a group member is in the protocol's rounds."""

    #: Not taking part: before ``consume()``, after it ended, or after the
    #: membership was lost (then without a member id).
    UNJOINED = "unjoined"
    #: JoinGroup under way (again after a retriable error or a rebalance in progress).
    JOINING = "joining"
    #: Joined a generation; SyncGroup under way for the assignment.
    SYNCING = "syncing"
    #: A member of the generation with its assignment: claims, heartbeats, commits.
    STABLE = "stable"
    #: The generation is ending: claims end, marks are committed; rejoin next.
    REBALANCING = "rebalancing"
    #: ``consume()`` is ending: LeaveGroup (not for a static member).
    LEAVING = "leaving"


class MemberEvent(enum.Enum):
    """What happens to a group member: the table's input."""

    #: JoinGroup is sent.
    JOIN = "join"
    #: JoinGroup answered: a member id and a generation to sync.
    JOINED = "joined"
    #: SyncGroup answered: the generation's assignment.
    SYNCED = "synced"
    #: The generation ends: a rebalance, partitions changed, a cooperative
    #: revocation, the membership lost, or the group closing.
    REBALANCE = "rebalance"
    #: The coordinator does not know the member (unknown member id, illegal
    #: generation, fenced by the session timeout): the member id is dropped.
    LOSE = "lose"
    #: ``consume()`` is ending.
    LEAVE = "leave"
    #: LeaveGroup sent (or not needed).
    LEFT = "left"


S = MemberState
E = MemberEvent

#: The state a member starts in.
INITIAL = S.UNJOINED

#: ``{state: {event: next state}}``: every legal move; nothing else is one.
TRANSITIONS: dict[MemberState, dict[MemberEvent, MemberState]] = {
    S.UNJOINED: {E.JOIN: S.JOINING, E.LEAVE: S.LEAVING},
    S.JOINING: {
        E.JOIN: S.JOINING,
        E.JOINED: S.SYNCING,
        E.LOSE: S.UNJOINED,
        E.LEAVE: S.LEAVING,
    },
    S.SYNCING: {
        E.JOIN: S.JOINING,
        E.SYNCED: S.STABLE,
        E.LOSE: S.UNJOINED,
        E.LEAVE: S.LEAVING,
    },
    S.STABLE: {E.REBALANCE: S.REBALANCING, E.LEAVE: S.LEAVING},
    S.REBALANCING: {E.JOIN: S.JOINING, E.LOSE: S.UNJOINED, E.LEAVE: S.LEAVING},
    S.LEAVING: {E.LEFT: S.UNJOINED},
}


def _refusal(state: MemberState, event: MemberEvent) -> GroupStateError:
    moves = ", ".join(e.value for e in TRANSITIONS[state]) or "none"
    return GroupStateError(
        f"group member: no move {event.value!r} from {state.value} (moves from there: {moves})"
    )


TABLE: StateTable[MemberState, MemberEvent] = StateTable(TRANSITIONS, _refusal)
#: Whether an event is a legal move from a state.
allowed = TABLE.allowed
#: The state after an event; :class:`~pykaf.errors.GroupStateError` for a move not in the table.
transition = TABLE.transition


__all__ = ["INITIAL", "TABLE", "TRANSITIONS", "MemberEvent", "MemberState", "allowed", "transition"]
