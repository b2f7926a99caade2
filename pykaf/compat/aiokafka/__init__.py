"""aiokafka's API on pykaf: change ``import aiokafka`` to ``from pykaf.compat import aiokafka``.

The structs, ``aiokafka.errors``' names, ``ConsumerRebalanceListener`` and
the partitioner and assignor names. What is and is not supported:
``docs/migrating.md``.
"""

from __future__ import annotations

from pykaf.compat.aiokafka import abc, errors, structs
from pykaf.compat.aiokafka.abc import ConsumerRebalanceListener
from pykaf.compat.aiokafka.errors import ConsumerStoppedError, IllegalOperation
from pykaf.compat.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
    "abc",
    "errors",
    "structs",
]
