"""Transactions on one Kafka release: read_committed, and KIP-447's offsets in a transaction.

Kafka 3.x speaks transactions V1 only (AddPartitionsToTxn before each new
partition); 4.x finalizes transaction.version 2 (KIP-890 part 2) and pykaf's
producer takes it: the same calls pass on both.
"""

from __future__ import annotations

import pytest
import trio
from compat_support import new_topic, read_partition, unique

import pykaf
from pykaf.codec import Record
from pykaf.testing import KafkaCluster


def expected_transaction_version(kafka: KafkaCluster) -> int:
    return 2 if kafka.release.line >= (4, 0) else 1


@pytest.mark.compat("KIP-98", "Transactions, read_committed")
async def test_read_committed_sees_committed_transactions_only(kafka: KafkaCluster) -> None:
    topic = await new_topic(kafka, "txn", 2)
    async with pykaf.open_producer(kafka.bootstrap, transactional_id=unique("tx")) as producer:
        for outcome, values in (("commit", b"abc"), ("abort", b"xyz"), ("commit", b"de")):
            producer.begin_transaction()
            for i, v in enumerate(values):
                await producer.send(topic, bytes([v]), partition=i % 2)
            if outcome == "commit":
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
        version = producer.statistics().transaction_version
    assert version == expected_transaction_version(kafka)
    committed = sorted(
        [
            r.value
            for p, n in ((0, 3), (1, 2))
            for r in await read_partition(kafka.bootstrap, topic, p, n, fetch_max_wait=0.05)
        ]
    )
    assert committed == [b"a", b"b", b"c", b"d", b"e"]
    # read_uncommitted sees the aborted records too (control records are never handed out)
    everything = [
        r.value
        for p, n in ((0, 5), (1, 3))
        for r in await read_partition(
            kafka.bootstrap, topic, p, n, isolation_level="read_uncommitted"
        )
    ]
    assert sorted(everything) == sorted([b"a", b"b", b"c", b"x", b"y", b"z", b"d", b"e"])


@pytest.mark.compat("KIP-447", "Consume-transform-produce: group offsets in a transaction")
async def test_group_offsets_commit_with_the_transaction(kafka: KafkaCluster) -> None:
    source, sink = await new_topic(kafka, "eos-in"), await new_topic(kafka, "eos-out")
    group_id = unique("eos")
    async with pykaf.open_producer(kafka.bootstrap) as producer:
        await producer.send_batch(source, [b"%d" % i for i in range(6)], partition=0)
    async with (
        pykaf.open_producer(kafka.bootstrap, transactional_id=unique("eos-tx")) as producer,
        pykaf.open_consumer_group(
            kafka.bootstrap,
            group_id,
            [source],
            auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout=6.0,
            heartbeat_interval=0.5,
            fetch_max_wait=0.05,
        ) as group,
    ):
        taken: list[Record] = []
        with trio.fail_after(40):
            async for record in group:
                taken.append(record)
                if len(taken) == 6:
                    break
        metadata = group.group_metadata()
        assert metadata.generation_id >= 1 and metadata.member_id
        # the first transaction aborts: neither its output nor its offsets count
        producer.begin_transaction()
        await producer.send(sink, b"never", partition=0)
        await producer.send_offsets_to_transaction({(source, 0): 6}, metadata)
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send_batch(sink, [(r.value or b"") + b"!" for r in taken], partition=0)
        await producer.send_offsets_to_transaction({(source, 0): 6}, metadata)
        await producer.commit_transaction()
    # EndTxn returns once the commit is decided; the coordinator writes its
    # markers (into the offsets topic too) right after: the offsets show then
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        with trio.fail_after(30):
            while (committed := await admin.list_group_offsets(group_id)).get((source, 0)) is None:
                await trio.sleep(0.05)
    assert committed[(source, 0)].offset == 6
    out = await read_partition(kafka.bootstrap, sink, 0, 6, fetch_max_wait=0.05)
    assert [r.value for r in out] == [b"%d!" % i for i in range(6)]
