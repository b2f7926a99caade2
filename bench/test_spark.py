"""Spark: a DataFrame to a topic and a topic to a DataFrame, pykaf against confluent-kafka.

Cases (one pytest-benchmark group each; every client on the same Tansu broker
in the same run, local[2] Spark):

* ``spark-write-1M-tansu``: 1,000,000 rows of 100-byte values (a cached
  DataFrame of 4 partitions) to a topic of 4 partitions, acks=all,
  idempotent, linger 5 ms.

  - ``pykaf[writer]``: ``df.write.format("pykaf")...save()``: each task's
    Arrow batches go to the producer's bulk path.
  - ``pykaf[mapInArrow]``: ``df.mapInArrow(arrow_producer(...))``.
  - ``confluent-kafka[driver]``: what a job without a Spark connector does:
    the values brought to the driver (``toArrow()``, timed: it is part of that
    way of producing) and ``produce()`` per record, ``flush()``.

* ``spark-foreachPartition-1M-tansu``: the same rows to the same kind of
  topic, row by row from ``df.foreachPartition``, as a data engineer
  producing per row writes it (every task makes or takes its producer, a
  call per row, a flush at the end of the partition):

  - ``pykaf[foreachPartition]``: ``pykaf.spark.get_producer(...)`` (the
    worker process's ``pykaf.sync.Producer``, kept between tasks and rounds),
    ``produce(topic, row.value)`` per row, ``flush()``.
  - ``confluent-kafka[foreachPartition]``: a ``confluent_kafka.Producer``
    made in the task, ``produce()`` + ``poll(0)`` per row (``poll(0.1)`` and
    again on ``BufferError``), ``flush()``, which must leave nothing.

  Both count their rows in a Spark accumulator, which must reach 1,000,000.
  ``extra_info["floor_s"]`` holds the median of the passes, one untimed
  before each round, of a ``foreachPartition`` that only reads every row's
  value (no producing): the part of a round that is Spark handing the rows
  to Python, which no producer can make faster. ``bench/ratios.py`` subtracts it, and gives the
  ratio of what each client adds in ``spark-foreachPartition-1M-tansu:added``.

* ``spark-read-1M-tansu``: the 1,000,000 records back into a DataFrame and
  aggregated (``count(*)``, ``sum(length(value))``), read_committed.

  - ``pykaf[reader]``: ``spark.read.format("pykaf")...load()``.
  - ``confluent-kafka[driver]``: a consumer on the driver reads every
    partition from the start, the values become an Arrow table and
    ``spark.createDataFrame`` makes the DataFrame (timed as well).

Every round checks its result: the topic's high watermarks sum to the rows
written; the aggregation counts every record and byte.
"""

from __future__ import annotations

import importlib
import itertools
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench._support import PYKAF, confluent_conf, confluent_produce_all, note_rate, tag

CONFLUENT = "confluent-kafka"
RECORDS = 1_000_000
VALUE_SIZE = 100
PARTITIONS = 4
ROUNDS = 3
LINGER_MS = 5
WRITERS = [(PYKAF, "writer"), (PYKAF, "mapInArrow"), (CONFLUENT, "driver")]
PER_ROW = [(PYKAF, "foreachPartition"), (CONFLUENT, "foreachPartition")]
FLUSH_TIMEOUT_S = 120
READERS = [(PYKAF, "reader"), (CONFLUENT, "driver")]

_ids = itertools.count()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession (skipped without pyspark or Java)."""
    pytest.importorskip("pyspark.sql")
    from pykaf.spark import register
    from pykaf.testing import local_spark_session

    try:
        session = local_spark_session("pykaf-bench", **{"spark.driver.memory": "2g"})
    except Exception as exc:
        pytest.skip(f"no local Spark: {exc}")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def frame(spark: Any) -> Iterator[Any]:
    """1M rows of 100-byte values, cached and counted before any timing."""
    from pyspark.sql import functions as F

    df = (
        spark.range(RECORDS, numPartitions=PARTITIONS)
        .select(
            F.encode(F.lpad(F.col("id").cast("string"), VALUE_SIZE, "v"), "utf-8").alias("value")
        )
        .cache()
    )
    assert df.count() == RECORDS
    yield df
    df.unpersist()


def _floor_pass(frame: Any) -> float:
    """Seconds of one ``foreachPartition`` over ``frame`` that reads every value, no more."""

    def read_rows(rows: Iterator[Any]) -> None:
        size = 0
        for row in rows:
            size += len(row.value)
        seen.add(size)

    seen = frame.sparkSession.sparkContext.accumulator(0)
    started = time.perf_counter()
    frame.foreachPartition(read_rows)
    took = time.perf_counter() - started
    assert seen.value == RECORDS * VALUE_SIZE, f"the pass read {seen.value} bytes"
    return took


def _per_row_task(client: str, bootstrap: str, topic: str, counted: Any) -> Any:
    """The function ``foreachPartition`` runs in each task: ``client`` producing per row.

    A closure (Spark pickles it by value): it refers to nothing of this
    module, so the workers need not import the benchmarks.
    """
    linger_ms, timeout = LINGER_MS, FLUSH_TIMEOUT_S

    def pykaf_rows(rows: Iterator[Any]) -> None:
        from pykaf.spark import get_producer

        producer = get_producer(
            bootstrap_servers=bootstrap, linger=linger_ms / 1000, acks="all", idempotence=True
        )
        produce = producer.produce
        n = 0
        for row in rows:
            produce(topic, row.value)
            n += 1
        producer.flush(timeout)  # raises DeliveryError if a record failed
        counted.add(n)

    def confluent_rows(rows: Iterator[Any]) -> None:
        from confluent_kafka import Producer

        # Runs on Spark's executors: only what the task closes over and the
        # installed packages are there (not bench/), so the settings are inline.
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": linger_ms,
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        produce, poll = producer.produce, producer.poll
        n = 0
        for row in rows:
            while True:
                try:
                    produce(topic, row.value)
                    break
                except BufferError:  # its queue is full: serve it and try again
                    poll(0.1)
            poll(0)
            n += 1
        left = producer.flush(timeout)
        if left:
            raise RuntimeError(f"confluent-kafka: {left} records unacknowledged after flush")
        counted.add(n)

    return pykaf_rows if client == PYKAF else confluent_rows


def _write(client: str, variant: str, df: Any, bootstrap: str, topic: str) -> None:
    if variant == "foreachPartition":
        counted = df.sparkSession.sparkContext.accumulator(0)
        df.foreachPartition(_per_row_task(client, bootstrap, topic, counted))
        assert counted.value == RECORDS, f"{client}: tasks produced {counted.value} rows"
    elif variant == "writer":
        (
            df.write.format("pykaf")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("kafka.linger.ms", str(LINGER_MS))
            .mode("append")
            .save()
        )
    elif variant == "mapInArrow":
        from pykaf.spark import SUMMARY_SCHEMA, arrow_producer

        produce = arrow_producer(topic, bootstrap_servers=bootstrap, linger=LINGER_MS / 1000)
        rows = df.mapInArrow(produce, SUMMARY_SCHEMA).collect()
        assert sum(r.records for r in rows) == RECORDS
    else:
        ck = importlib.import_module("confluent_kafka")
        producer = ck.Producer(confluent_conf(bootstrap, LINGER_MS))
        confluent_produce_all(producer, topic, df.toArrow().column("value").to_pylist())
        assert producer.flush(120) == 0, "confluent-kafka: records unacknowledged"


@pytest.mark.parametrize(("client", "variant"), WRITERS, ids=[f"{c}[{v}]" for c, v in WRITERS])
def test_spark_write(
    benchmark: Any, bench_tansu: Any, frame: Any, client: str, variant: str
) -> None:
    _time_writes(benchmark, bench_tansu, frame, "spark-write-1M-tansu", client, variant)


@pytest.mark.parametrize(("client", "variant"), PER_ROW, ids=[f"{c}[{v}]" for c, v in PER_ROW])
def test_spark_per_row(
    benchmark: Any,
    bench_tansu: Any,
    frame: Any,
    client: str,
    variant: str,
) -> None:
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
    floors: list[float] = []
    _time_writes(
        benchmark, bench_tansu, frame, "spark-foreachPartition-1M-tansu", client, variant, floors
    )
    # each round's floor pass ran just before it, untimed: on a machine whose
    # load drifts, the floor is measured under the load its rounds saw
    benchmark.extra_info["floor_s"] = round(statistics.median(floors), 3)


def _time_writes(
    benchmark: Any,
    bench_tansu: Any,
    frame: Any,
    group: str,
    client: str,
    variant: str,
    floors: list[float] | None = None,
) -> None:
    """Time ``ROUNDS`` writes of ``frame``, each to a topic of its own, checked after.

    With ``floors``, each round's untimed set-up first runs a floor pass
    (:func:`_floor_pass`) and appends its seconds there.
    """
    tag(
        benchmark,
        group=group,
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_MS,
    )
    topics: list[str] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-spark-write-{next(_ids)}"
        bench_tansu.create_topic(topic, PARTITIONS)
        topics.append(topic)
        if floors is not None:
            floors.append(_floor_pass(frame))
        return (topic,), {}

    def teardown(topic: str) -> None:
        marks = bench_tansu.high_watermarks(topic)
        assert sum(marks.values()) == RECORDS, f"{topic} holds {marks}, {RECORDS} were written"
        bench_tansu.delete_topic(topic)
        topics.remove(topic)

    benchmark.pedantic(
        lambda topic: _write(client, variant, frame, bench_tansu.bootstrap, topic),
        setup=setup,
        teardown=teardown,
        rounds=ROUNDS,
        iterations=1,
    )
    while topics:  # --benchmark-disable runs the target once, without teardown
        teardown(topics[0])
    note_rate(benchmark, RECORDS)


@pytest.fixture(scope="module")
def written(bench_tansu: Any, frame: Any) -> Iterator[str]:
    """A topic holding the 1M records (written once, by the pykaf writer)."""
    topic = f"bench-spark-read-{next(_ids)}"
    bench_tansu.create_topic(topic, PARTITIONS)
    _write(PYKAF, "writer", frame, bench_tansu.bootstrap, topic)
    yield topic
    bench_tansu.delete_topic(topic)


def _read(client: str, spark: Any, bootstrap: str, topic: str) -> tuple[int, int]:
    if client == PYKAF:
        df = (
            spark.read.format("pykaf")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
        )
    else:
        import pyarrow as pa

        ck = importlib.import_module("confluent_kafka")
        consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{next(_ids)}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
        consumer.assign(
            [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        values: list[bytes] = []
        ended: set[int] = set()
        while len(ended) < PARTITIONS:
            for message in consumer.consume(10_000, timeout=5):
                if message.error():
                    if message.error().code() == ck.KafkaError._PARTITION_EOF:
                        ended.add(message.partition())
                        continue
                    raise AssertionError(f"confluent-kafka: {message.error()}")
                values.append(message.value())
        consumer.close()
        df = spark.createDataFrame(pa.table({"value": pa.array(values, pa.binary())}))
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
    return row.n, row.bytes


@pytest.mark.parametrize(("client", "variant"), READERS, ids=[f"{c}[{v}]" for c, v in READERS])
def test_spark_read(
    benchmark: Any, bench_tansu: Any, spark: Any, written: str, client: str, variant: str
) -> None:
    tag(
        benchmark,
        group="spark-read-1M-tansu",
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
    )
    result = benchmark.pedantic(
        _read, args=(client, spark, bench_tansu.bootstrap, written), rounds=ROUNDS, iterations=1
    )
    assert result == (RECORDS, RECORDS * VALUE_SIZE)
    note_rate(benchmark, RECORDS)
