"""pykaf on Apache Kafka: 1,000,000 records produced and consumed against Kafka's own clients.

The broker is one Apache Kafka node (``bench_kafka``: KRaft, broker and
controller in one JVM, 1 GiB heap, SerialGC as pykaf.testing runs it, pykaf's
test defaults otherwise; see ``bench/_kafka.py``), sharing the machine's two
cores with the client under test. Before the first benchmark the broker is
warmed up once (not timed): Kafka's producer perf tool writes ``RECORDS``
records into a scratch topic and its consumer perf tool reads them back, so
that no client meets a broker whose JIT has not compiled the produce and fetch
paths yet.

Groups (``bench/ratios.py`` keys ``produce-1M-kafka | ...`` and
``consume-1M-kafka | ...``, apart from the Tansu and mock ones):

``produce-1M-kafka``: 1,000,000 records of 100 bytes (random bytes, no keys, no
headers, no compression), acks=all, idempotent, into a fresh 4-partition topic
per round, timed to the last acknowledgement; linger and batch sizes at each
client's defaults (5 ms linger for all three; batches of at most 16 KiB per
partition for the Java producer, about 1 MB for librdkafka and for pykaf (its
``flush_bytes``, 1,000,000 bytes as librdkafka's ``batch.size``)):

* ``kafka-java``: ``org.apache.kafka.tools.ProducerPerformance``
  (``kafka-producer-perf-test --topic T --num-records 1000000 --record-size
  100 --throughput -1 --producer-props bootstrap.servers=... acks=all
  enable.idempotence=true``) in a JVM started as Kafka's script starts it.
  The harness times the whole process (``kafka-java[process]`` in the
  ratios: JVM start, class loading, the producer's construction, sending,
  closing); the tool's final summary line gives its own records/s, over its
  own clock from just before the first ``send()`` to the end of ``close()``
  (``kafka-java`` in the ratios, via ``extra_info["self_timed_s"]``). The
  tool makes a new 100-byte payload per record (100 random letters) and a
  callback object per record that records the latency: that work is part of
  its loop, as a payload and a callback would be part of a user's.
  Two more Java figures, for context (their process times are not ratios of
  their own): ``kafka-java[steady]``, the same run with ``--warmup-records``
  half the records, timed by the tool's steady-state summary over the second
  half (the JVM's JIT has compiled the loop by then; seconds scaled to every
  record, as ratios are per record), and ``kafka-java[batch1m]``, the tool
  with ``batch.size=1000000``, pykaf's batch size instead of the Java client's
  16 KiB default.
* ``confluent-kafka``: its documented idiom, ``produce()`` then ``poll(0)``
  per record (on ``BufferError``, ``poll(0.1)`` and again), then ``flush()``;
  acks=all, enable.idempotence=true, everything else at librdkafka's defaults.
* pykaf (``open_producer``, its defaults: linger 5 ms, acks=all,
  idempotent), as in ``bench/test_producer.py``: ``send_nowait`` per record,
  ``send_batch`` on lists of 10,000, and the blocking ``pykaf.sync.Producer``
  with ``send_async`` per record (``sync``; 100,000 records a round: it runs
  at about a hundred thousand a second), ``send_many`` on lists of 10,000
  (``sync_many``) and ``produce()`` + ``poll(0)`` per record, then ``flush()``
  (``sync_produce``, confluent-kafka's idiom on pykaf). Opening the producer
  and one warm-up record per partition are outside the timing (setup).

Each round's topic must then hold exactly the records sent (the partitions'
high watermarks), and every client must report them acknowledged
(``ProducerPerformance`` counts only successful sends in its summary).

``consume-1M-kafka``: 1,000,000 records of 100 bytes in a 4-partition topic
(250,000 in each), written once before the module's first round by
confluent-kafka (acks=all, idempotent), read from offset 0 by every round,
which checks the record count and the bytes of the values read. Fetch
settings the same for all (64 MiB per Fetch, 8 MiB per partition, 500 ms
broker wait, read_uncommitted) and **no CRC check for anyone**:
``ConsumerPerformance`` forces ``check.crcs=false`` whatever its config says,
librdkafka does not check by default, and pykaf runs with
``check_crcs=False`` here to match; ``pykaf[next_batch+crc]`` (pykaf's
default, CRCs checked) is shown beside them, paired with no peer.

* ``kafka-java``: ``org.apache.kafka.tools.ConsumerPerformance``
  (``kafka-consumer-perf-test --bootstrap-server ... --topic T --messages
  1000000``, in a new group each round, ``--fetch-size`` 8 MiB and a
  ``--consumer.config`` with ``fetch.max.bytes`` 64 MiB; its
  ``max.poll.records`` stays at 500, the Java client's default). It
  subscribes, so its run includes a group join; its ``fetch.nMsg.sec`` (the
  records over the time after the assignment) is the rate ``kafka-java``
  uses, the harness's time of the whole process is ``kafka-java[process]``.
* ``confluent-kafka``: ``assign()`` at offset 0 and ``consume(10000,
  timeout=1.0)`` until every record is in, as in ``bench/test_consumer.py``,
  with ``fetch.queue.backoff.ms=10``; ``confluent-kafka[default-backoff]``
  the same at librdkafka's default (1000 ms).
* pykaf (``open_consumer``): ``next_batch``, ``columnar``
  (``next_batch(columnar=True)``) and ``iter`` (``async for``) with
  a task per partition, and ``sync`` (``pykaf.sync.Consumer.consume``), as
  in ``bench/test_consumer.py``.

Run by hand (``PYKAF_BENCH_KAFKA_RECORDS=20000`` for a quick check that
everything works)::

    python -m pytest bench/test_kafka.py --benchmark-only -p no:randomly \\
        --benchmark-json=bench/results/kafka.json
    python bench/ratios.py bench/results/kafka.json --out bench/runs/kafka.json
"""

from __future__ import annotations

import importlib
import itertools
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from bench import test_consumer as cons
from bench import test_producer as prod
from bench._kafka import (
    RECORDS,
    KafkaBench,
    PerfResult,
    run_consumer_perf,
    run_producer_perf,
)
from bench._support import PYKAF, bulk_values, confluent_produce_idiom, note_rate, tag

JAVA = "kafka-java"
CONFLUENT = "confluent-kafka"
VALUE_SIZE = 100
PARTITIONS = 4
ROUNDS = 5
CHUNK = 10_000
SYNC_RECORDS = min(RECORDS, 100_000)  # pykaf.sync send_async per record: see the docstring
ROUND_TIMEOUT_S = 120.0
FETCH_MAX_BYTES = cons.FETCH_MAX_BYTES
PARTITION_FETCH_BYTES = cons.PARTITION_FETCH_BYTES
FETCH_MAX_WAIT_S = cons.FETCH_MAX_WAIT_S


def _count_label(n: int) -> str:
    return (
        f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)
    )


PRODUCE_GROUP = f"produce-{_count_label(RECORDS)}-kafka"
CONSUME_GROUP = f"consume-{_count_label(RECORDS)}-kafka"
# ratios.py pairs equal params: every consumer here reads without CRC checks but
# the informational pykaf[next_batch+crc], which has no peer.
CRC_OFF = "crc=off"
CRC_ON = "crc=on"

_topic_ids = itertools.count()


# -- the broker, warmed up ----------------------------------------------------------------
@pytest.fixture(scope="module")
def kafka(bench_kafka: KafkaBench) -> KafkaBench:
    """The session's Kafka node, after one untimed produce and consume of ``RECORDS``."""
    topic = f"bench-kafka-warmup-{next(_topic_ids)}"
    bench_kafka.create_topic(topic, PARTITIONS)
    try:
        produced, _ = run_producer_perf(bench_kafka, topic, RECORDS, VALUE_SIZE)
        assert produced.records == RECORDS, f"warm-up: {produced.records} records produced"
        consumed = run_consumer_perf(
            bench_kafka,
            topic,
            RECORDS,
            consumer_config=_java_consumer_config(),
            partition_fetch_bytes=PARTITION_FETCH_BYTES,
        )
        assert consumed.records == RECORDS, f"warm-up: {consumed.records} records consumed"
    finally:
        bench_kafka.delete_topic(topic)
    return bench_kafka


# -- producers ------------------------------------------------------------------------------
class JavaProducerRound(prod.Round):
    """``kafka-producer-perf-test``: a JVM of its own producing ``len(values)`` records.

    ``steady``: with ``--warmup-records`` half the records; :attr:`own` is then
    the tool's steady-state summary (the second half), else its whole-run one.
    ``props``: more producer properties (``name=value``).
    """

    warm_records = 0  # it sends nothing before its run

    def __init__(
        self,
        broker: KafkaBench,
        topic: str,
        values: list[bytes],
        *,
        steady: bool = False,
        props: tuple[str, ...] = (),
    ) -> None:
        super().__init__(broker.bootstrap, topic, values)
        self.broker = broker
        self.steady = steady
        self.props = props
        self.result: PerfResult | None = None
        self.own: PerfResult | None = None

    def start(self) -> None:
        """Nothing to open: the tool's process is the round."""

    def run(self) -> None:
        warmup = len(self.values) // 2 if self.steady else 0
        self.result, steady = run_producer_perf(
            self.broker, self.topic, len(self.values), VALUE_SIZE, warmup, self.props
        )
        self.own = steady if self.steady else self.result

    def stop(self) -> int:
        assert self.result is not None and self.own is not None, "the Java producer did not run"
        self.notes["tool_records_per_s"] = round(self.result.records_per_s)
        self.notes["tool_seconds"] = round(self.result.seconds, 3)
        if self.steady:
            self.notes["steady_records"] = self.own.records
            self.notes["steady_records_per_s"] = round(self.own.records_per_s)
        self.notes.update(self.result.details)
        return self.result.records


class ConfluentIdiomRound(prod.ConfluentRound):
    """confluent-kafka's documented loop: ``produce()`` and ``poll(0)`` per record, ``flush()``."""

    def start(self) -> None:
        ck = importlib.import_module("confluent_kafka")
        self.producer = ck.Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True}
        )
        for partition in range(PARTITIONS):
            self.producer.produce(self.topic, self.values[0], partition=partition)
        left = self.producer.flush(ROUND_TIMEOUT_S)
        assert left == 0, "confluent-kafka: the warm-up records were not acknowledged"

    def run(self) -> None:
        full = confluent_produce_idiom(self.producer, self.topic, self.values)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)
        self.notes["buffer_full_retries"] = full


RoundMaker = Callable[[KafkaBench, str, list[bytes]], prod.Round]


def _producer_round(client: str, variant: str | None) -> tuple[RoundMaker, int]:
    """A function making one round of the client, and its records per round."""
    if client == JAVA:
        steady = variant == "steady"
        props = JAVA_VARIANT_PROPS.get(variant, ())
        return (lambda b, t, v: JavaProducerRound(b, t, v, steady=steady, props=props)), RECORDS
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
        return (lambda b, t, v: ConfluentIdiomRound(b.bootstrap, t, v)), RECORDS
    pykaf_rounds: dict[str | None, type[prod.Round]] = {
        "send_nowait": prod.PykafSendNowaitRound,
        "send_batch": prod.PykafSendBatchRound,
        "sync": prod.PykafSyncRound,
        "sync_many": prod.PykafSyncManyRound,
        "sync_produce": prod.PykafSyncProduceRound,
    }
    cls = pykaf_rounds[variant]
    records = SYNC_RECORDS if variant == "sync" else RECORDS
    return (lambda b, t, v: cls(b.bootstrap, t, v)), records


# kafka-java[batch1m]: the Java producer with pykaf's batch size (flush_bytes,
# 1,000,000 bytes) instead of its default batch.size of 16 KiB: how much of the gap is that.
JAVA_VARIANT_PROPS: dict[str | None, tuple[str, ...]] = {"batch1m": ("batch.size=1000000",)}

PRODUCE_CLIENTS: list[tuple[str, str | None]] = [
    (JAVA, None),
    (JAVA, "steady"),
    (JAVA, "batch1m"),
    (CONFLUENT, None),
    (PYKAF, "send_nowait"),
    (PYKAF, "send_batch"),
    (PYKAF, "sync"),
    (PYKAF, "sync_many"),
    (PYKAF, "sync_produce"),
]


@pytest.mark.parametrize(
    ("client", "variant"),
    [pytest.param(c, v, id=f"kafka-{c}-{v}" if v else f"kafka-{c}") for c, v in PRODUCE_CLIENTS],
)
def test_produce_kafka(benchmark: Any, kafka: KafkaBench, client: str, variant: str | None) -> None:
    make_round, records = _producer_round(client, variant)
    values = bulk_values(RECORDS, VALUE_SIZE).values[:records]
    tag(
        benchmark,
        group=PRODUCE_GROUP,
        client=client,
        records=records,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        idempotence=True,
        compression="none",
        broker=f"Apache Kafka {kafka.version}",
    )
    current: list[prod.Round] = []
    acknowledged: list[int] = []
    self_timed: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-kafka-{client}-{variant or 'default'}-{next(_topic_ids)}"
        kafka.create_topic(topic, PARTITIONS)
        one = make_round(kafka, topic, values)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: prod.Round) -> None:
        """Outside the timing: close, check the topic holds every record, delete it."""
        current.remove(one)
        acknowledged.append(one.stop())
        if isinstance(one, JavaProducerRound) and one.own is not None:
            self_timed.append(one.own.seconds)
        marks = kafka.high_watermarks(one.topic)
        expected = records + getattr(one, "warm_records", PARTITIONS)
        assert sum(marks.values()) == expected, (
            f"{one.topic} holds {sum(marks.values())} records ({marks}); expected {expected}"
        )
        kafka.delete_topic(one.topic)
        benchmark.extra_info.update(one.notes)  # the last round's

    benchmark.pedantic(
        lambda one: one.run(), setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])

    assert acknowledged and all(n == records for n in acknowledged), (
        f"{client}: acknowledged {acknowledged} per round, expected {records}"
    )
    if self_timed:
        # The steady-state summary covers the second half of the records only: ratios.py
        # divides by every record of the benchmark, so its seconds are scaled up to them.
        # The variants' process times are not ratios of their own (kafka-java[process]
        # is the one a user of the tool pays).
        own_records = records - records // 2 if variant == "steady" else records
        info = benchmark.extra_info
        info["self_timed_s"] = [t * records / own_records for t in self_timed]
        info["self_timed_records_per_s"] = round(own_records / statistics.median(self_timed))
        if variant is not None:
            info["self_timed_process"] = False
    note_rate(benchmark, records)


# -- consumers ------------------------------------------------------------------------------
def _java_consumer_config() -> dict[str, str]:
    """ConsumerPerformance's --consumer.config (it sets max.partition.fetch.bytes itself)."""
    return {
        "fetch.max.bytes": str(FETCH_MAX_BYTES),
        "fetch.max.wait.ms": str(int(FETCH_MAX_WAIT_S * 1000)),
        "isolation.level": "read_uncommitted",
    }


async def _partition_starts(bootstrap: str, topic: str) -> list[int]:
    pykaf = importlib.import_module("pykaf")
    async with pykaf.open_client(bootstrap) as client:
        await client.refresh_metadata(topic)
        return [await client.get_offset(topic, p, pykaf.OLDEST) for p in range(PARTITIONS)]


@pytest.fixture(scope="module")
def kafka_dataset(kafka: KafkaBench) -> Iterator[cons.Dataset]:
    """``RECORDS`` records written by confluent-kafka, an equal share in each partition."""
    ck = pytest.importorskip("confluent_kafka")
    topic = f"bench-consume-kafka-{next(_topic_ids)}"
    kafka.create_topic(topic, PARTITIONS)
    values = bulk_values(RECORDS, VALUE_SIZE).values
    share = RECORDS // PARTITIONS
    assert share * PARTITIONS == RECORDS
    producer = ck.Producer(
        {"bootstrap.servers": kafka.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    failed: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for p in range(PARTITIONS):
        for value in values[p * share : (p + 1) * share]:
            while True:
                try:
                    producer.produce(topic, value, partition=p, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    left = producer.flush(ROUND_TIMEOUT_S)
    assert left == 0 and not failed, f"the data set: {left} unsent, {failed[:3]} failed"
    marks = kafka.high_watermarks(topic)
    assert marks == dict.fromkeys(range(PARTITIONS), share), f"{topic}: high watermarks {marks}"
    starts = trio.run(_partition_starts, kafka.bootstrap, topic)
    assert starts == [0] * PARTITIONS, f"{topic}: log start offsets {starts}"
    yield cons.Dataset(kafka, topic, marks)
    kafka.delete_topic(topic)


class JavaConsumerRound(cons.Round):
    """``kafka-consumer-perf-test``: a JVM of its own reading every record in a new group."""

    def __init__(self, dataset: cons.Dataset) -> None:
        super().__init__(dataset)
        assert isinstance(dataset.broker, KafkaBench)
        self.broker = dataset.broker
        self.perf: PerfResult | None = None

    def start(self) -> None:
        """Nothing to open: the tool's process is the round."""

    def run(self) -> None:
        self.perf = run_consumer_perf(
            self.broker,
            self.topic,
            self.data.records,
            consumer_config=_java_consumer_config(),
            partition_fetch_bytes=PARTITION_FETCH_BYTES,
        )

    def stop(self) -> tuple[int, int]:
        """(records, value bytes) as the tool counted them (it reports MiB to 4 decimals)."""
        assert self.perf is not None, "the Java consumer did not run"
        self.notes["tool_records_per_s"] = round(self.perf.records_per_s)
        self.notes["tool_seconds"] = round(self.perf.seconds, 3)
        self.notes.update(self.perf.details)
        mib = self.data.value_bytes / (1 << 20)
        assert abs(self.perf.megabytes - mib) < 1e-3, (
            f"kafka-java: read {self.perf.megabytes} MiB, expected {mib:.4f}"
        )
        return self.perf.records, self.data.value_bytes


class ConfluentNoCrcRound(cons.ConfluentRound):
    """confluent-kafka's assign() reader with librdkafka's default check.crcs=false."""

    def config(self) -> dict[str, Any]:
        return {**super().config(), "check.crcs": False}


class ConfluentDefaultBackoffRound(ConfluentNoCrcRound):
    """The same with fetch.queue.backoff.ms at librdkafka's default (1000 ms)."""

    def config(self) -> dict[str, Any]:
        config = super().config()
        del config["fetch.queue.backoff.ms"]
        return config


def _no_crc_options() -> dict[str, Any]:
    return {**cons.pykaf_consumer_options(), "check_crcs": False}


class PykafNextBatchNoCrc(cons.PykafNextBatchRound):
    """``next_batch`` without CRC checks."""

    def options(self) -> dict[str, Any]:
        return _no_crc_options()


class PykafColumnarNoCrc(cons.PykafColumnarRound):
    """``next_batch(columnar=True)`` without CRC checks."""

    def options(self) -> dict[str, Any]:
        return _no_crc_options()


class PykafIterNoCrc(cons.PykafIterRound):
    """``async for`` without CRC checks."""

    def options(self) -> dict[str, Any]:
        return _no_crc_options()


class PykafSyncNoCrc(cons.PykafSyncRound):
    """``pykaf.sync.Consumer.consume`` without CRC checks."""

    def options(self) -> dict[str, Any]:
        return _no_crc_options()


CONSUME_CLIENTS: list[tuple[str, str | None]] = [
    (JAVA, None),
    (CONFLUENT, None),
    (CONFLUENT, "default-backoff"),
    (PYKAF, "next_batch"),
    (PYKAF, "columnar"),
    (PYKAF, "iter"),
    (PYKAF, "sync"),
    (PYKAF, "next_batch+crc"),
]


def _consumer_round(client: str, variant: str | None) -> Callable[[cons.Dataset], cons.Round]:
    if client == JAVA:
        return JavaConsumerRound
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
        return ConfluentDefaultBackoffRound if variant == "default-backoff" else ConfluentNoCrcRound
    rounds: dict[str | None, Callable[[cons.Dataset], cons.Round]] = {
        "next_batch": PykafNextBatchNoCrc,
        "columnar": PykafColumnarNoCrc,
        "iter": PykafIterNoCrc,
        "sync": PykafSyncNoCrc,
        "next_batch+crc": cons.PykafNextBatchRound,
    }
    return rounds[variant]


def _consumer_settings(client: str, variant: str | None) -> dict[str, Any]:
    """The client's non-default settings, for ``extra_info``."""
    if client == JAVA:
        return {
            **_java_consumer_config(),
            "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "check.crcs": False,
            "max.poll.records": 500,
        }
    if client == CONFLUENT:
        return {
            "fetch.max.bytes": FETCH_MAX_BYTES,
            "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "fetch.wait.max.ms": int(FETCH_MAX_WAIT_S * 1000),
            "isolation.level": "read_uncommitted",
            "check.crcs": False,
            "fetch.queue.backoff.ms": 1000
            if variant == "default-backoff"
            else cons.CONFLUENT_QUEUE_BACKOFF_MS,
            "num_messages": cons.CONSUME_BATCH,
        }
    return cons.pykaf_consumer_options() if variant == "next_batch+crc" else _no_crc_options()


@pytest.mark.parametrize(
    ("client", "variant"),
    [pytest.param(c, v, id=f"kafka-{c}-{v}" if v else f"kafka-{c}") for c, v in CONSUME_CLIENTS],
)
def test_consume_kafka(
    benchmark: Any, kafka_dataset: cons.Dataset, client: str, variant: str | None
) -> None:
    make_round = _consumer_round(client, variant)
    data = kafka_dataset
    tag(
        benchmark,
        group=CONSUME_GROUP,
        client=client,
        records=data.records,
        variant=variant,
        params=CRC_ON if variant == "next_batch+crc" else CRC_OFF,
        value_bytes=VALUE_SIZE,
        partitions=len(data.ends),
        settings=_consumer_settings(client, variant),
        broker=f"Apache Kafka {getattr(data.broker, 'version', '?')}",
    )
    current: list[cons.Round] = []
    results: list[tuple[int, int]] = []
    self_timed: list[float] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        one = make_round(data)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: cons.Round) -> None:
        """Outside the timing: close the consumer, check what it read."""
        current.remove(one)
        count, size = one.stop()
        results.append((count, size))
        assert count == data.records, f"{client}: read {count} records of {data.records}"
        assert size == data.value_bytes, (
            f"{client}: the values read add up to {size} bytes, expected {data.value_bytes}"
        )
        if isinstance(one, JavaConsumerRound) and one.perf is not None:
            self_timed.append(one.perf.seconds)
        benchmark.extra_info.update(one.notes)  # the last round's

    benchmark.pedantic(
        lambda one: one.run(), setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])

    assert results, f"{client}: no round completed"
    if self_timed:
        benchmark.extra_info["self_timed_s"] = self_timed
        benchmark.extra_info["self_timed_records_per_s"] = round(
            data.records / statistics.median(self_timed)
        )
    note_rate(benchmark, data.records)
