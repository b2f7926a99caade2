"""KIP-227 fetch sessions in the consumer, on Apache Kafka first, then the fake cluster.

Many partitions give every record exactly once with sessions on and off; an
idle incremental Fetch is a fraction of a full one (the request metrics); a
session the broker lost (closed behind the consumer's back) or an epoch out of
step is recovered with a full fetch, nothing skipped or repeated; a broker that
keeps no sessions gets full fetches throughout; a paused partition leaves the
session; closing the consumer closes its session.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._consumer.fetcher import BrokerFetcher
from pykaf.testing import FakeClusterThread, open_fake_cluster
from pykaf.testing._kafka import KafkaCluster, open_kafka_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

F = P.FetchRequest


def value(p: int, i: int) -> bytes:
    """The ``i``-th record of partition ``p``."""
    return b"%d:%d" % (p, i)


async def produce(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> None:
    """Records ``start`` .. ``start + count - 1`` to each partition."""
    async with pykaf.open_producer(bootstrap, linger=0.005) as producer:
        for i in range(start, start + count):
            for p in range(partitions):
                producer.send_nowait(topic, value(p, i), partition=p)
        await producer.flush()


async def read_exactly(pc: pykaf.PartitionConsumer, count: int, timeout: float) -> None:
    """``count`` records, each partition's in order and once; then nothing more."""
    got: list[bytes | None] = []
    with trio.move_on_after(timeout):
        while len(got) < count:
            got.extend(r.value for r in await pc.next_batch())
    assert got == [value(pc.partition, i) for i in range(count)], (
        f"{pc.topic}/{pc.partition}: {len(got)} records, first wrong at "
        f"{next((i for i, v in enumerate(got) if v != value(pc.partition, i)), None)}"
    )
    with trio.move_on_after(0.3):
        extra = await pc.next_batch()
        raise AssertionError(f"{pc.topic}/{pc.partition}: more records: {extra[:3]}")


async def consume_all(
    consumer: pykaf.Consumer,
    topic: str,
    partitions: int,
    count: int,
    during: Any = None,
    timeout: float = 60.0,
) -> list[pykaf.PartitionConsumer]:
    """Read ``count`` records from each partition concurrently (``during`` runs alongside)."""
    pcs = [await consumer.consume_partition(topic, p, pykaf.OLDEST) for p in range(partitions)]
    async with trio.open_nursery() as nursery:
        for pc in pcs:
            nursery.start_soon(read_exactly, pc, count, timeout)
        if during is not None:
            nursery.start_soon(during)
    return pcs


def fetcher(consumer: pykaf.Consumer) -> BrokerFetcher:
    """The consumer's only fetcher (a one-node cluster)."""
    (only,) = consumer._fetchers.values()
    return only


def fetch_sizes(events: list[pykaf.RequestEvent]) -> list[int]:
    """The sizes of the Fetch requests among ``events``."""
    return [e.bytes_sent for e in events if e.api == "Fetch" and e.error is None]


def fetch_statistics(consumer: pykaf.Consumer) -> pykaf.RequestStatistics:
    """The consumer's client's Fetch counters."""
    (stats,) = [s for s in consumer.client.statistics().requests if s.api == "Fetch"]
    return stats


@pytest.fixture(params=["kafka", "fake"])
def target(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """(bootstrap, topic maker) of the session's Kafka node and of a one-node fake cluster."""
    if request.param == "kafka":
        kafka: KafkaCluster = request.getfixturevalue("kafka_cluster")
        return kafka.bootstrap, lambda t, n: kafka.create_topic(t, n, 1)
    fake = request.getfixturevalue("fake_cluster1")
    return fake.bootstrap, lambda t, n: fake.create_topic(t, n, 1)


@pytest.fixture
def fake_cluster1() -> Any:
    """A one-node fake cluster for this test."""
    with FakeClusterThread(1) as fake:
        yield fake
        failures = list(fake.cluster.handler_errors)
    assert not failures, failures


# ------------------------------------------------------------- many partitions


@pytest.mark.parametrize("sessions", [True, False], ids=["sessions", "no-sessions"])
async def test_many_partitions_every_record_once(target: tuple[str, Any], sessions: bool) -> None:
    """100 partitions, records produced before and while consuming: each once, in order."""
    bootstrap, create = target
    topic, n = unique("fs-many"), 100
    await trio.to_thread.run_sync(create, topic, n)
    await produce(bootstrap, topic, n, 0, 20)
    events: list[pykaf.RequestEvent] = []

    async def more() -> None:
        for start in (20, 40):
            await trio.sleep(0.3)
            await produce(bootstrap, topic, n, start, 20)

    async with pykaf.open_consumer(
        bootstrap, fetch_sessions=sessions, fetch_max_wait=0.1, on_request=events.append
    ) as consumer:
        await consume_all(consumer, topic, n, 60, during=more)
        stats = fetcher(consumer).statistics()
        if sessions:
            assert stats["session_id"] != 0
            assert stats["incremental_fetches"] > stats["full_fetches"] >= 1
            assert stats["session_resets"] == 0
        else:
            assert stats["session_id"] == 0 and stats["incremental_fetches"] == 0
            assert stats["full_fetches"] == stats["requests"]
        # The request metrics count every Fetch's bytes (the hook saw each one).
        counted = fetch_statistics(consumer)
        assert counted.bytes_sent == sum(fetch_sizes(events)) > 0


async def test_idle_incremental_fetches_are_a_fraction_of_full_ones(
    target: tuple[str, Any],
) -> None:
    """Once all 100 partitions are read, a full Fetch names them all and an incremental none."""
    bootstrap, create = target
    topic, n = unique("fs-size"), 100
    await trio.to_thread.run_sync(create, topic, n)
    await produce(bootstrap, topic, n, 0, 5)
    means: dict[bool, float] = {}
    idle: dict[bool, list[int]] = {}
    for sessions in (False, True):
        events: list[pykaf.RequestEvent] = []
        async with pykaf.open_consumer(
            bootstrap, fetch_sessions=sessions, fetch_max_wait=0.05, on_request=events.append
        ) as consumer:
            await consume_all(consumer, topic, n, 5)
            mark, fetched = len(events), fetcher(consumer).statistics()["bytes"]
            await trio.sleep(0.5)  # idle: nothing new, every partition attached
            idle[sessions] = fetch_sizes(events[mark:])
            # The broker reads from the positions it was told: nothing comes twice.
            assert fetcher(consumer).statistics()["bytes"] == fetched
            stats = fetch_statistics(consumer)
            means[sessions] = stats.bytes_sent / stats.count
    assert len(idle[False]) >= 3 and len(idle[True]) >= 3
    full = min(idle[False])
    assert full > 100 * 8, idle[False]  # each of the 100 partitions costs bytes
    assert max(idle[True]) * 10 < full, (idle[True], full)
    assert means[True] < means[False] / 2, means


# ---------------------------------------------------------------- lost sessions


async def close_from_outside(bootstrap: str, session_id: int) -> Any:
    """Close session ``session_id`` with another connection (the broker forgets it)."""
    async with pykaf.open_client(bootstrap) as client:
        (node,) = await client.brokers()
        return await client.request(
            node.node_id,
            F(
                replica_id=-1,
                max_wait_ms=10,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=session_id,
                session_epoch=-1,
                topics=[],
                forgotten_topics_data=[],
            ),
            12,
        )


@pytest.mark.parametrize("how", ["session-closed", "epoch-skewed"])
async def test_a_lost_session_recovers_with_a_full_fetch(target: tuple[str, Any], how: str) -> None:
    """The broker forgets the session, or the epochs disagree: nothing skipped or repeated."""
    bootstrap, create = target
    topic, n = unique("fs-lost"), 20
    await trio.to_thread.run_sync(create, topic, n)
    await produce(bootstrap, topic, n, 0, 30)
    async with pykaf.open_consumer(bootstrap, fetch_max_wait=0.1) as consumer:
        seen: dict[str, int] = {}

        async def lose_it() -> None:
            f = None
            while f is None or not f.session.open or f.session.incremental_fetches < 2:
                await trio.sleep(0.02)
                f = next(iter(consumer._fetchers.values()), None)
            seen["id"] = f.session.session_id
            if how == "session-closed":
                answer = await close_from_outside(bootstrap, f.session.session_id)
                assert answer.error_code == 0 and answer.session_id == 0
            else:
                f.session.epoch += 7  # the client's epoch out of step with the broker's
            await produce(bootstrap, topic, n, 30, 30)

        await consume_all(consumer, topic, n, 60, during=lose_it)
        stats = fetcher(consumer).statistics()
        assert stats["session_resets"] >= 1, stats
        assert stats["full_fetches"] >= 2, stats
        assert stats["session_id"] not in (0, seen["id"]), stats
        assert stats["incremental_fetches"] >= 3, stats


# ------------------------------------------------------ brokers without sessions


async def consume_without_sessions(bootstrap: str, topic: str, n: int) -> list[dict[str, int]]:
    """Consume ``n`` partitions with sessions asked for; each fetcher's counters."""
    await produce(bootstrap, topic, n, 0, 10)

    async def more() -> None:
        await trio.sleep(0.3)
        await produce(bootstrap, topic, n, 10, 10)

    async with pykaf.open_consumer(bootstrap, fetch_max_wait=0.1) as consumer:
        await consume_all(consumer, topic, n, 20, during=more)
        return [f.statistics() for f in consumer._fetchers.values()]


def assert_full_fetches_only(all_stats: list[dict[str, int]]) -> None:
    """No fetcher had a session; each asked in full every time."""
    assert all_stats
    for stats in all_stats:
        assert stats["session_id"] == 0 and stats["incremental_fetches"] == 0, stats
        assert stats["full_fetches"] == stats["requests"] >= 1, stats
        assert stats["session_resets"] == 0, stats
    assert sum(s["requests"] for s in all_stats) >= 2


async def test_kafka_with_no_session_slots_gets_full_fetches() -> None:
    """max.incremental.fetch.session.cache.slots=0: session id 0, every Fetch in full."""
    async with open_kafka_cluster(
        1, broker_configs={"max.incremental.fetch.session.cache.slots": "0"}
    ) as kafka:
        topic = unique("fs-noslots")
        await kafka.create_topic(topic, 8, 1)
        assert_full_fetches_only(await consume_without_sessions(kafka.bootstrap, topic, 8))


@pytest.mark.parametrize("name", ["tansu", "mock", "fake-no-slots"])
async def test_brokers_without_sessions_get_full_fetches(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Tansu, librdkafka's mock and a fake with no slots answer session id 0: full fetches."""
    topic = unique("fs-none")
    if name == "fake-no-slots":
        async with open_fake_cluster(1, fetch_session_slots=0) as fake:
            fake.create_topic(topic, 4, 1)
            stats = await consume_without_sessions(fake.bootstrap, topic, 4)
    else:
        broker = bc.broker_from(request, name)
        await trio.to_thread.run_sync(broker.create, topic, 4)
        stats = await consume_without_sessions(broker.bootstrap, topic, 4)
    assert_full_fetches_only(stats)


# ---------------------------------------------------------- pause and close


async def test_a_paused_partition_leaves_the_session(target: tuple[str, Any]) -> None:
    """Paused: forgotten by the session, nothing handed out; resumed: its records, once."""
    bootstrap, create = target
    topic, n = unique("fs-pause"), 4
    await trio.to_thread.run_sync(create, topic, n)
    await produce(bootstrap, topic, n, 0, 5)
    events: list[pykaf.RequestEvent] = []
    async with pykaf.open_consumer(
        bootstrap, fetch_max_wait=0.05, on_request=events.append
    ) as consumer:
        pcs = await consume_all(consumer, topic, n, 5)
        paused = pcs[0]
        paused.pause()
        f = fetcher(consumer)
        await trio.sleep(0.3)
        assert (topic, 0) not in f.session.told, f.session.told
        assert set(f.session.told) == {(topic, p) for p in range(1, n)}
        await produce(bootstrap, topic, n, 5, 5)
        for pc in pcs[1:]:
            got: list[Any] = []
            with trio.fail_after(20):
                while len(got) < 5:
                    got.extend(await pc.next_batch())
            assert [r.value for r in got] == [value(pc.partition, i) for i in range(5, 10)]
        with trio.move_on_after(0.5):
            early = await paused.next_batch()
            raise AssertionError(f"a paused partition handed out {early[:3]}")
        paused.resume()
        got = []
        with trio.fail_after(20):
            while len(got) < 5:
                got.extend(await paused.next_batch())
        assert [r.value for r in got] == [value(0, i) for i in range(5, 10)]
        assert (topic, 0) in f.session.told
        assert f.session.resets == 0


async def test_closing_the_consumer_closes_its_session(target: tuple[str, Any]) -> None:
    """After close, the broker no longer knows the session id (epoch -1 was sent)."""
    bootstrap, create = target
    topic, n = unique("fs-close"), 3
    await trio.to_thread.run_sync(create, topic, n)
    await produce(bootstrap, topic, n, 0, 3)
    async with pykaf.open_consumer(bootstrap, fetch_max_wait=0.05) as consumer:
        pcs = await consume_all(consumer, topic, n, 3)
        for pc in pcs:
            pc.pause()  # no Fetch in flight at close: the close is one round trip
        f = fetcher(consumer)
        with trio.fail_after(5):
            while f._in_flight or not f.session.open:
                await trio.sleep(0.01)
        session_id, epoch = f.session.session_id, f.session.epoch
    async with pykaf.open_client(bootstrap) as client:
        (node,) = await client.brokers()
        answer = await client.request(
            node.node_id,
            F(
                replica_id=-1,
                max_wait_ms=10,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=session_id,
                session_epoch=epoch,
                topics=[],
                forgotten_topics_data=[],
            ),
            12,
        )
    assert answer.error_code == errors.FetchSessionIdNotFoundError.code


@pytest.mark.slow
async def test_a_thousand_partitions_on_kafka(kafka_cluster: KafkaCluster) -> None:
    """1,000 partitions on Kafka with sessions: every record once; idle Fetches stay small."""
    topic, n = unique("fs-1000"), 1000
    await trio.to_thread.run_sync(lambda: kafka_cluster.create_topic(topic, n, 1, timeout=120.0))
    bootstrap = kafka_cluster.bootstrap
    await produce(bootstrap, topic, n, 0, 5)
    events: list[pykaf.RequestEvent] = []

    async def more() -> None:
        await trio.sleep(0.5)
        await produce(bootstrap, topic, n, 5, 5)

    async with pykaf.open_consumer(
        bootstrap, fetch_max_wait=0.1, on_request=events.append
    ) as consumer:
        await consume_all(consumer, topic, n, 10, during=more, timeout=60)
        mark, fetched = len(events), fetcher(consumer).statistics()["bytes"]
        await trio.sleep(0.5)
        stats = fetcher(consumer).statistics()
    assert stats["session_resets"] == 0 and stats["incremental_fetches"] > 0, stats
    idle = fetch_sizes(events[mark:])
    assert idle and max(idle) < 200, idle  # an idle incremental Fetch names no partition
    assert stats["bytes"] == fetched  # and brings nothing again


async def test_the_fake_clusters_eviction_control() -> None:
    """evict_fetch_sessions() drops the sessions; the consumer recovers with a full fetch."""
    async with open_fake_cluster(1) as fake:
        topic, n = unique("fs-evict"), 5
        fake.create_topic(topic, n, 1)
        await produce(fake.bootstrap, topic, n, 0, 10)
        async with pykaf.open_consumer(fake.bootstrap, fetch_max_wait=0.05) as consumer:
            evicted: list[int] = []

            async def evict() -> None:
                f = None
                while f is None or f.session.incremental_fetches < 2:
                    await trio.sleep(0.02)
                    f = next(iter(consumer._fetchers.values()), None)
                evicted.append(fake.evict_fetch_sessions())
                await produce(fake.bootstrap, topic, n, 10, 10)

            await consume_all(consumer, topic, n, 20, during=evict)
            stats = fetcher(consumer).statistics()
        assert evicted == [1]
        assert stats["session_resets"] == 1 and stats["full_fetches"] == 2, stats
