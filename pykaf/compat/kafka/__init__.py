"""kafka-python's API on pykaf: change ``import kafka`` to ``from pykaf.compat import kafka``.

::

    from pykaf.compat.kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers="localhost:9092")
    future = producer.send("my-topic", b"raw_bytes")
    metadata = future.get(timeout=10)
    producer.flush()

The classes run on :mod:`pykaf.sync` (the producer on its per-record
``produce`` path). What is and is not supported: ``docs/migrating.md``.
"""

from __future__ import annotations

from pykaf.compat.kafka import admin, errors, serializer
from pykaf.compat.kafka.admin import KafkaAdminClient, NewTopic
from pykaf.compat.kafka.consumer import KafkaConsumer
from pykaf.compat.kafka.producer import FutureRecordMetadata, KafkaProducer
from pykaf.compat.kafka.serializer import (
    DefaultSerializer,
    Deserializer,
    JsonSerializer,
    Serializer,
)
from pykaf.compat.kafka.structs import (
    ConsumerRecord,
    IsolationLevel,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "ConsumerRecord",
    "DefaultSerializer",
    "Deserializer",
    "FutureRecordMetadata",
    "IsolationLevel",
    "JsonSerializer",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaProducer",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "Serializer",
    "TopicPartition",
    "admin",
    "errors",
    "serializer",
]
