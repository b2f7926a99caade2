"""The cluster's metadata as plain objects: brokers, topics, partitions, leaders.

Built from Metadata responses; no I/O here. Leaders never move backwards: a
response carrying an older leader epoch than the one cached for a partition
(a stale broker answering) does not overwrite it, unless the topic's id
changed (a topic deleted and made again under the same name).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pykaf.errors import KafkaError, error_for_code


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker as metadata describes it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"


@dataclass(slots=True)
class PartitionInfo:
    """One partition: its leader, replicas and in-sync replicas."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error: type[KafkaError] | None = None


@dataclass(slots=True)
class TopicInfo:
    """One topic and its partitions."""

    name: str
    topic_id: bytes | None
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error: type[KafkaError] | None = None


class Metadata:
    """The metadata cache: what the client believes the cluster looks like."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.updates = 0
        # The last error the cluster gave for a topic it did not describe
        # (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
        # LEADER_NOT_AVAILABLE while Kafka auto-creates it, ...).
        self.topic_errors: dict[str, type[KafkaError]] = {}

    def update(self, response: Any, *, full: bool) -> dict[str, type[KafkaError]]:
        """Apply a MetadataResponse; return topic-level errors by topic name.

        With ``full`` the response described every topic, so topics it did not
        mention are gone; otherwise only the mentioned topics are replaced.
        """
        if response.brokers:
            self.brokers = {
                b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
                for b in response.brokers
            }
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = getattr(response, "controller_id", -1)
        errors: dict[str, type[KafkaError]] = {}
        seen: set[str] = set()
        for t in response.topics:
            name = t.name
            if name is None:
                continue
            seen.add(name)
            err = error_for_code(t.error_code)
            if err is not None:
                errors[name] = err
                self.topic_errors[name] = err
                # A retriable topic error (leader election) keeps what we knew.
                if not err.retriable:
                    self.topics.pop(name, None)
                continue
            self.topic_errors.pop(name, None)
            old = self.topics.get(name)
            topic = TopicInfo(
                name,
                getattr(t, "topic_id", None),
                bool(getattr(t, "is_internal", False)),
            )
            if old is not None and as_topic_uuid(old.topic_id) != as_topic_uuid(topic.topic_id):
                old = None  # a new topic of the same name: its epochs start again
            for p in t.partitions:
                epoch = getattr(p, "leader_epoch", -1)
                prev = old.partitions.get(p.partition_index) if old else None
                if prev is not None and 0 <= epoch < prev.leader_epoch:
                    topic.partitions[p.partition_index] = prev  # stale answer
                    continue
                topic.partitions[p.partition_index] = PartitionInfo(
                    name,
                    p.partition_index,
                    p.leader_id,
                    epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(getattr(p, "offline_replicas", []) or []),
                    error_for_code(p.error_code),
                )
            self.topics[name] = topic
        if full:
            for name in list(self.topics):
                if name not in seen:
                    del self.topics[name]
        self.updates += 1
        return errors

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        """The cached partition, or None."""
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t else None

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The id of ``topic`` (None when unknown, or the broker gave none)."""
        info = self.topics.get(topic)
        return None if info is None else as_topic_uuid(info.topic_id)

    def names_of(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of the topics with ids in ``ids`` that the cache knows."""
        out: dict[uuid.UUID, str] = {}
        for name, info in self.topics.items():
            tid = as_topic_uuid(info.topic_id)
            if tid is not None and tid in ids:
                out[tid] = name
        return out

    def mark_leader_unknown(self, topic: str, partition: int) -> None:
        """Forget a partition's leader after the broker said it is not the leader."""
        p = self.partition(topic, partition)
        if p is not None:
            p.leader = -1


def as_topic_uuid(value: Any) -> uuid.UUID | None:
    """A topic id from metadata (a UUID, or 16 bytes); None for none or the zero id."""
    if value is None:
        return None
    tid = value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))
    return None if tid.int == 0 else tid
