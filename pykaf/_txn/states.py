"""The transaction status as a table: which event moves which status where.

Pure: no I/O, no producer, no clock. :class:`~pykaf._txn.manager.TransactionManager`
does the requests and calls :func:`transition` for every change of status, as
h11's ``_state.py`` and sarama's ``producerTxnTransitions`` / ``transitionTo``
do. A move the table does not hold raises :class:`TransactionStateError`
before anything changes (:class:`pykaf._state_table.StateTable`).
"""

from __future__ import annotations

import enum

from pykaf._state_table import StateTable
from pykaf.errors import TransactionStateError


class TxnStatus(enum.Enum):
    """Where a transactional producer is (``producer.txn_status``)."""

    #: No producer id yet (before InitProducerId).
    UNINITIALIZED = "uninitialized"
    #: No transaction open; ``begin_transaction()`` may be called.
    READY = "ready"
    #: A transaction is open: records may be sent, offsets added.
    IN_TRANSACTION = "in_transaction"
    #: ``commit_transaction()`` is flushing and ending the transaction.
    COMMITTING = "committing"
    #: ``abort_transaction()`` is dropping records and ending the transaction.
    ABORTING = "aborting"
    #: Something in the transaction failed: it can only be aborted.
    ABORTABLE_ERROR = "abortable_error"
    #: Fenced or refused for good: the producer can only be closed.
    FATAL_ERROR = "fatal_error"


class TxnEvent(enum.Enum):
    """What happens to a transactional producer: the table's input."""

    #: InitProducerId succeeded.
    INITIALIZED = "initialized"
    #: ``begin_transaction()``.
    BEGIN = "begin"
    #: ``commit_transaction()`` (again, after an EndTxn that timed out).
    COMMIT = "commit"
    #: ``abort_transaction()`` (again, after an EndTxn that timed out).
    ABORT = "abort"
    #: Something of the open transaction failed (a record, an add, EndTxn).
    FAIL = "fail"
    #: Fenced, or refused for good.
    FATAL = "fatal"
    #: The transaction ended (EndTxn answered, or there was nothing to end).
    END = "end"


S = TxnStatus
E = TxnEvent

#: The status a producer starts in.
INITIAL = S.UNINITIALIZED

#: ``{status: {event: next status}}``: every legal move; nothing else is one.
TRANSITIONS: dict[TxnStatus, dict[TxnEvent, TxnStatus]] = {
    S.UNINITIALIZED: {E.INITIALIZED: S.READY, E.FATAL: S.FATAL_ERROR},
    S.READY: {E.BEGIN: S.IN_TRANSACTION, E.FATAL: S.FATAL_ERROR},
    S.IN_TRANSACTION: {
        E.COMMIT: S.COMMITTING,
        E.ABORT: S.ABORTING,
        E.FAIL: S.ABORTABLE_ERROR,
        E.FATAL: S.FATAL_ERROR,
    },
    S.COMMITTING: {
        E.COMMIT: S.COMMITTING,
        E.END: S.READY,
        E.FAIL: S.ABORTABLE_ERROR,
        E.FATAL: S.FATAL_ERROR,
    },
    S.ABORTING: {E.ABORT: S.ABORTING, E.END: S.READY, E.FATAL: S.FATAL_ERROR},
    S.ABORTABLE_ERROR: {E.ABORT: S.ABORTING, E.FATAL: S.FATAL_ERROR},
    S.FATAL_ERROR: {},
}


def _refusal(status: TxnStatus, event: TxnEvent) -> TransactionStateError:
    if event is E.BEGIN:
        if status is S.IN_TRANSACTION:
            return TransactionStateError("a transaction is already open")
        return TransactionStateError(f"cannot begin a transaction while {status.value}")
    if event is E.COMMIT:
        return TransactionStateError(f"no transaction to commit ({status.value})")
    if event is E.ABORT:
        return TransactionStateError(f"no transaction to abort ({status.value})")
    return TransactionStateError(f"no move {event.value!r} from {status.value}")


TABLE: StateTable[TxnStatus, TxnEvent] = StateTable(TRANSITIONS, _refusal)
#: Whether an event is a legal move from a status.
allowed = TABLE.allowed
#: The status after an event; :class:`TransactionStateError` for a move not in the table.
transition = TABLE.transition


__all__ = [
    "INITIAL",
    "TABLE",
    "TRANSITIONS",
    "TxnEvent",
    "TxnStatus",
    "allowed",
    "transition",
]
