"""Transactions (issue 6): the transactional producer's state machine and coordinator calls."""

from pykaf._txn.manager import (
    GroupMetadata,
    TransactionAbortedError,
    TransactionManager,
    TransactionStateError,
    TxnStatus,
)

__all__ = [
    "GroupMetadata",
    "TransactionAbortedError",
    "TransactionManager",
    "TransactionStateError",
    "TxnStatus",
]
