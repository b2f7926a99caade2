"""The fake cluster: brokers on loopback, topics in memory, and the fault controls.

:class:`FakeCluster` is the cluster's state (``api.ClusterState``, what the
request handlers see) with the brokers' servers and the fault controls on top;
:func:`open_fake_cluster` runs it in the caller's trio nursery;
:class:`FakeClusterThread` runs it on a trio loop of its own in a daemon thread,
for synchronous code, other clients (confluent-kafka) and pytest fixtures.

The top of the fake: the modules below import nothing of this one. From the
bottom, ``log``, ``model``, the coordinators' state (``group_coordinator``,
``txn_coordinator``, ``sasl``), ``api``, the handler modules, ``handlers``
(the registry) and ``server``.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio

from pykaf import protocol as P
from pykaf._util import require_trio
from pykaf.testing._fake.api import ClusterState, FakeClusterError
from pykaf.testing._fake.client_metrics import Refused
from pykaf.testing._fake.client_telemetry import DEFAULT_MAX_BYTES, TelemetryPush
from pykaf.testing._fake.handlers import all_apis
from pykaf.testing._fake.model import BrokerNode, InjectedError
from pykaf.testing._fake.sasl import SaslServer
from pykaf.testing._fake.server import BrokerServer

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
        "lose_responses",
        "start_request_tracking",
        "stop_request_tracking",
        "count_requests",
        "create_topic",
        "delete_topic",
        "set_coordinator",
        "high_watermark",
        "last_stable_offset",
        "add_user",
        "set_client_metrics",
        "delete_client_metrics",
        "pushed_metrics",
    }
)


class ServerCertificates(Protocol):
    """Certificates a broker can serve TLS with (``pykaf.testing``'s ``TLSCertificates``)."""

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context."""
        ...


class FakeCluster(ClusterState):
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
        transaction_version: the finalized ``transaction.version`` it reports:
            1 (transactions V1), or 2 for KIP-890 part 2 (what Kafka 4.x
            formats new clusters with): Produce v12 and TxnOffsetCommit v5
            add to the transaction implicitly and EndTxn v5 bumps the epoch.
        fetch_session_slots: KIP-227 fetch sessions each broker keeps (Kafka's
            ``max.incremental.fetch.session.cache.slots``, 1000; 0: none).
        client_telemetry: advertise KIP-714's GetTelemetrySubscriptions and
            PushTelemetry, as a Kafka with a client telemetry plugin does, so
            clients push the metrics a client-metrics subscription asks for
            (:meth:`set_client_metrics`; read them with :meth:`pushed_metrics`).
            Without it both are still answered, as Kafka answers them.
        telemetry_max_bytes: the largest push accepted (Kafka's ``telemetry.max.bytes``).

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
        certificates: ServerCertificates | None = None,
        cluster_id: str = "pykaf-fake-cluster",
        max_transaction_timeout_ms: int = 900_000,
        group_initial_rebalance_delay_ms: int = 0,
        transaction_version: int = 1,
        fetch_session_slots: int = 1000,
        client_telemetry: bool = False,
        telemetry_max_bytes: int = DEFAULT_MAX_BYTES,
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
        super().__init__(
            {
                i: BrokerNode(i, host, ports[i - 1] if ports is not None else 0)
                for i in range(1, brokers + 1)
            },
            host=host,
            default_partitions=default_partitions,
            auto_create_topics=auto_create_topics,
            sasl=SaslServer(dict(users) if users is not None else None, tuple(sasl_mechanisms)),
            ssl_context=ssl_context,
            cluster_id=cluster_id,
            max_transaction_timeout_ms=max_transaction_timeout_ms,
            group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
            apis=all_apis(),
            transaction_version=transaction_version,
            fetch_session_slots=fetch_session_slots,
            client_telemetry=client_telemetry,
            telemetry_max_bytes=telemetry_max_bytes,
        )
        self._servers: dict[int, BrokerServer] = {}

    # -- addresses -------------------------------------------------------------

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

    # -- topics ----------------------------------------------------------------

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark."""
        return self._partition(topic, partition).log.high_watermark

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The partition's last stable offset (held back by open transactions)."""
        return self._partition(topic, partition).log.last_stable_offset

    # -- coordinators ----------------------------------------------------------

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

    def evict_fetch_sessions(self, broker_id: int | None = None) -> int:
        """Drop the brokers' (or one broker's) fetch sessions, as a full cache evicts them.

        A client's next incremental Fetch gets FETCH_SESSION_ID_NOT_FOUND.
        Returns how many sessions were dropped.
        """
        ids = [broker_id] if broker_id is not None else list(self.nodes)
        return sum(self.fetch_sessions(self._node(i).node_id).evict() for i in ids)

    def push_request_errors(
        self, api_key: int, *errors: int, broker_id: int | None = None, rtt_ms: float = 0.0
    ) -> None:
        """Answer the next requests of ``api_key`` with these error codes, in turn.

        With ``broker_id`` only that broker's requests take them. The request
        is not carried out (an injected error has no side effect).
        """
        q = self._injected.setdefault((broker_id, api_key), deque())
        q.extend(InjectedError(int(code), rtt_ms) for code in errors)

    def lose_responses(
        self, api_key: int, count: int = 1, match: Callable[[Any], bool] | None = None
    ) -> None:
        """Lose the answers of the next ``count`` requests of ``api_key`` (that ``match``).

        Each such request is carried out, then its connection drops instead of
        the answer going out: what a client sees when an answer is lost on the
        way, not knowing whether the broker acted on it.
        """
        for _ in range(count):
            self.lost_answers.append((api_key, match or (lambda request: True)))

    def clear_request_errors(self, api_key: int, broker_id: int | None = None) -> None:
        """Forget the errors queued for ``api_key``."""
        self._injected.pop((broker_id, api_key), None)

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

    # -- client metrics (KIP-714) ------------------------------------------------

    def set_client_metrics(
        self,
        name: str,
        metrics: Sequence[str] = ("*",),
        *,
        interval_ms: int | None = None,
        match: Mapping[str, str] | None = None,
    ) -> None:
        """Create or replace client-metrics subscription ``name``.

        What an IncrementalAlterConfigs of the ``CLIENT_METRICS`` resource does
        (Kafka's ``kafka-client-metrics.sh --alter``): ``metrics`` are name
        prefixes (``*``: all), ``interval_ms`` the push interval (100 to
        3600000; Kafka's default 300000 when None), ``match`` attribute
        regexes a client must all fully match (``{"client_id": "app-.*"}``;
        none: every client). Clients see the change at their next request.

        Raises:
            FakeClusterError: Kafka would refuse the subscription.
        """
        A = P.IncrementalAlterConfigsRequest.AlterableConfig
        values = {
            "metrics": ",".join(metrics),
            "interval.ms": None if interval_ms is None else str(interval_ms),
            "match": None if match is None else ",".join(f"{k}={v}" for k, v in match.items()),
        }
        changes = [
            A(name=k, config_operation=0 if v is not None else 1, value=v)
            for k, v in values.items()
        ]
        try:
            self.telemetry.alter(name, changes, validate_only=False)
        except Refused as exc:
            raise FakeClusterError(f"client metrics {name!r}: {exc}") from None

    def delete_client_metrics(self, name: str) -> None:
        """Remove client-metrics subscription ``name`` (nothing if there is none)."""
        A = P.IncrementalAlterConfigsRequest.AlterableConfig
        changes = [A(name=k, config_operation=1) for k in ("metrics", "interval.ms", "match")]
        try:
            self.telemetry.alter(name, changes, validate_only=False)
        except Refused as exc:
            raise FakeClusterError(f"client metrics {name!r}: {exc}") from None

    def pushed_metrics(
        self, client_instance_id: uuid.UUID | None = None, *, client_id: str | None = None
    ) -> list[TelemetryPush]:
        """What clients pushed (KIP-714) and a broker accepted, oldest first, decoded.

        Each :class:`TelemetryPush` names the client instance, its client id,
        whether it was the terminating push, the OTLP resource attributes and
        the metric points (``push.names()``, ``push.value(name, **attributes)``).
        ``client_instance_id`` (the id the broker gave the client) or
        ``client_id`` (the requests' client id) keep one client's pushes.
        """
        return self.telemetry.pushed(client_instance_id, client_id)


@asynccontextmanager
async def open_fake_cluster(brokers: int = 3, **options: Any) -> AsyncIterator[FakeCluster]:
    """Run a :class:`FakeCluster` in this trio task's nursery while the block runs.

    Example::

        async with pykaf.testing.open_fake_cluster(brokers=3) as cluster:
            async with pykaf.open_producer(cluster.bootstrap) as producer:
                await producer.send("t", b"v")
    """
    require_trio("pykaf.testing.open_fake_cluster()")
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
