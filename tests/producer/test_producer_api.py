"""The producer's API against real brokers: send, send_nowait, send_batch, channels, flush,
errors that fail one record only, backpressure, close, statistics, interceptors, acks.

Records are read back with confluent-kafka's consumer where what reached the
log matters.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf.codec import murmur2

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker
unique = bc.unique

pytestmark = pytest.mark.broker

OnDelivery = Callable[[BaseException | None, pykaf.RecordMetadata], None]


def new_topic(broker: Broker, prefix: str, partitions: int = 3) -> str:
    topic = unique(prefix)
    broker.create(topic, partitions)
    return topic


def read_records(
    conf: dict[str, Any],
    topic: str,
    partitions: int,
    count: int,
    timeout: float = 20.0,
    exact: bool = True,
) -> list[Any]:
    """``count`` confluent-kafka messages of ``topic`` from offset 0; fails on fewer (or more)."""
    consumer = bc.ck.Consumer(
        {**bc.QUIET, **conf, "group.id": "pykaf-unused", "enable.auto.commit": False}
    )
    out: list[Any] = []
    try:
        consumer.assign([bc.ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            out.extend(consumer.consume(10_000, 0.2))
        out.extend(consumer.consume(10_000, 0.3))  # anything more would be a duplicate
    finally:
        consumer.close()
    bad = [m.error() for m in out if m.error()]
    assert not bad, bad[:3]
    if exact:
        assert len(out) == count, f"read {len(out)} of {count} records of {topic}"
    assert len(out) >= count, f"read {len(out)} of {count} records of {topic}"
    return out


async def read_back(
    broker: Broker, topic: str, partitions: int, count: int, *, exact: bool = True
) -> list[Any]:
    return await trio.to_thread.run_sync(
        read_records, broker.conf, topic, partitions, count, 20.0, exact
    )


def collector() -> tuple[list[tuple[BaseException | None, pykaf.RecordMetadata]], OnDelivery]:
    results: list[tuple[BaseException | None, pykaf.RecordMetadata]] = []

    def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        results.append((error, md))

    return results, on_delivery


def murmur2_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# ------------------------------------------------------------------ send, send_nowait


async def test_send_returns_metadata_with_consecutive_offsets(broker: Broker) -> None:
    topic = new_topic(broker, "send", 2)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        mds = [await producer.send(topic, b"v%d" % i, partition=1) for i in range(10)]
        keyed = await producer.send(topic, b"x", key=b"some key")
    assert all(isinstance(md, pykaf.RecordMetadata) for md in mds)
    assert {(md.topic, md.partition) for md in mds} == {(topic, 1)}
    assert [md.offset for md in mds] == list(range(10))
    assert keyed.partition == murmur2_partition(b"some key", 2)
    assert keyed.offset == (10 if keyed.partition == 1 else 0)


async def test_send_nowait_calls_on_delivery_once_per_record_in_the_trio_loop(
    broker: Broker,
) -> None:
    topic = new_topic(broker, "nowait")
    results: list[tuple[int, BaseException | None, pykaf.RecordMetadata]] = []

    def callback(i: int) -> OnDelivery:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            trio.lowlevel.current_task()  # raises outside trio
            results.append((i, error, md))

        return on_delivery

    async with pykaf.open_producer(broker.bootstrap) as producer:
        for i in range(500):
            producer.send_nowait(topic, b"v%d" % i, key=b"k%d" % i, on_delivery=callback(i))
        await producer.flush()
        assert len(results) == 500  # flush() returned after every callback
    assert sorted(i for i, _, _ in results) == list(range(500))
    assert all(error is None for _, error, _ in results)
    per_partition: dict[int, list[int]] = {}
    for i, _, md in results:
        assert md.partition == murmur2_partition(b"k%d" % i, 3)
        per_partition.setdefault(md.partition, []).append(md.offset)
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    read = await read_back(broker, topic, 3, 500)
    assert {(m.partition(), m.offset(), m.value()) for m in read} == {
        (md.partition, md.offset, b"v%d" % i) for i, _, md in results
    }


# ------------------------------------------------------------------ send_batch


async def test_send_batch_of_lists(broker: Broker) -> None:
    topic = new_topic(broker, "batch-list")
    values = [b"value-%d" % i if i % 9 else None for i in range(2000)]
    async with pykaf.open_producer(broker.bootstrap) as producer:
        delivery = await producer.send_batch(topic, values)
        assert isinstance(delivery, pykaf.BatchDelivery)
        assert await delivery.wait() == 2000
        assert delivery.done and delivery.acked == 2000 and delivery.failed == 0
        assert await (await producer.send_batch(topic, [])).wait() == 0
    read = await read_back(broker, topic, 3, 2000)
    assert Counter(m.value() for m in read) == Counter(values)


async def test_send_batch_of_pyarrow_binary_and_string_arrays(real_broker: Broker) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = new_topic(real_broker, "batch-arrow")
    binary = pa.array([b"b%d" % i if i % 5 else None for i in range(1000)], pa.binary())
    strings = pa.array([f"s\u00e9{i}" if i % 7 else None for i in range(1000)], pa.string())
    sliced = pa.array([b"x%d" % i for i in range(100)], pa.binary()).slice(10, 50)
    large = pa.array([b"L%d" % i for i in range(100)], pa.large_binary())
    async with pykaf.open_producer(real_broker.bootstrap, compression="lz4") as producer:
        deliveries = [
            await producer.send_batch(topic, binary),
            await producer.send_batch(topic, strings),
            await producer.send_batch(topic, sliced),
            await producer.send_batch(topic, large),
        ]
        assert [await d.wait() for d in deliveries] == [1000, 1000, 50, 100]
    expected = (
        binary.to_pylist()
        + [None if s is None else s.encode() for s in strings.to_pylist()]
        + sliced.to_pylist()
        + large.to_pylist()
    )
    read = await read_back(real_broker, topic, 3, len(expected))
    assert Counter(m.value() for m in read) == Counter(expected)


async def test_send_batch_with_keys_follows_murmur2(broker: Broker) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = new_topic(broker, "batch-keys", 5)
    n = 1000
    keys = [b"key-%d" % i for i in range(n)]
    headers = [[("i", b"%d" % i)] for i in range(n)]
    timestamps = [1_650_000_000_000 + i for i in range(n)]
    async with pykaf.open_producer(broker.bootstrap) as producer:
        first = await producer.send_batch(
            topic,
            [b"list-%d" % i for i in range(n)],
            keys=keys,
            headers=headers,
            timestamps=timestamps,
        )
        second = await producer.send_batch(
            topic,
            pa.array([b"arrow-%d" % i for i in range(n)], pa.binary()),
            keys=pa.array([k.decode() for k in keys], pa.string()),
        )
        assert await first.wait() == n
        assert await second.wait() == n
    read = await read_back(broker, topic, 5, 2 * n)
    assert {m.partition() for m in read} == set(range(5))
    for m in read:
        assert m.partition() == murmur2_partition(m.key(), 5)
        i = int(m.key().split(b"-")[1])
        if m.value().startswith(b"list-"):
            assert m.value() == b"list-%d" % i
            assert m.headers() == [("i", b"%d" % i)]
            assert m.timestamp() == (bc.ck.TIMESTAMP_CREATE_TIME, 1_650_000_000_000 + i)
        else:
            assert m.value() == b"arrow-%d" % i


async def test_send_batch_to_one_partition(broker: Broker) -> None:
    topic = new_topic(broker, "batch-one", 4)
    async with pykaf.open_producer(
        broker.bootstrap, batch_bytes=4096, max_message_bytes=4096
    ) as producer:
        delivery = await producer.send_batch(
            topic, [b"%05d" % i for i in range(3000)], keys=[b"k"] * 3000, partition=2
        )
        assert await delivery.wait() == 3000
        assert producer.statistics().batches_sent > 1  # several batches, one delivery
        md = await producer.send(topic, b"after", partition=2)
    assert md.offset == 3000
    read = await read_back(broker, topic, 4, 3001)
    assert {m.partition() for m in read} == {2}
    assert [m.value() for m in sorted(read, key=lambda m: m.offset())] == [
        b"%05d" % i for i in range(3000)
    ] + [b"after"]


async def test_send_batch_rejects_columns_of_different_lengths(real_broker: Broker) -> None:
    topic = new_topic(real_broker, "batch-len")
    async with pykaf.open_producer(real_broker.bootstrap) as producer:
        with pytest.raises(ValueError, match="keys"):
            await producer.send_batch(topic, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(ValueError, match="timestamps"):
            await producer.send_batch(topic, [b"a"], timestamps=[1, 2])
        assert producer.statistics().buffered_records == 0


# ------------------------------------------------------------------ channels


async def test_input_successes_and_errors_channels(broker: Broker) -> None:
    topic = new_topic(broker, "channels")
    tags = [object() for _ in range(100)]
    async with pykaf.open_producer(broker.bootstrap, return_successes=True) as producer:
        for i, tag in enumerate(tags):
            msg = pykaf.ProducerMessage(topic, b"v%d" % i, key=b"k%d" % i, metadata=tag)
            await producer.input().send(msg)
        bad = pykaf.ProducerMessage(topic, b"bad", partition=99, metadata="bad")
        await producer.input().send(bad)
        with trio.fail_after(20):  # a hang guard
            successes = [await producer.successes().receive() for _ in tags]
            failure = await producer.errors().receive()
    assert [m.metadata for m in sorted(successes, key=lambda m: tags.index(m.metadata))] == tags
    for m in successes:
        i = tags.index(m.metadata)
        assert m.value == b"v%d" % i and m.key == b"k%d" % i
        assert m.partition == murmur2_partition(m.key, 3)
        assert m.offset >= 0 and m.timestamp is not None and m.timestamp > 0
    assert failure.message is bad and failure.message.metadata == "bad"
    assert isinstance(failure.error, errors.UnknownTopicOrPartitionError)
    read = await read_back(broker, topic, 3, 100)
    assert {(m.partition(), m.offset(), m.value()) for m in read} == {
        (m.partition, m.offset, m.value) for m in successes
    }


async def test_channels_need_their_options(real_broker: Broker) -> None:
    async with pykaf.open_producer(real_broker.bootstrap, return_errors=False) as producer:
        with pytest.raises(errors.ConfigError, match="return_successes"):
            producer.successes()
        with pytest.raises(errors.ConfigError, match="return_errors"):
            producer.errors()


async def test_input_failure_without_errors_channel_goes_to_flush(real_broker: Broker) -> None:
    topic = new_topic(real_broker, "channels-flush")
    async with pykaf.open_producer(real_broker.bootstrap, return_errors=False) as producer:
        await producer.input().send(pykaf.ProducerMessage(topic, b"ok"))
        await producer.input().send(pykaf.ProducerMessage(topic, b"bad", partition=7))
        with trio.fail_after(20), pytest.raises(errors.DeliveryError):
            while True:  # flush until the dispatcher has taken both messages
                await producer.flush()
                await trio.sleep(0.01)
        await producer.flush()  # reported once
        assert producer.statistics().records_acked == 1


# ------------------------------------------------------------------ flush and failures


async def test_flush_waits_for_everything(broker: Broker) -> None:
    topic = new_topic(broker, "flush")
    acked: list[pykaf.RecordMetadata] = []
    async with pykaf.open_producer(broker.bootstrap, linger=10.0) as producer:
        for i in range(1000):
            producer.send_nowait(topic, b"v%d" % i, on_delivery=lambda e, md: acked.append(md))
        delivery = await producer.send_batch(topic, [b"b"] * 500)
        await producer.flush()  # does not wait out the 10 s linger
        stats = producer.statistics()
        assert len(acked) == 1000 and delivery.done
        assert stats.buffered_records == stats.buffered_bytes == 0
        assert stats.records_acked == 1500 and stats.in_flight == 0


async def test_flush_raises_for_unobserved_failures(broker: Broker) -> None:
    topic = new_topic(broker, "flush-fail")
    missing = unique("missing")
    async with pykaf.open_producer(broker.bootstrap) as producer:
        producer.send_nowait(missing, b"lost")
        producer.send_nowait(topic, b"fine")
        with pytest.raises(errors.DeliveryError) as info:
            await producer.flush()
        assert "1 records failed" in str(info.value)
        await producer.flush()  # each failure is reported once
        assert producer.statistics().records_failed == 1
        assert producer.statistics().records_acked == 1


async def test_on_delivery_gets_the_failure_instead_of_flush(broker: Broker) -> None:
    missing = unique("missing")
    results, on_delivery = collector()
    async with pykaf.open_producer(broker.bootstrap) as producer:
        producer.send_nowait(missing, b"lost", on_delivery=on_delivery)
        await producer.flush()  # no DeliveryError: the callback was told
    [(error, md)] = results
    assert isinstance(error, errors.UnknownTopicOrPartitionError)
    assert md.topic == missing and md.offset == -1


async def test_send_to_an_unknown_topic_without_auto_creation(broker: Broker) -> None:
    missing = unique("missing")
    async with pykaf.open_producer(broker.bootstrap) as producer:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await producer.send(missing, b"v")
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await producer.send_batch(missing, [b"v"])
        assert producer.statistics().buffered_records == 0


async def test_a_record_too_large_fails_alone(broker: Broker) -> None:
    topic = new_topic(broker, "too-large", 1)
    fresh = new_topic(broker, "too-large-fresh", 1)
    results, on_delivery = collector()
    async with pykaf.open_producer(broker.bootstrap, max_message_bytes=1000) as producer:
        # the first record of a topic whose partitions are not known yet
        with pytest.raises(errors.RecordTooLargeError):
            producer.send_nowait(fresh, b"x" * 2000, on_delivery=on_delivery)
        with pytest.raises(errors.RecordTooLargeError):
            await producer.send(topic, b"x" * 2000)
        assert (await producer.send(topic, b"small")).offset == 0
        with pytest.raises(errors.RecordTooLargeError):
            producer.send_nowait(topic, b"y" * 500, key=b"k" * 500, on_delivery=on_delivery)
        with pytest.raises(errors.RecordTooLargeError):
            await producer.send(topic, b"v", headers=[("h", b"z" * 1000)])
        producer.send_nowait(topic, b"later", on_delivery=on_delivery)
        await producer.flush()
        assert producer.statistics().buffered_records == 0
    assert [(e, md.offset) for e, md in results] == [(None, 1)]
    read = await read_back(broker, topic, 1, 2)
    assert [m.value() for m in read] == [b"small", b"later"]


async def test_partition_out_of_range(broker: Broker) -> None:
    topic = new_topic(broker, "out-of-range", 2)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await producer.send(topic, b"v", partition=2)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.send_nowait(topic, b"v", partition=5)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.send_nowait(topic, b"v", partition=-1)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await producer.send_batch(topic, [b"v"], partition=2)
        md = await producer.send(topic, b"fine", partition=1)
        assert (md.partition, md.offset) == (1, 0)
        assert producer.statistics().buffered_records == 0


async def test_values_keys_and_headers_must_be_bytes(real_broker: Broker) -> None:
    topic = new_topic(real_broker, "types")
    fresh = new_topic(real_broker, "types-fresh")
    async with pykaf.open_producer(real_broker.bootstrap) as producer:
        with pytest.raises(TypeError):
            producer.send_nowait(fresh, "a str")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await producer.send(topic, "a str")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            producer.send_nowait(topic, b"v", key="a str")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await producer.send(topic, b"v", headers=[("h", "a str")])  # type: ignore[list-item]
        md = await producer.send(topic, b"fine", partition=0)
        await producer.flush()
        assert producer.statistics().buffered_records == 0
    read = await read_back(real_broker, topic, 3, 1)
    assert (read[0].partition(), read[0].offset(), read[0].value()) == (0, md.offset, b"fine")


# ------------------------------------------------------------------ backpressure


async def test_buffer_records_is_never_exceeded(broker: Broker) -> None:
    topic = new_topic(broker, "backpressure")
    limit = 100
    highest = 0
    full = 0

    def sample(producer: pykaf.Producer) -> None:
        nonlocal highest
        highest = max(highest, producer.statistics().buffered_records)

    async with pykaf.open_producer(broker.bootstrap, buffer_records=limit) as producer:

        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            assert error is None
            sample(producer)

        async def sender(task: int) -> None:
            for i in range(200):
                await producer.send(topic, b"%d-%d" % (task, i))
                sample(producer)

        async def nowait_sender() -> None:
            nonlocal full
            for i in range(600):
                while True:
                    try:
                        producer.send_nowait(topic, b"n%d" % i, on_delivery=on_delivery)
                        break
                    except errors.BufferFullError:
                        full += 1
                        await trio.sleep(0.001)
                sample(producer)
                if i % 50 == 0:
                    await trio.sleep(0)

        async def batch_sender() -> None:
            d1 = await producer.send_batch(topic, [b"b"] * 700)
            d2 = await producer.send_batch(
                topic, [b"c"] * 700, keys=[b"k%d" % i for i in range(700)]
            )
            assert await d1.wait() == 700 and await d2.wait() == 700

        async def sampler(done: trio.Event) -> None:
            while not done.is_set():
                sample(producer)
                await trio.sleep(0)

        done = trio.Event()
        with trio.fail_after(30):  # a hang guard
            async with trio.open_nursery() as outer:
                outer.start_soon(sampler, done)
                async with trio.open_nursery() as nursery:
                    # these start before the topic's partitions are known
                    for task in range(5):
                        nursery.start_soon(sender, task)
                    nursery.start_soon(nowait_sender)
                    nursery.start_soon(batch_sender)
                done.set()
        assert producer.statistics().records_acked == 5 * 200 + 600 + 1400
    assert highest == limit  # reached, never passed
    assert full > 0


async def test_send_nowait_raises_when_full_and_send_waits(broker: Broker) -> None:
    topic = new_topic(broker, "buffer-full")
    results, on_delivery = collector()
    async with pykaf.open_producer(broker.bootstrap, buffer_records=100) as producer:
        await producer.send(topic, b"warm up")
        for i in range(100):  # no checkpoint in between: nothing can leave the buffer
            producer.send_nowait(topic, b"v%d" % i, on_delivery=on_delivery)
        assert producer.statistics().buffered_records == 100
        with pytest.raises(errors.BufferFullError):
            producer.send_nowait(topic, b"one too many")
        md = await producer.send(topic, b"waited")  # waits for room, then goes
        assert len(results) == 100  # room came from acknowledgements
        assert md.offset >= 0
        assert producer.statistics().records_acked == 102


async def test_buffer_bytes_bounds_what_is_buffered(real_broker: Broker) -> None:
    topic = new_topic(real_broker, "buffer-bytes")
    limit = 20_000
    highest = 0
    value = b"v" * 1000
    async with pykaf.open_producer(real_broker.bootstrap, buffer_bytes=limit) as producer:

        async def sender() -> None:
            nonlocal highest
            for _ in range(10):
                await producer.send(topic, value)
                highest = max(highest, producer.statistics().buffered_bytes)

        with trio.fail_after(30):  # a hang guard
            async with trio.open_nursery() as nursery:
                for _ in range(30):  # 30 records of 1 kB waiting at once: over the limit
                    nursery.start_soon(sender)
                while producer.statistics().records_acked < 300:
                    await trio.sleep(0)
                    highest = max(highest, producer.statistics().buffered_bytes)
        with pytest.raises(errors.BufferFullError):
            while True:  # fills up without a checkpoint, then refuses
                producer.send_nowait(topic, value)
    # the record that crosses the limit is admitted: at most one record above it
    assert limit // 2 < highest < limit + len(value) + 100


async def test_close_with_records_in_flight_loses_nothing(broker: Broker) -> None:
    topic = new_topic(broker, "close-in-flight")
    n = 50_000
    async with pykaf.open_producer(broker.bootstrap, compression="lz4") as producer:
        for i in range(n):
            producer.send_nowait(topic, b"%d" % i)
        assert producer.statistics().buffered_records > 0
    stats = producer.statistics()
    assert stats.records_acked == n and stats.buffered_records == 0
    read = await read_back(broker, topic, 3, n)
    assert sorted(int(m.value()) for m in read) == list(range(n))


# ------------------------------------------------------------------ close


async def test_a_closed_producer_raises_closed_error(real_broker: Broker) -> None:
    topic = new_topic(real_broker, "closed")
    async with pykaf.open_producer(real_broker.bootstrap) as producer:
        await producer.send(topic, b"v")
    with pytest.raises(errors.ClosedError):
        await producer.send(topic, b"v")
    with pytest.raises(errors.ClosedError):
        producer.send_nowait(topic, b"v")
    with pytest.raises(errors.ClosedError):
        await producer.send_batch(topic, [b"v"])
    with pytest.raises(errors.ClosedError):
        await producer.send_batch(topic, [b"v"], keys=[b"k"])
    with pytest.raises(errors.ClosedError):
        await producer.send_batch(unique("never-seen"), [b"v"])
    with pytest.raises(errors.ClosedError):
        await producer.send(unique("never-seen"), b"v")
    with pytest.raises(trio.ClosedResourceError):
        await producer.input().send(pykaf.ProducerMessage(topic, b"v"))
    await producer.aclose()  # closing again is a no-op


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "options",
    [
        {"acks": 2},
        {"compression": "brotli"},
        {"linger_ms": 5},
        {"idempotence": True, "acks": 1},
        {"buffer_records": 0},
        {"partitioner": "nope"},
        {"max_message_bytes": 2_000_000},
    ],
    ids=lambda o: ",".join(o),
)
async def test_invalid_config_fails_at_open_before_connecting(options: dict[str, Any]) -> None:
    # nothing listens on port 1: connecting would be a KafkaConnectionError instead
    with pytest.raises(errors.ConfigError):
        async with pykaf.open_producer("127.0.0.1:1", connect_timeout=1, **options):
            pytest.fail("the producer opened")


async def test_invalid_config_with_a_shared_client(real_broker: Broker) -> None:
    async with pykaf.open_client(real_broker.bootstrap) as client:
        with pytest.raises(errors.ConfigError):
            async with pykaf.open_producer(client, acks="some"):
                pytest.fail("the producer opened")


# ------------------------------------------------------------------ statistics


async def test_statistics_add_up(broker: Broker) -> None:
    topic = new_topic(broker, "stats", 6)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        for i in range(3000):
            producer.send_nowait(topic, b"v%d" % i, key=b"%d" % i)
        await producer.flush()
        stats = producer.statistics()
    assert isinstance(stats, pykaf.ProducerStatistics)
    assert stats.records_acked == stats.records_sent == 3000
    assert stats.records_failed == stats.retries == stats.errors == 0
    assert stats.buffered_records == stats.buffered_bytes == stats.in_flight == 0
    assert stats.batches_sent >= 6  # one batch per partition at least
    assert stats.batch_records_avg == pytest.approx(3000 / stats.batches_sent)
    assert stats.producer_id >= 0 and stats.producer_epoch >= 0  # idempotent by default
    assert stats.brokers
    for node, b in stats.brokers.items():
        assert isinstance(b, pykaf.BrokerStatistics) and b.node_id == node
        assert b.in_flight == 0 and b.errors == 0
    assert sum(b.records for b in stats.brokers.values()) == 3000
    assert sum(b.batches for b in stats.brokers.values()) == stats.batches_sent
    assert sum(b.requests for b in stats.brokers.values()) >= 1
    assert sum(b.bytes for b in stats.brokers.values()) > 3000 * 2
    if broker.name == "mock":  # leaders spread over the 3 brokers
        assert sum(1 for b in stats.brokers.values() if b.records) == 3


# ------------------------------------------------------------------ interceptors


async def test_on_send_rewrites_and_on_acknowledgement_sees_every_record(broker: Broker) -> None:
    topic = new_topic(broker, "interceptors")
    acks: list[tuple[pykaf.RecordMetadata, BaseException | None]] = []

    def rewrite(msg: pykaf.ProducerMessage) -> pykaf.ProducerMessage:
        msg.value = (msg.value or b"").upper()
        msg.headers = [*(msg.headers or []), ("intercepted", b"1")]
        msg.partition = 1
        return msg

    def acknowledged(md: pykaf.RecordMetadata, error: BaseException | None) -> None:
        acks.append((md, error))

    async with pykaf.open_producer(
        broker.bootstrap, on_send=[rewrite], on_acknowledgement=[acknowledged]
    ) as producer:
        md = await producer.send(topic, b"one", headers=[("h", b"x")])
        for i in range(99):
            producer.send_nowait(topic, b"nowait-%d" % i)
        await producer.input().send(pykaf.ProducerMessage(topic, b"channel"))
        await producer.flush()
        with trio.fail_after(20):  # the input() message is dispatched in the background
            while producer.statistics().records_acked < 101:
                await trio.sleep(0.01)
        delivery = await producer.send_batch(topic, [b"batch-%d" % i for i in range(50)])
        assert await delivery.wait() == 50
    assert md.partition == 1
    read = await read_back(broker, topic, 3, 151)
    singles = sorted(
        (m for m in read if not m.value().startswith(b"batch-")), key=lambda m: m.offset()
    )
    assert [m.value() for m in singles] == [b"ONE"] + [b"NOWAIT-%d" % i for i in range(99)] + [
        b"CHANNEL"
    ]
    assert {m.partition() for m in singles} == {1}
    assert singles[0].headers() == [("h", b"x"), ("intercepted", b"1")]
    assert all(m.headers()[-1] == ("intercepted", b"1") for m in singles)
    # send_batch records skip on_send (no record objects), but are acknowledged too
    assert len(acks) == 151
    assert all(error is None for _, error in acks)
    assert sorted((a.partition, a.offset) for a, _ in acks) == sorted(
        (m.partition(), m.offset()) for m in read
    )


# ------------------------------------------------------------------ clients, acks, idempotence


async def test_a_shared_client_stays_open(broker: Broker) -> None:
    topic = new_topic(broker, "shared")
    async with pykaf.open_client(broker.bootstrap) as client:
        async with pykaf.open_producer(client, linger=0) as producer:
            assert producer.client is client
            first = await producer.send(topic, b"one", partition=0)
        assert await client.partitions(topic) == [0, 1, 2]  # still usable
        async with pykaf.open_producer(client) as producer:
            second = await producer.send(topic, b"two", partition=0)
        assert await client.get_offset(topic, 0, pykaf.NEWEST) == 2
    assert (first.offset, second.offset) == (0, 1)


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_0_and_1(broker: Broker, acks: int) -> None:
    topic = new_topic(broker, f"acks{acks}", 1)
    results, on_delivery = collector()
    async with pykaf.open_producer(broker.bootstrap, acks=acks, idempotence=False) as producer:
        mds = [await producer.send(topic, b"s%d" % i) for i in range(5)]
        for i in range(200):
            producer.send_nowait(topic, b"n%d" % i, on_delivery=on_delivery)
        await producer.flush()
        assert producer.statistics().records_acked == 205
    assert all(error is None for error, _ in results) and len(results) == 200
    offsets = [md.offset for md in mds] + [md.offset for _, md in results]
    if acks == 0:
        assert set(offsets) == {-1}  # nothing comes back to say where
    else:
        assert offsets == list(range(205))
    # Tansu and the mock answer acks=0 Produce requests (Kafka sends nothing
    # back); pykaf drops such an answer and keeps the connection, so there too
    # every record arrives once, in order.
    read = await read_back(broker, topic, 1, 205)
    values = [m.value() for m in sorted(read, key=lambda m: m.offset())]
    assert values == [b"s%d" % i for i in range(5)] + [b"n%d" % i for i in range(200)]


async def test_without_idempotence(broker: Broker) -> None:
    topic = new_topic(broker, "not-idempotent")
    async with pykaf.open_producer(broker.bootstrap, idempotence=False) as producer:
        delivery = await producer.send_batch(topic, [b"v%d" % i for i in range(1000)])
        md = await producer.send(topic, b"last", partition=0)
        assert await delivery.wait() == 1000
        stats = producer.statistics()
    assert stats.producer_id == -1 and stats.records_acked == 1001
    assert md.offset >= 0
    read = await read_back(broker, topic, 3, 1001)
    assert Counter(m.value() for m in read) == Counter(
        [b"v%d" % i for i in range(1000)] + [b"last"]
    )


async def test_send_batch_on_settle_names_each_records_partition_and_offset(
    broker: Broker,
) -> None:
    topic = new_topic(broker, "batch-on-settle")
    keyless = [b"plain-%d" % i for i in range(3000)]
    keyless[1234] = b"x" * 40000  # over batch_bytes and max_message_bytes: fails alone
    keyed = [b"keyed-%d" % i for i in range(500)]
    where: dict[bytes, tuple[int, int, int, BaseException | None]] = {}

    def hook_for(values: list[bytes]) -> Any:
        def on_settle(partition: int, index: int, count: int, offset: int, *rest: Any) -> None:
            timestamp, error = rest
            for i in range(index, index + count):
                assert values[i] not in where, f"record {i} settled twice"
                where[values[i]] = (
                    partition,
                    -1 if offset < 0 else offset + i - index,
                    timestamp,
                    error,
                )

        return on_settle

    async with pykaf.open_producer(
        broker.bootstrap, max_message_bytes=2000, batch_bytes=16384
    ) as producer:
        d1 = await producer.send_batch(topic, keyless, on_settle=hook_for(keyless))
        d2 = await producer.send_batch(
            topic, keyed, keys=[b"k%d" % (i % 11) for i in range(500)], on_settle=hook_for(keyed)
        )
        with pytest.raises(errors.DeliveryError):
            await d1.wait()
        assert await d2.wait() == 500
        assert 0 < d1.timestamp <= d2.timestamp
    assert len(where) == 3500
    _, offset, _, error = where[keyless[1234]]
    assert isinstance(error, errors.RecordTooLargeError) and offset == -1
    del where[keyless[1234]]
    assert all(error is None and ts > 0 for _, _, ts, error in where.values())
    read = await read_back(broker, topic, 3, 3499)
    assert {m.value(): (m.partition(), m.offset()) for m in read} == {
        value: (p, o) for value, (p, o, _, _) in where.items()
    }
