"""read_committed end to end: pykaf's transactional producer on Kafka and the fake cluster.

Both return aborted-transaction lists and hold the last stable offset below
open transactions (Tansu and the mock do neither), so here pykaf's consumer
and confluent-kafka's must both drop exactly what pykaf's producers aborted,
and the control markers, and agree record for record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
from trio.testing import MockClock
from txn_target import TxnTarget

import pykaf
from pykaf import errors
from pykaf._group.offsets import OffsetManager

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.broker


def _confluent_values(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": TxnTarget.unique(f"reader-{isolation}"),
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    idle = 0
    try:
        while idle < 15 and len(values) <= expect:
            msg = consumer.poll(0.2)
            if msg is None:
                idle += 1 if len(values) >= expect else 0
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


async def test_interleaved_pykaf_transactions_commits_and_aborts(target: TxnTarget) -> None:
    topic = await target.topic("ledger", 2)
    async with (
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("tx-a")) as a,
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("tx-b")) as b,
        pykaf.open_producer(target.bootstrap) as plain,
    ):
        committed: list[bytes] = []
        for round_ in range(6):
            a.begin_transaction()
            b.begin_transaction()
            for i in range(5):  # interleaved in both partitions' logs
                for producer, name in ((a, b"a"), (b, b"b")):
                    value = b"%s-%d-%d" % (name, round_, i)
                    await producer.send(topic, value, partition=i % 2)
                plain_value = b"plain-%d-%d" % (round_, i)
                await plain.send(topic, plain_value, partition=i % 2)
                committed.append(plain_value)
            # a commits on even rounds, b on odd ones; the other aborts
            winner, loser, name = (a, b, b"a") if round_ % 2 == 0 else (b, a, b"b")
            await winner.commit_transaction()
            await loser.abort_transaction()
            committed += [b"%s-%d-%d" % (name, round_, i) for i in range(5)]
    visible = await target.read(topic, 2)
    assert Counter(r.value for r in visible) == Counter(committed)
    everything = await target.read(topic, 2, "read_uncommitted")
    assert len(everything) == 6 * 15  # aborted records are in the log, markers are not records
    for p in (0, 1):
        # read_committed is the log with exactly the aborted records left out, in order
        log = [r for r in everything if r.partition == p]
        kept = [(r.offset, r.value) for r in log if r.value in committed]
        assert [(r.offset, r.value) for r in visible if r.partition == p] == kept
        # the markers take offsets: the log has gaps where they are
        assert log[-1].offset > len(log) - 1
    got = await trio.to_thread.run_sync(
        _confluent_values, target.bootstrap, topic, "read_committed", len(committed)
    )
    assert Counter(got) == Counter(committed)


async def test_an_open_pykaf_transaction_holds_back_readers(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    topic = await target.topic("held")
    async with (
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("holder")) as txn,
        pykaf.open_producer(target.bootstrap) as plain,
        pykaf.open_consumer(target.bootstrap, isolation_level="read_committed") as c,
    ):
        await plain.send(topic, b"before")
        txn.begin_transaction()
        await txn.send(topic, b"inside")
        await plain.send(topic, b"after")  # written after the open transaction's record
        assert await target.end(topic, 0, committed=True) == 1
        assert await target.end(topic, 0, committed=False) == 3
        pc = await c.consume_partition(topic, 0, pykaf.OLDEST)
        first = await pc.next_batch()
        assert [r.value for r in first] == [b"before"]
        assert pc.last_stable_offset == 1
        with trio.move_on_after(0.3):  # nothing more until the transaction ends
            assert await pc.next_batch() == []
        await txn.commit_transaction()
        rest: list[bytes] = []
        with trio.fail_after(10):
            while len(rest) < 2:
                rest += [r.value for r in await pc.next_batch()]
        assert rest == [b"inside", b"after"]


async def test_newest_is_the_last_stable_offset_under_read_committed(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    """As Java's seekToEnd: a read_committed consumer starting at NEWEST starts at the
    LSO, so an open transaction's records reach it once committed; read_uncommitted
    starts at the high watermark, past them."""
    topic = await target.topic("ends")
    async with (
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("ender")) as txn,
        pykaf.open_producer(target.bootstrap) as plain,
    ):
        await plain.send(topic, b"old")
        txn.begin_transaction()
        await txn.send(topic, b"inside")
        async with pykaf.open_consumer(target.bootstrap) as c:
            client = c.client
            assert await client.get_offset(topic, 0, pykaf.NEWEST) == 2
            assert await client.get_offset(topic, 0, pykaf.NEWEST, isolation_level=1) == 1
        positions = {}
        for level in ("read_committed", "read_uncommitted"):
            async with pykaf.open_consumer(target.bootstrap, isolation_level=level) as c:
                pc = await c.consume_partition(topic, 0, pykaf.NEWEST)
                with trio.fail_after(10):
                    while pc.position < 0:
                        await trio.sleep(0.01)
                positions[level] = pc.position
        assert positions == {"read_committed": 1, "read_uncommitted": 2}
        await txn.commit_transaction()


async def test_offset_fetch_waits_out_an_open_transactions_offsets(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    """KIP-447: a new member's OffsetFetch waits for the pending transactional commit."""
    topic = await target.topic("src")
    group = target.unique("g-unstable")
    async with (
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("mover")) as txn,
        pykaf.open_client(target.bootstrap) as client,
        pykaf.open_client(target.bootstrap, request_timeout=1.0) as impatient,
    ):
        txn.begin_transaction()
        await txn.send(topic, b"x")
        await txn.send_offsets_to_transaction({(topic, 0): 42}, group)
        if target.fake is not None:
            assert target.fake.groups.has_pending(group, (topic, 0))
        # While the transaction is open the coordinator answers UNSTABLE_OFFSET_COMMIT.
        with pytest.raises(errors.UnstableOffsetCommitError):
            await OffsetManager(impatient, group, None).fetch([(topic, 0)])
        got: dict[Any, int] = {}

        async def fetch() -> None:
            got.update(await OffsetManager(client, group, None).fetch([(topic, 0)]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await trio.sleep(0.8)  # the fetch keeps getting UNSTABLE_OFFSET_COMMIT
            assert not got
            await txn.commit_transaction()
        assert got == {(topic, 0): 42}


async def test_columnar_reads_skip_exactly_what_the_row_path_skips(target: TxnTarget) -> None:
    """next_batch(columnar=True) under read_committed: the row path's records and position."""
    topic = await target.topic("columns", 2)
    async with (
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("col-a")) as a,
        pykaf.open_producer(target.bootstrap) as plain,
    ):
        for round_ in range(4):
            a.begin_transaction()
            for i in range(6):
                await a.send(topic, b"a-%d-%d" % (round_, i), partition=i % 2, headers=[("r", b"")])
                await plain.send(topic, b"plain-%d-%d" % (round_, i), partition=i % 2)
            if round_ % 2:
                await a.abort_transaction()
            else:
                await a.commit_transaction()
    rows = await target.read(topic, 2)
    assert len(rows) == 4 * 6 + 2 * 6 and not any(r.value.startswith(b"a-1-") for r in rows)
    async with pykaf.open_consumer(target.bootstrap, isolation_level="read_committed") as c:
        for p in range(2):
            limit = await target.settled_end(topic, p)
            pc = await c.consume_partition(topic, p, pykaf.OLDEST)
            got: list[tuple[int, bytes | None, list[Any]]] = []
            with trio.fail_after(20):
                while pc.position < limit:
                    batch = await pc.next_batch(columnar=True)
                    assert batch.next_offset == pc.position
                    got += [
                        (batch.offsets[i], batch.value(i), batch.headers(i))
                        for i in range(len(batch))
                    ]
            want = [(r.offset, r.value, r.headers) for r in rows if r.partition == p]
            assert got == want
            assert pc.position == limit  # past the last marker, as the row path
