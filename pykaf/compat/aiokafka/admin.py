"""``AIOKafkaAdminClient`` (topics, configs, groups) on :func:`pykaf.aio.open_admin`.

aiokafka's admin calls return the broker's answer as a protocol response
object; here each returns a :class:`Response` whose ``to_object()`` holds
the fields aiokafka's answer has under the same names (``topic_errors``
with ``topic``, ``error_code`` and ``error_message`` for ``create_topics``,
...), which is what code reading aiokafka's answers reads. A per-item
failure is reported in its item, as a broker answers; a failure of the
whole call raises the aiokafka error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any

import pykaf
from pykaf import aio
from pykaf import errors as pykaf_errors
from pykaf.compat._lifetime import Held
from pykaf.compat.aiokafka import _config
from pykaf.compat.aiokafka.errors import (
    IllegalStateError,
    KafkaConnectionError,
    from_pykaf,
)
from pykaf.compat.aiokafka.structs import OffsetAndMetadata, TopicPartition
from pykaf.compat.kafka.admin import NewTopic


class ConfigResourceType(IntEnum):
    """The kinds of config resources."""

    BROKER = 4
    TOPIC = 2


class ConfigResource:
    """A topic's or broker's configs to describe (``configs``: names) or alter (names -> values)."""

    def __init__(
        self,
        resource_type: ConfigResourceType | str,
        name: str,
        configs: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> None:
        if not isinstance(resource_type, ConfigResourceType):
            resource_type = ConfigResourceType[str(resource_type).upper()]
        self.resource_type = resource_type
        self.name = name
        self.configs = configs


class NewPartitions:
    """A topic's new partition count (the total, not an addition)."""

    def __init__(self, total_count: int, new_assignments: Any = None) -> None:
        self.total_count = total_count
        self.new_assignments = new_assignments


class RecordsToDelete:
    """Delete a partition's records before ``before_offset``."""

    def __init__(self, before_offset: int) -> None:
        self.before_offset = before_offset


class Response:
    """A call's answer: its fields as attributes, and ``to_object()`` as a dict."""

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_object(self) -> dict[str, Any]:
        """The answer as a dict of aiokafka's field names."""
        return dict(self._fields)

    def __repr__(self) -> str:
        return f"Response({self._fields!r})"


def _code(error: BaseException | None) -> tuple[int, str | None]:
    """The Kafka error code and message of an item's failure (0, None: none)."""
    if error is None:
        return 0, None
    code = getattr(error, "code", None)
    return (code if isinstance(code, int) else -1), str(error)


class AIOKafkaAdminClient:
    """aiokafka's admin client on pykaf: ``AIOKafkaAdminClient(**configs)``, then ``start()``.

    Raises:
        KafkaConfigurationError: an unsupported or invalid option.
        TypeError: an unknown keyword argument.
    """

    def __init__(self, *, bootstrap_servers: str | list[str] = "localhost", **configs: Any) -> None:
        self._servers = _config.servers("bootstrap_servers", bootstrap_servers)
        self._options = _config.translate(
            configs, (_config.CLIENT,), frozenset(), "AIOKafkaAdminClient"
        )
        self._held: Held[aio.Admin] | None = None
        self._admin: aio.Admin | None = None

    async def start(self) -> None:
        """Connect to the cluster.

        Raises:
            KafkaConnectionError: no bootstrap server could be reached.
        """
        if self._held is not None:
            return
        held: Held[aio.Admin] = Held()
        try:
            self._admin = await held.open(lambda: aio.open_admin(self._servers, **self._options))
        except pykaf_errors.KafkaConnectionError as exc:
            raise KafkaConnectionError(f"Unable to bootstrap from {self._servers}: {exc}") from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc) from exc
        self._held = held

    async def close(self) -> None:
        """Close the connections. Idempotent."""
        held, self._held = self._held, None
        self._admin = None
        if held is not None:
            await held.close()

    def _open(self) -> aio.Admin:
        admin = self._admin
        if admin is None:
            raise IllegalStateError("AIOKafkaAdminClient is not started: await start() first")
        return admin

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self._open(), method)(*args, **kwargs)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc) from exc

    async def _items(
        self, method: str, names: Sequence[Any], *args: Any, **kwargs: Any
    ) -> dict[Any, BaseException | None]:
        """Run an admin call over ``names``; each name's failure (or None)."""
        try:
            await getattr(self._open(), method)(*args, **kwargs)
        except pykaf_errors.AdminError as exc:
            return {name: exc.failures.get(name) for name in names}
        except pykaf_errors.KafkaError as exc:
            if len(names) == 1:
                return {names[0]: exc}
            raise from_pykaf(exc) from exc
        return dict.fromkeys(names)

    # -- topics -----------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> Response:
        """Create topics; ``topic_errors``: each topic's ``error_code`` (36: it exists)."""
        names = [t.name for t in new_topics]
        timeout = None if timeout_ms is None else _config.seconds("timeout_ms", timeout_ms)
        failed = await self._items(
            "create_topics",
            names,
            [t.to_pykaf() for t in new_topics],
            validate_only=validate_only,
            timeout=timeout,
        )
        errors = []
        for name in names:
            code, message = _code(failed[name])
            errors.append({"topic": name, "error_code": code, "error_message": message})
        return Response(topic_errors=errors)

    async def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> Response:
        """Delete topics; ``topic_error_codes``: each topic's ``error_code``."""
        names = list(topics)
        timeout = None if timeout_ms is None else _config.seconds("timeout_ms", timeout_ms)
        failed = await self._items("delete_topics", names, names, timeout=timeout)
        codes = [{"topic": name, "error_code": _code(failed[name])[0]} for name in names]
        return Response(throttle_time_ms=0, topic_error_codes=codes)

    async def list_topics(self) -> list[str]:
        """The names of the cluster's topics (internal ones included, as aiokafka)."""
        topics: list[str] = await self._call("list_topics", internal=True)
        return topics

    async def describe_topics(self, topics: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Topics' metadata (all for None), with aiokafka's Metadata field names."""
        names = list(topics) if topics is not None else await self.list_topics()
        described = await self._call("describe_topics", names)
        return [
            {
                "error_code": 0,
                "topic": d.name,
                "is_internal": d.internal,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition": p.partition,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "offline_replicas": list(p.offline),
                    }
                    for p in sorted(d.partitions, key=lambda p: p.partition)
                ],
            }
            for d in (described[name] for name in names)
        ]

    async def describe_cluster(self) -> dict[str, Any]:
        """The brokers, cluster id and controller."""
        cluster = await self._call("describe_cluster")
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in cluster.brokers
            ],
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
        }

    async def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> Response:
        """Grow topics' partition counts; ``topic_errors`` as for :meth:`create_topics`.

        Raises:
            KafkaConfigurationError: ``new_assignments`` (not supported).
        """
        for topic, spec in topic_partitions.items():
            if spec.new_assignments:
                raise from_pykaf(
                    pykaf_errors.ConfigError(
                        f"{topic}: NewPartitions.new_assignments is not supported"
                    )
                )
        names = list(topic_partitions)
        timeout = None if timeout_ms is None else _config.seconds("timeout_ms", timeout_ms)
        counts = {name: spec.total_count for name, spec in topic_partitions.items()}
        failed = await self._items(
            "create_partitions", names, counts, validate_only=validate_only, timeout=timeout
        )
        errors = []
        for name in names:
            code, message = _code(failed[name])
            errors.append({"topic": name, "error_code": code, "error_message": message})
        return Response(throttle_time_ms=0, topic_errors=errors)

    async def delete_records(
        self,
        records_to_delete: Mapping[TopicPartition, RecordsToDelete],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Delete records before the offsets; each partition's new low watermark."""
        timeout = None if timeout_ms is None else _config.seconds("timeout_ms", timeout_ms)
        before = {(tp[0], tp[1]): spec.before_offset for tp, spec in records_to_delete.items()}
        found = await self._call("delete_records", before, timeout=timeout)
        return {TopicPartition(t, p): low for (t, p), low in found.items()}

    # -- configs ----------------------------------------------------------------------

    async def describe_configs(
        self, config_resources: Sequence[ConfigResource], include_synonyms: bool = False
    ) -> list[Response]:
        """Each resource's configs: a response of ``resources`` with ``config_entries``."""
        out = []
        for resource in config_resources:
            keys = list(resource.configs) if resource.configs else None
            if resource.resource_type is ConfigResourceType.TOPIC:
                found = await self._call("describe_topic_configs", [resource.name], keys=keys)
                entries = found[resource.name]
            else:
                node = int(resource.name)
                found = await self._call("describe_broker_configs", [node], keys=keys)
                entries = found[node]
            out.append(
                Response(
                    throttle_time_ms=0,
                    resources=[
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": int(resource.resource_type),
                            "resource_name": resource.name,
                            "config_entries": [
                                {
                                    "config_names": e.name,
                                    "config_value": e.value,
                                    "read_only": e.read_only,
                                    "config_source": e.source,
                                    "is_default": e.default,
                                    "is_sensitive": e.sensitive,
                                }
                                for e in entries.values()
                            ],
                        }
                    ],
                )
            )
        return out

    async def alter_configs(self, config_resources: Sequence[ConfigResource]) -> list[Response]:
        """Set configs (incrementally: names not given keep their values)."""
        out = []
        for resource in config_resources:
            given = resource.configs if isinstance(resource.configs, Mapping) else {}
            changes = {str(k): (None if v is None else str(v)) for k, v in given.items()}
            if resource.resource_type is ConfigResourceType.TOPIC:
                failed = await self._items(
                    "alter_topic_configs", [resource.name], {resource.name: changes}
                )
                error = failed[resource.name]
            else:
                node = int(resource.name)
                failed = await self._items("alter_broker_configs", [node], {node: changes})
                error = failed[node]
            code, message = _code(error)
            out.append(
                Response(
                    throttle_time_ms=0,
                    resources=[
                        {
                            "error_code": code,
                            "error_message": message,
                            "resource_type": int(resource.resource_type),
                            "resource_name": resource.name,
                        }
                    ],
                )
            )
        return out

    # -- groups -----------------------------------------------------------------------

    async def list_consumer_groups(
        self, broker_ids: Sequence[int] | None = None
    ) -> list[tuple[str, str]]:
        """Every group, as ``(group_id, protocol_type)`` (every broker is asked)."""
        listed = await self._call("list_groups")
        return [(g.group_id, g.protocol_type) for g in listed]

    async def describe_consumer_groups(
        self,
        group_ids: Sequence[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
    ) -> list[Response]:
        """Each group's state, protocol and members (with their assignments decoded)."""
        described: dict[str, pykaf.GroupDescription] = await self._call(
            "describe_groups", list(group_ids)
        )
        out = []
        for gid in group_ids:
            d = described[gid]
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_assignment": {
                        TopicPartition(t, p) for t, parts in m.assignment.items() for p in parts
                    },
                }
                for m in d.members
            ]
            group = {
                "error_code": 0,
                "group": gid,
                "state": d.state,
                "protocol_type": d.protocol_type,
                "protocol": d.protocol,
                "members": members,
            }
            out.append(Response(throttle_time_ms=0, groups=[group]))
        return out

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: Sequence[TopicPartition] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions``, or all)."""
        wanted = None if partitions is None else [(tp[0], tp[1]) for tp in partitions]
        found = await self._call("list_group_offsets", group_id, wanted)
        return {
            TopicPartition(t, p): OffsetAndMetadata(om.offset, om.metadata or "")
            for (t, p), om in found.items()
            if om.offset >= 0
        }

    async def delete_consumer_groups(
        self, group_ids: Sequence[str], group_coordinator_id: int | None = None
    ) -> list[tuple[str, int]]:
        """Delete groups; each as ``(group_id, error_code)``."""
        names = list(group_ids)
        failed = await self._items("delete_groups", names, names)
        return [(name, _code(failed[name])[0]) for name in names]

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


__all__ = [
    "AIOKafkaAdminClient",
    "ConfigResource",
    "ConfigResourceType",
    "NewPartitions",
    "NewTopic",
    "RecordsToDelete",
    "Response",
]
