"""pykaf.compat.kafka.KafkaProducer on pykaf's fake cluster: kafka-python's producer API."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf.compat import kafka
from pykaf.compat.kafka import errors

T = 30.0


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    with pykaf.sync.Consumer(bootstrap) as consumer:
        consumer.assign([(topic, p, pykaf.OLDEST) for p in range(partitions)])
        records = []
        while len(records) < count:
            batch = consumer.consume(count, timeout=T)
            assert batch, f"only {len(records)} of {count} records came back"
            records.extend(batch)
        return records


def test_send_get_flush_with_serializers(fake_cluster: Any) -> None:
    topic = unique("compat-send")
    fake_cluster.create_topic(topic, 3)
    producer = kafka.KafkaProducer(
        bootstrap_servers=fake_cluster.bootstrap,
        key_serializer=lambda k: None if k is None else k.encode(),
        value_serializer=lambda v: json.dumps(v).encode(),
        acks="all",
        linger_ms=1,
    )
    try:
        future = producer.send(topic, {"n": 1}, key="k1", headers=[("h", b"v")])
        metadata = future.get(timeout=T)
        assert isinstance(metadata, kafka.RecordMetadata)
        assert metadata.topic == topic
        assert metadata.topic_partition == kafka.TopicPartition(topic, metadata.partition)
        assert metadata.offset == 0
        assert metadata.serialized_key_size == 2
        assert metadata.serialized_value_size == len(b'{"n": 1}')
        assert metadata.serialized_header_size == 2
        assert future.succeeded() and not future.failed() and future.is_done
        seen: list[Any] = []
        failures: list[Any] = []
        for i in range(20):
            producer.send(topic, {"n": i}, partition=1).add_callback(seen.append).add_errback(
                failures.append
            )
        producer.flush(timeout=T)
        assert failures == []
        assert [m.offset for m in seen] == list(range(20))
        assert {m.partition for m in seen} == {1}
        late: list[Any] = []
        future.add_callback(lambda tag, md: late.append((tag, md.offset)), "tag")
        assert late == [("tag", 0)]
        assert producer.partitions_for(topic) == {0, 1, 2}
    finally:
        producer.close(timeout=T)
    records = read_all(fake_cluster.bootstrap, topic, 3, 21)
    first = [r for r in records if r.key == b"k1"]
    assert [json.loads(r.value) for r in first] == [{"n": 1}]
    assert first[0].headers == [("h", b"v")]


def test_timestamp_and_tombstone(fake_cluster: Any) -> None:
    topic = unique("compat-ts")
    fake_cluster.create_topic(topic, 1)
    with kafka.KafkaProducer(bootstrap_servers=[fake_cluster.bootstrap]) as producer:
        md = producer.send(topic, b"v", timestamp_ms=1_700_000_000_123).get(T)
        assert md.timestamp == 1_700_000_000_123
        tomb = producer.send(topic, key=b"gone").get(T)
        assert tomb.serialized_value_size == -1
    records = read_all(fake_cluster.bootstrap, topic, 1, 2)
    assert records[0].timestamp == 1_700_000_000_123
    assert (records[1].key, records[1].value) == (b"gone", None)


def test_errors_are_kafka_python_classes(fake_cluster: Any) -> None:
    topic = unique("compat-err")
    fake_cluster.create_topic(topic, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap)
    try:
        with pytest.raises(ValueError, match="key or value"):
            producer.send(topic)
        with pytest.raises(TypeError, match="headers"):
            producer.send(topic, b"v", headers={"h": b"v"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="serialized value"):
            producer.send(topic, "not bytes")
        failed: list[Any] = []
        future = producer.send(topic, b"v", partition=7)
        future.add_errback(lambda tag, e: failed.append((tag, type(e).__name__)), "before")
        future.add_callback(lambda md: failed.append(("callback", md)))
        producer.flush(T)
        assert failed == [("before", "UnknownTopicOrPartitionError")]
        future.add_both(lambda e: failed.append(("both", type(e).__name__)))
        assert failed[-1] == ("both", "UnknownTopicOrPartitionError")
        with pytest.raises(errors.UnknownTopicOrPartitionError) as info:
            future.get(T)
        assert info.value.errno == 3 and info.value.retriable
        assert future.failed() and future.retriable()
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.partitions_for(unique("absent"))
        with pytest.raises(errors.IllegalStateError):
            producer.begin_transaction()
    finally:
        producer.close(T)
    with pytest.raises(errors.IllegalStateError, match="closed"):
        producer.send(topic, b"late")


@pytest.mark.parametrize(
    ("configs", "match"),
    [
        ({"api_version": (2, 0)}, "api_version is not supported"),
        ({"partitioner": object()}, "partitioner is not supported"),
        ({"no_such_option": 1}, "unknown configuration 'no_such_option'"),
        ({"no_such_option": None}, "unknown configuration 'no_such_option'"),
        ({"ssl_crlfile": "crl.pem"}, "ssl_crlfile is not supported"),
        ({"acks": 2}, "acks must be"),
        ({"acks": 1, "enable_idempotence": True}, "idempotence"),
        ({"compression_type": "brotli"}, "compression_type must be"),
        ({"linger_ms": -1}, "linger_ms must be"),
        ({"value_serializer": 5}, "value_serializer must be callable"),
        ({"auto_offset_reset": "earliest"}, "unknown configuration 'auto_offset_reset'"),
    ],
)
def test_bad_configuration_is_named(fake_cluster: Any, configs: dict[str, Any], match: str) -> None:
    with pytest.raises(errors.KafkaConfigurationError, match=match):
        kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap, **configs)


def test_kafka_python_options_reach_pykaf(fake_cluster: Any) -> None:
    topic = unique("compat-opts")
    fake_cluster.create_topic(topic, 1)
    producer = kafka.KafkaProducer(
        bootstrap_servers=fake_cluster.bootstrap,
        client_id="compat-client",
        acks=1,
        compression_type="gzip",
        batch_size=16384,
        retries=float("inf"),
        max_in_flight_requests_per_connection=5,
        request_timeout_ms=30000,
        max_request_size=1000,
        buffer_memory=32 * 1024 * 1024,
        max_block_ms=1000,
        api_version=None,
        ssl_crlfile=None,
        partitioner=None,
    )
    try:
        future = producer.send(topic, b"x" * 2000)
        with pytest.raises(errors.MessageSizeTooLargeError):
            future.get(T)
        assert producer.send(topic, b"small").get(T).offset == 0
        assert producer.metrics()["producer-metrics"]["record-error-total"] >= 0
    finally:
        producer.close(T)


def test_batch_size_zero_and_large_max_request_size_mean_what_kafka_python_says() -> None:
    from pykaf.compat.kafka import _config

    options = _config.translate(
        {"batch_size": 0, "max_request_size": 4_000_000},
        (_config.CLIENT, _config.PRODUCER),
        frozenset(),
        "KafkaProducer",
    )
    # no batching: one record per batch, as Java's batch.size=0 (not pykaf's "only on linger")
    assert options["batch_records"] == 1 and "flush_bytes" not in options
    assert options["max_message_bytes"] == 4_000_000
    assert options["batch_bytes"] >= 4_000_000 and options["max_request_bytes"] >= 4_000_000
    pykaf.ProducerConfig(**options)  # a valid pykaf configuration


def test_unreachable_bootstrap_is_no_brokers_available() -> None:
    with pytest.raises(errors.NoBrokersAvailable):
        kafka.KafkaProducer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=2000)


def test_get_from_another_thread_and_timeout(fake_cluster: Any) -> None:
    topic = unique("compat-threads")
    fake_cluster.create_topic(topic, 2)
    with kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=i % 2) for i in range(200)]
        results: list[int] = []

        def wait() -> None:
            results.extend(f.get(T).offset for f in futures[100:])

        thread = threading.Thread(target=wait)
        thread.start()
        offsets = [f.get(T).offset for f in futures[:100]]
        thread.join(T)
        assert sorted(offsets + results) == sorted(list(range(100)) * 2)


def test_consume_transform_produce_in_a_transaction(fake_cluster: Any) -> None:
    source, sink, group = unique("compat-in"), unique("compat-out"), unique("g")
    fake_cluster.create_topic(source, 1)
    fake_cluster.create_topic(sink, 1)
    with kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap) as plain:
        for i in range(5):
            plain.send(source, b"%d" % i)
    consumer = kafka.KafkaConsumer(
        source,
        bootstrap_servers=fake_cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    producer = kafka.KafkaProducer(
        bootstrap_servers=fake_cluster.bootstrap, transactional_id=unique("txn")
    )
    try:
        with pytest.raises(errors.IllegalStateError, match="init_transactions"):
            producer.begin_transaction()
        producer.init_transactions()
        records: list[Any] = []
        deadline = time.monotonic() + T
        while len(records) < 5 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        assert len(records) == 5
        producer.begin_transaction()
        for record in records:
            producer.send(sink, record.value.upper() + b"!")
        last = records[-1]
        producer.send_offsets_to_transaction(
            {kafka.TopicPartition(source, 0): kafka.OffsetAndMetadata(last.offset + 1, "", -1)},
            consumer.group_metadata(),
        )
        producer.commit_transaction()
        assert consumer.committed(kafka.TopicPartition(source, 0)) == 5
        producer.begin_transaction()
        producer.send(sink, b"aborted")
        producer.abort_transaction()
        with pytest.raises(errors.IllegalStateError):
            producer.commit_transaction()
    finally:
        producer.close(T)
        consumer.close()
    got = read_all(fake_cluster.bootstrap, sink, 1, 5)
    assert [r.value for r in got[:5]] == [b"0!", b"1!", b"2!", b"3!", b"4!"]


@pytest.mark.parametrize("size", [0, 1, 61])
def test_batch_size_below_a_batch_header_still_sends(fake_cluster: Any, size: int) -> None:
    """kafka-python's batch_size 0 (no batching), and sizes under a batch's 61-byte header."""
    topic = unique("compat-batch0")
    fake_cluster.create_topic(topic, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap, batch_size=size)
    try:
        futures = [producer.send(topic, b"x" * 100) for _ in range(3)]
        assert [f.get(T).offset for f in futures] == [0, 1, 2]
    finally:
        producer.close(T)
