"""``spark.read.format("pykaf")``: batch reads, on Tansu and on the fake cluster."""

from __future__ import annotations

import datetime
import json
import struct
import zlib
from collections import Counter
from typing import Any

import pytest

import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread

pytestmark = pytest.mark.spark


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("pykaf").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    with pykaf.sync.Producer(bootstrap, linger=0.005) as producer:
        producer.send_many(topic, values, partition=partition)


def test_write_then_read_back_equal_with_headers(spark: Any, kafka: Any) -> None:
    topic = kafka.topic(3)
    rows = [
        (f"k{i}", b"value %d" % i, [("h", b"%d" % i), ("n", None)] if i % 2 else [])
        for i in range(3000)
    ]
    df = spark.createDataFrame(
        rows, "key string, value binary, headers array<struct<key: string, value: binary>>"
    ).repartition(3)
    df.write.format("pykaf").option("kafka.bootstrap.servers", kafka.bootstrap).option(
        "topic", topic
    ).mode("append").save()

    got = _reader(spark, kafka.bootstrap, subscribe=topic, includeHeaders="true").load()
    assert got.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    out = got.collect()
    assert Counter(
        (r.key, r.value, None if r.headers is None else tuple((h.key, h.value) for h in r.headers))
        for r in out
    ) == Counter((k.encode(), v, tuple(h) if h else None) for k, v, h in rows)  # none: null
    # offsets are each partition's 0..n-1; topic, partition and timestamps are filled in
    by_partition: dict[int, list[int]] = {}
    for r in out:
        by_partition.setdefault(r.partition, []).append(r.offset)
        assert r.topic == topic and r.timestampType == 0
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    now = datetime.datetime.now()
    assert all(abs((now - r.timestamp).total_seconds()) < 600 for r in out)
    # without includeHeaders there is no headers column
    assert "headers" not in _reader(spark, kafka.bootstrap, subscribe=topic).load().columns


def test_offset_ranges_and_splits(spark: Any, kafka: Any) -> None:
    topic = kafka.topic(2)
    for partition in (0, 1):
        for chunk in range(4):  # several batches per partition
            _produce(
                kafka.bootstrap,
                topic,
                partition,
                [b"%d-%d" % (partition, chunk * 25 + i) for i in range(25)],
            )
    starting = json.dumps({topic: {"0": 10, "1": -2}})
    ending = json.dumps({topic: {"0": 30, "1": -1}})
    df = _reader(
        spark, kafka.bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending
    ).load()
    rows = df.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(10, 30)] + [
        (1, o) for o in range(100)
    ]
    assert all(r.value == b"%d-%d" % (r.partition, r.offset) for r in rows)

    split = _reader(spark, kafka.bootstrap, subscribe=topic, maxRecordsPerPartition="30").load()
    assert split.rdd.getNumPartitions() == 8  # ceil(100 / 30) per partition
    assert sorted(r.offset for r in split.collect()) == sorted(list(range(100)) * 2)
    many = _reader(spark, kafka.bootstrap, subscribe=topic, minPartitions="5").load()
    assert many.rdd.getNumPartitions() >= 5
    assert many.count() == 200

    assign = _reader(spark, kafka.bootstrap, assign=json.dumps({topic: [1]})).load()
    assert {r.partition for r in assign.collect()} == {1}
    pattern = _reader(spark, kafka.bootstrap, subscribePattern=topic[:-2] + ".*").load()
    assert pattern.count() == 200


@pytest.mark.parametrize("kafka", ["fake"], indirect=True)  # the options, not the broker
def test_bad_read_options_are_named(spark: Any, kafka: Any) -> None:
    topic = kafka.topic(1)
    _produce(kafka.bootstrap, topic, 0, [b"x"] * 5)
    cases = [
        ({}, "exactly one of the options subscribe, subscribePattern, assign"),
        ({"subscribe": topic, "assign": json.dumps({topic: [0]})}, "given: subscribe, assign"),
        ({"assign": "{not json"}, "not valid JSON"),
        ({"subscribe": topic, "startingOffsets": "latest"}, "cannot be 'latest'"),
        ({"subscribe": topic, "endingOffsets": json.dumps({topic: {"0": -2}})}, "has offset -2"),
        ({"subscribe": topic, "endingOffsets": json.dumps({topic: {"0": 99}})}, "past the"),
        ({"subscribe": topic, "startingOffsets": json.dumps({"other": {"0": 1}})}, "not read"),
        ({"subscribe": topic, "kafka.client.dns.lookup": "x"}, "unsupported option"),
        ({"subscribe": topic, "kafka.max.poll.records": "7"}, "there is no poll loop"),
        ({"subscribe": topic, "kafka.sasl.jaas.config": "x"}, "login module x is not supported"),
        (
            {"subscribe": topic, "kafka.isolation.level": "dirty"},
            r"kafka\.isolation\.level='dirty' is not valid",
        ),
        ({"subscribe": topic, "minPartitions": "0"}, "minPartitions must be an integer >= 1"),
        ({"subscribe": "no-such-topic-" + topic}, "UnknownTopicOrPartition|does not exist"),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            _reader(spark, kafka.bootstrap, **options).load().collect()


def test_read_committed_skips_aborted_and_markers_by_offset(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    """The fake (Tansu sends no aborted-transaction lists): committed records only under
    read_committed, and ranges ending on markers and aborted records end; everything
    by default (read_uncommitted, as Spark's Kafka source: issue 17)."""
    topic = new_topic(1)
    with pykaf.sync.Producer(cluster.bootstrap, transactional_id=f"spark-{topic}") as producer:
        for n, commit in enumerate([True, False, True, False]):
            producer.begin_transaction()
            producer.send_many(topic, [b"%d-%d" % (n, i) for i in range(10)], partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    committed_only = {"kafka.isolation.level": "read_committed"}
    committed = _reader(spark, cluster.bootstrap, subscribe=topic, **committed_only).load()
    values = [r.value for r in committed.orderBy("offset").collect()]
    assert values == [b"0-%d" % i for i in range(10)] + [b"2-%d" % i for i in range(10)]
    # four transactions of 10 records and a marker each: 44 offsets, split in 4
    split = _reader(
        spark, cluster.bootstrap, subscribe=topic, maxRecordsPerPartition="11", **committed_only
    ).load()
    assert split.rdd.getNumPartitions() == 4
    assert sorted(r.value for r in split.collect()) == sorted(values)
    everything = _reader(spark, cluster.bootstrap, subscribe=topic).load()  # the default
    assert everything.count() == 40


def test_an_open_transaction_holds_the_end_back(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    topic = new_topic(1)
    _produce(cluster.bootstrap, topic, 0, [b"before"] * 5)
    with pykaf.sync.Producer(cluster.bootstrap, transactional_id=f"open-{topic}") as producer:
        producer.begin_transaction()
        producer.send_many(topic, [b"open"] * 5, partition=0)
        _produce(cluster.bootstrap, topic, 0, [b"after"] * 5)
        # read_committed ends at the last stable offset: before the open transaction
        committed_only = {"kafka.isolation.level": "read_committed"}
        rows = _reader(spark, cluster.bootstrap, subscribe=topic, **committed_only).load()
        assert [r.value for r in rows.collect()] == [b"before"] * 5
        # read_uncommitted (the default) reads up to the high watermark
        rows = _reader(spark, cluster.bootstrap, subscribe=topic).load().orderBy("offset")
        everything = [b"before"] * 5 + [b"open"] * 5 + [b"after"] * 5
        assert [r.value for r in rows.collect()] == everything
        producer.commit_transaction()
    rows = _reader(spark, cluster.bootstrap, subscribe=topic).load().orderBy("offset").collect()
    assert [r.value for r in rows] == [b"before"] * 5 + [b"open"] * 5 + [b"after"] * 5


def test_deleted_offsets_fail_the_read_unless_allowed(
    spark: Any, cluster: FakeClusterThread, new_topic: Any
) -> None:
    ck_admin = pytest.importorskip("confluent_kafka.admin")
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(1)
    _produce(cluster.bootstrap, topic, 0, [b"%d" % i for i in range(50)])
    starting = json.dumps({topic: {"0": 0}})
    admin = ck_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.delete_records([ck.TopicPartition(topic, 0, 20)]).values():
        future.result(10)
    with pytest.raises(Exception, match=r"DataLossError|no longer in the log"):
        _reader(spark, cluster.bootstrap, subscribe=topic, startingOffsets=starting).load().count()
    rest = _reader(
        spark, cluster.bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="false"
    ).load()
    assert sorted(r.offset for r in rest.collect()) == list(range(20, 50))


def test_split_ranges_cover_every_offset_once() -> None:
    from pykaf.spark._read import OffsetRange, split_ranges

    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 5, 8), OffsetRange("b", 0, 3, 3)]
    for kwargs in ({}, {"max_records": 7}, {"min_partitions": 9}, {"max_records": 1}):
        pieces = split_ranges(ranges, **kwargs)  # type: ignore[arg-type]
        covered = Counter((p.topic, p.partition, o) for p in pieces for o in range(p.start, p.end))
        assert covered == Counter(
            (r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end)
        )
        assert all(p.size > 0 for p in pieces)
        if "max_records" in kwargs:
            assert all(p.size <= kwargs["max_records"] for p in pieces)
    assert len(split_ranges(ranges, min_partitions=9)) >= 9


def test_columns_become_the_sources_rows_up_to_the_range_end() -> None:
    # A task's Arrow batch straight from the decoded columns: CreateTime and
    # LogAppendTime batches, a magic 0 message (no timestamp type: read as 0,
    # as Spark's connector has it), headers or none (null, not an empty
    # list), and the range ending inside the piece.
    pa = pytest.importorskip("pyarrow")
    from pykaf import codec
    from pykaf.spark._read import arrow_schema, columns_to_batch

    t = 1_700_000_000_000
    create = codec.BatchBuilder(max_bytes=1 << 20)
    create.append(t, b"k0", b"v0", [("h", b"1"), ("n", None)])
    create.append(t + 1, None, None, [])
    logged = codec.BatchBuilder(max_bytes=1 << 20, timestamp_type=1)
    logged.append(t + 5, b"k2", b"v2", [])
    logged.append(t + 9, b"k3", b"", [("x", b"")])
    legacy = struct.pack(">bb", 0, 0) + struct.pack(">i", 2) + b"lk" + struct.pack(">i", 2) + b"lv"
    legacy = struct.pack(">I", zlib.crc32(legacy)) + legacy
    legacy = struct.pack(">qi", 4, len(legacy)) + legacy
    data = create.build(base_offset=0) + logged.build(base_offset=2) + legacy
    columns = codec.decode_columns(data, topic="t", partition=7)[0]
    records = [r for b in codec.decode_batches(data) for r in b.records]
    assert [r.timestamp_type for r in records] == [0, 0, 1, 1, -1]
    for end, with_headers in ((100, True), (4, True), (3, False), (1, True)):
        schema = arrow_schema(with_headers)
        batch = columns_to_batch(columns, "t", 7, end, schema)
        assert batch.schema == schema
        batch.validate(full=True)
        want = [r for r in records if r.offset < end]
        assert batch.column("key").to_pylist() == [r.key for r in want]
        assert batch.column("value").to_pylist() == [r.value for r in want]
        assert batch.column("topic").to_pylist() == ["t"] * len(want)
        assert batch.column("partition").to_pylist() == [7] * len(want)
        assert batch.column("offset").to_pylist() == [r.offset for r in want]
        assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
            r.timestamp * 1000 for r in want
        ]
        assert batch.column("timestampType").to_pylist() == [max(r.timestamp_type, 0) for r in want]
        if with_headers:
            assert batch.column("headers").to_pylist() == [
                [{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in want
            ]
    assert columns_to_batch(columns, "t", 7, 0, arrow_schema(True)) is None


def test_offset_options_parse_as_spark_does() -> None:
    pytest.importorskip("pyspark")
    from pykaf.spark._options import EARLIEST, LATEST, offset_spec, subscription

    assert offset_spec({}, "startingOffsets", EARLIEST, allowed={EARLIEST}) == EARLIEST
    spec = offset_spec({"o": '{"t":{"0":5,"1":-2}}'}, "o", EARLIEST, allowed={EARLIEST, LATEST})
    assert spec == {("t", 0): 5, ("t", 1): EARLIEST}
    with pytest.raises(errors.ConfigError, match="has offset -1"):
        offset_spec({"o": '{"t":{"0":-1}}'}, "o", EARLIEST, allowed={EARLIEST})
    with pytest.raises(errors.ConfigError, match="not a partition"):
        offset_spec({"o": '{"t":{"x":1}}'}, "o", EARLIEST, allowed={EARLIEST})
    assert subscription({"subscribe": "a, b,"}).topics == ("a", "b")
    assert subscription({"assign": '{"t":[1,0,1]}'}).assign == (("t", 0), ("t", 1))
    sub = subscription({"subscribePattern": "ev.*"})
    assert sub.matches("events") and not sub.matches("my-events")
    with pytest.raises(errors.ConfigError, match="subscribePattern"):
        subscription({"subscribePattern": "("})


def test_offsets_by_timestamp(spark: Any, kafka: Any) -> None:
    """startingTimestamp / ...OffsetsByTimestamp / endingTimestamp, as Spark's source takes
    them: ListOffsets by time, the precedence of the three ways, and a time past the end
    (issue 17)."""
    import time

    topic = kafka.topic(1)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside retention
    with pykaf.sync.Producer(kafka.bootstrap, linger=0.005) as producer:
        producer.send_many(
            topic,
            [b"%d" % i for i in range(100)],
            timestamps=[base + 10 * i for i in range(100)],
            partition=0,
        )

    def offsets(**options: str) -> list[int]:
        rows = _reader(spark, kafka.bootstrap, subscribe=topic, **options).load().collect()
        assert {r.partition for r in rows} <= {0}
        return sorted(r.offset for r in rows)

    middle = str(base + 500)  # record 50's time
    assert offsets(startingTimestamp=middle) == list(range(50, 100))
    assert offsets(startingTimestamp=middle, endingTimestamp=str(base + 700)) == list(range(50, 70))
    # the by-partition JSON (partitions left out take the default: see test_stream.py)
    by_partition = json.dumps({topic: {"0": base + 805}})  # between records 80 and 81
    assert offsets(startingOffsetsByTimestamp=by_partition) == list(range(81, 100))
    assert offsets(endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 100}})) == list(
        range(10)
    )
    # precedence: ...Timestamp over ...OffsetsByTimestamp over ...Offsets
    at_90 = json.dumps({topic: {"0": 90}})
    assert offsets(
        startingTimestamp=middle, startingOffsetsByTimestamp=by_partition, startingOffsets=at_90
    ) == list(range(50, 100))
    assert offsets(startingOffsetsByTimestamp=by_partition, startingOffsets=at_90) == list(
        range(81, 100)
    )
    assert offsets(
        endingTimestamp=str(base + 200),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 100}}),
        endingOffsets=json.dumps({topic: {"0": 5}}),
    ) == list(range(20))
    # past the end: an ending time reads to the latest offset; a starting time fails,
    # unless startingOffsetsByTimestampStrategy is latest
    future = str(base + 7_200_000)
    assert offsets(endingTimestamp=future) == list(range(100))
    with pytest.raises(Exception, match=rf"{topic}/0 has no record at or after {future} ms"):
        offsets(startingTimestamp=future)
    assert offsets(startingTimestamp=future, startingOffsetsByTimestampStrategy="latest") == []
    with pytest.raises(Exception, match="is not a timestamp"):
        offsets(startingTimestamp="yesterday")
    with pytest.raises(Exception, match="must be error or latest"):
        offsets(startingTimestamp=middle, startingOffsetsByTimestampStrategy="earliest")


def test_options_unknown_refused_and_the_connectors_taken() -> None:
    """Every option is Spark's Kafka connector's or a kafka.* setting; the connector's
    options pykaf does not need are checked and taken (issue 17)."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import CaseInsensitiveDict

    from pykaf.spark._options import read_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    with pytest.raises(errors.ConfigError, match=r"unknown option\(s\) startingOfsets: neither"):
        read_options({**base, "startingOfsets": "earliest"}, streaming=False)
    connector = {
        "kafkaConsumer.pollTimeoutMs": "3000",
        "fetchOffset.numRetries": "5",
        "fetchOffset.retryIntervalMs": "100",
        "groupIdPrefix": "spark-kafka-source",
        "maxOffsetsPerTrigger": "10",
        "minOffsetsPerTrigger": "5",
        "maxTriggerDelay": "30s",
        "failOnDataLoss": "false",
        "includeHeaders": "true",
    }
    # as PySpark hands them over: lower-cased, looked up without case
    lowered = CaseInsensitiveDict({**base, **{k.lower(): v for k, v in connector.items()}})
    for options in ({**base, **connector}, lowered):
        opts = read_options(options, streaming=True)
        assert (opts.poll_timeout, opts.max_trigger_delay) == (3.0, 30.0)
        assert (opts.max_per_trigger, opts.min_per_trigger) == (10, 5)
        assert opts.include_headers and not opts.fail_on_data_loss
    assert read_options(base, streaming=True).max_trigger_delay == 15 * 60  # Spark's 15m
    for name, value, message in [
        ("fetchOffset.numRetries", "x", "must be an integer >= 0"),
        ("maxTriggerDelay", "soon", "must be a duration"),
        ("kafkaConsumer.pollTimeoutMs", "0", "must be an integer >= 1"),
    ]:
        with pytest.raises(errors.ConfigError, match=f"option {name} {message}"):
            read_options({**base, name: value}, streaming=False)
    with pytest.raises(errors.ConfigError, match="not valid in streaming queries"):
        read_options({**base, "endingOffsets": "latest"}, streaming=True)


def test_unknown_options_refused_when_loaded_or_written(spark: Any, cluster: Any) -> None:
    """At load() for batch and streaming reads, when planned for writes (issue 17)."""
    for reader in (spark.read, spark.readStream):
        load = (
            reader.format("pykaf")
            .option("kafka.bootstrap.servers", cluster.bootstrap)
            .option("subscribe", "t")
            .option("startingOfsets", "earliest")
        )
        with pytest.raises(Exception, match=r"unknown option\(s\) startingofsets") as caught:
            load.load()
        assert "UnboundLocalError" not in str(caught.value)
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match=r"unknown option\(s\) tpoic"):
        df.write.format("pykaf").option("kafka.bootstrap.servers", cluster.bootstrap).option(
            "tpoic", "t"
        ).mode("append").save()


def test_java_client_settings_keep_their_meaning() -> None:
    """sasl.jaas.config, Java's SSL stores, group.id and the settings Spark refuses (issue 17)."""
    pytest.importorskip("pyspark")
    from pykaf.spark._options import consumer_config

    base = {"kafka.bootstrap.servers": "h:1"}
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3\\"cret";'
    )
    config = consumer_config({**base, "kafka.sasl.jaas.config": plain})
    assert (config["sasl_username"], config["sasl_password"]) == ("alice", 's3"cret')
    assert config["sasl_mechanism"] == "PLAIN"
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '  username="bob"\n  password="pw";'
    )
    config = consumer_config(
        {**base, "kafka.sasl.jaas.config": scram, "kafka.sasl.mechanism": "SCRAM-SHA-512"}
    )
    assert (config["sasl_username"], config["sasl_mechanism"]) == ("bob", "SCRAM-SHA-512")
    with pytest.raises(errors.ConfigError, match=r"ScramLoginModule needs kafka\.sasl\.mechanism"):
        consumer_config({**base, "kafka.sasl.jaas.config": scram})
    kerberos = "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"
    with pytest.raises(errors.ConfigError, match="Krb5LoginModule is not supported"):
        consumer_config({**base, "kafka.sasl.jaas.config": kerberos})
    # a JKS truststore (Java's default type) is refused naming the PEM option; PEM is read
    with pytest.raises(errors.ConfigError, match=r"JKS truststore .* kafka\.ssl\.ca\.location"):
        consumer_config({**base, "kafka.ssl.truststore.location": "/etc/kafka/trust.jks"})
    pem = {"kafka.ssl.truststore.location": "/ca.pem", "kafka.ssl.truststore.type": "PEM"}
    assert consumer_config({**base, **pem})["ssl_cafile"] == "/ca.pem"
    no_check = {"kafka.ssl.endpoint.identification.algorithm": ""}
    assert consumer_config({**base, **no_check})["ssl_check_hostname"] is False
    # client.rack: the tasks fetch from the replica in their rack (KIP-392)
    assert consumer_config({**base, "kafka.client.rack": "use1-az2"})["client_rack"] == "use1-az2"
    # a group id, session timeout and socket buffers: taken, not needed
    quiet = {
        "kafka.group.id": "g",
        "kafka.session.timeout.ms": "45000",
        "kafka.receive.buffer.bytes": "65536",
        "kafka.max.in.flight.requests.per.connection": "2",
    }
    config = consumer_config({**base, **quiet})
    assert config["max_in_flight_per_connection"] == 2 and "group.id" not in str(config)
    for name, hint in [
        ("kafka.auto.offset.reset", "set startingOffsets"),
        ("kafka.key.deserializer", "keys are read as bytes"),
        ("kafka.enable.auto.commit", "no offsets are committed"),
    ]:
        with pytest.raises(errors.ConfigError, match=f"option {name} is not supported: {hint}"):
            consumer_config({**base, name: "x"})
