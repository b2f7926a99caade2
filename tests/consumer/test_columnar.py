"""next_batch(columnar=True): the row path's records, positions and skips, as columns.

On crafted fetch answers a columnar partition consumer and a row one are fed
the same bytes and must hand out the same records and reach the same
positions (pieces, read_committed across pieces, batch events, a corrupt
piece, seek, and row and columnar calls mixed on one consumer). Then on Apache
Kafka, Tansu, the librdkafka mock and pykaf's fake cluster: data written by
confluent-kafka and by pykaf, an aborted confluent-kafka transaction under
read_committed (group claims: tests/group/test_group_columnar.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from test_fetch_buffer import answer, crafted, marker

import pykaf
from pykaf import ColumnBatch, errors
from pykaf.codec import BatchBuilder
from pykaf.testing import open_fake_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

TS = 1_700_000_000_000


def rows(batches: Sequence[ColumnBatch]) -> list[tuple[Any, ...]]:
    """Every record of ``batches`` as (offset, timestamp, key, value, headers, timestamp type)."""
    return [
        (b.offsets[i], b.timestamps[i], b.key(i), b.value(i), b.headers(i), b.timestamp_types[i])
        for b in batches
        for i in range(len(b))
    ]


def record_rows(records: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type) for r in records]


def mixed_batch(
    base: int, count: int, *, compression: int = 0, pid: int = -1, txn: bool = False
) -> bytes:
    """``count`` records with keys, nulls and headers, from offset ``base``."""
    builder = BatchBuilder(compression=compression, max_bytes=1 << 24)
    for i in range(count):
        n = base + i
        key = None if n % 4 == 0 else b"k%d" % n
        headers = [("n", b"%d" % n), ("none", None)] if n % 3 == 0 else None
        builder.append(TS + n, key, b"v%d-" % n + b"x" * (n % 50), headers)
    return builder.build(
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


async def drain(pc: pykaf.PartitionConsumer, *, columnar: bool) -> list[Any]:
    """Everything ``pc`` hands out until it waits: ColumnBatches or records."""
    out: list[Any] = []
    with trio.move_on_after(0.2):
        while True:
            got = await pc.next_batch(columnar=columnar)
            if columnar:
                assert len(got) > 0
                assert got.next_offset == pc.position
                assert (got.topic, got.partition) == (pc.topic, pc.partition)
                out.append(got)
            else:
                out.extend(got)
    return out


# ------------------------------------------------------------------ crafted answers


async def test_columns_piece_by_piece_match_the_rows() -> None:
    batches = [mixed_batch(i * 20, 20, compression=i % 5) for i in range(10)]
    pcs = []
    for _ in range(2):
        consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1)  # a batch a piece
        # A trailing partial batch is left for the next fetch, which starts
        # with a batch already read (dropped whole).
        fetcher._partition(pc.cursor, answer(b"".join(batches[:9]) + batches[9][:-7]))
        fetcher._partition(pc.cursor, answer(batches[8] + batches[9]))
        pcs.append((consumer, fetcher, pc))
    (row_consumer, row_fetcher, row_pc), (col_consumer, col_fetcher, col_pc) = pcs
    records = await drain(row_pc, columnar=False)
    columns = await drain(col_pc, columnar=True)
    assert len(columns) == 10
    assert rows(columns) == record_rows(records)
    assert [r[0] for r in rows(columns)] == list(range(200))
    assert col_pc.position == row_pc.position == 200
    assert col_pc.records_fetched == row_pc.records_fetched == 200
    assert col_consumer.budget.used == row_consumer.budget.used == 0
    # From inside a batch: its earlier records are left out.
    for fetcher, pc in ((row_fetcher, row_pc), (col_fetcher, col_pc)):
        pc.seek(185)
        fetcher._partition(pc.cursor, answer(batches[9]))
    records = await drain(row_pc, columnar=False)
    columns = await drain(col_pc, columnar=True)
    assert rows(columns) == record_rows(records)
    assert [r[0] for r in rows(columns)] == list(range(185, 200))


async def test_read_committed_over_pieces_skips_what_the_row_path_skips() -> None:
    log = [
        mixed_batch(0, 10, pid=7, txn=True),
        mixed_batch(10, 10, pid=7, txn=True),
        marker(20, 7, False),
        mixed_batch(21, 10, pid=8, txn=True),
        marker(31, 8, True),
        mixed_batch(32, 10, pid=7, txn=True, compression=3),
        marker(42, 7, True),
        mixed_batch(43, 5),
        mixed_batch(48, 6),  # straddles the last stable offset (50)
    ]
    data = b"".join(log)
    out = {}
    for columnar in (False, True):
        events: list[pykaf.BatchEvent] = []
        _consumer, fetcher, pc = crafted(
            "read_committed", max_partition_fetch_bytes=1, on_batch=events.append
        )
        fetcher._partition(pc.cursor, answer(data, lso=50, aborted=[(7, 0)]))
        got = await drain(pc, columnar=columnar)
        out[columnar] = (rows(got) if columnar else record_rows(got), pc.position, events)
        assert fetcher.aborted_records == 20
    assert out[True] == out[False]
    handed = [r[0] for r in out[True][0]]
    assert handed == list(range(21, 31)) + list(range(32, 42)) + list(range(43, 50))
    assert out[True][1] == 50
    assert len(out[True][2]) == 9  # one per batch starting below the last stable offset


async def test_row_and_columnar_calls_mixed_lose_and_repeat_nothing() -> None:
    _consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1)  # a batch a piece
    fetcher._partition(pc.cursor, answer(b"".join(mixed_batch(i * 10, 10) for i in range(8))))
    seen: list[int] = []
    async for record in pc:  # part of the first piece, one by one
        seen.append(record.offset)
        assert pc.position == record.offset + 1
        if len(seen) == 3:
            break
    rest = await pc.next_batch(columnar=True)  # the rest of that piece, as columns
    assert list(rest.offsets) == list(range(3, 10)) and rest.next_offset == pc.position == 10
    seen += list(rest.offsets)
    seen += [r.offset for r in await pc.next_batch()]
    columns = await pc.next_batch(columnar=True)
    seen += list(columns.offsets)
    assert pc.position == columns.next_offset == seen[-1] + 1
    record = await pc.__anext__()
    seen.append(record.offset)
    seen += [r.offset for r in await pc.next_batch()]
    for batch in await drain(pc, columnar=True):
        seen += list(batch.offsets)
    assert seen == list(range(80))
    assert pc.position == 80


async def test_a_corrupt_piece_stops_the_columnar_reader_where_it_is() -> None:
    consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1)
    good, bad = mixed_batch(0, 5), bytearray(mixed_batch(5, 5))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    fetcher._partition(pc.cursor, answer(good + bytes(bad) + mixed_batch(10, 5)))
    assert list((await pc.next_batch(columnar=True)).offsets) == list(range(5))
    with trio.move_on_after(0.2):
        await pc.next_batch(columnar=True)
    error = pc.errors().receive_nowait().error
    assert isinstance(error, errors.CorruptRecordError)
    assert pc.paused and pc.position == 5 and pc.fetch_offset == 5
    assert consumer.budget.used == 0


async def test_seek_and_close_with_columns() -> None:
    consumer, fetcher, pc = crafted(max_partition_fetch_bytes=1)
    fetcher._partition(pc.cursor, answer(mixed_batch(0, 5) + mixed_batch(5, 5)))
    assert len(await pc.next_batch(columnar=True)) == 5
    pc.seek(3)
    assert consumer.budget.used == 0 and pc.position == 3
    fetcher._partition(pc.cursor, answer(mixed_batch(0, 5) + mixed_batch(5, 5)))
    first = await pc.next_batch(columnar=True)
    assert list(first.offsets) == [3, 4] and first.next_offset == 5
    await pc.aclose()
    with pytest.raises(errors.ClosedError):
        await pc.next_batch(columnar=True)


# ------------------------------------------------------------------ brokers


async def read_columns(
    pc: pykaf.PartitionConsumer, n: int, timeout: float = 20.0
) -> list[ColumnBatch]:
    out: list[ColumnBatch] = []
    got = 0
    with trio.move_on_after(timeout):
        while got < n:
            batch = await pc.next_batch(columnar=True)
            assert batch.next_offset == pc.position
            out.append(batch)
            got += len(batch)
    assert got == n, f"{pc.topic}/{pc.partition}: {got} of {n} records"
    return out


async def read_records(pc: pykaf.PartitionConsumer, n: int, timeout: float = 20.0) -> list[Any]:
    out: list[Any] = []
    with trio.move_on_after(timeout):
        while len(out) < n:
            out.extend(await pc.next_batch())
    assert len(out) == n
    return out


def check_arrow(batches: Sequence[ColumnBatch], records: Sequence[Any]) -> None:
    """to_arrow() of the batches holds the records the row path handed out."""
    pa = pytest.importorskip("pyarrow")
    table = pa.Table.from_batches([b.to_arrow() for b in batches])
    assert table.column("offset").to_pylist() == [r.offset for r in records]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in records]
    assert table.column("key").to_pylist() == [r.key for r in records]
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] for r in records
    ]


@pytest.mark.broker
async def test_what_confluent_kafka_wrote_reads_the_same_as_columns(broker: Any) -> None:
    topic = unique("col-ck")
    broker.create(topic, 3)
    conf = {**bc.QUIET, **broker.conf, "linger.ms": 5, "compression.type": "gzip"}
    rng = random.Random(5)

    def write() -> None:
        producer = bc.ck.Producer(conf)
        for i in range(1500):
            producer.produce(
                topic,
                value=None if i % 13 == 0 else rng.randbytes(rng.randrange(0, 300)),
                key=None if i % 4 == 0 else b"key-%d" % i,
                partition=i % 3,
                timestamp=1_600_000_000_000 + i,
                headers=[("n", b"%d" % i), ("e", b"")] if i % 2 else None,
            )
        assert producer.flush(20) == 0

    await trio.to_thread.run_sync(write)
    async with (
        pykaf.open_consumer(broker.bootstrap) as col_consumer,
        pykaf.open_consumer(broker.bootstrap) as row_consumer,
    ):
        for p in range(3):
            col_pc = await col_consumer.consume_partition(topic, p, pykaf.OLDEST)
            row_pc = await row_consumer.consume_partition(topic, p, pykaf.OLDEST)
            columns = await read_columns(col_pc, 500)
            records = await read_records(row_pc, 500)
            assert rows(columns) == record_rows(records)
            assert [r[0] for r in rows(columns)] == list(range(500))
            assert col_pc.position == row_pc.position == 500
            check_arrow(columns, records)


@pytest.mark.broker
async def test_an_aborted_confluent_kafka_transaction_is_skipped_as_columns(
    kafka_broker: Any,
) -> None:
    topic = unique("col-txn")
    kafka_broker.create(topic, 1)
    conf = {**bc.QUIET, **kafka_broker.conf}

    def write() -> list[bytes]:
        txn = bc.ck.Producer({**conf, "transactional.id": unique("col-tx")})
        plain = bc.ck.Producer(conf)
        txn.init_transactions(20)
        kept: list[bytes] = []
        for round_ in range(4):
            txn.begin_transaction()
            for i in range(30):
                txn.produce(topic, value=b"t%d-%d" % (round_, i), partition=0)
                if i % 10 == 0:
                    plain.produce(topic, value=b"p%d-%d" % (round_, i), partition=0)
                    kept.append(b"p%d-%d" % (round_, i))
                    assert plain.flush(20) == 0
            txn.flush(20)
            if round_ % 2:
                txn.abort_transaction(20)
            else:
                txn.commit_transaction(20)
                kept += [b"t%d-%d" % (round_, i) for i in range(30)]
        return kept

    kept = await trio.to_thread.run_sync(write)
    async with (
        pykaf.open_consumer(kafka_broker.bootstrap, fetch_max_wait=0.05) as col_consumer,
        pykaf.open_consumer(kafka_broker.bootstrap, fetch_max_wait=0.05) as row_consumer,
    ):
        col_pc = await col_consumer.consume_partition(topic, 0, pykaf.OLDEST)
        row_pc = await row_consumer.consume_partition(topic, 0, pykaf.OLDEST)
        columns = await read_columns(col_pc, len(kept))
        records = await read_records(row_pc, len(kept))
        assert rows(columns) == record_rows(records)
        assert sorted(r[3] for r in rows(columns)) == sorted(kept)
        # Past the last marker once it is read: the same position as the row path.
        with trio.fail_after(10):
            while col_pc.position != row_pc.position or col_pc.position < 4 * 34:
                with trio.move_on_after(0.2):
                    assert len(await col_pc.next_batch(columnar=True)) == 0
                with trio.move_on_after(0.2):
                    assert await row_pc.next_batch() == []
        assert col_pc.position == row_pc.position == 4 * 34  # 4 rounds of 30 + 3 + a marker


async def test_on_the_fake_cluster_columns_and_rows_agree_mixed() -> None:
    async with open_fake_cluster(1) as fake:
        fake.create_topic("col-fake", 1)
        async with pykaf.open_producer(fake.bootstrap, compression="lz4") as producer:
            for i in range(600):
                producer.send_nowait(
                    "col-fake",
                    b"value-%d" % i,
                    key=None if i % 3 else b"k%d" % i,
                    headers=[("i", b"%d" % i)] if i % 5 == 0 else None,
                    partition=0,
                    timestamp=TS + i,
                )
            await producer.flush()
        async with (
            pykaf.open_consumer(fake.bootstrap, max_partition_fetch_bytes=4096) as col_c,
            pykaf.open_consumer(fake.bootstrap) as row_c,
        ):
            col_pc = await col_c.consume_partition("col-fake", 0, pykaf.OLDEST)
            records = await read_records(await row_c.consume_partition("col-fake", 0, 0), 600)
            got: list[tuple[Any, ...]] = []
            calls = 0
            with trio.fail_after(20):
                while len(got) < 600:
                    calls += 1
                    if calls % 3 == 0:  # row, per-record and columnar calls in turn
                        got += record_rows(await col_pc.next_batch())
                    elif calls % 3 == 1:
                        got += record_rows([await col_pc.__anext__()])
                    else:  # the rest of the list __anext__ started, as columns
                        got += rows([await col_pc.next_batch(columnar=True)])
            assert got == record_rows(records)
            assert col_pc.position == 600
