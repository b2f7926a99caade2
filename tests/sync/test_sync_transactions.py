"""Transactions through pykaf.sync.Producer against Kafka and Tansu, from plain threads."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf import errors

ck = pytest.importorskip("confluent_kafka")
bc = pytest.importorskip("broker_clients")

QUIET = {"log_level": 0}
T = 30.0
FAST = {"linger": 0.005, "request_timeout": 10.0}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def new_topic(broker: Any, partitions: int = 1) -> str:
    topic = unique("sync-txn")
    broker.create(topic, partitions)
    return topic


def read_committed(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """``count`` values a confluent-kafka read_committed consumer reads."""
    conf = {"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}
    return list(bc.consume_assigned(conf, topic, range(partitions), count))


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        tps = consumer.committed([ck.TopicPartition(topic, p) for p in range(partitions)], T)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def producer(broker: Any, tid: str | None = None, **config: Any) -> pykaf.sync.Producer:
    return pykaf.sync.Producer(
        broker.bootstrap, transactional_id=tid or unique("tid"), **{**FAST, **config}
    )


def test_records_from_many_threads_commit_together(real_broker: Any) -> None:
    topic = new_topic(real_broker, 3)
    with producer(real_broker) as p:
        assert p.txn_status is pykaf.TxnStatus.READY
        p.begin_transaction()
        futures: list[Any] = []

        def work(n: int) -> None:
            for i in range(100):
                futures.append(p.send_async(topic, b"%d-%d" % (n, i), key=b"%d" % i))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.commit_transaction(timeout=T)  # every handed-over record is in it
        assert all(f.done() and f.exception() is None for f in futures)
        assert p.txn_status is pykaf.TxnStatus.READY
    values = read_committed(real_broker.bootstrap, topic, 3, 400)
    assert len(values) == 400


def test_abort_and_the_state_errors(real_broker: Any) -> None:
    topic = new_topic(real_broker)
    group = unique("group")
    with producer(real_broker, linger=30.0) as p:
        with pytest.raises(pykaf.TransactionStateError):
            p.send(topic, b"outside", timeout=T)
        with pytest.raises(pykaf.TransactionStateError):
            p.commit_transaction(timeout=T)
        p.begin_transaction()
        with pytest.raises(pykaf.TransactionStateError):
            p.begin_transaction()
        futures = [p.send_async(topic, b"%d" % i) for i in range(10)]
        p.send_offsets_to_transaction({(topic, 0): 10}, pykaf.GroupMetadata(group), timeout=T)
        p.abort_transaction(timeout=T)
        assert p.txn_status is pykaf.TxnStatus.READY
        for f in futures:
            assert isinstance(f.exception(T), pykaf.TransactionAbortedError)
        p.begin_transaction()
        p.send_async(topic, b"kept")
        p.send_offsets_to_transaction({(topic, 0): 1}, group, timeout=T)
        p.commit_transaction(timeout=T)
    assert read_committed(real_broker.bootstrap, topic, 1, 1) == [b"kept"]
    assert committed(real_broker.bootstrap, group, topic, 1) == {0: 1}


def test_a_fenced_producer_raises_from_every_call(real_broker: Any) -> None:
    topic = new_topic(real_broker)
    tid = unique("tid")
    with producer(real_broker, tid) as first:
        first.begin_transaction()
        first.send(topic, b"first", timeout=T)
        with producer(real_broker, tid) as second:
            with pytest.raises(errors.ProducerFencedError):
                first.send(topic, b"again", timeout=T)
            with pytest.raises(errors.ProducerFencedError):
                first.commit_transaction(timeout=T)
            assert first.txn_status is pykaf.TxnStatus.FATAL_ERROR
            with pytest.raises(errors.ProducerFencedError):
                first.begin_transaction()
            second.begin_transaction()
            second.send(topic, b"second", timeout=T)
            second.commit_transaction(timeout=T)
    if real_broker.name == "kafka":
        # Kafka lists the transaction the fencing aborted: read_committed drops "first".
        assert read_committed(real_broker.bootstrap, topic, 1, 1) == [b"second"]
    else:
        # Tansu lists no aborted transactions in Fetch: read_committed reads it too.
        assert read_committed(real_broker.bootstrap, topic, 1, 2) == [b"first", b"second"]


def test_an_abort_of_produced_records_is_not_raised_again(real_broker: Any) -> None:
    # produce() records have no callback: their failures wait for flush() or
    # close(). Those of an abort were asked for, and the async producer does
    # not raise them again; nor does the sync one (close raised DeliveryError).
    topic = new_topic(real_broker, 2)
    with producer(real_broker, linger=30.0) as p:
        p.begin_transaction()
        for i in range(50):
            p.produce(topic, b"%d" % i, partition=i % 2)
        p.abort_transaction(timeout=T)
        assert p.flush(T) == 0
        p.begin_transaction()
        p.produce(topic, b"kept", partition=0)
        p.abort_transaction(timeout=T)
    # close() above raised nothing; an abort left open at close is not raised either
    with producer(real_broker, linger=30.0) as p:
        p.begin_transaction()
        p.produce(topic, b"aborted on close", partition=1)
    with producer(real_broker) as p:
        p.begin_transaction()
        p.produce(topic, b"committed", partition=0)
        p.commit_transaction(timeout=T)
    assert read_committed(real_broker.bootstrap, topic, 2, 1) == [b"committed"]
