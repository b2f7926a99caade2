"""What the transaction manager needs of its producer: a small internal protocol.

The producer side implements :class:`TxnHost` (and its partitions
:class:`TxnPartition`); the manager drives the producer only through these
names, so it imports nothing of the producer's package.
"""

from __future__ import annotations

from typing import Protocol

from pykaf._cluster.client import Client
from pykaf._config import ClientConfig


class TxnSender(Protocol):
    """The sender a partition is attached to."""

    def wake(self) -> None:
        """Look for ready batches again (the partition joined the transaction)."""


class TxnPartition(Protocol):
    """A producer partition as a transaction sees it."""

    topic: str
    partition: int
    #: The serial of the transaction the partition was last added to (0: none).
    txn_added: int

    @property
    def broker(self) -> TxnSender | None:
        """The sender serving the partition, if any."""

    def joined_transaction(self, serial: int) -> None:
        """Record that the partition is in transaction ``serial``."""


class TxnHost(Protocol):
    """The producer, as its transaction manager drives it."""

    @property
    def config(self) -> ClientConfig:
        """The producer's options (timeouts and backoffs)."""

    @property
    def client(self) -> Client:
        """The cluster client (coordinators)."""

    @property
    def producer_id(self) -> int:
        """The producer id (-1 before InitProducerId)."""

    @property
    def producer_epoch(self) -> int:
        """The producer epoch (-1 before InitProducerId)."""

    def allow_sends(self, allowed: bool) -> None:
        """Accept records (a transaction is open) or refuse them."""

    def forget_failures(self) -> None:
        """Drop the failures kept for ``flush()``: the transaction's error told them."""

    async def drain_input(self) -> None:
        """Return once every message already on ``input()`` is in a batch or failed."""

    async def flush_transaction(self) -> None:
        """Send everything buffered and wait until all of it is settled."""

    async def drop_transaction(self, error: BaseException) -> bool:
        """Fail what is unsent, wait out what is in flight.

        Returns whether a dropped batch held sequence numbers (the epoch must
        then be bumped before the next transaction).
        """

    def drop_unsent(self, part: TxnPartition, error: BaseException) -> bool:
        """Fail ``part``'s batches not sent yet; whether one of them held sequence numbers."""

    async def new_epoch(self) -> None:
        """A new epoch from the coordinator; sequence numbers start again at 0."""

    def adopt_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Use the id and epoch a transaction's end gave (EndTxn v5); sequences from 0."""


__all__ = ["TxnHost", "TxnPartition", "TxnSender"]
