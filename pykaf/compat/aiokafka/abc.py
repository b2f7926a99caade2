"""aiokafka's ``ConsumerRebalanceListener``: hear of partitions assigned and revoked."""

from __future__ import annotations

import abc
from collections.abc import Set as AbstractSet
from typing import Any

from pykaf.compat.kafka.structs import TopicPartition


class ConsumerRebalanceListener(abc.ABC):
    """Implement both methods (plain functions or coroutines) and pass it to ``subscribe``.

    ``on_partitions_revoked`` runs before a rebalance gives partitions away
    (after the consumer stopped handing out their records): commit there what
    a manual-commit consumer has processed. ``on_partitions_assigned`` runs
    once the new assignment is known and before any of its records is handed
    out: seek there to start partitions elsewhere. The consumer waits for
    each to finish.
    """

    @abc.abstractmethod
    def on_partitions_revoked(self, revoked: AbstractSet[TopicPartition]) -> Any:
        """The partitions this member is about to give up."""

    @abc.abstractmethod
    def on_partitions_assigned(self, assigned: AbstractSet[TopicPartition]) -> Any:
        """The partitions this member owns from now on."""


class AbstractTokenProvider(abc.ABC):
    """A SASL/OAUTHBEARER token source: ``async def token() -> str``."""

    @abc.abstractmethod
    async def token(self) -> str:
        """A current access token."""


__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]
