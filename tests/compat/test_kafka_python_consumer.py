"""pykaf.compat.kafka.KafkaConsumer on pykaf's fake cluster: kafka-python's consumer API."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

import pykaf.sync
from pykaf.compat import kafka
from pykaf.compat.kafka import errors

T = 30.0
TP = kafka.TopicPartition


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with pykaf.sync.Producer(bootstrap) as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(
                    topic,
                    json.dumps({"p": p, "i": i}).encode(),
                    key=b"k%d" % i,
                    partition=p,
                    headers=[("n", b"%d" % i)],
                    timestamp=1_700_000_000_000 + i * 1000,
                    timeout=T,
                )


def test_iteration_with_deserializers_and_timeout(fake_cluster: Any) -> None:
    topic = unique("compat-iter")
    fake_cluster.create_topic(topic, 2)
    fill(fake_cluster.bootstrap, topic, 2, 5)
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=fake_cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        value_deserializer=lambda m: json.loads(m.decode()),
    )
    started = time.monotonic()
    records = list(consumer)
    assert time.monotonic() - started < T
    consumer.close()
    assert len(records) == 10
    first = min((r for r in records if r.partition == 1), key=lambda r: r.offset)
    assert isinstance(first, kafka.ConsumerRecord)
    assert (first.topic, first.offset, first.key, first.value) == (
        topic,
        0,
        b"k0",
        {"p": 1, "i": 0},
    )
    assert first.headers == [("n", b"0")]
    assert first.timestamp == 1_700_000_000_000 and first.timestamp_type == 0
    assert first.serialized_key_size == 2 and first.serialized_header_size == 2
    assert consumer.subscription() is None or consumer.subscription() == {topic}


def test_latest_is_the_default_without_a_group(fake_cluster: Any) -> None:
    topic = unique("compat-latest")
    fake_cluster.create_topic(topic, 1)
    fill(fake_cluster.bootstrap, topic, 1, 3)
    with kafka.KafkaConsumer(topic, bootstrap_servers=fake_cluster.bootstrap) as consumer:
        assert consumer.poll(timeout_ms=300) == {}
        assert consumer.assignment() == {TP(topic, 0)}
        fill(fake_cluster.bootstrap, topic, 1, 1)
        got = consumer.poll(timeout_ms=T * 1000)
        assert [r.offset for r in got[TP(topic, 0)]] == [3]


def test_reset_none_with_no_committed_offset_raises(fake_cluster: Any) -> None:
    topic = unique("compat-none")
    fake_cluster.create_topic(topic, 1)
    with kafka.KafkaConsumer(
        bootstrap_servers=fake_cluster.bootstrap, auto_offset_reset="none"
    ) as consumer:
        with pytest.raises(errors.NoOffsetForPartitionError):
            consumer.subscribe([topic])
        with pytest.raises(errors.NoOffsetForPartitionError):
            consumer.assign([TP(topic, 0)])


def test_group_commit_and_resume(fake_cluster: Any) -> None:
    topic = unique("compat-group")
    group = unique("g")
    fake_cluster.create_topic(topic, 2)
    fill(fake_cluster.bootstrap, topic, 2, 4)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=fake_cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=3,
    )
    consumer.subscribe([topic])
    seen: list[Any] = []
    deadline = time.monotonic() + T
    while len(seen) < 8 and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=1000)
        assert sum(len(v) for v in batch.values()) <= 3
        for records in batch.values():
            seen.extend(records)
    assert len(seen) == 8
    consumer.commit()
    assert consumer.committed(TP(topic, 0)) == 4
    assert consumer.committed(TP(topic, 1), metadata=True) == kafka.OffsetAndMetadata(4, "", -1)
    assert consumer.assignment() == {TP(topic, 0), TP(topic, 1)}
    assert consumer.position(TP(topic, 0)) == 4
    with pytest.raises(errors.IllegalStateError, match="not supported on a group"):
        consumer.seek(TP(topic, 0), 0)
    with pytest.raises(errors.IllegalStateError, match=r"commit\(offsets=\.\.\.\)"):
        consumer.commit({TP(topic, 0): kafka.OffsetAndMetadata(1, "", -1)})
    consumer.close()
    fill(fake_cluster.bootstrap, topic, 1, 1)
    again = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=fake_cluster.bootstrap,
        group_id=group,
        consumer_timeout_ms=3000,
    )
    rest = list(again)
    again.close()
    assert [(r.partition, r.offset) for r in rest] == [(0, 4)]


def test_assigned_partitions_are_auto_committed_on_close(fake_cluster: Any) -> None:
    """group_id + assign() + enable_auto_commit (the default): close commits the positions."""
    topic = unique("compat-assign-ac")
    group = unique("g")
    fake_cluster.create_topic(topic, 1)
    fill(fake_cluster.bootstrap, topic, 1, 5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=fake_cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=3_600_000,  # only the commit on close can happen
    )
    consumer.assign([TP(topic, 0)])
    got: list[int] = []
    deadline = time.monotonic() + T
    while len(got) < 3 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=3 - len(got)).values():
            got += [r.offset for r in records]
    assert got == [0, 1, 2]
    consumer.close()
    again = kafka.KafkaConsumer(bootstrap_servers=fake_cluster.bootstrap, group_id=group)
    try:
        assert again.committed(TP(topic, 0)) == 3
    finally:
        again.close(autocommit=False)


def test_assign_seek_position_pause_and_offsets(fake_cluster: Any) -> None:
    topic = unique("compat-assign")
    group = unique("g")
    fake_cluster.create_topic(topic, 2)
    fill(fake_cluster.bootstrap, topic, 2, 6)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=fake_cluster.bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TP(topic, 0), TP(topic, 1)])
        assert consumer.assignment() == {TP(topic, 0), TP(topic, 1)}
        assert consumer.committed(TP(topic, 0)) is None
        assert consumer.beginning_offsets([TP(topic, 0)]) == {TP(topic, 0): 0}
        assert consumer.end_offsets([TP(topic, 0), TP(topic, 1)]) == {
            TP(topic, 0): 6,
            TP(topic, 1): 6,
        }
        found = consumer.offsets_for_times(
            {TP(topic, 0): 1_700_000_002_500, TP(topic, 1): 1_800_000_000_000}
        )
        assert found == {
            TP(topic, 0): kafka.OffsetAndTimestamp(3, 1_700_000_003_000, -1),
            TP(topic, 1): None,
        }
        consumer.seek(TP(topic, 0), 4)
        consumer.pause(TP(topic, 1))
        assert consumer.paused() == {TP(topic, 1)}
        got = consumer.poll(timeout_ms=T * 1000)
        assert list(got) == [TP(topic, 0)]
        assert [r.offset for r in got[TP(topic, 0)]] == [4, 5]
        assert consumer.position(TP(topic, 0)) == 6
        assert consumer.highwater(TP(topic, 0)) == 6
        consumer.commit()
        assert consumer.committed(TP(topic, 0)) == 6
        assert consumer.committed(TP(topic, 1)) == 0  # its position, paused or not
        consumer.commit({TP(topic, 1): kafka.OffsetAndMetadata(2, "", -1)})
        assert consumer.committed(TP(topic, 1)) == 2
        consumer.resume(TP(topic, 1))
        consumer.seek_to_beginning(TP(topic, 1))
        got = consumer.poll(timeout_ms=T * 1000, max_records=2)
        assert [r.offset for r in got[TP(topic, 1)]] == [0, 1]
        consumer.seek_to_end()
        assert consumer.poll(timeout_ms=200) == {}
        with pytest.raises(ValueError, match="Unassigned partition"):
            consumer.seek(TP(topic, 9), 0)
        with pytest.raises(errors.IllegalStateError, match="not assigned"):
            consumer.position(TP(topic, 9))
        with pytest.raises(errors.IllegalStateError, match="mutually exclusive"):
            consumer.subscribe([topic])
        assert topic in consumer.topics()
        assert consumer.partitions_for_topic(topic) == {0, 1}
        assert consumer.partitions_for_topic(unique("absent")) is None
    finally:
        consumer.close()
    # a new member of the group starts where the manual commits left off
    with kafka.KafkaConsumer(bootstrap_servers=fake_cluster.bootstrap, group_id=group) as other:
        other.assign([TP(topic, 1)])
        got = other.poll(timeout_ms=T * 1000, max_records=1)
        assert [r.offset for r in got[TP(topic, 1)]] == [2]


def test_misuse_and_bad_configuration(fake_cluster: Any) -> None:
    topic = unique("compat-bad")
    fake_cluster.create_topic(topic, 1)
    with kafka.KafkaConsumer(bootstrap_servers=fake_cluster.bootstrap) as consumer:
        with pytest.raises(errors.IllegalStateError, match="subscribe"):
            consumer.poll()
        with pytest.raises(errors.IllegalStateError, match="group_id"):
            consumer.committed(TP(topic, 0))
        with pytest.raises(errors.KafkaConfigurationError, match="listener"):
            consumer.subscribe([topic], listener=object())
        consumer.subscribe(pattern="compat-bad-.*")
        assert topic in (consumer.subscription() or set())
    for configs, match in [
        ({"auto_offset_reset": "middle"}, "auto_offset_reset"),
        ({"session_timeout_ms": 10000}, "needs a group_id"),
        ({"partition_assignment_strategy": []}, "not supported"),
        ({"linger_ms": 5}, "unknown configuration 'linger_ms'"),
        ({"max_poll_records": 0}, "max_poll_records"),
    ]:
        with pytest.raises(errors.KafkaConfigurationError, match=match):
            kafka.KafkaConsumer(bootstrap_servers=fake_cluster.bootstrap, **configs)
    with pytest.raises(errors.NoBrokersAvailable):
        kafka.KafkaConsumer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=2000)


def test_client_rack_is_the_consumers_rack() -> None:
    from pykaf.compat.kafka import _config

    options = _config.translate(
        {"client_rack": "use1-az2", "fetch_max_wait_ms": 100},
        (_config.CLIENT, _config.CONSUMER),
        frozenset(),
        "KafkaConsumer",
    )
    assert options == {"client_rack": "use1-az2", "fetch_max_wait": 0.1}
    pykaf.ConsumerConfig(**options)  # a valid pykaf configuration


def test_a_partition_error_that_is_a_closed_error_is_raised_not_the_end(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Iteration ends quietly when the consumer closes, not on a partition's
    ConsumerError whose cause is a ClosedError (it is a ClosedError too)."""
    topic = unique("compat-closed")
    fake_cluster.create_topic(topic, 1)
    consumer = kafka.KafkaConsumer(bootstrap_servers=fake_cluster.bootstrap)
    consumer.assign([TP(topic, 0)])
    reader = consumer._active()
    partition_error = pykaf.errors.ConsumerError(topic, 0, pykaf.errors.ClosedError("gone"))
    assert isinstance(partition_error, pykaf.errors.ClosedError)

    def failing(timeout: float | None = None) -> Any:
        raise partition_error

    monkeypatch.setattr(reader, "poll", failing)
    with pytest.raises(errors.IllegalStateError, match="gone") as caught:
        next(consumer)
    assert caught.value.__cause__ is partition_error

    def closed(timeout: float | None = None) -> Any:
        raise pykaf.errors.ClosedError("the consumer is closed")

    monkeypatch.setattr(reader, "poll", closed)
    assert list(consumer) == []
    consumer.close()
