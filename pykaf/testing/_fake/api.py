"""What a request handler of the fake cluster gets and returns, and the registry.

A handler gets a :class:`RequestContext`: the cluster's state
(:class:`ClusterState`: brokers, topics, the coordinators, stored configs and
ACLs, injected errors; no I/O), the broker, the connection's session and the
request header. The running cluster (``cluster.py``) is a :class:`ClusterState`
with servers and fault controls on top; handlers and servers see only this.

A handler module exposes ``APIS``: a list of :class:`Api`, one per Kafka API
it answers. A handler is ``async def handle(ctx, request, version)`` returning
the response object (or None for a request that gets no response, a Produce
with acks=0). ``error`` builds the response carrying an injected error code
without running the handler (so an injected error has no side effect); when
it is None, the response class is built empty with ``error_code`` set.
"""

from __future__ import annotations

import ssl
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pykaf import errors
from pykaf.protocol import (
    ApiVersion,
    ApiVersionsResponse,
    EndTxnRequest,
    FinalizedFeatureKey,
    GetTelemetrySubscriptionsRequest,
    ProduceRequest,
    PushTelemetryRequest,
    RequestHeader,
    Response,
    TxnOffsetCommitRequest,
)
from pykaf.testing._fake.client_telemetry import DEFAULT_MAX_BYTES, ClientTelemetry
from pykaf.testing._fake.consumer_coordinator import ConsumerGroupCoordinator
from pykaf.testing._fake.fetch_sessions import DEFAULT_SLOTS, FetchSessionCache
from pykaf.testing._fake.group_coordinator import GroupCoordinator
from pykaf.testing._fake.group_migration import Topics, downgrade
from pykaf.testing._fake.model import (
    AclEntry,
    BrokerNode,
    ConfigStore,
    InjectedError,
    Partition,
    RequestRecord,
    Session,
    Topic,
)
from pykaf.testing._fake.sasl import SaslServer
from pykaf.testing._fake.share_coordinator import ShareGroupCoordinator
from pykaf.testing._fake.share_sessions import ShareSessionCache
from pykaf.testing._fake.txn_coordinator import TransactionCoordinator


@dataclass
class RequestContext:
    """Everything a handler may look at: the cluster, the broker, the session, the header."""

    cluster: ClusterState
    broker: BrokerNode
    session: Session
    header: RequestHeader


Handler = Callable[[RequestContext, Any, int], Awaitable["Response | None"]]
ErrorBuilder = Callable[[Any, int, int], Response]


@dataclass(frozen=True)
class Api:
    """One API the fake cluster answers, and the versions it advertises."""

    request: type[Any]
    response: type[Response]
    handler: Handler
    min_version: int
    max_version: int
    error: ErrorBuilder | None = None
    #: answered before SASL authentication (ApiVersions, SaslHandshake, SaslAuthenticate)
    before_auth: bool = False


#: KIP-714's APIs: answered always, advertised only with a telemetry plugin (as Kafka does).
_TELEMETRY_APIS = frozenset(
    {GetTelemetrySubscriptionsRequest.API_KEY, PushTelemetryRequest.API_KEY}
)

#: The newest versions of the APIs that speak transactions V2 (KIP-890 part 2).
_V2_VERSIONS = {
    ProduceRequest.API_KEY: 12,
    TxnOffsetCommitRequest.API_KEY: 5,
    EndTxnRequest.API_KEY: 5,
}


class FakeClusterError(Exception):
    """A fake-cluster control was misused (unknown broker, topic or partition)."""


class ClusterState:
    """The fake cluster as its request handlers and brokers' servers see it: state, no I/O.

    Attributes:
        nodes: the brokers by id.
        topics: the topics by name.
        configs: the dynamic broker configs IncrementalAlterConfigs set.
        acls: the ACL bindings CreateAcls stored (kept, not enforced).
        groups: the group coordinator (groups, members, committed offsets).
        consumer_groups: the consumer-protocol (KIP-848) groups.
        share_groups: the share groups (KIP-932), with their partitions' share state.
        transactions: the transaction coordinator.
        transaction_version: the finalized ``transaction.version`` feature
            ApiVersions reports: 1 (transactions V1), or 2 (KIP-890 part 2:
            Produce v12 and TxnOffsetCommit v5 add to the transaction
            implicitly, EndTxn v5 bumps the epoch at every end).
        sasl: the SASL users and mechanisms.
        apis: the APIs answered, by key.
        handler_errors: exceptions raised inside request handlers (a bug of the
            fake cluster; its fixture fails the test when this is not empty).
        fetch_session_slots: the most KIP-227 fetch sessions each broker
            keeps (Kafka's ``max.incremental.fetch.session.cache.slots``; 0:
            no sessions).
        telemetry: KIP-714's client-metrics subscriptions, client instances
            and the pushes accepted.
        client_telemetry: whether ApiVersions advertises GetTelemetrySubscriptions
            and PushTelemetry (a Kafka with a telemetry plugin does).
    """

    def __init__(
        self,
        nodes: dict[int, BrokerNode],
        *,
        host: str,
        default_partitions: int,
        auto_create_topics: bool,
        sasl: SaslServer,
        ssl_context: ssl.SSLContext | None,
        cluster_id: str,
        max_transaction_timeout_ms: int,
        group_initial_rebalance_delay_ms: int,
        apis: Iterable[Api],
        transaction_version: int = 1,
        fetch_session_slots: int = DEFAULT_SLOTS,
        client_telemetry: bool = False,
        telemetry_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, not {transaction_version}")
        self.nodes = nodes
        self.host = host
        self.topics: dict[str, Topic] = {}
        self.default_partitions = default_partitions
        self.auto_create_topics = auto_create_topics
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.cluster_id = cluster_id
        self.controller_id = 1
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.handler_errors: list[BaseException] = []
        self.tracking = False
        self.requests: list[RequestRecord] = []
        self._injected: dict[tuple[int | None, int], deque[InjectedError]] = {}
        #: (api key, which requests) whose answer is lost once (see lose_responses)
        self.lost_answers: list[tuple[int, Callable[[Any], bool]]] = []
        self._coordinators: dict[tuple[int, str], int] = {}
        self._next_leader = 0
        self.groups = GroupCoordinator(group_initial_rebalance_delay_ms)
        self.consumer_groups = ConsumerGroupCoordinator()
        self.share_groups = ShareGroupCoordinator()
        self._share_sessions: dict[int, ShareSessionCache] = {}
        # KIP-848's downgrade when the last consumer-protocol member's session ends
        self.consumer_groups.on_last_consumer_member = lambda g, m: downgrade(
            self.groups, self.consumer_groups, g, m, self.topic_map()
        )
        self.configs = ConfigStore()
        self.acls: list[AclEntry] = []
        self.transactions = TransactionCoordinator(self.partition, self.groups)
        self.apis: dict[int, Api] = {api.request.API_KEY: api for api in apis}
        self.transaction_version = transaction_version
        if transaction_version >= 2:
            # The versions that speak transactions V2 (Kafka 4.0+ advertises them).
            for key, newest in _V2_VERSIONS.items():
                api = self.apis.get(key)
                if api is not None:
                    self.apis[key] = replace(api, max_version=max(api.max_version, newest))
        self.fetch_session_slots = fetch_session_slots
        self._fetch_sessions: dict[int, FetchSessionCache] = {}
        self.client_telemetry = client_telemetry
        self.telemetry = ClientTelemetry(telemetry_max_bytes)

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        """How long the first join of an empty group waits for more members."""
        return self.groups.initial_rebalance_delay_ms

    @property
    def sasl_required(self) -> bool:
        """Whether clients must authenticate with SASL."""
        return self.sasl.users is not None

    def fetch_sessions(self, node_id: int) -> FetchSessionCache:
        """Broker ``node_id``'s fetch-session cache."""
        cache = self._fetch_sessions.get(node_id)
        if cache is None:
            cache = FetchSessionCache(time.monotonic, self.fetch_session_slots)
            self._fetch_sessions[node_id] = cache
        return cache

    def share_sessions(self, node_id: int) -> ShareSessionCache:
        """Broker ``node_id``'s share sessions (KIP-932)."""
        cache = self._share_sessions.get(node_id)
        if cache is None:
            cache = self._share_sessions[node_id] = ShareSessionCache()
        return cache

    # -- versions --------------------------------------------------------------

    def api_versions_error(self) -> ApiVersionsResponse:
        """The ApiVersions v0 answer to a version the cluster does not speak."""
        resp = self.api_versions()
        resp.error_code = errors.UnsupportedVersionError.code
        return resp

    def api_versions(self) -> ApiVersionsResponse:
        """Every API the cluster answers, with its version range."""
        keys = [
            ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version)
            for k, a in sorted(self.apis.items())
            if self.client_telemetry or k not in _TELEMETRY_APIS
        ]
        # KIP-584's finalized features (ApiVersions v3+): the one the fake has.
        level = self.transaction_version
        features = [
            FinalizedFeatureKey(
                name="transaction.version", max_version_level=level, min_version_level=level
            )
        ]
        return ApiVersionsResponse(
            error_code=0, api_keys=keys, finalized_features_epoch=1, finalized_features=features
        )

    # -- topics ----------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> Topic:
        """Create a topic now; its leaders go round the brokers.

        Raises:
            FakeClusterError: the topic exists, or the counts are not positive.
        """
        if name in self.topics:
            raise FakeClusterError(f"topic {name!r} exists")
        n = self.default_partitions if partitions is None or partitions < 0 else partitions
        rf = 1 if replication_factor is None or replication_factor < 0 else replication_factor
        if n < 1 or rf < 1 or rf > len(self.nodes):
            raise FakeClusterError(
                f"topic {name!r}: {n} partitions, replication {rf} on {len(self.nodes)} brokers"
            )
        ids = sorted(self.nodes)
        parts = []
        for i in range(n):
            first = (self._next_leader + i) % len(ids)
            replicas = [ids[(first + r) % len(ids)] for r in range(rf)]
            parts.append(Partition(name, i, replicas[0], replicas))
        self._next_leader = (self._next_leader + n) % len(ids)
        topic = Topic(name, parts, configs=dict(configs or {}))
        self.topics[name] = topic
        return topic

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions (CreatePartitions)."""
        topic = self._topic(name)
        if total <= len(topic.partitions):
            raise FakeClusterError(f"topic {name!r} has {len(topic.partitions)} partitions already")
        ids = sorted(self.nodes)
        for i in range(len(topic.partitions), total):
            leader = ids[(self._next_leader + i) % len(ids)]
            topic.partitions.append(Partition(name, i, leader, [leader]))

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its data."""
        self._topic(name)
        del self.topics[name]

    def topic_map(self) -> Topics:
        """Each topic's id and partition count, by name (internal topics left out)."""
        return {
            n: (t.topic_id, len(t.partitions)) for n, t in self.topics.items() if not t.internal
        }

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition, or None when the topic or partition does not exist."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    def _topic(self, name: str) -> Topic:
        t = self.topics.get(name)
        if t is None:
            raise FakeClusterError(f"no topic {name!r}")
        return t

    def _partition(self, topic: str, partition: int) -> Partition:
        p = self.partition(topic, partition)
        if p is None:
            raise FakeClusterError(f"no partition {topic}[{partition}]")
        return p

    # -- coordinators and injected errors --------------------------------------

    def coordinator_for(self, key_type: int, key: str) -> int:
        """The broker coordinating group (``key_type`` 0) or transaction (1) ``key``."""
        fixed = self._coordinators.get((key_type, key))
        if fixed is not None:
            return fixed
        ids = sorted(self.nodes)
        return ids[zlib.crc32(key.encode()) % len(ids)]

    def answer_lost(self, api_key: int, request: Any) -> bool:
        """Whether this request's answer is to be lost (each loss queued happens once)."""
        for i, (key, match) in enumerate(self.lost_answers):
            if key == api_key and match(request):
                del self.lost_answers[i]
                return True
        return False

    def take_injected(self, broker_id: int, api_key: int) -> InjectedError | None:
        """The next injected error for this broker and API, if any (the server calls this)."""
        for key in ((broker_id, api_key), (None, api_key)):
            q = self._injected.get(key)
            if q:
                return q.popleft()
        return None
