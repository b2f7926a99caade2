"""``send_nowait``'s staging: plain records in compiled runs, drained in bulk, in order.

Plain records (a bytes value, no key, no headers) are staged by compiled code
and appended in bulk when the producer's loop runs or anything else touches
the buffer. These tests pin what a caller can observe: one order per
partition whatever mix of calls made it, exact buffer limits, callbacks with
each record's own metadata, purges and closes that reach staged records, and
records that go out without any further producer call. The fake cluster runs
them fast; the order and callback tests also run on Kafka, Tansu and the mock.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf._producer.staging import CHUNK, SMALL
from pykaf.testing import FakeCluster, open_fake_cluster

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker


async def _log(cluster: FakeCluster, topic: str, partition: int = 0) -> list[bytes | None]:
    out: list[Any] = []
    async with pykaf.open_consumer(cluster.bootstrap) as consumer:
        end = await consumer.client.get_offset(topic, partition, pykaf.NEWEST)
        pc = await consumer.consume_partition(topic, partition, pykaf.OLDEST)
        with trio.fail_after(10):
            while pc.position < end:
                out += await pc.next_batch()
    return [m.value for m in out]


async def test_the_fast_path_is_the_compiled_stager() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            # RecordStager.produce, compiled unless the codec is the pure-Python twin.
            assert isinstance(producer.send_nowait.__self__, pykaf.codec.RecordStager)  # type: ignore[attr-defined]


@pytest.mark.broker
async def test_every_kind_of_call_keeps_one_order(broker: Broker) -> None:
    topic = bc.unique("staging-order")
    broker.create(topic, 1)
    expected: list[bytes] = []
    acked: list[tuple[int, bytes]] = []

    def on(value: bytes) -> Any:
        return lambda error, md: acked.append((md.offset, value)) if error is None else None

    async with pykaf.open_producer(broker.bootstrap, linger=0.05) as producer:
        await producer.send(topic, b"first")
        expected.append(b"first")
        for round_ in range(3):
            for i in range(CHUNK + 10):  # past one reservation: a drain in between
                v = b"plain-%d-%d" % (round_, i)
                producer.send_nowait(topic, v, on_delivery=on(v) if i % 7 == 0 else None)
                expected.append(v)
            producer.send_nowait(topic, b"keyed-%d" % round_, key=b"k", partition=0)
            expected.append(b"keyed-%d" % round_)
            producer.send_nowait(topic, b"stamped-%d" % round_, timestamp=1_700_000_000_000)
            expected.append(b"stamped-%d" % round_)
            producer.send_nowait(topic, b"headed-%d" % round_, headers=[("h", b"1")])
            expected.append(b"headed-%d" % round_)
            producer.send_nowait(topic, b"x" * (SMALL + 1))  # too big to stage
            expected.append(b"x" * (SMALL + 1))
            await producer.send_batch(topic, [b"batch-%d" % round_])
            expected.append(b"batch-%d" % round_)
            md = await producer.send(topic, b"awaited-%d" % round_)
            expected.append(b"awaited-%d" % round_)
            assert md.offset == len(expected) - 1  # everything staged before it went first
        await producer.flush()
    values = bc.consume_assigned(broker.conf, topic, [0], len(expected), timeout=60)
    assert values == expected
    assert acked and all(expected[offset] == value for offset, value in acked)


@pytest.mark.broker
async def test_callbacks_hear_each_records_metadata(broker: Broker) -> None:
    topic = bc.unique("staging-cb")
    broker.create(topic, 2)
    heard: list[tuple[BaseException | None, pykaf.RecordMetadata]] = []
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send(topic, b"warm", partition=1)
        for i in range(50):
            producer.send_nowait(
                topic,
                b"%d" % i,
                partition=1,
                timestamp=1_700_000_000_000 + i if i % 2 else None,
                on_delivery=lambda e, md: heard.append((e, md)),
            )
        with trio.fail_after(30):  # no flush: the staged records go out on their own
            while len(heard) < 50:
                await trio.sleep(0.01)
    assert all(e is None for e, _ in heard)
    mds = sorted((md for _, md in heard), key=lambda md: md.offset)
    assert [(md.topic, md.partition, md.offset) for md in mds] == [
        (topic, 1, i + 1) for i in range(50)
    ]
    stamps = [md.timestamp for md in mds]
    if broker.name == "mock":  # it answers with a LogAppendTime of 1234 (see test_producer_interop)
        return
    assert all(stamps[i] == 1_700_000_000_000 + i for i in range(1, 50, 2))
    assert all(stamps[i] > 1_700_000_000_000 + 10**9 for i in range(0, 50, 2))  # stamped now


async def test_buffer_limits_hold_with_staged_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, buffer_records=100, linger=5.0
        ) as producer:
            await producer.send(topic := "t", b"warm")
            taken = 0
            with pytest.raises(errors.BufferFullError):
                for i in range(1000):
                    producer.send_nowait(topic, b"%d" % i)
                    taken += 1
            assert taken == 100  # exactly the limit, staged or not
            assert producer.buffered_records == 100
            # A send() waits for the space the staged records hold.
            with trio.move_on_after(0.2):
                await producer.send(topic, b"waits")
            await producer.flush()
        assert await _log(cluster, "t") == [b"warm"] + [b"%d" % i for i in range(100)]


async def test_bytes_limit_holds_with_staged_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, buffer_bytes=20_000, linger=5.0
        ) as producer:
            await producer.send("t", b"warm")
            with pytest.raises(errors.BufferFullError):
                for _ in range(1000):
                    producer.send_nowait("t", b"v" * 1000)
            assert 19_000 <= producer.buffered_bytes <= 20_000 + 1000 + 24
            await producer.flush()


async def test_purge_and_close_reach_staged_records() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        failed: list[BaseException | None] = []
        async with pykaf.open_producer(cluster.bootstrap, linger=5.0) as producer:
            await producer.send("t", b"warm")
            for i in range(20):
                producer.send_nowait("t", b"%d" % i, on_delivery=lambda e, md: failed.append(e))
            assert producer.purge(in_flight=False) == 20
            assert len(failed) == 20 and all(isinstance(e, errors.PurgedError) for e in failed)
            for i in range(5):  # staged, then delivered by the close
                producer.send_nowait("t", b"last-%d" % i)
        assert await _log(cluster, "t") == [b"warm"] + [b"last-%d" % i for i in range(5)]


async def test_staging_is_off_with_interceptors() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        seen: list[bytes] = []

        def on_send(msg: pykaf.ProducerMessage) -> None:
            seen.append(msg.value or b"")

        async with pykaf.open_producer(cluster.bootstrap, on_send=[on_send]) as producer:
            producer.send_nowait("t", b"one")
            assert seen == [b"one"]  # the interceptor ran in the call
            assert producer.send_nowait.__func__ is pykaf.Producer.send_nowait  # type: ignore[attr-defined]
