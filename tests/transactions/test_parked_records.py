"""Records sent in a transaction to a topic the producer has not used yet.

They wait for the topic's partitions (parked) and belong to the transaction
all the same: a commit waits for them and makes them visible, in order per
partition, keyed ones where the partitioner says; an abort fails each of them
with ``TransactionAbortedError``. On Kafka and the fake cluster (both strict
about transactions).
"""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock
from txn_target import TxnTarget

import pykaf
from pykaf import errors
from pykaf.codec import murmur2

pytestmark = pytest.mark.broker


async def test_a_commit_takes_in_the_records_parked_for_a_fresh_topic(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    partitions = 3
    topic = await target.topic("parked-commit", partitions)
    sent: list[tuple[bytes | None, bytes]] = []
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=target.unique("t-parked")
    ) as producer:
        producer.begin_transaction()
        for i in range(300):  # no checkpoint: the topic's partitions are not known yet
            key = b"k%d" % (i % 7) if i % 2 else None
            producer.send_nowait(topic, b"%04d" % i, key=key)
            sent.append((key, b"%04d" % i))
        await producer.commit_transaction()
        assert producer.statistics().records_failed == 0
    records = await target.read(topic, partitions)
    assert sorted(r.value for r in records) == sorted(value for _, value in sent)
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(int(r.value))
        if r.key is not None:
            assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % partitions
    assert all(values == sorted(values) for values in by_partition.values())


async def test_an_abort_fails_each_record_parked_for_a_fresh_topic(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    topic = await target.topic("parked-abort", 1)
    heard: list[Any] = []
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=target.unique("t-parked-abort")
    ) as producer:
        producer.begin_transaction()
        for i in range(50):
            producer.send_nowait(
                topic, b"%d" % i, key=b"k%d" % i, on_delivery=lambda e, md: heard.append(e)
            )
        await producer.abort_transaction()
        assert len(heard) == 50
        assert all(isinstance(e, errors.TransactionAbortedError) for e in heard), heard[0]
        producer.begin_transaction()
        await producer.send(topic, b"kept", partition=0)
        await producer.commit_transaction()
    assert [r.value for r in await target.read(topic, 1)] == [b"kept"]
