"""Batches the broker refuses as too large (MESSAGE_TOO_LARGE) are split: on Kafka and the fake.

Both refuse a batch over its topic's ``max.message.bytes``. Topics here
allow 3000 bytes while the producer fills batches of up to 64 KiB, so every
batch is refused and split again and again. Every record must still be
written exactly once and in order, report the offset it was written at, and
only a record too large on its own fails, alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._net.metrics import BatchEvent
from pykaf.testing import FakeClusterThread, KafkaCluster

bc = pytest.importorskip("broker_clients")

LIMIT = 3000
#: Batches far over LIMIT: nothing is sent before linger, or before 64 KiB are buffered.
BIG_BATCHES: dict[str, Any] = {"linger": 5.0, "flush_bytes": 65_536}


def _values(n: int, size: int = 100) -> list[bytes]:
    # Random bytes: compressed batches must stay over the limit too.
    return [b"%06d:" % i + os.urandom(size - 7) for i in range(n)]


@dataclass
class Target:
    """A broker to split on: Apache Kafka (the session's node) or a fresh fake cluster."""

    name: str
    cluster: KafkaCluster | FakeClusterThread

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    async def topic(self, prefix: str, limit: int = LIMIT) -> str:
        """A new one-partition topic refusing batches over ``limit`` bytes."""
        name = bc.unique(prefix)
        configs = {"max.message.bytes": str(limit)}
        await trio.to_thread.run_sync(lambda: self.cluster.create_topic(name, 1, 1, configs))
        return name


@pytest.fixture(params=["kafka", "fake"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "kafka":
        yield Target("kafka", request.getfixturevalue("kafka_cluster"))
        return
    with FakeClusterThread(1) as fake:
        yield Target("fake", fake)
        failed = list(fake.cluster.handler_errors)
    assert not failed, f"the fake cluster's request handlers raised: {failed!r}"


def tid(prefix: str) -> str:
    return bc.unique(prefix)  # the session's Kafka keeps every transactional id


async def _read(target: Target, topic: str, *, committed: bool = False) -> list[Any]:
    """Every record of partition 0, from offset 0 to the end."""
    level = "read_committed" if committed else "read_uncommitted"
    out: list[Any] = []
    async with pykaf.open_consumer(target.bootstrap, isolation_level=level) as consumer:
        end = await consumer.client.get_offset(
            topic, 0, pykaf.NEWEST, isolation_level=int(committed)
        )
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        with trio.fail_after(20):
            while pc.position < end:
                out += await pc.next_batch()
    return out


async def _send_now(producer: pykaf.Producer, topic: str, value: bytes) -> pykaf.RecordMetadata:
    """``send()`` without waiting for the linger: a flush runs beside it."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer.flush)  # starts once send() has appended its record
        try:
            return await producer.send(topic, value, partition=0)
        except errors.PykafError as exc:
            error = exc  # raised as itself, not in an exception group
    raise error


@pytest.mark.parametrize("compression", ["none", "gzip"])
@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
async def test_send_nowait_batches_over_the_limit_are_split(
    target: Target, idempotence: bool, compression: str
) -> None:
    values = _values(2000)
    offsets: dict[int, int] = {}
    failures: list[BaseException] = []
    events: list[BatchEvent] = []
    acks: list[Any] = []

    def on_delivery(i: int) -> Any:
        def report(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            if error is not None:
                failures.append(error)
            else:
                assert i not in offsets
                offsets[i] = md.offset

        return report

    topic = await target.topic("split")
    async with pykaf.open_producer(
        target.bootstrap,
        idempotence=idempotence,
        # Without idempotence only one request in flight keeps the order.
        max_in_flight=5 if idempotence else 1,
        compression=compression,
        retries=1 if idempotence else 0,  # splitting is not retrying
        on_batch=events.append,
        on_acknowledgement=[lambda md, err: acks.append((md.offset, err))],
        **BIG_BATCHES,
    ) as producer:
        for i, value in enumerate(values):
            producer.send_nowait(topic, value, partition=0, on_delivery=on_delivery(i))
        await producer.flush()
        st = producer.statistics()
    records = await _read(target, topic)
    assert failures == []
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(len(values)))
    assert offsets == {i: i for i in range(len(values))}
    assert sorted(acks) == [(i, None) for i in range(len(values))]
    assert st.splits > 0 and st.records_acked == len(values) and st.records_failed == 0
    # One event per batch that reached the log, none for the batches that were split.
    assert all(e.error is None and e.bytes <= LIMIT for e in events)
    assert sum(e.records for e in events) == len(values)
    assert sorted(e.base_offset or 0 for e in events) == sorted(
        {(e.base_offset or 0) for e in events}
    )


async def test_send_waiters_get_the_offset_of_their_part(target: Target) -> None:
    values = _values(600)
    got: dict[bytes, int] = {}
    topic = await target.topic("waiters")
    async with pykaf.open_producer(target.bootstrap, **BIG_BATCHES) as producer:

        async def send(value: bytes) -> None:
            got[value] = (await producer.send(topic, value, partition=0)).offset

        async with trio.open_nursery() as nursery:
            for value in values:
                nursery.start_soon(send, value)
            await trio.sleep(0.1)  # every send() has appended its record
            nursery.start_soon(producer.flush)
        assert producer.statistics().splits > 0
    records = await _read(target, topic)
    assert len(records) == len(values)
    assert {r.value: r.offset for r in records} == got


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
async def test_send_batch_batches_over_the_limit_are_split(
    target: Target, idempotence: bool
) -> None:
    values = _values(3000)
    topic = await target.topic("bulk")
    async with pykaf.open_producer(
        target.bootstrap,
        idempotence=idempotence,
        max_in_flight=5 if idempotence else 1,
        **BIG_BATCHES,
    ) as producer:
        first = await producer.send_batch(topic, values[:1000], partition=0)
        keys = [b"k%d" % i for i in range(1000, 3000)]
        second = await producer.send_batch(topic, values[1000:], keys=keys, partition=0)
        await producer.flush()
        assert await first.wait() == 1000
        assert await second.wait() == 2000
        assert producer.statistics().splits > 0
    records = await _read(target, topic)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [None] * 1000 + keys
    assert [r.offset for r in records] == list(range(len(values)))


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
async def test_a_record_too_large_alone_fails_alone(target: Target, idempotence: bool) -> None:
    small = _values(300)
    big = b"B" * (LIMIT + 500)
    outcome: dict[int, Any] = {}
    topic = await target.topic("alone")
    async with pykaf.open_producer(
        target.bootstrap,
        idempotence=idempotence,
        max_in_flight=5 if idempotence else 1,
        **BIG_BATCHES,
    ) as producer:
        # Bulk deliveries and single records interleaved in one batch.
        before = await producer.send_batch(topic, small[:100], partition=0)
        for i in range(100, 150):
            producer.send_nowait(
                topic,
                small[i],
                partition=0,
                on_delivery=lambda e, md, i=i: outcome.update({i: (e, md)}),
            )
        producer.send_nowait(
            topic, big, partition=0, on_delivery=lambda e, md: outcome.update({-1: (e, md)})
        )
        after = await producer.send_batch(topic, small[150:250], partition=0)
        producer.send_nowait(topic, big, partition=0)  # nobody told: flush() raises it
        for value in small[250:]:
            producer.send_nowait(topic, value, partition=0)
        with pytest.raises(errors.DeliveryError) as info:
            await producer.flush()
        assert [(p, n) for _, p, n, _ in info.value.failures] == [(0, 1)]
        assert isinstance(info.value.failures[0][3], errors.RecordTooLargeError)
        assert await before.wait() == 100 and await after.wait() == 100
        with pytest.raises(errors.RecordTooLargeError):
            await _send_now(producer, topic, big)
        last = await _send_now(producer, topic, b"last")
        st = producer.statistics()
    records = await _read(target, topic)
    error, _ = outcome.pop(-1)
    assert isinstance(error, errors.RecordTooLargeError)
    assert all(e is None and md.offset == i for i, (e, md) in outcome.items())
    assert [r.value for r in records] == [*small, b"last"]
    assert [r.offset for r in records] == list(range(len(small) + 1))
    assert last.offset == len(small)
    assert st.records_failed == 3 and st.splits > 0


async def test_a_transaction_splits_its_batches_and_commits_them(target: Target) -> None:
    # 620 records: a batch of 595 (split) and one of 25 (fits, but is in flight
    # behind the first, so the broker refuses its sequence number at first).
    values = _values(1240)
    topic = await target.topic("txn")
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=tid("t-split"), **BIG_BATCHES
    ) as producer:
        for part in (values[:620], values[620:]):
            producer.begin_transaction()
            for value in part[:300]:
                producer.send_nowait(topic, value, partition=0)
            await producer.send_batch(topic, part[300:], partition=0)
            await producer.commit_transaction()
        st = producer.statistics()
    records = await _read(target, topic, committed=True)
    assert [r.value for r in records] == values
    assert st.splits > 0 and st.records_failed == 0 and st.epoch_bumps == 0
    assert st.retries > 0  # the batch behind the split one was sent again


async def test_a_transaction_with_a_record_too_large_must_abort(target: Target) -> None:
    topic = await target.topic("txn-big")
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=tid("t-split-big"), **BIG_BATCHES
    ) as producer:
        producer.begin_transaction()
        for value in _values(200):
            producer.send_nowait(topic, value, partition=0)
        with pytest.raises(errors.RecordTooLargeError):
            await _send_now(producer, topic, b"B" * (LIMIT + 1))
        with pytest.raises(errors.TransactionAbortableError):
            await producer.commit_transaction()
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send_batch(topic, _values(200), partition=0)
        await producer.commit_transaction()
    records = await _read(target, topic, committed=True)
    assert len(records) == 200


async def test_confluent_kafka_reads_split_batches(target: Target) -> None:
    values = _values(1000)
    topic = await target.topic("ck-split")
    async with pykaf.open_producer(target.bootstrap, compression="lz4", **BIG_BATCHES) as p:
        await p.send_batch(topic, values, partition=0)
        await p.flush()
    conf = {"bootstrap.servers": target.bootstrap}
    got = await trio.to_thread.run_sync(lambda: bc.consume_assigned(conf, topic, [0], len(values)))
    assert got == values
