"""Spark on Apache Kafka: the ``pykaf`` source and sink against Spark's own Kafka connector.

Cases (one pytest-benchmark group each; both formats on the same Apache Kafka
node, ``bench_kafka``, in the same run; Spark's connector is
``spark-sql-kafka-0-10`` fetched by ``pykaf.testing._kafka_dist.spark_kafka_jars``
and loaded with ``spark.jars``). Each case runs on two Sparks, one after the
other (the test ids' ``local`` and ``standalone``):

* ``local``: local[2], every task in the driver's JVM (the groups below);
* ``standalone``: a Spark standalone cluster on loopback
  (``pykaf.testing.standalone_spark_session``): a master and two workers of
  one core each, each task in an executor JVM of its own, as on a real
  cluster (the groups below with ``-standalone``).

Each case runs on two data sets (the test ids' ``1M`` and ``300k-8B``):

* ``1M``: 1,000,000 rows of 100-byte values, 4 partitions (the groups
  ``spark-*-1M-kafka*``);
* ``300k-8B``: 300,000 rows of 8-byte values, 6 partitions (issue 33's shape,
  where a job's fixed costs outweigh its bytes; the groups
  ``spark-*-300k-8B-kafka*``).

* ``spark-write-*``: the data set (a cached DataFrame, one Spark partition per
  topic partition) written to a fresh topic of as many partitions per round,
  ``df.write.format(F)...save()``, linger 5 ms for both, every other
  producer setting at each client's defaults (both: acks=all, idempotent;
  batches of 16 KiB for Kafka's Java producer, 1,000,000 bytes for pykaf's).

  - ``pykaf[writer]``: ``format("pykaf")``.
  - ``spark-kafka[connector]``: ``format("kafka")``.
  - ``spark-python[null-writer]``: the floor, not a Kafka client: a Python
    data source whose writer reads its Arrow batches and writes nothing
    (``bench/_spark_sources.py``). What any Python writer pays before producing
    a record; ``pykaf[writer]``'s ratio to it below 1 is what producing adds.

* ``spark-read-*``: the records read back into a DataFrame
  and aggregated (``count(*)``, ``sum(length(value))``), read_committed for
  both (Spark's connector reads read_uncommitted unless told; the topic has
  no transactions, so both read the same records), fetch settings at each
  client's defaults.

  - ``pykaf[reader]``: ``spark.read.format("pykaf")``.
  - ``spark-kafka[connector]``: ``spark.read.format("kafka")``.
  - ``spark-python[made-up-reader]``: the floor, not a Kafka client: a Python
    data source whose reader makes as many rows up in memory, in Arrow
    batches of 10,000 (``bench/_spark_sources.py``). What any Python reader
    pays before reading a record.

``PYKAF_BENCH_SPARK_RECORDS`` sets another number of rows for both data sets
(a quick check of the harness). Every round checks its result: a written
topic's high watermarks sum to the rows written; the aggregation counts every
record and byte.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bench._support import PYKAF, note_rate, tag

CONNECTOR = "spark-kafka"
FLOOR = "spark-python"
NULL_FORMAT = "pykaf-bench-null"  # bench/_spark_sources.py's format (it imports pyspark)
_QUICK = os.environ.get("PYKAF_BENCH_SPARK_RECORDS")  # fewer rows: a quick check


@dataclass(frozen=True)
class Shape:
    """A data set: how many rows, each value's size, how many partitions."""

    records: int
    value_size: int
    partitions: int


SHAPES = {
    "1M": Shape(int(_QUICK or 1_000_000), 100, 4),
    "300k-8B": Shape(int(_QUICK or 300_000), 8, 6),
}
ROUNDS = 3
LINGER_MS = 5
CLIENTS = [(PYKAF, "pykaf"), (CONNECTOR, "kafka")]  # (client, Spark format)
FORMATS = [*CLIENTS, (FLOOR, NULL_FORMAT)]  # the floor: in the write and the read groups

_ids = itertools.count()


def _variant(client: str, kind: str) -> str:
    if client == FLOOR:
        return "null-writer"
    return kind if client == PYKAF else "connector"


MODES = {"local": "", "standalone": "-standalone"}  # Spark -> the suffix of its groups


@pytest.fixture(scope="module", params=list(MODES))
def mode(request: Any) -> str:
    """Which Spark the module's cases run on (see the docstring)."""
    name: str = request.param
    return name


@pytest.fixture(scope="module", params=list(SHAPES))
def shape(request: Any) -> str:
    """Which data set the module's cases use (see the docstring)."""
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def spark(mode: str) -> Iterator[Any]:
    """A SparkSession of ``mode`` with Spark's Kafka connector on its class path."""
    pytest.importorskip("pyspark.sql")
    from bench._spark_sources import NullDataSource
    from bench._spark_sources import register as register_null
    from pykaf.spark import register
    from pykaf.testing import (
        KafkaUnavailableError,
        local_spark_session,
        standalone_spark_session,
    )
    from pykaf.testing._kafka_dist import spark_kafka_jars

    try:
        jars = ",".join(str(jar) for jar in spark_kafka_jars())
    except KafkaUnavailableError as exc:
        pytest.skip(f"Spark's Kafka connector cannot be had: {exc}")
    settings = {"spark.driver.memory": "2g", "spark.jars": jars}
    with contextlib.ExitStack() as stack:
        try:
            if mode == "local":
                session = local_spark_session("pykaf-bench-kafka", **settings)
                stack.callback(session.stop)
            else:
                session = stack.enter_context(
                    standalone_spark_session("pykaf-bench-kafka", config=settings)
                )
        except Exception as exc:
            pytest.skip(f"no {mode} Spark: {exc}")
        register(session)
        assert NullDataSource.name() == NULL_FORMAT
        register_null(session)
        yield session


@pytest.fixture(scope="module")
def frame(spark: Any, shape: str) -> Iterator[Any]:
    """The data set's rows, cached and counted before any timing."""
    from bench._spark_sources import value_frame

    data = SHAPES[shape]
    df = value_frame(spark, data.records, data.value_size, data.partitions)
    yield df
    df.unpersist()


def _write(fmt: str, df: Any, bootstrap: str, topic: str) -> None:
    if fmt == NULL_FORMAT:
        df.write.format(fmt).mode("append").save()
        return
    (
        df.write.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", str(LINGER_MS))
        .mode("append")
        .save()
    )


@pytest.mark.parametrize(("client", "fmt"), FORMATS, ids=[f"{c}[{f}]" for c, f in FORMATS])
def test_spark_kafka_write(
    benchmark: Any, bench_kafka: Any, mode: str, shape: str, frame: Any, client: str, fmt: str
) -> None:
    data = SHAPES[shape]
    tag(
        benchmark,
        group=f"spark-write-{shape}-kafka{MODES[mode]}",
        client=client,
        records=data.records,
        variant=_variant(client, "writer"),
        value_bytes=data.value_size,
        partitions=data.partitions,
        linger_ms=LINGER_MS,
    )
    topics: list[str] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-spark-kafka-write-{next(_ids)}"
        bench_kafka.create_topic(topic, data.partitions)
        topics.append(topic)
        return (topic,), {}

    def teardown(topic: str) -> None:
        marks = bench_kafka.high_watermarks(topic)
        # the floor writes nothing: its topic stays empty
        want = 0 if client == FLOOR else data.records
        assert sum(marks.values()) == want, f"{topic} holds {marks}, {want} were written"
        bench_kafka.delete_topic(topic)
        topics.remove(topic)

    benchmark.pedantic(
        lambda topic: _write(fmt, frame, bench_kafka.bootstrap, topic),
        setup=setup,
        teardown=teardown,
        rounds=ROUNDS,
        iterations=1,
    )
    while topics:  # --benchmark-disable runs the target once, without teardown
        teardown(topics[0])
    note_rate(benchmark, data.records)


@pytest.fixture(scope="module")
def written(bench_kafka: Any, shape: str, frame: Any) -> Iterator[str]:
    """A topic holding the data set's records (written once, by the pykaf writer)."""
    data = SHAPES[shape]
    topic = f"bench-spark-kafka-read-{next(_ids)}"
    bench_kafka.create_topic(topic, data.partitions)
    _write("pykaf", frame, bench_kafka.bootstrap, topic)
    assert sum(bench_kafka.high_watermarks(topic).values()) == data.records
    yield topic
    bench_kafka.delete_topic(topic)


def _read(fmt: str, spark: Any, bootstrap: str, topic: str, data: Shape) -> tuple[int, int]:
    if fmt == NULL_FORMAT:  # the floor: as many rows made up in the Python workers
        df = (
            spark.read.format(fmt)
            .option("records", str(data.records))
            .option("value_size", str(data.value_size))
            .option("partitions", str(data.partitions))
            .load()
        )
    else:
        df = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.isolation.level", "read_committed")
            .option("subscribe", topic)
            .load()
        )
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
    return row.n, row.bytes


@pytest.mark.parametrize(("client", "fmt"), FORMATS, ids=[f"{c}[{f}]" for c, f in FORMATS])
def test_spark_kafka_read(
    benchmark: Any,
    bench_kafka: Any,
    mode: str,
    shape: str,
    spark: Any,
    written: str,
    client: str,
    fmt: str,
) -> None:
    data = SHAPES[shape]
    tag(
        benchmark,
        group=f"spark-read-{shape}-kafka{MODES[mode]}",
        client=client,
        records=data.records,
        variant="made-up-reader" if client == FLOOR else _variant(client, "reader"),
        value_bytes=data.value_size,
        partitions=data.partitions,
    )
    result = benchmark.pedantic(
        _read, args=(fmt, spark, bench_kafka.bootstrap, written, data), rounds=ROUNDS, iterations=1
    )
    assert result == (data.records, data.records * data.value_size)
    note_rate(benchmark, data.records)
