"""Edges of the transactional producer, on Kafka and the fake cluster (both strict).

- Messages sent through ``input()`` belong to the open transaction, all of
  them, in order, even when the buffer is full while the commit starts.
- A message of the transaction refused on ``input()`` makes it abortable.
- An abort after the only AddPartitionsToTxn failed for good is not fatal (the
  coordinator never began the transaction and answers INVALID_TXN_STATE): on
  Kafka a user without WRITE on the topic gets TOPIC_AUTHORIZATION_FAILED,
  on the fake the error is injected.
- Per-partition codes are read whole (a generator is not read twice).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock
from txn_target import TxnTarget

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._producer.records import ProducerMessage
from pykaf._txn.manager import _first_error
from pykaf.testing.fixtures import KAFKA_USERS

pytestmark = pytest.mark.broker


async def _committed_values(target: TxnTarget, topic: str) -> list[bytes]:
    return [r.value for r in await target.read(topic, 1) if r.value is not None]


async def test_input_messages_all_join_the_transaction_with_a_full_buffer(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    topic = await target.topic("in")
    async with pykaf.open_producer(
        target.bootstrap,
        transactional_id=target.unique("t-input"),
        buffer_records=7,
        linger=0.05,
    ) as producer:
        producer.begin_transaction()
        sent = [b"m%04d" % i for i in range(600)]
        channel = producer.input()
        for value in sent:
            await channel.send(ProducerMessage(topic, value, partition=0))
        await producer.commit_transaction()  # everything handed over belongs to it
        assert producer.statistics().records_failed == 0
    assert await _committed_values(target, topic) == sent


async def test_a_message_refused_on_input_makes_the_transaction_abortable(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    topic = await target.topic("refused")
    async with pykaf.open_producer(
        target.bootstrap, transactional_id=target.unique("t-refused"), max_message_bytes=1000
    ) as producer:
        producer.begin_transaction()
        await producer.input().send(ProducerMessage(topic, b"ok", partition=0))
        await producer.input().send(ProducerMessage(topic, b"x" * 5000, partition=0))
        with pytest.raises(errors.TransactionAbortableError) as info:
            await producer.commit_transaction()
        assert isinstance(info.value.__cause__, errors.RecordTooLargeError)
        assert producer.txn_status is pykaf.TxnStatus.ABORTABLE_ERROR
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send(topic, b"after", partition=0)
        await producer.commit_transaction()
    assert await _committed_values(target, topic) == [b"after"]


async def _grant(target: TxnTarget, bindings: list[pykaf.AclBinding]) -> None:
    """Create ACLs (as ANONYMOUS, a super user) and wait until the broker enforces them."""
    async with pykaf.open_admin(target.bootstrap) as admin:
        await admin.create_acls(bindings)
        with trio.fail_after(20):
            while not set(bindings) <= set(await admin.describe_acls()):
                await trio.sleep(0.05)


async def test_abort_after_a_refused_first_add_is_not_fatal(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    topic = await target.topic("never")
    tid = target.unique("t-never")
    bootstrap = target.bootstrap
    options: dict[str, Any] = {}
    if target.kafka is not None:
        # alice may use the transactional id and see the topic, but not write to it.
        Res, Op = pykaf.ResourceType, pykaf.AclOperation
        await _grant(
            target,
            [
                pykaf.AclBinding(Res.TRANSACTIONAL_ID, tid, "User:alice", Op.WRITE),
                pykaf.AclBinding(Res.TOPIC, topic, "User:alice", Op.DESCRIBE),
            ],
        )
        bootstrap = target.kafka.sasl_bootstrap
        options = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_username": "alice",
            "sasl_password": KAFKA_USERS["alice"],
        }
    async with pykaf.open_producer(bootstrap, transactional_id=tid, **options) as producer:
        producer.begin_transaction()
        if target.fake is not None:
            # V1 refuses the AddPartitionsToTxn; V2 sends none, its Produce is refused
            v2 = target.fake.transaction_version >= 2
            api = P.ProduceRequest if v2 else P.AddPartitionsToTxnRequest
            target.fake.push_request_errors(api.API_KEY, errors.TopicAuthorizationError.code)
        producer.send_nowait(topic, b"lost", partition=0)
        with pytest.raises(errors.TransactionAbortableError) as info:
            await producer.commit_transaction()
        assert isinstance(info.value.__cause__, errors.TopicAuthorizationError)
        await producer.abort_transaction()  # EndTxn answers INVALID_TXN_STATE: fine
        assert producer.txn_status is pykaf.TxnStatus.READY
        if target.kafka is not None:
            await _grant(
                target,
                [pykaf.AclBinding(pykaf.ResourceType.TOPIC, topic, "User:alice", "write")],
            )
        producer.begin_transaction()
        await producer.send(topic, b"kept", partition=0)
        await producer.commit_transaction()
    assert await _committed_values(target, topic) == [b"kept"]


def test_first_error_reads_a_generator_once() -> None:
    not_attempted = errors.OperationNotAttemptedError.code
    assert _first_error(c for c in [0, not_attempted]) is errors.OperationNotAttemptedError
    assert _first_error(c for c in [0, 0]) is None
    retriable = errors.ConcurrentTransactionsError.code
    final = errors.TopicAuthorizationError.code
    assert _first_error(c for c in [retriable, final]) is errors.TopicAuthorizationError
    assert _first_error(c for c in [not_attempted, retriable]) is errors.ConcurrentTransactionsError
