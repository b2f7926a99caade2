"""The transaction status table, apart from any I/O: every legal move, every illegal one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import pykaf
from pykaf import errors
from pykaf._txn.manager import TransactionManager
from pykaf._txn.states import INITIAL, TRANSITIONS, TxnEvent, TxnStatus, allowed, transition

S = TxnStatus
E = TxnEvent

#: The moves docs/transactions.md describes, written out again on purpose.
LEGAL = {
    (S.UNINITIALIZED, E.INITIALIZED): S.READY,
    (S.UNINITIALIZED, E.FATAL): S.FATAL_ERROR,
    (S.READY, E.BEGIN): S.IN_TRANSACTION,
    (S.READY, E.FATAL): S.FATAL_ERROR,
    (S.IN_TRANSACTION, E.COMMIT): S.COMMITTING,
    (S.IN_TRANSACTION, E.ABORT): S.ABORTING,
    (S.IN_TRANSACTION, E.FAIL): S.ABORTABLE_ERROR,
    (S.IN_TRANSACTION, E.FATAL): S.FATAL_ERROR,
    (S.COMMITTING, E.COMMIT): S.COMMITTING,  # EndTxn timed out: commit again
    (S.COMMITTING, E.END): S.READY,
    (S.COMMITTING, E.FAIL): S.ABORTABLE_ERROR,
    (S.COMMITTING, E.FATAL): S.FATAL_ERROR,
    (S.ABORTING, E.ABORT): S.ABORTING,  # EndTxn timed out: abort again
    (S.ABORTING, E.END): S.READY,
    (S.ABORTING, E.FATAL): S.FATAL_ERROR,
    (S.ABORTABLE_ERROR, E.ABORT): S.ABORTING,
    (S.ABORTABLE_ERROR, E.FATAL): S.FATAL_ERROR,
}
ILLEGAL = [pair for pair in itertools.product(S, E) if pair not in LEGAL]


def test_the_table_is_exactly_the_legal_moves() -> None:
    assert set(TRANSITIONS) == set(S)
    table = {(s, e): to for s, moves in TRANSITIONS.items() for e, to in moves.items()}
    assert table == LEGAL
    assert INITIAL is S.UNINITIALIZED
    assert TRANSITIONS[S.FATAL_ERROR] == {}


@pytest.mark.parametrize(("status", "event"), list(LEGAL), ids=str)
def test_every_legal_move(status: TxnStatus, event: TxnEvent) -> None:
    assert allowed(status, event)
    assert transition(status, event) is LEGAL[(status, event)]


@pytest.mark.parametrize(("status", "event"), ILLEGAL, ids=str)
def test_every_illegal_move_is_refused(status: TxnStatus, event: TxnEvent) -> None:
    assert not allowed(status, event)
    with pytest.raises(pykaf.TransactionStateError) as caught:
        transition(status, event)
    assert isinstance(caught.value, errors.InvalidTxnStateError)
    assert status.value in str(caught.value) or "already open" in str(caught.value)


def test_refusals_say_what_was_asked() -> None:
    with pytest.raises(pykaf.TransactionStateError, match="already open"):
        transition(S.IN_TRANSACTION, E.BEGIN)
    with pytest.raises(pykaf.TransactionStateError, match="cannot begin a transaction while"):
        transition(S.COMMITTING, E.BEGIN)
    with pytest.raises(pykaf.TransactionStateError, match="no transaction to commit"):
        transition(S.READY, E.COMMIT)
    with pytest.raises(pykaf.TransactionStateError, match="no transaction to abort"):
        transition(S.READY, E.ABORT)
    with pytest.raises(pykaf.TransactionStateError, match="no transaction to abort"):
        transition(S.COMMITTING, E.ABORT)


class _Client:
    """A stand-in cluster client with no connection open (so: transactions V1)."""

    def newest_features(self) -> None:
        return None


class _Host:
    """A stand-in producer: records whether the manager lets sends through."""

    def __init__(self) -> None:
        self.gated = True
        self.client = _Client()

    def allow_sends(self, allowed: bool) -> None:
        self.gated = not allowed


def _manager() -> tuple[TransactionManager, Any]:
    producer: Any = _Host()
    return TransactionManager(producer, "t"), producer


def test_the_manager_moves_by_the_table_without_io() -> None:
    txn, producer = _manager()
    assert txn.status is S.UNINITIALIZED
    with pytest.raises(pykaf.TransactionStateError, match="while uninitialized"):
        txn.begin()
    txn.initialized()
    txn.initialized()  # a later InitProducerId (an epoch bump) changes nothing
    assert txn.status is S.READY and producer.gated
    txn.begin()
    assert txn.status is S.IN_TRANSACTION and not producer.gated
    with pytest.raises(pykaf.TransactionStateError, match="already open"):
        txn.begin()
    txn.record_failed(errors.KafkaTimeoutError("lost"))
    assert txn.status is S.ABORTABLE_ERROR and producer.gated
    with pytest.raises(errors.TransactionAbortableError):
        txn.begin()
    txn.abortable(errors.KafkaTimeoutError("again"))  # no move: stays abortable
    assert txn.status is S.ABORTABLE_ERROR
    txn.abortable(errors.ProducerFencedError("fenced"))
    assert txn.status is S.FATAL_ERROR
    with pytest.raises(errors.ProducerFencedError):
        txn.begin()
    txn.fatal(errors.InvalidTxnStateError("later"))  # the first fatal error stays
    assert isinstance(txn.error, errors.ProducerFencedError)


def test_failures_outside_a_transaction_change_nothing() -> None:
    txn, _ = _manager()
    txn.initialized()
    txn.record_failed(errors.KafkaTimeoutError("lost"))
    assert txn.status is S.READY
    txn.sequence_gap(errors.OutOfOrderSequenceError("gap"))
    assert txn.status is S.READY and txn.needs_bump
