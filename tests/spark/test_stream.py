"""``spark.readStream.format("pykaf")`` and ``writeStream.format("pykaf")``."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import pykaf.sync
from pykaf import errors

pytestmark = pytest.mark.spark


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with pykaf.sync.Producer(bootstrap, linger=0.005) as producer:
        producer.send_many(topic, values, keys=values)


def _copy(
    spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path, **options: str
) -> Any:
    """Run one availableNow query copying ``source`` to ``sink``; return it, ended."""
    reader = spark.readStream.format("pykaf").option("kafka.bootstrap.servers", bootstrap)
    for name, value in {"subscribe": source, **options}.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .select("key", "value")
        .writeStream.format("pykaf")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the availableNow query did not end"
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")
    return query


def _values(spark: Any, bootstrap: str, topic: str) -> list[bytes]:
    df = spark.read.format("pykaf").option("kafka.bootstrap.servers", bootstrap)
    return [r.value for r in df.option("subscribe", topic).load().collect()]


def test_available_now_runs_resume_from_the_checkpoint(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    source, sink = kafka.topic(2), kafka.topic(2)
    first = [b"a%03d" % i for i in range(100)]
    _produce(kafka.bootstrap, source, first)
    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        return _copy(
            spark,
            kafka.bootstrap,
            source,
            sink,
            checkpoint,
            startingOffsets="earliest",
            maxOffsetsPerTrigger="30",
        )

    query = run()
    sizes = [p["numInputRows"] for p in query.recentProgress]
    assert sum(sizes) == 100 and max(sizes) <= 30 and len(sizes) >= 4, sizes
    assert Counter(_values(spark, kafka.bootstrap, sink)) == Counter(first)

    # a restart goes on from the checkpoint: only what came since, nothing twice
    second = [b"b%03d" % i for i in range(50)]
    _produce(kafka.bootstrap, source, second)
    query = run()
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50
    assert Counter(_values(spark, kafka.bootstrap, sink)) == Counter(first + second)

    # a new query starts at the end by default (startingOffsets latest)
    fresh = kafka.topic(1)
    query = _copy(spark, kafka.bootstrap, source, fresh, tmp_path / "fresh")
    assert sum(p["numInputRows"] for p in query.recentProgress) == 0
    assert _values(spark, kafka.bootstrap, fresh) == []


def test_limit_offsets_shares_the_limit_in_proportion() -> None:
    pytest.importorskip("pyspark")
    from pykaf.spark._stream import from_json, limit_offsets, to_json

    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 0}
    ends = limit_offsets(start, latest, 40)
    assert ends == {("t", 0): 30, ("t", 1): 110, ("t", 2): 0}
    assert limit_offsets(start, latest, 10_000) == latest
    # a limit too small to share still moves one offset
    assert sum(limit_offsets(start, latest, 1)[tp] - start.get(tp, 0) for tp in latest) == 1
    assert from_json(to_json(ends)) == ends
    assert to_json(ends) == {"t": {"0": 30, "1": 110, "2": 0}}


def test_stream_reader_refuses_bad_options(spark: Any) -> None:
    """From its first call, not its constructor (see the test of the query's error)."""
    pytest.importorskip("pyspark")
    from pykaf.spark._stream import PykafStreamReader

    reader = PykafStreamReader(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxOffsetsPerTrigger": "x"}
    )
    with pytest.raises(errors.ConfigError, match="maxOffsetsPerTrigger"):
        reader.getDefaultReadLimit()
    with pytest.raises(errors.ConfigError, match="exactly one"):
        PykafStreamReader({"kafka.bootstrap.servers": "h:1"}).initialOffset()


def test_latest_offset_respects_limits_and_the_available_now_target(cluster: Any) -> None:
    """The stream reader's driver side alone, against the fake cluster."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from pykaf.spark._stream import PykafStreamReader, from_json

    topic = f"limits-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    for partition, count in ((0, 30), (1, 10)):
        with pykaf.sync.Producer(cluster.bootstrap) as producer:
            producer.send_many(topic, [b"x"] * count, partition=partition)
    reader = PykafStreamReader(
        {
            "kafka.bootstrap.servers": cluster.bootstrap,
            "subscribe": topic,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "8",
        }
    )
    start = reader.initialOffset()
    assert from_json(start) == {(topic, 0): 0, (topic, 1): 0}

    def moved(end: dict[str, Any]) -> int:
        return sum(from_json(end).values()) - sum(from_json(start).values())

    assert moved(reader.latestOffset(start, ReadMaxRows(8))) == 8
    assert moved(reader.latestOffset(start, None)) == 8  # no limit given: the option's
    assert moved(reader.latestOffset(start, ReadAllAvailable())) == 40  # the engine's wins
    reader.prepareForTriggerAvailableNow()
    with pykaf.sync.Producer(cluster.bootstrap) as producer:
        producer.send_many(topic, [b"later"] * 5, partition=1)
    # availableNow: nothing past the offsets the query started with
    assert moved(reader.latestOffset(start, ReadAllAvailable())) == 40
    assert reader.reportLatestOffset() == {topic: {"0": 30, "1": 15}}


def test_a_new_stream_starts_at_a_timestamp(cluster: Any) -> None:
    """startingTimestamp and startingOffsetsByTimestamp for a new query (issue 17)."""
    import json
    import time

    from pykaf.spark._stream import PykafStreamReader

    topic = f"times-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    base = int(time.time() * 1000) - 60_000
    with pykaf.sync.Producer(cluster.bootstrap) as producer:
        producer.send_many(
            topic, [b"x"] * 100, timestamps=[base + i for i in range(100)], partition=0
        )
        producer.send_many(topic, [b"y"] * 10, timestamps=[base] * 10, partition=1)

    def start(**options: str) -> Any:
        reader = PykafStreamReader(
            {"kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic, **options}
        )
        return reader.initialOffset()

    latest = {"startingOffsetsByTimestampStrategy": "latest"}  # partition 1 has nothing as late
    assert start(startingTimestamp=str(base + 50), **latest) == {topic: {"0": 50, "1": 10}}
    by_partition = json.dumps({topic: {"1": base}})  # partition 0: the default (latest)
    assert start(startingOffsetsByTimestamp=by_partition) == {topic: {"0": 100, "1": 0}}
    with pytest.raises(errors.ConfigError, match=f"{topic}/1 has no record at or after"):
        start(startingTimestamp=str(base + 50))  # strategy error: partition 1 is older


def test_min_offsets_per_trigger_waits_until_max_trigger_delay(cluster: Any) -> None:
    """minOffsetsPerTrigger holds a micro-batch back, up to maxTriggerDelay (issue 17)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from pykaf.spark._stream import PykafStreamReader

    topic = f"min-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1)
    with pykaf.sync.Producer(cluster.bootstrap) as producer:
        producer.send_many(topic, [b"x"] * 30, partition=0)

    def reader(**options: str) -> Any:
        base = {"kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic}
        return PykafStreamReader({**base, "startingOffsets": "earliest", **options})

    held = reader(minOffsetsPerTrigger="31", maxTriggerDelay="1h")
    start = held.initialOffset()
    assert held.latestOffset(start, ReadAllAvailable()) == start  # 30 < 31: wait
    enough = reader(minOffsetsPerTrigger="30", maxTriggerDelay="1h")
    assert enough.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 30}}
    late = reader(minOffsetsPerTrigger="31", maxTriggerDelay="0ms")  # the delay is over
    assert late.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 30}}
    held.prepareForTriggerAvailableNow()  # availableNow reads what there is, never waits
    assert held.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 30}}


def test_a_bad_stream_option_fails_the_query_with_its_own_error(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    """Not behind PySpark's UnboundLocalError (issue 17)."""
    query = (
        spark.readStream.format("pykaf")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("subscribe", "t")
        .option("endingOffsets", "latest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    with pytest.raises(Exception, match="endingOffsets are not valid in streaming") as caught:
        query.awaitTermination(60)
    assert "UnboundLocalError" not in str(caught.value)


def test_a_continuous_trigger_is_refused_by_name(spark: Any, cluster: Any, tmp_path: Path) -> None:
    """Spark refuses it for a Python data source, clearly (docs/spark.md says so)."""
    stream = (
        spark.readStream.format("pykaf")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("subscribe", "t")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(continuous="1 second")
    )
    with pytest.raises(Exception, match="pykaf does not support continuous processing"):
        stream.start().awaitTermination(60)
