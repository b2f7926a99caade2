"""aiokafka's API on pykaf: change ``import aiokafka`` to ``from pykaf.compat import aiokafka``.

``AIOKafkaProducer`` on :func:`pykaf.aio.open_producer`; the structs,
``aiokafka.errors``' names, ``ConsumerRebalanceListener`` and the
partitioner and assignor names. What is and is not supported:
``docs/migrating.md``.
"""

from __future__ import annotations

from pykaf.compat.aiokafka import abc, admin, errors, structs
from pykaf.compat.aiokafka._install import install
from pykaf.compat.aiokafka.abc import ConsumerRebalanceListener
from pykaf.compat.aiokafka.consumer import AIOKafkaConsumer
from pykaf.compat.aiokafka.errors import ConsumerStoppedError, IllegalOperation
from pykaf.compat.aiokafka.producer import AIOKafkaProducer
from pykaf.compat.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
    "abc",
    "admin",
    "errors",
    "install",
    "structs",
]
