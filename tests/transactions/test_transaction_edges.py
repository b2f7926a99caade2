"""Edges of the transactional producer, on the fake cluster (which checks transactions strictly).

- Messages sent through ``input()`` belong to the open transaction, all of
  them, in order, even when the buffer is full while the commit starts.
- A message of the transaction refused on ``input()`` makes it abortable.
- An abort after the only AddPartitionsToTxn failed for good is not fatal (the
  coordinator never began the transaction and answers INVALID_TXN_STATE).
- Per-partition codes are read whole (a generator is not read twice).
"""

from __future__ import annotations

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._producer.records import ProducerMessage
from pykaf._txn.manager import _first_error
from pykaf.testing import FakeCluster, open_fake_cluster


async def _committed_values(cluster: FakeCluster, topic: str) -> list[bytes]:
    out: list[bytes] = []
    async with pykaf.open_consumer(cluster.bootstrap, isolation_level="read_committed") as c:
        for p in range(len(cluster.topics[topic].partitions)):
            pc = await c.consume_partition(topic, p, pykaf.OLDEST)
            end = cluster.last_stable_offset(topic, p)
            with trio.fail_after(20):
                while pc.position < end:
                    out += [r.value for r in await pc.next_batch() if r.value is not None]
    return out


@pytest.mark.trio
async def test_input_messages_all_join_the_transaction_with_a_full_buffer() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("in", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, transactional_id="t-input", buffer_records=7, linger=0.05
        ) as producer:
            producer.begin_transaction()
            sent = [b"m%04d" % i for i in range(600)]
            channel = producer.input()
            for value in sent:
                await channel.send(ProducerMessage("in", value, partition=0))
            await producer.commit_transaction()  # everything handed over belongs to it
            assert producer.statistics().records_failed == 0
        assert await _committed_values(cluster, "in") == sent


@pytest.mark.trio
async def test_a_message_refused_on_input_makes_the_transaction_abortable() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("refused", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, transactional_id="t-refused", max_message_bytes=1000
        ) as producer:
            producer.begin_transaction()
            await producer.input().send(ProducerMessage("refused", b"ok", partition=0))
            await producer.input().send(ProducerMessage("refused", b"x" * 5000, partition=0))
            with pytest.raises(errors.TransactionAbortableError) as info:
                await producer.commit_transaction()
            assert isinstance(info.value.__cause__, errors.RecordTooLargeError)
            assert producer.txn_status is pykaf.TxnStatus.ABORTABLE_ERROR
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send("refused", b"after", partition=0)
            await producer.commit_transaction()
        assert await _committed_values(cluster, "refused") == [b"after"]


@pytest.mark.trio
async def test_abort_after_a_refused_first_add_is_not_fatal() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("never", 1)
        async with pykaf.open_producer(cluster.bootstrap, transactional_id="t-never") as producer:
            producer.begin_transaction()
            cluster.push_request_errors(
                P.AddPartitionsToTxnRequest.API_KEY, errors.TopicAuthorizationError.code
            )
            producer.send_nowait("never", b"lost", partition=0)
            with pytest.raises(errors.TransactionAbortableError):
                await producer.commit_transaction()
            await producer.abort_transaction()  # EndTxn answers INVALID_TXN_STATE: fine
            assert producer.txn_status is pykaf.TxnStatus.READY
            producer.begin_transaction()
            await producer.send("never", b"kept", partition=0)
            await producer.commit_transaction()
        assert await _committed_values(cluster, "never") == [b"kept"]


def test_first_error_reads_a_generator_once() -> None:
    not_attempted = errors.OperationNotAttemptedError.code
    assert _first_error(c for c in [0, not_attempted]) is errors.OperationNotAttemptedError
    assert _first_error(c for c in [0, 0]) is None
    retriable = errors.ConcurrentTransactionsError.code
    final = errors.TopicAuthorizationError.code
    assert _first_error(c for c in [retriable, final]) is errors.TopicAuthorizationError
    assert _first_error(c for c in [not_attempted, retriable]) is errors.ConcurrentTransactionsError
