"""``pykaf.testing.standalone_spark_session``: pykaf's format on a Spark standalone cluster.

On local[2] every task runs in the driver's JVM; on a standalone cluster each
executor is a JVM of its own with Python workers of its own, as on a real
cluster. The job runs in a child process: a process holds one SparkContext,
and this one's (the ``spark`` fixture's local session) may be running.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent(
    """
    import os
    from collections import Counter

    import pykaf.sync
    from pykaf.testing import FakeClusterThread, standalone_spark_session

    with FakeClusterThread(1) as fake, standalone_spark_session("pykaf-tests") as spark:
        fake.create_topic("t", 3)
        rows = [(f"k{i}", f"value {i}") for i in range(3000)]
        df = spark.createDataFrame(rows, "key string, value string").repartition(4)
        (
            df.write.format("pykaf")
            .option("kafka.bootstrap.servers", fake.bootstrap)
            .option("topic", "t")
            .mode("append")
            .save()
        )
        back = (
            spark.read.format("pykaf")
            .option("kafka.bootstrap.servers", fake.bootstrap)
            .option("subscribe", "t")
            .load()
            .select("key", "value")
            .collect()
        )
        assert Counter((r.key, r.value) for r in back) == Counter(
            (k.encode(), v.encode()) for k, v in rows
        ), "the rows read back differ from those written"
        pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getppid()).collect()
        print("executors", len(set(pids) - {os.getpid()}))
        try:
            standalone_spark_session("again").__enter__()
        except RuntimeError as exc:
            print("refused:", exc)
    """
)


def test_the_pykaf_format_writes_and_reads_on_a_standalone_cluster() -> None:
    pytest.importorskip("pyspark.sql")
    done = subprocess.run(
        [sys.executable, "-c", JOB], capture_output=True, text=True, timeout=300, check=False
    )
    if "JAVA_HOME is not set" in done.stderr or "Unable to locate a Java" in done.stderr:
        pytest.skip("no Java")
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    # two workers of one core: the tasks ran in two executor JVMs, not the driver
    assert "executors 2" in lines, done.stdout
    assert any(line.startswith("refused: a SparkContext is already running") for line in lines)
