"""``Producer.purge``, side by side: confluent-kafka itself and pykaf's drop-in, same broker.

Queued records are purged on the fake cluster, the librdkafka mock and
Apache Kafka; in-flight records on the fake cluster and the mock, whose
brokers can be slowed (``set_rtt``) so that a request stays unanswered.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker

QUIET = {"log_level": 0}


def _conf(ck: ModuleType, bootstrap: str, **extra: Any) -> dict[str, Any]:
    conf = {"bootstrap.servers": bootstrap, **extra}
    if ck.__name__ == "confluent_kafka":
        conf.update(QUIET)
    return conf


def _report(reports: list[Any]) -> Any:
    return lambda err, msg: reports.append((err, msg))


def test_purge_fails_queued_records_with_purge_queue(ck: ModuleType, compat_broker: Any) -> None:
    topic = bc.unique("purge")
    compat_broker.create(topic, 1)
    reports: list[Any] = []
    # Nothing is sent before 10 s: the records stay queued.
    p = ck.Producer(_conf(ck, compat_broker.bootstrap, **{"linger.ms": 10_000}))
    try:
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
        assert [m.value() for _, m in reports] == [b"q%d" % i for i in range(5)]
        assert {(m.topic(), m.partition(), m.offset()) for _, m in reports} == {(topic, 0, None)}
        reports.clear()
        p.produce(topic, b"after", partition=0, on_delivery=_report(reports))
        assert p.flush(30) == 0
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


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
def test_purge_fails_in_flight_records_with_purge_inflight(
    ck: ModuleType, slow_broker: Any, idempotence: bool
) -> None:
    topic = bc.unique("purge")
    slow_broker.create_topic(topic, 1)
    reports: list[Any] = []
    conf = {"linger.ms": 0, "enable.idempotence": idempotence}
    p = ck.Producer(_conf(ck, slow_broker.bootstrap, **conf))
    try:
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
