"""confluent-kafka's names on pykaf: change one import, keep the code.

::

    from pykaf.compat import confluent_kafka
    from pykaf.compat.confluent_kafka import Producer

    p = Producer({"bootstrap.servers": "localhost:9092"})
    p.produce("orders", b"one", callback=lambda err, msg: print(err, msg.offset()))
    p.flush()

``Producer``, ``Consumer`` and ``admin.AdminClient`` take librdkafka's
configuration dicts (a key pykaf does not take raises :class:`KafkaException`
naming it) and run on :mod:`pykaf.sync`. ``docs/migrating.md`` lists the
keys and what is not supported.
"""

from __future__ import annotations

from pykaf._version import __version__
from pykaf.compat.confluent_kafka import admin
from pykaf.compat.confluent_kafka._consumer import Consumer
from pykaf.compat.confluent_kafka._error import KafkaError, KafkaException
from pykaf.compat.confluent_kafka._producer import Producer
from pykaf.compat.confluent_kafka._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)
from pykaf.compat.confluent_kafka.admin import ConsumerGroupState


def version() -> tuple[str, int]:
    """``(version, number)``: pykaf's version, as confluent-kafka's ``version()`` gives its own."""
    parts = [int(p) for p in __version__.split(".")[:3] if p.isdigit()]
    number = 0
    for part in parts + [0] * (3 - len(parts)):
        number = number * 256 + part
    return (__version__, number << 8)


__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "Consumer",
    "ConsumerGroupState",
    "KafkaError",
    "KafkaException",
    "Message",
    "Producer",
    "TopicPartition",
    "admin",
    "version",
]
