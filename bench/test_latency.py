"""Open-loop latency: records sent at a fixed rate, each timed from when it was due to its ack.

A service that produces as requests come in does not send as fast as it can:
it sends at the rate its traffic arrives, and what it feels is each record's
latency. One round sends 10,000 records of 100 bytes at 5,000 records/s
(record ``i`` is due at ``start + i / 5000``; whatever is due is sent, then
the loop sleeps until the next is due) into a fresh 4-partition topic, acks=all,
idempotent (aiokafka on Tansu excepted, as in ``bench/test_producer.py``), every
client at a 5 ms linger. A record's latency runs from when it was *due* (not
when the client got round to it: a client that falls behind pays for it,
no coordinated omission) to when its delivery callback ran. The round checks
every record was acknowledged and the topic's high watermarks add up.

Each benchmark is self-timed (``extra_info["self_timed_s"]``, see
``bench/ratios.py``): its time per round is a percentile of that round's
latencies, so the ratio is the peer's latency over pykaf's (> 1: pykaf's
records arrive sooner). Groups ``latency-p50-5k-{broker}`` and
``latency-p99-5k-{broker}``; brokers ``kafka``, ``tansu``, ``mock``.
``extra_info`` also holds every round's p50, p99 and p99.9 in milliseconds.

Clients, each the idiom its documentation gives for a callback per record:

* ``confluent-kafka[poll_cb]``: ``produce(..., callback=)``, ``poll(0)`` in the loop.
* ``aiokafka[send]``: ``await send()`` (it returns once the record is
  queued), the future's done-callback.
* ``pykaf[send_nowait_cb]``: ``send_nowait(..., on_delivery=)`` on trio.
* ``pykaf[sync_produce_cb]``: ``pykaf.sync.Producer.produce(..., on_delivery=)``,
  ``poll(0)`` in the loop.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from bench._support import AIOKAFKA, PYKAF, bulk_values, confluent_conf, tag
from bench.test_producer import LINGER_S, PARTITIONS, ROUND_TIMEOUT_S, VALUE_SIZE, _warm_value

CONFLUENT = "confluent-kafka"
RATE = 5_000  # records per second
RECORDS = 10_000  # two seconds at RATE
ROUNDS = 3
LINGER_MS = round(LINGER_S * 1000)
PERCENTILES = ("p50", "p99")  # a group each; p99.9 is noted too

_topic_ids = itertools.count()


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile of ``samples`` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


class Recorder:
    """Each record's due time and ack time; the callbacks that note the acks."""

    def __init__(self, count: int, start: float) -> None:
        self.start = start
        self.acked: list[float | None] = [None] * count
        self.errors: list[Any] = []

    def due(self, i: int) -> float:
        """When record ``i`` is due to be sent."""
        return self.start + i / RATE

    def latencies(self) -> list[float]:
        """Seconds from due to acknowledged, per record; fails if one was not acknowledged."""
        assert not self.errors, f"a record failed: {self.errors[0]!r}"
        missing = sum(1 for t in self.acked if t is None)
        assert missing == 0, f"{missing} of {len(self.acked)} records were not acknowledged"
        return [t - self.due(i) for i, t in enumerate(self.acked)]  # type: ignore[operator]

    def callback(self, i: int) -> Callable[[Any, Any], None]:
        """Record ``i``'s delivery callback ``(error, message)``: confluent-kafka's and pykaf's."""

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self.errors.append(error)
            self.acked[i] = time.perf_counter()

        return delivered

    def future(self, i: int) -> Callable[[Any], None]:
        """An asyncio future's done-callback for record ``i``."""

        def done(fut: Any) -> None:
            if fut.exception() is not None:
                self.errors.append(fut.exception())
            self.acked[i] = time.perf_counter()

        return done


def _due_now(rec: Recorder, sent: int, total: int) -> int:
    """How many records are due by now (at least ``sent``)."""
    due = int((time.perf_counter() - rec.start) * RATE) + 1
    return min(total, max(sent, due))


def paced(
    total: int,
    produce: Callable[[int, Callable[[Any, Any], None]], None],
    poll: Callable[[float], Any],
) -> Recorder:
    """A blocking client's open loop: ``produce(i, callback)`` each record when due, ``poll(0)``."""
    rec = Recorder(total, time.perf_counter())
    sent = 0
    while sent < total:
        upto = _due_now(rec, sent, total)
        for i in range(sent, upto):
            produce(i, rec.callback(i))
        sent = upto
        poll(0)
        if sent < total:
            time.sleep(max(0.0, rec.due(sent) - time.perf_counter()))
    return rec


def confluent_round(bootstrap: str, topic: str, values: list[bytes]) -> list[float]:
    """confluent-kafka: ``produce(callback=)`` + ``poll(0)``, paced."""
    ck = importlib.import_module("confluent_kafka")
    producer = ck.Producer(confluent_conf(bootstrap, LINGER_MS))
    for partition in range(PARTITIONS):
        producer.produce(topic, _warm_value(values), partition=partition)
    assert producer.flush(ROUND_TIMEOUT_S) == 0, "confluent-kafka: warm-up unacknowledged"
    rec = paced(
        len(values),
        lambda i, callback: producer.produce(topic, values[i], callback=callback),
        producer.poll,
    )
    assert producer.flush(ROUND_TIMEOUT_S) == 0, "confluent-kafka: records unacknowledged"
    return rec.latencies()


def pykaf_sync_round(bootstrap: str, topic: str, values: list[bytes]) -> list[float]:
    """pykaf.sync: ``produce(on_delivery=)`` + ``poll(0)``, paced."""
    sync = importlib.import_module("pykaf.sync")
    producer = sync.Producer(bootstrap, linger=LINGER_S, acks="all", idempotence=True)
    try:
        for partition in range(PARTITIONS):
            producer.send(topic, _warm_value(values), partition=partition, timeout=ROUND_TIMEOUT_S)
        rec = paced(
            len(values),
            lambda i, callback: producer.produce(topic, values[i], on_delivery=callback),
            producer.poll,
        )
        assert producer.flush(timeout=ROUND_TIMEOUT_S) == 0, "pykaf.sync: records unacknowledged"
        return rec.latencies()
    finally:
        producer.close(timeout=ROUND_TIMEOUT_S)


def pykaf_round(bootstrap: str, topic: str, values: list[bytes]) -> list[float]:
    """pykaf on trio: ``send_nowait(on_delivery=)``, paced with ``trio.sleep``."""
    pykaf = importlib.import_module("pykaf")
    out: list[float] = []

    async def main() -> None:
        async with pykaf.open_producer(
            bootstrap, linger=LINGER_S, acks="all", idempotence=True
        ) as producer:
            for partition in range(PARTITIONS):
                await producer.send(topic, _warm_value(values), partition=partition)
            total = len(values)
            rec = Recorder(total, time.perf_counter())
            sent = 0
            with trio.fail_after(ROUND_TIMEOUT_S):
                while sent < total:
                    upto = _due_now(rec, sent, total)
                    for i in range(sent, upto):
                        producer.send_nowait(topic, values[i], on_delivery=rec.callback(i))
                    sent = upto
                    if sent < total:
                        await trio.sleep(max(0.0, rec.due(sent) - time.perf_counter()))
                await producer.flush()
            out.extend(rec.latencies())

    trio.run(main)
    return out


def aiokafka_round(
    bootstrap: str, topic: str, values: list[bytes], *, idempotence: bool
) -> list[float]:
    """aiokafka: ``await send()`` and the future's done-callback, paced with ``asyncio.sleep``."""
    aio = importlib.import_module("aiokafka")

    async def main() -> list[float]:
        producer = aio.AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=idempotence,
            linger_ms=LINGER_MS,
        )
        await producer.start()
        try:
            for partition in range(PARTITIONS):
                await (await producer.send(topic, _warm_value(values), partition=partition))
            total = len(values)
            rec = Recorder(total, time.perf_counter())
            sent = 0
            while sent < total:
                upto = _due_now(rec, sent, total)
                for i in range(sent, upto):
                    fut = await producer.send(topic, values[i])
                    fut.add_done_callback(rec.future(i))
                sent = upto
                if sent < total:
                    await asyncio.sleep(max(0.0, rec.due(sent) - time.perf_counter()))
            await asyncio.wait_for(producer.flush(), ROUND_TIMEOUT_S)
            await asyncio.sleep(0)  # the done-callbacks of the last futures
            return rec.latencies()
        finally:
            await producer.stop()

    return asyncio.run(main())


#: A round: (bootstrap, topic, values) -> each record's latency in seconds.
RoundFn = Callable[[str, str, list[bytes]], list[float]]

# (client, variant, the round given the broker's name, the module a skip needs)
CASES: list[tuple[str, str, Callable[[str], RoundFn], str]] = [
    (CONFLUENT, "poll_cb", lambda b: confluent_round, "confluent_kafka"),
    (
        AIOKAFKA,
        "send",
        lambda b: lambda *a: aiokafka_round(*a, idempotence=b != "tansu"),
        "aiokafka",
    ),
    (PYKAF, "send_nowait_cb", lambda b: pykaf_round, "trio"),
    (PYKAF, "sync_produce_cb", lambda b: pykaf_sync_round, "trio"),
]
BROKERS = ("kafka", "tansu", "mock")


@pytest.mark.parametrize("stat", list(PERCENTILES))
@pytest.mark.parametrize(
    ("broker_name", "client", "variant", "make_round", "needs"),
    [pytest.param(b, *case, id=f"{b}-{case[0]}-{case[1]}") for b in BROKERS for case in CASES],
)
def test_latency(
    benchmark: Any,
    request: pytest.FixtureRequest,
    stat: str,
    broker_name: str,
    client: str,
    variant: str,
    make_round: Callable[[str], RoundFn],
    needs: str,
) -> None:
    pytest.importorskip(needs)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    run = make_round(broker_name)
    tag(
        benchmark,
        group=f"latency-{stat}-5k-{broker_name}",
        client=client,
        records=1,  # the time per round is one record's latency
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        rate_per_s=RATE,
        round_records=RECORDS,
        acks="all",
        linger_ms=LINGER_MS,
    )
    per_round: dict[str, list[float]] = {"p50": [], "p99": [], "p99.9": []}

    def one_round() -> None:
        topic = f"bench-latency-{broker_name}-{variant}-{next(_topic_ids)}"
        broker.create_topic(topic, PARTITIONS)
        try:
            latencies = run(broker.bootstrap, topic, values)
            total = sum(broker.high_watermarks(topic).values())
            assert total == RECORDS + PARTITIONS, f"{topic} holds {total} records"
        finally:
            broker.delete_topic(topic)
        for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
            per_round[name].append(percentile(latencies, q))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    info = benchmark.extra_info
    info["self_timed_s"] = per_round[stat]
    info["self_timed_process"] = False  # the rounds' wall time is the rate's, not the client's
    for name, seconds in per_round.items():
        info[f"{name}_ms"] = [round(s * 1000, 3) for s in seconds]
    info[f"median_{stat}_ms"] = round(statistics.median(per_round[stat]) * 1000, 3)
