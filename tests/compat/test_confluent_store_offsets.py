"""``enable.auto.offset.store=false`` and ``store_offsets``, side by side with confluent-kafka.

The same bodies run on the real library and on pykaf's drop-in, on the fake
cluster, the librdkafka mock and Apache Kafka: only what ``store_offsets``
stored is committed (by ``commit()``, the auto commit and ``close``), not
what ``poll`` handed out.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker

QUIET = {"log_level": 0}


def _conf(ck: ModuleType, broker: Any, **extra: Any) -> dict[str, Any]:
    conf = {"bootstrap.servers": broker.bootstrap, **extra}
    if ck.__name__ == "confluent_kafka":
        conf.update(QUIET)
    return conf


def _produce(ck: ModuleType, broker: Any, topic: str, n: int) -> None:
    p = ck.Producer(_conf(ck, broker))
    try:
        for i in range(n):
            p.produce(topic, b"v%d" % i, partition=0)
        assert p.flush(30) == 0
    finally:
        if hasattr(p, "close"):
            p.close()


def _poll(consumer: Any, n: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


def _committed(ck: ModuleType, consumer: Any, topic: str) -> int:
    return int(consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset)


def _wait_committed(ck: ModuleType, consumer: Any, topic: str, offset: int) -> None:
    deadline = time.monotonic() + 30
    while _committed(ck, consumer, topic) != offset:  # committed on the interval
        assert time.monotonic() < deadline
        consumer.poll(0.3)  # (the shim commits from poll, librdkafka in a thread)


def test_a_group_member_commits_what_was_stored(ck: ModuleType, compat_broker: Any) -> None:
    topic, group = bc.unique("store"), bc.unique("store-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 6)
    conf = {
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        c.subscribe([topic])
        msgs = _poll(c, 4)
        assert [m.offset() for m in msgs] == [0, 1, 2, 3]
        with pytest.raises(ValueError):
            c.store_offsets()
        with pytest.raises(ck.KafkaException) as info:
            c.store_offsets(offsets=[ck.TopicPartition(topic, 7, 1)])
        assert info.value.args[0].code() == ck.KafkaError._STATE
        with pytest.raises(ck.KafkaException) as info:
            c.store_offsets(offsets=[ck.TopicPartition(bc.unique("other"), 0, 1)])
        assert info.value.args[0].code() == ck.KafkaError._UNKNOWN_PARTITION
        c.store_offsets(message=msgs[1])
        committed = c.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [(topic, 0, 2)]
        assert _committed(ck, c, topic) == 2  # not 4: only what was stored
        with pytest.raises(ck.KafkaException) as info:
            c.commit(asynchronous=False)  # nothing stored since
        assert info.value.args[0].code() == ck.KafkaError._NO_OFFSET
        c.store_offsets(offsets=[ck.TopicPartition(topic, 0, 3)])
        c.commit(asynchronous=False)
        assert _committed(ck, c, topic) == 3
    finally:
        c.close()


def test_the_auto_commit_and_close_commit_what_was_stored(
    ck: ModuleType, compat_broker: Any
) -> None:
    topic, group = bc.unique("store"), bc.unique("store-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 6)
    conf = {
        "group.id": group,
        "auto.commit.interval.ms": 200,
        "enable.auto.offset.store": False,
    }
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        msgs = _poll(c, 5)
        assert [m.offset() for m in msgs] == [0, 1, 2, 3, 4]
        c.store_offsets(message=msgs[0])
        _wait_committed(ck, c, topic, 1)
        c.store_offsets(offsets=[ck.TopicPartition(topic, 0, 3)])
    finally:
        c.close()  # commits the stored 3, not the 5 handed out
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        assert _committed(ck, c, topic) == 3
        c.assign([ck.TopicPartition(topic, 0)])  # from the committed offset
        assert [m.offset() for m in _poll(c, 3)] == [3, 4, 5]
    finally:
        c.close()


def test_store_offsets_needs_auto_offset_store_off(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("store")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 1)
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": bc.unique("g")}))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        [msg] = _poll(c, 1)
        with pytest.raises(ck.KafkaException) as info:
            c.store_offsets(message=msg)
        assert info.value.args[0].code() == ck.KafkaError._INVALID_ARG
    finally:
        c.close()
