"""The drop-ins' defaults are the replaced libraries' own: topic auto-creation,
the keyed partitioner, and confluent-kafka's ``group.protocol``.

On Apache Kafka (auto.create.topics.enable is on by default there), beside
confluent-kafka itself where it is the reference.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

import pykaf.sync
from pykaf.compat import confluent_kafka as shim
from pykaf.compat import kafka as kafka_shim
from pykaf.compat.kafka import errors as kafka_errors

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.broker

T = 30.0


def _topics(bootstrap: str) -> set[str]:
    with pykaf.sync.Admin(bootstrap) as admin:
        return set(admin.list_topics())


def _delivered(producer: Any, topic: str, keys: list[bytes | None]) -> list[tuple[Any, Any]]:
    """Produce one record per key through a confluent-kafka style producer; the reports."""
    reports: list[tuple[Any, Any]] = []
    for key in keys:
        producer.produce(
            topic, b"v", key=key, on_delivery=lambda err, msg: reports.append((err, msg))
        )
        producer.poll(0)
    assert producer.flush(T) == 0
    return reports


# -- auto-creation -------------------------------------------------------------------


def test_the_confluent_shim_producer_creates_a_new_topic(kafka_broker: Any) -> None:
    topic = bc.unique("auto-ck")
    p = shim.Producer({"bootstrap.servers": kafka_broker.bootstrap})
    try:
        reports = _delivered(p, topic, [b"k"])
    finally:
        p.close()
    assert [err for err, _ in reports] == [None]
    assert topic in _topics(kafka_broker.bootstrap)


def test_the_confluent_shim_producer_honours_allow_auto_create_topics_false(
    kafka_broker: Any,
) -> None:
    topic = bc.unique("no-auto-ck")
    conf = {"bootstrap.servers": kafka_broker.bootstrap, "allow.auto.create.topics": False}
    p = shim.Producer(conf)
    try:
        reports = _delivered(p, topic, [b"k"])
    finally:
        p.close()
    [(err, _)] = reports
    assert err is not None and err.code() == shim.KafkaError._UNKNOWN_TOPIC
    assert topic not in _topics(kafka_broker.bootstrap)


def test_the_kafka_python_shim_producer_creates_a_new_topic(kafka_broker: Any) -> None:
    topic = bc.unique("auto-kp")
    producer = kafka_shim.KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    try:
        metadata = producer.send(topic, b"v").get(T)
    finally:
        producer.close(T)
    assert (metadata.topic, metadata.offset) == (topic, 0)
    assert topic in _topics(kafka_broker.bootstrap)


def test_the_kafka_python_shim_producer_honours_allow_auto_create_topics_false(
    kafka_broker: Any,
) -> None:
    topic = bc.unique("no-auto-kp")
    producer = kafka_shim.KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap, allow_auto_create_topics=False
    )
    try:
        with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
            producer.send(topic, b"v").get(T)
    finally:
        producer.close(T)
    assert topic not in _topics(kafka_broker.bootstrap)


@pytest.mark.parametrize("allow", [True, False])
def test_the_kafka_python_shim_consumer_creates_a_topic_it_reads(
    kafka_broker: Any, allow: bool
) -> None:
    """As kafka-python's consumer: allow_auto_create_topics=True unless turned off."""
    topic = bc.unique("auto-kp-consumer")
    consumer = kafka_shim.KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=bc.unique("g"),
        **({} if allow else {"allow_auto_create_topics": False}),
    )
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (topic in _topics(kafka_broker.bootstrap)) != allow:
            consumer.poll(timeout_ms=200)
    finally:
        consumer.close()
    assert (topic in _topics(kafka_broker.bootstrap)) == allow


# -- keyed partitioning ----------------------------------------------------------------


def _keys(count: int) -> list[bytes | None]:
    rng = random.Random(35)
    keys: list[bytes | None] = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))]
    while len(keys) < count:
        keys.append(f"customer-{rng.randrange(10**6)}".encode())
    return keys


@pytest.mark.parametrize("partitioner", [None, "murmur2_random", "fnv1a_random", "consistent"])
def test_keyed_records_land_where_confluent_kafka_puts_them(
    kafka_broker: Any, partitioner: str | None
) -> None:
    """The shim's default (and named) partitioner against confluent-kafka's, key by key."""
    topic = bc.unique("keyed")
    kafka_broker.create(topic, 7)
    keys = _keys(300)
    extra = {} if partitioner is None else {"partitioner": partitioner}
    real = ck.Producer({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 0, **extra})
    theirs = _delivered(real, topic, keys)
    ours_producer = shim.Producer({"bootstrap.servers": kafka_broker.bootstrap, **extra})
    try:
        ours = _delivered(ours_producer, topic, keys)
    finally:
        ours_producer.close()
    assert all(err is None for err, _ in theirs + ours)
    expected = {m.key(): m.partition() for _, m in theirs}
    got = {m.key(): m.partition() for _, m in ours}
    assert got == expected
    assert len(set(got.values())) == 7  # the keys spread over every partition


def test_the_kafka_python_shim_keeps_murmur2(fake_cluster: Any) -> None:
    """kafka-python's default partitioner is murmur2 (Java's), not librdkafka's CRC-32."""
    from pykaf.codec import murmur2

    topic = bc.unique("keyed-kp")
    fake_cluster.create_topic(topic, 7)
    producer = kafka_shim.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap)
    try:
        keys = [k for k in _keys(100) if k]
        got = {k: producer.send(topic, b"v", key=k).get(T).partition for k in keys}
    finally:
        producer.close(T)
    assert got == {k: (murmur2(k) & 0x7FFFFFFF) % 7 for k in keys}


def test_the_confluent_shim_refuses_an_unknown_partitioner() -> None:
    with pytest.raises(shim.KafkaException) as info:
        shim.Producer({"bootstrap.servers": "127.0.0.1:1", "partitioner": "murmur3"})
    assert info.value.args[0].code() == shim.KafkaError._INVALID_ARG
    assert "partitioner" in info.value.args[0].str()


# -- group.protocol ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_group_protocol_maps_to_pykafs(kafka_broker: Any, protocol: str) -> None:
    """``group.protocol`` (KIP-848 "consumer", or "classic") makes that kind of member."""
    topic, group = bc.unique("kip848"), bc.unique("kip848-group")
    kafka_broker.create(topic, 2)
    p = shim.Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for i in range(6):
        p.produce(topic, b"%d" % i, partition=i % 2)
    assert p.flush(T) == 0
    p.close()
    c = shim.Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        seen: list[Any] = []
        deadline = time.monotonic() + T
        while len(seen) < 6:
            assert time.monotonic() < deadline, f"only {len(seen)} of 6 records"
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        tps = [shim.TopicPartition(topic, q) for q in range(2)]
        last = {m.partition(): m for m in seen}
        c.commit(message=last[0], asynchronous=False)  # that partition only
        assert [tp.offset for tp in c.committed(tps, timeout=10)] == [3, shim.OFFSET_INVALID]
        c.commit(asynchronous=False)
        with pykaf.sync.Admin(kafka_broker.bootstrap) as admin:
            [member] = admin.describe_group(group).members
        # a KIP-848 member has an epoch; a classic one has none (-1)
        assert (member.member_epoch > 0) == (protocol == "consumer")
        assert [tp.offset for tp in c.committed(tps, timeout=10)] == [3, 3]
    finally:
        c.close()


def test_group_protocol_refuses_other_words() -> None:
    with pytest.raises(shim.KafkaException) as info:
        shim.Consumer({"bootstrap.servers": "h:1", "group.id": "g", "group.protocol": "share"})
    assert "group.protocol" in info.value.args[0].str()
