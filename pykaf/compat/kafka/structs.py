"""kafka-python's named tuples: ``TopicPartition``, ``OffsetAndMetadata``, records' metadata."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple


class IsolationLevel(IntEnum):
    """``isolation_level`` values (the strings ``"read_committed"`` etc. work too)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class TopicPartition(NamedTuple):
    """A topic and one of its partitions."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the next one to read), with its metadata string."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """An offset found for a timestamp (``KafkaConsumer.offsets_for_times``)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written (what ``send(...).get()`` returns).

    ``checksum`` is always None (record batches v2 carry no per-record CRC);
    the ``serialized_*_size`` fields are -1 for an absent key, value or headers.
    """

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class ConsumerRecord(NamedTuple):
    """One consumed record, as ``KafkaConsumer`` yields it.

    ``timestamp_type`` is 0 for CreateTime, 1 for LogAppendTime; ``headers`` a
    list of ``(str, bytes)``; ``leader_epoch`` is -1 (not reported by pykaf's
    consumer); ``checksum`` None.
    """

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int
