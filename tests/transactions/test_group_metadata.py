"""A consumer group's member and generation, handed to a transaction (KIP-447).

``ConsumerGroup.group_metadata()`` (async and sync) gives what
``send_offsets_to_transaction`` needs when records come from ``async for
record in group`` or the sync facade rather than a handler's session. On
Kafka and the fake cluster: both group coordinators check the generation.
"""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock
from txn_target import TxnTarget

import pykaf
import pykaf.sync
from pykaf import errors

pytestmark = pytest.mark.broker

GROUP = {"heartbeat_interval": 0.2, "session_timeout": 6.0, "rebalance_timeout": 4.0}


async def test_async_group_offsets_committed_by_the_transaction_only(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    src, dst = await target.topic("src"), await target.topic("dst")
    group = target.unique("g-async")
    async with pykaf.open_producer(target.bootstrap) as plain:
        await plain.send_batch(src, [b"r%d" % i for i in range(10)])
        await plain.flush()
    async with (
        pykaf.open_consumer_group(
            target.bootstrap, group, [src], auto_commit=False, **GROUP
        ) as consumer,
        pykaf.open_producer(target.bootstrap, transactional_id=target.unique("t-async")) as txn,
    ):
        seen = []
        with trio.fail_after(20):
            async for record in consumer:
                seen.append(record)
                if len(seen) == 10:
                    break
        meta = consumer.group_metadata()
        assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id
        txn.begin_transaction()
        await txn.send(dst, b"sum", partition=0)
        await txn.send_offsets_to_transaction({(src, 0): seen[-1].offset + 1}, meta)
        await txn.abort_transaction()
        assert await target.committed(group, src, 0) == -1
        txn.begin_transaction()
        await txn.send_offsets_to_transaction({(src, 0): seen[-1].offset + 1}, meta)
        await txn.commit_transaction()
        assert await target.committed(group, src, 0) == 10
        # a stale generation is refused by the group coordinator (KIP-447)
        stale = pykaf.GroupMetadata(group, meta.generation_id + 5, meta.member_id)
        txn.begin_transaction()
        with pytest.raises(errors.IllegalGenerationError):
            await txn.send_offsets_to_transaction({(src, 0): 3}, stale)
        await txn.abort_transaction()
    assert await target.committed(group, src, 0) == 10


async def test_sync_group_metadata_feeds_the_sync_transactional_producer(
    target: TxnTarget,
) -> None:
    src = await target.topic("s-src")
    group, tid = target.unique("g-sync"), target.unique("t-sync")

    def run() -> None:
        with pykaf.sync.Producer(target.bootstrap) as plain:
            plain.send_many(src, [b"v%d" % i for i in range(5)])
        with (
            pykaf.sync.ConsumerGroup(
                target.bootstrap, group, [src], auto_commit=False, **GROUP
            ) as consumer,
            pykaf.sync.Producer(target.bootstrap, transactional_id=tid) as txn,
        ):
            records = consumer.consume(max_records=5, timeout=20)
            while len(records) < 5:
                records += consumer.consume(max_records=5 - len(records), timeout=20)
            meta = consumer.group_metadata()
            assert meta.group_id == group and meta.generation_id >= 1
            txn.begin_transaction()
            txn.send_offsets_to_transaction({(src, 0): records[-1].offset + 1}, meta)
            txn.commit_transaction()

    await trio.to_thread.run_sync(run)
    assert await target.committed(group, src, 0) == 5
