"""``confluent_kafka.aio`` and pykaf's drop-in run the same asyncio code, on each broker.

Each test runs on the real ``confluent_kafka.aio`` and then on
``pykaf.compat.confluent_kafka.aio``, against the fake cluster, Tansu and
Apache Kafka, with ``asyncio.run`` (the suite's own async tests are trio's).
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
pytest.importorskip("confluent_kafka.aio", reason="needs confluent-kafka 2.13+")

pytestmark = pytest.mark.broker

N = 50


@pytest.fixture(params=["confluent_kafka", "pykaf.compat.confluent_kafka"])
def ck(request: pytest.FixtureRequest) -> tuple[ModuleType, ModuleType]:
    """(the package, its aio module): confluent-kafka's, then pykaf's."""
    return (
        importlib.import_module(request.param),
        importlib.import_module(request.param + ".aio"),
    )


@pytest.fixture(params=["fake", "tansu", "kafka"])
def aio_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, the session's Tansu, the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


def _consumer_conf(broker: Any, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }


async def _read(consumer: Any, want: int, timeout: float = 30) -> list[Any]:
    got: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < want:
        assert loop.time() < deadline, f"read {len(got)} of {want}"
        for msg in await consumer.consume(num_messages=want, timeout=0.5):
            assert msg.error() is None, msg.error()
            got.append(msg)
    return got


def test_produce_futures_then_a_group_reads_and_commits(ck: Any, aio_broker: Any) -> None:
    package, aio = ck
    topic = bc.unique("cfaio")
    aio_broker.create(topic, 2)
    group = bc.unique("g")
    called: list[Any] = []

    async def main() -> None:
        producer = aio.AIOProducer({"bootstrap.servers": aio_broker.bootstrap, "acks": "all"})
        futures = [
            await producer.produce(topic, value=b"v%d" % i, key=b"k", partition=i % 2)
            for i in range(N)
        ]
        delivered = await asyncio.gather(*futures)
        assert await producer.flush() == 0
        assert len(producer) == 0
        by_partition: dict[int, list[int]] = {0: [], 1: []}
        for i, msg in enumerate(delivered):
            assert msg.error() is None
            assert (msg.topic(), msg.partition(), msg.value()) == (topic, i % 2, b"v%d" % i)
            by_partition[msg.partition()].append(msg.offset())
        assert by_partition == {0: list(range(N // 2)), 1: list(range(N // 2))}
        await producer.close()

        consumer = aio.AIOConsumer(_consumer_conf(aio_broker, group))

        async def on_assign(c: Any, partitions: list[Any]) -> None:
            # A call from inside the callback is admitted while the poll waits.
            called.append((c is consumer, sorted(p.partition for p in partitions)))

        await consumer.subscribe([topic], on_assign=on_assign)
        got = await _read(consumer, N)
        assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(N))
        await consumer.commit(asynchronous=False)
        committed = await consumer.committed(
            [package.TopicPartition(topic, 0), package.TopicPartition(topic, 1)], timeout=10
        )
        assert [tp.offset for tp in committed] == [N // 2, N // 2]
        await consumer.close()

    asyncio.run(main())
    assert called and called[0][0] is True
    assert sorted(p for _, ps in called for p in ps) == [0, 1]


def test_a_record_too_large_and_a_missing_loop(ck: Any, aio_broker: Any) -> None:
    package, aio = ck
    with pytest.raises(RuntimeError):
        aio.AIOProducer({"bootstrap.servers": aio_broker.bootstrap})  # no running loop
    topic = bc.unique("cfaio")
    aio_broker.create(topic, 1)

    async def main() -> None:
        producer = aio.AIOProducer({"bootstrap.servers": aio_broker.bootstrap})
        too_large = await producer.produce(topic, value=b"x" * 2_000_000)
        with pytest.raises(package.KafkaException) as info:
            await too_large
        assert info.value.args[0].code() == package.KafkaError.MSG_SIZE_TOO_LARGE
        await producer.close()

    asyncio.run(main())


def test_transactions_commit_and_abort(ck: Any, real_broker: Any) -> None:
    _, aio = ck
    if real_broker.name == "tansu" and aio.__name__ == "confluent_kafka.aio":
        pytest.skip("Tansu: librdkafka's read_committed hands out the aborted records there")
    topic = bc.unique("cfaio-txn")
    real_broker.create(topic, 1)

    async def main() -> None:
        producer = aio.AIOProducer(
            {"bootstrap.servers": real_broker.bootstrap, "transactional.id": bc.unique("tx")}
        )
        await producer.init_transactions()
        await producer.begin_transaction()
        kept = [await producer.produce(topic, value=b"kept-%d" % i) for i in range(5)]
        await producer.commit_transaction()
        await asyncio.gather(*kept)
        await producer.begin_transaction()
        for i in range(5):
            await producer.produce(topic, value=b"dropped-%d" % i)
        await producer.abort_transaction()
        await producer.close()

        consumer = aio.AIOConsumer(
            _consumer_conf(real_broker, bc.unique("g"), **{"isolation.level": "read_committed"})
        )
        await consumer.subscribe([topic])
        got = await _read(consumer, 5)
        assert [m.value() for m in got] == [b"kept-%d" % i for i in range(5)]
        assert await consumer.consume(num_messages=10, timeout=1) == []
        await consumer.close()

    asyncio.run(main())


def test_pykaf_produces_in_the_loop_thread(kafka_broker: Any) -> None:
    """pykaf's AIOProducer stages in the loop's own thread: no worker thread per record."""
    from pykaf.compat.confluent_kafka.aio import AIOProducer

    topic = bc.unique("cfaio")
    kafka_broker.create(topic, 1)

    async def main() -> None:
        async with AIOProducer({"bootstrap.servers": kafka_broker.bootstrap}) as producer:
            await (
                await producer.produce(topic, value=b"0")
            )  # connected (trio resolves in a thread)
            before = {t.ident for t in threading.enumerate()}
            futures = [await producer.produce(topic, value=b"%d" % i) for i in range(1, 1000)]
            assert {t.ident for t in threading.enumerate()} <= before
            offsets = [m.offset() for m in await asyncio.gather(*futures)]
        assert offsets == list(range(1, 1000))

    asyncio.run(main())


def test_pykaf_refuses_what_it_cannot_do(kafka_broker: Any) -> None:
    """Each refusal is listed in docs/migrating.md."""
    from pykaf.compat.confluent_kafka import KafkaException
    from pykaf.compat.confluent_kafka._error import LOCAL_CODES
    from pykaf.compat.confluent_kafka.aio import AIOConsumer, AIOProducer

    async def main() -> None:
        async with AIOProducer({"bootstrap.servers": kafka_broker.bootstrap}) as producer:
            with pytest.raises(KafkaException) as info:
                await producer.set_sasl_credentials("u", "p")
            assert info.value.args[0].code() == LOCAL_CODES["_NOT_IMPLEMENTED"]
            with pytest.raises(KafkaException) as info:
                await producer.begin_transaction()  # no transactional.id
            assert info.value.args[0].code() == LOCAL_CODES["_NOT_CONFIGURED"]
        consumer = AIOConsumer(_consumer_conf(kafka_broker, bc.unique("g")))
        with pytest.raises(KafkaException) as info:
            await consumer.set_sasl_credentials("u", "p")
        assert info.value.args[0].code() == LOCAL_CODES["_NOT_IMPLEMENTED"]
        await consumer.close()

    asyncio.run(main())


def test_pykaf_settles_the_future_when_a_callback_raises(fake_cluster: Any) -> None:
    from pykaf.compat.confluent_kafka.aio import AIOProducer

    topic = bc.unique("cfaio")
    fake_cluster.create_topic(topic, 1)

    def broken(err: Any, msg: Any) -> None:
        raise ValueError("the user's callback fails")

    async def main() -> None:
        async with AIOProducer({"bootstrap.servers": fake_cluster.bootstrap}) as producer:
            delivered = await producer.produce(topic, value=b"x", on_delivery=broken)
            msg = await asyncio.wait_for(delivered, 10)
            assert msg.offset() == 0

    asyncio.run(main())


def test_pykaf_keeps_what_a_cancelled_consume_took(fake_cluster: Any) -> None:
    """asyncio.wait_for around consume: the thread's messages go to the next call, in order."""
    from pykaf.compat.confluent_kafka import TopicPartition
    from pykaf.compat.confluent_kafka.aio import AIOConsumer, AIOProducer

    topic = bc.unique("cfaio")
    fake_cluster.create_topic(topic, 1)

    async def main() -> None:
        consumer = AIOConsumer({"bootstrap.servers": fake_cluster.bootstrap, "group.id": "g"})
        await consumer.assign([TopicPartition(topic, 0, 0)])
        assert await consumer.consume(5, timeout=0.2) == []  # assigned, nothing there yet
        # A consume waiting in its thread is cancelled; the records come while it waits.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.consume(5, timeout=3), 0.2)
        async with AIOProducer({"bootstrap.servers": fake_cluster.bootstrap}) as producer:
            for i in range(20):
                await producer.produce(topic, value=b"%d" % i)
            await producer.flush()
        got: list[bytes] = []
        while len(got) < 20:
            got.extend(m.value() for m in await consumer.consume(5, timeout=5))
        assert got == [b"%d" % i for i in range(20)]
        await consumer.close()

    asyncio.run(main())
