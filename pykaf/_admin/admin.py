"""The admin client: topics, partitions, configs, ACLs, consumer groups, offsets, records.

Each call builds the protocol request, sends it to the broker that must
answer it (the controller for topic changes, a group's coordinator for group
calls, each partition's leader for DeleteRecords, every broker for
ListGroups), and turns each item's error code into that error's own class.
Calls about one item raise its error directly (``TopicExistsError``);
calls about many raise :class:`AdminError` listing each failed item's error,
after the others were carried out.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf._admin import acls, consumer_groups, share_groups
from pykaf._admin.acls import AclBinding, AclFilter
from pykaf._admin.results import (
    CONFIG_SOURCES,
    BrokerDescription,
    ClusterDescription,
    ConfigChange,
    ConfigEntry,
    ConfigValue,
    GroupDescription,
    GroupListing,
    MemberDescription,
    NewTopic,
    OffsetAndMetadata,
    PartitionDescription,
    PartitionLag,
    TopicDescription,
    TopicPartition,
)
from pykaf._admin.share_groups import ShareGroupOffset
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import NEWEST, OLDEST, Client, client_for
from pykaf._cluster.ends import list_offsets
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection
from pykaf.errors import AdminError
from pykaf.protocol import quirks
from pykaf.protocol.consumer_protocol import decode_assignment

log = logging.getLogger("pykaf.admin")

_METADATA = P.MetadataRequest.API_KEY
_CREATE_TOPICS = P.CreateTopicsRequest.API_KEY
_DELETE_TOPICS = P.DeleteTopicsRequest.API_KEY
_CREATE_PARTITIONS = P.CreatePartitionsRequest.API_KEY
_DESCRIBE_CONFIGS = P.DescribeConfigsRequest.API_KEY
_DELETE_GROUPS = P.DeleteGroupsRequest.API_KEY
_OFFSET_FETCH = P.OffsetFetchRequest.API_KEY
_OFFSET_DELETE = P.OffsetDeleteRequest.API_KEY
_DELETE_RECORDS = P.DeleteRecordsRequest.API_KEY
_LIST_GROUPS_TYPES = 5  # ListGroups filters by group type from v5 (KIP-848)
_TOPIC, _BROKER, _GROUP = 2, 4, 32  # DescribeConfigs / AlterConfigs resource types
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}


def _error(code: int, what: str, message: str | None = None) -> errors.KafkaError | None:
    """The error instance for ``code`` about ``what`` (None for no error)."""
    return rq.error_of(code, what, message)


def _raise_one(operation: str, failures: Mapping[Any, BaseException], items: int) -> None:
    """A call about one item raises its own error; about several, AdminError listing them."""
    if not failures:
        return
    if items == 1:
        raise next(iter(failures.values()))
    raise AdminError(operation, failures)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


def _alter_request(
    kind: int, resources: Sequence[tuple[str, Mapping[str, ConfigValue]]], validate_only: bool
) -> Any:
    R = P.IncrementalAlterConfigsRequest
    out = []
    for name, configs in resources:
        entries = []
        for key, value in configs.items():
            if isinstance(value, ConfigChange):
                change = value
            elif value is None:
                change = ConfigChange("delete")
            else:
                change = ConfigChange("set", value)
            entries.append(
                R.AlterableConfig(name=key, config_operation=change.code, value=change.value)
            )
        out.append(R.AlterConfigsResource(resource_type=kind, resource_name=name, configs=entries))
    return R(resources=out, validate_only=validate_only)


# Answers that mean "ask again": the coordinator moved, is not there yet, or loads.
_COORDINATOR_RETRIABLE = frozenset(
    {
        errors.NotCoordinatorError.code,
        errors.CoordinatorNotAvailableError.code,
        errors.CoordinatorLoadInProgressError.code,
    }
)


class Admin:
    """Cluster administration; get one from :func:`open_admin` (or ``pykaf.sync.Admin``)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    # -- plumbing -----------------------------------------------------------------

    def _timeout_ms(self, timeout: float | None) -> int:
        return int(1000 * (self.client.config.request_timeout if timeout is None else timeout))

    async def _send(self, conn: BrokerConnection, request: Any) -> Any:
        api_key = type(request).API_KEY
        version = conn.version_for(api_key)
        if not self.client.metadata.updates:  # the cluster id is in the metadata
            await self.client.refresh_metadata()
        # quirk: mock-admin-flexible-versions (OffsetFetch is not capped: its
        # v8+ groups form is the one Tansu answers right for "all")
        cap = quirks.MOCK_CAPS.get(api_key)
        if cap is not None and quirks.is_librdkafka_mock(self.client.metadata.cluster_id):
            version = cap.pick(conn)
        return await conn.request(request, version)

    def _exchange(self, request: Any) -> Callable[[BrokerConnection], Awaitable[Any]]:
        async def exchange(conn: BrokerConnection) -> Any:
            return await self._send(conn, request)

        return exchange

    async def _to_controller(self, request: Any) -> Any:
        # Answered per item: the caller reads the errors.
        return await rq.call(
            self.client, rq.CONTROLLER, self._exchange(request), what=type(request).__name__
        )

    async def _to_any(self, request: Any) -> Any:
        return await rq.call(
            self.client, rq.ANY_BROKER, self._exchange(request), what=type(request).__name__
        )

    async def _to_coordinator(self, group: str, request: Any) -> Any:
        """Send to ``group``'s coordinator, retrying while it moves or loads.

        The answer's top-level, per-group and (OffsetCommit's) per-partition
        codes count. NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE look the coordinator up
        again; COORDINATOR_LOAD_IN_PROGRESS (a coordinator still reading its
        offsets partition: Kafka answers it on a group's first use) waits
        the retry backoff and asks again. Both until ``request_timeout``; then
        the last answer is returned for the caller to raise.
        """

        def check(response: Any) -> errors.KafkaError | None:
            code = getattr(response, "error_code", 0) or 0
            if not code:
                groups = getattr(response, "groups", None) or getattr(response, "results", None)
                code = next((g.error_code for g in groups or () if g.error_code), 0)
            if not code:  # OffsetCommit answers per partition (NOT_COORDINATOR while loading)
                code = next(
                    (
                        p.error_code
                        for t in getattr(response, "topics", None) or ()
                        for p in getattr(t, "partitions", None) or ()
                        if p.error_code in _COORDINATOR_RETRIABLE
                    ),
                    0,
                )
            return _error(code, f"group {group!r}") if code in _COORDINATOR_RETRIABLE else None

        return await rq.call(
            self.client,
            rq.group_coordinator(group),
            self._exchange(request),
            what=f"{type(request).__name__} for group {group!r}",
            check=check,
            exhausted=lambda failure, response: response,
        )

    async def _metadata(self, topics: Sequence[str] | None) -> Any:
        request = P.MetadataRequest(
            topics=None
            if topics is None
            else [P.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return await self._to_any(request)

    async def _topics_changed(self, expected: Mapping[str, int | None] | None = None) -> None:
        """Wait until the metadata shows a topic change, then refresh the client's.

        Kafka's controller answers CreateTopics, CreatePartitions and
        DeleteTopics once it has committed the change; the brokers learn of it
        a little later. So, up to ``request_timeout``, ask for ``expected``'s
        topics (name -> partition count with a leader each, -1 for any, None
        for deleted) until a broker
        shows each as expected. Then the client, and all that share it, see
        the topics as they are. Neither a slow broker nor a failed refresh
        fails the call: the change itself was made.
        """
        try:
            if expected:
                await self._await_topics(expected)
            await self.client.refresh_metadata()
        except errors.PykafError as exc:
            log.debug("metadata refresh after a topic change failed: %s", exc)

    async def _await_topics(self, expected: Mapping[str, int | None]) -> None:
        seen: dict[str, int | None] = {}

        async def shown() -> bool:
            response = await self._metadata(list(expected))
            seen.clear()
            for t in response.topics:
                seen[t.name] = (
                    None
                    if t.error_code
                    else sum(1 for p in t.partitions if p.leader_id >= 0 and not p.error_code)
                )
            return all(
                seen.get(name) == count or (count == -1 and bool(seen.get(name)))
                for name, count in expected.items()
            )

        config = self.client.config
        if not await rq.wait_until(shown, config.request_timeout, Backoff.of(config)):
            log.debug("the metadata shows %s, not yet %s", seen, dict(expected))

    # -- topics -------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Sequence[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Create topics (a name alone takes the broker's defaults).

        Raises:
            AdminError: some topics were not created; ``failures`` has each
                one's error (``TopicExistsError``,
                ``InvalidReplicationFactorError``, ...). For a single topic
                its error is raised directly.
        """
        specs = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        R = P.CreateTopicsRequest
        request = R(
            topics=[
                R.CreatableTopic(
                    name=t.name,
                    num_partitions=t.partitions if t.assignments is None else -1,
                    replication_factor=t.replication_factor if t.assignments is None else -1,
                    assignments=[
                        R.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
                        for p, ids in (t.assignments or {}).items()
                    ],
                    configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()],
                )
                for t in specs
            ],
            timeout_ms=self._timeout_ms(timeout),
            validate_only=validate_only,
        )
        response = await self._to_controller(request)
        failures = {}
        for result in response.topics:
            error = _error(result.error_code, f"create topic {result.name!r}", result.error_message)
            if error is not None:
                failures[result.name] = error
        if not validate_only and len(failures) < len(specs):
            await self._topics_changed(
                {
                    t.name: len(t.assignments) if t.assignments is not None else t.partitions
                    for t in specs
                    if t.name not in failures
                }
            )
        _raise_one("create_topics", failures, len(specs))

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Create one topic.

        Raises:
            TopicExistsError, InvalidPartitionsError, ...: the broker's error.
        """
        await self.create_topics(
            [NewTopic(name, partitions, replication_factor, dict(configs or {}))],
            validate_only=validate_only,
            timeout=timeout,
        )

    async def delete_topics(self, names: Sequence[str], *, timeout: float | None = None) -> None:
        """Delete topics (by name).

        Raises:
            AdminError: some were not deleted (``UnknownTopicOrPartitionError``
                for one that does not exist); one topic's error directly.
        """
        R = P.DeleteTopicsRequest
        request = R(
            topic_names=list(names),
            topics=[R.DeleteTopicState(name=n) for n in names],
            timeout_ms=self._timeout_ms(timeout),
        )
        response = await self._to_controller(request)
        failures = {}
        for result in response.responses:
            error = _error(
                result.error_code,
                f"delete topic {result.name!r}",
                getattr(result, "error_message", None),
            )
            if error is not None:
                failures[result.name] = error
        if len(failures) < len(names):
            await self._topics_changed({n: None for n in names if n not in failures})
        _raise_one("delete_topics", failures, len(names))

    async def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        """Delete one topic.

        Raises:
            UnknownTopicOrPartitionError: no such topic; or the broker's other error.
        """
        await self.delete_topics([name], timeout=timeout)

    async def list_topics(self, *, internal: bool = False) -> list[str]:
        """The cluster's topic names, sorted (internal ones only if asked for)."""
        response = await self._metadata(None)
        return sorted(
            t.name
            for t in response.topics
            if not t.error_code and (internal or not getattr(t, "is_internal", False))
        )

    async def describe_topics(self, names: Sequence[str]) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas of each topic, from fresh metadata.

        Raises:
            AdminError: some topics could not be described
                (``UnknownTopicOrPartitionError``); one topic's error directly.
        """
        response = await self._metadata(list(names))
        out: dict[str, TopicDescription] = {}
        failures = {}
        for t in response.topics:
            error = _error(t.error_code, f"describe topic {t.name!r}")
            if error is not None:
                failures[t.name] = error
                continue
            topic_id = getattr(t, "topic_id", None)
            out[t.name] = TopicDescription(
                name=t.name,
                topic_id=str(topic_id) if topic_id and any(bytes(topic_id.bytes)) else None,
                internal=bool(getattr(t, "is_internal", False)),
                partitions=sorted(
                    (
                        PartitionDescription(
                            partition=p.partition_index,
                            leader=p.leader_id,
                            leader_epoch=getattr(p, "leader_epoch", -1),
                            replicas=list(p.replica_nodes),
                            isr=list(p.isr_nodes),
                            offline=list(getattr(p, "offline_replicas", None) or []),
                        )
                        for p in t.partitions
                    ),
                    key=lambda d: d.partition,
                ),
            )
        _raise_one("describe_topics", failures, len(names))
        return out

    async def describe_topic(self, name: str) -> TopicDescription:
        """One topic's description.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        return (await self.describe_topics([name]))[name]

    async def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Grow topics to these partition counts (totals, not additions).

        Raises:
            AdminError: some topics were not grown (``InvalidPartitionsError``
                for a count not above the current one); one topic's error directly.
        """
        R = P.CreatePartitionsRequest
        request = R(
            topics=[
                R.CreatePartitionsTopic(name=t, count=n, assignments=None)
                for t, n in counts.items()
            ],
            timeout_ms=self._timeout_ms(timeout),
            validate_only=validate_only,
        )
        response = await self._to_controller(request)
        failures = {}
        for result in response.results:
            error = _error(
                result.error_code, f"create partitions of {result.name!r}", result.error_message
            )
            if error is not None:
                failures[result.name] = error
        if not validate_only and len(failures) < len(counts):
            await self._topics_changed({t: n for t, n in counts.items() if t not in failures})
        _raise_one("create_partitions", failures, len(counts))

    async def describe_cluster(self) -> ClusterDescription:
        """The cluster's id, controller and brokers (from fresh metadata)."""
        response = await self._metadata([])
        return ClusterDescription(
            cluster_id=getattr(response, "cluster_id", None),
            controller_id=getattr(response, "controller_id", -1),
            brokers=sorted(
                (
                    BrokerDescription(b.node_id, b.host, b.port, getattr(b, "rack", None))
                    for b in response.brokers
                ),
                key=lambda b: b.node_id,
            ),
        )

    # -- configs ------------------------------------------------------------------

    async def describe_topic_configs(
        self, names: Sequence[str], *, keys: Sequence[str] | None = None
    ) -> dict[str, dict[str, ConfigEntry]]:
        """Each topic's configs (only ``keys`` if given), by name.

        Raises:
            AdminError: some topics' configs could not be read; one topic's error directly.
        """
        response = await self._to_any(self._describe_configs(_TOPIC, names, keys))
        return self._configs(response, "describe_topic_configs", str)

    async def describe_broker_configs(
        self, node_ids: Sequence[int] | None = None, *, keys: Sequence[str] | None = None
    ) -> dict[int, dict[str, ConfigEntry]]:
        """Each broker's configs (all brokers by default); each broker answers for itself.

        Raises:
            AdminError: some brokers' configs could not be read.
        """
        if node_ids is None:
            node_ids = [b.node_id for b in await self.client.brokers()]
        out: dict[int, dict[str, ConfigEntry]] = {}
        for node_id in node_ids:
            conn = await self.client.broker_connection(node_id)
            response = await self._send(conn, self._describe_configs(_BROKER, [str(node_id)], keys))
            out.update(self._configs(response, "describe_broker_configs", int))
        return out

    @staticmethod
    def _describe_configs(kind: int, names: Sequence[str], keys: Sequence[str] | None) -> Any:
        R = P.DescribeConfigsRequest
        return R(
            resources=[
                R.DescribeConfigsResource(
                    resource_type=kind,
                    resource_name=name,
                    configuration_keys=None if keys is None else list(keys),
                )
                for name in names
            ],
            include_synonyms=False,
            include_documentation=False,
        )

    @staticmethod
    def _configs(response: Any, operation: str, key: Any) -> dict[Any, dict[str, ConfigEntry]]:
        out: dict[Any, dict[str, ConfigEntry]] = {}
        failures = {}
        for result in response.results:
            name = key(result.resource_name)
            error = _error(result.error_code, f"configs of {name!r}", result.error_message)
            if error is not None:
                failures[name] = error
                continue
            entries = {}
            for c in result.configs:
                source = getattr(c, "config_source", -1)
                is_default = bool(getattr(c, "is_default", False)) or source == 5
                entries[c.name] = ConfigEntry(
                    name=c.name,
                    value=c.value,
                    source=CONFIG_SOURCES.get(source, "default" if is_default else "unknown"),
                    read_only=bool(c.read_only),
                    sensitive=bool(c.is_sensitive),
                    default=is_default,
                )
            out[name] = entries
        _raise_one(operation, failures, len(response.results))
        return out

    async def alter_topic_configs(
        self,
        changes: Mapping[str, Mapping[str, ConfigValue]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Change topics' configs incrementally (IncrementalAlterConfigs).

        ``changes`` maps a topic to its changes: a config name to a value to
        set, None to delete its own value (back to the default), or a
        :class:`ConfigChange` (``append``/``subtract`` for list configs).
        Configs not named keep their values. Each topic's changes are applied
        all together or not at all.

        Raises:
            AdminError: some topics' changes were refused; one topic's error
                directly (``InvalidConfigurationError``, ``UnknownTopicOrPartitionError``, ...).
            UnsupportedVersionError: the broker has no IncrementalAlterConfigs.
        """
        request = _alter_request(_TOPIC, [(n, c) for n, c in changes.items()], validate_only)
        response = await self._to_any(request)
        failures = {}
        for r in response.responses:
            error = _error(r.error_code, f"configs of {r.resource_name!r}", r.error_message)
            if error is not None:
                failures[r.resource_name] = error
        _raise_one("alter_topic_configs", failures, len(response.responses))

    async def alter_group_configs(
        self,
        changes: Mapping[str, Mapping[str, ConfigValue]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Change groups' configs incrementally (KIP-848/KIP-932 group configs, Kafka 4.0+).

        ``changes`` maps a group id to its changes, as in
        :meth:`alter_topic_configs`: e.g. ``{"orders": {"share.auto.offset.reset":
        "earliest", "share.record.lock.duration.ms": "15000"}}`` for a share group.

        Raises:
            AdminError: some groups' changes were refused; one group's error directly
                (``InvalidConfigurationError``, ``InvalidRequestError``, ...).
        """
        request = _alter_request(_GROUP, [(n, c) for n, c in changes.items()], validate_only)
        response = await self._to_any(request)
        failures = {}
        for r in response.responses:
            error = _error(r.error_code, f"configs of group {r.resource_name!r}", r.error_message)
            if error is not None:
                failures[r.resource_name] = error
        _raise_one("alter_group_configs", failures, len(response.responses))

    async def alter_broker_configs(
        self,
        changes: Mapping[int | None, Mapping[str, ConfigValue]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Change brokers' dynamic configs incrementally; ``None`` is every broker's default.

        A broker's own changes are sent to that broker; the cluster-wide
        defaults to any broker. Values are as for :meth:`alter_topic_configs`.

        Raises:
            AdminError: some brokers' changes were refused or could not be sent
                (the others were made); one broker's error directly.
        """
        failures: dict[Any, BaseException] = {}
        for node_id, configs in changes.items():
            name = "" if node_id is None else str(node_id)
            request = _alter_request(_BROKER, [(name, configs)], validate_only)
            try:
                if node_id is None:
                    response = await self._to_any(request)
                else:
                    conn = await self.client.broker_connection(node_id)
                    response = await self._send(conn, request)
            except errors.KafkaConnectionError as exc:  # the other brokers still get theirs
                failures[node_id] = exc
                continue
            for r in response.responses:
                what = "the brokers' defaults" if node_id is None else f"broker {node_id}"
                error = _error(r.error_code, f"configs of {what}", r.error_message)
                if error is not None:
                    failures[node_id] = error
        _raise_one("alter_broker_configs", failures, len(changes))

    # -- ACLs ---------------------------------------------------------------------

    async def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACL bindings ``acl_filter`` matches (every binding by default).

        Raises:
            SecurityDisabledError: the cluster has no authorizer.
            InvalidRequestError: an invalid filter.
        """
        response = await self._to_any(acls.describe_request(acl_filter or AclFilter()))
        error = _error(response.error_code, "describe_acls", response.error_message)
        if error is not None:
            raise error
        return acls.described(response)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add ACL bindings (one already there is kept once).

        Raises:
            AdminError: some bindings were refused, keyed by binding; one
                binding's error directly (``InvalidRequestError``, ``SecurityDisabledError``).
        """
        if not bindings:
            return
        response = await self._to_any(acls.create_request(bindings))
        failures = {}
        for binding, result in zip(bindings, response.results, strict=True):
            error = _error(result.error_code, f"ACL {binding}", result.error_message)
            if error is not None:
                failures[binding] = error
        _raise_one("create_acls", failures, len(bindings))

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Delete the ACL bindings each filter matches; returns the bindings deleted.

        Raises:
            AdminError: some filters were refused, keyed by filter, or some
                matching bindings could not be deleted, keyed by binding (the
                others were deleted); one filter's own error directly.
        """
        if not filters:
            return []
        response = await self._to_any(acls.delete_request(filters))
        gone: list[AclBinding] = []
        failures: dict[Any, BaseException] = {}
        refused_count = 0
        for f, result in zip(filters, response.filter_results, strict=True):
            error = _error(result.error_code, f"ACL filter {f}", result.error_message)
            if error is not None:
                failures[f] = error
            removed, refused = acls.deleted(result)
            gone.extend(b for b in removed if b not in gone)
            refused_count += len(refused)
            for binding, code, message in refused:
                failures[binding] = _error(code, f"ACL {binding}", message) or errors.KafkaError()
        # a refused binding makes it an AdminError (naming it) even for one filter
        _raise_one("delete_acls", failures, len(filters) + refused_count)
        return gone

    # -- consumer groups ----------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id.

        Raises:
            KafkaError: a broker's error (e.g. ``CoordinatorLoadInProgressError``).
        """
        out: dict[str, GroupListing] = {}
        for broker in await self.client.brokers():
            conn = await self.client.connect_to(broker)
            response = await self._send(conn, P.ListGroupsRequest())
            error = _error(response.error_code, f"list groups on broker {broker.node_id}")
            if error is not None:
                raise error
            for g in response.groups:
                out[g.group_id] = GroupListing(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    state=getattr(g, "group_state", "") or "",
                )
        return [out[k] for k in sorted(out)]

    async def list_share_groups(self) -> list[GroupListing]:
        """Every share group (KIP-932) of every broker, sorted by id (ListGroups v5's filter).

        Raises:
            UnsupportedVersionError: a broker without ListGroups v5 (before Kafka 4.0).
            KafkaError: a broker's error.
        """
        out: dict[str, GroupListing] = {}
        for broker in await self.client.brokers():
            conn = await self.client.connect_to(broker)
            version = conn.version_for(P.ListGroupsRequest.API_KEY)
            if version < _LIST_GROUPS_TYPES:
                raise errors.UnsupportedVersionError(
                    f"broker {broker.node_id} speaks ListGroups v{version}: no group types "
                    "(share groups need Kafka 4.1 or newer)"
                )
            response = await conn.request(P.ListGroupsRequest(types_filter=["share"]), version)
            error = _error(response.error_code, f"list groups on broker {broker.node_id}")
            if error is not None:
                raise error
            for g in response.groups:
                out[g.group_id] = GroupListing(
                    group_id=g.group_id, protocol_type=g.protocol_type, state=g.group_state
                )
        return [out[k] for k in sorted(out)]

    async def describe_share_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """Share groups (KIP-932) by ShareGroupDescribe: state, epochs, members, assignments.

        ``group_protocol`` and ``protocol_type`` of each result are "share";
        ``protocol`` is the broker's assignor ("simple").

        Raises:
            AdminError: some groups could not be described (``GroupIdNotFoundError``
                for one that is not a share group); one group's error directly.
        """
        out: dict[str, GroupDescription] = {}
        failures: dict[str, errors.KafkaError] = {}
        for group in group_ids:
            response = await self._to_coordinator(group, share_groups.describe_request([group]))
            for g in response.groups:
                error = _error(
                    g.error_code, f"describe share group {g.group_id!r}", g.error_message
                )
                if error is not None:
                    failures[g.group_id] = error
                else:
                    out[g.group_id] = share_groups.described(g)
        _raise_one("describe_share_groups", failures, len(group_ids))
        return out

    async def describe_share_group(self, group_id: str) -> GroupDescription:
        """One share group's description (see :meth:`describe_share_groups`)."""
        return (await self.describe_share_groups([group_id]))[group_id]

    async def list_share_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, ShareGroupOffset]:
        """A share group's start offsets (and lags) by partition (DescribeShareGroupOffsets).

        Raises:
            AdminError: some partitions failed; one error directly.
        """
        request = share_groups.describe_offsets_request(group_id, partitions)
        response = await self._to_coordinator(group_id, request)
        offsets, failures = share_groups.offsets_of(response, group_id)
        _raise_one("list_share_group_offsets", failures, 1)
        return offsets

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Move an empty share group's start offsets (AlterShareGroupOffsets, Kafka 4.1+).

        Raises:
            AdminError: some partitions were refused (``NonEmptyGroupError``... as the
                broker says: a group with members); one error directly.
        """
        request = share_groups.alter_offsets_request(group_id, offsets)
        response = await self._to_coordinator(group_id, request)
        _raise_one("alter_share_group_offsets", share_groups.partition_errors(response), 1)

    async def delete_share_group_offsets(self, group_id: str, topics: Sequence[str]) -> None:
        """Forget an empty share group's state of whole topics (DeleteShareGroupOffsets).

        Raises:
            AdminError: some topics were refused; one error directly.
        """
        request = share_groups.delete_offsets_request(group_id, topics)
        response = await self._to_coordinator(group_id, request)
        _raise_one("delete_share_group_offsets", share_groups.partition_errors(response), 1)

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """Each group's state, protocol and members (with their assignments decoded).

        Any kind of group: a consumer-protocol (KIP-848) group is described by
        ConsumerGroupDescribe, a share group (KIP-932) by ShareGroupDescribe
        (``group_protocol`` tells which), others by DescribeGroups.

        Raises:
            AdminError: some groups could not be described; one group's error directly.
        """
        out: dict[str, GroupDescription] = {}
        failures = {}
        for group in group_ids:
            modern = await self._describe_modern_group(group)
            if isinstance(modern, GroupDescription):
                out[group] = modern
                continue
            if modern is not None:
                failures[group] = modern
                continue
            response = await self._to_coordinator(
                group, P.DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
            )
            for g in response.groups:
                error = _error(g.error_code, f"describe group {g.group_id!r}")
                if error is not None:
                    failures[g.group_id] = error
                    continue
                consumer = g.protocol_type == "consumer"
                out[g.group_id] = GroupDescription(
                    group_id=g.group_id,
                    state=g.group_state,
                    protocol_type=g.protocol_type,
                    protocol=g.protocol_data,
                    members=[
                        MemberDescription(
                            member_id=m.member_id,
                            group_instance_id=getattr(m, "group_instance_id", None),
                            client_id=m.client_id,
                            client_host=m.client_host,
                            assignment=_assignment(m.member_assignment) if consumer else {},
                        )
                        for m in g.members
                    ],
                )
        _raise_one("describe_groups", failures, len(group_ids))
        return out

    async def _describe_modern_group(
        self, group: str
    ) -> GroupDescription | errors.KafkaError | None:
        """``group`` described by ConsumerGroupDescribe, else ShareGroupDescribe.

        None when it is neither kind (GROUP_ID_NOT_FOUND: classic, or no such
        group) or the coordinator predates them: DescribeGroups describes it then.
        """
        kinds = (
            # Only a coordinator with ConsumerGroupHeartbeat can hold such a group.
            # quirk: tansu-consumer-group-describe
            (P.ConsumerGroupHeartbeatRequest, consumer_groups.describe_request, consumer_groups),
            (P.ShareGroupHeartbeatRequest, share_groups.describe_request, share_groups),
        )
        for heartbeat, request, kind in kinds:
            try:
                conn = await self.client.connect_to(await self.client.coordinator(group))
                conn.version_for(heartbeat.API_KEY)
                response = await self._to_coordinator(group, request([group]))
            except errors.UnsupportedVersionError:
                continue
            for g in response.groups:
                if g.error_code == errors.GroupIdNotFoundError.code:
                    break
                error = _error(g.error_code, f"describe group {g.group_id!r}", g.error_message)
                return error if error is not None else kind.described(g)
        return None

    async def describe_group(self, group_id: str) -> GroupDescription:
        """One group's description (a group nobody uses is described as "Dead")."""
        return (await self.describe_groups([group_id]))[group_id]

    async def delete_groups(self, group_ids: Sequence[str]) -> None:
        """Delete groups (their committed offsets go with them).

        Raises:
            AdminError: some were not deleted (``GroupNotEmptyError`` while
                members are in it, ``GroupIdNotFoundError``); one group's error directly.
        """
        failures = {}
        for group in group_ids:
            response = await self._to_coordinator(
                group, P.DeleteGroupsRequest(groups_names=[group])
            )
            for result in response.results:
                error = _error(result.error_code, f"delete group {result.group_id!r}")
                if error is not None:
                    failures[result.group_id] = error
        _raise_one("delete_groups", failures, len(group_ids))

    async def delete_group(self, group_id: str) -> None:
        """Delete one group.

        Raises:
            GroupNotEmptyError, GroupIdNotFoundError, ...: the broker's error.
        """
        await self.delete_groups([group_id])

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets, of ``partitions`` or of all it committed.

        Partitions without a commit are left out. With ``require_stable``
        (Java's ``requireStable``, KIP-447) a partition whose offsets a
        transaction has written but not yet ended is asked for again until
        the transaction ends (up to ``request_timeout``), instead of being
        answered with the offset committed before it.

        Raises:
            UnstableOffsetCommitError: with ``require_stable``, a transaction
                still held a partition's offsets after ``request_timeout``.
            KafkaError: the broker's error for the group or a partition.
        """
        deadline = rq.Deadline(self.client.config.request_timeout)
        retries = Retries(Backoff.of(self.client.config))
        while True:
            try:
                return await self._list_group_offsets(group_id, partitions, require_stable)
            except errors.UnstableOffsetCommitError:
                if deadline.passed:
                    raise
            await retries.wait()

    async def _list_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None, require_stable: bool
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        R = P.OffsetFetchRequest
        topics = None if partitions is None else _by_topic(partitions)
        broker = await self.client.coordinator(group_id)
        conn = await self.client.connect_to(broker)
        version = conn.version_for(_OFFSET_FETCH)
        if version >= 8:
            # The groups form (v8+); Tansu garbles "all topics" in the older form
            # (quirk: tansu-offset-fetch-all).
            request = R(
                groups=[
                    R.OffsetFetchRequestGroup(
                        group_id=group_id,
                        member_id=None,
                        member_epoch=-1,
                        topics=None
                        if topics is None
                        else [
                            R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in topics.items()
                        ],
                    )
                ],
                require_stable=require_stable,
            )
        else:
            request = R(
                group_id=group_id,
                topics=None
                if topics is None
                else [
                    R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()
                ],
            )
            if version >= 7:
                request.require_stable = require_stable
        response = await self._to_coordinator(group_id, request)
        code = getattr(response, "error_code", 0) or 0
        answered = response.topics
        for group in getattr(response, "groups", None) or ():
            code = code or group.error_code
            answered = group.topics
        error = _error(code, f"offsets of group {group_id!r}")
        if error is not None:
            raise error
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        failures = {}
        for t in answered:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                error = _error(p.error_code, f"offset of {t.name}/{p.partition_index}")
                if error is not None:
                    failures[tp] = error
                elif p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or None)
        for failure in failures.values():
            if isinstance(failure, errors.UnstableOffsetCommitError):
                raise failure  # the caller asks again while a transaction holds it
        _raise_one("list_group_offsets", failures, len(out) + len(failures))
        return dict(sorted(out.items()))

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Set a group's committed offsets (the group must have no active members).

        Raises:
            AdminError: some partitions were refused (``UnknownMemberIdError``
                while the group is active, ...); one partition's error directly.
        """
        R = P.OffsetCommitRequest
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            by_topic.setdefault(topic, []).append(
                R.OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=om.offset,
                    committed_metadata=om.metadata,
                )
            )
        request = R(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )
        response = await self._to_coordinator(group_id, request)
        failures = {}
        for t in response.topics:
            for p in t.partitions:
                error = _error(
                    p.error_code, f"commit {t.name}/{p.partition_index} for {group_id!r}"
                )
                if error is not None:
                    failures[(t.name, p.partition_index)] = error
        _raise_one("alter_group_offsets", failures, len(offsets))

    async def delete_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> None:
        """Forget a group's committed offsets of ``partitions``.

        None of the group's members may be subscribed to their topics.

        Raises:
            AdminError: some partitions were refused
                (``GroupSubscribedToTopicError``, ...); the group's or one
                partition's error directly.
        """
        R = P.OffsetDeleteRequest
        request = R(
            group_id=group_id,
            topics=[
                R.OffsetDeleteRequestTopic(
                    name=t,
                    partitions=[R.OffsetDeleteRequestPartition(partition_index=p) for p in ps],
                )
                for t, ps in _by_topic(partitions).items()
            ],
        )
        response = await self._to_coordinator(group_id, request)
        error = _error(response.error_code, f"delete offsets of group {group_id!r}")
        if error is not None:
            raise error
        failures = {}
        for t in response.topics:
            for p in t.partitions:
                error = _error(p.error_code, f"delete offset {t.name}/{p.partition_index}")
                if error is not None:
                    failures[(t.name, p.partition_index)] = error
        _raise_one("delete_group_offsets", failures, len(partitions))

    async def group_lag(
        self, group_id: str, topics: Sequence[str] | None = None
    ) -> list[PartitionLag]:
        """How far the group is behind on each partition: committed offset, end, lag.

        The partitions are those of the topics it committed for (or of
        ``topics``); the end is the last stable offset.

        Raises:
            KafkaError: the broker's error.
        """
        committed = await self.list_group_offsets(group_id)
        wanted = set(topics) if topics is not None else {t for t, _ in committed}
        parts = [(t, p) for t in sorted(wanted) for p in await self.client.partitions(t)]
        ends = await list_offsets(self.client, dict.fromkeys(parts, NEWEST))
        starts = await list_offsets(
            self.client, {tp: OLDEST for tp in parts if tp not in committed}
        )
        out = []
        for tp in parts:
            end = ends[tp]
            done = committed[tp].offset if tp in committed else -1
            base = done if done >= 0 else starts[tp]
            out.append(PartitionLag(tp[0], tp[1], done, end, max(0, end - base)))
        return out

    # -- offsets and records ------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_committed",
    ) -> dict[TopicPartition, int]:
        """Offsets of partitions: ``OLDEST``, ``NEWEST`` or at a timestamp.

        ``NEWEST`` is the last stable offset under read_committed (checked
        against a Fetch's watermarks: ``end_offsets``); for a timestamp (ms),
        the first offset at or after it (-1 if none).

        Raises:
            ConfigError: an unknown isolation level.
            KafkaError: a partition's error (``UnknownTopicOrPartitionError``, ...).
        """
        if isolation_level not in _ISOLATION:
            raise errors.ConfigError(f"isolation_level must be one of {', '.join(_ISOLATION)}")
        return await list_offsets(self.client, specs, _ISOLATION[isolation_level])

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Delete every record before these offsets (-1: up to the high watermark).

        Returns:
            Each partition's new log start offset (low watermark).

        Raises:
            AdminError: some partitions were refused (``OffsetOutOfRangeError``
                past the end, ...); one partition's error directly.
        """
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for (topic, partition), offset in before.items():
            leader = await self.client.leader(topic, partition)
            by_leader.setdefault(leader.node_id, {}).setdefault(topic, []).append(
                (partition, offset)
            )
        R = P.DeleteRecordsRequest
        out: dict[TopicPartition, int] = {}
        failures = {}
        for node_id, topics in by_leader.items():
            request = R(
                topics=[
                    R.DeleteRecordsTopic(
                        name=t,
                        partitions=[
                            R.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in ps
                        ],
                    )
                    for t, ps in topics.items()
                ],
                timeout_ms=self._timeout_ms(timeout),
            )
            conn = await self.client.broker_connection(node_id)
            response = await self._send(conn, request)
            for t in response.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    error = _error(p.error_code, f"delete records of {t.name}/{p.partition_index}")
                    if error is not None:
                        failures[tp] = error
                    else:
                        out[tp] = p.low_watermark
        _raise_one("delete_records", failures, len(before))
        return out


def _assignment(data: bytes | None) -> dict[str, list[int]]:
    if not data:
        return {}
    try:
        return decode_assignment(data)
    except (errors.PykafError, ValueError) as exc:
        log.info("a member's assignment could not be decoded: %s", exc)
        return {}


@asynccontextmanager
async def open_admin(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Admin]:
    """Open an admin client.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        **config: client options (:class:`pykaf.ClientConfig`).

    Raises:
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
    """
    async with AsyncExitStack() as stack:
        client, _cfg = await client_for(stack, ClientConfig, bootstrap_servers_or_client, config)
        yield Admin(client)
