"""The fake cluster's state: brokers, topics, partitions, sessions, stored configs and ACLs; no I/O.

The bottom of the fake: it imports nothing of the fake but the partition log.
Everything here is mutated only from the cluster's trio loop (the request
handlers and the fault controls run there), so nothing is locked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pykaf.testing._fake.log import PartitionLog

# Kafka's ConfigSource codes.
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
DYNAMIC_GROUP = 8


@dataclass
class BrokerNode:
    """One broker of the fake cluster: its id, address and fault state.

    Attributes:
        node_id: the broker id (1, 2, 3, ...).
        host: the address it listens on and advertises.
        port: its TCP port (0 until it listens).
        rack: its rack, or None.
        up: False while :meth:`FakeCluster.broker_down` holds it down: new
            connections are closed at once and open ones were dropped.
        rtt_ms: latency added before every response it sends.
    """

    node_id: int
    host: str
    port: int = 0
    rack: str | None = None
    up: bool = True
    rtt_ms: float = 0.0


@dataclass
class Partition:
    """One partition: its leader and its log (shared by all replicas: one copy)."""

    topic: str
    index: int
    leader: int
    replicas: list[int]
    leader_epoch: int = 0
    log: PartitionLog = field(default_factory=PartitionLog)

    def new_leader_epoch(self) -> int:
        """Bump the leader epoch (a leader change); the log starts the epoch at its end."""
        self.leader_epoch += 1
        self.log.start_epoch(self.leader_epoch)
        return self.leader_epoch


@dataclass
class Topic:
    """A topic: name, id, partitions and configs (as strings, like Kafka's)."""

    name: str
    partitions: list[Partition]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


@dataclass
class InjectedError:
    """An error queued for the next request of one API (:meth:`FakeCluster.push_request_errors`)."""

    code: int
    rtt_ms: float = 0.0


@dataclass
class RequestRecord:
    """One request the cluster received, kept while request tracking is on."""

    broker_id: int
    api_key: int
    api_version: int
    client_id: str | None
    request: Any


class CloseConnection(Exception):
    """Raised by a handler (or the server) to drop the client's connection, as Kafka does."""


@dataclass
class Session:
    """One client connection's state on a broker.

    Attributes:
        principal: "User:<name>" once SASL succeeded, "User:ANONYMOUS" without SASL.
        authenticated: True when the connection may send any request.
        mechanism: the SASL mechanism the handshake chose.
        sasl: the server side of that mechanism while it is running.
        raw_sasl: True after a SaslHandshake v0: the next frame is a bare token.
        software_name: the client software its ApiVersions (v3+) named.
        software_version: and that software's version.
    """

    peer: str
    principal: str = "User:ANONYMOUS"
    authenticated: bool = True
    mechanism: str | None = None
    sasl: Any = None
    raw_sasl: bool = False
    closed: bool = False
    software_name: str | None = None
    software_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AclEntry:
    """One stored binding."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


class ConfigStore:
    """The cluster's dynamic broker configs: per broker and cluster-wide (key ``None``)."""

    def __init__(self) -> None:
        # A KRaft cluster of Kafka 4 is formatted with a cluster-wide min.insync.replicas
        self.broker: dict[int | None, dict[str, str]] = {None: {"min.insync.replicas": "1"}}
        #: group configs (KIP-848/KIP-932) IncrementalAlterConfigs set, by group id
        self.groups: dict[str, dict[str, str]] = {}

    def levels(self, node_id: int | None, name: str) -> list[tuple[str, str, int]]:
        """A dynamic broker config's set values, first in force: (name, value, source).

        The broker's own (none for ``node_id`` None), then the cluster-wide default.
        """
        out = []
        own = self.broker.get(node_id, {}) if node_id is not None else {}
        if name in own:
            out.append((name, own[name], DYNAMIC_BROKER))
        default = self.broker.get(None, {})
        if name in default:
            out.append((name, default[name], DYNAMIC_DEFAULT_BROKER))
        return out
