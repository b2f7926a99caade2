"""What the drop-in refuses (what pykaf cannot do as confluent-kafka does), on the fake."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pykaf.compat import confluent_kafka as ck
from pykaf.compat.confluent_kafka import admin

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Any:
    return bc.broker_from(request, "fake")


@pytest.fixture
def group_member(fake: Any) -> Iterator[tuple[Any, str]]:
    topic = bc.unique("shim")
    fake.create(topic, 1)
    p = ck.Producer({"bootstrap.servers": fake.bootstrap})
    for i in range(3):
        p.produce(topic, b"%d" % i, partition=0)
    assert p.flush(10) == 0
    p.close()
    c = ck.Consumer(
        {
            "bootstrap.servers": fake.bootstrap,
            "group.id": bc.unique("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    yield c, topic
    c.close()


def _code(info: pytest.ExceptionInfo[Any]) -> int:
    error = info.value.args[0]
    assert isinstance(error, ck.KafkaError)
    return error.code()


def _first(c: Any) -> Any:
    deadline = time.monotonic() + 10
    while (msg := c.poll(0.5)) is None:
        assert time.monotonic() < deadline
    return msg


def test_calls_a_group_member_cannot_make(group_member: Any) -> None:
    c, topic = group_member
    _first(c)
    tp = ck.TopicPartition(topic, 0, 0)
    for call in (lambda: c.seek(tp), lambda: c.pause([tp]), lambda: c.resume([tp])):
        with pytest.raises(ck.KafkaException) as info:
            call()
        assert _code(info) == ck.KafkaError._NOT_IMPLEMENTED
    with pytest.raises(ck.KafkaException) as info:
        c.assign([tp])
    assert _code(info) == ck.KafkaError._STATE


def test_refused_arguments(fake: Any) -> None:
    c = ck.Consumer({"bootstrap.servers": fake.bootstrap, "group.id": "g"})
    with pytest.raises(ck.KafkaException) as info:
        c.subscribe(["t"], on_lost=lambda consumer, partitions: None)
    assert _code(info) == ck.KafkaError._NOT_IMPLEMENTED
    with pytest.raises(ck.KafkaException) as info:
        c.subscribe(["^t.*"])
    assert _code(info) == ck.KafkaError._NOT_IMPLEMENTED
    with pytest.raises(ck.KafkaException) as info:
        c.get_watermark_offsets(ck.TopicPartition("t", 0), cached=True)
    assert _code(info) == ck.KafkaError._NOT_IMPLEMENTED
    with pytest.raises(TypeError):
        c.assign([("t", 0)])  # type: ignore[list-item]
    assert c.poll(0.1) is None  # nothing assigned: waits, then None
    c.close()
    with pytest.raises(RuntimeError):
        c.poll(0)
    no_group = ck.Consumer({"bootstrap.servers": fake.bootstrap})
    with pytest.raises(ck.KafkaException) as info:
        no_group.subscribe(["t"])
    assert _code(info) == ck.KafkaError._UNKNOWN_GROUP
    no_group.close()
    with pytest.raises(ck.KafkaException) as info:
        admin.NewPartitions("t", 3, replica_assignment=[[1], [2]])
    assert _code(info) == ck.KafkaError._INVALID_ARG
    with pytest.raises(ValueError):
        admin.ConfigResource(admin.ResourceType.GROUP, "g")
    with pytest.raises(ValueError):
        admin.ConfigResource("topic", "t", set_config={"retention.ms": "1"})


def test_producer_arguments_and_metadata(fake: Any) -> None:
    topic = bc.unique("shim")
    fake.create(topic, 2)
    p = ck.Producer({"bootstrap.servers": fake.bootstrap})
    with pytest.raises(TypeError):
        p.produce(topic, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        p.produce(topic, b"x", headers=[("h", 5)])
    got: list[Any] = []
    p.produce(topic, "text", key="k", headers={"h": "v"}, callback=lambda e, m: got.append(m))
    assert p.flush(10) == 0
    assert (got[0].value(), got[0].key()) == (b"text", b"k")
    md = p.list_topics(topic)
    assert sorted(md.topics[topic].partitions) == [0, 1]
    missing = bc.unique("missing")
    assert p.list_topics(missing).topics[missing].error.code() == 3
    p.close()
    with pytest.raises(ck.KafkaException) as info:
        p.produce(topic, b"x")
    assert _code(info) == ck.KafkaError._DESTROY


def test_the_codes_and_names_are_librdkafkas() -> None:
    from pykaf.compat.confluent_kafka._error import LIBRDKAFKA_NAMES, LOCAL_CODES

    real = pytest.importorskip("confluent_kafka")
    for name, code in LOCAL_CODES.items():
        assert getattr(real.KafkaError, name) == code, name
    for code, name in LIBRDKAFKA_NAMES.items():
        assert getattr(real.KafkaError, name) == code, name
        assert ck.KafkaError(code).name() == real.KafkaError(code).name()


def test_error_cb_gets_what_would_be_raised(fake: Any) -> None:
    topic = bc.unique("shim")
    fake.create(topic, 1)
    reported: list[Any] = []
    p = ck.Producer({"bootstrap.servers": fake.bootstrap, "error_cb": reported.append})
    p.produce(topic, b"x", partition=5)  # no delivery callback: reported by flush
    assert p.flush(10) == 0
    assert [e.code() for e in reported] == [ck.KafkaError.UNKNOWN_TOPIC_OR_PART]
    p.close()
    bare = ck.Producer({"bootstrap.servers": fake.bootstrap})
    bare.produce(topic, b"x", partition=5)
    with pytest.raises(ck.KafkaException) as info:
        bare.flush(10)
    assert _code(info) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    bare.close()

    conf = {
        "bootstrap.servers": fake.bootstrap,
        "group.id": bc.unique("g"),
        "group.instance.id": "one",
    }
    fenced: list[Any] = []
    first = ck.Consumer({**conf, "error_cb": fenced.append})
    first.subscribe([topic])
    assert first.poll(1.0) is None
    second = ck.Consumer(conf)  # the same instance id fences the first member
    second.subscribe([topic])
    deadline = time.monotonic() + 20
    while not fenced:
        assert time.monotonic() < deadline
        assert first.poll(0.2) is None
    assert fenced[0].code() == ck.KafkaError.FENCED_INSTANCE_ID
    second.close()
    first.close()
