"""Partition consumers against Apache Kafka, Tansu and the librdkafka mock: what pykaf and
confluent-kafka wrote comes back whole and in order; starting points, seek,
pause, offset resets, oversized batches, read_committed's last stable offset,
statistics, and faults on the mock (injected Fetch errors, leader moves, a
broker down and up) with nothing lost or repeated.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf._consumer.read_committed import TransactionFilter
from pykaf.codec import BatchBuilder
from pykaf.testing import MockCluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
Broker = bc.Broker
unique = bc.unique

pytestmark = pytest.mark.broker

FETCH = 1


def new_topic(broker: Any, prefix: str, partitions: int = 3) -> str:
    topic = unique(prefix)
    broker.create(topic, partitions)
    return topic


async def read_n(pc: pykaf.PartitionConsumer, n: int, timeout: float = 20.0) -> list[Any]:
    """The next ``n`` records of ``pc``; fails if they do not come in time."""
    out: list[Any] = []
    with trio.move_on_after(timeout):
        while len(out) < n:
            out.extend(await pc.next_batch())
    # The log start names a reset: records deleted meanwhile (retention) end
    # at an empty log rather than at the records the test wrote.
    assert len(out) >= n, (
        f"{pc.topic}/{pc.partition}: {len(out)} of {n} records "
        f"(position {pc.position}, log start {pc.log_start_offset}, hwm {pc.high_water_mark})"
    )
    return out


async def read_all(
    consumer: pykaf.Consumer, topic: str, counts: dict[int, int], timeout: float = 30.0
) -> dict[int, list[Any]]:
    """Every partition of ``counts`` from OLDEST; exactly counts[p] records each."""
    out: dict[int, list[Any]] = {}
    for p, n in counts.items():
        pc = await consumer.consume_partition(topic, p, pykaf.OLDEST)
        out[p] = await read_n(pc, n, timeout) if n else []
    # Anything more would be a duplicate or a foreign record: give it a moment.
    await trio.sleep(0.3)
    for p in counts:
        pc = consumer._partitions[(topic, p)]
        extra = pc.cursor._receive.statistics().current_buffer_used + len(pc._local) - pc._next
        assert extra == 0, f"{topic}/{p}: unexpected records after the last one"
        assert pc._answer is None, f"{topic}/{p}: unexpected records after the last one"
    return out


def produced_records(n: int, rng: random.Random) -> list[dict[str, Any]]:
    base_ts = 1_650_000_000_000
    records = []
    for i in range(n):
        records.append(
            {
                "key": None if i % 5 == 0 else b"k%d" % i,
                "value": None if i % 11 == 7 else rng.randbytes(rng.randrange(0, 200)),
                "headers": [("i", b"%d" % i), ("none", None)] if i % 3 == 0 else None,
                "timestamp": base_ts + i,
                "partition": i % 3,
            }
        )
    return records


def check_records(got: dict[int, list[Any]], sent: list[dict[str, Any]]) -> None:
    for p, records in got.items():
        want = [r for r in sent if r["partition"] == p]
        assert {(r.partition, r.timestamp_type) for r in records} == {(p, 0)}
        assert [r.offset for r in records] == list(range(len(want)))
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            (w["key"], w["value"], w["timestamp"]) for w in want
        ]
        assert [r.headers for r in records] == [w["headers"] or [] for w in want]


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
async def test_what_pykaf_produced_comes_back_in_order(broker: Any, compression: str) -> None:
    topic = new_topic(broker, "cons-rt")
    sent = produced_records(900, random.Random(1))
    async with pykaf.open_producer(broker.bootstrap, compression=compression) as producer:
        for r in sent:
            producer.send_nowait(topic, **r)
        await producer.flush()
    async with pykaf.open_consumer(broker.bootstrap) as consumer:
        got = await read_all(consumer, topic, {0: 300, 1: 300, 2: 300})
    check_records(got, sent)


async def test_what_confluent_kafka_produced_comes_back(broker: Any) -> None:
    topic = new_topic(broker, "cons-ck")
    conf = {**bc.QUIET, **broker.conf, "linger.ms": 5, "compression.type": "gzip"}

    def produce() -> None:
        producer = bc.ck.Producer(conf)
        for i in range(1200):
            headers = [("n", b"%d" % i)] if i % 2 else None
            producer.produce(
                topic,
                value=b"value-%d" % i,
                key=b"key-%d" % i,
                partition=i % 3,
                timestamp=1_600_000_000_000 + i,
                headers=headers,
            )
        assert producer.flush(20) == 0

    await trio.to_thread.run_sync(produce)
    async with pykaf.open_consumer(broker.bootstrap) as consumer:
        got = await read_all(consumer, topic, {0: 400, 1: 400, 2: 400})
    for p, records in got.items():
        idx = list(range(p, 1200, 3))
        assert [r.offset for r in records] == list(range(400))
        assert [r.value for r in records] == [b"value-%d" % i for i in idx]
        assert [r.key for r in records] == [b"key-%d" % i for i in idx]
        assert [r.timestamp for r in records] == [1_600_000_000_000 + i for i in idx]
        assert [r.headers for r in records] == [[("n", b"%d" % i)] if i % 2 else [] for i in idx]
        assert {(r.topic, r.partition) for r in records} == {(topic, p)}


async def test_async_iteration_yields_records_one_by_one(real_broker: Any) -> None:
    topic = new_topic(real_broker, "cons-iter", 1)
    async with pykaf.open_producer(real_broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % i for i in range(50)], partition=0)
    async with pykaf.open_consumer(real_broker.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        values = []
        async for record in pc:
            values.append(record.value)
            if len(values) == 50:
                break
        assert values == [b"%d" % i for i in range(50)]
        assert pc.position == 50


# ------------------------------------------------------------------ where to start


async def test_start_at_an_offset_newest_or_a_timestamp(broker: Any) -> None:
    topic = new_topic(broker, "cons-start", 1)
    async with pykaf.open_producer(broker.bootstrap, linger=0) as producer:
        for i in range(20):
            await producer.send(topic, b"old-%d" % i, partition=0, timestamp=1_000_000 + i * 10)
        async with pykaf.open_consumer(broker.bootstrap) as consumer:
            newest = await consumer.consume_partition(topic, 0, pykaf.NEWEST)
            # NEWEST means records written from now on; wait until it has resolved.
            with trio.fail_after(10):
                while newest.position < 0:
                    await trio.sleep(0.01)
            assert newest.position == 20
            for i in range(5):
                await producer.send(topic, b"new-%d" % i, partition=0, timestamp=2_000_000 + i)
            got = await read_n(newest, 5)
            assert [r.value for r in got] == [b"new-%d" % i for i in range(5)]
            assert [r.offset for r in got] == list(range(20, 25))
        async with pykaf.open_consumer(broker.bootstrap) as consumer:
            at = await consumer.consume_partition(topic, 0, 17)
            assert [r.value for r in await read_n(at, 3)][:3] == [b"old-17", b"old-18", b"old-19"]


class _OffsetsByTime:
    """A client stand-in answering ListOffsets from a fixed table (neither broker
    here looks offsets up by time: Tansu answers 0, the mock -1)."""

    def __init__(self, table: dict[int, int]) -> None:
        self.table = table
        self.asked: list[int] = []

    async def get_offset(
        self, topic: str, partition: int, time_ms: int, *, isolation_level: int = 0
    ) -> int:
        self.asked.append(time_ms)
        return self.table[time_ms]


@pytest.mark.parametrize(
    ("table", "start", "expected"),
    [
        ({1_000_125: 13}, 1_000_125, 13),  # the first record at or after the time
        ({10**12: -1, pykaf.NEWEST: 20}, 10**12, 20),  # none that late: the end
    ],
)
async def test_a_timestamp_start_resolves_through_list_offsets(
    table: dict[int, int], start: int, expected: int
) -> None:
    consumer = pykaf.Consumer(_OffsetsByTime(table), pykaf.ConsumerConfig(), None)  # type: ignore[arg-type]
    pc = pykaf.PartitionConsumer(consumer, "t", 0, 0, TransactionFilter("read_committed"))
    pc.cursor.start_at_time(start)
    await consumer._resolve_start(pc.cursor)
    assert pc.fetch_offset == expected
    assert consumer.client.asked[0] == start  # type: ignore[attr-defined]


async def test_seek_goes_back_and_drops_the_buffer(broker: Any) -> None:
    topic = new_topic(broker, "cons-seek", 1)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % i for i in range(100)], partition=0)
    async with pykaf.open_consumer(broker.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        await read_n(pc, 100)
        pc.seek(40)
        got = await read_n(pc, 60)
        assert [r.offset for r in got] == list(range(40, 100))
        pc.seek(pykaf.OLDEST)
        got = await read_n(pc, 100)
        assert got[0].offset == 0
        with pytest.raises(ValueError):
            pc.seek(-5)


@pytest.mark.parametrize("to", [40, pykaf.OLDEST])
async def test_a_seek_while_the_start_is_looked_up_wins(broker: Any, to: int) -> None:
    """assign(NEWEST) then seek at once: the lookup of NEWEST ending later must not undo it."""
    topic = new_topic(broker, "cons-seek-race", 1)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % i for i in range(100)], partition=0)
    async with pykaf.open_consumer(broker.bootstrap) as consumer:
        client = consumer.client
        looking, answer = trio.Event(), trio.Event()
        real_get_offset = client.get_offset

        async def held_get_offset(*args: Any, **kwargs: Any) -> int:
            looking.set()
            offset: int = await real_get_offset(*args, **kwargs)
            await answer.wait()  # the answer arrives after the seek
            return offset

        client.get_offset = held_get_offset  # type: ignore[method-assign]
        pc = await consumer.consume_partition(topic, 0, pykaf.NEWEST)
        await looking.wait()
        pc.seek(to)
        answer.set()
        first = 40 if to == 40 else 0
        got = await read_n(pc, 100 - first)
        assert [r.offset for r in got] == list(range(first, 100))


# ------------------------------------------------------------------ control


async def test_pause_and_resume(real_broker: Any) -> None:
    topic = new_topic(real_broker, "cons-pause", 1)
    async with pykaf.open_producer(real_broker.bootstrap, linger=0) as producer:
        await producer.send(topic, b"first", partition=0)
        async with pykaf.open_consumer(real_broker.bootstrap, fetch_max_wait=0.05) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            assert [r.value for r in await read_n(pc, 1)] == [b"first"]
            pc.pause()
            await trio.sleep(0.2)  # a fetch in flight may still land
            fetched = pc.bytes_fetched
            await producer.send(topic, b"second", partition=0)
            await trio.sleep(0.5)
            assert pc.bytes_fetched == fetched, "a paused partition was fetched"
            pc.resume()
            assert [r.value for r in await read_n(pc, 1)] == [b"second"]


async def test_a_slow_reader_holds_back_only_its_own_partition(
    mock_cluster: MockCluster,
) -> None:
    # The mock answers one batch per partition per Fetch, so an answer is 100
    # records here (Tansu would send a partition's whole log at once).
    topic = unique("cons-slow")
    mock_cluster.create_topic(topic, 2, 1)
    values = [b"x" * 100] * 2000
    async with pykaf.open_producer(mock_cluster.bootstrap, batch_records=100) as producer:
        await producer.send_batch(topic, values, partition=0)
        await producer.send_batch(topic, values, partition=1)
    async with pykaf.open_consumer(mock_cluster.bootstrap, partition_buffer=2) as consumer:
        slow = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        fast = await consumer.consume_partition(topic, 1, pykaf.OLDEST)
        assert len(await read_n(fast, 2000)) == 2000
        with trio.fail_after(10):
            while slow.cursor._receive.statistics().current_buffer_used < 2:
                await trio.sleep(0.01)
        await trio.sleep(0.3)
        # The unread partition holds its buffer's worth, two answers, and no more.
        assert slow.cursor._receive.statistics().current_buffer_used == 2
        assert slow.records_fetched == 0  # nothing is decoded before it is read
        assert slow.bytes_fetched == slow.buffered_bytes > 0
        assert len(await read_n(slow, 2000)) == 2000


@pytest.mark.parametrize("name", ["kafka", "mock"])
async def test_offset_out_of_range_resets_as_configured(
    request: pytest.FixtureRequest, name: str
) -> None:
    # Tansu answers a fetch beyond the end with no error and no records, so
    # only Kafka and the mock can show the resets.
    broker = bc.broker_from(request, name)
    topic = new_topic(broker, "cons-oor", 1)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % i for i in range(10)], partition=0)
        async with pykaf.open_consumer(broker.bootstrap, auto_offset_reset="earliest") as c:
            pc = await c.consume_partition(topic, 0, 1000)
            got = await read_n(pc, 10)
            assert got[0].offset == 0
        async with pykaf.open_consumer(broker.bootstrap, auto_offset_reset="latest") as c:
            pc = await c.consume_partition(topic, 0, 1000)
            with trio.fail_after(10):
                while pc.position != 10:
                    await trio.sleep(0.01)
            await producer.send(topic, b"after", partition=0)
            assert [r.value for r in await read_n(pc, 1)] == [b"after"]
        async with pykaf.open_consumer(broker.bootstrap, auto_offset_reset="none") as c:
            pc = await c.consume_partition(topic, 0, 1000)
            with trio.fail_after(10):
                err = await pc.errors().receive()
            assert isinstance(err, pykaf.ConsumerError)
            assert isinstance(err.error, errors.OffsetOutOfRangeError)
            assert (err.topic, err.partition) == (topic, 0)


async def test_a_batch_larger_than_the_fetch_size_grows_it(broker: Any) -> None:
    topic = new_topic(broker, "cons-big", 1)
    big = bytes(random.Random(3).randbytes(300_000))
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send(topic, big, partition=0)
        await producer.send(topic, b"small", partition=0)
    async with pykaf.open_consumer(
        broker.bootstrap, max_partition_fetch_bytes=1024, fetch_max_bytes=4_000_000
    ) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        got = await read_n(pc, 2)
        assert [r.value for r in got] == [big, b"small"]


def _truncated_answer(records_bytes: bytes, cut: int) -> Any:
    """A Fetch answer's partition whose records field ends inside a batch (pre-KIP-74 brokers)."""
    return SimpleNamespace(
        error_code=0,
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=None,
        records=records_bytes[:cut],
    )


async def _fetcher_with(**config: Any) -> tuple[Any, pykaf.PartitionConsumer]:
    consumer = pykaf.Consumer(None, pykaf.ConsumerConfig(**config), None)  # type: ignore[arg-type]
    pc = pykaf.PartitionConsumer(consumer, "t", 0, 0, TransactionFilter("read_committed"))
    pc.cursor.restart_at(0)
    return BrokerFetcher(consumer, 1), pc


async def test_a_truncated_batch_grows_the_fetch_size_up_to_fetch_max_bytes() -> None:
    builder = BatchBuilder()
    builder.append(0, None, b"v" * 5000)
    raw = builder.build(base_offset=0)
    fetcher, pc = await _fetcher_with(max_partition_fetch_bytes=1024, fetch_max_bytes=8192)
    fetcher._partition(pc.cursor, _truncated_answer(raw, 1024))
    assert pc.cursor.max_bytes == len(raw)  # the partial batch's header told its size
    fetcher._partition(pc.cursor, _truncated_answer(raw + raw, len(raw) + 10))
    assert pc.cursor.max_bytes == 1024  # a whole batch came: back to the configured size
    assert [r.value for r in (await pc.next_batch())] == [b"v" * 5000]
    assert pc.position == 1


@pytest.mark.parametrize("skip", [False, True])
async def test_a_batch_over_fetch_max_bytes_stops_or_is_skipped(
    skip: bool, autojump_clock: trio.testing.MockClock
) -> None:
    builder = BatchBuilder()
    for _ in range(3):
        builder.append(0, None, b"v" * 5000)
    raw = builder.build(base_offset=0)
    fetcher, pc = await _fetcher_with(
        max_partition_fetch_bytes=1024, fetch_max_bytes=4096, skip_oversized_records=skip
    )
    fetcher._partition(pc.cursor, _truncated_answer(raw, 1024))
    assert pc.cursor.max_bytes == 4096
    fetcher._partition(pc.cursor, _truncated_answer(raw, 4096))
    err = pc.errors().receive_nowait()
    assert isinstance(err.error, errors.RecordTooLargeError)
    if skip:
        assert pc.fetch_offset == 3 and not pc.paused
        with trio.move_on_after(0.1):  # nothing to hand out, but the reader moves past it
            await pc.next_batch()
        assert pc.position == 3
    else:
        assert pc.fetch_offset == 0 and pc.paused


# ------------------------------------------------------------------ bad calls


async def test_bad_calls_raise_typed_errors(real_broker: Any) -> None:
    topic = new_topic(real_broker, "cons-bad", 2)
    async with pykaf.open_consumer(real_broker.bootstrap) as consumer:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await consumer.consume_partition(topic, 2)
        await consumer.consume_partition(topic, 0)
        with pytest.raises(errors.ConfigError, match="already"):
            await consumer.consume_partition(topic, 0)
        with pytest.raises(errors.ConfigError, match="offset"):
            await consumer.consume_partition(topic, 1, -7)
    with pytest.raises(errors.ClosedError):
        await consumer.consume_partition(topic, 1)
    with pytest.raises(errors.ConfigError, match="isolation_level"):
        async with pykaf.open_consumer(real_broker.bootstrap, isolation_level="dirty"):
            pass


async def test_iteration_ends_when_the_consumer_closes(real_broker: Any) -> None:
    topic = new_topic(real_broker, "cons-close", 1)
    async with pykaf.open_consumer(real_broker.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        seen: list[Any] = []

        async def reader() -> None:
            async for record in pc:
                seen.append(record)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.sleep(0.2)
            await consumer.aclose()
    assert seen == []
    with pytest.raises(errors.ClosedError):
        await pc.next_batch()


# ------------------------------------------------------------------ read_committed


async def test_read_committed_waits_for_an_open_transaction(real_broker: Any) -> None:
    # Kafka and Tansu hold the last stable offset below an open transaction.
    topic = new_topic(real_broker, "cons-lso", 1)
    conf = {**bc.QUIET, **real_broker.conf, "transactional.id": unique("txn")}
    producer = bc.ck.Producer(conf)
    await trio.to_thread.run_sync(producer.init_transactions, 20)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"txn-%d" % i, partition=0)
    assert await trio.to_thread.run_sync(producer.flush, 20) == 0
    async with (
        pykaf.open_consumer(real_broker.bootstrap, fetch_max_wait=0.05) as committed,
        pykaf.open_consumer(
            real_broker.bootstrap, isolation_level="read_uncommitted", fetch_max_wait=0.05
        ) as uncommitted,
    ):
        dirty = await uncommitted.consume_partition(topic, 0, pykaf.OLDEST)
        clean = await committed.consume_partition(topic, 0, pykaf.OLDEST)
        assert [r.value for r in await read_n(dirty, 5)] == [b"txn-%d" % i for i in range(5)]
        await trio.sleep(0.5)
        assert clean.records_fetched == 0
        assert clean.last_stable_offset == 0
        await trio.to_thread.run_sync(producer.commit_transaction, 20)
        got = await read_n(clean, 5)
        assert [r.value for r in got] == [b"txn-%d" % i for i in range(5)]
        assert [r.offset for r in got] == list(range(5))
        # The COMMIT marker is never handed out, but the position passes it.
        with trio.fail_after(10):
            while clean.last_stable_offset != 6:
                await trio.sleep(0.01)


# ------------------------------------------------------------------ statistics


async def test_statistics_show_positions_and_lag(broker: Any) -> None:
    topic = new_topic(broker, "cons-stats", 2)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"a"] * 30, partition=0)
        await producer.send_batch(topic, [b"b"] * 10, partition=1)
    async with pykaf.open_consumer(broker.bootstrap) as consumer:
        p0 = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        await consumer.consume_partition(topic, 1, 4)
        await read_n(p0, 30)
        with trio.fail_after(10):
            while True:
                stats = consumer.statistics()
                parts = {p.partition: p for p in stats.partitions}
                if parts[1].high_water_mark == 10 and parts[0].position == 30:
                    break
                await trio.sleep(0.01)
        assert parts[0].lag == 0
        assert parts[1].position == 4 and parts[1].lag == 6  # fetched, not yet read
        assert stats.lag == 6
        assert sum(b["requests"] for b in stats.brokers.values()) >= 1
        # records_fetched: over the consumer's life, closed partitions included
        handed = sum(p.records_fetched for p in stats.partitions)
        assert stats.records_fetched == handed >= 30
        await p0.aclose()
        await p0.aclose()  # twice: still counted once
        after = consumer.statistics()
        assert [p.partition for p in after.partitions] == [1]
        assert after.records_fetched == 30 + after.partitions[0].records_fetched


# ------------------------------------------------------------------ faults on the mock


async def _produce_and_consume_under_faults(
    cluster: Any, topic: str, faults: Any, n_per_partition: int = 3000
) -> None:
    """Produce with pykaf while ``faults`` runs, consume meanwhile; all records once, in order.

    ``cluster`` is a mock cluster or a Kafka cluster (anything with ``.bootstrap``).
    """
    mock = cluster
    expected = {p: [b"%d-%d" % (p, i) for i in range(n_per_partition)] for p in range(3)}
    async with pykaf.open_consumer(
        mock.bootstrap, fetch_max_wait=0.05, retry_backoff=0.02, request_timeout=3
    ) as consumer:
        pcs = [await consumer.consume_partition(topic, p, pykaf.OLDEST) for p in range(3)]
        got: dict[int, list[Any]] = {}

        async def reader(p: int) -> None:
            got[p] = await read_n(pcs[p], n_per_partition, timeout=60)

        async with trio.open_nursery() as nursery:
            for p in range(3):
                nursery.start_soon(reader, p)
            async with pykaf.open_producer(mock.bootstrap, retry_backoff=0.02) as producer:
                for chunk in range(0, n_per_partition, 100):
                    for p in range(3):
                        await producer.send_batch(
                            topic, expected[p][chunk : chunk + 100], partition=p
                        )
                    if chunk == n_per_partition // 3:
                        await faults()
        await trio.sleep(0.3)
        for p in range(3):
            assert [r.value for r in got[p]] == expected[p], f"partition {p}"
            assert [r.offset for r in got[p]] == list(range(n_per_partition))
            assert pcs[p].cursor._receive.statistics().current_buffer_used == 0


async def test_injected_fetch_errors_lose_and_repeat_nothing(mock_cluster: MockCluster) -> None:
    topic = unique("cons-ferr")
    mock_cluster.create_topic(topic, 3, 1)

    async def faults() -> None:
        mock_cluster.push_request_errors(
            FETCH,
            errors.NotLeaderOrFollowerError,
            errors.UnknownServerError,
            errors.FencedLeaderEpochError,
            errors.TimeoutError,
            errors.KafkaStorageError,
        )

    await _produce_and_consume_under_faults(mock_cluster, topic, faults)


async def test_leaders_move_while_consuming(mock_cluster: MockCluster) -> None:
    topic = unique("cons-move")
    mock_cluster.create_topic(topic, 3, 3)
    brokers = mock_cluster.broker_ids

    async def faults() -> None:
        for p in range(3):
            mock_cluster.set_partition_leader(topic, p, brokers[(p + 1) % len(brokers)])
        await trio.sleep(0.2)
        for p in range(3):
            mock_cluster.set_partition_leader(topic, p, brokers[(p + 2) % len(brokers)])

    await _produce_and_consume_under_faults(mock_cluster, topic, faults)


async def test_a_broker_down_then_up_while_consuming(mock_cluster: MockCluster) -> None:
    topic = unique("cons-down")
    mock_cluster.create_topic(topic, 3, 1)
    leader = bc.leaders({"bootstrap.servers": mock_cluster.bootstrap}, topic)[0]

    async def faults() -> None:
        mock_cluster.broker_down(leader)
        await trio.sleep(1.0)
        mock_cluster.broker_up(leader)

    await _produce_and_consume_under_faults(mock_cluster, topic, faults, 1500)


async def test_a_kafka_leader_down_then_up_while_consuming(kafka_cluster3: Any) -> None:
    """Kafka, three nodes, replication 3: partition 0's leader stops cleanly
    mid-stream (its followers take over) and starts again."""
    topic = unique("cons-kdown")
    await trio.to_thread.run_sync(kafka_cluster3.create_topic, topic, 3, 3)
    async with pykaf.open_admin(kafka_cluster3.bootstrap) as admin:
        leader = (await admin.describe_topic(topic)).partitions[0].leader

    async def faults() -> None:
        await trio.to_thread.run_sync(kafka_cluster3.broker_down, leader)
        await trio.to_thread.run_sync(kafka_cluster3.broker_up, leader)

    try:
        await _produce_and_consume_under_faults(kafka_cluster3, topic, faults, 1500)
    finally:
        if not kafka_cluster3.running(leader):
            await trio.to_thread.run_sync(kafka_cluster3.broker_up, leader)


async def test_aclose_inside_the_block_leaves_the_block_running(real_broker: Any) -> None:
    topic = new_topic(real_broker, "cons-aclose", 1)
    reached = []
    async with pykaf.open_consumer(real_broker.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        await consumer.aclose()
        await trio.sleep(0)  # a checkpoint: the block must not be cancelled
        reached.append(True)
        with pytest.raises(errors.ClosedError):
            await pc.next_batch()
    assert reached == [True]


async def test_a_refused_start_is_reported_once_and_retried(mock_cluster: MockCluster) -> None:
    # ListOffsets refused (an ACL missing, say): the partition reports it on
    # errors() once and keeps trying; when the broker relents, it reads.
    broker = bc.broker_from_mock(mock_cluster)
    topic = new_topic(broker, "cons-refused", 1)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send(topic, b"v", partition=0)
    list_offsets = 2
    mock_cluster.push_request_errors(list_offsets, *[errors.TopicAuthorizationError] * 3)
    async with pykaf.open_consumer(broker.bootstrap, retry_backoff=0.02) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        assert [r.value for r in await read_n(pc, 1)] == [b"v"]
        reported = []
        while True:
            try:
                reported.append(pc.errors().receive_nowait())
            except trio.WouldBlock:
                break
        assert len(reported) == 1
        assert isinstance(reported[0].error, errors.TopicAuthorizationError)
