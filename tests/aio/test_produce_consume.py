"""pykaf.aio on Apache Kafka, Tansu and the fake cluster: producing, reading, transactions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio

import pykaf
import pykaf.aio
from pykaf import errors

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

FAST = {"fetch_max_wait": 0.05}


async def read(bootstrap: str, topic: str, partition: int, count: int, **config: Any) -> list[Any]:
    """The first ``count`` records of a partition, read with ``async for``."""
    out: list[Any] = []

    async def collect(pc: pykaf.aio.PartitionConsumer) -> None:
        async for record in pc:
            out.append(record)
            if len(out) == count:
                break

    async with pykaf.aio.open_consumer(bootstrap, **FAST, **config) as consumer:
        pc = await consumer.consume_partition(topic, partition, pykaf.OLDEST)
        await asyncio.wait_for(collect(pc), 30)
    return out


def test_every_way_of_sending_and_reading(aio_broker: Any) -> None:
    topic = unique("aio-send")
    aio_broker.create(topic, 2)

    async def main() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap, linger=0.002) as producer:
            md = await producer.send(topic, b"first", key=b"k", partition=0, headers=[("h", b"v")])
            assert (md.topic, md.partition, md.offset) == (topic, 0, 0)
            for i in range(1000):
                producer.send_nowait(topic, b"%d" % i, partition=0)
                if i % 100 == 99:
                    await asyncio.sleep(0)
            producer.send_nowait(topic, b"keyed", key=b"k2", partition=0)
            delivery = await producer.send_batch(topic, [b"a", b"b", b"c"], partition=0)
            assert await delivery.wait() == 3 and delivery.done and delivery.acked == 3
            await producer.flush()
            assert producer.buffered_records == 0
            assert producer.statistics().records_acked >= 1005
        records = await read(aio_broker.bootstrap, topic, 0, 1005)
        assert [r.value for r in records] == (
            [b"first"] + [b"%d" % i for i in range(1000)] + [b"keyed", b"a", b"b", b"c"]
        )
        assert records[0].key == b"k" and records[0].headers == [("h", b"v")]
        assert [r.offset for r in records] == list(range(1005))

    asyncio.run(main())


def test_partition_consumer_batches_columns_and_seek(aio_broker: Any) -> None:
    topic = unique("aio-read")
    aio_broker.create(topic, 1)

    async def main() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap) as producer:
            await (await producer.send_batch(topic, [b"%d" % i for i in range(100)])).wait()
        async with pykaf.aio.open_consumer(aio_broker.bootstrap, **FAST) as consumer:
            assert await consumer.partitions(topic) == [0]
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            got: list[bytes | None] = []
            while len(got) < 100:
                got += [r.value for r in await asyncio.wait_for(pc.next_batch(), 30)]
            assert got == [b"%d" % i for i in range(100)]
            assert pc.position == 100 and pc.high_water_mark == 100 and pc.lag == 0
            pc.seek(90)
            columns = await asyncio.wait_for(pc.next_batch(columnar=True), 30)
            while columns.next_offset < 100:
                columns = await asyncio.wait_for(pc.next_batch(columnar=True), 30)
            assert columns.next_offset == 100
            pc.seek(95)
            first = await pc.__anext__()
            assert (first.offset, first.value) == (95, b"95")
            stats = consumer.statistics()
            assert stats.records_fetched >= 100

    asyncio.run(main())


def test_async_for_hands_out_what_it_took_and_the_positions_follow(aio_broker: Any) -> None:
    """``async for`` takes every fetched record at once; the other calls see what it handed out."""
    topic = unique("aio-taken")
    aio_broker.create(topic, 1)

    async def main() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap) as producer:
            await (await producer.send_batch(topic, [b"%d" % i for i in range(100)])).wait()
        async with pykaf.aio.open_consumer(aio_broker.bootstrap, **FAST) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            first = await asyncio.wait_for(pc.__anext__(), 30)
            assert first.offset == 0
            assert (pc.position, pc.lag) == (1, 99)
            got = [first]
            while len(got) < 10:
                record = pc.next_nowait()
                if record is None:
                    record = await asyncio.wait_for(pc.__anext__(), 30)
                got.append(record)
            assert pc.position == 10 and pc.lag == 90
            # next_batch hands out what async for took and left, then fetches on
            while len(got) < 100:
                got += await asyncio.wait_for(pc.next_batch(), 30)
            assert [r.offset for r in got] == list(range(100))
            assert (pc.position, pc.lag) == (100, 0)
            pc.seek(5)
            again = await asyncio.wait_for(pc.__anext__(), 30)
            assert again.offset == 5 and pc.position == 6
            pc.seek(50)
            columns = await asyncio.wait_for(pc.next_batch(columnar=True), 30)
            assert columns.offsets[0] == 50 and pc.position == columns.next_offset

    asyncio.run(main())


def test_async_for_stopped_midway_and_the_other_calls_go_on_from_there(aio_broker: Any) -> None:
    """A loop left with ``break`` leaves its records to next_nowait, __anext__ and next_batch."""
    topic = unique("aio-break")
    aio_broker.create(topic, 1)

    async def main() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap) as producer:
            for start in range(0, 100, 25):  # four batches
                values = [b"%d" % i for i in range(start, start + 25)]
                await (await producer.send_batch(topic, values)).wait()
        async with pykaf.aio.open_consumer(aio_broker.bootstrap, **FAST) as consumer:
            pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
            got: list[Any] = []
            async for record in pc:
                got.append(record)
                if record.offset == 36:
                    break
            assert pc.position == 37 and pc.lag == 63
            record = pc.next_nowait() or await asyncio.wait_for(pc.__anext__(), 30)
            got.append(record)
            assert record.offset == 37 and pc.position == 38
            async for record in pc:  # a second loop goes on where the first stopped
                got.append(record)
                if record.offset == 59:
                    break
            while len(got) < 100:
                got += await asyncio.wait_for(pc.next_batch(), 30)
            assert [r.offset for r in got] == list(range(100))
            assert [r.value for r in got] == [b"%d" % i for i in range(100)]
            assert (pc.position, pc.lag) == (100, 0)
            pc.seek(98)
            async for record in pc:
                assert (record.offset, pc.position) == (98, 99)
                break

    asyncio.run(main())


def test_transactions(aio_broker: Any) -> None:
    topic = unique("aio-txn")
    aio_broker.create(topic, 1)
    txn_id = unique("aio-txn-id")

    async def main() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap, transactional_id=txn_id) as p:
            async with p.transaction():
                await p.send(topic, b"committed-1")
                p.send_nowait(topic, b"committed-2")
            with pytest.raises(RuntimeError, match="changed my mind"):
                async with p.transaction():
                    await p.send(topic, b"aborted")
                    raise RuntimeError("changed my mind")
            p.begin_transaction()
            await p.send(topic, b"committed-3")
            await p.commit_transaction()
            assert p.txn_status is not None
        # Tansu's Fetch lists no aborted transactions (brokers.md): it hands those out too.
        tansu = aio_broker.name == "tansu"
        records = await read(
            aio_broker.bootstrap, topic, 0, 4 if tansu else 3, isolation_level="read_committed"
        )
        values = [r.value for r in records if not (tansu and r.value == b"aborted")]
        assert values == [b"committed-1", b"committed-2", b"committed-3"]

    asyncio.run(main())


def test_admin_and_client(aio_broker: Any) -> None:
    topic = unique("aio-admin")

    async def main() -> None:
        async with pykaf.aio.open_client(aio_broker.bootstrap) as client:
            async with pykaf.aio.open_admin(client) as admin:
                await admin.create_topic(topic, 3, 1)
                assert topic in await admin.list_topics()
                described = await admin.describe_topic(topic)
                assert len(described.partitions) == 3
            async with pykaf.aio.open_producer(client) as producer:  # shares the client
                await producer.send(topic, b"v", partition=1)
            await client.refresh_metadata(topic)
            assert await client.partitions(topic) == [0, 1, 2]
            leader = await client.leader(topic, 1)
            assert leader.node_id in {b.node_id for b in await client.brokers()}
            assert await client.get_offset(topic, 1, -1) == 1
            assert client.statistics() is not None
            assert not client.closed

    asyncio.run(main())


def test_leaving_the_block_delivers_what_is_buffered_and_leaves_no_run(aio_broker: Any) -> None:
    topic = unique("aio-close")
    aio_broker.create(topic, 1)

    async def produce_and_return() -> None:
        async with pykaf.aio.open_producer(aio_broker.bootstrap, linger=1.0) as producer:
            for i in range(1000):
                producer.send_nowait(topic, b"%d" % i)
            assert producer.buffered_records == 1000  # nothing acknowledged yet

    asyncio.run(produce_and_return())
    assert not trio.lowlevel.in_trio_run()  # the loop's trio run ended with it
    records = asyncio.run(read(aio_broker.bootstrap, topic, 0, 1000))
    assert [r.value for r in records] == [b"%d" % i for i in range(1000)]


def test_purge_wait_for_space_and_send_now(aio_broker: Any) -> None:
    topic = unique("aio-purge")
    aio_broker.create(topic, 1)

    async def main() -> None:
        failures: list[Any] = []

        def on_delivery(error: Any, metadata: Any) -> None:
            failures.append(error)

        config = {"linger": 30.0, "buffer_records": 100}
        async with pykaf.aio.open_producer(aio_broker.bootstrap, **config) as producer:
            for i in range(100):
                producer.send_nowait(topic, b"%d" % i, key=b"k", on_delivery=on_delivery)
            with pytest.raises(errors.BufferFullError):
                producer.send_nowait(topic, b"one too many", key=b"k")
            assert producer.purge() == 100
            await asyncio.wait_for(producer.wait_for_space(), 30)  # room again
            assert len(failures) == 100
            assert all(isinstance(e, errors.PurgedError) for e in failures)
            producer.send_nowait(topic, b"now")
            producer.send_now()  # not after the 30 s linger
            await asyncio.wait_for(producer.flush(), 20)
        records = await read(aio_broker.bootstrap, topic, 0, 1)
        assert [r.value for r in records] == [b"now"]

    asyncio.run(main())
