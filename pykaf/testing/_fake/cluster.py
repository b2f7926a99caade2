"""The fake cluster: brokers on loopback, topics in memory, and the fault controls.

:class:`FakeCluster` holds the state and the controls; :func:`open_fake_cluster`
runs it in the caller's trio nursery; :class:`FakeClusterThread` runs it on a
trio loop of its own in a daemon thread, for synchronous code, other clients
(confluent-kafka) and pytest fixtures.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from pykaf import errors
from pykaf.protocol import ApiVersion, ApiVersionsResponse
from pykaf.testing._fake.acls import AclEntry
from pykaf.testing._fake.api import Api
from pykaf.testing._fake.configs import ConfigStore
from pykaf.testing._fake.groups import GroupCoordinator
from pykaf.testing._fake.model import BrokerNode, InjectedError, Partition, RequestRecord, Topic
from pykaf.testing._fake.sasl import SaslServer
from pykaf.testing._fake.server import BrokerServer
from pykaf.testing._fake.txn import TransactionCoordinator

if TYPE_CHECKING:
    from pykaf.testing._certs import TLSCertificates

log = logging.getLogger("pykaf.testing.fake")

#: what a test may call on a :class:`FakeClusterThread` (run on the cluster's loop)
CONTROLS = frozenset(
    {
        "broker_down",
        "broker_up",
        "set_rtt",
        "set_partition_leader",
        "push_request_errors",
        "clear_request_errors",
        "start_request_tracking",
        "stop_request_tracking",
        "count_requests",
        "create_topic",
        "delete_topic",
        "set_coordinator",
        "high_watermark",
        "last_stable_offset",
        "add_user",
    }
)


class FakeClusterError(Exception):
    """A fake-cluster control was misused (unknown broker, topic or partition)."""


class FakeCluster:
    """An in-memory Kafka cluster of ``brokers`` nodes speaking the real protocol.

    Args:
        brokers: how many brokers (ids 1..N); partition leaders are spread over them.
        host: the address every broker listens on and advertises.
        ports: each broker's port, in id order (default: ports the OS picks).
        default_partitions: partitions of an auto-created topic (and of
            CreateTopics asking for -1).
        auto_create_topics: create a topic on first Metadata or Produce naming it.
        users: SASL users and passwords; when given, every connection must
            authenticate (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) first.
        sasl_mechanisms: the mechanisms offered when ``users`` is given.
        ssl_context: a server-side context: every broker speaks TLS.
        certificates: test certificates (:class:`TLSCertificates`) to make the
            server context from, instead of ``ssl_context``.
        cluster_id: what Metadata and DescribeCluster report.
        max_transaction_timeout_ms: the largest transaction timeout a producer may ask.
        group_initial_rebalance_delay_ms: how long the first join of an empty
            group waits for more members (Kafka's default is 3000; 0 here).

    Attributes:
        nodes: the brokers by id.
        topics: the topics by name.
        configs: the dynamic broker configs IncrementalAlterConfigs set.
        acls: the ACL bindings CreateAcls stored (kept, not enforced).
        handler_errors: exceptions raised inside request handlers (a bug of the
            fake cluster; its fixture fails the test when this is not empty).
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        host: str = "127.0.0.1",
        ports: Sequence[int] | None = None,
        default_partitions: int = 3,
        auto_create_topics: bool = True,
        users: Mapping[str, str] | None = None,
        sasl_mechanisms: Iterable[str] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        ssl_context: ssl.SSLContext | None = None,
        certificates: TLSCertificates | None = None,
        cluster_id: str = "pykaf-fake-cluster",
        max_transaction_timeout_ms: int = 900_000,
        group_initial_rebalance_delay_ms: int = 0,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        if default_partitions < 1:
            raise ValueError(f"default_partitions must be at least 1, not {default_partitions}")
        if certificates is not None:
            if ssl_context is not None:
                raise ValueError("give ssl_context or certificates, not both")
            ssl_context = certificates.server_context()
        if ports is not None and len(ports) != brokers:
            raise ValueError(f"{len(ports)} ports for {brokers} brokers")
        self.nodes: dict[int, BrokerNode] = {
            i: BrokerNode(i, host, ports[i - 1] if ports is not None else 0)
            for i in range(1, brokers + 1)
        }
        self.host = host
        self.topics: dict[str, Topic] = {}
        self.default_partitions = default_partitions
        self.auto_create_topics = auto_create_topics
        self.ssl_context = ssl_context
        self.sasl = SaslServer(dict(users) if users is not None else None, tuple(sasl_mechanisms))
        self.cluster_id = cluster_id
        self.controller_id = 1
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.group_initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        self.handler_errors: list[BaseException] = []
        self.tracking = False
        self.requests: list[RequestRecord] = []
        self._injected: dict[tuple[int | None, int], deque[InjectedError]] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._servers: dict[int, BrokerServer] = {}
        self._next_leader = 0
        self.groups = GroupCoordinator(self)
        self.configs = ConfigStore()
        self.acls: list[AclEntry] = []
        self.transactions = TransactionCoordinator(self)
        self.apis: dict[int, Api] = {}
        from pykaf.testing._fake.handlers import all_apis

        for api in all_apis():
            self.apis[api.request.API_KEY] = api

    # -- addresses -------------------------------------------------------------

    @property
    def sasl_required(self) -> bool:
        """Whether clients must authenticate with SASL."""
        return self.sasl.users is not None

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (``bootstrap.servers``)."""
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes.values())

    def listeners(self) -> dict[int, tuple[str, int]]:
        """Each broker's address by id."""
        return {n.node_id: (n.host, n.port) for n in self.nodes.values()}

    # -- running ---------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve every broker until cancelled; ``started`` once all listen."""
        async with trio.open_nursery() as nursery:
            for node in self.nodes.values():
                server = BrokerServer(self, node)
                self._servers[node.node_id] = server
                await nursery.start(server.serve)
            nursery.start_soon(self.transactions.run)
            log.info("fake cluster of %d brokers at %s", len(self.nodes), self.bootstrap)
            task_status.started()

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
        ]
        return ApiVersionsResponse(error_code=0, api_keys=keys)

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

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition, or None when the topic or partition does not exist."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark."""
        return self._partition(topic, partition).log.high_watermark

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The partition's last stable offset (held back by open transactions)."""
        return self._partition(topic, partition).log.last_stable_offset

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

    # -- coordinators ----------------------------------------------------------

    def coordinator_for(self, key_type: int, key: str) -> int:
        """The broker coordinating group (``key_type`` 0) or transaction (1) ``key``."""
        fixed = self._coordinators.get((key_type, key))
        if fixed is not None:
            return fixed
        ids = sorted(self.nodes)
        return ids[zlib.crc32(key.encode()) % len(ids)]

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Move the coordinator of a ``"group"`` or ``"transaction"`` to ``broker_id``."""
        types = {"group": 0, "transaction": 1}
        if key_type not in types:
            raise FakeClusterError(f"key_type must be 'group' or 'transaction', not {key_type!r}")
        self._node(broker_id)
        self._coordinators[(types[key_type], key)] = broker_id

    # -- faults ----------------------------------------------------------------

    def _node(self, broker_id: int) -> BrokerNode:
        node = self.nodes.get(broker_id)
        if node is None:
            raise FakeClusterError(f"no broker {broker_id} (brokers: {sorted(self.nodes)})")
        return node

    def broker_down(self, broker_id: int) -> None:
        """Take a broker down: its connections drop and new ones are closed at once."""
        self._node(broker_id).up = False
        server = self._servers.get(broker_id)
        if server is not None:
            server.drop_connections()

    def broker_up(self, broker_id: int) -> None:
        """Bring a broker back up."""
        self._node(broker_id).up = True

    def set_rtt(self, broker_id: int, rtt_ms: float) -> None:
        """Delay every response of a broker by ``rtt_ms``."""
        self._node(broker_id).rtt_ms = rtt_ms

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership (its leader epoch grows)."""
        p = self._partition(topic, partition)
        self._node(broker_id)
        p.leader = broker_id
        p.new_leader_epoch()
        if broker_id not in p.replicas:
            p.replicas.append(broker_id)

    def truncate_partition(self, topic: str, partition: int, offset: int) -> int:
        """An unclean leader election: a replica lacking the records from ``offset`` on leads.

        The log loses its batches from the one holding ``offset`` (whole
        batches, as a replica's log is cut), then the leader epoch grows and
        the new epoch starts at the new log end; the leader stays the same
        broker (the fake keeps one copy of the log). Returns the new log end.

        Raises:
            FakeClusterError: no such partition, or ``offset`` below the log start.
        """
        p = self._partition(topic, partition)
        try:
            end = p.log.truncate_to(offset)
        except ValueError as exc:
            raise FakeClusterError(f"{topic}[{partition}]: {exc}") from None
        p.new_leader_epoch()
        return end

    def push_request_errors(
        self, api_key: int, *errors: int, broker_id: int | None = None, rtt_ms: float = 0.0
    ) -> None:
        """Answer the next requests of ``api_key`` with these error codes, in turn.

        With ``broker_id`` only that broker's requests take them. The request
        is not carried out (an injected error has no side effect).
        """
        q = self._injected.setdefault((broker_id, api_key), deque())
        q.extend(InjectedError(int(code), rtt_ms) for code in errors)

    def clear_request_errors(self, api_key: int, broker_id: int | None = None) -> None:
        """Forget the errors queued for ``api_key``."""
        self._injected.pop((broker_id, api_key), None)

    def take_injected(self, broker_id: int, api_key: int) -> InjectedError | None:
        """The next injected error for this broker and API, if any (the server calls this)."""
        for key in ((broker_id, api_key), (None, api_key)):
            q = self._injected.get(key)
            if q:
                return q.popleft()
        return None

    def start_request_tracking(self) -> None:
        """Record every request from now on (see :meth:`count_requests`)."""
        self.tracking = True

    def stop_request_tracking(self) -> None:
        """Stop recording requests (what was recorded stays)."""
        self.tracking = False

    def count_requests(self, api_key: int | None = None, broker_id: int | None = None) -> int:
        """How many recorded requests match the API key and broker (None: any)."""
        return sum(
            1
            for r in self.requests
            if (api_key is None or r.api_key == api_key)
            and (broker_id is None or r.broker_id == broker_id)
        )

    def add_user(self, name: str, password: str) -> None:
        """Add (or change) a SASL user."""
        self.sasl.add_user(name, password)


@asynccontextmanager
async def open_fake_cluster(brokers: int = 3, **options: Any) -> AsyncIterator[FakeCluster]:
    """Run a :class:`FakeCluster` in this trio task's nursery while the block runs.

    Example::

        async with pykaf.testing.open_fake_cluster(brokers=3) as cluster:
            async with pykaf.open_producer(cluster.bootstrap) as producer:
                await producer.send("t", b"v")
    """
    cluster = FakeCluster(brokers, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()


class FakeClusterThread:
    """A :class:`FakeCluster` served from a trio loop in a daemon thread.

    Use as a context manager (or :meth:`start` / :meth:`close`). The controls
    of :class:`FakeCluster` (``broker_down``, ``push_request_errors``,
    ``create_topic``, ...) are callable on this object from any thread: they
    run on the cluster's loop.
    """

    def __init__(self, brokers: int = 3, **options: Any) -> None:
        self.cluster = FakeCluster(brokers, **options)
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated."""
        return self.cluster.bootstrap

    def start(self) -> FakeClusterThread:
        """Start serving; return once every broker listens."""
        if self._thread is not None:
            raise FakeClusterError("this fake cluster was started already")
        self._thread = threading.Thread(target=self._main, name="pykaf fake cluster", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise FakeClusterError(
                f"the fake cluster did not start: {self._failure}"
            ) from self._failure
        return self

    def _main(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.cluster.run)
                    self._ready.set()

        try:
            trio.run(main)
        except BaseException as exc:
            self._failure = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the cluster's loop and return its result."""
        if self._token is None:
            raise FakeClusterError("the fake cluster is not running")
        return trio.from_thread.run_sync(lambda: fn(*args, **kwargs), trio_token=self._token)

    def __getattr__(self, name: str) -> Any:
        if name in CONTROLS:
            method = getattr(self.cluster, name)
            return lambda *a, **kw: self.call(method, *a, **kw)
        raise AttributeError(name)

    def close(self) -> None:
        """Stop every broker and wait for the thread."""
        if self._thread is None or self._token is None:
            return
        cancel = self._cancel
        if cancel is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(cancel.cancel, trio_token=self._token)
        self._thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeClusterThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FakeClusterThread {len(self.cluster.nodes)} brokers at {self.bootstrap}>"
