"""An awaited record does not pay the linger: ``send()``, ``send_now()``, sync waits.

Every producer here lingers an hour. Each test would then wait an hour for
its records, so the ``fail_after`` guards (far shorter than the linger) fail
it at once if the rule breaks; no test measures how long anything took.
Run on Apache Kafka, Tansu and the librdkafka mock cluster.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
import trio
import trio.abc
import trio.testing

import pykaf
import pykaf.sync
from pykaf.compat import kafka as kafka_shim

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker
unique = bc.unique

pytestmark = pytest.mark.broker

HOUR = 3600.0
GUARD = 60.0  # far shorter than the linger, long enough for a loaded machine


def new_topic(broker: Broker, partitions: int = 1) -> str:
    topic = unique("awaited")
    broker.create(topic, partitions)
    return topic


async def test_a_send_loop_does_not_wait_for_linger(broker: Broker) -> None:
    topic = new_topic(broker)
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        with trio.fail_after(GUARD):
            mds = [await producer.send(topic, b"v%d" % i) for i in range(20)]
        assert [md.offset for md in mds] == list(range(20))
        stats = producer.statistics()
        assert stats.batches_sent == 20  # one batch per awaited record
    values = bc.consume_assigned(broker.conf, topic, [0], 20)
    assert values == [b"v%d" % i for i in range(20)]


async def test_a_lone_awaited_send_is_written_from_the_callers_task(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With nothing in flight, the request is built and written by the task
    # that awaits send() (BrokerSink.write_now), not by the sender task woken
    # for it.
    from pykaf._producer.sink import BrokerSink

    writers: list[Any] = []
    build = BrokerSink._build

    def spy(self: BrokerSink, conn: Any, ready: Any) -> Any:
        writers.append(trio.lowlevel.current_task())
        return build(self, conn, ready)

    monkeypatch.setattr(BrokerSink, "_build", spy)
    topic = new_topic(broker)
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        await producer.send(topic, b"warm")
        writers.clear()
        with trio.fail_after(GUARD):
            for i in range(10):
                await producer.send(topic, b"v%d" % i)
        assert writers == [trio.lowlevel.current_task()] * 10


class _Steps(trio.abc.Instrument):
    """Counts the steps of the tasks whose name starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.startswith(self.prefix):
            self.steps += 1


async def test_a_loop_of_awaited_sends_does_not_wake_the_sender_task(broker: Broker) -> None:
    # Each record opens a batch that its own task writes (send_inline), and its
    # answer leaves nothing to send: the sender task has no work in that loop,
    # so waking it (for the opened batch, or for the freed slot) would cost a
    # pass through trio's scheduler per record for nothing.
    topic = new_topic(broker)
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        await producer.send(topic, b"warm")
        await trio.testing.wait_all_tasks_blocked()
        steps = _Steps("pykaf producer sender")
        trio.lowlevel.add_instrument(steps)
        try:
            with trio.fail_after(GUARD):
                mds = [await producer.send(topic, b"v%d" % i) for i in range(20)]
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert [md.offset for md in mds] == list(range(1, 21))
        assert steps.steps == 0


async def test_batches_sealed_while_a_send_writes_inline_are_sent_after_it(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sender task, woken while the awaiting task writes its own request,
    # leaves the batch to it; send_inline must wake the task again when done.
    # acks=0: no answer comes back to wake it instead.
    from pykaf._producer.sink import BrokerSink

    build_and_send = BrokerSink._build_and_send
    slow = [False]
    sealed = trio.Event()

    async def spy(self: BrokerSink, ready: Any) -> None:
        if slow[0]:
            slow[0] = False
            await sealed.wait()  # the other task seals a batch meanwhile
        await build_and_send(self, ready)

    monkeypatch.setattr(BrokerSink, "_build_and_send", spy)
    topic = new_topic(broker, 2)
    delivered: list[Any] = []
    async with pykaf.open_producer(
        broker.bootstrap, linger=HOUR, acks=0, idempotence=False
    ) as producer:
        await producer.send(topic, b"warm", partition=0)
        await producer.send(topic, b"warm", partition=1)

        async def meanwhile() -> None:
            await trio.testing.wait_all_tasks_blocked()  # the send waits in its write
            producer.send_nowait(
                topic, b"b", partition=1, on_delivery=lambda e, md: delivered.append(e)
            )
            producer.send_now()  # seals it and wakes the sender task
            await trio.testing.wait_all_tasks_blocked()  # which leaves it to the send
            sealed.set()

        slow[0] = True
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(meanwhile)
                await producer.send(topic, b"a", partition=0)
            while not delivered:
                await trio.sleep(0.01)
        assert delivered == [None]


async def test_an_awaited_send_cancelled_after_its_write_is_delivered_once(
    broker: Broker,
) -> None:
    topic = new_topic(broker)
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        await producer.send(topic, b"warm")
        with trio.CancelScope() as scope:
            scope.cancel()  # the send is cancelled at its first wait
            await producer.send(topic, b"cancelled")
        assert scope.cancelled_caught
        with trio.fail_after(GUARD):
            await producer.flush()
        md = await producer.send(topic, b"after")
        # The cancelled record was buffered (and written) before the send
        # waited, so it is delivered: once, before the next one.
        assert md.offset == 2
    assert bc.consume_assigned(broker.conf, topic, [0], 3) == [b"warm", b"cancelled", b"after"]


async def test_concurrent_senders_still_share_batches(broker: Broker) -> None:
    topic = new_topic(broker, 2)
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        # Warm up the topic so that every sender appends at once.
        await producer.send(topic, b"warm", partition=0)
        results: list[pykaf.RecordMetadata] = []

        async def one(i: int) -> None:
            results.append(await producer.send(topic, b"c%d" % i, partition=i % 2))

        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                for i in range(200):
                    nursery.start_soon(one, i)
        assert len(results) == 200
        # The senders appended before the sender task ran: a few batches, not 200.
        assert producer.statistics().batches_sent <= 1 + 2 * 5
        for p in (0, 1):
            offsets = sorted(md.offset for md in results if md.partition == p)
            assert offsets == list(range(1 if p == 0 else 0, 101 if p == 0 else 100))


async def test_send_now_sends_buffered_records_at_once(broker: Broker) -> None:
    topic = new_topic(broker)
    acked: list[pykaf.RecordMetadata] = []
    async with pykaf.open_producer(broker.bootstrap, linger=HOUR) as producer:
        await producer.send(topic, b"warm")  # the topic's metadata is known
        for i in range(50):
            producer.send_nowait(topic, b"n%d" % i, on_delivery=lambda e, md: acked.append(md))
        producer.send_now()
        with trio.fail_after(GUARD):
            while len(acked) < 50:
                await trio.sleep(0.01)
        # send_now is not a flush: records buffered after it linger again.
        producer.send_nowait(topic, b"late", on_delivery=lambda e, md: acked.append(md))
        await trio.sleep(0.3)
        assert len(acked) == 50 and producer.statistics().buffered_records == 1
        await producer.flush()
    assert [md.offset for md in acked] == list(range(1, 52))


def test_sync_send_and_future_waits_do_not_linger(broker: Broker) -> None:
    topic = new_topic(broker)
    with pykaf.sync.Producer(broker.bootstrap, linger=HOUR) as producer:
        mds = [producer.send(topic, b"s%d" % i, timeout=GUARD) for i in range(10)]
        assert [md.offset for md in mds] == list(range(10))
        # Waiting on a send_async future's result() hurries its record too.
        future = producer.send_async(topic, b"f")
        assert future.result(timeout=GUARD).offset == 10
        # Other ways of waiting do not; send_now() is there for them.
        futures = [producer.send_async(topic, b"w%d" % i) for i in range(5)]
        producer.send_now()
        done, _ = concurrent.futures.wait(futures, timeout=GUARD)
        assert len(done) == 5
        assert [f.result().offset for f in futures] == list(range(11, 16))
        producer.close(timeout=GUARD)
        with pytest.raises(pykaf.errors.ClosedError):
            producer.send_now()


def test_kafka_python_send_get_does_not_linger(broker: Broker) -> None:
    topic = new_topic(broker)
    producer: Any = kafka_shim.KafkaProducer(
        bootstrap_servers=broker.bootstrap, linger_ms=int(HOUR * 1000)
    )
    try:
        offsets = [producer.send(topic, b"k%d" % i).get(timeout=GUARD).offset for i in range(5)]
    finally:
        producer.close(timeout=GUARD)
    assert offsets == list(range(5))
