"""One behaviour suite, run on confluent-kafka itself and on pykaf's drop-in, same broker.

Each test takes ``ck``: the real ``confluent_kafka`` module, then
``pykaf.compat.confluent_kafka``. The bodies are the same; what they assert
(delivered partitions, offsets, values, error codes and names, polled
messages, committed offsets) must hold for both.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

QUIET = {"log_level": 0}


def _conf(ck: ModuleType, broker: Any, **extra: Any) -> dict[str, Any]:
    """The broker's conf; librdkafka's log level only for the real library (pykaf refuses it)."""
    conf = {"bootstrap.servers": broker.bootstrap, **extra}
    if ck.__name__ == "confluent_kafka":
        conf.update(QUIET)
    return conf


def _produce(ck: ModuleType, broker: Any, topic: str, partition: int, n: int) -> list[Any]:
    delivered: list[Any] = []
    p = ck.Producer(_conf(ck, broker, **{"linger.ms": 5}))
    for i in range(n):
        p.produce(
            topic,
            value=b"v%d" % i,
            key=f"k{i}",
            partition=partition,
            headers=[("h", b"%d" % i)],
            on_delivery=lambda err, msg: delivered.append((err, msg)),
        )
        p.poll(0)
    assert p.flush(30) == 0
    assert len(p) == 0
    return delivered


def _poll(consumer: Any, n: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


def test_constants_and_types(ck: ModuleType) -> None:
    assert (ck.OFFSET_BEGINNING, ck.OFFSET_END, ck.OFFSET_STORED, ck.OFFSET_INVALID) == (
        -2,
        -1,
        -1000,
        -1001,
    )
    assert (ck.TIMESTAMP_NOT_AVAILABLE, ck.TIMESTAMP_CREATE_TIME, ck.TIMESTAMP_LOG_APPEND_TIME) == (
        0,
        1,
        2,
    )
    tp = ck.TopicPartition("t")
    assert (tp.topic, tp.partition, tp.offset) == ("t", -1, -1001)
    assert ck.TopicPartition("t", 1, 5) == ck.TopicPartition("t", 1, 7)  # offsets not compared
    assert len({ck.TopicPartition("t", 1), ck.TopicPartition("t", 1)}) == 1
    assert sorted([ck.TopicPartition("b", 0), ck.TopicPartition("a", 2)])[0].topic == "a"


def test_errors(ck: ModuleType) -> None:
    eof = ck.KafkaError(ck.KafkaError._PARTITION_EOF)
    assert (eof.code(), eof.name(), eof.fatal()) == (-191, "_PARTITION_EOF", False)
    assert eof == ck.KafkaError._PARTITION_EOF
    broker = ck.KafkaError(ck.KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert (broker.code(), broker.name()) == (3, "UNKNOWN_TOPIC_OR_PART")
    assert ck.KafkaError(ck.KafkaError.NOT_LEADER_FOR_PARTITION).name() == (
        "NOT_LEADER_FOR_PARTITION"
    )
    assert ck.KafkaError(ck.KafkaError._FATAL, "boom", fatal=True).fatal()
    assert ck.KafkaError(ck.KafkaError._TIMED_OUT, "slow", retriable=True).retriable()
    assert ck.KafkaError(ck.KafkaError._FAIL, "a reason").str() == "a reason"
    exc = ck.KafkaException(ck.KafkaError(ck.KafkaError._STATE, "no"))
    assert isinstance(exc, Exception)
    assert exc.args[0].code() == ck.KafkaError._STATE


def test_unknown_config_key_is_refused_by_name(ck: ModuleType) -> None:
    with pytest.raises(ck.KafkaException) as info:
        ck.Producer({"bootstrap.servers": "localhost:1", "no.such.property": 1})
    assert info.value.args[0].code() == ck.KafkaError._INVALID_ARG
    assert "no.such.property" in info.value.args[0].str()


@pytest.mark.broker
def test_delivery_reports(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("parity")
    compat_broker.create(topic, 2)
    delivered = _produce(ck, compat_broker, topic, 1, 5)
    assert [err for err, _ in delivered] == [None] * 5
    msgs = [msg for _, msg in delivered]
    assert [(m.topic(), m.partition(), m.offset()) for m in msgs] == [
        (topic, 1, i) for i in range(5)
    ]
    # confluent-kafka's delivery reports carry no headers
    assert [(m.value(), m.key(), m.headers()) for m in msgs] == [
        (b"v%d" % i, b"k%d" % i, None) for i in range(5)
    ]
    if compat_broker.name != "mock":
        assert {m.timestamp()[0] for m in msgs} == {ck.TIMESTAMP_CREATE_TIME}
        assert all(m.timestamp()[1] > 1_600_000_000_000 for m in msgs)
    else:
        # The librdkafka mock answers a fixed LogAppendTime, reported as such by both.
        assert {m.timestamp() for m in msgs} == {(ck.TIMESTAMP_LOG_APPEND_TIME, 1234)}
    assert [len(m) for m in msgs] == [2] * 5


@pytest.mark.broker
def test_assign_poll_commit_and_watermarks(ck: ModuleType, compat_broker: Any) -> None:
    topic, group = bc.unique("parity"), bc.unique("parity-group")
    compat_broker.create(topic, 2)
    _produce(ck, compat_broker, topic, 0, 6)
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": group, "enable.auto.commit": False}))
    try:
        c.assign([ck.TopicPartition(topic, 0, 2)])
        msgs = _poll(c, 4)
        assert [(m.partition(), m.offset(), m.value(), m.key()) for m in msgs] == [
            (0, i, b"v%d" % i, b"k%d" % i) for i in range(2, 6)
        ]
        assert msgs[0].headers() == [("h", b"2")]
        assert c.position([ck.TopicPartition(topic, 0)])[0].offset == 6
        committed = c.commit(message=msgs[1], asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [(topic, 0, 4)]
        got = c.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 4), (1, ck.OFFSET_INVALID)]
        assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10) == (0, 6)
        c.seek(ck.TopicPartition(topic, 0, 1))
        assert [m.offset() for m in _poll(c, 2)] == [1, 2]
    finally:
        c.close()
    # a new consumer of the group starts from the committed offset
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": group, "enable.auto.commit": False}))
    try:
        c.assign([ck.TopicPartition(topic, 0)])
        assert [m.offset() for m in _poll(c, 2)] == [4, 5]
    finally:
        c.close()


@pytest.mark.broker
def test_group_subscribe_commit_and_committed(ck: ModuleType, compat_broker: Any) -> None:
    topic, group = bc.unique("parity"), bc.unique("parity-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 3)
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        with pytest.raises(ck.KafkaException) as info:
            c.commit(asynchronous=False)
        assert info.value.args[0].code() == ck.KafkaError._NO_OFFSET
        c.subscribe([topic])
        msgs = _poll(c, 3)
        assert [m.value() for m in msgs] == [b"v0", b"v1", b"v2"]
        committed = c.commit(message=msgs[-1], asynchronous=False)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 3)]
        got = c.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 3)]
    finally:
        c.close()


@pytest.mark.broker
def test_consume_batch(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("parity")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 10)
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": bc.unique("g")}))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            batch = c.consume(num_messages=4, timeout=1.0)
            assert len(batch) <= 4
            got.extend(batch)
        assert [m.offset() for m in got] == list(range(10))
        with pytest.raises(ValueError):
            c.consume(num_messages=-1)
    finally:
        c.close()
