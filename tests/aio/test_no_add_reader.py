"""pykaf.aio on a loop with no ``add_reader`` (asyncio's proactor loop, as on Windows).

The loop reads the run's broker connections itself where it can
(``pykaf._net.connection.READ_HOST``); a loop whose ``add_reader`` raises
``NotImplementedError`` leaves the reading to trio's reader tasks. These
tests run that fallback on Linux, on a selector loop whose watching methods
are refused as the proactor loop refuses them, against the fake cluster (in
the loop's own trio run) and Tansu.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aio_loops import NoWatchLoop

import pykaf
import pykaf.aio
from pykaf._net.connection import BrokerConnection
from pykaf.aio.testing import open_fake_cluster

pytestmark = pytest.mark.broker

FAST = {"fetch_max_wait": 0.05}
PARTITIONS, PER_PARTITION = 2, 3000


def run_without_watching(main: Callable[[], Coroutine[Any, Any, Any]]) -> NoWatchLoop:
    """Run ``main()`` to its end on a new :class:`NoWatchLoop`; return the (closed) loop."""
    with asyncio.Runner(loop_factory=NoWatchLoop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, NoWatchLoop)
        runner.run(main())
    return loop


@pytest.fixture(params=["fake", "tansu"])
def bootstrap_of(
    request: pytest.FixtureRequest,
) -> Callable[[], Any]:
    """An async context manager factory yielding a bootstrap with a topic "t" of 2 partitions.

    "fake": a fake cluster in the loop's own trio run; "tansu": the session's
    Tansu (a new topic name each time, yielded as the second item).
    """
    if request.param == "fake":

        @asynccontextmanager
        async def fake() -> AsyncIterator[tuple[str, str]]:
            async with open_fake_cluster() as cluster:
                cluster.create_topic("t", PARTITIONS)
                yield cluster.bootstrap, "t"

        return fake
    bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
    tansu = bc.broker_from(request, "tansu")

    @asynccontextmanager
    async def real() -> AsyncIterator[tuple[str, str]]:
        topic = bc.unique("aio-noreader")
        tansu.create(topic, PARTITIONS)
        yield tansu.bootstrap, topic

    return real


def watched_connections(monkeypatch: pytest.MonkeyPatch) -> list[BrokerConnection]:
    """Every broker connection that opens its reader from now on, and who reads it."""
    seen: list[BrokerConnection] = []
    hosted = BrokerConnection._hosted

    def spy(self: BrokerConnection) -> Any:
        seen.append(self)
        return hosted(self)

    monkeypatch.setattr(BrokerConnection, "_hosted", spy)
    return seen


def test_producer_and_consumer_deliver_everything_in_order_when_trio_reads(
    bootstrap_of: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    connections = watched_connections(monkeypatch)
    expected = [[b"%d-%d" % (p, i) for i in range(PER_PARTITION)] for p in range(PARTITIONS)]
    got: dict[str, list[list[bytes | None]]] = {}

    async def main() -> None:
        async with bootstrap_of() as (bootstrap, topic):
            async with pykaf.aio.open_producer(bootstrap, linger=0.002) as producer:
                # Every way of sending, in order within each partition.
                for p in range(PARTITIONS):
                    md = await producer.send(topic, expected[p][0], partition=p)
                    assert (md.partition, md.offset) == (p, 0)
                for i in range(1, PER_PARTITION - 100):
                    for p in range(PARTITIONS):
                        producer.send_nowait(topic, expected[p][i], partition=p)
                    if i % 200 == 0:
                        await asyncio.sleep(0)
                for p in range(PARTITIONS):
                    mds = [
                        await producer.send(topic, v, partition=p)
                        for v in expected[p][PER_PARTITION - 100 : PER_PARTITION - 50]
                    ]
                    assert [md.offset for md in mds] == list(
                        range(PER_PARTITION - 100, PER_PARTITION - 50)
                    )
                    delivery = await producer.send_batch(
                        topic, expected[p][PER_PARTITION - 50 :], partition=p
                    )
                    assert await asyncio.wait_for(delivery.wait(), 30) == 50
                await asyncio.wait_for(producer.flush(), 30)
                stats = producer.statistics()
                assert stats.records_acked == PARTITIONS * PER_PARTITION
                assert stats.records_failed == 0

            async with pykaf.aio.open_consumer(bootstrap, **FAST) as consumer:
                # Partition 0 with async for, partition 1 with next_batch, at once.
                async def iterate() -> list[bytes | None]:
                    pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
                    out: list[bytes | None] = []
                    async for record in pc:
                        assert record.offset == len(out)
                        out.append(record.value)
                        if len(out) == PER_PARTITION:
                            break
                    return out

                async def batches() -> list[bytes | None]:
                    pc = await consumer.consume_partition(topic, 1, pykaf.OLDEST)
                    out: list[bytes | None] = []
                    while len(out) < PER_PARTITION:
                        batch = await pc.next_batch()
                        assert [r.offset for r in batch] == list(
                            range(len(out), len(out) + len(batch))
                        )
                        out += [r.value for r in batch]
                    return out

                got["read"] = list(await asyncio.wait_for(asyncio.gather(iterate(), batches()), 60))

    loop = run_without_watching(main)
    assert got["read"] == expected
    # pykaf asked the loop to read its connections, was refused, and trio read them.
    assert connections
    assert loop.asked.get("add_reader", 0) == len(connections)
    assert "add_writer" not in loop.asked
    assert "remove_reader" not in loop.asked  # nothing registered, nothing to remove
    assert all(c._host is None for c in connections)


def test_a_consumer_group_reads_everything_in_order_when_trio_reads(
    bootstrap_of: Callable[[], Any],
) -> None:
    per = 500
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    async def main() -> None:
        async with bootstrap_of() as (bootstrap, topic):
            async with pykaf.aio.open_producer(bootstrap) as producer:
                for p in range(PARTITIONS):
                    for i in range(per):
                        producer.send_nowait(topic, b"%d" % i, partition=p)
                await asyncio.wait_for(producer.flush(), 30)
            async with pykaf.aio.open_consumer_group(
                bootstrap,
                "g-" + topic,
                [topic],
                heartbeat_interval=0.2,
                session_timeout=6.0,
                **FAST,
            ) as group:

                async def consume() -> None:
                    count = 0
                    async for record in group:
                        seen[record.partition].append(record.offset)
                        count += 1
                        if count == PARTITIONS * per:
                            break

                await asyncio.wait_for(consume(), 60)

    loop = run_without_watching(main)
    assert seen == {p: list(range(per)) for p in range(PARTITIONS)}
    assert loop.asked.get("add_reader", 0) >= 1
