"""The cluster client: bootstrap, metadata, leaders, coordinators, offsets.

``open_client()`` is an async context manager owning a nursery that hosts the
connections' reader tasks and the periodic metadata refresh. Its surface is
sarama's ``Client`` in Python names. Every method that may need the network
is async; metadata lookups refresh the cache when it does not know the answer.

Rebootstrap (KIP-899, KIP-1102): once metadata named the cluster's brokers,
requests for "any broker" go to those brokers only. When none of them can be
reached, when metadata refreshes kept failing for
``metadata_recovery_rebootstrap_trigger`` seconds, or when a broker answers
Metadata with REBOOTSTRAP_REQUIRED, the client (with the default
``metadata_recovery_strategy="rebootstrap"``) forgets them, closes its
connections and starts again from ``bootstrap_servers``, as when it opened.
With ``"none"`` it keeps to the known brokers and raises a typed error.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.metadata import BrokerInfo, Metadata, PartitionInfo
from pykaf._cluster.pool import ConnectionPool
from pykaf._cluster.router import PartitionRouter
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection
from pykaf._net.metrics import RequestStatistics, merge
from pykaf._util import open_service_nursery, require_trio
from pykaf.protocol.connection import BrokerVersions

log = logging.getLogger("pykaf.cluster")

OLDEST = -2
"""The earliest offset a partition still holds (a ``get_offset`` time, a seek target)."""
NEWEST = -1
"""The next offset to be written to a partition (a ``get_offset`` time, a seek target)."""

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
#: Seconds a topic this client asked the broker to create may stay unknown
#: before the broker is taken not to auto-create it (Kafka creates one in far
#: less; request_timeout caps it too).
AUTO_CREATE_WAIT = 5.0

_METADATA = P.MetadataRequest.API_KEY
_LIST_OFFSETS = P.ListOffsetsRequest.API_KEY
_FIND_COORDINATOR = P.FindCoordinatorRequest.API_KEY


@dataclass(frozen=True, slots=True)
class ClientStatistics:
    """A snapshot of the client's state and counters."""

    brokers: int
    topics: int
    connections: int
    connects: int
    connect_failures: int
    metadata_refreshes: int
    #: Times the client went back to its bootstrap servers (KIP-1102).
    rebootstraps: int
    requests_sent: int
    bytes_sent: int
    bytes_received: int
    #: Per broker and API: count, errors, mean and longest round trip (open connections).
    requests: list[RequestStatistics] = field(default_factory=list)


class Client:
    """A connection to a Kafka cluster; get one from :func:`open_client`."""

    def __init__(self, nursery: trio.Nursery, config: ClientConfig) -> None:
        self.config = config
        self._nursery = nursery
        self._pool = ConnectionPool(nursery, config)
        self.metadata = Metadata()
        #: the leaders of requests sent once to a partition's leader (the
        #: request path's); roles follow their routes on routers of their own
        self.router = PartitionRouter(self, Backoff.of(config))
        self._refresh_lock = trio.Lock()
        self._refreshes = 0  # refreshes completed
        self._coordinators: dict[tuple[int, str], BrokerInfo] = {}
        self._closed = False
        # Rebootstrap state: whether "any broker" means the bootstrap servers
        # (before the first metadata, and after a rebootstrap until metadata
        # arrives again), since when metadata refreshes have kept failing
        # (None while the last one succeeded), and how often it happened.
        self._bootstrapping = True
        self._failing_since: float | None = None
        self.rebootstraps = 0

    # -- lifecycle --------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._pool.aclose()

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ClosedError("the client is closed")

    # -- connections ------------------------------------------------------------

    async def broker_connection(self, node_id: int) -> BrokerConnection:
        """A live connection to broker ``node_id`` (refreshing metadata if unknown).

        Raises:
            BrokerNotAvailableError: no such broker in the cluster metadata.
            KafkaConnectionError: the broker cannot be reached.
        """
        self._check_open()
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata()
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise errors.BrokerNotAvailableError(f"broker {node_id} is not in the cluster")
        return await self._pool.get(broker.host, broker.port, node_id)

    def live_connection(self, node_id: int) -> BrokerConnection | None:
        """Broker ``node_id``'s connection if it is open now, else None (nothing is awaited)."""
        if self._closed:
            return None
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            return None
        return self._pool.live(broker.host, broker.port)

    async def connect_to(self, broker: BrokerInfo) -> BrokerConnection:
        """A live connection to ``broker`` (which need not be in the metadata)."""
        self._check_open()
        return await self._pool.get(broker.host, broker.port, broker.node_id)

    async def any_connection(self) -> BrokerConnection:
        """A connection to some reachable broker of the cluster's metadata.

        Before the first metadata (and after a rebootstrap) that is a bootstrap
        server. When no known broker can be reached, the client rebootstraps
        (``metadata_recovery_strategy="rebootstrap"``) or gives up.

        Raises:
            KafkaConnectionError: no broker could be reached.
        """
        self._check_open()
        if self._should_rebootstrap():
            self.rebootstrap(
                "metadata refreshes have failed for"
                f" {self.config.metadata_recovery_rebootstrap_trigger:g}s"
            )
        if self._bootstrapping:
            return await self._bootstrap_connection()
        known = {(b.host, b.port): b for b in self.metadata.brokers.values()}
        live = [c for c in self._pool.connections() if (c.host, c.port) in known]
        if live:
            return min(live, key=lambda c: c.in_flight)
        candidates = list(known.values())
        random.shuffle(candidates)
        last: Exception | None = None
        for b in candidates:
            try:
                return await self._pool.get(b.host, b.port, b.node_id)
            except errors.KafkaConnectionError as exc:
                last = exc
        addresses = ", ".join(sorted(b.address for b in candidates))
        if self.config.metadata_recovery_strategy == "none":
            raise errors.KafkaConnectionError(
                f"none of the known brokers ({addresses}) is reachable: {last}"
                " (metadata_recovery_strategy='none': the client does not go back"
                " to its bootstrap servers)"
            )
        self.rebootstrap(f"none of the known brokers ({addresses}) is reachable: {last}")
        return await self._bootstrap_connection()

    async def _bootstrap_connection(self) -> BrokerConnection:
        # Names are resolved again on each connect: a rebootstrap finds
        # brokers whose addresses changed behind the same name.
        last: Exception | None = None
        for host, port in self.config.bootstrap:
            try:
                return await self._pool.get(host, port, -1)
            except errors.KafkaConnectionError as exc:
                last = exc
        raise errors.KafkaConnectionError(f"no broker reachable: {last}")

    def _should_rebootstrap(self) -> bool:
        return (
            self.config.metadata_recovery_strategy == "rebootstrap"
            and not self._bootstrapping
            and self._failing_since is not None
            and rq.now() - self._failing_since >= self.config.metadata_recovery_rebootstrap_trigger
        )

    def rebootstrap(self, reason: str) -> None:
        """Forget the known brokers and start again from ``bootstrap_servers`` (KIP-899).

        Every connection is closed (requests in flight on them fail with a
        retriable KafkaConnectionError): a broker that hangs is left too. The
        next request for any broker goes to a bootstrap server, whose metadata
        names the brokers again. Cached coordinators are forgotten.
        """
        log.warning("rebootstrapping from %s: %s", self.config.bootstrap_servers, reason)
        self.rebootstraps += 1
        self._bootstrapping = True
        self._failing_since = None
        self._coordinators.clear()
        self._pool.drop_all()

    async def request(self, node_id: int, request: Any, version: int | None = None) -> Any:
        """Send ``request`` to broker ``node_id`` and return the response body."""
        conn = await self.broker_connection(node_id)
        return await conn.request(request, version)

    # -- metadata ---------------------------------------------------------------

    async def refresh_metadata(self, *topics: str) -> None:
        """Fetch fresh metadata (all topics, or ``topics`` when metadata_full is off).

        Concurrent callers share one request: whoever waited while another
        refresh ran does not start a second one.

        Raises:
            KafkaConnectionError: no broker answered.
        """
        self._check_open()
        # Counted, not timed: under a MockClock two calls can share an instant.
        seen = self._refreshes
        async with self._refresh_lock:
            if self._refreshes > seen:  # one completed while this call waited
                return
            await self._refresh(topics)
            self._refreshes += 1

    async def _refresh(self, topics: Sequence[str]) -> None:
        # A full refresh cannot create topics; asking for them by name can.
        full = not topics or (
            self.config.metadata_full and not self.config.allow_auto_create_topics
        )
        # Until some broker answered once (bootstrap), an unreachable cluster
        # is given connect_timeout, not request_timeout: a wrong address is
        # reported in seconds. Later, brokers restarting get request_timeout.
        wait = self.config.request_timeout
        if not self.metadata.updates:
            wait = min(wait, self.config.connect_timeout)

        async def exchange(conn: BrokerConnection) -> None:
            version = conn.version_for(_METADATA)
            req = _metadata_request(None if full else topics, version, self.config)
            resp = await conn.request(req, version)
            self._check_metadata_error(conn, getattr(resp, "error_code", 0))
            topic_errors = self.metadata.update(resp, full=full)
            # A full answer leaves out the topics the principal may not
            # describe: ask for the missing wanted ones by name, whose
            # answer says why (TOPIC_AUTHORIZATION_FAILED, or unknown).
            missing = [t for t in topics if t not in self.metadata.topics] if full else []
            if missing:
                req = _metadata_request(missing, version, self.config)
                resp = await conn.request(req, version)
                topic_errors.update(self.metadata.update(resp, full=False))
            for name, err in topic_errors.items():
                log.debug("metadata for %r: %s", name, err.name)

        failures: list[BaseException] = []

        def retrying(exc: BaseException) -> None:
            if self._failing_since is None:
                self._failing_since = rq.now()
            if not failures:  # at once, not only after the wait: the cause
                log.warning("%s; retrying for up to %gs", exc, wait)
            failures.append(exc)

        def exhausted(last: BaseException, answer: None) -> None:
            raise errors.KafkaConnectionError(f"metadata refresh failed: {last}")

        cluster_id = self.metadata.cluster_id
        try:
            await rq.call(
                self,
                rq.ANY_BROKER,
                exchange,
                what="metadata refresh",
                retry_raised=(
                    errors.KafkaConnectionError,
                    errors.ProtocolError,
                    errors.RetriableError,
                ),
                timeout=wait,
                on_retry=retrying,
                exhausted=exhausted,
            )
        except errors.PykafError:
            if self._failing_since is None:
                self._failing_since = rq.now()
            raise
        if self._bootstrapping and self.metadata.brokers:
            self._bootstrapping = False
            if cluster_id is not None and self.metadata.cluster_id != cluster_id:
                log.warning(
                    "after rebootstrapping the cluster id is %s, not %s as before",
                    self.metadata.cluster_id,
                    cluster_id,
                )
        self._failing_since = None

    def _check_metadata_error(self, conn: BrokerConnection, code: int) -> None:
        """Act on a Metadata response's top-level error code (v13+, KIP-1102)."""
        err = errors.error_for_code(code)
        if err is None:
            return
        where = f"broker {conn.node_id} at {conn.host}:{conn.port}"
        if err is errors.RebootstrapRequiredError:
            # The broker says the client's view of the cluster is too old to
            # refresh from: start again from the bootstrap servers.
            exc = err(f"{where} answered Metadata with REBOOTSTRAP_REQUIRED")
            if self.config.metadata_recovery_strategy == "none":
                raise exc
            self.rebootstrap(str(exc))
            raise errors.KafkaConnectionError(str(exc))
        raise err(f"{where} answered Metadata with {err.name}: {err.description}")

    async def _refresh_loop(self) -> None:
        while True:
            await trio.sleep(self.config.metadata_max_age)
            if self._closed:
                return
            try:
                await self.refresh_metadata()
            except errors.PykafError as exc:
                log.warning("periodic metadata refresh failed: %s", exc)

    async def topics(self) -> list[str]:
        """The names of the cluster's topics."""
        if not self.metadata.updates:
            await self.refresh_metadata()
        return sorted(self.metadata.topics)

    async def _topic(self, topic: str) -> Any:
        t = self.metadata.topics.get(topic)
        if t is None:
            await self.refresh_metadata(topic)
            t = self.metadata.topics.get(topic)
        # A retriable answer about an unknown topic is asked again:
        # LEADER_NOT_AVAILABLE (the topic exists, its leader is being elected)
        # up to request_timeout; with auto-creation asked for, Kafka's
        # UNKNOWN_TOPIC_OR_PARTITION while it creates the topic, for a shorter
        # while: a broker that does not auto-create answers it for ever.
        deadline = rq.Deadline(self.config.request_timeout)
        creating = self.config.allow_auto_create_topics
        creation_deadline = rq.Deadline(min(self.config.request_timeout, AUTO_CREATE_WAIT))
        retries = Retries(Backoff.of(self.config))
        while t is None and not deadline.passed:
            known = self.metadata.topic_errors.get(topic)
            if known is None or not known.retriable:
                break
            if known is errors.UnknownTopicOrPartitionError and (
                not creating or creation_deadline.passed
            ):
                break
            await retries.wait()
            await self.refresh_metadata(topic)
            t = self.metadata.topics.get(topic)
        if t is None:
            known = self.metadata.topic_errors.get(topic)
            if known is not None and known is not errors.UnknownTopicOrPartitionError:
                raise known(f"topic {topic!r}: {known.description}")
            if creating:
                hint = (
                    " and the broker did not create it (its auto.create.topics.enable"
                    " is off): create it with `pykaf topics create` or Admin.create_topics"
                )
            else:
                hint = (
                    " (this client does not ask the broker to create topics:"
                    " allow_auto_create_topics=False)"
                )
            raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} does not exist{hint}")
        return t

    async def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers.

        Raises:
            UnknownTopicOrPartitionError: the topic does not exist.
        """
        return sorted((await self._topic(topic)).partitions)

    async def writable_partitions(self, topic: str) -> list[int]:
        """The topic's partitions that have a leader right now."""
        await self._topic(topic)
        return self.router.available(topic)

    async def _partition(self, topic: str, partition: int) -> PartitionInfo:
        t = await self._topic(topic)
        info = t.partitions.get(partition)
        if info is None:
            raise errors.UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {len(t.partitions)})"
            )
        return info  # type: ignore[no-any-return]

    async def leader(self, topic: str, partition: int) -> BrokerInfo:
        """The broker leading ``topic``/``partition``.

        Raises:
            UnknownTopicOrPartitionError: no such topic or partition.
            LeaderNotAvailableError: the partition has no leader right now.
        """
        await self._partition(topic, partition)  # it exists (waiting out its creation)
        node = await self.router.leader(topic, partition)
        return self.metadata.brokers[node]  # (a refresh replaces the table: read it after)

    async def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's replica broker ids, leader first as the broker lists them."""
        return list((await self._partition(topic, partition)).replicas)

    async def in_sync_replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's in-sync replica broker ids."""
        return list((await self._partition(topic, partition)).isr)

    async def offline_replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's offline replica broker ids."""
        return list((await self._partition(topic, partition)).offline_replicas)

    async def brokers(self) -> list[BrokerInfo]:
        """The cluster's brokers."""
        if not self.metadata.updates:
            await self.refresh_metadata()
        return sorted(self.metadata.brokers.values(), key=lambda b: b.node_id)

    async def controller(self) -> BrokerInfo:
        """The controller broker.

        Raises:
            BrokerNotAvailableError: the cluster reports no controller.
        """
        if self.metadata.controller_id < 0 or not self.metadata.updates:
            await self.refresh_metadata()
        broker = self.metadata.brokers.get(self.metadata.controller_id)
        if broker is None:
            raise errors.BrokerNotAvailableError("the cluster reports no controller")
        return broker

    @property
    def cluster_id(self) -> str | None:
        """The cluster id from the last metadata response."""
        return self.metadata.cluster_id

    # -- offsets ------------------------------------------------------------------

    async def get_offset(
        self, topic: str, partition: int, time_ms: int, *, isolation_level: int = 0
    ) -> int:
        """The offset for ``time_ms``: ``OLDEST``, ``NEWEST`` or a timestamp in ms.

        For a timestamp, the earliest offset whose timestamp is at or after it
        (-1 if there is none). Follows leader moves. ``isolation_level`` 1
        (read_committed) makes ``NEWEST`` the last stable offset rather than
        the high watermark (brokers below ListOffsets v2 ignore it).

        Raises:
            UnknownTopicOrPartitionError: the topic or partition does not exist.
            KafkaError: the broker's error for the partition.
        """

        async def exchange(conn: BrokerConnection) -> tuple[int, Any]:
            version = conn.version_for(_LIST_OFFSETS)
            req = _list_offsets_request(topic, partition, time_ms, version, isolation_level)
            resp = await conn.request(req, version)
            return version, resp.topics[0].partitions[0]

        # Four attempts, whatever they take (a leader error means the next
        # attempt asks the new leader).
        what = f"ListOffsets {topic}/{partition}"
        version, part = await rq.call(
            self,
            rq.leader(topic, partition),
            exchange,
            what=what,
            check=lambda answer: rq.error_of(answer[1].error_code, what),
            timeout=math.inf,
            max_attempts=4,
        )
        if version == 0:
            return int(part.old_style_offsets[0]) if part.old_style_offsets else -1
        return int(part.offset)

    # -- coordinators ------------------------------------------------------------

    async def coordinator(self, group: str) -> BrokerInfo:
        """The group coordinator of consumer group ``group`` (cached)."""
        return await self._coordinator(COORDINATOR_GROUP, group)

    async def refresh_coordinator(self, group: str) -> BrokerInfo:
        """Look the group coordinator up again (after NOT_COORDINATOR)."""
        self._coordinators.pop((COORDINATOR_GROUP, group), None)
        return await self._coordinator(COORDINATOR_GROUP, group)

    async def transaction_coordinator(self, transactional_id: str) -> BrokerInfo:
        """The transaction coordinator of ``transactional_id`` (cached)."""
        return await self._coordinator(COORDINATOR_TRANSACTION, transactional_id)

    async def refresh_transaction_coordinator(self, transactional_id: str) -> BrokerInfo:
        """Look the transaction coordinator up again."""
        self._coordinators.pop((COORDINATOR_TRANSACTION, transactional_id), None)
        return await self._coordinator(COORDINATOR_TRANSACTION, transactional_id)

    def forget_coordinator(self, key_type: int, key: str) -> None:
        """Drop the cached coordinator (``COORDINATOR_GROUP`` or ``COORDINATOR_TRANSACTION``).

        The next lookup asks FindCoordinator again: what a NOT_COORDINATOR
        answer or a lost connection to the coordinator calls for.
        """
        self._coordinators.pop((key_type, key), None)

    async def _coordinator(self, key_type: int, key: str) -> BrokerInfo:
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached

        async def exchange(conn: BrokerConnection) -> tuple[int, BrokerInfo, str | None]:
            version = conn.version_for(_FIND_COORDINATOR)
            if key_type == COORDINATOR_TRANSACTION and version < 1:
                raise errors.UnsupportedVersionError("the broker has no transaction coordinator")
            resp = await conn.request(_find_coordinator_request(key_type, key, version), version)
            if version >= 4:
                c = resp.coordinators[0]
                code, node, host, port, msg = (
                    c.error_code,
                    c.node_id,
                    c.host,
                    c.port,
                    c.error_message,
                )
            else:
                code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
                msg = getattr(resp, "error_message", None)
            return code, BrokerInfo(node, host, port), msg

        def check(answer: tuple[int, BrokerInfo, str | None]) -> errors.KafkaError | None:
            code, _, msg = answer
            err = errors.error_for_code(code)
            return (
                None if err is None else err(msg or f"FindCoordinator({key!r}): {err.description}")
            )

        _, broker, _ = await rq.call(
            self, rq.ANY_BROKER, exchange, what=f"FindCoordinator({key!r})", check=check
        )
        self._coordinators[(key_type, key)] = broker
        return broker

    # -- features ----------------------------------------------------------------

    def newest_features(self) -> BrokerVersions | None:
        """The versions of the open connection that reported the newest finalized features.

        Finalized feature levels (KIP-584: ``transaction.version``,
        ``group.version``, ...) are cluster-wide; each broker reports them in
        ApiVersions with an epoch, and the highest epoch is the newest view.
        None when no connection is open; a ``BrokerVersions`` whose
        ``finalized_features`` is empty when no broker reported any.
        """
        best: BrokerVersions | None = None
        for conn in self._pool.connections():
            versions = conn.versions
            if best is None or versions.finalized_features_epoch > best.finalized_features_epoch:
                best = versions
        return best

    # -- observability -----------------------------------------------------------

    def statistics(self) -> ClientStatistics:
        """Counters and sizes, cheap to call."""
        conns = self._pool.connections()
        return ClientStatistics(
            brokers=len(self.metadata.brokers),
            topics=len(self.metadata.topics),
            connections=len(conns),
            connects=self._pool.connects,
            connect_failures=self._pool.connect_failures,
            metadata_refreshes=self.metadata.updates,
            rebootstraps=self.rebootstraps,
            requests_sent=sum(c.requests_sent for c in conns),
            bytes_sent=sum(c.bytes_sent for c in conns),
            bytes_received=sum(c.bytes_received for c in conns),
            requests=merge([c.api_counters for c in conns]),
        )


def _metadata_request(topics: Sequence[str] | None, version: int, config: ClientConfig) -> Any:
    if topics is None:
        req_topics: list[Any] | None = [] if version == 0 else None
    else:
        req_topics = [P.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    kw: dict[str, Any] = {"topics": req_topics}
    if version >= 4:
        kw["allow_auto_topic_creation"] = config.allow_auto_create_topics
    return P.MetadataRequest(**kw)


def _list_offsets_request(
    topic: str, partition: int, time_ms: int, version: int, isolation_level: int = 0
) -> Any:
    part_kw: dict[str, Any] = {"partition_index": partition, "timestamp": time_ms}
    if version == 0:
        part_kw["max_num_offsets"] = 1
    req = P.ListOffsetsRequest
    return req(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[req.ListOffsetsTopic(name=topic, partitions=[req.ListOffsetsPartition(**part_kw)])],
    )


def _find_coordinator_request(key_type: int, key: str, version: int) -> Any:
    if version >= 4:
        return P.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    if version >= 1:
        return P.FindCoordinatorRequest(key=key, key_type=key_type)
    return P.FindCoordinatorRequest(key=key)


@asynccontextmanager
async def open_client(
    bootstrap_servers: str | list[str] | None = None, **config: Any
) -> AsyncIterator[Client]:
    """Connect to a cluster; the client is closed when the block exits.

    Args:
        bootstrap_servers: "host:port,..." or a list; overrides the option.
        **config: options of :class:`pykaf.ClientConfig`.

    Raises:
        ConfigError: an invalid option (before anything connects).
        KafkaConnectionError: no bootstrap broker could be reached.
    """
    require_trio("pykaf.open_client()")
    if bootstrap_servers is not None:
        config["bootstrap_servers"] = bootstrap_servers
    cfg = ClientConfig.from_kwargs(**config)
    async with open_service_nursery() as nursery:
        client = Client(nursery, cfg)
        try:
            await client.refresh_metadata()
            nursery.start_soon(client._refresh_loop)
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client.aclose()
            nursery.cancel_scope.cancel()


C = TypeVar("C", bound=ClientConfig)


async def client_for(
    stack: AsyncExitStack,
    config_class: type[C],
    bootstrap_servers_or_client: str | list[str] | Client | None,
    options: dict[str, Any],
) -> tuple[Client, C]:
    """The client and validated config an ``open_producer``/``open_consumer`` runs on.

    Given a :class:`Client`, its options are the defaults and it is shared
    (left open); otherwise a client is opened on ``stack`` with the client
    options among ``options``. The config is validated before anything
    connects.
    """
    if isinstance(bootstrap_servers_or_client, Client):
        base = bootstrap_servers_or_client.config
        merged = {k: getattr(base, k) for k in base.__dataclass_fields__}
        merged.update(options)
        return bootstrap_servers_or_client, config_class.from_kwargs(**merged)
    if bootstrap_servers_or_client is not None:
        options = {**options, "bootstrap_servers": bootstrap_servers_or_client}
    cfg = config_class.from_kwargs(**options)
    client_options = {k: getattr(cfg, k) for k in ClientConfig.__dataclass_fields__}
    client = await stack.enter_async_context(open_client(**client_options))
    return client, cfg
