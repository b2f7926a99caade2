"""pykaf.compat.aiokafka.AIOKafkaProducer on the fake cluster, Tansu and Apache Kafka."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import pykaf
from pykaf.compat.aiokafka import AIOKafkaProducer, errors
from pykaf.sync import Consumer as SyncConsumer

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["fake", "tansu", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, the session's Tansu, then the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


def _read(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
    with SyncConsumer(bootstrap) as consumer:
        consumer.assign([(topic, partition, pykaf.OLDEST)])
        records: list[Any] = []
        while len(records) < count:
            batch = consumer.consume(count - len(records), timeout=10)
            assert batch, f"only {len(records)} of {count} records came back"
            records.extend(batch)
        return records


def test_send_returns_a_future_of_record_metadata(any_broker: Any) -> None:
    topic = bc.unique("aiok-send")
    any_broker.create(topic, 2)

    async def main() -> list[Any]:
        producer = AIOKafkaProducer(
            bootstrap_servers=any_broker.bootstrap,
            value_serializer=lambda v: json.dumps(v).encode(),
            key_serializer=str.encode,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, {"n": i}, key="k", headers=[("h", b"v")])
                for i in range(20)
            ]
            first = await futures[0]
            assert isinstance(first, asyncio.Future) is False
            metadata = await asyncio.gather(*futures)
            direct = await producer.send_and_wait(topic, {"n": 20}, key="k", partition=1)
            assert direct.partition == 1
            assert await producer.partitions_for(topic) == {0, 1}
            await producer.flush()
            return [first, *metadata]
        finally:
            await producer.stop()

    metadata = asyncio.run(main())
    first = metadata[0]
    assert first.topic == topic and first.topic_partition == (topic, first.partition)
    assert first.timestamp_type == 0 and first.log_start_offset is None
    offsets = [md.offset for md in metadata[1:]]
    assert offsets == list(range(offsets[0], offsets[0] + 20))  # one key: one partition
    records = _read(any_broker.bootstrap, topic, first.partition, 20)
    assert [json.loads(r.value)["n"] for r in records] == list(range(20))
    assert records[0].key == b"k" and list(records[0].headers) == [("h", b"v")]


def test_batches_go_to_their_partition(any_broker: Any) -> None:
    topic = bc.unique("aiok-batch")
    any_broker.create(topic, 2)

    async def main() -> Any:
        async with AIOKafkaProducer(bootstrap_servers=any_broker.bootstrap) as producer:
            batch = producer.create_batch()
            n = 0
            while batch.append(key=None, value=b"x" * 100, timestamp=None) is not None:
                n += 1
            assert n == batch.record_count() and 100 < n < 200  # 16 KiB by default
            future = await producer.send_batch(batch, topic, partition=1)
            return n, await future

    n, metadata = asyncio.run(main())
    assert metadata.partition == 1 and metadata.offset == 0
    assert [r.offset for r in _read(any_broker.bootstrap, topic, 1, n)] == list(range(n))


def test_transactions_commit_and_abort(any_broker: Any) -> None:
    topic = bc.unique("aiok-txn")
    any_broker.create(topic, 1)

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=any_broker.bootstrap, transactional_id=bc.unique("txn")
        )
        await producer.start()
        try:
            with pytest.raises(errors.IllegalOperation):
                await producer.send(topic, b"outside")
            async with producer.transaction():
                await producer.send(topic, b"committed")
            with pytest.raises(RuntimeError, match="boom"):
                async with producer.transaction():
                    await producer.send(topic, b"aborted")
                    raise RuntimeError("boom")
            await producer.begin_transaction()
            await producer.send(topic, b"second")
            await producer.commit_transaction()
        finally:
            await producer.stop()

    asyncio.run(main())
    with SyncConsumer(any_broker.bootstrap, isolation_level="read_committed") as consumer:
        consumer.assign([(topic, 0, pykaf.OLDEST)])
        values = [r.value for r in consumer.consume(10, timeout=5)]
        values += [r.value for r in consumer.consume(10, timeout=1)]
    if any_broker.name == "tansu":
        assert b"committed" in values and b"second" in values  # Tansu keeps aborted ones
    else:
        assert values == [b"committed", b"second"]


def test_errors_are_aiokafkas() -> None:
    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=500)
        with pytest.raises(errors.IllegalStateError, match="not started"):
            await producer.send("t", b"v")
        with pytest.raises(errors.KafkaConnectionError):
            await producer.start()
        await producer.stop()
        with pytest.raises(errors.ProducerClosed):
            await producer.send("t", b"v")

    asyncio.run(main())
    with pytest.raises(ValueError, match="acks=1 not supported"):
        AIOKafkaProducer(enable_idempotence=True, acks=1)
    with pytest.raises(ValueError, match="Invalid compression type"):  # aiokafka's own check
        AIOKafkaProducer(compression_type="brotli")
    with pytest.raises(ValueError, match="security_protocol"):
        AIOKafkaProducer(security_protocol="SOME")
    with pytest.raises(ValueError, match="ssl_context"):
        AIOKafkaProducer(security_protocol="SSL")
    with pytest.raises(TypeError, match="lingr_ms"):
        AIOKafkaProducer(lingr_ms=5)


def test_acks_0_futures_resolve_to_none_as_aiokafka(fake_cluster: Any) -> None:
    topic = bc.unique("aiok-acks0")
    fake_cluster.create_topic(topic, 1)

    async def main() -> Any:
        async with AIOKafkaProducer(bootstrap_servers=fake_cluster.bootstrap, acks=0) as producer:
            future = await producer.send(topic, b"fire and forget")
            return await future

    assert asyncio.run(main()) is None
