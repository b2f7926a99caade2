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

* ``spark-write-1M-kafka``: 1,000,000 rows of 100-byte values (a cached
  DataFrame of 4 partitions) written to a fresh topic of 4 partitions per
  round, ``df.write.format(F)...save()``, linger 5 ms for both, every other
  producer setting at each client's defaults (both: acks=all, idempotent;
  batches of 16 KiB for Kafka's Java producer, 1,000,000 bytes for pykaf's).

  - ``pykaf[writer]``: ``format("pykaf")``.
  - ``spark-kafka[connector]``: ``format("kafka")``.

* ``spark-read-1M-kafka``: the 1,000,000 records read back into a DataFrame
  and aggregated (``count(*)``, ``sum(length(value))``), read_committed for
  both (Spark's connector reads read_uncommitted unless told; the topic has
  no transactions, so both read the same records), fetch settings at each
  client's defaults.

  - ``pykaf[reader]``: ``spark.read.format("pykaf")``.
  - ``spark-kafka[connector]``: ``spark.read.format("kafka")``.

``PYKAF_BENCH_SPARK_RECORDS`` sets another number of rows (a quick check of
the harness). Every round checks its result: a written topic's high watermarks sum to the
rows written; the aggregation counts every record and byte.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from bench._support import PYKAF, note_rate, tag

CONNECTOR = "spark-kafka"
RECORDS = int(os.environ.get("PYKAF_BENCH_SPARK_RECORDS", "1000000"))  # fewer: a quick check
VALUE_SIZE = 100
PARTITIONS = 4
ROUNDS = 3
LINGER_MS = 5
CLIENTS = [(PYKAF, "pykaf"), (CONNECTOR, "kafka")]  # (client, Spark format)

_ids = itertools.count()


def _variant(client: str, kind: str) -> str:
    return kind if client == PYKAF else "connector"


MODES = {"local": "", "standalone": "-standalone"}  # Spark -> the suffix of its groups


@pytest.fixture(scope="module", params=list(MODES))
def mode(request: Any) -> str:
    """Which Spark the module's cases run on (see the docstring)."""
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def spark(mode: str) -> Iterator[Any]:
    """A SparkSession of ``mode`` with Spark's Kafka connector on its class path."""
    pytest.importorskip("pyspark.sql")
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
        yield session


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


def _write(fmt: str, df: Any, bootstrap: str, topic: str) -> None:
    (
        df.write.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", str(LINGER_MS))
        .mode("append")
        .save()
    )


@pytest.mark.parametrize(("client", "fmt"), CLIENTS, ids=[f"{c}[{f}]" for c, f in CLIENTS])
def test_spark_kafka_write(
    benchmark: Any, bench_kafka: Any, mode: str, frame: Any, client: str, fmt: str
) -> None:
    tag(
        benchmark,
        group=f"spark-write-1M-kafka{MODES[mode]}",
        client=client,
        records=RECORDS,
        variant=_variant(client, "writer"),
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        linger_ms=LINGER_MS,
    )
    topics: list[str] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-spark-kafka-write-{next(_ids)}"
        bench_kafka.create_topic(topic, PARTITIONS)
        topics.append(topic)
        return (topic,), {}

    def teardown(topic: str) -> None:
        marks = bench_kafka.high_watermarks(topic)
        assert sum(marks.values()) == RECORDS, f"{topic} holds {marks}, {RECORDS} were written"
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
    note_rate(benchmark, RECORDS)


@pytest.fixture(scope="module")
def written(bench_kafka: Any, frame: Any) -> Iterator[str]:
    """A topic holding the 1M records (written once, by the pykaf writer)."""
    topic = f"bench-spark-kafka-read-{next(_ids)}"
    bench_kafka.create_topic(topic, PARTITIONS)
    _write("pykaf", frame, bench_kafka.bootstrap, topic)
    assert sum(bench_kafka.high_watermarks(topic).values()) == RECORDS
    yield topic
    bench_kafka.delete_topic(topic)


def _read(fmt: str, spark: Any, bootstrap: str, topic: str) -> tuple[int, int]:
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", topic)
        .load()
    )
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
    return row.n, row.bytes


@pytest.mark.parametrize(("client", "fmt"), CLIENTS, ids=[f"{c}[{f}]" for c, f in CLIENTS])
def test_spark_kafka_read(
    benchmark: Any,
    bench_kafka: Any,
    mode: str,
    spark: Any,
    written: str,
    client: str,
    fmt: str,
) -> None:
    tag(
        benchmark,
        group=f"spark-read-1M-kafka{MODES[mode]}",
        client=client,
        records=RECORDS,
        variant=_variant(client, "reader"),
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
    )
    result = benchmark.pedantic(
        _read, args=(fmt, spark, bench_kafka.bootstrap, written), rounds=ROUNDS, iterations=1
    )
    assert result == (RECORDS, RECORDS * VALUE_SIZE)
    note_rate(benchmark, RECORDS)
