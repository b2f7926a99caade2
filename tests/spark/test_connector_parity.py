"""``format("pykaf")`` against Spark's own Kafka connector (``format("kafka")``) on Apache Kafka.

The same topics are read by both sources with the same options, and the same
DataFrame is written by both sinks; schemas and rows must be equal, exactly.
Where the two differ by design the test asserts the difference that
docs/spark.md ("Compared with Spark's Kafka connector") lists, so a change on
either side is noticed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import pykaf.sync

pytestmark = pytest.mark.spark

FORMATS = ("kafka", "pykaf")
# CreateTimes of the records written: from 30 hours ago, spread over 28 hours. Recent
# enough that retention (7 days) deletes nothing, and not in the future (Kafka
# refuses a timestamp over an hour ahead).
BASE_MS = int(time.time() * 1000) - 30 * 3600 * 1000


@dataclass(frozen=True)
class Source:
    """The topics both sources read: ``create`` (CreateTime) and ``append`` (LogAppendTime)."""

    bootstrap: str
    create: str
    append: str
    records: int


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _record(i: int) -> dict[str, Any]:
    """Record ``i`` of the source topics: null, empty and plain keys, values and headers."""
    key = None if i % 5 == 0 else b"" if i % 7 == 0 else b"key-%d" % (i % 13)
    value = None if i % 11 == 0 else b"" if i % 17 == 0 else b"value %d" % i
    headers = (
        []
        if i % 3 == 0
        else [("h", b"%d" % i), ("null", None), ("h", b"again"), ("", b"")]
        if i % 3 == 1
        else [("one", b"\x00\xff")]
    )
    return {
        "key": key,
        "value": value,
        "headers": headers,
        # out of order and far apart; every 4th record takes the producer's now
        "timestamp": None if i % 4 == 3 else BASE_MS + (i * 7919) % 100_000 * 1000 + i % 1000,
        "partition": i // 2 % 4 if i % 2 else None,  # the rest: by the partitioner
    }


@pytest.fixture(scope="module")
def source(kafka_cluster: Any) -> Source:
    """Two topics on the session's Apache Kafka, written by one pykaf producer."""
    create, append = _name("parity-ct"), _name("parity-lat")
    kafka_cluster.create_topic(create, partitions=4)
    kafka_cluster.create_topic(
        append, partitions=4, configs={"message.timestamp.type": "LogAppendTime"}
    )
    n = 600
    with pykaf.sync.Producer(kafka_cluster.bootstrap, linger=0.005) as producer:
        futures = [
            producer.send_async(topic, **_record(i)) for i in range(n) for topic in (create, append)
        ]
        producer.flush()
        for future in futures:
            future.result()
    return Source(kafka_cluster.bootstrap, create, append, n)


def _read(spark: Any, fmt: str, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    """Every row as a tuple (headers as tuples, or None), by topic, partition and offset."""
    out = []
    for row in df.collect():
        values = row.asDict()
        if "headers" in values and values["headers"] is not None:
            values["headers"] = tuple((h.key, h.value) for h in values["headers"])
        out.append(tuple(values[name] for name in df.columns))
    columns = df.columns
    where = [columns.index(c) for c in ("topic", "partition", "offset")]
    return sorted(out, key=lambda r: tuple(r[i] for i in where))


def _both(spark: Any, bootstrap: str, **options: str) -> tuple[Any, Any]:
    kafka, pykaf_df = (_read(spark, fmt, bootstrap, **options) for fmt in FORMATS)
    return kafka, pykaf_df


def _assert_same(spark: Any, bootstrap: str, **options: str) -> list[tuple[Any, ...]]:
    kafka, ours = _both(spark, bootstrap, **options)
    assert ours.schema == kafka.schema  # names, types and nullability
    expected = _rows(kafka)
    assert _rows(ours) == expected
    return expected


def test_subscribe_every_column_equal(
    spark: Any, spark_kafka_connector: list[str], source: Source
) -> None:
    rows = _assert_same(
        spark, source.bootstrap, subscribe=f"{source.create},{source.append}", includeHeaders="true"
    )
    assert len(rows) == 2 * source.records  # all of both topics
    # the data is as varied as meant: null and empty keys and values, no headers (null),
    # both timestamp types, several partitions
    keys = {r[0] for r in rows}
    values = {r[1] for r in rows}
    assert None in keys and b"" in keys and None in values and b"" in values
    assert {r[6] for r in rows} == {0, 1}
    assert {r[3] for r in rows} == {0, 1, 2, 3}
    assert any(r[7] is None for r in rows) and any(
        r[7] and (None in dict(r[7]).values()) for r in rows
    )


@pytest.mark.parametrize(
    "which",
    ["words", "json", "assign", "pattern", "no-headers"],
)
def test_offsets_and_subscriptions_equal(
    spark: Any, spark_kafka_connector: list[str], source: Source, which: str
) -> None:
    c, a = source.create, source.append
    options: dict[str, str] = {"includeHeaders": "true"}
    if which == "words":
        options.update(subscribe=c, startingOffsets="earliest", endingOffsets="latest")
    elif which == "json":
        options.update(
            subscribe=f"{c},{a}",
            startingOffsets=json.dumps(
                {c: {"0": 5, "1": -2, "2": 40, "3": 0}, a: {"0": -2, "1": 17, "2": 3, "3": 70}}
            ),
            endingOffsets=json.dumps(
                {c: {"0": 60, "1": -1, "2": 41, "3": 0}, a: {"0": 1, "1": -1, "2": 70, "3": 70}}
            ),
        )
    elif which == "assign":
        options.update(
            assign=json.dumps({c: [0, 2], a: [3]}),
            startingOffsets=json.dumps({c: {"0": 10, "2": -2}, a: {"3": 7}}),
            endingOffsets=json.dumps({c: {"0": 20, "2": -1}, a: {"3": -1}}),
        )
    elif which == "pattern":
        options.update(subscribePattern=f"{c[:-8]}.{{8}}")  # parity-ct-<8 hex>: this run's
    else:
        options = {"subscribe": a, "includeHeaders": "false"}
    rows = _assert_same(spark, source.bootstrap, **options)
    assert rows  # the options select something
    if which == "json":
        offsets = Counter((r[2] == a, r[3]) for r in rows)
        assert offsets[(False, 0)] == 55 and offsets[(False, 2)] == 1 and offsets[(True, 2)] == 67
        assert (False, 3) not in offsets and (True, 3) not in offsets  # empty ranges


def test_options_both_refuse(spark: Any, spark_kafka_connector: list[str], source: Source) -> None:
    """Batch reads cannot start at latest nor end at earliest, in either."""
    for options in (
        {"startingOffsets": "latest"},
        {"endingOffsets": "earliest"},
        {"startingOffsets": json.dumps({source.create: {"0": -1}})},
        {"endingOffsets": json.dumps({source.create: {"0": -2}})},
    ):
        for fmt in FORMATS:
            with pytest.raises(Exception):  # noqa: B017 - their error types differ
                _read(spark, fmt, source.bootstrap, subscribe=source.create, **options).collect()


# -- differences docs/spark.md lists -----------------------------------------------------


def test_partial_offsets_json(spark: Any, spark_kafka_connector: list[str], source: Source) -> None:
    """Spark wants every partition in a startingOffsets JSON; pykaf gives the rest the default."""
    options = {
        "subscribe": source.create,
        "startingOffsets": json.dumps({source.create: {"1": 100}}),
    }
    kafka, ours = _both(spark, source.bootstrap, **options)
    with pytest.raises(Exception, match="start offsets don't match what are assigned"):
        kafka.collect()
    rows = _rows(ours)
    full = _rows(_read(spark, "kafka", source.bootstrap, subscribe=source.create))
    assert rows == [r for r in full if r[3] != 1 or r[4] >= 100]


def test_offset_past_the_end(
    spark: Any, spark_kafka_connector: list[str], kafka_cluster: Any
) -> None:
    """Both fail on an offset past a partition's end: Spark in the task, pykaf when planning.

    Spark's task polls for the missing offsets until ``kafkaConsumer.pollTimeoutMs``
    (120 s by default; 3 s here), then fails with "Some data may have been lost".
    """
    topic = _name("parity-past")
    kafka_cluster.create_topic(topic, partitions=2)
    with pykaf.sync.Producer(kafka_cluster.bootstrap) as producer:
        producer.send_many(topic, [b"v%d" % i for i in range(10)], partition=1)
    past = json.dumps({topic: {"0": -1, "1": 1000}})
    options = {"subscribe": topic, "endingOffsets": past, "kafkaConsumer.pollTimeoutMs": "3000"}
    kafka = _read(spark, "kafka", kafka_cluster.bootstrap, **options)
    with pytest.raises(Exception, match=r"lost|Lost task"):
        kafka.collect()  # (the reason is lost when the connector came in by ADD JAR)
    ours = _read(spark, "pykaf", kafka_cluster.bootstrap, **options)
    with pytest.raises(Exception, match=f"{topic}/1: offset 1000 is past the partition's end 10"):
        ours.collect()


def test_kafka_options(spark: Any, spark_kafka_connector: list[str], source: Source) -> None:
    """Spark passes any kafka.* setting to its client; pykaf refuses those it does not take,
    saying why (when the read is loaded), and checks the connector's own options."""
    options = {"subscribe": source.create, "kafka.max.poll.records": "7"}
    assert len(_read(spark, "kafka", source.bootstrap, **options).collect()) == source.records
    with pytest.raises(Exception, match=r"option kafka\.max\.poll\.records is not supported"):
        _read(spark, "pykaf", source.bootstrap, **options).collect()
    bad = {"subscribe": source.create, "kafkaConsumer.pollTimeoutMs": "nonsense"}
    with pytest.raises(Exception, match=r"option kafkaConsumer\.pollTimeoutMs must be an integer"):
        _read(spark, "pykaf", source.bootstrap, **bad).collect()
    misspelt = {"subscribe": source.create, "startingOfset": "0"}
    assert len(_read(spark, "kafka", source.bootstrap, **misspelt).collect()) == source.records
    with pytest.raises(Exception, match=r"unknown option\(s\) startingofset"):
        _read(spark, "pykaf", source.bootstrap, **misspelt)


def test_timestamp_offsets_equal(
    spark: Any, spark_kafka_connector: list[str], source: Source
) -> None:
    """startingTimestamp, ...OffsetsByTimestamp and endingTimestamp read the same rows."""
    after = BASE_MS + 30_000_000  # most of the stamped records are later
    full = _rows(_read(spark, "kafka", source.bootstrap, subscribe=source.create))
    rows = _assert_same(
        spark,
        source.bootstrap,
        subscribe=source.create,
        startingTimestamp=str(after),
        startingOffsetsByTimestampStrategy="latest",  # (a partition with none: at its end)
    )
    assert 0 < len(rows) < len(full)  # each partition starts at that time
    by_partition = json.dumps({source.create: {str(p): after for p in range(4)}})
    _assert_same(
        spark,
        source.bootstrap,
        subscribe=source.create,
        endingOffsetsByTimestamp=by_partition,
        endingTimestamp=str(after + 1000),  # takes precedence
    )
    for fmt in FORMATS:  # the strategy "error" (the default): a partition with none fails
        with pytest.raises(Exception):  # noqa: B017 - their error types differ
            _read(
                spark,
                fmt,
                source.bootstrap,
                subscribe=source.create,
                startingTimestamp=str(BASE_MS + 10**10),
            ).collect()


def test_isolation_level_default(
    spark: Any, spark_kafka_connector: list[str], kafka_cluster: Any
) -> None:
    """Both read read_uncommitted by default (aborted records too), and the same under
    read_committed (pykaf's default was read_committed until issue 17)."""
    topic = _name("parity-txn")
    kafka_cluster.create_topic(topic, partitions=1)
    with pykaf.sync.Producer(
        kafka_cluster.bootstrap, transactional_id=_name("parity-txn")
    ) as producer:
        producer.begin_transaction()
        producer.send(topic, b"committed")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted")
        producer.abort_transaction()
    kafka, ours = _both(spark, kafka_cluster.bootstrap, subscribe=topic)
    assert [r.value for r in kafka.collect()] == [b"committed", b"aborted"]
    assert _rows(ours) == _rows(kafka)
    committed = {"kafka.isolation.level": "read_committed"}
    kafka, ours = _both(spark, kafka_cluster.bootstrap, subscribe=topic, **committed)
    assert [r.value for r in ours.collect()] == [b"committed"]
    assert _rows(kafka) == _rows(ours)


# -- writing -----------------------------------------------------------------------------


WRITE_SCHEMA = (
    "key string, value binary, partition int, headers array<struct<key: string, value: binary>>"
)


def _write_rows(n: int) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(n):
        record = _record(i)
        key = None if record["key"] is None else record["key"].decode()
        rows.append((key, record["value"], record["partition"], record["headers"] or None))
    return rows


def _write(df: Any, fmt: str, bootstrap: str, **options: str) -> None:
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def _written(spark: Any, bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    return _rows(_read(spark, "kafka", bootstrap, subscribe=topic, includeHeaders="true"))


@pytest.fixture
def two_topics(kafka_cluster: Any) -> Iterator[tuple[str, str]]:
    """A topic for each sink, 4 partitions each."""
    names = (_name("parity-w-kafka"), _name("parity-w-pykaf"))
    for name in names:
        kafka_cluster.create_topic(name, partitions=4)
    yield names


def test_written_records_equal(
    spark: Any, spark_kafka_connector: list[str], kafka_cluster: Any, two_topics: tuple[str, str]
) -> None:
    rows = _write_rows(500)
    df = spark.createDataFrame(rows, WRITE_SCHEMA).repartition(3)
    for fmt, topic in zip(FORMATS, two_topics, strict=True):
        _write(df, fmt, kafka_cluster.bootstrap, topic=topic)
    got = [_written(spark, kafka_cluster.bootstrap, topic) for topic in two_topics]
    # columns: key, value, topic, partition, offset, timestamp, timestampType, headers
    assert len(got[0]) == len(got[1]) == len(rows)
    for side in got:  # a partition given is where the record lands
        landed = Counter((r[0], r[1], r[3]) for r in side)
        for key, value, partition, _ in rows:
            if partition is not None:
                assert landed[(None if key is None else key.encode(), value, partition)] > 0
    # the same records (key, value, headers; no headers read back as null) ...
    assert Counter((r[0], r[1], r[7]) for r in got[0]) == Counter(
        (r[0], r[1], r[7]) for r in got[1]
    )
    # ... and the keyed ones in the same partitions (Java's murmur2 in both producers)
    assert Counter((r[0], r[1], r[3], r[7]) for r in got[0] if r[0] is not None) == Counter(
        (r[0], r[1], r[3], r[7]) for r in got[1] if r[0] is not None
    )
    assert {r[6] for side in got for r in side} == {0}  # CreateTime


def test_topic_option_wins_over_column(
    spark: Any, spark_kafka_connector: list[str], kafka_cluster: Any, two_topics: tuple[str, str]
) -> None:
    """A ``topic`` option overrides a ``topic`` column, in both sinks."""
    elsewhere = _name("parity-w-column")
    kafka_cluster.create_topic(elsewhere, partitions=1)
    df = spark.createDataFrame(
        [(elsewhere, b"v%d" % i) for i in range(20)], "topic string, value binary"
    )
    for fmt, topic in zip(FORMATS, two_topics, strict=True):
        _write(df, fmt, kafka_cluster.bootstrap, topic=topic)
    for topic in two_topics:
        assert sorted(r[1] for r in _written(spark, kafka_cluster.bootstrap, topic)) == sorted(
            b"v%d" % i for i in range(20)
        )
    assert _written(spark, kafka_cluster.bootstrap, elsewhere) == []


def test_extra_columns(
    spark: Any, spark_kafka_connector: list[str], kafka_cluster: Any, two_topics: tuple[str, str]
) -> None:
    """Both sinks ignore columns they do not write; pykaf takes ``timestamp`` as CreateTime."""
    stamp = "2024-05-06 07:08:09.123"
    df = spark.sql(
        f"SELECT CAST(id AS STRING) AS value, 'x' AS note, TIMESTAMP '{stamp}' AS timestamp "
        "FROM range(10)"
    )
    kafka_topic, pykaf_topic = two_topics
    _write(df, "kafka", kafka_cluster.bootstrap, topic=kafka_topic)
    written = _written(spark, kafka_cluster.bootstrap, kafka_topic)
    assert sorted(r[1] for r in written) == sorted(b"%d" % i for i in range(10))
    assert all(r[5].year != 2024 for r in written)  # the timestamp column is not used
    _write(df, "pykaf", kafka_cluster.bootstrap, topic=pykaf_topic)
    written = _written(spark, kafka_cluster.bootstrap, pykaf_topic)
    assert sorted(r[1] for r in written) == sorted(b"%d" % i for i in range(10))
    assert {r[5].year for r in written} == {2024}  # CreateTime from the column
