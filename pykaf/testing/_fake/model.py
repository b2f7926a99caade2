"""The fake cluster's state: brokers, topics, partitions; no I/O.

Everything here is mutated only from the cluster's trio loop (the request
handlers and the fault controls run there), so nothing is locked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pykaf.testing._fake.log import PartitionLog


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
