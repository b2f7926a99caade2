"""A state machine as data: ``{state: {event: next state}}`` and one checked move.

Shared by the transaction status (``pykaf._txn.states``) and a group member's
state (``pykaf._group.states``). Pure: it neither reads a clock nor does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

StateT = TypeVar("StateT")
EventT = TypeVar("EventT")


class StateTable(Generic[StateT, EventT]):
    """Every legal move of one state machine, and the error for any other.

    Args:
        moves: ``{state: {event: next state}}``; a pair not in it is illegal.
        refuse: the exception to raise for an illegal ``(state, event)``.
    """

    def __init__(
        self,
        moves: Mapping[StateT, Mapping[EventT, StateT]],
        refuse: Callable[[StateT, EventT], Exception],
    ) -> None:
        self.moves = moves
        self._refuse = refuse

    def allowed(self, state: StateT, event: EventT) -> bool:
        """Whether ``event`` is a legal move from ``state``."""
        return event in self.moves[state]

    def transition(self, state: StateT, event: EventT) -> StateT:
        """The state after ``event`` happens in ``state``.

        Raises:
            the ``refuse`` exception: the table has no such move (nothing changed).
        """
        try:
            return self.moves[state][event]
        except KeyError:
            raise self._refuse(state, event) from None


__all__ = ["StateTable"]
