"""Records for a topic whose partitions are not known yet: staged, parked, replayed.

``send_nowait`` in a loop to a topic the producer has not used stages the
records in compiled runs like any plain record (issue 33 §1); a drain parks
the runs on the topic, and once its partitions are known they are appended in
bulk, the partitioner applied then. These tests pin what a caller sees: the
records are staged (no Python path per record), one order per partition
whatever mix of calls made it, keyed records where the partitioner says,
explicit partitions, timestamps and headers kept, every record's report told
of a failed lookup, ``flush()`` waiting for them, the buffer's limits, purges,
and idempotence. The fake cluster runs them fast; order, keys and
authorization also run on Apache Kafka.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._producer.staging import CHUNK, SMALL
from pykaf.codec import murmur2
from pykaf.testing import FakeCluster, KafkaCluster, open_fake_cluster
from pykaf.testing.fixtures import KAFKA_USERS


@dataclass
class Target:
    """A cluster a test produces to: the fake one, or the session's Apache Kafka."""

    bootstrap: str
    fake: FakeCluster | None = None
    kafka: KafkaCluster | None = None

    async def topic(self, name: str, partitions: int) -> str:
        """A new topic (unique on Kafka, which keeps every test's topics)."""
        if self.fake is not None:
            self.fake.create_topic(name, partitions)
            return name
        kafka = self.kafka
        assert kafka is not None
        name = f"{name}-{trio.current_time():.0f}-{id(self):x}"
        await trio.to_thread.run_sync(lambda: kafka.create_topic(name, partitions))
        return name


@pytest.fixture(params=["fake", pytest.param("kafka", marks=pytest.mark.broker)])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    """A fresh fake cluster of three brokers, or the session's one-node Kafka."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_cluster")
        yield Target(kafka.bootstrap, kafka=kafka)
        return
    async with open_fake_cluster(3) as fake:
        yield Target(fake.bootstrap, fake=fake)


async def _read(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    """Every record of each partition, oldest first."""
    out: dict[int, list[Any]] = {}
    async with pykaf.open_consumer(bootstrap) as consumer:
        for p in range(partitions):
            end = await consumer.client.get_offset(topic, p, pykaf.NEWEST)
            out[p] = []
            if end == 0:
                continue
            pc = await consumer.consume_partition(topic, p, pykaf.OLDEST)
            with trio.fail_after(20):
                while pc.position < end:
                    out[p] += await pc.next_batch()
    return out


def _one_partition_topics(cluster: FakeCluster, count: int) -> list[str]:
    """``count`` new topics of one partition each."""
    topics = [f"t{k}" for k in range(count)]
    for topic in topics:
        cluster.create_topic(topic, 1)
    return topics


async def _values(bootstrap: str, topic: str) -> list[bytes]:
    """The values of a one-partition topic, oldest first."""
    return [r.value for r in (await _read(bootstrap, topic, 1))[0]]


def _stager(producer: pykaf.Producer) -> Any:
    """The compiled stager behind ``send_nowait`` (its counters are public)."""
    stager = producer.send_nowait.__self__  # type: ignore[attr-defined]
    assert isinstance(stager, pykaf.codec.RecordStager)
    return stager


async def test_a_fresh_topics_records_are_staged_and_all_delivered() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 2)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            stager = _stager(producer)
            for i in range(3 * CHUNK):  # no checkpoint: the topic is not known throughout
                producer.send_nowait("t", b"v%d" % i)
            for i in range(100):
                producer.send_nowait("t", b"k%d" % i, key=b"key-%d" % i)
            # Every one of them took the compiled path (none the per-record one).
            assert stager.queued == 3 * CHUNK + 100
            await producer.flush()
            assert producer.buffered_records == 0
        log = await _read(cluster.bootstrap, "t", 2)
        assert sum(len(records) for records in log.values()) == 3 * CHUNK + 100


async def test_parked_records_count_their_own_bytes_in_the_buffer() -> None:
    async with (
        open_fake_cluster(1) as cluster,
        pykaf.open_producer(cluster.bootstrap, linger=5.0) as producer,
    ):
        expected = 0
        for i in range(2 * CHUNK + 100):  # runs of both kinds, keyed or not, drained twice
            value = b"v" * (i % 50)
            key = b"k" * (i % 7) if (i // 300) % 2 else None
            on_delivery = (lambda e, md: None) if (i // 1000) % 2 else None
            producer.send_nowait("t", value, key=key, on_delivery=on_delivery)
            expected += len(value) + (0 if key is None else len(key)) + 24
        # Parked (the topic is not known yet), counted exactly.
        assert producer.buffered_bytes == expected
        assert producer.buffered_records == 2 * CHUNK + 100
        producer.purge()
        assert producer.buffered_bytes == producer.buffered_records == 0


async def test_order_keys_partitions_and_timestamps_hold_for_parked_records(
    target: Target,
) -> None:
    partitions = 3
    topic = await target.topic("parked-order", partitions)
    sent: list[tuple[bytes | None, bytes, int | None]] = []  # key, value, explicit partition
    stamps: dict[bytes, int] = {}
    heard: dict[bytes, pykaf.RecordMetadata] = {}

    def hear(value: bytes) -> Any:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            assert error is None, error
            heard[value] = md

        return on_delivery

    async with pykaf.open_producer(target.bootstrap, linger=0.05) as producer:
        # All before any checkpoint: the topic's partitions are not known yet.
        for i in range(CHUNK + 500):  # past one reservation: a drain parks a run between
            value = b"v%06d" % i
            kind = i % 9
            key = b"key-%d" % (i % 13) if kind in (1, 2, 5) else None
            partition = i % partitions if kind in (3, 5) else None
            headers = [("h", b"%d" % i)] if kind == 4 else None  # not staged: parked alone
            stamp = 1_700_000_000_000 + i if kind in (2, 6) else None
            if stamp is not None:
                stamps[value] = stamp
            producer.send_nowait(
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp=stamp,
                on_delivery=hear(value) if kind in (0, 1, 3) else None,
            )
            sent.append((key, value, partition))
        await producer.flush()
    log = await _read(target.bootstrap, topic, partitions)
    position = {value: i for i, (_, value, _) in enumerate(sent)}
    found: dict[bytes, int] = {}
    for p, records in log.items():
        indices = [position[r.value] for r in records]
        assert indices == sorted(indices), f"partition {p} out of order"
        for r in records:
            found[r.value] = p
            if r.value in stamps:
                assert r.timestamp == stamps[r.value]
            elif int(r.value[1:]) % 9 == 4:
                assert list(r.headers) == [("h", b"%d" % int(r.value[1:]))]
    assert len(found) == len(sent)  # each record once
    for key, value, partition in sent:
        if partition is not None:
            assert found[value] == partition
        elif key is not None:  # the default partitioner: murmur2 of the key
            assert found[value] == (murmur2(key) & 0x7FFFFFFF) % partitions
    for value, md in heard.items():
        assert md.partition == found[value]
        assert log[md.partition][md.offset].value == value


async def test_another_partitioner_is_asked_for_each_parked_keyed_record() -> None:
    asked: list[bytes | None] = []

    def by_last_byte(topic: str, key: bytes | None, partitions: int, available: Any) -> int:
        asked.append(key)
        return 0 if key is None else key[-1] % partitions

    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 4)
        async with pykaf.open_producer(cluster.bootstrap, partitioner=by_last_byte) as producer:
            for i in range(40):
                producer.send_nowait("t", b"%d" % i, key=bytes([i]))
            await producer.flush()
        log = await _read(cluster.bootstrap, "t", 4)
    assert asked == [bytes([i]) for i in range(40)]  # once each, in order
    for p, records in log.items():
        assert [r.key[-1] for r in records] == [i for i in range(40) if i % 4 == p]


async def test_a_failed_lookup_reaches_every_parked_record() -> None:
    async with open_fake_cluster(1) as cluster:
        failed: list[tuple[BaseException | None, pykaf.RecordMetadata]] = []
        async with pykaf.open_producer(
            cluster.bootstrap, allow_auto_create_topics=False
        ) as producer:
            for i in range(CHUNK + 10):
                producer.send_nowait(
                    "missing",
                    b"%d" % i,
                    key=b"k" if i % 3 == 0 else None,
                    partition=1 if i % 5 == 0 else None,
                    timestamp=1_700_000_000_000 if i % 7 == 0 else None,
                    on_delivery=lambda e, md: failed.append((e, md)),
                )
            for i in range(25):  # without callbacks: flush() raises for them
                producer.send_nowait("missing", b"quiet-%d" % i)
            with pytest.raises(errors.DeliveryError) as info:
                await producer.flush()
            assert sum(n for _, _, n, _ in info.value.failures) == 25
            assert all(
                isinstance(e, errors.UnknownTopicOrPartitionError)
                for _, _, _, e in info.value.failures
            )
            assert producer.buffered_records == 0
            assert producer.statistics().records_failed == CHUNK + 35
        assert len(failed) == CHUNK + 10
        assert all(isinstance(e, errors.UnknownTopicOrPartitionError) for e, _ in failed)
        assert all(md.topic == "missing" and md.offset == -1 for _, md in failed)
        assert [md.timestamp for _, md in failed if md.timestamp == 1_700_000_000_000] != []


async def test_an_explicit_partition_out_of_range_fails_each_of_its_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 2)
        outcome: list[tuple[bytes, BaseException | None]] = []
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            for i in range(30):
                partition = 5 if i % 2 else 0
                producer.send_nowait(
                    "t",
                    b"%d" % i,
                    partition=partition,
                    on_delivery=lambda e, md, v=b"%d" % i: outcome.append((v, e)),
                )
            await producer.flush()
        assert len(outcome) == 30
        for value, error in outcome:
            if int(value) % 2:
                assert isinstance(error, errors.UnknownTopicOrPartitionError)
            else:
                assert error is None
        log = await _read(cluster.bootstrap, "t", 2)
        assert [r.value for r in log[0]] == [b"%d" % i for i in range(0, 30, 2)]


async def test_flush_and_close_wait_for_parked_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("a", 1)
        cluster.create_topic("b", 1)
        acked: list[int] = []
        async with pykaf.open_producer(cluster.bootstrap, linger=5.0) as producer:
            for i in range(200):
                producer.send_nowait("a", b"%d" % i, on_delivery=lambda e, md: acked.append(1))
            await producer.flush()  # not the linger: flush sends what it waits for
            assert len(acked) == 200
            assert producer.buffered_records == 0
            for i in range(50):  # left for the close to deliver
                producer.send_nowait("b", b"%d" % i)
        assert len((await _read(cluster.bootstrap, "a", 1))[0]) == 200
        assert len((await _read(cluster.bootstrap, "b", 1))[0]) == 50


async def test_buffer_limits_hold_for_parked_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, buffer_records=100, linger=5.0
        ) as producer:
            taken = 0
            with pytest.raises(errors.BufferFullError):
                for i in range(1000):
                    producer.send_nowait("t", b"%d" % i, key=b"k" if i % 2 else None)
                    taken += 1
            assert taken == 100  # exactly the limit, the topic still unknown
            assert producer.buffered_records == 100
            await producer.wait_for_space()  # the lookup, then the linger... flush instead
            await producer.flush()
        assert await _values(cluster.bootstrap, "t") == [b"%d" % i for i in range(100)]
        async with pykaf.open_producer(
            cluster.bootstrap, buffer_bytes=20_000, linger=5.0
        ) as producer:
            with pytest.raises(errors.BufferFullError):
                for _ in range(1000):
                    producer.send_nowait("t", b"v" * 1000)
            assert 19_000 <= producer.buffered_bytes <= 20_000 + 1000 + 24


async def test_purge_reaches_parked_records_and_counts_them() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        failed: list[BaseException | None] = []
        async with pykaf.open_producer(cluster.bootstrap, linger=5.0) as producer:
            for i in range(20):
                producer.send_nowait("t", b"%d" % i, on_delivery=lambda e, md: failed.append(e))
            for i in range(5):
                producer.send_nowait("t", b"h%d" % i, headers=[("h", b"")])  # parked alone
            assert producer.purge(in_flight=False) == 25
            assert len(failed) == 20 and all(isinstance(e, errors.PurgedError) for e in failed)
            assert producer.buffered_records == 0
            producer.send_nowait("t", b"after")
        assert await _values(cluster.bootstrap, "t") == [b"after"]


async def test_a_large_or_odd_record_for_a_fresh_topic_takes_the_slow_path_in_order() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            stager = _stager(producer)
            expected = [b"a", b"x" * (SMALL + 1), b"b", b"c", b"d"]
            producer.send_nowait("t", b"a")
            producer.send_nowait("t", expected[1])  # too big to stage
            producer.send_nowait("t", b"b", key=b"k" * (SMALL + 1))  # its key too
            producer.send_nowait("t", b"c", headers=[("h", b"1")])
            producer.send_nowait("t", b"d")
            assert stager.queued == 2  # a and d
            await producer.flush()
        assert await _values(cluster.bootstrap, "t") == expected


async def test_a_bad_topic_name_raises_in_the_call() -> None:
    async with open_fake_cluster(1) as cluster, pykaf.open_producer(cluster.bootstrap) as producer:
        with pytest.raises(errors.InvalidTopicError):
            producer.send_nowait("", b"v")


async def test_idempotent_parked_records_survive_a_retried_produce() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 2)
        async with pykaf.open_producer(cluster.bootstrap, idempotence=True) as producer:
            cluster.lose_responses(pykaf.protocol.ProduceRequest.API_KEY, 1)
            for i in range(2000):
                producer.send_nowait("t", b"%d" % i, key=b"k%d" % (i % 4))
            await producer.flush()
            assert producer.statistics().records_failed == 0
        log = await _read(cluster.bootstrap, "t", 2)
    values = [r.value for records in log.values() for r in records]
    assert sorted(values) == sorted(b"%d" % i for i in range(2000))  # once each
    for records in log.values():
        per_key: dict[bytes, list[int]] = {}
        for r in records:
            per_key.setdefault(r.key, []).append(int(r.value))
        assert all(v == sorted(v) for v in per_key.values())


@pytest.mark.broker
async def test_an_unauthorized_topic_fails_every_parked_record(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = f"parked-denied-{id(kafka_cluster):x}-{trio.current_time():.0f}"
    await trio.to_thread.run_sync(lambda: kafka_cluster.create_topic(topic, 2))
    failed: list[BaseException | None] = []
    async with pykaf.open_producer(
        kafka_cluster.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="bob",  # no ACL at all: the topic is not even described
        sasl_password=KAFKA_USERS["bob"],
        idempotence=False,
    ) as producer:
        for i in range(CHUNK + 10):
            producer.send_nowait(
                topic,
                b"%d" % i,
                key=b"k" if i % 2 else None,
                on_delivery=lambda e, md: failed.append(e),
            )
        await producer.flush()
    assert len(failed) == CHUNK + 10
    assert all(isinstance(e, errors.TopicAuthorizationError) for e in failed), failed[0]


async def test_input_messages_keep_their_place_after_staged_records_of_a_fresh_topic() -> None:
    async with open_fake_cluster(1) as cluster:
        topics = _one_partition_topics(cluster, 20)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            channel = producer.input()
            for topic in topics:
                for i in range(20):
                    producer.send_nowait(topic, b"s%d" % i)
                # Handed to the dispatcher task, which parks it when it runs.
                channel.send_nowait(pykaf.ProducerMessage(topic, b"m"))
                await trio.sleep(0)
            await producer.flush()
        for topic in topics:
            assert await _values(cluster.bootstrap, topic) == [b"s%d" % i for i in range(20)] + [
                b"m"
            ], topic


async def test_records_staged_while_the_topic_is_looked_up_keep_their_place() -> None:
    # The lookup may end at any checkpoint: before or after the staged records
    # of the last step are parked. Either way they follow what was parked before.
    async with open_fake_cluster(1) as cluster:
        topics = _one_partition_topics(cluster, 40)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            for k, topic in enumerate(topics):
                producer.send_nowait(topic, b"a")
                for _ in range(k % 8):
                    await trio.sleep(0)
                producer.send_nowait(topic, b"h", headers=[("h", b"")])  # parked alone
                for i in range(5):
                    producer.send_nowait(topic, b"s%d" % i)
            await producer.flush()
        for topic in topics:
            assert await _values(cluster.bootstrap, topic) == [b"a", b"h"] + [
                b"s%d" % i for i in range(5)
            ], topic
