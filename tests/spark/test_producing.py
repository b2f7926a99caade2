"""Producing from Spark tasks: ``mapInArrow`` with ``arrow_producer``, and ``get_producer``."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

import pykaf.sync
from pykaf import errors
from pykaf.spark import SUMMARY_SCHEMA, arrow_producer, get_producer
from pykaf.testing import FakeClusterThread

pytestmark = pytest.mark.spark
ROWS = 20_000


def _frame(spark: Any, rows: int = ROWS, *, value_size: int = 20) -> Any:
    from pyspark.sql import functions as F

    return (
        spark.range(rows, numPartitions=4)
        .withColumn("key", F.concat(F.lit("k"), F.col("id").cast("string")))
        .withColumn("value", F.encode(F.lpad(F.col("id").cast("string"), value_size, "v"), "utf-8"))
    )


def _read_back(
    bootstrap: str, topic: str, partitions: int, count: int
) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    with pykaf.sync.Consumer(bootstrap) as consumer:
        consumer.assign([(topic, p, pykaf.OLDEST) for p in range(partitions)])
        while len(out) < count:
            batch = consumer.consume(max_records=10_000, timeout=10)
            assert batch, f"read {len(out)} of {count} records"
            out += [(r.key, r.value) for r in batch]
    return out


def test_map_in_arrow_produces_every_row_once(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    topic = new_topic()
    df = _frame(spark)
    produce = arrow_producer(topic, bootstrap_servers=cluster.bootstrap, key_column="key")
    summary = df.mapInArrow(produce, SUMMARY_SCHEMA).collect()
    assert len(summary) == 4  # one row per task
    assert sum(row.records for row in summary) == ROWS
    assert {row.topic for row in summary} == {topic}
    got = _read_back(cluster.bootstrap, topic, 3, ROWS)
    expected = [(b"k%d" % i, str(i).rjust(20, "v").encode()) for i in range(ROWS)]
    assert Counter(got) == Counter(expected)
    # keys decide partitions: the same key always lands in one partition
    assert len(got) == ROWS


def test_worker_processes_reuse_their_producer(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    topic = new_topic()
    produce = arrow_producer(topic, bootstrap_servers=cluster.bootstrap)
    first = _frame(spark, 1000).mapInArrow(produce, SUMMARY_SCHEMA).collect()
    second = _frame(spark, 1000).mapInArrow(produce, SUMMARY_SCHEMA).collect()
    # each worker process makes its producer once: later tasks there report it reused
    firsts = Counter(row.pid for row in first + second if not row.reused)
    assert all(n == 1 for n in firsts.values()), firsts
    assert any(row.reused for row in second), "no task of the second job reused a producer"
    assert sum(r.records for r in first) == sum(r.records for r in second) == 1000


def test_a_failed_record_fails_the_job(spark: Any) -> None:
    with FakeClusterThread(1, auto_create_topics=False) as strict:
        produce = arrow_producer(
            "no-such-topic", bootstrap_servers=strict.bootstrap, delivery_timeout=5.0
        )
        with pytest.raises(Exception, match=r"UnknownTopicOrPartition|does not exist"):
            _frame(spark, 100).mapInArrow(produce, SUMMARY_SCHEMA).collect()


def test_a_missing_column_is_named(spark: Any, cluster: FakeClusterThread) -> None:
    produce = arrow_producer("t", bootstrap_servers=cluster.bootstrap, value_column="payload")
    with pytest.raises(Exception, match="no column 'payload'"):
        _frame(spark, 10).mapInArrow(produce, SUMMARY_SCHEMA).collect()


def test_get_producer_is_one_per_process_and_configuration(cluster: FakeClusterThread) -> None:
    a = get_producer(bootstrap_servers=cluster.bootstrap)
    assert get_producer(bootstrap_servers=cluster.bootstrap) is a
    b = get_producer(bootstrap_servers=cluster.bootstrap, linger=0.01)
    assert b is not a
    a.close()
    assert get_producer(bootstrap_servers=cluster.bootstrap) is not a  # a closed one is replaced
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own producer, not the parent's
        try:
            child = get_producer(bootstrap_servers=cluster.bootstrap, linger=0.01)
            os.write(write, b"new" if child is not b else b"same")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"new"
    with pytest.raises(errors.ConfigError):
        get_producer(bootstrap_servers=cluster.bootstrap, acks=7)


def _produce_rows(bootstrap: str, topic: str) -> Any:
    """A ``foreachPartition`` function: ``produce`` per row, then ``flush``."""

    def send_rows(rows: Any) -> None:
        producer = get_producer(bootstrap_servers=bootstrap)
        for row in rows:
            producer.produce(topic, row.value, key=row.key.encode())
            producer.poll(0)
        assert producer.flush(timeout=60) == 0

    return send_rows


def test_foreach_partition_produces_row_by_row(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    topic = new_topic()
    _frame(spark).foreachPartition(_produce_rows(cluster.bootstrap, topic))
    got = _read_back(cluster.bootstrap, topic, 3, ROWS)
    expected = [(b"k%d" % i, str(i).rjust(20, "v").encode()) for i in range(ROWS)]
    assert Counter(got) == Counter(expected)
