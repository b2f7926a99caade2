"""pykaf.aio's consumer groups and share consumers on Apache Kafka, Tansu and the fake cluster.

A group's claims are read as partition consumers are: trio only waits for
each fetch answer, and the handler's task decodes each piece as it comes to
it. The claim tests check the order of what is handed out, that a revoked
claim hands out nothing more (so that the marks committed at the rebalance
are exactly what was read), and cancellation.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
import trio

import pykaf
import pykaf.aio
from pykaf.aio.testing import open_fake_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

GROUP = {"heartbeat_interval": 0.2, "session_timeout": 6.0, "fetch_max_wait": 0.05}


async def produce(bootstrap: str, topic: str, partitions: int, per: int) -> None:
    async with pykaf.aio.open_producer(bootstrap) as producer:
        for p in range(partitions):
            values = [b"%d-%d" % (p, i) for i in range(per)]
            await (await producer.send_batch(topic, values, partition=p)).wait()


async def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    async with pykaf.aio.open_admin(bootstrap) as admin:
        offsets = await admin.list_group_offsets(group)
    return {tp: o.offset for tp, o in offsets.items()}


def test_async_for_commits_as_it_goes(aio_broker: Any) -> None:
    topic, group = unique("aio-group"), unique("aio-g")
    aio_broker.create(topic, 2)

    async def main() -> None:
        await produce(aio_broker.bootstrap, topic, 2, 10)
        seen: list[Any] = []

        async def consume(g: pykaf.aio.ConsumerGroup) -> None:
            async for record in g:
                seen.append(record.value)
                if len(seen) == 20:
                    break

        async with pykaf.aio.open_consumer_group(
            aio_broker.bootstrap, group, [topic], **GROUP
        ) as g:
            await asyncio.wait_for(consume(g), 60)
            assert sorted(g.assignment()[topic]) == [0, 1]
            assert g.generation_id >= 0 and g.member_id
            meta = g.group_metadata()
            assert meta.group_id == group
            assert g.statistics() is not None
        assert sorted(seen) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(10))
        assert await committed(aio_broker.bootstrap, group) == {(topic, 0): 10, (topic, 1): 10}

    asyncio.run(main())


def test_a_new_async_for_goes_on_where_a_break_left(aio_broker: Any) -> None:
    topic, group = unique("aio-again"), unique("aio-a")
    aio_broker.create(topic, 1)

    async def main() -> None:
        await produce(aio_broker.bootstrap, topic, 1, 10)
        offsets: list[int] = []

        async def consume(g: pykaf.aio.ConsumerGroup) -> None:
            for stop in (3, 9):  # the first loop stops inside the one fetched batch
                async for record in g:
                    offsets.append(record.offset)
                    if record.offset == stop:
                        break

        async with pykaf.aio.open_consumer_group(
            aio_broker.bootstrap, group, [topic], **GROUP
        ) as g:
            await asyncio.wait_for(consume(g), 60)
        assert offsets == list(range(10))
        assert await committed(aio_broker.bootstrap, group) == {(topic, 0): 10}

    asyncio.run(main())


def test_a_handler_of_asyncio_coroutines(aio_broker: Any) -> None:
    topic, group = unique("aio-handler"), unique("aio-h")
    aio_broker.create(topic, 2)

    class Handler:
        def __init__(self) -> None:
            self.events: list[str] = []
            self.values: list[Any] = []
            self.done = asyncio.Event()

        async def setup(self, session: pykaf.aio.GroupSession) -> None:
            self.events.append("setup")
            await asyncio.sleep(0)  # an asyncio await inside the handler

        async def consume_claim(
            self, session: pykaf.aio.GroupSession, claim: pykaf.aio.Claim
        ) -> None:
            assert claim.topic == topic and not claim.revoked
            for record in await claim.next_batch():
                await self.take(session, record)
            async for record in claim:
                await self.take(session, record)

        async def take(self, session: pykaf.aio.GroupSession, record: Any) -> None:
            self.values.append(record.value)
            session.mark_message(record)
            if len(self.values) == 20:
                await session.commit()
                self.done.set()

        async def cleanup(self, session: pykaf.aio.GroupSession) -> None:
            self.events.append("cleanup")

    async def main() -> None:
        await produce(aio_broker.bootstrap, topic, 2, 10)
        handler = Handler()
        async with pykaf.aio.open_consumer_group(
            aio_broker.bootstrap, group, [topic], auto_commit=False, **GROUP
        ) as g:
            consuming = asyncio.create_task(g.consume(handler))
            await asyncio.wait_for(handler.done.wait(), 60)
            assert await committed(aio_broker.bootstrap, group) == {
                (topic, 0): 10,
                (topic, 1): 10,
            }
            consuming.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consuming
        assert sorted(handler.values) == sorted(
            b"%d-%d" % (p, i) for p in range(2) for i in range(10)
        )
        assert handler.events[0] == "setup"

    asyncio.run(main())


@pytest.fixture(params=["kafka", "fake"])
def share_broker(request: pytest.FixtureRequest) -> Any:
    """Brokers with share groups (KIP-932): Apache Kafka 4.3 and the fake cluster."""
    return bc.broker_from(request, request.param)


def test_share_consumer(share_broker: Any) -> None:
    topic, group = unique("aio-share"), unique("aio-s")
    share_broker.create(topic, 1)

    async def main() -> None:
        async with pykaf.aio.open_admin(share_broker.bootstrap) as admin:
            await admin.alter_group_configs({group: {"share.auto.offset.reset": "earliest"}})
        await produce(share_broker.bootstrap, topic, 1, 10)
        values: list[Any] = []

        async def consume(consumer: pykaf.aio.ShareConsumer) -> None:
            first = await consumer.next_record()
            assert first is not None
            values.append(first.value)
            while (record := consumer.next_nowait()) is not None:  # the rest of its batch
                values.append(record.value)
            for record in await consumer.next_batch(timeout=0.5):  # what is left, if any
                values.append(record.value)
                consumer.acknowledge(record, pykaf.ACCEPT)
            async with pykaf.aio.open_producer(share_broker.bootstrap) as producer:
                for i in range(5):
                    await producer.send(topic, b"more-%d" % i)
            async for record in consumer:  # the rest, and the five sent meanwhile
                values.append(record.value)
                if len(values) == 15:
                    break

        async with pykaf.aio.open_share_consumer(
            share_broker.bootstrap, group, [topic], fetch_max_wait=0.2
        ) as consumer:
            await asyncio.wait_for(consume(consumer), 60)
            await consumer.commit()
            assert consumer.member_id
        expected = [b"0-%d" % i for i in range(10)] + [b"more-%d" % i for i in range(5)]
        assert sorted(values) == sorted(expected)

    asyncio.run(main())


def test_consumed_offsets_committed_by_a_transaction(aio_broker: Any) -> None:
    src, dst, group = unique("aio-src"), unique("aio-dst"), unique("aio-t")
    aio_broker.create(src, 1)
    aio_broker.create(dst, 1)

    async def main() -> None:
        await produce(aio_broker.bootstrap, src, 1, 10)
        seen: list[Any] = []

        async def consume(g: pykaf.aio.ConsumerGroup) -> None:
            async for record in g:
                seen.append(record)
                if len(seen) == 10:
                    break

        async with (
            pykaf.aio.open_consumer_group(
                aio_broker.bootstrap, group, [src], auto_commit=False, **GROUP
            ) as g,
            pykaf.aio.open_producer(
                aio_broker.bootstrap, transactional_id=unique("aio-tid")
            ) as txn,
        ):
            await asyncio.wait_for(consume(g), 60)
            async with txn.transaction():
                await txn.send(dst, b"sum", partition=0)
                await txn.send_offsets_to_transaction({(src, 0): 10}, g.group_metadata())
            # Kafka makes the offsets visible once the transaction's marker is written.
            for _ in range(100):
                offsets = await committed(aio_broker.bootstrap, group)
                if offsets:
                    break
                await asyncio.sleep(0.1)
            assert offsets == {(src, 0): 10}

    asyncio.run(main())


async def produce_in_chunks(
    bootstrap: str, topic: str, partitions: int, per: int, chunk: int
) -> None:
    """``per`` records to each partition, values ``b"p-i"``, flushed every ``chunk`` a partition.

    Each chunk is a batch of its own: with ``max_partition_fetch_bytes=1`` a piece of its own.
    """
    async with pykaf.aio.open_producer(bootstrap, linger=3600) as producer:
        for start in range(0, per, chunk):
            for p in range(partitions):
                values = [b"%d-%d" % (p, i) for i in range(start, min(per, start + chunk))]
                await producer.send_batch(topic, values, partition=p)
            await asyncio.wait_for(producer.flush(), 30)


class Reader:
    """A handler that reads each claim with ``async for`` or ``next_batch`` and marks each record.

    Records what every claim handed out, in order, and any record handed out
    by a claim already revoked.
    """

    def __init__(self, how: str, *, pause: float = 0.0) -> None:
        self.how = how
        self.pause = pause
        #: (partition, the claim's number) -> offsets handed out, in order.
        self.claims: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.after_revoke: list[tuple[int, int]] = []
        self.count = 0
        self.progress = asyncio.Event()
        self._numbers = 0

    async def setup(self, session: pykaf.aio.GroupSession) -> None:
        pass

    async def cleanup(self, session: pykaf.aio.GroupSession) -> None:
        pass

    async def consume_claim(self, session: pykaf.aio.GroupSession, claim: pykaf.aio.Claim) -> None:
        self._numbers += 1
        key = (claim.partition, self._numbers)
        if self.how == "async for":
            async for record in claim:
                if claim.revoked:
                    self.after_revoke.append((record.partition, record.offset))
                await self._take(session, key, record)
        else:
            while batch := await claim.next_batch():
                if claim.revoked:
                    self.after_revoke.append((batch[0].partition, batch[0].offset))
                for record in batch:
                    if claim.revoked:  # the rest of the batch is the next owner's
                        break
                    await self._take(session, key, record)

    async def _take(self, session: pykaf.aio.GroupSession, key: Any, record: Any) -> None:
        assert record.value == b"%d-%d" % (record.partition, record.offset)
        self.claims[key].append(record.offset)
        session.mark_message(record)
        self.count += 1
        self.progress.set()
        if self.pause:
            await asyncio.sleep(self.pause)


def in_order(claims: dict[tuple[int, int], list[int]]) -> None:
    """Each claim handed out consecutive offsets."""
    for key, offsets in claims.items():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), key


@pytest.mark.parametrize("how", ["async for", "next_batch"])
def test_claims_decode_in_the_handlers_task_and_hand_out_every_record_in_order(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a partition consumer's: no piece decoded in a trio task, none ahead of its reader.
    partitions, per = 4, 300
    seen: list[bool] = []  # per piece decoded: in a trio task?
    decode = pykaf.PartitionConsumer._decode_piece

    def watched(self: pykaf.PartitionConsumer, answer: Any) -> Any:
        seen.append(trio.lowlevel.in_trio_task())
        return decode(self, answer)

    monkeypatch.setattr(pykaf.PartitionConsumer, "_decode_piece", watched)
    reader = Reader(how)

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", partitions)
            await produce_in_chunks(cluster.bootstrap, "t", partitions, per, 50)
            async with pykaf.aio.open_consumer_group(
                cluster.bootstrap, "g", ["t"], max_partition_fetch_bytes=1, **GROUP
            ) as group:
                consuming = asyncio.create_task(group.consume(reader))
                while reader.count < partitions * per:
                    await asyncio.wait_for(reader.progress.wait(), 30)
                    reader.progress.clear()
                consuming.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await consuming

    asyncio.run(main())
    by_partition = {p: offsets for (p, _), offsets in reader.claims.items()}
    assert by_partition == {p: list(range(per)) for p in range(partitions)}
    assert len(seen) >= partitions * per // 50  # a piece a batch at least
    assert not any(seen)


@pytest.mark.parametrize(
    ("broker", "how"), [("fake", "async for"), ("fake", "next_batch"), ("kafka", "async for")]
)
def test_marks_committed_at_a_rebalance_are_exactly_what_the_revoked_claims_handed_out(
    broker: str, how: str, request: pytest.FixtureRequest
) -> None:
    # Member A reads slowly, holding records it took and has not handed out
    # when member B joins. A revoked claim hands out nothing more (what it took
    # is dropped with the claim's own buffer), so the marks committed at the
    # revoke are the records A read, and B goes on from there: every record of
    # every partition read once, in order. (The fake cluster runs in a thread
    # of its own here; Apache Kafka is the session's.)
    group_broker = bc.broker_from(request, broker)
    partitions, per = 4, 400
    topic, group_id = bc.unique("aio-claims"), bc.unique("aio-claims-g")
    group_broker.create(topic, partitions)
    first, second = Reader(how, pause=0.002), Reader(how)
    # The first member's claims that ended with records taken and not handed out.
    dropped: list[int] = []
    ended = pykaf.aio.Claim._ended_now

    def watched(self: pykaf.aio.Claim) -> None:
        left = self._trio.position - self.position  # taken, not handed out
        if left > 0:
            dropped.append(left)
        ended(self)

    async def main() -> None:
        await produce_in_chunks(group_broker.bootstrap, topic, partitions, per, 25)
        # Marks are committed as each claim is revoked (auto_commit), and on close.
        options = {"max_partition_fetch_bytes": 1, "auto_commit_interval": 3600, **GROUP}
        async with pykaf.aio.open_consumer_group(
            group_broker.bootstrap, group_id, [topic], **options
        ) as a:
            reading_a = asyncio.create_task(a.consume(first))
            while first.count < 100:
                await asyncio.wait_for(first.progress.wait(), 60)
                first.progress.clear()
            async with pykaf.aio.open_consumer_group(
                group_broker.bootstrap, group_id, [topic], **options
            ) as b:
                reading_b = asyncio.create_task(b.consume(second))
                while first.count + second.count < partitions * per:
                    waits = [asyncio.ensure_future(r.progress.wait()) for r in (first, second)]
                    done, pending = await asyncio.wait(
                        waits, timeout=60, return_when=asyncio.FIRST_COMPLETED
                    )
                    for w in pending:
                        w.cancel()
                    assert done, (first.count, second.count)
                    first.progress.clear()
                    second.progress.clear()
                assert b.assignment() and a.assignment()
                for task in (reading_a, reading_b):
                    task.cancel()
                await asyncio.gather(reading_a, reading_b, return_exceptions=True)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(pykaf.aio.Claim, "_ended_now", watched)
    try:
        asyncio.run(main())
    finally:
        monkeypatch.undo()
    assert first.after_revoke == [] and second.after_revoke == []
    in_order(first.claims)
    in_order(second.claims)
    read: dict[int, list[int]] = defaultdict(list)
    for reader in (first, second):
        for (p, _), offsets in reader.claims.items():
            read[p] += offsets
    # Read once each: nothing the first member handed out is handed out again.
    expected = {p: list(range(per)) for p in range(partitions)}
    assert {p: sorted(offsets) for p, offsets in read.items()} == expected
    assert len(second.claims) >= 1  # the second member took partitions over
    if how == "async for":  # (next_batch hands out all it takes)
        assert dropped  # a revoked claim had records taken and not handed out


def test_a_cancelled_wait_of_a_claim_loses_and_repeats_nothing() -> None:
    # A handler's wait for records (async for, next_batch) cancelled by
    # asyncio.timeout() takes nothing in trio; a loop left with break keeps
    # what it took and did not hand out, for next_batch and the next loop.
    got: list[int] = []
    timeouts: list[str] = []
    done = asyncio.Event()

    class Handler:
        async def setup(self, session: pykaf.aio.GroupSession) -> None:
            pass

        async def cleanup(self, session: pykaf.aio.GroupSession) -> None:
            pass

        async def consume_claim(
            self, session: pykaf.aio.GroupSession, claim: pykaf.aio.Claim
        ) -> None:
            for how in ("async for", "next_batch"):  # nothing was produced yet
                try:
                    async with asyncio.timeout(0.1):
                        if how == "async for":
                            async for record in claim:
                                got.append(record.offset)
                        else:
                            got.extend(r.offset for r in await claim.next_batch())
                except TimeoutError:
                    timeouts.append(how)
            ready.set()
            async for record in claim:  # left inside the first piece
                got.append(record.offset)
                if record.offset == 2:
                    break
            assert claim.position == 3
            got.extend(r.offset for r in await claim.next_batch())  # the rest of that piece
            async for record in claim:
                got.append(record.offset)
                session.mark_message(record)
                if record.offset == 99:
                    done.set()

    ready = asyncio.Event()

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_consumer_group(
                cluster.bootstrap, "g", ["t"], max_partition_fetch_bytes=1, **GROUP
            ) as group:
                consuming = asyncio.create_task(group.consume(Handler()))
                await asyncio.wait_for(ready.wait(), 30)
                await produce_in_chunks(cluster.bootstrap, "t", 1, 100, 10)
                await asyncio.wait_for(done.wait(), 30)
                consuming.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await consuming
                await group.commit()
            async with pykaf.aio.open_admin(cluster.bootstrap) as admin:
                offsets = await admin.list_group_offsets("g")
            assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 100}

    asyncio.run(main())
    assert timeouts == ["async for", "next_batch"]
    assert got == list(range(100))
