"""aiokafka's ``DefaultPartitioner`` (``aiokafka.partitioner``); how the shim reads partitioners.

An aiokafka partitioner is a callable ``(key, all_partitions, available) ->
partition`` of the serialized key. :class:`DefaultPartitioner` (murmur2 of
the key, as Java's producer) becomes pykaf's own ``murmur2`` partitioner;
any other callable is called by pykaf's producer for each record.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from pykaf.codec import murmur2


class DefaultPartitioner:
    """murmur2 of the key, as Java's producer; a record with no key goes to a random partition.

    Given to :class:`~pykaf.compat.aiokafka.AIOKafkaProducer` (the class or
    an instance), pykaf's own ``murmur2`` partitioner does the work: keyed
    records land where this class would put them; a record with no key
    stays on one partition until its batch is sent (sticky), where
    aiokafka picks one at random per record.
    """

    def __call__(
        self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
    ) -> int:
        """The partition of ``all_partitions`` for ``key``."""
        if key is None:
            return random.choice(available or all_partitions)
        return all_partitions[(murmur2(key) & 0x7FFFFFFF) % len(all_partitions)]


def pykaf_partitioner(partitioner: Any) -> str | Callable[..., int]:
    """The pykaf ``partitioner`` option for an aiokafka ``partitioner`` argument.

    Raises:
        TypeError: not callable.
    """
    if partitioner is DefaultPartitioner or isinstance(partitioner, DefaultPartitioner):
        return "murmur2"
    if not callable(partitioner):
        raise TypeError(f"partitioner must be callable, not {partitioner!r}")

    def partition(
        topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        result: int = partitioner(key, list(range(partitions)), list(available or ()))
        return result

    return partition


__all__ = ["DefaultPartitioner"]
