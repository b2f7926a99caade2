"""``df.write.format("pykaf")``: the batch writer of the pykaf data source."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread

pytestmark = pytest.mark.spark


def _read(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    out: list[Any] = []
    with pykaf.sync.Consumer(bootstrap) as consumer:
        consumer.assign([(topic, p, pykaf.OLDEST) for p in range(partitions)])
        while len(out) < count:
            batch = consumer.consume(max_records=10_000, timeout=10)
            assert batch, f"read {len(out)} of {count}"
            out += batch
    return out


def test_write_then_read_back_equal(spark: Any, cluster: FakeClusterThread, new_topic: Any) -> None:
    topic = new_topic(2)
    rows = [(f"k{i}", f"value {i}") for i in range(5000)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)
    (
        df.write.format("pykaf")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", "5")
        .mode("append")
        .save()
    )
    got = _read(cluster.bootstrap, topic, 2, len(rows))
    assert Counter((r.key, r.value) for r in got) == Counter(
        (k.encode(), v.encode()) for k, v in rows
    )


def test_topic_and_partition_columns_route_rows(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    a, b = new_topic(3), new_topic(3)
    rows = [(a if i % 2 else b, i % 3, bytearray(b"v%d" % i)) for i in range(300)]
    df = spark.createDataFrame(rows, "topic string, partition int, value binary")
    df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).mode(
        "append"
    ).save()
    for topic in (a, b):
        got = _read(cluster.bootstrap, topic, 3, 150)
        assert len(got) == 150
        for r in got:
            i = int(r.value[1:])
            assert (a if i % 2 else b) == topic and r.partition == i % 3


def test_bad_options_and_rows_are_refused(spark: Any, cluster: FakeClusterThread) -> None:
    df = spark.createDataFrame([("x",)], "value string")
    writer = df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap)
    with pytest.raises(Exception, match="only be appended"):
        writer.option("topic", "t").mode("overwrite").save()
    with pytest.raises(Exception, match=r"unsupported option\(s\) kafka.max.poll.records"):
        writer.option("topic", "t").option("kafka.max.poll.records", "7").mode("append").save()
    with pytest.raises(Exception, match="no 'topic' option and no 'topic' column"):
        df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).mode(
            "append"
        ).save()
    no_value = spark.createDataFrame([("x",)], "payload string")
    with pytest.raises(Exception, match="no 'value' column"):
        no_value.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
            "topic", "t"
        ).mode("append").save()


def test_save_modes_are_those_of_sparks_kafka_sink(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    """save() without a mode (ErrorIfExists) and errorifexists append; overwrite and ignore
    are refused on the driver, as Spark's Kafka sink refuses them (issue 17)."""
    import pykaf.spark  # noqa: F401 (what lets the default mode through PySpark)

    topic = new_topic(1)
    df = spark.createDataFrame([("a",), ("b",)], "value string")
    writer = df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap)
    writer.option("topic", topic).save()
    df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
        "topic", topic
    ).mode("errorifexists").save()
    df.write.option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", topic).save(
        format="pykaf", mode="error"
    )
    assert sorted(r.value for r in _read(cluster.bootstrap, topic, 1, 6)) == [b"a"] * 3 + [b"b"] * 3
    for mode in ("ignore", "overwrite"):
        with pytest.raises(
            errors.ConfigError, match=f"save mode '{mode}' is not allowed for Kafka"
        ):
            df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
                "topic", topic
            ).mode(mode).save()
    with pytest.raises(errors.ConfigError, match="save mode 'ignore'"):
        df.write.mode("ignore").save(format="pykaf", topic=topic)


def test_producer_config_from_kafka_options() -> None:
    pytest.importorskip("pyspark")
    from pykaf.spark._options import producer_config

    assert producer_config(
        {"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "20", "kafka.acks": "1", "x": "y"}
    ) == {"bootstrap_servers": "h:1", "linger": 0.02, "acks": 1, "idempotence": False}
    with pytest.raises(errors.ConfigError, match="required"):
        producer_config({"kafka.acks": "all"})
    with pytest.raises(errors.ConfigError, match="not valid"):
        producer_config({"kafka.bootstrap.servers": "h:1", "kafka.batch.size": "big"})


def test_java_producer_settings_keep_their_meaning() -> None:
    """kafka.* settings as Kafka's Java producer means them (issue 17)."""
    pytest.importorskip("pyspark")
    from pykaf.spark._options import producer_config

    base = {"kafka.bootstrap.servers": "h:1"}
    # batch.size is a per-partition target, not a cap on a record: pykaf's flush_bytes
    config = producer_config({**base, "kafka.batch.size": "16384"})
    assert config["flush_bytes"] == 16384 and "batch_bytes" not in config
    assert producer_config({**base, "kafka.batch.size": "0"})["batch_records"] == 1
    big = producer_config({**base, "kafka.max.request.size": "10485760"})
    assert big["max_message_bytes"] == big["batch_bytes"] == 10485760
    # acks other than all turn idempotence off, unless it is asked for (then refused)
    for acks, code in (("1", 1), ("0", 0)):
        assert producer_config({**base, "kafka.acks": acks}) == {
            **base_config(),
            "acks": code,
            "idempotence": False,
        }
    assert producer_config({**base, "kafka.acks": "-1"})["acks"] == "all"
    with pytest.raises(errors.ConfigError, match=r"enable\.idempotence=true needs kafka\.acks=all"):
        producer_config({**base, "kafka.acks": "1", "kafka.enable.idempotence": "true"})
    assert producer_config({**base, "kafka.max.in.flight.requests.per.connection": "10"}) == {
        **base_config(),
        "max_in_flight": 10,
        "idempotence": False,
    }
    # serializers: refused, as Spark's sink refuses them
    for name in ("kafka.key.serializer", "kafka.value.serializer"):
        with pytest.raises(errors.ConfigError, match=f"option {name} is not supported"):
            producer_config({**base, name: "org.apache.kafka.common.serialization.X"})
    assert producer_config({**base, "kafka.send.buffer.bytes": "131072"}) == base_config()


def base_config() -> dict[str, str]:
    """What producer_config gives for kafka.bootstrap.servers alone."""
    return {"bootstrap_servers": "h:1"}


def test_java_producer_settings_write(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    """kafka.batch.size=16384 with records larger than it, and kafka.acks=1 (issue 17)."""
    topic = new_topic(1)
    rows = [(b"%d" % i + b"x" * 40_000,) for i in range(5)]
    spark.createDataFrame(rows, "value binary").write.format("pykaf").option(
        "kafka.bootstrap.servers", cluster.bootstrap
    ).option("topic", topic).option("kafka.batch.size", "16384").option("kafka.acks", "1").mode(
        "append"
    ).save()
    assert sorted(r.value for r in _read(cluster.bootstrap, topic, 1, 5)) == sorted(
        v for (v,) in rows
    )


def test_topic_option_overrides_column_and_null_partitions_fall_back(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    """A null partition lets the partitioner choose; the topic option overrides the column.

    (Spark's Kafka sink does the same: the option wins over a ``topic`` column.)
    """
    default, named = new_topic(2), new_topic(2)
    rows = [
        (None if i % 3 == 0 else named, None if i % 2 == 0 else 1, b"v%d" % i) for i in range(60)
    ]
    df = spark.createDataFrame(rows, "topic string, partition int, value binary")
    df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
        "topic", default
    ).mode("append").save()
    got = _read(cluster.bootstrap, default, 2, len(rows))
    assert sorted(r.value for r in got) == sorted(v for _, _, v in rows)
    for r in got:
        if int(r.value[1:]) % 2:
            assert r.partition == 1
    with pykaf.sync.Admin(cluster.bootstrap) as admin:  # nothing went to the column's topic
        ends = admin.list_offsets({(named, 0): pykaf.NEWEST, (named, 1): pykaf.NEWEST})
    assert set(ends.values()) == {0}
    # without the option, a null topic cell is refused
    with pytest.raises(Exception, match="null topic"):
        df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).mode(
            "append"
        ).save()


def test_a_failed_record_fails_the_write_job(spark: Any) -> None:
    """Each task waits for its acknowledgements: a record the broker refuses fails the job."""
    df = spark.createDataFrame([(b"v%d" % i,) for i in range(50)], "value binary")
    with FakeClusterThread(1, auto_create_topics=False) as strict:
        writer = df.write.format("pykaf").option("kafka.bootstrap.servers", strict.bootstrap)
        with pytest.raises(Exception, match=r"UnknownTopicOrPartition|does not exist"):
            writer.option("topic", "no-such-topic").option(
                "kafka.delivery.timeout.ms", "3000"
            ).mode("append").save()
        strict.create_topic("refusing", 1)
        strict.push_request_errors(0, *[87] * 50)  # Produce: INVALID_RECORD, not retriable
        with pytest.raises(Exception, match=r"DeliveryError|InvalidRecord"):
            writer.option("topic", "refusing").mode("append").save()


def test_timestamp_column_is_written(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    import datetime

    topic = new_topic(1)
    when = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=datetime.timezone.utc)
    rows = [(b"v%d" % i, when + datetime.timedelta(seconds=i)) for i in range(10)]
    spark.createDataFrame(rows, "value binary, timestamp timestamp").write.format("pykaf").option(
        "kafka.bootstrap.servers", cluster.bootstrap
    ).option("topic", topic).mode("append").save()
    got = _read(cluster.bootstrap, topic, 1, 10)
    assert sorted((r.value, r.timestamp) for r in got) == [
        (v, int(t.timestamp() * 1000)) for v, t in rows
    ]


def test_other_columns_are_ignored_and_wrong_types_refused_when_planned(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    """As Spark's Kafka sink: columns it does not write are ignored; a column of a
    type it cannot write is refused when the write is planned, named with the
    types it may have, before any task runs (issue 17)."""
    topic = new_topic(1)
    df = spark.createDataFrame([("x", 1, "k")], "value string, extra int, key string")
    df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
        "topic", topic
    ).mode("append").save()
    [record] = _read(cluster.bootstrap, topic, 1, 1)
    assert (record.key, record.value) == (b"k", b"x")
    headers = "array<struct<key:string,value:binary>>"
    cases = [
        ("value int", "column 'value' must be string or binary, not int"),
        ("value string, key double", "column 'key' must be string or binary, not double"),
        ("value string, topic binary", "column 'topic' must be string, not binary"),
        ("value string, partition bigint", "column 'partition' must be int, not bigint"),
        (
            "value string, headers array<struct<key:string,value:string>>",
            f"column 'headers' must be {headers}, not array<struct<key:string,value:string>>",
        ),
        ("value string, timestamp long", "column 'timestamp' must be timestamp or "),
    ]
    for ddl, message in cases:
        bad = spark.createDataFrame([], ddl)
        with pytest.raises(Exception, match=re.escape(message)) as caught:
            bad.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
                "topic", topic
            ).mode("append").save()
        assert "TypeError" not in str(caught.value)  # not a task's failure
    with pytest.raises(Exception, match="no 'topic' option and no 'topic' column"):
        spark.createDataFrame([], "value string").write.format("pykaf").option(
            "kafka.bootstrap.servers", cluster.bootstrap
        ).mode("append").save()


def test_the_format_is_registered_automatically_and_by_hand(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    import pkgutil

    import pyspark_pykaf
    from pykaf.spark import register
    from pykaf.spark._source import PykafDataSource

    # PySpark registers every pyspark_* module's DefaultSource it finds on the path
    assert "pyspark_pykaf" in {m.name for m in pkgutil.iter_modules()}
    assert pyspark_pykaf.DefaultSource is PykafDataSource
    assert PykafDataSource.name() == "pykaf"
    register(spark)  # by hand as well: registering again is harmless
    reader = spark.read.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap)
    assert reader.option("subscribe", new_topic(1)).load().count() == 0


# PySpark's own search (pyspark/sql/worker/lookup_data_sources.py), run from
# elsewhere than the checkout, as a Spark worker may be: whatever lists the
# installed pyspark_* modules, not the current directory, must find pykaf's.
_LOOKUP = """
from importlib import import_module
from pkgutil import iter_modules
from pyspark.sql.datasource import DataSource
found = {}
for info in iter_modules():
    if info.name.startswith("pyspark_"):
        mod = import_module(info.name)
        if hasattr(mod, "DefaultSource") and issubclass(mod.DefaultSource, DataSource):
            found[mod.DefaultSource.name()] = mod.__name__
print(found.get("pykaf"))
"""


def test_pyspark_finds_the_data_source_from_any_directory(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    pytest.importorskip("pyspark.sql.datasource")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", _LOOKUP],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "pyspark_pykaf"
