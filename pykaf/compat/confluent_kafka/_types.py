"""confluent-kafka's ``Message`` and ``TopicPartition``, and its offset and timestamp codes."""

from __future__ import annotations

from typing import Any

from pykaf.compat.confluent_kafka._error import KafkaError

OFFSET_BEGINNING = -2
"""The logical offset of a partition's earliest record (``pykaf.OLDEST``)."""
OFFSET_END = -1
"""The logical offset of the next record to be written (``pykaf.NEWEST``)."""
OFFSET_STORED = -1000
"""The logical offset "the group's committed offset"."""
OFFSET_INVALID = -1001
"""No offset: what ``position()`` and ``committed()`` give for a partition without one."""

TIMESTAMP_NOT_AVAILABLE = 0
"""``Message.timestamp()``'s type when the record has no timestamp."""
TIMESTAMP_CREATE_TIME = 1
"""``Message.timestamp()``'s type for a time the producer set."""
TIMESTAMP_LOG_APPEND_TIME = 2
"""``Message.timestamp()``'s type for a time the broker set on append."""

Headers = list[tuple[str, bytes | None]]


class Message:
    """A record (consumed, or delivered to ``on_delivery``), or an error event.

    Made by the shim, not by callers; read with the accessor methods, as in
    confluent-kafka (``msg.value()``, ``msg.offset()``, ...).
    """

    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_latency",
        "_offset",
        "_partition",
        "_timestamp",
        "_topic",
        "_ts_type",
        "_value",
    )

    def __init__(
        self,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error
        self._ts_type, self._timestamp = timestamp
        self._latency = latency

    def topic(self) -> str | None:
        """The topic."""
        return self._topic

    def partition(self) -> int | None:
        """The partition."""
        return self._partition

    def offset(self) -> int | None:
        """The offset (None before it is known)."""
        return self._offset

    def key(self) -> bytes | None:
        """The key."""
        return self._key

    def value(self) -> bytes | None:
        """The value (for an error event: None)."""
        return self._value

    def headers(self) -> Headers | None:
        """The headers as ``[(name, value), ...]``, or None when there are none."""
        return self._headers

    def error(self) -> KafkaError | None:
        """The error of an error event or failed delivery; None for a record."""
        return self._error

    def timestamp(self) -> tuple[int, int]:
        """``(type, ms)``: type is one of the ``TIMESTAMP_*`` codes."""
        return (self._ts_type, self._timestamp)

    def latency(self) -> float | None:
        """Seconds from ``produce`` to delivery (delivered messages only)."""
        return self._latency

    def len(self) -> int:
        """The value's length in bytes (0 without a value)."""
        return 0 if self._value is None else len(self._value)

    def __len__(self) -> int:
        return self.len()

    def set_value(self, value: bytes | None) -> None:
        """Replace the value (as confluent-kafka allows for deserialisers)."""
        self._value = value

    def set_key(self, key: bytes | None) -> None:
        """Replace the key."""
        self._key = key

    def set_headers(self, headers: Headers | None) -> None:
        """Replace the headers."""
        self._headers = headers

    def __repr__(self) -> str:
        return (
            f"Message(topic={self._topic!r}, partition={self._partition}, "
            f"offset={self._offset}, error={self._error!r})"
        )


class TopicPartition:
    """A topic partition, with an offset (and metadata) where one is meant.

    Args:
        topic: the topic.
        partition: the partition (-1: none given).
        offset: an offset, or ``OFFSET_BEGINNING`` / ``OFFSET_END`` /
            ``OFFSET_STORED`` / ``OFFSET_INVALID`` (the default).
        metadata: commit metadata.
        leader_epoch: the leader epoch of the offset, if known.
    """

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"TopicPartition topic must be a str, not {topic!r}")
        for name, number in (("partition", partition), ("offset", offset)):
            if not isinstance(number, int) or isinstance(number, bool):
                raise TypeError(f"TopicPartition {name} must be an int, not {number!r}")
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: Any) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},leader_epoch={self.leader_epoch},error={self.error!r}}}"
        )
