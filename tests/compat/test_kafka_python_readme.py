"""kafka-python's README usage, run on pykaf with only the import changed.

Each block is the README's (kafka-python 3.0), with ``from kafka import``
made ``from pykaf.compat.kafka import``, and two additions a test needs:
``bootstrap_servers`` (the broker under test) and ``consumer_timeout_ms``
(so an iteration ends), plus unique topic names.
"""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest

T = 30.0


@pytest.fixture(params=["fake", "mock", "tansu", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> Any:
    """Every broker: the fake and librdkafka's mock first, real Kafka last."""
    return importlib.import_module("broker_clients").broker_from(request, request.param)


@pytest.fixture(params=["fake", "tansu", "kafka"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """The brokers with CreateTopics (librdkafka's mock has none)."""
    return importlib.import_module("broker_clients").broker_from(request, request.param)


@pytest.fixture(params=["fake", "kafka"])
def txn_broker(request: pytest.FixtureRequest) -> Any:
    """The brokers that list aborted transactions in Fetch (Tansu and the mock list none).

    Without that list no client can hide an aborted record from a
    read_committed consumer, so the README's transaction block is checked here.
    """
    return importlib.import_module("broker_clients").broker_from(request, request.param)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_readme_producer_and_consumer(any_broker: Any) -> None:
    servers = any_broker.bootstrap
    foobar, fizzbuzz, flipflap = unique("foobar"), unique("fizzbuzz"), unique("flipflap")
    for topic in (foobar, fizzbuzz, flipflap):
        any_broker.create(topic, 3)

    from pykaf.compat.kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers)
    for _ in range(100):
        # Fire-and-forget: send() is async and returns before delivery
        producer.send(foobar, b"some_message_bytes")
    # To check the status of an async message delivery, use .get()
    future = producer.send(foobar, b"another_message")
    # future.get() will block until it can return the result or raise on error
    result = future.get(timeout=60)
    assert result.topic == foobar and result.offset >= 0
    # Block until all pending messages are at least put on the network
    producer.flush()
    # Use a key for hashed-partitioning
    keyed = producer.send(foobar, key=b"foo", value=b"bar").get(timeout=T)
    producer.close()

    # Serialize json messages
    from pykaf.compat.kafka import JsonSerializer

    producer = KafkaProducer(bootstrap_servers=servers, value_serializer=JsonSerializer())
    producer.send(fizzbuzz, {"foo": "bar"})
    producer.close()

    # Serialize string keys
    from pykaf.compat.kafka import DefaultSerializer

    producer = KafkaProducer(bootstrap_servers=servers, key_serializer=DefaultSerializer())
    producer.send(flipflap, key="ping", value=b"1234")
    producer.close()

    # Compress messages
    producer = KafkaProducer(bootstrap_servers=servers, compression_type="gzip")
    for i in range(1000):
        producer.send(foobar, b"msg %d" % i)
    producer.close()

    # join a consumer group for dynamic partition assignment and offset commits
    from pykaf.compat.kafka import KafkaConsumer

    consumer = KafkaConsumer(
        foobar,
        group_id=unique("my_favorite_group"),
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=30_000,  # the first join can take seconds (Tansu)
        # not the README's: Tansu's first join took 23 s with the default 10 s
        # session, 3 s with 6 s
        session_timeout_ms=6000,
        heartbeat_interval_ms=2000,
    )
    messages = []
    for msg in consumer:
        messages.append(msg)
        if len(messages) == 1102:
            break
    consumer.close()
    assert len(messages) == 1102
    assert sum(m.value == b"some_message_bytes" for m in messages) == 100
    assert [(m.partition, m.value) for m in messages if m.key == b"foo"] == [
        (keyed.partition, b"bar")
    ]

    # manually assign the partition list for the consumer
    from pykaf.compat.kafka import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(flipflap, keyed_partition(consumer, flipflap))])
    msg = next(consumer)
    assert (msg.key, msg.value) == (b"ping", b"1234")
    consumer.close()

    # Deserialize json-encoded values
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        value_deserializer=JsonSerializer(),
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    consumer.subscribe([fizzbuzz])
    for msg in consumer:
        assert isinstance(msg.value, dict)
        # Access record headers. The returned value is a list of
        # (str, bytes) tuples, representing the header key and value.
        assert msg.headers == []
        break
    else:
        pytest.fail("no json record")
    # Get consumer metrics
    metrics = consumer.metrics()
    assert "consumer-fetch-manager-metrics" in metrics
    consumer.close()


def keyed_partition(consumer: Any, topic: str) -> int:
    """The partition holding the topic's one record (the README assigns partition 2 of foobar)."""
    from pykaf.compat.kafka import TopicPartition

    ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(3)])
    [partition] = [tp.partition for tp, end in ends.items() if end > 0]
    return partition


def test_readme_transactions(txn_broker: Any) -> None:
    servers = txn_broker.bootstrap
    txn_topic = unique("txn_topic")
    txn_broker.create(txn_topic, 1)

    from pykaf.compat.kafka import IsolationLevel, KafkaConsumer, KafkaProducer

    # Use transactions
    producer = KafkaProducer(bootstrap_servers=servers, transactional_id=unique("fizzbuzz"))
    producer.init_transactions()
    producer.begin_transaction()
    future = producer.send(txn_topic, value=b"yes")
    future.get()  # wait for successful produce
    producer.commit_transaction()  # commit the transaction

    producer.begin_transaction()
    future = producer.send(txn_topic, value=b"no")
    future.get()  # wait for successful produce
    producer.abort_transaction()  # abort the transaction
    producer.close()

    # Read only committed messages from transactional topic
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        isolation_level=IsolationLevel.READ_COMMITTED,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    consumer.subscribe([txn_topic])
    values = [msg.value for msg in consumer]
    consumer.close()
    assert values == [b"yes"]


def test_readme_admin(admin_broker: Any) -> None:
    from pykaf.compat.kafka.admin import KafkaAdminClient, NewTopic

    admin_client = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap, client_id="test")
    name = unique("example_topic")
    topic_list = [NewTopic(name=name, num_partitions=1, replication_factor=1)]
    admin_client.create_topics(new_topics=topic_list, validate_only=False)
    assert name in admin_client.list_topics()
    admin_client.close()
