"""Producing into 1 and into 100 partitions: how throughput and memory move with them.

The sizes of ``bench/test_producer.py`` (1,000,000 records of 100 random
bytes, no keys, acks=all, idempotent, linger 5 ms, warm-up before the
timing, high watermarks checked after, 3 rounds), into a fresh topic of 1 or
100 partitions; the warm-up sends one record to each partition, so every
client knows every leader and has met every partition before the timing.

Groups ``partitions-N-1M-kafka``, ``partitions-N-1M-tansu`` and
``partitions-N-1M-mock`` (N = 1, 100), so each pykaf path is paired with the
peer at the same count. Apache Kafka is warmed up first (its JIT): Kafka's
own ``kafka-producer-perf-test`` writes 1,000,000 records into a topic of
each count, untimed. Clients:
``confluent-kafka[poll]`` (``produce()`` + ``poll(0)`` per record),
``pykaf[send_nowait]`` and ``pykaf[send_batch]`` (lists of 10,000).
Records without keys fill one partition's batch after another (sticky), in
every client. Each client runs at 1 and at 100 partitions back to back, so
the comparison across counts is not taken minutes apart (with every
1-partition round first, ``send_batch`` on Tansu came out 8% slower at 100
partitions; back to back, the two were within 1%, and Tansu's CPU per
million records was the same at both). ``extra_info`` holds the client's
CPU per million records and the growth of its peak RSS over a round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench._kafka import KafkaBench, run_producer_perf
from bench._support import PYKAF, bulk_values, tag, time_produce_rounds
from bench.test_producer import (
    LINGER_S,
    RECORDS,
    VALUE_SIZE,
    ConfluentPollRound,
    PykafSendBatchRound,
    PykafSendNowaitRound,
    Round,
)

CONFLUENT = "confluent-kafka"
ROUNDS = 3
COUNTS = (1, 100)

CASES: list[tuple[str, str, type[Round], str]] = [
    (CONFLUENT, "poll", ConfluentPollRound, "confluent_kafka"),
    (PYKAF, "send_nowait", PykafSendNowaitRound, "trio"),
    (PYKAF, "send_batch", PykafSendBatchRound, "trio"),
]


@pytest.fixture(scope="module")
def partitions_kafka(bench_kafka: KafkaBench) -> KafkaBench:
    """The session's Kafka node after an untimed ``kafka-producer-perf-test`` per count."""
    for partitions in COUNTS:
        topic = f"bench-partitions-kafka-warmup-{partitions}"
        bench_kafka.create_topic(topic, partitions)
        try:
            produced, _ = run_producer_perf(bench_kafka, topic, RECORDS, VALUE_SIZE)
            assert produced.records == RECORDS, f"warm-up: {produced.records} records produced"
        finally:
            bench_kafka.delete_topic(topic)
    return bench_kafka


@pytest.mark.parametrize(
    ("broker_name", "partitions", "client", "variant", "base", "needs"),
    [
        pytest.param(b, n, *case, id=f"{b}-{n}-{case[0]}-{case[1]}")
        for b in ("kafka", "tansu", "mock")
        for case in CASES
        for n in COUNTS  # a client's two counts back to back: no drift between them
    ],
)
def test_partitions(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    partitions: int,
    client: str,
    variant: str,
    base: type[Round],
    needs: str,
) -> None:
    pytest.importorskip(needs)
    fixture = "partitions_kafka" if broker_name == "kafka" else f"bench_{broker_name}"
    broker = request.getfixturevalue(fixture)
    values = bulk_values(RECORDS, VALUE_SIZE).values
    tag(
        benchmark,
        group=f"partitions-{partitions}-1M-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        params=f"partitions={partitions}",
        value_bytes=VALUE_SIZE,
        partitions=partitions,
        acks="all",
        linger_ms=LINGER_S * 1000,
        idempotence=True,
    )
    make_round: Callable[..., Round] = type(
        f"{base.__name__}{partitions}", (base,), {"partitions": partitions}
    )
    time_produce_rounds(
        benchmark,
        broker,
        make_round,
        values,
        topic_prefix=f"bench-partitions-{broker_name}-{partitions}-{client}-{variant}",
        partitions=partitions,
        rounds=ROUNDS,
        label=f"{client}[{variant}] into {partitions} partitions",
        memory=True,
    )
