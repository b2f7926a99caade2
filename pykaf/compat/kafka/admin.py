"""``KafkaAdminClient`` for topics and groups, and ``NewTopic``, on :class:`pykaf.sync.Admin`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import pykaf
from pykaf import errors as pykaf_errors
from pykaf.compat.kafka import _config
from pykaf.compat.kafka._shared import AdminLink
from pykaf.compat.kafka.errors import (
    BrokerResponseError,
    KafkaConfigurationError,
    NoError,
    from_pykaf,
)
from pykaf.compat.kafka.structs import OffsetAndMetadata, TopicPartition


class NewTopic:
    """A topic to create: kafka-python's ``NewTopic``.

    Args:
        name: the topic's name.
        num_partitions: partitions (-1: the broker's default).
        replication_factor: replicas per partition (-1: the broker's default).
        replica_assignments: partition -> broker ids, instead of the two counts.
        topic_configs: topic configs, e.g. ``{"cleanup.policy": "compact"}``.
    """

    def __init__(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignments: Mapping[int, Sequence[int]] | None = None,
        topic_configs: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = dict(replica_assignments or {})
        self.topic_configs = dict(topic_configs or {})

    def to_pykaf(self) -> pykaf.NewTopic:
        """The same topic as :class:`pykaf.NewTopic`."""
        return pykaf.NewTopic(
            self.name,
            self.num_partitions,
            self.replication_factor,
            {str(k): str(v) for k, v in self.topic_configs.items()},
            self.replica_assignments or None,
        )

    def __repr__(self) -> str:
        return (
            f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, "
            f"replication_factor={self.replication_factor})"
        )


class MemberInformation(NamedTuple):
    """A group member, as ``describe_consumer_groups`` reports it.

    ``member_metadata`` is None (pykaf does not hand out the raw subscription);
    ``member_assignment`` is the decoded assignment, ``{topic: [partitions]}``.
    """

    member_id: str
    client_id: str
    client_host: str
    member_metadata: None
    member_assignment: dict[str, list[int]]


class GroupInformation(NamedTuple):
    """A consumer group, as ``describe_consumer_groups`` reports it."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberInformation]
    authorized_operations: None


def _results(names: Iterable[str], failures: Mapping[Any, BaseException]) -> dict[str, Any]:
    topics = []
    for name in names:
        error = failures.get(name)
        translated = None if error is None else from_pykaf(error)
        topics.append(
            {
                "name": name,
                "error_code": getattr(translated, "errno", 0 if error is None else -1),
                "error_message": None if error is None else str(error),
            }
        )
    return {"topics": topics}


class KafkaAdminClient:
    """kafka-python's ``KafkaAdminClient`` on pykaf, for topics and consumer groups.

    Takes kafka-python's client configuration names; a name pykaf does not
    support raises :class:`KafkaConfigurationError` naming it.

    Raises:
        KafkaConfigurationError: an unknown, unsupported or invalid option.
        NoBrokersAvailable: no bootstrap server could be reached.
    """

    def __init__(self, **configs: Any) -> None:
        servers = _config.servers(configs.get("bootstrap_servers", "localhost:9092"))
        options = _config.translate(
            configs,
            (_config.CLIENT, _config.ADMIN),
            frozenset({"bootstrap_servers"}),
            "KafkaAdminClient",
        )
        names = _config.user_names(configs, (_config.CLIENT, _config.ADMIN))
        self._link = AdminLink(servers, options, "KafkaAdminClient", names)
        self._link.get()

    def _timeout(self, timeout_ms: float | None) -> float | None:
        return None if timeout_ms is None else _config.seconds("timeout_ms", timeout_ms)

    def _run_items(
        self, method: str, names: list[str], raise_errors: bool, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        admin = self._link.get()
        try:
            getattr(admin, method)(*args, **kwargs)
        except pykaf_errors.AdminError as exc:
            if raise_errors:
                raise from_pykaf(exc) from exc
            return _results(names, exc.failures)
        except pykaf_errors.PykafError as exc:
            if raise_errors or len(names) != 1:
                raise from_pykaf(exc) from exc
            return _results(names, {names[0]: exc})
        return _results(names, {})

    def create_topics(
        self,
        new_topics: Sequence[NewTopic] | Mapping[str, Mapping[str, Any]] | Sequence[str],
        timeout_ms: float | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, Any]:
        """Create topics: ``NewTopic`` objects, names, or ``{name: {num_partitions: ...}}``.

        Returns:
            ``{"topics": [{"name", "error_code", "error_message"}]}``.

        Raises:
            TopicAlreadyExistsError, InvalidPartitionsError, ...: the first
                topic's error (with ``raise_errors``).
        """
        topics: list[pykaf.NewTopic] = []
        if isinstance(new_topics, Mapping):
            for name, spec in new_topics.items():
                unknown = set(spec) - {
                    "num_partitions",
                    "replication_factor",
                    "assignments",
                    "configs",
                }
                if unknown:
                    raise KafkaConfigurationError(f"create_topics: unknown keys {sorted(unknown)}")
                topics.append(
                    NewTopic(
                        name,
                        spec.get("num_partitions", -1),
                        spec.get("replication_factor", -1),
                        spec.get("assignments"),
                        spec.get("configs"),
                    ).to_pykaf()
                )
        else:
            for item in new_topics:
                if isinstance(item, NewTopic):
                    topics.append(item.to_pykaf())
                elif isinstance(item, str):
                    topics.append(pykaf.NewTopic(item))
                else:
                    raise TypeError(f"create_topics takes NewTopic objects or names, not {item!r}")
        return self._run_items(
            "create_topics",
            [t.name for t in topics],
            raise_errors,
            topics,
            validate_only=validate_only,
            timeout=self._timeout(timeout_ms),
        )

    def delete_topics(
        self, topics: Sequence[str], timeout_ms: float | None = None, raise_errors: bool = True
    ) -> dict[str, Any]:
        """Delete topics.

        Returns:
            ``{"topics": [{"name", "error_code", "error_message"}]}``.

        Raises:
            UnknownTopicOrPartitionError, ...: the first topic's error (with ``raise_errors``).
        """
        names = list(topics)
        return self._run_items(
            "delete_topics", names, raise_errors, names, timeout=self._timeout(timeout_ms)
        )

    def list_topics(self) -> list[str]:
        """The names of the cluster's topics (internal ones included, as kafka-python)."""
        result: list[str] = self._link.call("list_topics", internal=True)
        return result

    def describe_topics(self, topics: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Topics' metadata (all topics for None), with Kafka's Metadata field names.

        Each: ``{"error_code", "name", "topic_id", "is_internal", "partitions":
        [{"error_code", "partition_index", "leader_id", "leader_epoch",
        "replica_nodes", "isr_nodes", "offline_replicas"}]}``.
        """
        names = (
            list(topics) if topics is not None else self._link.call("list_topics", internal=True)
        )
        described = self._link.call("describe_topics", names)
        out = []
        for name in names:
            d = described[name]
            out.append(
                {
                    "error_code": 0,
                    "name": d.name,
                    "topic_id": d.topic_id,
                    "is_internal": d.internal,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": p.partition,
                            "leader_id": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replica_nodes": list(p.replicas),
                            "isr_nodes": list(p.isr),
                            "offline_replicas": list(p.offline),
                        }
                        for p in sorted(d.partitions, key=lambda p: p.partition)
                    ],
                }
            )
        return out

    def list_consumer_groups(
        self, broker_ids: Sequence[int] | None = None
    ) -> list[tuple[str, str]]:
        """Every group, as ``(group_id, protocol_type)`` (kafka-python 2's shape).

        Raises:
            KafkaConfigurationError: ``broker_ids`` (pykaf asks every broker).
        """
        if broker_ids is not None:
            raise KafkaConfigurationError("list_consumer_groups(broker_ids=...) is not supported")
        return [(g.group_id, g.protocol_type) for g in self._link.call("list_groups")]

    def describe_consumer_groups(
        self,
        group_ids: Sequence[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
    ) -> list[GroupInformation]:
        """Describe groups: state, protocol, members and their assignments.

        Raises:
            KafkaConfigurationError: ``group_coordinator_id`` or
                ``include_authorized_operations`` (not supported).
        """
        if group_coordinator_id is not None or include_authorized_operations:
            raise KafkaConfigurationError(
                "describe_consumer_groups: group_coordinator_id and "
                "include_authorized_operations are not supported"
            )
        described = self._link.call("describe_groups", list(group_ids))
        return [
            GroupInformation(
                0,
                gid,
                described[gid].state,
                described[gid].protocol_type,
                described[gid].protocol,
                [
                    MemberInformation(
                        m.member_id, m.client_id, m.client_host, None, dict(m.assignment)
                    )
                    for m in described[gid].members
                ],
                None,
            )
            for gid in group_ids
        ]

    def delete_consumer_groups(
        self, group_ids: Sequence[str], group_coordinator_id: int | None = None
    ) -> list[tuple[str, type[BrokerResponseError]]]:
        """Delete groups; returns ``(group_id, error class)`` per group (``NoError`` on success).

        Raises:
            KafkaConfigurationError: ``group_coordinator_id`` (not supported).
        """
        if group_coordinator_id is not None:
            raise KafkaConfigurationError(
                "delete_consumer_groups(group_coordinator_id=...) is not supported"
            )
        ids = list(group_ids)
        admin = self._link.get()
        failures: dict[Any, BaseException] = {}
        try:
            admin.delete_groups(ids)
        except pykaf_errors.AdminError as exc:
            failures = exc.failures
        except pykaf_errors.KafkaError as exc:
            if len(ids) != 1:
                raise from_pykaf(exc) from exc
            failures = {ids[0]: exc}
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc) from exc
        out: list[tuple[str, type[BrokerResponseError]]] = []
        for gid in ids:
            error = failures.get(gid)
            translated = None if error is None else from_pykaf(error)
            if translated is not None and not isinstance(translated, BrokerResponseError):
                raise translated from error
            out.append((gid, NoError if translated is None else type(translated)))
        return out

    def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: Sequence[TopicPartition] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets (all of them, or of ``partitions``).

        Raises:
            KafkaConfigurationError: ``group_coordinator_id`` (not supported).
        """
        if group_coordinator_id is not None:
            raise KafkaConfigurationError(
                "list_consumer_group_offsets(group_coordinator_id=...) is not supported"
            )
        wanted = None if partitions is None else [(tp[0], tp[1]) for tp in partitions]
        found = self._link.call("list_group_offsets", group_id, wanted)
        return {
            TopicPartition(t, p): OffsetAndMetadata(om.offset, om.metadata or "", -1)
            for (t, p), om in found.items()
            if om.offset >= 0
        }

    def close(self) -> None:
        """Close the client's connections. Idempotent."""
        self._link.close()

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["GroupInformation", "KafkaAdminClient", "MemberInformation", "NewTopic"]
