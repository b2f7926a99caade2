"""The ``on_batch`` hook: one ``BatchEvent`` per produced or fetched record batch.

Against Tansu and the librdkafka mock (the fake cluster only where neither
can: aborted transactions). Produced batches must add up to what was sent,
with contiguous offsets; fetched batches must add up to what the consumer
handed out, and match the produced ones batch for batch; failures come as
one event per batch with its error; a hook that raises changes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf._consumer.read_committed import TransactionFilter
from pykaf.codec import BatchBuilder
from pykaf.testing import MockCluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

PRODUCE = 0
FAST = {"retry_backoff": 0.01, "retry_backoff_max": 0.05, "linger": 0.002}


def _new_topic(broker: Any, prefix: str, partitions: int) -> str:
    topic = unique(prefix)
    broker.create(topic, partitions)
    return topic


def _by_partition(events: list[pykaf.BatchEvent]) -> dict[int, list[pykaf.BatchEvent]]:
    out: dict[int, list[pykaf.BatchEvent]] = defaultdict(list)
    for e in events:
        out[e.partition].append(e)
    for batches in out.values():
        batches.sort(key=lambda e: e.base_offset if e.base_offset is not None else -1)
    return out


def _assert_contiguous(events: list[pykaf.BatchEvent], counts: dict[int, int]) -> None:
    """Per partition, the batches cover offsets 0 .. counts[p] - 1 with no gap or overlap."""
    for p, batches in _by_partition(events).items():
        expected = 0
        for e in batches:
            assert e.base_offset == expected, (p, [(b.base_offset, b.records) for b in batches])
            expected += e.records
        assert expected == counts[p]


async def _read(consumer: pykaf.Consumer, topic: str, counts: dict[int, int]) -> int:
    """Read ``counts[p]`` records of every partition from OLDEST; return how many came."""
    got = 0
    with trio.fail_after(30):
        for p, n in counts.items():
            pc = await consumer.consume_partition(topic, p, pykaf.OLDEST)
            seen = 0
            while seen < n:
                seen += len(await pc.next_batch())
            assert seen == n
            got += seen
    return got


@pytest.mark.parametrize("compression", ["none", "gzip"])
async def test_produced_and_fetched_batches_add_up_and_match(broker: Any, compression: str) -> None:
    topic = _new_topic(broker, "batch-events", 3)
    n = 1500
    produced: list[pykaf.BatchEvent] = []
    async with pykaf.open_client(broker.bootstrap) as client:
        async with pykaf.open_producer(
            client,
            on_batch=produced.append,
            batch_records=40,
            compression=compression,
            **FAST,
        ) as producer:
            for i in range(n):
                producer.send_nowait(topic, b"value %d " % i * 8, partition=i % 3)
            await producer.flush()
            stats = producer.statistics()
        leaders = {p: await client.leader(topic, p) for p in range(3)}
    counts = {p: len(range(p, n, 3)) for p in range(3)}

    assert len(produced) == stats.batches_sent and stats.retries == 0
    assert sum(e.records for e in produced) == n
    assert max(e.records for e in produced) == 40
    _assert_contiguous(produced, counts)
    for e in produced:
        assert e.kind == "produce" and e.topic == topic
        assert e.error is None and e.retries == 0 and e.dropped == 0
        assert e.compression == compression
        assert e.node_id == leaders[e.partition].node_id
        assert e.seconds is not None and e.seconds >= 0
        assert e.uncompressed_bytes is not None and e.bytes > 61  # more than a header
        if compression == "none":
            assert e.bytes == e.uncompressed_bytes
        else:  # repetitive values compress
            assert e.bytes < e.uncompressed_bytes

    fetched: list[pykaf.BatchEvent] = []
    async with pykaf.open_consumer(
        broker.bootstrap, on_batch=fetched.append, fetch_max_wait=0.05
    ) as consumer:
        assert await _read(consumer, topic, counts) == n
        delivered = sum(p.records_fetched for p in consumer.statistics().partitions)
    assert delivered == n == sum(e.records for e in fetched)
    # The broker keeps each produced batch whole: the consumer sees the same batches.
    key = lambda e: (e.partition, e.base_offset, e.records, e.bytes, e.compression)  # noqa: E731
    assert sorted(map(key, fetched)) == sorted(map(key, produced))
    for e in fetched:
        assert e.kind == "fetch" and e.topic == topic and e.dropped == 0
        assert e.error is None and e.seconds is None and e.retries == 0
        assert e.uncompressed_bytes is None
        assert e.node_id == leaders[e.partition].node_id  # type: ignore[union-attr]


async def test_records_before_the_fetch_position_are_counted_as_dropped(broker: Any) -> None:
    topic = _new_topic(broker, "batch-events-mid", 1)
    async with pykaf.open_producer(broker.bootstrap, **FAST) as producer:
        delivery = await producer.send_batch(topic, [b"%d" % i for i in range(100)], partition=0)
        assert await delivery.wait() == 100
    fetched: list[pykaf.BatchEvent] = []
    async with pykaf.open_consumer(
        broker.bootstrap, on_batch=fetched.append, fetch_max_wait=0.05
    ) as consumer:
        pc = await consumer.consume_partition(topic, 0, 30)
        records: list[Any] = []
        with trio.fail_after(20):
            while len(records) < 70:
                records.extend(await pc.next_batch())
    assert [r.offset for r in records] == list(range(30, 100))
    assert sum(e.records for e in fetched) == 70
    assert sum(e.dropped for e in fetched) == 30  # the first batch's records before 30
    assert sum(e.records + e.dropped for e in fetched) == 100


async def test_acks_0_batches_have_no_offset(broker: Any) -> None:
    topic = _new_topic(broker, "batch-events-acks0", 2)
    events: list[pykaf.BatchEvent] = []
    async with pykaf.open_producer(
        broker.bootstrap, on_batch=events.append, acks=0, idempotence=False, **FAST
    ) as producer:
        for i in range(200):
            producer.send_nowait(topic, b"x", partition=i % 2)
        await producer.flush()
    assert sum(e.records for e in events) == 200
    assert all(e.base_offset is None and e.error is None and e.bytes > 0 for e in events)


@pytest.mark.parametrize(
    ("error", "retries"),
    [(errors.NotLeaderOrFollowerError, 2), (errors.InvalidRequiredAcksError, 3)],
    ids=["retriable-exhausted", "not-retriable"],
)
async def test_a_failed_batch_gives_one_event_with_its_error(
    mock_cluster: MockCluster, error: type[errors.KafkaError], retries: int
) -> None:
    topic = unique("batch-events-fail")
    mock_cluster.create_topic(topic, 1, 1)
    events: list[pykaf.BatchEvent] = []
    async with pykaf.open_producer(
        mock_cluster.bootstrap,
        on_batch=events.append,
        idempotence=False,
        retries=retries,
        **FAST,
    ) as producer:
        first = await producer.send(topic, b"first", partition=0)
        attempts = retries + 1 if error.retriable else 1
        mock_cluster.push_request_errors(PRODUCE, *[error.code] * attempts)
        with pytest.raises(error):
            await producer.send(topic, b"lost", partition=0)
        second = await producer.send(topic, b"second", partition=0)
    assert [e.records for e in events] == [1, 1, 1]
    ok1, failed, ok2 = events
    assert ok1.base_offset == first.offset and ok2.base_offset == second.offset
    assert ok1.error is None and ok2.error is None and ok1.retries == ok2.retries == 0
    assert isinstance(failed.error, error) and failed.base_offset is None
    # A retriable error is sent again until the retries run out; a fatal one once.
    assert failed.retries == attempts - 1
    assert failed.node_id == ok1.node_id and failed.bytes == ok1.bytes - 1  # "lost" vs "first"
    assert failed.seconds is not None and failed.seconds >= 0


async def test_a_batch_that_never_left_the_buffer_has_no_broker(
    mock_cluster: MockCluster,
) -> None:
    topic = unique("batch-events-expired")
    mock_cluster.create_topic(topic, 1, 1)
    mock_cluster.set_partition_leader(topic, 0, None)  # nowhere to send it
    events: list[pykaf.BatchEvent] = []
    async with pykaf.open_producer(
        mock_cluster.bootstrap, on_batch=events.append, delivery_timeout=0.3, **FAST
    ) as producer:
        with pytest.raises(errors.KafkaTimeoutError):
            await producer.send(topic, b"stranded", partition=0)
    [stranded] = events
    assert isinstance(stranded.error, errors.KafkaTimeoutError) and stranded.records == 1
    assert stranded.node_id == -1 and stranded.seconds is None and stranded.retries == 0
    assert stranded.bytes == 0 and stranded.base_offset is None
    assert stranded.uncompressed_bytes is not None and stranded.uncompressed_bytes > 61


async def test_a_hook_that_raises_is_logged_and_delivery_goes_on(
    broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _new_topic(broker, "batch-events-raise", 2)
    calls = 0

    def broken(event: pykaf.BatchEvent) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("metrics backend down")

    caplog.set_level(logging.ERROR, logger="pykaf.metrics")
    async with pykaf.open_producer(broker.bootstrap, on_batch=broken, **FAST) as producer:
        sent = [await producer.send(topic, b"%d" % i, partition=i % 2) for i in range(10)]
        delivery = await producer.send_batch(topic, [b"bulk"] * 300, partition=1)
        assert await delivery.wait() == 300
    assert [md.offset for md in sent if md.partition == 0] == list(range(5))
    assert [md.offset for md in sent if md.partition == 1] == list(range(5))
    produced_calls = calls
    assert produced_calls >= 11
    counts = {0: 5, 1: 305}
    async with pykaf.open_consumer(
        broker.bootstrap, on_batch=broken, fetch_max_wait=0.05
    ) as consumer:
        assert await _read(consumer, topic, counts) == 310
    assert calls > produced_calls
    assert caplog.text.count("the on_batch hook raised") == calls
    assert "metrics backend down" in caplog.text


def test_on_batch_must_be_callable() -> None:
    with pytest.raises(errors.ConfigError, match="on_batch"):
        pykaf.ClientConfig(on_batch="print")  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="on_batch"):
        pykaf.ProducerConfig(on_batch=1)  # type: ignore[arg-type]


async def test_a_consumer_groups_fetched_batches_add_up(
    request: pytest.FixtureRequest, broker: Any
) -> None:
    if broker.name == "mock":
        request.getfixturevalue("mock_cluster").set_group_initial_rebalance_delay(200)
    topic = _new_topic(broker, "batch-events-group", 2)
    n = 400
    async with pykaf.open_producer(broker.bootstrap, batch_records=25, **FAST) as producer:
        for i in range(n):
            producer.send_nowait(topic, b"%d" % i, partition=i % 2)
        await producer.flush()
    fetched: list[pykaf.BatchEvent] = []
    got = 0
    async with pykaf.open_consumer_group(
        broker.bootstrap,
        unique("batch-events"),
        [topic],
        on_batch=fetched.append,
        fetch_max_wait=0.05,
        heartbeat_interval=0.2,
        session_timeout=6.0,
        rebalance_timeout=4.0,
    ) as group:
        with trio.fail_after(30):
            async for _record in group:
                got += 1
                if got == n:
                    break
    assert got == n == sum(e.records for e in fetched)
    assert len(fetched) == n // 25 and {e.kind for e in fetched} == {"fetch"}
    _assert_contiguous(fetched, {0: n // 2, 1: n // 2})


def test_the_sync_facades_report_batches(broker: Any) -> None:
    topic = _new_topic(broker, "batch-events-sync", 1)
    events: list[pykaf.BatchEvent] = []
    threads: set[int] = set()

    def hook(event: pykaf.BatchEvent) -> None:
        threads.add(threading.get_ident())
        events.append(event)

    with pykaf.sync.Producer(broker.bootstrap, on_batch=hook, **FAST) as producer:
        producer.send_many(topic, [b"%d" % i for i in range(50)], partition=0)
    assert [(e.kind, e.records, e.base_offset) for e in events] == [("produce", 50, 0)]
    with pykaf.sync.Consumer(broker.bootstrap, on_batch=hook, fetch_max_wait=0.05) as consumer:
        consumer.assign([(topic, 0, pykaf.OLDEST)])
        records = consumer.consume(50, timeout=20)
        while len(records) < 50:
            more = consumer.consume(50 - len(records), timeout=20)
            assert more, "no more records"
            records.extend(more)
    assert [(e.kind, e.records, e.base_offset) for e in events][1:] == [("fetch", 50, 0)]
    # The hook runs in the portal's trio thread, never in the caller's.
    assert threading.get_ident() not in threads


async def test_committed_transactions_markers_and_aborted_batches_are_dropped(
    kafka_or_fake_bootstrap: str,
) -> None:
    """Apache Kafka and the fake: Tansu and the mock list no aborted transactions in Fetch."""
    events: list[pykaf.BatchEvent] = []
    bootstrap = kafka_or_fake_bootstrap
    topic = unique("txn-batches")
    async with pykaf.open_admin(bootstrap) as admin:
        await admin.create_topic(topic, 1)
    async with pykaf.open_producer(bootstrap, transactional_id=unique("txn"), **FAST) as producer:
        for commit in (False, True):
            producer.begin_transaction()
            delivery = await producer.send_batch(topic, [b"t"] * 20, partition=0)
            await producer.flush()
            assert await delivery.wait() == 20
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    end = 42  # 20 aborted, a marker, 20 committed, a marker
    async with pykaf.open_consumer(
        bootstrap, on_batch=events.append, fetch_max_wait=0.05
    ) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        records: list[Any] = []
        with trio.fail_after(20):
            while pc.position < end:
                records.extend(await pc.next_batch())
    assert len(records) == 20 and pc.position == end
    assert sum(e.records for e in events) == 20
    # The aborted batch and both markers were fetched and dropped.
    assert sorted((e.base_offset, e.records, e.dropped) for e in events) == [
        (0, 0, 20),
        (20, 0, 1),
        (21, 20, 0),
        (41, 0, 1),
    ]


def _batch(base: int, count: int, compression: int = 0) -> bytes:
    builder = BatchBuilder(compression=compression)
    for i in range(count):
        builder.append(1_700_000_000_000, None, b"value %d" % (base + i))
    return builder.build(base_offset=base)


async def test_what_waits_beyond_the_last_stable_offset_is_neither_handed_out_nor_dropped() -> None:
    """A crafted Fetch answer: offsets 0-9 (gzip), 10-19, 20-29; last stable offset 15."""
    events: list[pykaf.BatchEvent] = []
    config = pykaf.ConsumerConfig(on_batch=events.append, partition_buffer=1)
    consumer = pykaf.Consumer(None, config, None)  # type: ignore[arg-type]
    pc = pykaf.PartitionConsumer(consumer, "t", 0, 0, TransactionFilter("read_committed"))
    pc.cursor.restart_at(3)
    fetcher = BrokerFetcher(consumer, 7)
    batches = [_batch(0, 10, compression=1), _batch(10, 10), _batch(20, 10)]
    answer = SimpleNamespace(
        error_code=0,
        high_watermark=30,
        last_stable_offset=15,
        log_start_offset=0,
        aborted_transactions=None,
        records=b"".join(batches),
    )
    fetcher._partition(pc.cursor, answer)
    assert pc.fetch_offset == 15
    assert events == []  # the answer is decoded, and its batches reported, as it is read
    # The reader's buffer (one answer) is full: nothing is handed over, nor reported.
    pc.cursor.restart_at(3)  # back where the full buffer began
    fetcher._partition(pc.cursor, answer)
    assert pc.fetch_offset == 3
    records = await pc.next_batch()
    assert [r.offset for r in records] == list(range(3, 15))
    assert [(e.base_offset, e.records, e.dropped, e.bytes, e.compression) for e in events] == [
        (0, 7, 3, len(batches[0]), "gzip"),  # 0-2 are before the fetch position
        (10, 5, 0, len(batches[1]), "none"),  # 15-19 wait for the transaction to end
    ]  # 20-29 were not gone through at all: no event
    assert all(e.node_id == 7 and e.kind == "fetch" for e in events)
    assert sum(e.records for e in events) == len(records)
