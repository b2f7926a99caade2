"""The consumer's memory is bounded by bytes, whatever a broker sends.

Fetched record sets are kept as bytes, counted against ``fetch_buffer_bytes``
over all partitions, and decoded about ``max_partition_fetch_bytes`` at a time
as the application reads. Checked on crafted answers (header scanning, piece
by piece decoding, read_committed across pieces, a corrupt piece, seek), on
the fake cluster made to ignore ``max_partition_fetch_bytes`` as Tansu does,
and on Tansu itself.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._consumer.fetched import scan_record_set
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf._consumer.read_committed import TransactionFilter
from pykaf.codec import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchBuilder,
    decode_record_set,
    encode_control_batch,
)
from pykaf.testing import FakeCluster, open_fake_cluster
from pykaf.testing._fake import data as fake_data

TOPIC = "fetchmem"
TS = 1_700_000_000_000


def batch(base: int, count: int, *, size: int = 100, pid: int = -1, txn: bool = False) -> bytes:
    """``count`` records of ``size`` bytes each, from offset ``base``."""
    builder = BatchBuilder(max_bytes=1 << 24)
    for i in range(count):
        builder.append(TS, None, b"%08d" % (base + i) + b"x" * (size - 8))
    return builder.build(
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return encode_control_batch(
        CONTROL_COMMIT if commit else CONTROL_ABORT,
        producer_id=pid,
        producer_epoch=0,
        timestamp=TS,
        base_offset=offset,
    )


def legacy_message(offset: int, value: bytes) -> bytes:
    """A magic 0 message (uncompressed, no key)."""
    body = struct.pack(">bb", 0, 0) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def answer(records: bytes, lso: int = -1, aborted: list[tuple[int, int]] | None = None) -> Any:
    """A partition of a Fetch answer, as the fetcher gets it."""
    return SimpleNamespace(
        error_code=0,
        high_watermark=10**6,
        last_stable_offset=lso,
        log_start_offset=0,
        aborted_transactions=[
            SimpleNamespace(producer_id=p, first_offset=f) for p, f in (aborted or [])
        ],
        records=records,
    )


def crafted(
    isolation_level: str = "read_uncommitted", **config: Any
) -> tuple[pykaf.Consumer, BrokerFetcher, pykaf.PartitionConsumer]:
    """A consumer with no cluster, a fetcher and a partition consumer at offset 0."""
    cfg = pykaf.ConsumerConfig(isolation_level=isolation_level, **config)
    consumer = pykaf.Consumer(None, cfg, None)  # type: ignore[arg-type]
    pc = pykaf.PartitionConsumer(consumer, "t", 0, 0, TransactionFilter(isolation_level))
    pc.cursor.restart_at(0)
    return consumer, BrokerFetcher(consumer, 1), pc


# ------------------------------------------------------------------ header scanning


def test_scanning_headers_finds_what_decoding_finds() -> None:
    batches = [batch(0, 10), batch(10, 5), marker(15, 7, True), batch(16, 20)]
    data = b"".join(batches)
    decoded = decode_record_set(data).batches
    scanned = scan_record_set(data, 0, -1, 1)  # one batch per piece
    assert scanned.cuts == [sum(map(len, batches[: i + 1])) for i in range(len(batches))]
    assert scanned.end == decoded[-1].base_offset + decoded[-1].last_offset_delta + 1 == 36
    assert scanned.epochs == [(b.base_offset, b.partition_leader_epoch) for b in decoded]
    assert not scanned.incomplete
    # Pieces of at least 2 KiB: batches are grouped, never split.
    grouped = scan_record_set(data, 0, -1, 2048)
    assert set(grouped.cuts) <= set(scanned.cuts) and grouped.cuts[-1] == len(data)
    assert len(grouped.cuts) < len(scanned.cuts)


def test_scanning_stops_at_the_last_stable_offset_and_before_a_partial_batch() -> None:
    first, second, third = batch(0, 10), batch(10, 10), batch(20, 10)
    data = first + second + third
    # Batches from the last stable offset on are left out: fetched again later.
    assert scan_record_set(data, 0, 10, 1 << 20).cuts == [len(first)]
    assert scan_record_set(data, 0, 10, 1 << 20).end == 10
    # A batch straddling it is kept; the next fetch starts at it.
    straddling = scan_record_set(data, 0, 15, 1 << 20)
    assert straddling.cuts == [len(first + second)] and straddling.end == 15
    # A partial batch after whole ones is left for the next fetch.
    cut = scan_record_set(data[:-5], 3, -1, 1 << 20)
    assert cut.cuts == [len(first + second)] and cut.end == 20 and not cut.incomplete
    # Only a partial batch: its declared size tells how much to fetch.
    partial = scan_record_set(first[:100], 0, -1, 1 << 20)
    assert partial.cuts == [] and partial.incomplete and partial.partial_size == len(first)
    assert scan_record_set(first[:5], 0, -1, 1 << 20).incomplete


def test_scanning_reads_legacy_messages_and_refuses_garbage() -> None:
    data = legacy_message(4, b"a") + legacy_message(5, b"b")
    scanned = scan_record_set(data, 4, -1, 1)
    assert scanned.cuts == [len(data) // 2, len(data)] and scanned.end == 6
    assert [r.offset for b in decode_record_set(data).batches for r in b.records] == [4, 5]
    bad_magic = bytearray(batch(0, 1))
    bad_magic[16] = 7
    with pytest.raises(errors.CorruptRecordError, match="magic"):
        scan_record_set(bytes(bad_magic), 0, -1, 1)
    with pytest.raises(errors.CorruptRecordError, match="too small"):
        scan_record_set(struct.pack(">qi", 0, 3) + b"\0" * 20, 0, -1, 1)


# ------------------------------------------------------------------ decoding piece by piece


async def test_a_large_answer_is_decoded_a_piece_at_a_time() -> None:
    consumer, fetcher, pc = crafted(max_partition_fetch_bytes=4096)
    batches = [batch(i * 20, 20) for i in range(10)]  # ~2.3 KB each: two per piece
    data = b"".join(batches)
    fetcher._partition(pc.cursor, answer(data))
    assert pc.fetch_offset == 200
    assert pc.records_fetched == 0  # nothing decoded yet
    assert consumer.budget.used == pc.buffered_bytes == pc.bytes_fetched == len(data)
    first = await pc.next_batch()
    assert [r.offset for r in first] == list(range(40))
    assert pc.records_fetched == 40 and pc.position == 40
    assert pc.buffered_bytes == len(data)  # the answer's bytes are held until it is read
    got = list(first)
    while len(got) < 200:
        got.extend(await pc.next_batch())
    assert [r.offset for r in got] == list(range(200))
    assert [r.value for r in got] == [b"%08d" % i + b"x" * 92 for i in range(200)]
    assert consumer.budget.used == pc.buffered_bytes == 0
    assert consumer.statistics().peak_buffered_bytes == len(data)


async def test_iteration_goes_through_every_piece_and_answer() -> None:
    _consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1, partition_buffer=3)
    fetcher._partition(pc.cursor, answer(batch(0, 3) + batch(3, 3)))
    fetcher._partition(pc.cursor, answer(batch(6, 3)))
    fetcher._partition(pc.cursor, answer(batch(0, 9)))  # before the position: nothing new
    seen = []
    with trio.move_on_after(0.2):
        async for record in pc:
            seen.append(record.offset)
            assert pc.position == record.offset + 1
    assert seen == list(range(9))


async def test_read_committed_filters_a_transaction_spread_over_pieces() -> None:
    """Producer 7 aborts (offsets 0-19 and its marker 20), producer 8 commits (21-30, 31)."""
    log = [
        batch(0, 10, pid=7, txn=True),
        batch(10, 10, pid=7, txn=True),
        marker(20, 7, False),
        batch(21, 10, pid=8, txn=True),
        marker(31, 8, True),
        batch(32, 10, pid=7, txn=True),  # 7's next transaction, committed below
        marker(42, 7, True),
        batch(43, 5),
    ]
    data = b"".join(log)
    whole = TransactionFilter("read_committed").filter(
        decode_record_set(data).batches, [(7, 0)], 48, 0
    )
    _consumer, fetcher, pc = crafted("read_committed", max_partition_fetch_bytes=1)
    fetcher._partition(pc.cursor, answer(data, lso=48, aborted=[(7, 0)]))
    got: list[Any] = []
    with trio.move_on_after(0.2):
        while True:
            got.extend(await pc.next_batch())
    assert [r.offset for r in got] == [r.offset for r in whole.records]
    assert [r.offset for r in got] == list(range(21, 31)) + list(range(32, 42)) + list(
        range(43, 48)
    )
    assert pc.position == 48
    assert fetcher.aborted_records == 20


async def test_a_corrupt_piece_stops_the_partition_where_it_is() -> None:
    consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1)
    good, bad = batch(0, 5), bytearray(batch(5, 5))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    fetcher._partition(pc.cursor, answer(good + bytes(bad) + batch(10, 5)))
    assert pc.fetch_offset == 15  # the headers are fine: nothing is decoded yet
    assert [r.offset for r in await pc.next_batch()] == list(range(5))
    with trio.move_on_after(0.2):
        await pc.next_batch()
    error = pc.errors().receive_nowait().error
    assert isinstance(error, errors.CorruptRecordError)
    # Paused at the corrupt batch, nothing held: resume() fetches from there again.
    assert pc.paused and pc.position == 5 and pc.fetch_offset == 5
    assert consumer.budget.used == 0


async def test_seek_and_close_give_the_bytes_back() -> None:
    consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1, partition_buffer=2)
    fetcher._partition(pc.cursor, answer(batch(0, 5) + batch(5, 5)))
    fetcher._partition(pc.cursor, answer(batch(10, 5)))
    assert [r.offset for r in await pc.next_batch()] == list(range(5))
    assert consumer.budget.used > 0
    pc.seek(3)
    assert consumer.budget.used == pc.buffered_bytes == 0
    assert pc.position == pc.fetch_offset == 3
    fetcher._partition(pc.cursor, answer(batch(0, 5) + batch(5, 5)))
    assert [r.offset for r in await pc.next_batch()] == [3, 4]
    await pc.aclose()
    assert consumer.budget.used == 0


async def test_a_full_budget_stops_fetching_and_reading_resumes_it() -> None:
    consumer, fetcher, pc = crafted(fetch_buffer_bytes=1000, partition_buffer=10)
    woken = []
    consumer.budget.on_room(lambda: woken.append(True))
    assert pc.cursor.fetchable()
    fetcher._partition(pc.cursor, answer(batch(0, 20)))  # ~2.3 KB: more than the budget
    assert consumer.budget.full and not pc.cursor.fetchable()
    await pc.next_batch()
    assert not consumer.budget.full and pc.cursor.fetchable() and woken == [True]


def test_fetch_buffer_bytes_is_validated() -> None:
    assert pykaf.ConsumerConfig().fetch_buffer_bytes == 64 * 1024 * 1024
    with pytest.raises(errors.ConfigError, match="fetch_buffer_bytes"):
        pykaf.ConsumerConfig(fetch_buffer_bytes=0)


# ------------------------------------------------------------------ on the fake cluster

#: what the patched fake cluster sends per partition, whatever the consumer asks
GREEDY = 4 * 1024 * 1024


@pytest.fixture
async def greedy_cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeCluster]:
    """A fake cluster that ignores ``max_partition_fetch_bytes``, as Tansu does."""
    real = fake_data._fetch_partition

    def greedy(ctx: Any, topic: str, fp: Any, isolation: int, max_bytes: int, min_one: bool) -> Any:
        return real(ctx, topic, fp, isolation, GREEDY if max_bytes > 0 else 0, min_one)

    monkeypatch.setattr(fake_data, "_fetch_partition", greedy)
    async with open_fake_cluster(brokers=1) as fake:
        yield fake
        assert not fake.handler_errors


async def produce(bootstrap: str, partitions: int, per_partition: int) -> None:
    async with pykaf.open_producer(bootstrap, batch_records=1000, linger=0.01) as producer:
        for p in range(partitions):
            for start in range(0, per_partition, 10_000):
                values = [b"%08d" % i + b"x" * 92 for i in range(start, start + 10_000)]
                await producer.send_batch(TOPIC, values, partition=p)


@pytest.mark.parametrize("partitions", [1, 3])
async def test_the_bound_holds_when_a_broker_sends_more_than_asked(
    greedy_cluster: FakeCluster, partitions: int
) -> None:
    per_partition = 150_000 // partitions  # 15 MB of records in all
    greedy_cluster.create_topic(TOPIC, partitions=partitions)
    await produce(greedy_cluster.bootstrap, partitions, per_partition)
    bound = 1024 * 1024
    piece = 256 * 1024
    async with pykaf.open_consumer(
        greedy_cluster.bootstrap,
        fetch_buffer_bytes=bound,
        fetch_max_bytes=GREEDY,
        max_partition_fetch_bytes=piece,
        fetch_max_wait=0.05,
    ) as consumer:
        pcs = [await consumer.consume_partition(TOPIC, p, pykaf.OLDEST) for p in range(partitions)]
        got: list[list[int]] = [[] for _ in pcs]
        longest = 0
        # Past the bound: one answer (the one asked for while under it), and with more
        # partitions one per partition whose reader waited with nothing buffered.
        most = bound + GREEDY * (1 + (partitions if partitions > 1 else 0)) + piece
        with trio.fail_after(120):
            while sum(map(len, got)) < per_partition * partitions:
                for p, pc in enumerate(pcs):
                    if len(got[p]) == per_partition:
                        continue
                    records = await pc.next_batch()
                    longest = max(longest, len(records))
                    got[p].extend(int(r.value[:8]) for r in records)
                    assert consumer.statistics().buffered_bytes <= most
                await trio.sleep(0.001)  # a slow reader: the fetcher runs ahead of it
        stats = consumer.statistics()
        # Answers of up to 4 MiB came, yet never was more than that held, nor more
        # than a piece (256 KiB, plus a batch of ~110 KB) decoded at once.
        assert bound < stats.peak_buffered_bytes <= most
        assert max(b["bytes"] / b["requests"] for b in stats.brokers.values()) > piece
        assert longest <= (piece + 120_000) // 100
        await trio.sleep(0.2)
        assert all(pc.buffered_bytes == 0 for pc in pcs)
    for p in range(partitions):
        assert got[p] == list(range(per_partition)), f"partition {p}: lost, repeated or unordered"


async def test_an_honest_broker_is_asked_for_no_more_than_the_budget_has_room_for() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, partitions=1)
        await produce(cluster.bootstrap, 1, 60_000)  # 6 MB in batches of ~110 KB
        bound = 1024 * 1024
        async with pykaf.open_consumer(
            cluster.bootstrap,
            fetch_buffer_bytes=bound,
            max_partition_fetch_bytes=bound // 2,
            partition_buffer=100,
            fetch_max_wait=0.05,
        ) as consumer:
            pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
            got: list[int] = []
            with trio.fail_after(60):
                while len(got) < 60_000:
                    got.extend(int(r.value[:8]) for r in await pc.next_batch())
                    await trio.sleep(0.002)  # slow: the fetcher fills the budget meanwhile
            peak = consumer.statistics().peak_buffered_bytes
        assert not cluster.handler_errors
    assert got == list(range(60_000))
    # Never more than the budget plus the one whole batch a broker sends anyway.
    assert bound - bound // 2 < peak <= bound + 120_000


async def test_an_unread_consumer_stops_fetching(greedy_cluster: FakeCluster) -> None:
    greedy_cluster.create_topic(TOPIC, partitions=2)
    await produce(greedy_cluster.bootstrap, 2, 20_000)
    async with pykaf.open_consumer(
        greedy_cluster.bootstrap, fetch_buffer_bytes=1, fetch_max_wait=0.05
    ) as consumer:
        pcs = [await consumer.consume_partition(TOPIC, p, pykaf.OLDEST) for p in range(2)]
        with trio.fail_after(10):
            while consumer.statistics().buffered_bytes == 0:
                await trio.sleep(0.01)
        await trio.sleep(0.5)
        stats = consumer.statistics()
        (broker,) = stats.brokers.values()
        assert broker["requests"] == 1  # one answer, then the budget is full
        assert stats.buffered_bytes == sum(pc.buffered_bytes for pc in pcs) > 0
        got = []
        got: list[list[int]] = [[], []]
        with trio.fail_after(30):
            for p, pc in enumerate(pcs):
                while len(got[p]) < 20_000:
                    got[p].extend(int(r.value[:8]) for r in await pc.next_batch())
        assert got == [list(range(20_000))] * 2
        # All read: the budget has room, the fetcher asks again (for whatever comes next).
        assert consumer.statistics().buffered_bytes == 0
        with trio.fail_after(10):
            while consumer.statistics().brokers[broker["node_id"]]["requests"] == 1:
                await trio.sleep(0.01)


# ------------------------------------------------------------------ on Tansu


async def test_tansu_answers_beyond_max_partition_fetch_bytes_are_read_in_pieces(
    tansu_broker: Any,
) -> None:
    topic = f"fetchmem-{trio.current_time():.0f}-{id(tansu_broker)}"
    tansu_broker.create(topic, 1)
    n = 30_000
    async with pykaf.open_producer(tansu_broker.bootstrap, batch_records=1000) as producer:
        for start in range(0, n, 10_000):
            values = [b"%08d" % i + b"x" * 92 for i in range(start, start + 10_000)]
            await producer.send_batch(topic, values, partition=0)
    piece = 64 * 1024
    async with pykaf.open_consumer(
        tansu_broker.bootstrap,
        max_partition_fetch_bytes=piece,
        fetch_buffer_bytes=piece,
        partition_buffer=1,
        fetch_max_wait=0.05,
    ) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        got: list[int] = []
        longest = 0
        with trio.fail_after(60):
            while len(got) < n:
                records = await pc.next_batch()
                longest = max(longest, len(records))
                got.extend(int(r.value[:8]) for r in records)
        stats = consumer.statistics()
    assert got == list(range(n))
    # One answer held at a time (the budget is one piece): the peak is the largest answer,
    # more than was asked for; yet no list held more than a piece (plus one batch).
    assert stats.peak_buffered_bytes > piece
    assert longest <= (piece + 120_000) // 100


async def test_fetched_waits_for_an_answer_and_leaves_the_decoding_to_take_decoded() -> None:
    """A reader outside trio (pykaf.aio) waits with fetched(), then decodes as it takes."""
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, partitions=1)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            for start in range(0, 30, 10):  # three batches, each a piece of its own
                values = [b"%d" % i for i in range(start, start + 10)]
                await producer.send_batch(TOPIC, values, partition=0)
                await producer.flush()
        async with pykaf.open_consumer(
            cluster.bootstrap, fetch_max_wait=0.05, max_partition_fetch_bytes=1
        ) as consumer:
            pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
            with trio.fail_after(30):
                assert await pc.fetched()
            assert await pc.fetched()  # an answer waits: at once
            assert (pc.records_fetched, pc.position) == (0, 0)  # nothing decoded yet
            got = pc.take_decoded()  # decodes one piece, not the whole answer
            assert [r.offset for r in got] == list(range(10))
            assert pc.records_fetched == 10 and pc.position == 10
            while len(got) < 30:
                with trio.fail_after(30):
                    assert await pc.fetched()
                got += pc.take_decoded()
            assert [r.value for r in got] == [b"%d" % i for i in range(30)]
            assert pc.records_fetched == 30
            await pc.aclose()
            assert not await pc.fetched()  # closed: False, no error


async def test_decoded_and_take_nowait_hand_out_what_the_core_decoded() -> None:
    """A reader in another thread (pykaf.sync) waits with decoded() and takes without decoding."""
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, partitions=1)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            await producer.send_batch(TOPIC, [b"%d" % i for i in range(10)], partition=0)
        async with pykaf.open_consumer(cluster.bootstrap, fetch_max_wait=0.05) as consumer:
            pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
            assert pc.take_nowait(5) == []  # nothing decoded yet: no wait, no decode
            with trio.fail_after(30):
                assert await pc.decoded()
            assert await pc.decoded()  # records wait: at once, and none handed out
            assert pc.position == 0
            assert [r.offset for r in pc.take_nowait(3)] == [0, 1, 2]
            assert pc.position == 3
            assert pc.next_nowait().offset == 3
            rest = pc.take_nowait(100)
            assert [r.value for r in rest] == [b"%d" % i for i in range(4, 10)]
            assert pc.position == 10
            assert pc.take_nowait(1) == [] and pc.next_nowait() is None
            rest.clear()  # the list read out is the caller's: the position stays
            assert pc.position == 10
            await pc.aclose()
            assert not await pc.decoded()  # closed: False, no error
