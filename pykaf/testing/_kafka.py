"""Run a real Apache Kafka cluster (KRaft, 1 to N nodes) on loopback for tests.

Each node is one JVM running ``kafka.Kafka`` in combined mode (broker and
controller), formatted with Kafka's storage tool into a directory of the
cluster's own. The jars come from :func:`pykaf.testing._kafka_dist.kafka_home`
(fetched once from Maven Central). Every node has these listeners, on ports
the OS picks:

- ``INTERNAL`` (PLAINTEXT): between brokers;
- ``CONTROLLER`` (PLAINTEXT): the KRaft quorum;
- ``PLAINTEXT``: :attr:`KafkaCluster.bootstrap`, always;
- ``SASL_PLAINTEXT``: :attr:`KafkaCluster.sasl_bootstrap` when ``users`` are
  given (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for each user);
- ``SSL``: :attr:`KafkaCluster.tls_bootstrap` when ``certificates`` are
  given; ``SASL_SSL`` too (:attr:`KafkaCluster.sasl_tls_bootstrap`) with both.

``authorizer=True`` turns on Kafka's ``StandardAuthorizer``: ``ANONYMOUS``
(the PLAINTEXT listener's principal, which brokers and the test's own set-up
use) and the ``super_users`` may do anything; every other principal needs ACLs.

:class:`KafkaCluster` (alias :class:`KafkaClusterThread`) is the blocking
form, :func:`open_kafka_cluster` the trio one. A node left running is killed
when its cluster object is garbage-collected or the interpreter exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import trio

from pykaf._util import require_trio
from pykaf.testing._certs import TLSCertificates
from pykaf.testing._kafka_dist import (
    KafkaRelease,
    KafkaUnavailableError,
    find_java,
    home_kafka_version,
    jars_kafka_version,
    kafka_classpath,
    kafka_home,
    kafka_release,
)
from pykaf.testing._tansu import free_port

__all__ = [
    "AsyncKafkaCluster",
    "KafkaCluster",
    "KafkaClusterError",
    "KafkaClusterThread",
    "open_kafka_cluster",
]

_HOST = "127.0.0.1"
_READY_MARKER = "Kafka Server started"  # KafkaRaftServer's line once the node serves
_LOG_TAIL = 6000  # characters of a node's log quoted when it fails
#: What log4j 1 (reload4j) and log4j 2 print when they cannot use the logging
#: config they were given: the node would then run without ever logging
#: ``_READY_MARKER``, so its start fails at once instead of at the timeout.
#: log4j 2's own status lines read ``<ISO time> <thread> ERROR ...`` (2.24+) or
#: ``ERROR StatusLogger ...``; the node's own lines start with ``[`` (``_LOG4J2``).
_LOGGING_BROKEN = re.compile(
    r"^(log4j:ERROR|log4j:WARN No appenders could be found|ERROR StatusLogger"
    r"|\d{4}-\d\d-\d\dT\S+ \S+ (ERROR|FATAL) )"
)
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

KAFKA_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
"""The SASL users of the ``kafka_cluster`` fixture and their passwords.

Give them to ``KafkaCluster(users=...)`` for a cluster of your own. ``admin``
is a super user there; ``alice`` and ``bob`` need ACLs for everything.
"""

_PR_SET_PDEATHSIG = 1  # prctl option: a signal for the child when its parent dies

#: Server properties every test cluster gets (each can be overridden with
#: ``broker_configs``): replication factors that fit the cluster, no initial
#: rebalance delay, small internal topics (they are created on first use and a
#: 50-partition topic takes seconds on two cores), short group session floors
#: (and short consumer-protocol heartbeats and sessions),
#: unclean elections (for topics that enable them) within a second, retention
#: checked at start and then once a day.
_TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    # Consumer-protocol (KIP-848) groups: heartbeats every second, not five, and a
    # member gone silent (or a static member that left) is dropped after 10 s.
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    # Share groups (KIP-932): heartbeats every second and a silent member dropped
    # after 10 s, as for consumer-protocol groups. The acquisition lock keeps its
    # 30 s default; a test wanting quick redelivery sets the group's own
    # share.record.lock.duration.ms (down to the 1 s floor above).
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.session.timeout.ms": "10000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    # How often the controller looks for leaderless partitions of topics that
    # allow unclean elections (default 5 minutes); only such topics are touched.
    "unclean.leader.election.interval.ms": "1000",
    # Time-based retention is checked once a day, not every 5 minutes: tests
    # write records with fixed create times (2020, 2023), older than the 7-day
    # retention, and a check between writing and reading deleted them.
    "log.retention.check.interval.ms": str(24 * 3600 * 1000),
    # ... and the first check comes at start, not 30 s later (Kafka 3.8+; 3.7's
    # 30 s is fixed): that one check deleted the old records of whatever test
    # ran 30 s after the broker started, between its writing and its reading
    # (the reader's fetch was out of range and reset to an empty log). The
    # checkpoint and log-deletion tasks merely start at once too.
    "log.initial.task.delay.ms": "0",
    "log.segment.bytes": str(64 * 1024 * 1024),
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
}

#: Kafka 4.x's logging config (log4j 2, YAML).
_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""

#: Kafka 3.x's logging config (log4j 1 properties, read by reload4j).
_LOG4J1 = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
"""

#: Settings of ``_TEST_DEFAULTS`` a release does not know, by what it lacks:
#: they are left out rather than logged as unknown at every start.
_SHARE_SETTINGS = tuple(k for k in _TEST_DEFAULTS if k.startswith(("group.share.", "share.")))

T = TypeVar("T")


class KafkaClusterError(RuntimeError):
    """The Kafka cluster could not be provisioned, started, stopped or used."""


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the thread that forked it ends.

    Only used when the main thread starts the node (the main thread ends with
    the process); a node started from another thread relies on finalizers.
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _stop_process(proc: subprocess.Popen[bytes], timeout: float, kill: bool) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill() if kill else proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def _cleanup(procs: dict[int, subprocess.Popen[bytes]], directory: str | None) -> None:
    """``weakref.finalize`` safety net: kill every node, remove an owned directory."""
    for proc in list(procs.values()):
        _stop_process(proc, 5.0, kill=True)
    procs.clear()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class _Node:
    node_id: int
    directory: Path
    ports: dict[str, int] = field(default_factory=dict)
    log: IO[bytes] | None = None
    starts: int = 0
    ready_from: int = 0  # where this start's part of the log begins


class KafkaCluster:
    """Apache Kafka (KRaft, combined broker+controller nodes) on 127.0.0.1.

    Example::

        with KafkaCluster(brokers=1) as kafka:
            kafka.create_topic("events", 3)
            producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})

    Args:
        brokers: the number of nodes; each is a voter of the KRaft quorum.
        version: the Apache Kafka release, 3.7 to 4.4 (default:
            ``$PYKAF_KAFKA_VERSION``, else pykaf's pinned
            :data:`~pykaf.testing.DEFAULT_KAFKA_VERSION`). Each release gets
            the logging config (log4j 1 properties on 3.x, log4j 2 YAML on
            4.x) and the server settings it knows. Another release is refused
            at once (:class:`~pykaf.testing.KafkaUnavailableError`). With
            ``$PYKAF_KAFKA_HOME`` set, the release of its jars
            (``kafka_2.13-X.Y.Z.jar``) is run and configured instead.
        users: SASL users and their passwords; adds the SASL listeners, where
            each user can log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
        certificates: a :class:`~pykaf.testing.TLSCertificates` whose server
            certificate the TLS listeners present; adds them.
        require_client_cert: TLS listeners demand a client certificate
            signed by ``certificates``' CA.
        authorizer: enforce ACLs (Kafka's ``StandardAuthorizer``).
        super_users: principals (``"User:admin"`` or a bare ``"admin"``) that
            bypass ACLs, besides ``User:ANONYMOUS``.
        broker_configs: more server properties for every node; they override
            pykaf's test defaults (see ``_TEST_DEFAULTS``).
        heap: each JVM's maximum heap (``-Xmx``).
        jvm_options: more JVM options (before the main class).
        plugins: more class path entries (directories or jars) for broker
            plugins, such as a metrics reporter named in ``broker_configs``.
        directory: where the nodes keep data and logs; a new temporary
            directory (removed by :meth:`close`) when None.
        start_timeout: seconds to wait for every node to serve.
        cluster_id: the KRaft cluster id; a random one when None.
        features: finalized feature levels to format the cluster with
            (the storage tool's ``--feature name=level``), e.g.
            ``{"transaction.version": 1}`` for a cluster on transactions V1;
            None: the release's defaults (Kafka 4.3 and 4.4: ``transaction.version``
            2, see ``docs/transactions.md``). Kafka 3.7's storage tool
            takes none (:class:`KafkaClusterError` at once).
        racks: each node's ``broker.rack``, in node id order (one per
            broker); None: no racks. With
            ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``
            in ``broker_configs``, leaders send consumers with a
            ``client_rack`` to a replica in their rack (KIP-392).
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        version: str | None = None,
        users: Mapping[str, str] | None = None,
        certificates: TLSCertificates | None = None,
        require_client_cert: bool = False,
        authorizer: bool = False,
        super_users: Sequence[str] = ("admin",),
        broker_configs: Mapping[str, str] | None = None,
        heap: str = "384m",
        jvm_options: Sequence[str] = (),
        plugins: Sequence[str | os.PathLike[str]] = (),
        directory: str | os.PathLike[str] | None = None,
        start_timeout: float = 120.0,
        cluster_id: str | None = None,
        features: Mapping[str, int] | None = None,
        racks: Sequence[str] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least 1 broker, not {brokers}")
        if racks is not None and len(racks) != brokers:
            raise ValueError(f"{len(racks)} racks given for {brokers} brokers")
        # A release pykaf cannot run is refused here, before any download or JVM.
        # $PYKAF_KAFKA_HOME's jars are what runs: their release decides the config.
        self._release: KafkaRelease = kafka_release(home_kafka_version() or version)
        if features and not self._release.storage_features:
            raise KafkaClusterError(
                f"Apache Kafka {self._release.version} cannot format a cluster with feature "
                f"levels ({', '.join(f'{k}={v}' for k, v in features.items())}): the storage "
                "tool takes --feature from Kafka 3.8 on"
            )
        self._count = brokers
        self._version = self._release.version
        self._users = dict(users or {})
        self._certificates = certificates
        self._require_client_cert = require_client_cert
        self._authorizer = authorizer
        self._super_users = [u if u.startswith("User:") else f"User:{u}" for u in super_users]
        self._broker_configs = dict(broker_configs or {})
        self._heap = heap
        self._jvm_options = list(jvm_options)
        self._plugins = [str(p) for p in plugins]
        self._start_timeout = start_timeout
        # KRaft wants a base64 UUID of 16 bytes (22 characters).
        self._cluster_id = cluster_id or _kraft_id()
        self._features = dict(features or {})
        self._racks = list(racks) if racks is not None else None
        self._owned = directory is None
        self._directory: Path | None = None if directory is None else Path(directory)
        self._nodes: dict[int, _Node] = {}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._classpath: str | None = None
        self._java: str | None = None
        self._finalizer: weakref.finalize[..., KafkaCluster] | None = None
        self._closed = False

    # -- what clients need ------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        """The nodes' ids (1 to ``brokers``)."""
        return list(range(1, self._count + 1))

    def _listener_bootstrap(self, name: str) -> str:
        if not self._nodes or name not in self._nodes[1].ports:
            raise KafkaClusterError(f"this cluster has no {name} listener")
        return ",".join(f"{_HOST}:{n.ports[name]}" for n in self._nodes.values())

    @property
    def features(self) -> dict[str, int]:
        """The feature levels the cluster was formatted with (empty: the release's defaults)."""
        return dict(self._features)

    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT ``host:port``, comma-separated."""
        return self._listener_bootstrap("PLAINTEXT")

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listeners (needs ``users``)."""
        return self._listener_bootstrap("SASL_PLAINTEXT")

    @property
    def tls_bootstrap(self) -> str:
        """The SSL listeners (needs ``certificates``)."""
        return self._listener_bootstrap("SSL")

    @property
    def sasl_tls_bootstrap(self) -> str:
        """The SASL_SSL listeners (needs ``users`` and ``certificates``)."""
        return self._listener_bootstrap("SASL_SSL")

    @property
    def ca_file(self) -> str:
        """The CA that signed the TLS listeners' certificate (needs ``certificates``)."""
        if self._certificates is None:
            raise KafkaClusterError("this cluster has no TLS listener")
        return self._certificates.ca_file

    @property
    def users(self) -> dict[str, str]:
        """The SASL users and their passwords."""
        return dict(self._users)

    @property
    def version(self) -> str:
        """The Apache Kafka release the nodes run (from the jar's name)."""
        home = kafka_home(self._version)
        found = jars_kafka_version(home)
        if found is None:
            raise KafkaUnavailableError(f"{home} holds no kafka_2.13-X.Y.Z.jar")
        return found

    @property
    def release(self) -> KafkaRelease:
        """What the launcher does for the requested release (log config, settings, formatting)."""
        return self._release

    def _log_option(self) -> str:
        """The JVM option pointing the release's logging at the config :meth:`_prepare` wrote."""
        assert self._directory is not None
        if self._release.log4j2:
            return f"-Dlog4j2.configurationFile={self._directory / 'log4j2.yaml'}"
        return f"-Dlog4j.configuration=file:{self._directory / 'log4j.properties'}"

    @property
    def directory(self) -> Path:
        """Where the nodes keep their data (``node-N/data``) and logs (``node-N/kafka.log``)."""
        if self._directory is None:
            raise KafkaClusterError("the cluster was not started")
        return self._directory

    @property
    def classpath(self) -> str:
        """The Java class path of Kafka's jars (for Kafka's own tools and clients)."""
        if self._classpath is None:
            self._classpath = os.pathsep.join(
                [kafka_classpath(kafka_home(self._version)), *self._plugins]
            )
        return self._classpath

    @property
    def java(self) -> str:
        """The ``java`` executable the nodes run on."""
        if self._java is None:
            self._java = find_java()
        return self._java

    def running(self, node_id: int) -> bool:
        """Whether node ``node_id``'s process is alive."""
        proc = self._procs.get(node_id)
        return proc is not None and proc.poll() is None

    def log_text(self, node_id: int) -> str:
        """Node ``node_id``'s log so far (every start appends to it)."""
        path = self._node(node_id).directory / "kafka.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def java_command(self, main_class: str, *args: str, heap: str = "256m") -> list[str]:
        """A command line running ``main_class`` from Kafka's jars (its tools, its clients)."""
        return [
            self.java,
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            self._log_option(),
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    # -- life cycle -------------------------------------------------------

    def start(self) -> KafkaCluster:
        """Format and start every node; return once all serve.

        Raises:
            KafkaUnavailableError: Java or Kafka's jars cannot be had.
            KafkaClusterError: a node failed to start (its log is quoted).
        """
        self._prepare()
        for node in self._nodes.values():
            self._spawn(node)
        deadline = time.monotonic() + self._start_timeout
        for node_id in self._nodes:
            while not self._poll_ready(node_id, deadline):
                time.sleep(0.1)
        return self

    def _prepare(self) -> None:
        """Write every node's configuration and format its storage (blocking, ~1 s a node)."""
        if self._directory is not None and self._nodes:
            raise KafkaClusterError("this cluster was started already")
        classpath, java = self.classpath, self.java  # fail early, before any directory
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="pykaf-kafka-"))
        self._directory.mkdir(parents=True, exist_ok=True)
        self._finalizer = weakref.finalize(
            self, _cleanup, self._procs, str(self._directory) if self._owned else None
        )
        self._finalizer.atexit = True
        if self._release.log4j2:
            (self._directory / "log4j2.yaml").write_text(_LOG4J2)
        else:
            (self._directory / "log4j.properties").write_text(_LOG4J1)
        names = ["PLAINTEXT", "INTERNAL", "CONTROLLER"]
        if self._users:
            names.append("SASL_PLAINTEXT")
        if self._certificates is not None:
            names.append("SSL")
            if self._users:
                names.append("SASL_SSL")
            self._write_keystore()
        for node_id in self.node_ids:
            node = _Node(node_id, self._directory / f"node-{node_id}")
            node.directory.mkdir(exist_ok=True)
            node.ports = {name: free_port(_HOST) for name in names}
            self._nodes[node_id] = node
        for node in self._nodes.values():
            (node.directory / "server.properties").write_text(self._properties(node))
            self._format(node, classpath, java)

    def _write_keystore(self) -> None:
        """Kafka's PEM key store: the server key as unencrypted PKCS#8, then its chain."""
        from cryptography.hazmat.primitives import serialization

        certs = self._certificates
        assert certs is not None and self._directory is not None
        key = serialization.load_pem_private_key(
            Path(certs.server_key_file).read_bytes(), password=None
        )
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain = Path(certs.server_cert_file).read_bytes()
        (self._directory / "keystore.pem").write_bytes(pkcs8 + chain)

    def _properties(self, node: _Node) -> str:
        assert self._directory is not None
        voters = ",".join(
            f"{n.node_id}@{_HOST}:{n.ports['CONTROLLER']}" for n in self._nodes.values()
        )
        protocols = {
            "PLAINTEXT": "PLAINTEXT",
            "INTERNAL": "PLAINTEXT",
            "CONTROLLER": "PLAINTEXT",
            "SASL_PLAINTEXT": "SASL_PLAINTEXT",
            "SSL": "SSL",
            "SASL_SSL": "SASL_SSL",
        }
        listeners = ",".join(f"{name}://{_HOST}:{port}" for name, port in node.ports.items())
        advertised = ",".join(
            f"{name}://{_HOST}:{port}" for name, port in node.ports.items() if name != "CONTROLLER"
        )
        replication = str(min(3, self._count))
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": ",".join(
                f"{name}:{protocols[name]}" for name in node.ports
            ),
            "log.dirs": str(node.directory / "data"),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            **_TEST_DEFAULTS,
        }
        if not self._release.share_groups:
            props.pop("share.coordinator.state.topic.replication.factor")
            props.pop("share.coordinator.state.topic.min.isr")
            for key in _SHARE_SETTINGS:
                props.pop(key)
        if not self._release.unclean_election_interval:
            props.pop("unclean.leader.election.interval.ms")
        if not self._release.initial_task_delay:
            props.pop("log.initial.task.delay.ms")
        if self._users:
            props["sasl.enabled.mechanisms"] = ",".join(_MECHANISMS)
            plain = " ".join(f'user_{u}="{p}"' for u, p in self._users.items())
            for listener in ("sasl_plaintext", "sasl_ssl"):
                if listener.upper() not in node.ports:
                    continue
                prefix = f"listener.name.{listener}"
                props[f"{prefix}.plain.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};"
                )
                for mechanism in _MECHANISMS[1:]:
                    props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    )
        if self._certificates is not None:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self._directory / "keystore.pem")
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = self._certificates.ca_file
            props["ssl.client.auth"] = "required" if self._require_client_cert else "none"
            props["ssl.endpoint.identification.algorithm"] = ""
        if self._authorizer:
            props["authorizer.class.name"] = (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            )
            props["super.users"] = ";".join(["User:ANONYMOUS", *self._super_users])
        if self._racks is not None:
            props["broker.rack"] = self._racks[self.node_ids.index(node.node_id)]
        props.update(self._broker_configs)
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _format(self, node: _Node, classpath: str, java: str) -> None:
        command = [
            java,
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            self._log_option(),
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._cluster_id,
            "-c",
            str(node.directory / "server.properties"),
        ]
        for user, password in self._users.items():
            for mechanism in _MECHANISMS[1:]:
                command += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        for name, level in self._features.items():
            command += ["--feature", f"{name}={level}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise KafkaClusterError(
                f"formatting node {node.node_id}'s storage failed (exit {done.returncode}): "
                f"{(done.stdout + done.stderr)[-_LOG_TAIL:]}"
            )

    def _spawn(self, node: _Node) -> None:
        """Start node's JVM (returns at once)."""
        assert self._directory is not None
        if node.log is not None:
            node.log.close()
        node.log = open(node.directory / "kafka.log", "ab")  # noqa: SIM115 - kept while it runs
        node.log.write(f"---- pykaf: start {node.starts + 1} of node {node.node_id}\n".encode())
        node.log.flush()
        node.starts += 1
        node.ready_from = node.log.tell()
        command = [
            self.java,
            f"-Xmx{self._heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            self._log_option(),
            f"-Dkafka.logs.dir={node.directory}",
            *self._jvm_options,
            "-cp",
            self.classpath,
            "kafka.Kafka",
            str(node.directory / "server.properties"),
        ]
        main = threading.current_thread() is threading.main_thread()
        self._procs[node.node_id] = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=node.log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if main else None,
        )

    def _poll_ready(self, node_id: int, deadline: float) -> bool:
        """True once node ``node_id`` serves; raise if it died or the deadline passed."""
        node = self._node(node_id)
        proc = self._procs[node_id]
        with open(node.directory / "kafka.log", "rb") as log:
            log.seek(node.ready_from)
            text = log.read().decode(errors="replace")
        if _READY_MARKER in text:
            return True
        broken = next((line for line in text.splitlines() if _LOGGING_BROKEN.match(line)), None)
        if broken is not None:
            _stop_process(proc, 5.0, kill=True)
            raise KafkaClusterError(
                f"Kafka node {node_id} ({self._release.version}) cannot read its logging config, "
                f"so it would never report that it serves: {broken!r}; its log "
                f"({node.directory / 'kafka.log'}) ends:\n{text[-_LOG_TAIL:]}"
            )
        if proc.poll() is not None:
            raise KafkaClusterError(
                f"Kafka node {node_id} exited with {proc.returncode} while starting; "
                f"its log ({node.directory / 'kafka.log'}) ends:\n{text[-_LOG_TAIL:]}"
            )
        if time.monotonic() > deadline:
            raise KafkaClusterError(
                f"Kafka node {node_id} did not start within {self._start_timeout:.0f} s; "
                f"its log ({node.directory / 'kafka.log'}) ends:\n{text[-_LOG_TAIL:]}"
            )
        return False

    def _node(self, node_id: int) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KafkaClusterError(
                f"no node {node_id} in this cluster (nodes: {self.node_ids})"
            ) from None

    def broker_down(self, node_id: int, *, kill: bool = False, timeout: float = 60.0) -> None:
        """Stop node ``node_id``: a clean shutdown (SIGTERM), or SIGKILL with ``kill``.

        Its data stays; :meth:`broker_up` starts it again.
        """
        self._node(node_id)
        proc = self._procs.get(node_id)
        if proc is None or proc.poll() is not None:
            raise KafkaClusterError(f"Kafka node {node_id} is not running")
        _stop_process(proc, timeout, kill)

    def broker_up(self, node_id: int, *, new_ports: bool = False) -> None:
        """Start node ``node_id`` again (after :meth:`broker_down`); return once it serves.

        With ``new_ports`` its client listeners (every one but the KRaft
        controller's) move to new ports, as when a broker comes back
        elsewhere: clients that knew the old address must find the new one
        (:attr:`bootstrap` gives it).
        """
        self._spawn_again(node_id, new_ports=new_ports)
        deadline = time.monotonic() + self._start_timeout
        while not self._poll_ready(node_id, deadline):
            time.sleep(0.1)

    def _spawn_again(self, node_id: int, *, new_ports: bool = False) -> None:
        node = self._node(node_id)
        if self.running(node_id):
            raise KafkaClusterError(f"Kafka node {node_id} is running already")
        if new_ports:
            for name in node.ports:
                if name != "CONTROLLER":
                    node.ports[name] = free_port(_HOST)
            (node.directory / "server.properties").write_text(self._properties(node))
        self._spawn(node)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic; return once every partition's leader serves it (answers ListOffsets)."""
        _run_trio(
            lambda: _create_topic(
                self.bootstrap, name, partitions, replication_factor, configs, timeout
            )
        )

    def delete_topic(self, name: str) -> None:
        """Delete a topic."""
        _run_trio(lambda: _delete_topic(self.bootstrap, name))

    def reset(self, *, timeout: float = 60.0) -> None:
        """Make the cluster as if new: delete every topic but Kafka's own, every group, every ACL.

        Returns once the deleted topics are gone from the metadata, so a
        topic of the same name can be created at once. A group that still
        has members is waited for (its members leave or time out).

        Raises:
            KafkaClusterError: something was still there after ``timeout``.
        """
        _run_trio(lambda: _reset(self.bootstrap, timeout))

    def close(self) -> None:
        """Stop every node (cleanly, then by force) and remove an owned directory."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs.values():
            with contextlib.suppress(ProcessLookupError):
                if proc.poll() is None:
                    proc.terminate()
        deadline = time.monotonic() + 20.0
        for proc in self._procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for node in self._nodes.values():
            if node.log is not None:
                node.log.close()
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> KafkaCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._procs else "not started")
        where = f" {self.bootstrap}" if self._nodes else ""
        return f"<KafkaCluster {self._count} node(s){where} {state}>"


KafkaClusterThread = KafkaCluster
"""``KafkaCluster`` under the name the fake cluster's blocking form has (``FakeClusterThread``)."""


class AsyncKafkaCluster:
    """The trio face of a :class:`KafkaCluster` (from :func:`open_kafka_cluster`).

    Its waiting controls are awaitable; everything else is the cluster's own
    (``bootstrap``, ``sasl_bootstrap``, ``log_text``, ...).
    """

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic and wait until every partition's leader serves it."""
        await _create_topic(
            self.cluster.bootstrap, name, partitions, replication_factor, configs, timeout
        )

    async def delete_topic(self, name: str) -> None:
        """Delete a topic."""
        await _delete_topic(self.cluster.bootstrap, name)

    async def reset(self, *, timeout: float = 60.0) -> None:
        """Delete every topic but Kafka's own, every group and ACL (:meth:`KafkaCluster.reset`)."""
        await _reset(self.cluster.bootstrap, timeout)

    async def broker_down(self, node_id: int, *, kill: bool = False, timeout: float = 60.0) -> None:
        """Stop node ``node_id`` (see :meth:`KafkaCluster.broker_down`)."""
        await trio.to_thread.run_sync(
            lambda: self.cluster.broker_down(node_id, kill=kill, timeout=timeout)
        )

    async def broker_up(self, node_id: int, *, new_ports: bool = False) -> None:
        """Start node ``node_id`` again; return once it serves (``KafkaCluster.broker_up``)."""
        cluster = self.cluster
        cluster._spawn_again(node_id, new_ports=new_ports)  # in this thread: see _die_with_parent
        deadline = time.monotonic() + cluster._start_timeout
        while not cluster._poll_ready(node_id, deadline):
            await trio.sleep(0.1)

    async def close(self) -> None:
        """Stop every node."""
        await trio.to_thread.run_sync(self.cluster.close)


@contextlib.asynccontextmanager
async def open_kafka_cluster(brokers: int = 1, **options: Any) -> AsyncIterator[AsyncKafkaCluster]:
    """Run an Apache Kafka cluster while the block runs (see :class:`KafkaCluster`).

    Example::

        async with open_kafka_cluster(brokers=3) as kafka:
            await kafka.create_topic("events", 6, replication_factor=3)
            async with pykaf.open_producer(kafka.bootstrap) as producer:
                await producer.send("events", b"v")
    """
    require_trio("pykaf.testing.open_kafka_cluster()")
    cluster = KafkaCluster(brokers, **options)
    try:
        await trio.to_thread.run_sync(cluster._prepare)
        for node in cluster._nodes.values():
            cluster._spawn(node)  # in this thread: see _die_with_parent
        deadline = time.monotonic() + cluster._start_timeout
        for node_id in cluster.node_ids:
            while not cluster._poll_ready(node_id, deadline):
                await trio.sleep(0.1)
        yield AsyncKafkaCluster(cluster)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(cluster.close)


def _kraft_id() -> str:
    """A random cluster id as Kafka's Uuid.randomUuid makes them: never starting with "-".

    StorageTool's ``-t`` would take such an id for an option (1 id in 64).
    """
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _run_trio(fn: Callable[[], Awaitable[T]]) -> T:
    """Run the async ``fn`` on a fresh trio loop in a thread of its own.

    A thread of its own, so the blocking controls work from plain code and
    from inside a running trio loop alike.
    """
    result: list[T] = []
    failure: list[BaseException] = []

    async def main() -> None:
        result.append(await fn())

    def target() -> None:
        try:
            trio.run(main)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="pykaf kafka control", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


async def _create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None,
    timeout: float,
) -> None:
    import pykaf
    from pykaf import errors

    async with pykaf.open_admin(bootstrap) as admin:
        await admin.create_topic(name, partitions, replication_factor, configs or {})
        with trio.move_on_after(timeout) as scope:
            while True:
                with contextlib.suppress(errors.PykafError):
                    described = await admin.describe_topic(name)
                    if len(described.partitions) == partitions and all(
                        p.leader >= 0 for p in described.partitions
                    ):
                        # A broker publishes a new leader in its Metadata answers a
                        # moment before its replica manager takes the partition on,
                        # and answers NOT_LEADER_OR_FOLLOWER to a Produce meanwhile:
                        # a topic is ready once each leader answers ListOffsets.
                        for p in described.partitions:
                            await admin.client.get_offset(name, p.partition, pykaf.NEWEST)
                        return
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            raise KafkaClusterError(
                f"topic {name!r} has no leader for every partition after {timeout} s"
            )


async def _delete_topic(bootstrap: str, name: str) -> None:
    import pykaf

    async with pykaf.open_admin(bootstrap) as admin:
        await admin.delete_topic(name)


async def _reset(bootstrap: str, timeout: float) -> None:
    import pykaf
    from pykaf import AclFilter, errors

    left: list[str] = []
    async with pykaf.open_admin(bootstrap) as admin:
        with trio.move_on_after(timeout):
            while True:
                left = []
                topics = await admin.list_topics()
                if topics:
                    with contextlib.suppress(errors.PykafError):
                        await admin.delete_topics(topics)
                    left += [f"topic {t!r}" for t in topics]
                groups = [g.group_id for g in await admin.list_groups()]
                if groups:
                    try:
                        await admin.delete_groups(groups)
                    except errors.PykafError as exc:  # a group still has members: wait for them
                        left.append(f"groups ({exc})")
                acls = await admin.describe_acls(AclFilter())
                if acls:
                    await admin.delete_acls([AclFilter()])
                    left += [str(a) for a in acls]
                if not left:
                    return
                await trio.sleep(0.2)
    raise KafkaClusterError(f"the cluster still had after {timeout} s: {', '.join(left)}")
