"""aiokafka's API on pykaf: change ``import aiokafka`` to ``from pykaf.compat import aiokafka``.

::

    from pykaf.compat.aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers="localhost:9092")
    await producer.start()
    metadata = await producer.send_and_wait("my-topic", b"raw_bytes")
    await producer.stop()

``AIOKafkaProducer``, ``AIOKafkaConsumer`` and ``admin.AIOKafkaAdminClient``
run on :mod:`pykaf.aio` (the trio core inside the asyncio loop); the structs,
``errors``' names, ``ConsumerRebalanceListener``, the partitioner and the
assignor names are aiokafka's. :func:`install` puts the shim under
aiokafka's module names for code that imports aiokafka itself (FastStream).
What is and is not supported: ``docs/migrating.md``.
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

#: The aiokafka release whose API the shim follows (``aiokafka.__version__``).
__version__ = "0.14.0"

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
