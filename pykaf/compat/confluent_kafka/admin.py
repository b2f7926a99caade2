"""confluent-kafka's ``confluent_kafka.admin``: ``AdminClient`` on :class:`pykaf.sync.Admin`.

Each call returns ``{item: concurrent.futures.Future}`` at once, as
confluent-kafka's does; the work runs in a thread of the client's own, and a
future's ``result()`` raises :class:`KafkaException` for its item's error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
            raise KafkaException(from_pykaf(exc)) from exc
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
