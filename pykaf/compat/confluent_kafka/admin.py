"""confluent-kafka's ``confluent_kafka.admin``: ``AdminClient`` on :class:`pykaf.sync.Admin`.

Each call returns ``{item: concurrent.futures.Future}`` at once, as
confluent-kafka's does; the work runs in a thread of the client's own, and a
future's ``result()`` raises :class:`KafkaException` for its item's error.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.compat.confluent_kafka._config import translate
from pykaf.compat.confluent_kafka._error import (
    LOCAL_CODES,
    KafkaError,
    KafkaException,
    from_pykaf,
)
from pykaf.compat.confluent_kafka._types import TopicPartition

K = TypeVar("K")


class BrokerMetadata:
    """A broker of :class:`ClusterMetadata`: ``id``, ``host``, ``port``."""

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        self.id = broker_id
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"


class PartitionMetadata:
    """A partition of :class:`TopicMetadata`: ``id``, ``leader``, ``replicas``, ``isrs``."""

    def __init__(self, partition: int, leader: int, replicas: list[int], isrs: list[int]) -> None:
        self.id = partition
        self.leader = leader
        self.replicas = replicas
        self.isrs = isrs
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        return f"PartitionMetadata({self.id})"


class TopicMetadata:
    """A topic of :class:`ClusterMetadata`: ``topic``, ``partitions`` (by id), ``error``."""

    def __init__(
        self, topic: str, partitions: dict[int, PartitionMetadata], error: KafkaError | None
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.error = error

    def __repr__(self) -> str:
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"


class ClusterMetadata:
    """What ``list_topics`` returns: ``cluster_id``, ``controller_id``, ``brokers``, ``topics``."""

    def __init__(
        self,
        cluster_id: str | None,
        controller_id: int,
        brokers: dict[int, BrokerMetadata],
        topics: dict[str, TopicMetadata],
    ) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.brokers = brokers
        self.topics = topics
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None


def cluster_metadata(admin: pykaf.sync.Admin, topic: str | None) -> ClusterMetadata:
    """``list_topics(topic)`` as confluent-kafka answers it, from a pykaf admin client.

    A topic asked for by name that does not exist is listed with the error
    ``UNKNOWN_TOPIC_OR_PART`` and no partitions.

    Raises:
        KafkaException: the cluster could not be asked.
    """
    try:
        cluster = admin.describe_cluster()
        names = [topic] if topic is not None else admin.list_topics()
        topics: dict[str, TopicMetadata] = {}
        for name in names:
            try:
                described = admin.describe_topic(name)
            except errors.UnknownTopicOrPartitionError as exc:
                topics[name] = TopicMetadata(name, {}, from_pykaf(exc))
                continue
            parts = {
                p.partition: PartitionMetadata(p.partition, p.leader, list(p.replicas), list(p.isr))
                for p in described.partitions
            }
            topics[name] = TopicMetadata(name, parts, None)
    except errors.PykafError as exc:
        raise KafkaException(from_pykaf(exc)) from exc
    brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port) for b in cluster.brokers}
    return ClusterMetadata(cluster.cluster_id, cluster.controller_id, brokers, topics)


class NewTopic:
    """A topic to create.

    Args:
        topic: its name.
        num_partitions: partitions (-1: the broker's default).
        replication_factor: replicas (-1: the broker's default).
        replica_assignment: per partition, the broker ids (instead of the two above).
        config: topic configs.
    """

    def __init__(
        self,
        topic: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignment = [list(r) for r in replica_assignment or []]
        self.config = dict(config or {})

    def __repr__(self) -> str:
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"


class NewPartitions:
    """A topic's new partition count (``replica_assignment`` is not supported by pykaf).

    Raises:
        KafkaException: ``replica_assignment`` given (pykaf's create_partitions
            takes counts only).
    """

    def __init__(
        self,
        topic: str,
        new_total_count: int,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        if replica_assignment:
            raise KafkaException(
                LOCAL_CODES["_INVALID_ARG"],
                "NewPartitions(replica_assignment=...) is not supported: pykaf's "
                "create_partitions takes partition counts only",
            )
        self.topic = topic
        self.new_total_count = new_total_count


class ResourceType(enum.Enum):
    """Kinds of config resources (confluent-kafka's values)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


class ConfigSource(enum.Enum):
    """Where a config's value comes from (Kafka's ConfigSource)."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class AlterConfigOpType(enum.Enum):
    """An incremental config change's operation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConsumerGroupState(enum.Enum):
    """A consumer group's state."""

    UNKNOWN = 0
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5


_SOURCES = {
    "dynamic_topic": ConfigSource.DYNAMIC_TOPIC_CONFIG,
    "dynamic_broker": ConfigSource.DYNAMIC_BROKER_CONFIG,
    "dynamic_default_broker": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    "static_broker": ConfigSource.STATIC_BROKER_CONFIG,
    "default": ConfigSource.DEFAULT_CONFIG,
    "group": ConfigSource.GROUP_CONFIG,
}
_STATES = {
    "preparingrebalance": ConsumerGroupState.PREPARING_REBALANCING,
    "completingrebalance": ConsumerGroupState.COMPLETING_REBALANCING,
    "stable": ConsumerGroupState.STABLE,
    "dead": ConsumerGroupState.DEAD,
    "empty": ConsumerGroupState.EMPTY,
}


def _state(text: str) -> ConsumerGroupState:
    return _STATES.get(text.replace("_", "").lower(), ConsumerGroupState.UNKNOWN)


class ConfigEntry:
    """A config: described (``value``, ``source``, flags), or a change to make."""

    def __init__(
        self,
        name: str,
        value: str | None,
        source: ConfigSource = ConfigSource.UNKNOWN_CONFIG,
        is_read_only: bool = False,
        is_default: bool = False,
        is_sensitive: bool = False,
        is_synonym: bool = False,
        synonyms: dict[str, ConfigEntry] | None = None,
        incremental_operation: AlterConfigOpType | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.is_read_only = is_read_only
        self.is_default = is_default
        self.is_sensitive = is_sensitive
        self.is_synonym = is_synonym
        self.synonyms = dict(synonyms or {})
        self.incremental_operation = incremental_operation

    def __repr__(self) -> str:
        return f"ConfigEntry({self.name}={self.value!r})"


class ConfigResource:
    """A topic or broker whose configs are described or changed.

    Args:
        restype: ``ResourceType.TOPIC`` or ``ResourceType.BROKER`` (or "topic",
            "broker", or the enum's int).
        name: the topic, or the broker id as a string.

    Raises:
        ValueError: another resource type (pykaf describes and alters topic
            and broker configs only).
    """

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: Mapping[str, str] | None = None,
        described_configs: Mapping[str, ConfigEntry] | None = None,
        error: Any = None,
        incremental_configs: Sequence[ConfigEntry] | None = None,
    ) -> None:
        if isinstance(restype, str):
            restype = ResourceType[restype.upper()]
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        if restype not in (ResourceType.TOPIC, ResourceType.BROKER):
            raise ValueError(f"ConfigResource: {restype} is not supported (TOPIC or BROKER)")
        if restype is ResourceType.BROKER and not name.isdigit():
            raise ValueError(f"ConfigResource: a broker is named by its id, not {name!r}")
        if set_config:
            raise ValueError(
                "ConfigResource(set_config=...) is for alter_configs, which pykaf does not "
                "support; use incremental_configs with incremental_alter_configs"
            )
        self.restype = restype
        self.name = name
        self.configs = dict(described_configs or {})
        self.error = error
        self.incremental_configs = list(incremental_configs or [])

    def add_incremental_config(self, config: ConfigEntry) -> None:
        """Add a change (a :class:`ConfigEntry` with ``incremental_operation``)."""
        if config.incremental_operation is None:
            raise ValueError(f"{config!r} has no incremental_operation")
        self.incremental_configs.append(config)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return (self.restype, self.name) == (other.restype, other.name)

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __repr__(self) -> str:
        return f"ConfigResource({self.restype.name},{self.name})"


class ConsumerGroupListing:
    """A group as ``list_consumer_groups`` lists it."""

    def __init__(
        self, group_id: str, is_simple_consumer_group: bool, state: ConsumerGroupState
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.state = state


class ListConsumerGroupsResult:
    """``list_consumer_groups``'s result: ``valid`` listings and ``errors``."""

    def __init__(
        self,
        valid: list[ConsumerGroupListing] | None = None,
        errors: list[Exception] | None = None,
    ) -> None:
        self.valid = list(valid or [])
        self.errors = list(errors or [])


class MemberAssignment:
    """A member's partitions: ``topic_partitions``, a list of ``TopicPartition``."""

    def __init__(self, topic_partitions: list[TopicPartition]) -> None:
        self.topic_partitions = topic_partitions


class MemberDescription:
    """A member of a described group."""

    def __init__(
        self,
        member_id: str,
        client_id: str,
        host: str,
        assignment: MemberAssignment,
        group_instance_id: str | None = None,
    ) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.host = host
        self.assignment = assignment
        self.group_instance_id = group_instance_id


class ConsumerGroupDescription:
    """A described group (``coordinator`` is None: pykaf's DescribeGroups does not report it)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        members: list[MemberDescription],
        partition_assignor: str,
        state: ConsumerGroupState,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.members = members
        self.partition_assignor = partition_assignor
        self.state = state
        self.coordinator = None


_CHANGES: dict[AlterConfigOpType, Callable[[ConfigEntry], pykaf.ConfigChange]] = {
    AlterConfigOpType.SET: lambda e: pykaf.ConfigChange("set", e.value),
    AlterConfigOpType.DELETE: lambda e: pykaf.ConfigChange("delete"),
    AlterConfigOpType.APPEND: lambda e: pykaf.ConfigChange("append", e.value),
    AlterConfigOpType.SUBTRACT: lambda e: pykaf.ConfigChange("subtract", e.value),
}


def _entries(found: Mapping[str, pykaf.ConfigEntry]) -> dict[str, ConfigEntry]:
    return {
        name: ConfigEntry(
            name,
            entry.value,
            _SOURCES.get(entry.source, ConfigSource.UNKNOWN_CONFIG),
            is_read_only=entry.read_only,
            is_default=entry.default,
            is_sensitive=entry.sensitive,
        )
        for name, entry in found.items()
    }


class AdminClient:
    """confluent-kafka's admin client on :class:`pykaf.sync.Admin`.

    Args:
        conf: librdkafka's client keys (``bootstrap.servers``, ``client.id``,
            ``security.protocol``, ``sasl.*``, ``ssl.*``, ...).

    Raises:
        KafkaException: an unsupported key or bad value (``_INVALID_ARG``),
            or no broker reachable (``_TRANSPORT``).
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        settings = translate(conf, "admin")
        try:
            self._admin = pykaf.sync.Admin(settings.bootstrap, **settings.options)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, settings.names)) from exc
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pykaf-compat-admin")

    def _each(self, items: list[K], call: Callable[[], object]) -> dict[K, Future[None]]:
        """Futures per item of one call: an AdminError fails the items it names."""
        futures: dict[K, Future[None]] = {item: Future() for item in items}

        def run() -> None:
            try:
                call()
            except errors.AdminError as exc:
                for item, future in futures.items():
                    key = getattr(item, "topic", item)
                    error = exc.failures.get(key)
                    if error is None:
                        future.set_result(None)
                    else:
                        future.set_exception(KafkaException(from_pykaf(error)))
                return
            except BaseException as exc:
                for future in futures.values():
                    future.set_exception(KafkaException(from_pykaf(exc)))
                return
            for future in futures.values():
                future.set_result(None)

        self._pool.submit(run)
        return futures

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Create topics: ``{topic name: future}`` (the future's result is None)."""
        specs = []
        for topic in new_topics:
            if not isinstance(topic, NewTopic):
                raise TypeError(f"create_topics takes NewTopic objects, not {topic!r}")
            assignments = dict(enumerate(topic.replica_assignment)) or None
            specs.append(
                pykaf.NewTopic(
                    topic.topic,
                    -1 if assignments else topic.num_partitions,
                    -1 if assignments else topic.replication_factor,
                    topic.config,
                    assignments=assignments,
                )
            )
        timeout = operation_timeout or None
        futures = self._each(
            [t.topic for t in new_topics],
            lambda: self._admin.create_topics(specs, validate_only=validate_only, timeout=timeout),
        )
        return {str(k): f for k, f in futures.items()}

    def delete_topics(
        self,
        topics: Sequence[str],
        operation_timeout: float = 0,
        request_timeout: float | None = None,
    ) -> dict[str, Future[None]]:
        """Delete topics: ``{topic name: future}``."""
        names = list(topics)
        timeout = operation_timeout or None
        return self._each(names, lambda: self._admin.delete_topics(names, timeout=timeout))

    def create_partitions(
        self,
        new_partitions: Sequence[NewPartitions],
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Grow topics to ``new_total_count`` partitions: ``{topic name: future}``."""
        counts = {p.topic: p.new_total_count for p in new_partitions}
        timeout = operation_timeout or None
        return self._each(
            list(counts),
            lambda: self._admin.create_partitions(
                counts, validate_only=validate_only, timeout=timeout
            ),
        )

    def delete_consumer_groups(
        self, group_ids: Sequence[str], request_timeout: float | None = None
    ) -> dict[str, Future[None]]:
        """Delete (empty) consumer groups: ``{group id: future}``."""
        ids = list(group_ids)
        return self._each(ids, lambda: self._admin.delete_groups(ids))

    def _one(self, call: Callable[[], Any]) -> Future[Any]:
        """A future for one call's result; a pykaf error becomes a KafkaException."""
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(call())
            except BaseException as exc:
                future.set_exception(KafkaException(from_pykaf(exc)))

        self._pool.submit(run)
        return future

    def describe_configs(
        self, resources: Sequence[ConfigResource], request_timeout: float | None = None
    ) -> dict[ConfigResource, Future[dict[str, ConfigEntry]]]:
        """Configs of topics and brokers: ``{resource: future of {name: ConfigEntry}}``."""
        out: dict[ConfigResource, Future[dict[str, ConfigEntry]]] = {}
        for resource in resources:
            out[resource] = self._one(partial(self._described, resource))
        return out

    def _described(self, resource: ConfigResource) -> dict[str, ConfigEntry]:
        if resource.restype is ResourceType.TOPIC:
            return _entries(self._admin.describe_topic_configs([resource.name])[resource.name])
        node = int(resource.name)
        return _entries(self._admin.describe_broker_configs([node])[node])

    def incremental_alter_configs(
        self,
        resources: Sequence[ConfigResource],
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[ConfigResource, Future[None]]:
        """Apply each resource's ``incremental_configs``: ``{resource: future}``.

        Raises:
            ValueError: a resource without changes.
        """
        out: dict[ConfigResource, Future[None]] = {}
        for resource in resources:
            if not resource.incremental_configs:
                raise ValueError(f"{resource!r} has no incremental_configs")
            changes = {
                e.name: _CHANGES[e.incremental_operation](e)  # type: ignore[index]
                for e in resource.incremental_configs
            }
            if resource.restype is ResourceType.TOPIC:
                topic = {resource.name: changes}
                call = partial(self._admin.alter_topic_configs, topic, validate_only=validate_only)
            else:
                broker: dict[int | None, Any] = {int(resource.name): changes}
                call = partial(
                    self._admin.alter_broker_configs, broker, validate_only=validate_only
                )
            out[resource] = self._one(call)
        return out

    def list_consumer_groups(
        self,
        request_timeout: float | None = None,
        states: set[ConsumerGroupState] | None = None,
    ) -> Future[ListConsumerGroupsResult]:
        """Every group (or those in ``states``): a future of :class:`ListConsumerGroupsResult`."""

        def listed() -> ListConsumerGroupsResult:
            valid = [
                ConsumerGroupListing(g.group_id, g.protocol_type != "consumer", _state(g.state))
                for g in self._admin.list_groups()
            ]
            return ListConsumerGroupsResult([g for g in valid if not states or g.state in states])

        return self._one(listed)

    def describe_consumer_groups(
        self, group_ids: Sequence[str], request_timeout: float | None = None
    ) -> dict[str, Future[ConsumerGroupDescription]]:
        """Describe groups: ``{group id: future of ConsumerGroupDescription}``."""

        def described(group_id: str) -> ConsumerGroupDescription:
            group = self._admin.describe_group(group_id)
            members = [
                MemberDescription(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    MemberAssignment(
                        [
                            TopicPartition(t, p)
                            for t in sorted(m.assignment)
                            for p in m.assignment[t]
                        ]
                    ),
                    m.group_instance_id,
                )
                for m in group.members
            ]
            return ConsumerGroupDescription(
                group.group_id,
                group.protocol_type != "consumer",
                members,
                group.protocol,
                _state(group.state),
            )

        return {g: self._one(partial(described, g)) for g in group_ids}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (or only ``topic``), blocking.

        Raises:
            KafkaException: the cluster could not be asked.
        """
        return cluster_metadata(self._admin, topic)

    def close(self) -> None:
        """Release the connections (confluent-kafka has no such call; the shim's own)."""
        self._pool.shutdown(wait=True)
        self._admin.close()


__all__ = [
    "AdminClient",
    "AlterConfigOpType",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ListConsumerGroupsResult",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "PartitionMetadata",
    "ResourceType",
    "TopicMetadata",
]
