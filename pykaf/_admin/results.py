"""What the admin client takes and returns: small frozen dataclasses, and ``AdminError``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from pykaf.errors import AdminError as AdminError  # re-exported: defined in pykaf.errors

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class NewTopic:
    """A topic to create.

    Attributes:
        name: the topic's name.
        partitions: how many partitions (-1: the broker's default).
        replication_factor: replicas per partition (-1: the broker's default).
        configs: topic configs, e.g. ``{"cleanup.policy": "compact"}``.
        assignments: partition -> broker ids, instead of partitions and
            replication factor (both must then be -1).
    """

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class PartitionDescription:
    """One partition of a described topic: its leader and replicas (broker ids)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass(frozen=True)
class TopicDescription:
    """A topic as the cluster's metadata describes it."""

    name: str
    topic_id: str | None
    internal: bool
    partitions: list[PartitionDescription]


@dataclass(frozen=True)
class BrokerDescription:
    """One broker of the cluster."""

    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterDescription:
    """The cluster: its id, controller and brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerDescription]


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a topic or broker.

    Attributes:
        value: the value (None for a sensitive one, which brokers do not show).
        source: where it comes from: "dynamic_topic", "dynamic_broker",
            "dynamic_default_broker", "static_broker", "default", ... (Kafka's
            ConfigSource, lower-cased; "unknown" when the broker does not say).
        read_only, sensitive, default: as the broker reports them.
    """

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    default: bool


_CONFIG_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}


@dataclass(frozen=True)
class ConfigChange:
    """One incremental change to a config (IncrementalAlterConfigs).

    In the mappings :meth:`pykaf.Admin.alter_topic_configs` takes, a plain
    string sets a value and None deletes it (back to its default); use
    ``ConfigChange.append(...)`` and ``ConfigChange.subtract(...)`` for list
    configs such as ``cleanup.policy``.
    """

    op: Literal["set", "delete", "append", "subtract"]
    value: str | None = None

    def __post_init__(self) -> None:
        if self.op not in _CONFIG_OPS:
            raise ValueError(f"unknown config operation {self.op!r}")
        if (self.op == "delete") != (self.value is None):
            raise ValueError(f"{self.op} {'takes no' if self.op == 'delete' else 'needs a'} value")

    @classmethod
    def set(cls, value: str) -> ConfigChange:
        """Set the config to ``value``."""
        return cls("set", value)

    @classmethod
    def delete(cls) -> ConfigChange:
        """Remove the config's own value: it falls back to its default."""
        return cls("delete")

    @classmethod
    def append(cls, *values: str) -> ConfigChange:
        """Add ``values`` (one or more) to a list config (those already in it are kept once)."""
        return cls("append", _list_value(values))

    @classmethod
    def subtract(cls, *values: str) -> ConfigChange:
        """Remove ``values`` (one or more) from a list config."""
        return cls("subtract", _list_value(values))

    @property
    def code(self) -> int:
        """Kafka's code for the operation (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)."""
        return _CONFIG_OPS[self.op]


def _list_value(values: Sequence[str]) -> str:
    if not values or not all(values):
        raise ValueError("give one or more non-empty values")
    return ",".join(values)


ConfigValue: TypeAlias = str | ConfigChange | None
"""What a config maps to in an alteration: a value to set, None to delete, or a change."""


@dataclass(frozen=True)
class GroupListing:
    """A consumer group as ListGroups names it."""

    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    """A member of a described group; ``assignment`` is decoded for consumer groups.

    Attributes:
        member_epoch: the member's epoch in a consumer-protocol (KIP-848) group; -1
            in a classic group.
        target_assignment: where the coordinator is moving the member (KIP-848);
            None in a classic group.
        subscribed_topics: the topic names the member subscribed to (KIP-848).
        subscribed_topic_regex: its regular-expression subscription (KIP-848), if any.
        rack: the rack the member said it is in (KIP-848: its ``client_rack``), if any.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]
    member_epoch: int = -1
    target_assignment: dict[str, list[int]] | None = None
    subscribed_topics: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rack: str | None = None


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group: its state, protocol and members.

    Attributes:
        group_protocol: "classic" (JoinGroup/SyncGroup; DescribeGroups) or
            "consumer" (KIP-848; ConsumerGroupDescribe). For a consumer-protocol
            group ``protocol_type`` is "consumer" and ``protocol`` the broker-side
            assignor.
        group_epoch, assignment_epoch: the group's epoch and that of its target
            assignment (KIP-848); -1 for a classic group.
    """

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    group_protocol: str = "classic"
    group_epoch: int = -1
    assignment_epoch: int = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset to read, and the committer's metadata."""

    offset: int
    metadata: str | None = None


@dataclass(frozen=True)
class PartitionLag:
    """How far a group is behind on one partition.

    Attributes:
        committed: the group's committed offset (-1: none).
        end: the partition's end (the last stable offset: what a
            read_committed consumer can reach).
        lag: ``end - committed``, or ``end - log start`` with nothing committed.
    """

    topic: str
    partition: int
    committed: int
    end: int
    lag: int


#: Config sources, by Kafka's ConfigSource code.
CONFIG_SOURCES = {
    0: "unknown",
    1: "dynamic_topic",
    2: "dynamic_broker",
    3: "dynamic_default_broker",
    4: "static_broker",
    5: "default",
    6: "dynamic_broker_logger",
    7: "client_metrics",
    8: "group",
}
