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


def _manual_commits(ck: ModuleType, broker: Any, group: str, store: bool) -> dict[str, Any]:
    """A group member's conf from the earliest offsets, committing only when told."""
    return _conf(
        ck,
        broker,
        **{
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.auto.offset.store": store,
        },
    )


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
def test_delivery_errors(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("parity")
    compat_broker.create(topic, 1)
    errors: list[Any] = []
    p = ck.Producer(_conf(ck, compat_broker, **{"message.max.bytes": 10_000}))
    try:
        p.produce(topic, b"x", partition=5, on_delivery=lambda err, msg: errors.append(err))
    except ck.KafkaException as exc:
        # librdkafka raises at once when it already has the topic's metadata
        # (a race with its first metadata request); otherwise the callback says so.
        errors.append(exc.args[0])
    assert p.flush(30) == 0
    assert [(e.code(), e.name()) for e in errors] == [(-190, "_UNKNOWN_PARTITION")]
    with pytest.raises(ck.KafkaException) as info:
        p.produce(topic, b"x" * 20_000, partition=0)
    assert info.value.args[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
    assert len(p) == 0


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
def test_assigned_partitions_auto_commit(ck: ModuleType, compat_broker: Any) -> None:
    topic, group = bc.unique("parity"), bc.unique("parity-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 3)
    conf = {"group.id": group, "auto.commit.interval.ms": 200}
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        assert [m.offset() for m in _poll(c, 3)] == [0, 1, 2]
        tp = [ck.TopicPartition(topic, 0)]
        deadline = time.monotonic() + 30
        while c.committed(tp, timeout=10)[0].offset != 3:  # committed on the interval
            assert time.monotonic() < deadline
            assert c.poll(0.3) is None  # (the shim commits from poll, librdkafka in a thread)
    finally:
        c.close()
    _produce(ck, compat_broker, topic, 0, 2)
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        c.assign([ck.TopicPartition(topic, 0)])  # from the committed offset
        assert [m.offset() for m in _poll(c, 2)] == [3, 4]
    finally:
        c.close()  # commits 5
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    try:
        assert c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset == 5
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
@pytest.mark.parametrize("store", [True, False], ids=["auto-store", "store-offsets"])
def test_commit_of_a_message_or_offsets_commits_those_partitions_only(
    ck: ModuleType, compat_broker: Any, store: bool
) -> None:
    """Records handed out on three partitions; each commit names its own partitions only."""
    topic, group = bc.unique("commit-one"), bc.unique("commit-one-group")
    compat_broker.create(topic, 3)
    for partition in range(3):
        _produce(ck, compat_broker, topic, partition, 3)
    c = ck.Consumer(_manual_commits(ck, compat_broker, group, store))
    tps = [ck.TopicPartition(topic, p) for p in range(3)]
    try:
        c.subscribe([topic])
        last = {m.partition(): m for m in _poll(c, 9)}
        assert sorted(last) == [0, 1, 2]
        done = c.commit(message=last[0], asynchronous=False)
        assert [(tp.partition, tp.offset) for tp in done] == [(0, 3)]
        got = c.committed(tps, timeout=10)
        assert [tp.offset for tp in got] == [3, ck.OFFSET_INVALID, ck.OFFSET_INVALID]
        done = c.commit(offsets=[ck.TopicPartition(topic, 1, 1)], asynchronous=False)
        assert [(tp.partition, tp.offset) for tp in done] == [(1, 1)]
        got = c.committed(tps, timeout=10)
        assert [tp.offset for tp in got] == [3, 1, ck.OFFSET_INVALID]
        if store:  # commit() commits what poll handed out, every partition
            c.commit(asynchronous=False)
            assert [tp.offset for tp in c.committed(tps, timeout=10)] == [3, 3, 3]
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


@pytest.mark.broker
def test_rebalance_callbacks(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("parity")
    compat_broker.create(topic, 2)
    _produce(ck, compat_broker, topic, 0, 1)
    events: list[tuple[str, list[tuple[str, int]]]] = []

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        events.append(("assign", sorted((tp.topic, tp.partition) for tp in partitions)))

    def on_revoke(consumer: Any, partitions: list[Any]) -> None:
        events.append(("revoke", sorted((tp.topic, tp.partition) for tp in partitions)))

    conf = {"group.id": bc.unique("g"), "auto.offset.reset": "earliest"}
    c = ck.Consumer(_conf(ck, compat_broker, **conf))
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    assert [m.value() for m in _poll(c, 1)] == [b"v0"]
    assert events == [("assign", [(topic, 0), (topic, 1)])]
    assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [(topic, 0), (topic, 1)]
    c.close()
    assert events[-1] == ("revoke", [(topic, 0), (topic, 1)])


@pytest.mark.broker
def test_pause_resume_and_incremental_assign(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("parity")
    compat_broker.create(topic, 2)
    _produce(ck, compat_broker, topic, 0, 3)
    _produce(ck, compat_broker, topic, 1, 3)
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": bc.unique("g")}))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        c.incremental_assign([ck.TopicPartition(topic, 1, ck.OFFSET_BEGINNING)])
        c.pause([ck.TopicPartition(topic, 1)])
        got = _poll(c, 3)
        assert [(m.partition(), m.offset()) for m in got] == [(0, 0), (0, 1), (0, 2)]
        assert c.poll(1.0) is None  # partition 1 is paused
        c.resume([ck.TopicPartition(topic, 1)])
        got = _poll(c, 3)
        assert [(m.partition(), m.offset()) for m in got] == [(1, 0), (1, 1), (1, 2)]
        c.incremental_unassign([ck.TopicPartition(topic, 0)])
        assert [(tp.topic, tp.partition) for tp in c.assignment()] == [(topic, 1)]
        c.unassign()
        assert c.assignment() == []
    finally:
        c.close()


@pytest.mark.broker
def test_offsets_for_times(ck: ModuleType, admin_broker: Any) -> None:
    # not on the librdkafka mock: it answers -1 for any time (to both clients)
    topic = bc.unique("parity")
    admin_broker.create(topic, 1)
    p = ck.Producer(_conf(ck, admin_broker))
    for i, stamp in enumerate((1_000_000, 2_000_000, 3_000_000)):
        p.produce(topic, b"%d" % i, partition=0, timestamp=stamp)
    assert p.flush(30) == 0
    c = ck.Consumer(_conf(ck, admin_broker, **{"group.id": bc.unique("g")}))
    try:
        asked = [ck.TopicPartition(topic, 0, t) for t in (1_500_000, 3_000_000, 9_000_000)]
        found = [c.offsets_for_times([tp], timeout=10)[0].offset for tp in asked]
        assert found == [1, 2, -1]
        c.assign([ck.TopicPartition(topic, 0, 1)])
        (msg,) = _poll(c, 1)
        assert msg.timestamp() == (ck.TIMESTAMP_CREATE_TIME, 2_000_000)
    finally:
        c.close()


@pytest.mark.broker
def test_transactions_and_offsets_in_them(ck: ModuleType, admin_broker: Any) -> None:
    source, sink, group = bc.unique("in"), bc.unique("out"), bc.unique("txn-group")
    admin_broker.create(source, 1)
    admin_broker.create(sink, 1)
    _produce(ck, admin_broker, source, 0, 2)
    p = ck.Producer(_conf(ck, admin_broker, **{"transactional.id": bc.unique("tx")}))
    p.init_transactions(30)
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = ck.Consumer(_conf(ck, admin_broker, **conf))
    try:
        c.subscribe([source])
        (first,) = _poll(c, 1)
        p.begin_transaction()
        p.produce(sink, b"kept", partition=0)
        next_offset = ck.TopicPartition(source, 0, first.offset() + 1)
        p.send_offsets_to_transaction([next_offset], c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(sink, b"dropped", partition=0)
        p.abort_transaction(30)
        got = c.committed([ck.TopicPartition(source, 0)], timeout=10)
        assert [tp.offset for tp in got] == [1]
    finally:
        c.close()
    reader = ck.Consumer(
        _conf(ck, admin_broker, **{"group.id": bc.unique("g"), "isolation.level": "read_committed"})
    )
    try:
        reader.assign([ck.TopicPartition(sink, 0, ck.OFFSET_BEGINNING)])
        assert [m.value() for m in _poll(reader, 1)] == [b"kept"]
        assert reader.poll(1.0) is None
    finally:
        reader.close()


@pytest.mark.broker
def test_transaction_calls_need_a_transactional_id(ck: ModuleType, admin_broker: Any) -> None:
    p = ck.Producer(_conf(ck, admin_broker))
    with pytest.raises(ck.KafkaException) as info:
        p.begin_transaction()
    assert info.value.args[0].code() == ck.KafkaError._NOT_CONFIGURED


# -- Producer.purge ------------------------------------------------------------------


def _report(reports: list[Any]) -> Any:
    return lambda err, msg: reports.append((err, msg))


@pytest.mark.broker
def test_purge_fails_queued_records_with_purge_queue(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("purge")
    compat_broker.create(topic, 1)
    reports: list[Any] = []
    # Nothing is sent before 10 s: the records stay queued.
    p = ck.Producer(_conf(ck, compat_broker, **{"linger.ms": 10_000}))
    try:
        # librdkafka refuses an explicit partition (_UNKNOWN_PARTITION) until
        # its metadata has the new topic.
        p.list_topics(topic, timeout=10)
        for i in range(5):
            p.produce(topic, b"q%d" % i, partition=0, on_delivery=_report(reports))
        p.produce(topic, b"no callback", partition=0)
        assert len(p) == 6
        p.purge(in_flight=False)
        assert p.flush(30) == 0  # serves the reports; the record without a callback is dropped
        assert len(p) == 0
        assert [(e.code(), e.name(), e.retriable()) for e, _ in reports] == [
            (ck.KafkaError._PURGE_QUEUE, "_PURGE_QUEUE", False)
        ] * 5
        # librdkafka reports purged records queue by queue: in any order
        assert sorted(m.value() for _, m in reports) == [b"q%d" % i for i in range(5)]
        assert {(m.topic(), m.partition(), m.offset()) for _, m in reports} == {(topic, 0, None)}
        for _ in range(3):
            reports.clear()
            p.produce(topic, b"after", partition=0, on_delivery=_report(reports))
            assert p.flush(30) == 0
            # librdkafka's purge reaches its queues from the broker threads: a
            # record produced just after it may be purged too; send it again.
            error = reports[0][0] if reports else None
            if error is None or error.code() != ck.KafkaError._PURGE_QUEUE:
                break
        assert [(e, m.offset()) for e, m in reports] == [(None, 0)]  # nothing else was written
        p.purge()  # nothing left: a no-op
    finally:
        if hasattr(p, "close"):
            p.close()


@pytest.fixture(params=["fake", "mock"])
def slow_broker(request: pytest.FixtureRequest) -> Any:
    """A fake cluster or a librdkafka mock, with ``set_rtt(ms)`` on every broker."""
    cluster = request.getfixturevalue(f"{request.param}_cluster")

    def set_rtt(ms: int) -> None:
        for node in (1, 2, 3):
            cluster.set_rtt(node, ms)

    cluster.slow = set_rtt
    return cluster


@pytest.mark.broker
@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
def test_purge_fails_in_flight_records_with_purge_inflight(
    ck: ModuleType, slow_broker: Any, idempotence: bool
) -> None:
    topic = bc.unique("purge")
    slow_broker.create_topic(topic, 1)
    reports: list[Any] = []
    conf = {"linger.ms": 0, "enable.idempotence": idempotence}
    p = ck.Producer(_conf(ck, slow_broker, **conf))
    try:
        p.list_topics(topic, timeout=10)  # librdkafka: the partition known before produce
        p.produce(topic, b"warm-up", partition=0, on_delivery=_report(reports))
        assert p.flush(30) == 0  # connected, metadata known
        slow_broker.slow(3000)
        p.produce(topic, b"a", partition=0, on_delivery=_report(reports))
        deadline = time.monotonic() + 0.5  # sent at once, answered in 3 s
        while time.monotonic() < deadline:
            p.poll(0.05)
        p.purge()
        assert p.flush(30) == 0
        assert [(e.code(), e.name()) for e, _ in reports[1:]] == [
            (ck.KafkaError._PURGE_INFLIGHT, "_PURGE_INFLIGHT")
        ]
        slow_broker.slow(0)
        del reports[:]
        p.produce(topic, b"b", partition=0, on_delivery=_report(reports))
        assert p.flush(30) == 0
        assert [e for e, _ in reports] == [None]  # the producer goes on
    finally:
        if hasattr(p, "close"):
            p.close()


# -- enable.auto.offset.store=false and store_offsets ------------------------------


def _committed(ck: ModuleType, consumer: Any, topic: str) -> int:
    return int(consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset)


def _wait_committed(ck: ModuleType, consumer: Any, topic: str, offset: int) -> None:
    deadline = time.monotonic() + 30
    while _committed(ck, consumer, topic) != offset:  # committed on the interval
        assert time.monotonic() < deadline
        consumer.poll(0.3)  # (the shim commits from poll, librdkafka in a thread)


@pytest.mark.broker
def test_a_group_member_commits_what_was_stored(ck: ModuleType, compat_broker: Any) -> None:
    topic, group = bc.unique("store"), bc.unique("store-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 6)
    c = ck.Consumer(_manual_commits(ck, compat_broker, group, store=False))
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


@pytest.mark.broker
def test_the_auto_commit_and_close_commit_what_was_stored(
    ck: ModuleType, compat_broker: Any
) -> None:
    topic, group = bc.unique("store"), bc.unique("store-group")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 6)
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


@pytest.mark.broker
def test_store_offsets_needs_auto_offset_store_off(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("store")
    compat_broker.create(topic, 1)
    _produce(ck, compat_broker, topic, 0, 1)
    c = ck.Consumer(_conf(ck, compat_broker, **{"group.id": bc.unique("g")}))
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        [msg] = _poll(c, 1)
        with pytest.raises(ck.KafkaException) as info:
            c.store_offsets(message=msg)
        assert info.value.args[0].code() == ck.KafkaError._INVALID_ARG
    finally:
        c.close()
