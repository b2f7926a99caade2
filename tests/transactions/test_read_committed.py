"""read_committed end to end: pykaf's transactional producer on the fake cluster.

The fake cluster returns aborted-transaction lists and holds the last stable
offset below open transactions, as Kafka does (Tansu and the mock do
neither), so here pykaf's consumer and confluent-kafka's must both drop what
pykaf's producers aborted, and agree record for record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

import pykaf
from pykaf._group.offsets import OffsetManager
from pykaf.testing import FakeCluster, open_fake_cluster

confluent_kafka = pytest.importorskip("confluent_kafka")


async def _read_all(cluster: FakeCluster, topic: str, isolation_level: str) -> list[Any]:
    out: list[Any] = []
    async with pykaf.open_consumer(cluster.bootstrap, isolation_level=isolation_level) as c:
        for p in range(len(cluster.topics[topic].partitions)):
            pc = await c.consume_partition(topic, p, pykaf.OLDEST)
            limit = (
                cluster.last_stable_offset(topic, p)
                if isolation_level == "read_committed"
                else cluster.high_watermark(topic, p)
            )
            with trio.fail_after(20):
                while pc.position < limit:
                    out.extend(await pc.next_batch())
    return out


def _confluent_values(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
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


@pytest.mark.trio
async def test_interleaved_pykaf_transactions_commits_and_aborts() -> None:
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("ledger", 2)
        async with (
            pykaf.open_producer(cluster.bootstrap, transactional_id="tx-a") as a,
            pykaf.open_producer(cluster.bootstrap, transactional_id="tx-b") as b,
            pykaf.open_producer(cluster.bootstrap) as plain,
        ):
            committed: list[bytes] = []
            for round_ in range(6):
                a.begin_transaction()
                b.begin_transaction()
                for i in range(5):  # interleaved in both partitions' logs
                    for producer, name in ((a, b"a"), (b, b"b")):
                        value = b"%s-%d-%d" % (name, round_, i)
                        await producer.send("ledger", value, partition=i % 2)
                    plain_value = b"plain-%d-%d" % (round_, i)
                    await plain.send("ledger", plain_value, partition=i % 2)
                    committed.append(plain_value)
                # a commits on even rounds, b on odd ones; the other aborts
                winner, loser, name = (a, b, b"a") if round_ % 2 == 0 else (b, a, b"b")
                await winner.commit_transaction()
                await loser.abort_transaction()
                committed += [b"%s-%d-%d" % (name, round_, i) for i in range(5)]
        visible = await _read_all(cluster, "ledger", "read_committed")
        assert Counter(r.value for r in visible) == Counter(committed)
        everything = await _read_all(cluster, "ledger", "read_uncommitted")
        assert len(everything) == 6 * 15  # aborted records are in the log
        # offsets keep growing past the markers and the dropped records
        for p in (0, 1):
            offs = [r.offset for r in visible if r.partition == p]
            assert offs == sorted(offs)
        got = await trio.to_thread.run_sync(
            _confluent_values, cluster.bootstrap, "ledger", "read_committed", len(committed)
        )
        assert Counter(got) == Counter(committed)


@pytest.mark.trio
async def test_an_open_pykaf_transaction_holds_back_readers() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("held", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, transactional_id="holder") as txn,
            pykaf.open_producer(cluster.bootstrap) as plain,
            pykaf.open_consumer(cluster.bootstrap, isolation_level="read_committed") as c,
        ):
            await plain.send("held", b"before")
            txn.begin_transaction()
            await txn.send("held", b"inside")
            await plain.send("held", b"after")  # written after the open transaction's record
            assert cluster.last_stable_offset("held", 0) == 1
            assert cluster.high_watermark("held", 0) == 3
            pc = await c.consume_partition("held", 0, pykaf.OLDEST)
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


@pytest.mark.trio
async def test_newest_is_the_last_stable_offset_under_read_committed() -> None:
    """As Java's seekToEnd: a read_committed consumer starting at NEWEST starts at the
    LSO, so an open transaction's records reach it once committed; read_uncommitted
    starts at the high watermark, past them."""
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("ends", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, transactional_id="ender") as txn,
            pykaf.open_producer(cluster.bootstrap) as plain,
        ):
            await plain.send("ends", b"old")
            txn.begin_transaction()
            await txn.send("ends", b"inside")
            async with pykaf.open_consumer(cluster.bootstrap) as c:
                client = c.client
                assert await client.get_offset("ends", 0, pykaf.NEWEST) == 2
                assert await client.get_offset("ends", 0, pykaf.NEWEST, isolation_level=1) == 1
            positions = {}
            for level in ("read_committed", "read_uncommitted"):
                async with pykaf.open_consumer(cluster.bootstrap, isolation_level=level) as c:
                    pc = await c.consume_partition("ends", 0, pykaf.NEWEST)
                    with trio.fail_after(10):
                        while pc.position < 0:
                            await trio.sleep(0.01)
                    positions[level] = pc.position
            assert positions == {"read_committed": 1, "read_uncommitted": 2}
            await txn.commit_transaction()


@pytest.mark.trio
async def test_offset_fetch_waits_out_an_open_transactions_offsets() -> None:
    """KIP-447: a new member's OffsetFetch waits for the pending transactional commit."""
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("src", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, transactional_id="mover") as txn,
            pykaf.open_client(cluster.bootstrap) as client,
        ):
            txn.begin_transaction()
            await txn.send("src", b"x")
            await txn.send_offsets_to_transaction({("src", 0): 42}, "g-unstable")
            assert cluster.groups.has_pending("g-unstable", ("src", 0))
            got: dict[Any, int] = {}

            async def fetch() -> None:
                got.update(await OffsetManager(client, "g-unstable", None).fetch([("src", 0)]))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(fetch)
                await trio.sleep(0.8)  # the fetch keeps getting UNSTABLE_OFFSET_COMMIT
                assert not got
                await txn.commit_transaction()
            assert got == {("src", 0): 42}
