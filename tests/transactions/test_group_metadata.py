"""A consumer group's member and generation, handed to a transaction (KIP-447).

``ConsumerGroup.group_metadata()`` (async and sync) gives what
``send_offsets_to_transaction`` needs when records come from ``async for
record in group`` or the sync facade rather than a handler's session.
"""

from __future__ import annotations

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread, open_fake_cluster


@pytest.mark.trio
async def test_async_group_offsets_committed_by_the_transaction_only() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("src", 1)
        cluster.create_topic("dst", 1)
        async with pykaf.open_producer(cluster.bootstrap) as plain:
            await plain.send_batch("src", [b"r%d" % i for i in range(10)])
            await plain.flush()
        async with (
            pykaf.open_consumer_group(
                cluster.bootstrap, "g-async", ["src"], auto_commit=False
            ) as group,
            pykaf.open_producer(cluster.bootstrap, transactional_id="t-async") as txn,
        ):
            seen = []
            with trio.fail_after(20):
                async for record in group:
                    seen.append(record)
                    if len(seen) == 10:
                        break
            meta = group.group_metadata()
            assert meta.group_id == "g-async" and meta.generation_id >= 1 and meta.member_id
            txn.begin_transaction()
            await txn.send("dst", b"sum", partition=0)
            await txn.send_offsets_to_transaction({("src", 0): seen[-1].offset + 1}, meta)
            await txn.abort_transaction()
            assert cluster.groups.committed("g-async", ("src", 0)) is None
            txn.begin_transaction()
            await txn.send_offsets_to_transaction({("src", 0): seen[-1].offset + 1}, meta)
            await txn.commit_transaction()
            committed = cluster.groups.committed("g-async", ("src", 0))
            assert committed is not None and committed.offset == 10
            # a stale generation is refused by the group coordinator (KIP-447)
            stale = pykaf.GroupMetadata("g-async", meta.generation_id + 5, meta.member_id)
            txn.begin_transaction()
            with pytest.raises(errors.IllegalGenerationError):
                await txn.send_offsets_to_transaction({("src", 0): 3}, stale)
            await txn.abort_transaction()
        committed = cluster.groups.committed("g-async", ("src", 0))
        assert committed is not None and committed.offset == 10


def test_sync_group_metadata_feeds_the_sync_transactional_producer() -> None:
    with FakeClusterThread(1) as cluster:
        cluster.create_topic("s-src", 1)
        with pykaf.sync.Producer(cluster.bootstrap) as plain:
            plain.send_many("s-src", [b"v%d" % i for i in range(5)])
        with (
            pykaf.sync.ConsumerGroup(
                cluster.bootstrap, "g-sync", ["s-src"], auto_commit=False
            ) as group,
            pykaf.sync.Producer(cluster.bootstrap, transactional_id="t-sync") as txn,
        ):
            records = group.consume(max_records=5, timeout=20)
            while len(records) < 5:
                records += group.consume(max_records=5 - len(records), timeout=20)
            meta = group.group_metadata()
            assert meta.group_id == "g-sync" and meta.generation_id >= 1
            txn.begin_transaction()
            txn.send_offsets_to_transaction({("s-src", 0): records[-1].offset + 1}, meta)
            txn.commit_transaction()
            committed = cluster.call(cluster.cluster.groups.committed, "g-sync", ("s-src", 0))
            assert committed is not None and committed.offset == 5
