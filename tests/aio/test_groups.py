"""pykaf.aio's consumer groups and share consumers on Apache Kafka, Tansu and the fake cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import pykaf
import pykaf.aio

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
            batch = await consumer.next_batch()
            for record in batch:
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
