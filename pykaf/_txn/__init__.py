"""Transactions: the status table, the coordinator calls, what the manager needs of the producer."""

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
