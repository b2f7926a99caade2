"""Awaited sends: one record at a time, each waited for before the next.

The obvious loop of a script or a request handler: send a record, wait until
the broker has it, go on. Each client runs at its default linger: 5 ms for
pykaf (its shim included) and confluent-kafka (librdkafka's default), 0 for
aiokafka and kafka-python. A client that let a waited-for record linger would
pay 5 ms per record; pykaf sends an awaited record's batch at once
(``docs/producer.md``, "Awaited records do not linger").

One round sends 2,000 records of 100-byte values, no keys, into a fresh
4-partition topic, acks=all, idempotent (aiokafka on Tansu excepted, as in
``bench/test_producer.py``: Tansu refuses its InitProducerId v0). Opening the
producer and its warm-up (one record to each partition, waited for) come
before the timing, closing it after. Each round checks the topic's high
watermarks add up to the records sent plus the warm-up.

Groups: ``awaited-2k-kafka`` (Apache Kafka, one node), ``awaited-2k-tansu``
and ``awaited-2k-mock`` (librdkafka's mock cluster; kafka-python cannot reach
it). Every pykaf path is paired with every peer (``params`` are the same):

* ``confluent-kafka[produce_flush]``: ``produce()`` then ``flush()`` per
  record, confluent-kafka's way of waiting for one record.
* ``aiokafka[send_and_wait]``: ``await send_and_wait()`` per record.
* ``kafka-python[send_get]``: ``send().get()`` per record.
* ``pykaf[send]``: ``await producer.send()`` per record (trio).
* ``pykaf[send_plain]``: the same, not idempotent. Tansu refuses aiokafka's
  InitProducerId v0, so aiokafka runs there without idempotence, and an
  idempotent Produce costs Tansu more per request (its sequence checks):
  on Tansu, ``send_plain`` against ``aiokafka[send_and_wait]`` is the
  like-for-like pair.
* ``pykaf[sync_send]``: ``pykaf.sync.Producer.send()`` per record.
* ``pykaf[compat_kafka_get]``: ``pykaf.compat.kafka``'s ``send().get()``.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from bench._support import (
    AIOKAFKA,
    KAFKA_PYTHON,
    PYKAF,
    bulk_values,
    confluent_conf,
    tag,
    time_produce_rounds,
)
from bench.test_producer import (
    LINGER_S,
    PARTITIONS,
    ROUND_TIMEOUT_S,
    VALUE_SIZE,
    AiokafkaRound,
    Round,
    _pykaf_options,
    _PykafRound,
    _warm_value,
)

CONFLUENT = "confluent-kafka"
RECORDS = 2_000
ROUNDS = 3
LINGER_MS = round(LINGER_S * 1000)

_topic_ids = itertools.count()


class ConfluentFlushRound(Round):
    """confluent-kafka: ``produce()`` then ``flush()`` per record."""

    def start(self) -> None:
        ck = importlib.import_module("confluent_kafka")
        self.producer = ck.Producer(confluent_conf(self.bootstrap, LINGER_MS))
        for partition in range(PARTITIONS):
            self.producer.produce(self.topic, _warm_value(self.values), partition=partition)
        assert self.producer.flush(ROUND_TIMEOUT_S) == 0, "confluent-kafka: warm-up unacknowledged"
        self.errors: list[Any] = []

    def run(self) -> None:
        topic, produce, flush = self.topic, self.producer.produce, self.producer.flush
        errors = self.errors

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                errors.append(error)

        for value in self.values:
            produce(topic, value, callback=delivered)
            if flush(ROUND_TIMEOUT_S) != 0:
                raise AssertionError("confluent-kafka: a record was not acknowledged")

    def stop(self) -> int:
        del self.producer
        assert not self.errors, f"confluent-kafka: {self.errors[0]}"
        return len(self.values)


class AiokafkaSendAndWaitRound(AiokafkaRound):
    """aiokafka: ``await send_and_wait()`` per record, at its default linger (0)."""

    linger_ms = None

    async def produce(self, producer: Any) -> int:
        topic, send = self.topic, producer.send_and_wait
        for value in self.values:
            await send(topic, value)  # raises the record's failure
        return len(self.values)


class KafkaPythonGetRound(Round):
    """kafka-python's API: ``send().get()`` per record."""

    module = "kafka"

    def start(self) -> None:
        api = importlib.import_module(self.module)
        # linger_ms at kafka-python's default (0); the shim keeps pykaf's (5 ms).
        self.producer = api.KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True
        )
        warm = _warm_value(self.values)
        for partition in range(PARTITIONS):
            self.producer.send(self.topic, warm, partition=partition).get(ROUND_TIMEOUT_S)

    def run(self) -> None:
        topic, send = self.topic, self.producer.send
        for value in self.values:
            send(topic, value).get(ROUND_TIMEOUT_S)  # raises the record's failure

    def stop(self) -> int:
        self.producer.close(ROUND_TIMEOUT_S)
        return len(self.values)


class KafkaShimGetRound(KafkaPythonGetRound):
    module = "pykaf.compat.kafka"


class PykafSendRound(_PykafRound):
    """pykaf: ``await producer.send()`` per record, on trio."""

    async def produce(self, producer: Any) -> int:
        topic, send = self.topic, producer.send
        for value in self.values:
            await send(topic, value)  # raises the record's failure
        return len(self.values)


class PykafSendPlainRound(PykafSendRound):
    """``await producer.send()`` per record, not idempotent: aiokafka's settings on Tansu."""

    idempotence = False


class PykafSyncSendRound(Round):
    """pykaf's blocking facade: ``pykaf.sync.Producer.send()`` per record."""

    def start(self) -> None:
        sync = importlib.import_module("pykaf.sync")
        self.producer = sync.Producer(self.bootstrap, **_pykaf_options())
        warm = _warm_value(self.values)
        for partition in range(PARTITIONS):
            self.producer.send(self.topic, warm, partition=partition, timeout=ROUND_TIMEOUT_S)

    def run(self) -> None:
        topic, send = self.topic, self.producer.send
        for value in self.values:
            send(topic, value, timeout=ROUND_TIMEOUT_S)  # raises the record's failure

    def stop(self) -> int:
        self.producer.close(timeout=ROUND_TIMEOUT_S)
        return len(self.values)


# (client, variant, the round's maker given the broker's name, the module a skip needs)
CASES: list[tuple[str, str, Callable[[str], Callable[..., Round]], str]] = [
    (CONFLUENT, "produce_flush", lambda b: ConfluentFlushRound, "confluent_kafka"),
    (
        AIOKAFKA,
        "send_and_wait",
        lambda b: lambda *a: AiokafkaSendAndWaitRound(*a, idempotence=b != "tansu"),
        "aiokafka",
    ),
    (KAFKA_PYTHON, "send_get", lambda b: KafkaPythonGetRound, "kafka"),
    (PYKAF, "send", lambda b: PykafSendRound, "trio"),
    (PYKAF, "send_plain", lambda b: PykafSendPlainRound, "trio"),
    (PYKAF, "sync_send", lambda b: PykafSyncSendRound, "trio"),
    (PYKAF, "compat_kafka_get", lambda b: KafkaShimGetRound, "kafka"),
]
# kafka-python cannot connect to librdkafka's mock cluster: neither it nor
# the shim it is compared with run there.
BROKERS = {
    "kafka": CASES,
    "tansu": CASES,
    "mock": [c for c in CASES if c[1] not in ("send_get", "compat_kafka_get")],
}


@pytest.mark.parametrize(
    ("broker_name", "client", "variant", "make_round", "needs"),
    [
        pytest.param(b, *case, id=f"{b}-{case[0]}-{case[1]}")
        for b, cases in BROKERS.items()
        for case in cases
    ],
)
def test_awaited_send(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    client: str,
    variant: str,
    make_round: Callable[[str], Callable[..., Round]],
    needs: str,
) -> None:
    pytest.importorskip(needs)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    tag(
        benchmark,
        group=f"awaited-2k-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_MS,
    )
    maker = make_round(broker_name)
    time_produce_rounds(
        benchmark,
        broker,
        maker,
        values,
        topic_prefix=f"bench-awaited-{broker_name}-{variant}",
        partitions=PARTITIONS,
        rounds=ROUNDS,
        label=f"{client}[{variant}]",
    )
