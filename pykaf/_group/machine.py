"""What both group members' state machines share: the actions of a failure, the events of leaving.

:mod:`pykaf._group.classic` and :mod:`pykaf._group.consumer_machine` are
sans-I/O machines; a failed round trip makes either ask for a backoff, and a
non-retriable answer for ``consume()`` to fail. Their runners wait through
:meth:`pykaf._group.runner.MemberRunner.back_off`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykaf import errors

#: Answers meaning the coordinator moved or is loading: retried after a backoff.
COORDINATOR_MOVED = (
    errors.NotCoordinatorError,
    errors.CoordinatorNotAvailableError,
    errors.CoordinatorLoadInProgressError,
)


@dataclass(frozen=True, slots=True)
class BackOff:
    """Wait the backoff after ``failures`` failures in a row (and look the coordinator up again)."""

    failure: BaseException
    failures: int


@dataclass(frozen=True, slots=True)
class Fail:
    """A non-retriable group error: ``consume()`` raises it."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class HeartbeatFailed:
    """No answer to a heartbeat (a lost connection, a retriable failure), at ``now``."""

    error: BaseException
    now: float


@dataclass(frozen=True, slots=True)
class LeaveRequested:
    """``consume()`` is ending: the member sends its leave (LeaveGroup, or a leave heartbeat)."""


@dataclass(frozen=True, slots=True)
class LeaveDone:
    """The leave was answered, failed or timed out: the member is out either way."""


__all__ = [
    "COORDINATOR_MOVED",
    "BackOff",
    "Fail",
    "HeartbeatFailed",
    "LeaveDone",
    "LeaveRequested",
]
