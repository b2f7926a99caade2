"""What pykaf's producer writes, read back by confluent-kafka, on Kafka, Tansu and the mock.

Every codec, keys and null keys, null values, headers (a None header value
too), explicit timestamps and partitions are compared byte for byte with
what librdkafka's consumer reads, at the offsets pykaf's RecordMetadata
reported; keyed records land where confluent-kafka's own producer puts the
same keys with the matching partitioner.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import pykaf

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker
unique = bc.unique

pytestmark = pytest.mark.broker

# "codec:level": lz4 at level 9 (HC) is written by another library than level 0.
CODECS = ["none", "gzip", "snappy", "lz4", "lz4:9", "zstd"]
# librdkafka's mock answers every Produce with log_append_time_ms=1234 (Kafka
# sends -1 for CreateTime topics), so pykaf reports 1234 as the broker's
# LogAppendTime in RecordMetadata.timestamp there. The records themselves keep
# their CreateTime, which confluent-kafka reads back.
MOCK_LOG_APPEND_TIME = 1234


@dataclass(frozen=True)
class Read:
    """One record as confluent-kafka's consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp_type: int
    timestamp: int


def read_records(
    conf: dict[str, Any], topic: str, partitions: int, count: int, timeout: float = 20.0
) -> list[Read]:
    """``count`` records of ``topic`` from offset 0, sorted by partition and offset."""
    consumer = bc.ck.Consumer(
        {
            **bc.QUIET,
            **conf,
            "group.id": "pykaf-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    out: list[Read] = []
    try:
        consumer.assign([bc.ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    raise AssertionError(f"consume error: {msg.error()}")
                ts_type, ts = msg.timestamp()
                out.append(
                    Read(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        msg.headers(),
                        ts_type,
                        ts,
                    )
                )
        # anything beyond count would be a duplicate: give it a moment to show up
        out.extend(
            Read(m.partition(), m.offset(), m.key(), m.value(), m.headers(), *m.timestamp())
            for m in consumer.consume(1000, 0.3)
            if not m.error()
        )
    finally:
        consumer.close()
    assert len(out) == count, f"read {len(out)} of {count} records of {topic}"
    return sorted(out, key=lambda r: (r.partition, r.offset))


async def read_back(broker: Broker, topic: str, partitions: int, count: int) -> list[Read]:
    return await trio.to_thread.run_sync(read_records, broker.conf, topic, partitions, count)


# ------------------------------------------------------------------ records, byte for byte


def sample_records(rng: random.Random) -> list[dict[str, Any]]:
    """Records with every optional part present or absent, for 3 partitions."""
    base_ts = 1_600_000_000_000
    records: list[dict[str, Any]] = []
    for i in range(60):
        key: bytes | None = None if i % 4 == 0 else b"key-%d" % i
        value: bytes | None = None if i % 7 == 3 else rng.randbytes(rng.randrange(0, 300))
        if i % 10 == 5:
            value = b"compressible " * 400  # large enough that codecs matter
        headers: list[tuple[str, bytes | None]] | None = None
        if i % 3 == 1:
            headers = [("h1", b"v%d" % i), ("none", None), ("h1", b""), ("\u00fcnicode", b"\x00")]
        rec: dict[str, Any] = {"key": key, "value": value, "headers": headers}
        if i % 2 == 0:
            rec["timestamp"] = base_ts + i * 1000
        if i % 5 != 0:
            rec["partition"] = i % 3
        records.append(rec)
    return records


@pytest.mark.parametrize("compression", CODECS)
async def test_confluent_reads_every_record_byte_for_byte(broker: Broker, compression: str) -> None:
    compression, _, level = compression.partition(":")
    topic = unique(f"codec-{compression}{level}")
    broker.create(topic, 3)
    records = sample_records(random.Random(compression))
    results: list[tuple[BaseException | None, pykaf.RecordMetadata] | None] = [None] * len(records)

    def recorder(i: int) -> Callable[[BaseException | None, pykaf.RecordMetadata], None]:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            results[i] = (error, md)

        return on_delivery

    sent_at = time.time_ns() // 1_000_000
    async with pykaf.open_producer(
        broker.bootstrap,
        compression=compression,
        compression_level=int(level) if level else None,
        linger=0.05,
    ) as producer:
        # the first ones one by one (send), the rest buffered together (send_nowait)
        for i, rec in enumerate(records[:5]):
            results[i] = (None, await producer.send(topic, **rec))
        for i, rec in enumerate(records[5:], start=5):
            producer.send_nowait(topic, **rec, on_delivery=recorder(i))
        await producer.flush()
        stats = producer.statistics()
    done_at = time.time_ns() // 1_000_000
    assert stats.records_acked == len(records) and stats.records_failed == 0

    read = await read_back(broker, topic, 3, len(records))
    by_place = {(r.partition, r.offset): r for r in read}
    assert len(by_place) == len(records)
    for i, rec in enumerate(records):
        result = results[i]
        assert result is not None, f"record {i} was never reported"
        error, md = result
        assert error is None
        assert md.topic == topic
        if "partition" in rec:
            assert md.partition == rec["partition"]
        got = by_place.pop((md.partition, md.offset))
        assert got.key == rec["key"]
        assert got.value == rec["value"]
        assert got.headers == rec["headers"]
        assert got.timestamp_type == bc.ck.TIMESTAMP_CREATE_TIME
        if "timestamp" in rec:
            assert got.timestamp == rec["timestamp"]
        else:
            assert sent_at <= got.timestamp <= done_at
        if broker.name == "mock":
            assert md.timestamp in (got.timestamp, MOCK_LOG_APPEND_TIME)
        else:
            assert md.timestamp == got.timestamp
    assert not by_place


async def test_offsets_are_consecutive_per_partition_and_match_the_log(broker: Broker) -> None:
    topic = unique("offsets")
    broker.create(topic, 2)
    mds: list[pykaf.RecordMetadata] = []
    async with pykaf.open_producer(broker.bootstrap, linger=0.01) as producer:
        delivery = await producer.send_batch(topic, [b"a%d" % i for i in range(300)], partition=1)
        assert await delivery.wait() == 300
        for i in range(20):
            mds.append(await producer.send(topic, b"b%d" % i, partition=1))
        for i in range(20):
            mds.append(await producer.send(topic, b"c%d" % i, partition=0))
    assert [m.offset for m in mds[:20]] == list(range(300, 320))
    assert [m.offset for m in mds[20:]] == list(range(20))
    read = await read_back(broker, topic, 2, 340)
    assert [(r.partition, r.offset, r.value) for r in read] == (
        [(0, i, b"c%d" % i) for i in range(20)]
        + [(1, i, b"a%d" % i) for i in range(300)]
        + [(1, 300 + i, b"b%d" % i) for i in range(20)]
    )


# ------------------------------------------------------------------ partitioners

PARTITIONERS = [
    # (confluent-kafka's partitioner, pykaf's)
    ("murmur2_random", "murmur2"),
    ("fnv1a_random", "fnv1a"),
    ("consistent_random", "consistent_random"),
]
PARTITIONS = 7


def partition_keys() -> list[bytes]:
    rng = random.Random(42)
    keys = [b"user-%d" % i for i in range(1500)]
    keys += [rng.randbytes(rng.randrange(1, 40)) for _ in range(500)]  # every tail length
    return list(dict.fromkeys(keys))  # unique, in order


def confluent_produce_keys(
    conf: dict[str, Any], topic: str, keys: list[bytes], partitioner: str
) -> None:
    producer = bc.ck.Producer({**bc.QUIET, **conf, "partitioner": partitioner, "linger.ms": 5})
    failed: list[Any] = []
    for key in keys:
        producer.produce(
            topic, key=key, value=b"", on_delivery=lambda e, m: e is not None and failed.append(e)
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    assert not failed, failed[:3]


@pytest.mark.parametrize(("theirs", "ours"), PARTITIONERS, ids=[p[0] for p in PARTITIONERS])
async def test_keys_land_where_confluent_kafka_puts_them(
    broker: Broker, theirs: str, ours: str
) -> None:
    keys = partition_keys()
    their_topic, our_topic = unique(f"ck-{theirs}"), unique(f"pykaf-{ours}")
    broker.create(their_topic, PARTITIONS)
    broker.create(our_topic, PARTITIONS)
    await trio.to_thread.run_sync(confluent_produce_keys, broker.conf, their_topic, keys, theirs)
    reported: dict[bytes, int] = {}

    def note(key: bytes) -> Callable[[BaseException | None, pykaf.RecordMetadata], None]:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            assert error is None
            reported[key] = md.partition

        return on_delivery

    async with pykaf.open_producer(broker.bootstrap, partitioner=ours) as producer:
        for key in keys:
            producer.send_nowait(our_topic, b"", key=key, on_delivery=note(key))

    theirs_read = await read_back(broker, their_topic, PARTITIONS, len(keys))
    ours_read = await read_back(broker, our_topic, PARTITIONS, len(keys))
    their_map = {r.key: r.partition for r in theirs_read}
    our_map = {r.key: r.partition for r in ours_read}
    assert len(their_map) == len(keys) and len(set(their_map.values())) == PARTITIONS
    mismatches = [k for k in keys if our_map[k] != their_map[k]]
    assert not mismatches, f"{len(mismatches)} keys differ, e.g. {mismatches[:3]}"
    assert reported == our_map


# ------------------------------------------------------------------ LogAppendTime (Kafka only)


async def test_log_append_time_topics_report_the_brokers_time(kafka_cluster: Any) -> None:
    # Kafka only: Tansu and the mock have no per-topic message.timestamp.type.
    topic = unique("append-time")
    configs = {"message.timestamp.type": "LogAppendTime"}
    await trio.to_thread.run_sync(lambda: kafka_cluster.create_topic(topic, 1, 1, configs))
    old = 1_500_000_000_000  # a create time the broker must replace
    async with pykaf.open_producer(kafka_cluster.bootstrap, linger=0.01) as producer:
        before = int(time.time() * 1000)
        first = await producer.send(topic, b"one", timestamp=old)
        delivery = await producer.send_batch(topic, [b"two", b"three"], timestamps=[old, old])
        assert await delivery.wait() == 2
        after = int(time.time() * 1000)
    read = await trio.to_thread.run_sync(
        read_records, {"bootstrap.servers": kafka_cluster.bootstrap}, topic, 1, 3
    )
    assert [r.value for r in read] == [b"one", b"two", b"three"]
    assert all(r.timestamp_type == bc.ck.TIMESTAMP_LOG_APPEND_TIME for r in read)
    assert all(before <= r.timestamp <= after for r in read)
    assert first.timestamp == read[0].timestamp  # the append time, not the one sent
