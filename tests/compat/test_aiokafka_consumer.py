"""pykaf.compat.aiokafka.AIOKafkaConsumer on the fake cluster, Tansu and Apache Kafka."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pykaf.aio._reader import RecordReader
from pykaf.compat.aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    OffsetAndTimestamp,
    TopicPartition,
    errors,
)

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["fake", "tansu", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, the session's Tansu, then the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


async def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for partition, count in per_partition.items():
            for i in range(count):
                await producer.send(
                    topic, json.dumps([partition, i]).encode(), key=b"k", partition=partition
                )
        await producer.flush()


async def _drain(consumer: AIOKafkaConsumer, count: int) -> list[Any]:
    out: list[Any] = []
    while len(out) < count:
        batch = await consumer.getmany(timeout_ms=10_000)
        assert batch, f"only {len(out)} of {count} records came"
        for records in batch.values():
            out.extend(records)
    return out


def test_assigned_partitions_read_seek_and_report_positions(any_broker: Any) -> None:
    topic = bc.unique("aiok-assign")
    any_broker.create(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def main() -> None:
        await _produce(any_broker.bootstrap, topic, {0: 5, 1: 3})
        consumer = AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap,
            auto_offset_reset="earliest",
            value_deserializer=lambda data: json.loads(data or b"null"),
        )
        await consumer.start()
        try:
            consumer.assign([tp0, tp1])
            assert consumer.assignment() == {tp0, tp1}
            records = await _drain(consumer, 8)
            assert sorted(r.value for r in records) == sorted(
                [[0, i] for i in range(5)] + [[1, i] for i in range(3)]
            )
            first = records[0]
            assert first.key == b"k" and first.serialized_key_size == 1 and first.checksum is None
            assert await consumer.position(tp0) == 5 and await consumer.position(tp1) == 3
            consumer.seek(tp0, 3)
            assert await consumer.position(tp0) == 3
            again = await consumer.getone(tp0)
            assert (again.offset, again.value) == (3, [0, 3])
            await consumer.seek_to_beginning(tp1)
            assert (await consumer.getone(tp1)).offset == 0
            assert await consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await consumer.end_offsets([tp0]) == {tp0: 5}
            rest = await consumer.getmany(tp1, timeout_ms=5000)
            assert [r.offset for r in rest[tp1]] == [1, 2]
            with pytest.raises(errors.IllegalStateError):
                await consumer.position(TopicPartition(topic, 9))
            with pytest.raises(errors.IllegalOperation):
                await consumer.commit()
            assert topic in await consumer.topics()
        finally:
            await consumer.stop()
        with pytest.raises(errors.ConsumerStoppedError):
            await consumer.getmany()

    asyncio.run(main())


def test_pause_resume_and_offsets_for_times(any_broker: Any) -> None:
    topic = bc.unique("aiok-pause")
    any_broker.create(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def main() -> None:
        await _produce(any_broker.bootstrap, topic, {0: 3, 1: 3})
        async with AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([tp0, tp1])
            consumer.pause(tp1)
            assert consumer.paused() == {tp1}
            got = await _drain(consumer, 3)
            assert {r.partition for r in got} == {0}
            assert await consumer.getmany(timeout_ms=300) == {}
            consumer.resume(tp1)
            assert {r.partition for r in await _drain(consumer, 3)} == {1}
            found = await consumer.offsets_for_times({tp0: 0, tp1: 2**62})
            first = found[tp0]
            assert isinstance(first, OffsetAndTimestamp) and first.offset == 0
            if any_broker.name != "tansu":  # Tansu answers a lookup past the end with 0
                assert found[tp1] is None

    asyncio.run(main())


class _Listener(ConsumerRebalanceListener):
    """Records each call; commits what was handed out when partitions go (manual commits)."""

    def __init__(self, consumer: AIOKafkaConsumer, name: str, log: list[Any]) -> None:
        self.consumer = consumer
        self.name = name
        self.log = log

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.log.append((self.name, "revoked", sorted(revoked)))
        if revoked:
            await self.consumer.commit()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.log.append((self.name, "assigned", sorted(assigned)))


def test_group_members_share_partitions_and_commit_on_revoke(any_broker: Any) -> None:
    topic = bc.unique("aiok-group")
    group = bc.unique("aiok-g")
    any_broker.create(topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    def member(log: list[Any], name: str) -> tuple[AIOKafkaConsumer, _Listener]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )
        return consumer, _Listener(consumer, name, log)

    async def main() -> list[Any]:
        await _produce(any_broker.bootstrap, topic, {0: 4, 1: 4})
        log: list[Any] = []
        first, first_listener = member(log, "first")
        await first.start()
        first.subscribe([topic], listener=first_listener)
        got = await _drain(first, 8)
        assert len(got) == 8 and first.assignment() == {tp0, tp1}
        second, second_listener = member(log, "second")
        await second.start()
        second.subscribe([topic], listener=second_listener)
        # The first member gives a partition up: its listener commits what it handed out.
        for _ in range(200):
            if len(first.assignment()) == 1 and len(second.assignment()) == 1:
                break
            await first.getmany(timeout_ms=100)
            await second.getmany(timeout_ms=100)
        assert first.assignment() | second.assignment() == {tp0, tp1}
        assert await second.committed(tp0) == 4 and await second.committed(tp1) == 4
        # Nothing to re-read: every record was committed on revoke.
        assert await second.getmany(timeout_ms=500) == {}
        await second.stop()
        await first.stop()
        return log

    log = asyncio.run(main())
    assert ("first", "revoked", [tp0, tp1]) in log
    assert log[0] == ("first", "assigned", [tp0, tp1])


def test_group_async_for_with_auto_commit_and_read_committed(any_broker: Any) -> None:
    topic = bc.unique("aiok-txn-read")
    group = bc.unique("aiok-g")
    any_broker.create(topic, 1)
    tp = TopicPartition(topic, 0)

    async def main() -> list[Any]:
        producer = AIOKafkaProducer(
            bootstrap_servers=any_broker.bootstrap, transactional_id=bc.unique("txn")
        )
        await producer.start()
        async with producer.transaction():
            await producer.send(topic, b"kept")
        with pytest.raises(RuntimeError):
            async with producer.transaction():
                await producer.send(topic, b"aborted")
                raise RuntimeError("abort")
        async with producer.transaction():
            await producer.send(topic, b"last")
        await producer.stop()
        values = []
        async with AIOKafkaConsumer(
            topic,
            bootstrap_servers=any_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            auto_commit_interval_ms=100,
        ) as consumer:
            async for record in consumer:
                values.append(record.value)
                if record.value == b"last":
                    break
        async with AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap, group_id=group
        ) as checker:
            # Committed on stop (auto commit): after the last record handed out.
            committed = await checker.committed(tp)
            end = (await checker.end_offsets([tp]))[tp]
        assert committed == end
        return values

    values = asyncio.run(main())
    if any_broker.name == "tansu":  # Tansu sends no aborted-transaction list (brokers.md)
        assert values[0] == b"kept" and values[-1] == b"last"
    else:
        assert values == [b"kept", b"last"]


def test_bad_use_gets_aiokafkas_errors() -> None:
    with pytest.raises(ValueError):
        AIOKafkaConsumer(auto_offset_reset="sometimes")
    with pytest.raises(errors.KafkaConfigurationError, match="session_timeout_ms needs a group_id"):
        AIOKafkaConsumer(session_timeout_ms=1000)
    with pytest.raises(TypeError, match="fetch_max_wait"):
        AIOKafkaConsumer(fetch_max_wait=5)

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=500)
        with pytest.raises(errors.IllegalStateError, match="not started"):
            await consumer.getmany()
        with pytest.raises(errors.KafkaConnectionError):
            await consumer.start()
        with pytest.raises(ValueError, match="either topics or pattern"):
            consumer.subscribe()
        await consumer.stop()

    asyncio.run(main())


def test_assigned_partitions_of_a_group_are_committed_as_aiokafka_does(any_broker: Any) -> None:
    topic = bc.unique("aiok-assign-commit")
    group = bc.unique("aiok-g")
    any_broker.create(topic, 1)
    tp = TopicPartition(topic, 0)

    async def main() -> tuple[int | None, int | None]:
        await _produce(any_broker.bootstrap, topic, {0: 3})
        consumer = AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=100,
        )
        await consumer.start()
        consumer.assign([tp])
        await _drain(consumer, 3)
        await asyncio.sleep(0.2)
        await consumer.getmany(timeout_ms=0)  # the interval has passed: commits
        while_reading = await consumer.committed(tp)
        consumer.seek(tp, 1)
        await consumer.stop()  # commits the position on stop
        async with AIOKafkaConsumer(
            bootstrap_servers=any_broker.bootstrap, group_id=group
        ) as checker:
            return while_reading, await checker.committed(tp)

    assert asyncio.run(main()) == (3, 1)


def test_topics_given_without_a_group_are_assigned_when_start_returns(fake_cluster: Any) -> None:
    topic = bc.unique("aiok-start")
    fake_cluster.create_topic(topic, 2)
    tp = TopicPartition(topic, 1)

    async def main() -> None:
        await _produce(fake_cluster.bootstrap, topic, {1: 3})
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=fake_cluster.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        consumer.seek(tp, 2)  # at once, as aiokafka allows
        record = await consumer.getone(tp)
        assert (record.partition, record.offset) == (1, 2)
        await consumer.stop()
        with pytest.raises(errors.ConsumerStoppedError):
            consumer.__aiter__()  # a new iteration of a stopped consumer, as aiokafka

    asyncio.run(main())


def test_a_pattern_subscription_reads_the_matching_topics(fake_cluster: Any) -> None:
    prefix = bc.unique("aiok-pat")
    for name in ("a", "b"):
        fake_cluster.create_topic(f"{prefix}-{name}", 1)
    fake_cluster.create_topic(bc.unique("aiok-other"), 1)

    async def main() -> set[str]:
        for name in ("a", "b"):
            await _produce(fake_cluster.bootstrap, f"{prefix}-{name}", {0: 1})
        async with AIOKafkaConsumer(
            bootstrap_servers=fake_cluster.bootstrap,
            group_id=bc.unique("aiok-g"),
            auto_offset_reset="earliest",
        ) as consumer:
            consumer.subscribe(pattern=f"{prefix}-.*")
            records = await _drain(consumer, 2)
            assert consumer.subscription() == {f"{prefix}-a", f"{prefix}-b"}
            assert records[0].headers == ()
            return {r.topic for r in records}

    assert asyncio.run(main()) == {f"{prefix}-a", f"{prefix}-b"}


def test_seeks_without_partitions_wait_for_the_groups_assignment(fake_cluster: Any) -> None:
    topic = bc.unique("aiok-wait")
    fake_cluster.create_topic(topic, 2)
    tp0 = TopicPartition(topic, 0)

    async def main() -> None:
        await _produce(fake_cluster.bootstrap, topic, {0: 2})
        async with AIOKafkaConsumer(
            topic,
            bootstrap_servers=fake_cluster.bootstrap,
            group_id=bc.unique("aiok-g"),
            auto_offset_reset="earliest",
        ) as consumer:
            assert await consumer.seek_to_committed() == {}  # nothing committed yet
            assert consumer.assignment() == {tp0, TopicPartition(topic, 1)}
            await consumer.seek_to_end()
            assert await consumer.position(tp0) == 2
            await consumer.seek_to_beginning()
            assert (await consumer.getone(tp0)).offset == 0
            stamp = consumer.last_poll_timestamp(tp0)
            assert stamp is not None and stamp > 0

    asyncio.run(main())


@pytest.fixture(params=["fake", "kafka"])
def oor_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, then Apache Kafka (Tansu answers a fetch past the end with nothing)."""
    return bc.broker_from(request, request.param)


def test_an_offset_out_of_range_with_no_reset_is_raised_then_a_seek_goes_on(
    oor_broker: Any,
) -> None:
    topic = bc.unique("aiok-oor")
    oor_broker.create(topic, 1)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        await _produce(oor_broker.bootstrap, topic, {0: 3})
        async with AIOKafkaConsumer(
            bootstrap_servers=oor_broker.bootstrap, auto_offset_reset="none"
        ) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            with pytest.raises(errors.OffsetOutOfRangeError):
                await consumer.getmany(timeout_ms=20_000)
            consumer.seek(tp, 1)
            assert [r.offset for r in await _drain(consumer, 2)] == [1, 2]

    asyncio.run(main())


def test_a_fatal_fetch_error_is_raised_by_the_next_read(fake_cluster: Any) -> None:
    topic = bc.unique("aiok-auth")
    fake_cluster.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        await _produce(fake_cluster.bootstrap, topic, {0: 2})
        async with AIOKafkaConsumer(
            bootstrap_servers=fake_cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            # The first Fetch (a full one: it names the partition) fails.
            fake_cluster.push_request_errors(1, 29)  # Fetch: TOPIC_AUTHORIZATION_FAILED
            consumer.assign([tp])
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await consumer.getmany(timeout_ms=20_000)

    asyncio.run(main())


def test_a_pump_that_dies_makes_the_next_read_raise(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = bc.unique("aiok-dies")
    fake_cluster.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)

    async def broken(self: Any, *, columnar: bool = False) -> Any:
        raise RuntimeError("the pump broke")

    monkeypatch.setattr(RecordReader, "next_batch", broken)

    async def main() -> None:
        async with AIOKafkaConsumer(
            bootstrap_servers=fake_cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([tp])
            with pytest.raises(RuntimeError, match="the pump broke"):
                await consumer.getmany(timeout_ms=20_000)

    asyncio.run(main())


def test_a_batch_fetched_but_not_handed_out_is_neither_reported_nor_committed(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = bc.unique("aiok-ahead")
    fake_cluster.create_topic(topic, 1)
    tp = TopicPartition(topic, 0)
    fetched = asyncio.Event()
    release = asyncio.Event()
    next_batch = RecordReader.next_batch

    async def held(self: Any, *, columnar: bool = False) -> Any:
        # The trio reader has handed the batch over (its position is past it);
        # the pump gets it only once the test says so.
        batch = await next_batch(self, columnar=columnar)
        if batch:
            fetched.set()
            await release.wait()
        return batch

    monkeypatch.setattr(RecordReader, "next_batch", held)

    async def main() -> None:
        await _produce(fake_cluster.bootstrap, topic, {0: 4})
        async with AIOKafkaConsumer(
            bootstrap_servers=fake_cluster.bootstrap,
            group_id=bc.unique("aiok-g"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            consumer.assign([tp])
            await asyncio.wait_for(fetched.wait(), 20)
            assert await consumer.position(tp) == 0
            await consumer.commit()
            assert await consumer.committed(tp) in (None, 0)
            release.set()
            assert [r.offset for r in await _drain(consumer, 4)] == [0, 1, 2, 3]
            assert await consumer.position(tp) == 4
            await consumer.commit()
            assert await consumer.committed(tp) == 4

    asyncio.run(main())
