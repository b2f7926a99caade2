"""The transaction manager's pure parts: offsets and group metadata normalised, error choice."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import pykaf
from pykaf import errors
from pykaf._txn.manager import _first_error, group_metadata_of, offsets_by_topic


@dataclass
class Tp:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None


def test_offsets_from_a_mapping_or_objects() -> None:
    assert offsets_by_topic({("a", 0): 5, ("a", 1): (7, "m"), ("b", 0): 1}) == {
        "a": {0: (5, None), 1: (7, "m")},
        "b": {0: (1, None)},
    }
    assert offsets_by_topic([Tp("a", 2, 9, "x"), Tp("b", 0, 3)]) == {
        "a": {2: (9, "x")},
        "b": {0: (3, None)},
    }
    assert offsets_by_topic({}) == {}


@pytest.mark.parametrize(
    "bad",
    [{("a", "0"): 1}, {(1, 0): 1}, {("a", 0): 1.5}, {("a", 0): -1}],
)
def test_bad_offsets_are_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        offsets_by_topic(bad)  # type: ignore[arg-type]


def test_group_metadata_from_itself_a_session_or_a_group_id() -> None:
    gm = pykaf.GroupMetadata("g", 3, "member-1", "instance")
    assert group_metadata_of(gm) is gm
    assert group_metadata_of("g") == pykaf.GroupMetadata("g", -1, "", None)

    class Session:
        def group_metadata(self) -> pykaf.GroupMetadata:
            return gm

    assert group_metadata_of(Session()) is gm
    with pytest.raises(TypeError):
        group_metadata_of(42)


def test_the_error_to_act_on_among_partition_codes() -> None:
    assert _first_error([0, 0]) is None
    # a final error wins over retriable ones and OPERATION_NOT_ATTEMPTED
    assert _first_error([55, 51, 90]) is errors.ProducerFencedError
    assert _first_error([0, 51]) is errors.ConcurrentTransactionsError
    assert _first_error([55, 55]) is errors.OperationNotAttemptedError


def test_state_errors_are_kafkas_invalid_txn_state() -> None:
    assert issubclass(pykaf.TransactionStateError, errors.InvalidTxnStateError)
    assert [s.value for s in pykaf.TxnStatus] == [
        "uninitialized",
        "ready",
        "in_transaction",
        "committing",
        "aborting",
        "abortable_error",
        "fatal_error",
    ]
