"""The drop-in shims (``pykaf.compat``) against the clients they stand in for.

A script ported by changing one import runs the same calls on pykaf; these
cases time those calls on both sides, with the same code and configuration,
on the same broker in the same run (``bench/test_producer.py``'s sizes:
1,000,000 records of 100-byte values, no keys, into a fresh 4-partition
topic, acks=all, idempotent, linger 5 ms, 5 rounds).

Groups (``extra_info["params"]`` names the API, so ``bench/ratios.py`` pairs
each shim only with the client it stands in for):

* ``compat-produce-1M-tansu``: a Tansu broker.
* ``compat-produce-1M-mock``: librdkafka's mock cluster (3 brokers), for the
  confluent-kafka pairs only: kafka-python cannot connect to it.

Pairs (peer, then the pykaf shim, each built from the module named):

* ``api=confluent-kafka``: ``confluent-kafka[poll]`` (``confluent_kafka``)
  and ``pykaf[compat_confluent]`` (``pykaf.compat.confluent_kafka``):
  ``Producer(conf)``, ``produce()`` + ``poll(0)`` per record (on
  ``BufferError``, ``poll(0.1)`` and again), ``flush()``, which must return 0.
* ``api=confluent-kafka,callback``: ``confluent-kafka[poll_cb]`` and
  ``pykaf[compat_confluent_cb]``: the same with ``callback=`` a delivery
  callback per record (as confluent-kafka's README), which must hear of every
  record acknowledged and no error.
* For reference, the pykaf path under the confluent-kafka shim, in the same
  groups and params: ``pykaf[sync_produce]`` and ``pykaf[sync_produce_cb]``
  (``pykaf.sync.Producer.produce()`` + ``poll(0)``, without and with
  ``on_delivery=``; ``bench/test_producer.py``'s rounds), so the run shows
  what the shim's layer costs over it.
* ``api=kafka-python``: ``kafka-python[send]`` (``kafka``) and
  ``pykaf[compat_kafka]`` (``pykaf.compat.kafka``): ``KafkaProducer(...)``,
  ``send()`` per record (its future kept), ``flush()``; every future must
  have succeeded.

Opening the producer and its warm-up (one record to each partition, waited
for) come before the timing, closing it after, as in ``bench/test_producer.py``.
Every round checks the topic's high watermarks add up to the records sent
plus the 4 warm-up records, and that the client reports every record
acknowledged.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from bench._support import (
    KAFKA_PYTHON,
    PYKAF,
    bulk_values,
    confluent_conf,
    confluent_produce_idiom,
    tag,
    time_produce_rounds,
)
from bench.test_producer import (
    LINGER_S,
    PARTITIONS,
    RECORDS,
    ROUND_TIMEOUT_S,
    ROUNDS,
    VALUE_SIZE,
    PykafSyncProduceCallbackRound,
    PykafSyncProduceRound,
    Round,
    _DeliveryCounter,
)

CONFLUENT = "confluent-kafka"
LINGER_MS = round(LINGER_S * 1000)

_topic_ids = itertools.count()


class ConfluentApiRound(Round):
    """confluent-kafka's API: ``produce()`` + ``poll(0)`` per record, ``flush()``."""

    module = "confluent_kafka"
    with_callback = False

    def start(self) -> None:
        api = importlib.import_module(self.module)
        conf = confluent_conf(self.bootstrap, LINGER_MS)
        self.producer = api.Producer(conf)
        warm = self.values[0]
        for partition in range(PARTITIONS):
            self.producer.produce(self.topic, warm, partition=partition)
        if self.producer.flush(ROUND_TIMEOUT_S) != 0:
            raise AssertionError(f"{self.module}: the warm-up records were not acknowledged")
        self.counter = _DeliveryCounter() if self.with_callback else None

    def run(self) -> None:
        confluent_produce_idiom(self.producer, self.topic, self.values, self.counter)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)

    def stop(self) -> int:
        self.producer.close()
        assert self.left == 0, f"{self.module}: {self.left} records unacknowledged after flush"
        if self.counter is None:
            return len(self.values)
        assert self.counter.error is None, f"{self.module}: {self.counter.error}"
        return self.counter.acked


class ConfluentShimRound(ConfluentApiRound):
    module = "pykaf.compat.confluent_kafka"


class ConfluentApiCallbackRound(ConfluentApiRound):
    with_callback = True


class ConfluentShimCallbackRound(ConfluentApiCallbackRound):
    module = "pykaf.compat.confluent_kafka"


class KafkaPythonApiRound(Round):
    """kafka-python's API: ``send()`` per record (futures kept), ``flush()``."""

    module = "kafka"

    def start(self) -> None:
        api = importlib.import_module(self.module)
        self.producer = api.KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=LINGER_MS,
        )
        warm = self.values[0]
        for partition in range(PARTITIONS):
            self.producer.send(self.topic, warm, partition=partition).get(ROUND_TIMEOUT_S)

    def run(self) -> None:
        topic, send = self.topic, self.producer.send
        self.futures = [send(topic, value) for value in self.values]
        self.producer.flush(ROUND_TIMEOUT_S)

    def stop(self) -> int:
        self.producer.close(ROUND_TIMEOUT_S)
        failed = [f for f in self.futures if not f.succeeded()]
        assert not failed, (
            f"{self.module}: {len(failed)} records not acknowledged, first {failed[0].exception!r}"
        )
        return len(self.futures)


class KafkaShimRound(KafkaPythonApiRound):
    module = "pykaf.compat.kafka"


# (client, variant, params, the round, the module a skip needs) in the order each group runs them.
CASES: list[tuple[str, str, str, Callable[..., Round], str]] = [
    (CONFLUENT, "poll", "api=confluent-kafka", ConfluentApiRound, "confluent_kafka"),
    (PYKAF, "compat_confluent", "api=confluent-kafka", ConfluentShimRound, "confluent_kafka"),
    (PYKAF, "sync_produce", "api=confluent-kafka", PykafSyncProduceRound, "confluent_kafka"),
    (
        CONFLUENT,
        "poll_cb",
        "api=confluent-kafka,callback",
        ConfluentApiCallbackRound,
        "confluent_kafka",
    ),
    (
        PYKAF,
        "compat_confluent_cb",
        "api=confluent-kafka,callback",
        ConfluentShimCallbackRound,
        "confluent_kafka",
    ),
    (
        PYKAF,
        "sync_produce_cb",
        "api=confluent-kafka,callback",
        PykafSyncProduceCallbackRound,
        "confluent_kafka",
    ),
    (KAFKA_PYTHON, "send", "api=kafka-python", KafkaPythonApiRound, "kafka"),
    (PYKAF, "compat_kafka", "api=kafka-python", KafkaShimRound, "kafka"),
]
# kafka-python cannot connect to librdkafka's mock cluster.
BROKERS = {"tansu": CASES, "mock": [c for c in CASES if c[2] != "api=kafka-python"]}


@pytest.mark.parametrize(
    ("broker_name", "client", "variant", "params", "make_round", "needs"),
    [
        pytest.param(b, *case, id=f"{b}-{case[0]}-{case[1]}")
        for b, cases in BROKERS.items()
        for case in cases
    ],
)
def test_compat_produce(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    client: str,
    variant: str,
    params: str,
    make_round: Callable[..., Round],
    needs: str,
) -> None:
    # The shims are timed only where their peer can run: a ratio needs both.
    pytest.importorskip(needs)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    tag(
        benchmark,
        group=f"compat-produce-1M-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        params=params,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_MS,
        idempotence=True,
    )
    time_produce_rounds(
        benchmark,
        broker,
        make_round,
        values,
        topic_prefix=f"bench-compat-{broker_name}-{variant}",
        partitions=PARTITIONS,
        rounds=ROUNDS,
        label=f"{client}[{variant}]",
    )
