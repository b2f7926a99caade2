"""aiokafka's structs: ``TopicPartition``, ``ConsumerRecord``, ``RecordMetadata``, ...

``TopicPartition`` is the kafka-python shim's own class (the same named tuple
of topic and partition in both clients).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from pykaf.compat.kafka.structs import TopicPartition


class BrokerMetadata(NamedTuple):
    """A broker: id, host, port, rack."""

    nodeId: int | str  # aiokafka's field name
    host: str
    port: int
    rack: str | None


class PartitionMetadata(NamedTuple):
    """A partition's leader, replicas and in-sync replicas."""

    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    error: Any


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the next one to read), with its metadata string."""

    offset: int
    metadata: str


class OffsetAndTimestamp(NamedTuple):
    """An offset found for a timestamp (``offsets_for_times``), with that record's timestamp."""

    offset: int
    timestamp: int | None


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written (what ``send``'s future resolves to).

    ``timestamp_type`` is 0 (CreateTime: the producer's timestamp was kept)
    or 1 (LogAppendTime: the broker's); ``log_start_offset`` is None (pykaf
    does not report it).
    """

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int | None
    timestamp_type: int
    log_start_offset: int | None


KT = TypeVar("KT")
VT = TypeVar("VT")


@dataclass
class ConsumerRecord(Generic[KT, VT]):
    """One consumed record, as ``getone``/``getmany``/``async for`` hand it out.

    ``checksum`` is always None (record batches v2 carry no per-record CRC);
    ``serialized_*_size`` is -1 for an absent key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: KT | None
    value: VT | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes]]


__all__ = [
    "BrokerMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "RecordMetadata",
    "TopicPartition",
]
