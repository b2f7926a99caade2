"""The same test bodies run on kafka-python itself and on pykaf.compat.kafka, on one broker.

Each body takes the module (``kafka`` or ``pykaf.compat.kafka``) and returns
what a user observes: record metadata, consumed records, committed offsets,
error class names. The test runs it on both and compares the results, so the
shim is held to kafka-python's behaviour, not to this file's idea of it.
"""

from __future__ import annotations

import importlib
import time
import uuid
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import pykaf.compat.kafka

real_kafka = pytest.importorskip("kafka")
real_admin = importlib.import_module("kafka.admin")
real_errors = importlib.import_module("kafka.errors")

T = 30.0


def _api(module: ModuleType, admin: ModuleType, errors: ModuleType) -> SimpleNamespace:
    return SimpleNamespace(
        name=module.__name__,
        KafkaProducer=module.KafkaProducer,
        KafkaConsumer=module.KafkaConsumer,
        KafkaAdminClient=admin.KafkaAdminClient,
        NewTopic=admin.NewTopic,
        TopicPartition=module.TopicPartition,
        OffsetAndMetadata=module.OffsetAndMetadata,
        errors=errors,
    )


APIS = {
    "kafka-python": _api(real_kafka, real_admin, real_errors),
    "pykaf": _api(pykaf.compat.kafka, pykaf.compat.kafka.admin, pykaf.compat.kafka.errors),
}


@pytest.fixture(params=["fake", "tansu", "kafka"])
def side_broker(request: pytest.FixtureRequest) -> Any:
    """The brokers both clients reach; the fake first, real Kafka last.

    Not librdkafka's mock: kafka-python cannot read its ApiVersions answer
    (the quirk pykaf works around), so it never bootstraps there.
    """
    return importlib.import_module("broker_clients").broker_from(request, request.param)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def side_by_side(broker: Any, body: Any, broker_quirks: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run ``body(api, broker)`` on both; assert they observed the same; return the results.

    ``broker_quirks``: result keys left out of the comparison because the
    broker answers kafka-python wrongly there (the caller checks pykaf's value).
    """
    results = {name: body(api, broker) for name, api in APIS.items()}
    compared = {
        name: {k: v for k, v in result.items() if k not in broker_quirks}
        if isinstance(result, dict)
        else result
        for name, result in results.items()
    }
    assert compared["pykaf"] == compared["kafka-python"]
    return results


def produce_body(api: SimpleNamespace, broker: Any) -> Any:
    topic = unique("sbs-produce")
    broker.create(topic, 3)
    producer = api.KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        key_serializer=lambda k: None if k is None else k.encode(),
        value_serializer=lambda v: v.encode(),
    )
    try:
        futures = [
            producer.send(
                topic, value=f"v{i}", key=f"key-{i % 5}", timestamp_ms=1_700_000_000_000 + i
            )
            for i in range(20)
        ]
        futures.append(producer.send(topic, value="p2", partition=2, headers=[("h", b"x")]))
        producer.flush(timeout=T)
        metadata = [f.get(timeout=T) for f in futures]
        called: list[Any] = []
        futures[0].add_callback(lambda md: called.append(("cb", md.offset)))
        futures[0].add_errback(lambda e: called.append(("eb", type(e).__name__)))
        partitions = producer.partitions_for(topic)
    finally:
        producer.close(timeout=T)
    return {
        "metadata": [
            (
                md.topic == topic,
                md.partition,
                md.offset,
                md.serialized_key_size,
                md.serialized_value_size,
                md.serialized_header_size,
            )
            for md in metadata
        ],
        "timestamps": [md.timestamp for md in metadata[:20]],
        "done": [(f.is_done, f.succeeded(), f.failed()) for f in futures],
        "called": called,
        "partitions": sorted(partitions),
    }


def test_produce_metadata(side_broker: Any) -> None:
    results = side_by_side(side_broker, produce_body)
    assert [m[2] for m in results["pykaf"]["metadata"] if m[1] == 2][-1] >= 0


def consume_group_body(api: SimpleNamespace, broker: Any) -> Any:
    topic = unique("sbs-consume")
    group = unique("sbs-group")
    broker.create(topic, 2)
    producer = api.KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(
            topic, value=b"v%d" % i, key=b"k", partition=i % 2, headers=[("n", b"%d" % i)]
        )
    producer.flush(timeout=T)
    producer.close(timeout=T)
    consumer = api.KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,  # the first join can take seconds (Tansu)
        # Tansu's first join took 23 s with the default 10 s session, 3 s with 6 s
        session_timeout_ms=6000,
        heartbeat_interval_ms=2000,
        value_deserializer=lambda v: v.decode(),
    )
    records = []
    for record in consumer:
        records.append(record)
        if len(records) == 10:
            break
    assert len(records) == 10, f"{api.name}: {len(records)} of 10 records"
    consumer.commit()
    tp = api.TopicPartition
    committed = [consumer.committed(tp(topic, p)) for p in range(2)]
    assignment = sorted(consumer.assignment())
    ends = consumer.end_offsets([tp(topic, 0), tp(topic, 1)])
    begins = consumer.beginning_offsets([tp(topic, 0)])
    consumer.close()
    admin = api.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        if hasattr(admin, "list_consumer_group_offsets"):
            listed = admin.list_consumer_group_offsets(group)
        else:
            listed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {
        "records": sorted(
            (r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp_type)
            for r in records
        ),
        "committed": committed,
        "assignment": [(x.topic == topic, x.partition) for x in assignment],
        "ends": sorted((k.partition, v) for k, v in ends.items()),
        "begins": sorted((k.partition, v) for k, v in begins.items()),
        "listed": sorted((k.topic == topic, k.partition, v.offset) for k, v in listed.items()),
    }


def test_consume_group_commit(side_broker: Any) -> None:
    # Tansu answers ListOffsets(latest) with 1 for kafka-python's batches here;
    # pykaf checks the end against a Fetch's high watermark.
    quirks = ("ends",) if side_broker.name == "tansu" else ()
    results = side_by_side(side_broker, consume_group_body, quirks)
    assert results["pykaf"]["committed"] == [5, 5]
    assert results["pykaf"]["ends"] == [(0, 5), (1, 5)]


def assign_body(api: SimpleNamespace, broker: Any) -> Any:
    topic = unique("sbs-assign")
    broker.create(topic, 2)
    producer = api.KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(6):
        producer.send(topic, value=b"%d" % i, partition=0)
    producer.flush(timeout=T)
    producer.close(timeout=T)
    tp = api.TopicPartition(topic, 0)
    consumer = api.KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([tp])
        consumer.seek(tp, 3)
        got: list[Any] = []
        deadline = time.monotonic() + T
        while len(got) < 3 and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=500).get(tp, []))
        position = consumer.position(tp)
        consumer.seek_to_beginning(tp)
        first = []
        deadline = time.monotonic() + T
        while not first and time.monotonic() < deadline:
            first = consumer.poll(timeout_ms=500, max_records=1).get(tp, [])
        errors = []
        try:
            consumer.seek(api.TopicPartition(topic, 1), 0)
        except Exception as exc:
            errors.append(type(exc).__name__)
    finally:
        consumer.close()
    return {
        "after_seek": [(r.offset, r.value) for r in got],
        "position": position,
        "first": [(r.offset, r.value) for r in first],
        "assignment_error": errors,
    }


def test_assign_seek_position(side_broker: Any) -> None:
    results = side_by_side(side_broker, assign_body)
    assert results["pykaf"]["after_seek"] == [(3, b"3"), (4, b"4"), (5, b"5")]


def admin_errors_body(api: SimpleNamespace, broker: Any) -> Any:
    topic = unique("sbs-admin")
    admin = api.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    observed: list[Any] = []
    try:
        admin.create_topics([api.NewTopic(name=topic, num_partitions=2, replication_factor=1)])
        deadline = time.monotonic() + T
        while topic not in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        observed.append(topic in admin.list_topics())
        try:
            admin.create_topics([api.NewTopic(name=topic, num_partitions=2, replication_factor=1)])
        except api.errors.KafkaError as exc:
            observed.append((type(exc).__name__, getattr(exc, "errno", None), exc.retriable))
        described = admin.describe_topics([topic])
        observed.append(sorted(p["partition_index"] for p in described[0]["partitions"]))
    finally:
        admin.close()
    producer = api.KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=5000)
    try:
        try:
            producer.send(topic, b"x" * 2_000_000).get(timeout=T)
        except api.errors.KafkaError as exc:
            observed.append(type(exc).__name__)
    finally:
        producer.close(timeout=T)
    return observed


def test_admin_and_error_classes(side_broker: Any) -> None:
    results = side_by_side(side_broker, admin_errors_body)
    assert results["pykaf"][1][0] == "TopicAlreadyExistsError"
