"""confluent-kafka helpers shared by the tests of pykaf.testing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

QUIET = {"log_level": 0}  # the tests break brokers on purpose; don't log every disconnect


def produce(
    conf: Mapping[str, Any],
    topic: str,
    values: Iterable[bytes],
    *,
    partition: int | None = None,
    timeout: float = 15.0,
    **extra: Any,
) -> list[Any]:
    """Produce ``values`` and return the delivered messages; raise on any delivery error."""
    delivered, errors = produce_results(
        conf, topic, values, partition=partition, timeout=timeout, **extra
    )
    assert not errors, errors
    return delivered


def produce_results(
    conf: Mapping[str, Any],
    topic: str,
    values: Iterable[bytes],
    *,
    partition: int | None = None,
    timeout: float = 15.0,
    **extra: Any,
) -> tuple[list[Any], list[Any]]:
    """Produce ``values``; return (delivered messages, KafkaErrors of failed ones)."""
    delivered: list[Any] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else delivered.append(msg))

    producer = ck.Producer({**QUIET, **conf, **extra})
    count = 0
    for value in values:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(topic, value=value, on_delivery=on_delivery, **kwargs)
        count += 1
    remaining = producer.flush(timeout)
    assert remaining == 0, f"{remaining} messages still in flight after {timeout} s"
    assert len(delivered) + len(errors) == count
    return delivered, errors


def consume_assigned(
    conf: Mapping[str, Any],
    topic: str,
    partitions: Iterable[int],
    count: int,
    *,
    timeout: float = 15.0,
) -> list[bytes]:
    """Read ``count`` messages from the start of ``partitions`` without a group."""
    consumer = ck.Consumer(
        {**QUIET, **conf, "group.id": "pykaf-unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in partitions])
        return _poll(consumer, count, timeout)
    finally:
        consumer.close()


def consume_group(
    conf: Mapping[str, Any], topic: str, group: str, count: int, *, timeout: float = 20.0
) -> list[bytes]:
    """Subscribe with consumer group ``group`` and read ``count`` messages."""
    consumer = ck.Consumer({**QUIET, **conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        return _poll(consumer, count, timeout)
    finally:
        consumer.close()


def _poll(consumer: Any, count: int, timeout: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consume error: {msg.error()}")
        values.append(msg.value())
    assert len(values) == count, f"got {len(values)} of {count} messages in {timeout} s"
    return values


def admin_client(conf: Mapping[str, Any]) -> Any:
    """An AdminClient."""
    return admin.AdminClient({**QUIET, **conf})


def metadata(conf: Mapping[str, Any], topic: str | None = None, timeout: float = 10.0) -> Any:
    """Fresh cluster metadata (one Metadata request)."""
    return admin_client(conf).list_topics(topic=topic, timeout=timeout)


def leaders(conf: Mapping[str, Any], topic: str) -> dict[int, int]:
    """Partition -> leader broker id, as a client sees it now."""
    md = metadata(conf, topic)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def create_topic(conf: Mapping[str, Any], topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with the CreateTopics API (Tansu)."""
    client = admin_client(conf)  # must outlive the futures
    futures = client.create_topics([admin.NewTopic(topic, partitions, 1)])
    for future in futures.values():
        future.result(10)


def wait_for(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class Broker:
    """A running broker for a parametrised test: its name, bootstrap and a topic maker."""

    name: str
    bootstrap: str
    create: Callable[[str, int], None]

    @property
    def conf(self) -> dict[str, Any]:
        """confluent-kafka configuration reaching this broker."""
        return {"bootstrap.servers": self.bootstrap}


def broker_from(request: pytest.FixtureRequest, name: str) -> Broker:
    """A broker by name.

    "kafka" and "kafka3" are the session's Apache Kafka clusters of one and
    three nodes, "tansu" the session's Tansu, "mock" a fresh librdkafka mock
    cluster and "fake" a fresh fake cluster.
    """
    if name in ("kafka", "kafka3"):
        kafka = request.getfixturevalue("kafka_cluster" if name == "kafka" else "kafka_cluster3")
        replicas = min(3, len(kafka.node_ids))
        return Broker(name, kafka.bootstrap, lambda t, n: kafka.create_topic(t, n, replicas))
    if name == "fake":
        fake = request.getfixturevalue("fake_cluster")
        return Broker("fake", fake.bootstrap, lambda t, n: fake.create_topic(t, n))
    if name == "tansu":
        tansu = request.getfixturevalue("tansu")
        conf = {"bootstrap.servers": tansu.bootstrap}
        return Broker("tansu", tansu.bootstrap, lambda t, n: create_topic(conf, t, n))
    return broker_from_mock(request.getfixturevalue("mock_cluster"))


def broker_from_mock(mock: Any) -> Broker:
    """A ``Broker`` for a running librdkafka mock cluster (topics with replication 1)."""
    return Broker("mock", mock.bootstrap, lambda t, n: mock.create_topic(t, n, 1))


def unique(prefix: str) -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
