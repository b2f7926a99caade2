"""KIP-932 share groups on Apache Kafka 4.3 and the fake cluster: members, acknowledgements, locks.

A share group hands out records, not partitions: more members than partitions
all get records; every record is accepted once; RELEASE redelivers it with a
higher delivery count; REJECT archives it; a member that holds records
without settling them loses them to another member when the acquisition lock
expires; close accepts what was handed out, releases the rest and leaves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import protocol as P

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

FAST = {"fetch_max_wait": 0.2, "retry_backoff": 0.05}


async def create(broker: Any, topic: str, partitions: int) -> None:
    """Make a topic (the fake cluster's controls are called from a thread, not from trio)."""
    await trio.to_thread.run_sync(broker.create, topic, partitions)


async def produce(bootstrap: str, topic: str, partitions: int, per: int, start: int = 0) -> None:
    async with pykaf.open_producer(bootstrap) as producer:
        for p in range(partitions):
            await producer.send_batch(
                topic, [b"%d-%d" % (p, start + i) for i in range(per)], partition=p
            )


async def share_group(bootstrap: str, group_id: str, **configs: str) -> None:
    """Make ``group_id`` start at the earliest offset (the broker's default is latest)."""
    async with pykaf.open_admin(bootstrap) as admin:
        await admin.alter_group_configs(
            {group_id: {"share.auto.offset.reset": "earliest", **configs}}
        )


async def wait_for(cond: Callable[[], bool], timeout: float = 40.0, what: Any = "") -> None:
    with trio.move_on_after(timeout):
        while not cond():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"not within {timeout} s: {what() if callable(what) else what or cond}")


def key(r: pykaf.ShareRecord) -> tuple[str, int, int]:
    return (r.topic, r.partition, r.offset)


async def test_more_members_than_partitions_accept_every_record_once(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 2)
    await share_group(broker.bootstrap, group_id)
    for start in range(0, 150, 10):  # batches of 10: the broker acquires whole batches
        await produce(broker.bootstrap, topic, 2, 10, start=start)
    seen: dict[str, list[pykaf.ShareRecord]] = {}

    async def member(name: str) -> None:
        async with pykaf.open_share_consumer(
            broker.bootstrap, group_id, [topic], max_records=20, **FAST
        ) as consumer:
            got = seen.setdefault(name, [])
            while sum(len(v) for v in seen.values()) < 300:
                with trio.move_on_after(1.0):
                    got.extend(await consumer.next_batch())
                    await trio.sleep(0.05)  # let the others take their turn

    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(member, f"m{i}")
    records = [r for got in seen.values() for r in got]
    keys = [key(r) for r in records]
    assert len(keys) == len(set(keys)) == 300  # every record once
    assert {r.delivery_count for r in records} == {1}
    assert sum(1 for got in seen.values() if got) >= 2, {n: len(g) for n, g in seen.items()}
    # Everything was accepted: a newcomer gets only what is produced afterwards.
    await produce(broker.bootstrap, topic, 1, 1, start=150)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as late:
        with trio.fail_after(30):
            batch = await late.next_batch()
    assert [(r.partition, r.offset, r.value) for r in batch] == [(0, 150, b"0-150")]


async def test_release_redelivers_with_a_higher_delivery_count(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id)
    await produce(broker.bootstrap, topic, 1, 5)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        with trio.fail_after(30):
            first = await c.next_batch()
            assert [r.offset for r in first] == [0, 1, 2, 3, 4]
            assert all(r.delivery_count == 1 for r in first)
            c.acknowledge(first[2], pykaf.RELEASE)  # the others: accepted implicitly
            again = await c.next_batch()
    assert [(r.offset, r.delivery_count) for r in again] == [(2, 2)]


async def test_reject_archives_the_record(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id)
    await produce(broker.bootstrap, topic, 1, 3)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        with trio.fail_after(30):
            first = await c.next_batch()
            c.acknowledge(first[0], pykaf.REJECT)
            c.acknowledge(first[1], pykaf.RELEASE)
            await c.commit()  # ShareAcknowledge now
            await produce(broker.bootstrap, topic, 1, 1, start=3)
            offsets: list[tuple[int, int]] = []
            while 3 not in [o for o, _ in offsets]:
                offsets += [(r.offset, r.delivery_count) for r in await c.next_batch()]
    # the released one comes back, the rejected one never does
    assert sorted(offsets) == [(1, 2), (3, 1)]


async def test_acknowledge_refuses_a_record_settled_or_not_handed_out(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id)
    await produce(broker.bootstrap, topic, 1, 2)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        with trio.fail_after(30):
            batch = await c.next_batch()
        assert [r.acknowledged for r in batch] == [None, None]
        c.acknowledge(batch[0], pykaf.ACCEPT)
        assert batch[0].acknowledged is pykaf.ACCEPT
        # twice: says so, not "not handed out" (issue 35)
        with pytest.raises(ValueError, match=r"@0 was already acknowledged \(ACCEPT\)"):
            c.acknowledge(batch[0], pykaf.REJECT)
        with pytest.raises(ValueError):
            c.acknowledge(batch[1], 9)  # type: ignore[arg-type]
        c.acknowledge(batch[1], pykaf.RENEW)  # renewed: still to be settled
        c.acknowledge(batch[1], pykaf.RELEASE)
        with pytest.raises(ValueError, match=r"@1 was already acknowledged \(RELEASE\)"):
            c.acknowledge(batch[1], pykaf.ACCEPT)
        # a record of another consumer's (here: one never handed out) is named as such
        stranger = pykaf.ShareRecord(batch[0].record, 1)
        with pytest.raises(ValueError, match="is not a record this consumer holds"):
            c.acknowledge(stranger, pykaf.ACCEPT)
    # the implicit accept when the next batch is asked for counts as acknowledged too
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        with trio.fail_after(30):
            first = await c.next_batch()
            await produce(broker.bootstrap, topic, 1, 1, start=2)
            await c.next_batch()  # first's records are accepted now
        assert first[0].acknowledged is pykaf.ACCEPT
        with pytest.raises(ValueError, match=r"was already acknowledged \(ACCEPT\)"):
            c.acknowledge(first[0], pykaf.REJECT)


async def test_a_missing_topic_is_warned_of_then_consumed_once_created(
    share_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """No silent wait (issue 35): the member warns, and reads the topic once it exists."""
    broker = share_broker
    topic, group_id = unique("share-late"), unique("sg")
    await share_group(broker.bootstrap, group_id)
    with caplog.at_level(logging.WARNING, logger="pykaf.share"):
        async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
            warned = [r.getMessage() for r in caplog.records if r.name == "pykaf.share"]
            assert len(warned) == 1 and f"topic {topic!r} does not exist" in warned[0]
            assert group_id in warned[0] and "until it is created" in warned[0]
            assert await c.next_batch(timeout=0.5) == []
            await create(broker, topic, 1)
            await produce(broker.bootstrap, topic, 1, 3)
            values: list[bytes | None] = []
            with trio.fail_after(40):
                while len(values) < 3:
                    values += [r.value for r in await c.next_batch()]
    assert values == [b"0-0", b"0-1", b"0-2"]


async def test_a_stalled_member_loses_its_records_when_the_lock_expires(
    share_broker: Any,
) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id, **{"share.record.lock.duration.ms": "2000"})
    await produce(broker.bootstrap, topic, 1, 4)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as a:
        with trio.fail_after(30):
            held = await a.next_batch()  # and then never settled while a lives
        assert [r.offset for r in held] == [0, 1, 2, 3]
        assert a.acquisition_lock_timeout == 2.0
        async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as b:
            with trio.fail_after(30):
                redelivered = await b.next_batch()
        assert [(r.offset, r.delivery_count) for r in redelivered] == [
            (0, 2),
            (1, 2),
            (2, 2),
            (3, 2),
        ]
        # a's late outcome changes nothing: b accepted those records (Kafka 4.3.1
        # answers such a late acknowledgement without an error)
        a.acknowledge(held[0], pykaf.RELEASE)
        await a.commit()
        await produce(broker.bootstrap, topic, 1, 1, start=4)
        async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
            with trio.fail_after(30):
                after = await c.next_batch()
        assert [(r.offset, r.delivery_count) for r in after] == [(4, 1)]


async def test_close_accepts_what_was_handed_out_releases_the_rest_and_leaves(
    share_broker: Any,
) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id)
    await produce(broker.bootstrap, topic, 1, 10)
    taken: list[int] = []
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as a:
        with trio.fail_after(30):
            async for record in a:
                taken.append(record.offset)
                if len(taken) == 4:
                    break
        membership = a.membership
    assert taken == [0, 1, 2, 3]
    assert membership.member_epoch == -1  # left the group
    async with pykaf.open_client(broker.bootstrap) as client:
        conn = await client.connect_to(await client.coordinator(group_id))
        described = await conn.request(
            P.ShareGroupDescribeRequest(group_ids=[group_id]),
            conn.version_for(P.ShareGroupDescribeRequest.API_KEY),
        )
    assert described.groups[0].error_code == 0
    assert membership.member_id not in [m.member_id for m in described.groups[0].members]
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as b:
        with trio.fail_after(30):
            rest = await b.next_batch()
    # the 4 handed out were accepted; the 6 fetched but not handed out were released
    assert [(r.offset, r.delivery_count) for r in rest] == [(o, 2) for o in range(4, 10)]


def test_sync_share_consumer(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    broker.create(topic, 1)
    trio.run(share_group, broker.bootstrap, group_id)
    with pykaf.sync.ShareConsumer(broker.bootstrap, group_id, [topic], **FAST) as idle:
        assert idle.poll(timeout=0.5) is None  # the group starts at the earliest: empty
    trio.run(produce, broker.bootstrap, topic, 1, 3)
    with pykaf.sync.ShareConsumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        first = c.poll(timeout=30)
        assert first is not None
        assert (first.offset, first.value, first.delivery_count) == (0, b"0-0", 1)
        c.acknowledge(first, pykaf.RELEASE)
        c.commit(timeout=10)
        offsets = sorted((r.offset, r.delivery_count) for r in c.next_batch(timeout=30))
        while len(offsets) < 3:
            offsets += [(r.offset, r.delivery_count) for r in c.next_batch(timeout=30)]
    assert sorted(offsets) == [(0, 2), (1, 1), (2, 1)]
    assert c.closed


async def test_renew_keeps_a_record_past_its_lock(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id, **{"share.record.lock.duration.ms": "2000"})
    await produce(broker.bootstrap, topic, 1, 2)
    async with (
        pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as a,
        pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as b,
    ):
        with trio.fail_after(30):
            held = await a.next_batch()
        assert [r.offset for r in held] == [0, 1]
        a.acknowledge(held[0], pykaf.RENEW)  # still working on it
        a.acknowledge(held[1], pykaf.RELEASE)
        await a.commit()  # RENEW sent (ShareAcknowledge v2), record 0 not accepted
        for _ in range(2):  # 3 s in all, past the 2 s lock, renewed every 1.5 s
            await trio.sleep(1.5)
            a.acknowledge(held[0], pykaf.RENEW)
            await a.commit()
        with trio.fail_after(30):
            got = await b.next_batch()
        assert [(r.offset, r.delivery_count) for r in got] == [(1, 2)]
        a.acknowledge(held[0], pykaf.ACCEPT)
        await a.commit()
    await produce(broker.bootstrap, topic, 1, 1, start=2)
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as c:
        with trio.fail_after(30):
            after = await c.next_batch()
    assert [(r.offset, r.delivery_count) for r in after] == [(2, 1)]  # 0 was accepted


_KILLED_MEMBER = """
import os, sys
import pykaf.sync
with pykaf.sync.ShareConsumer(sys.argv[1], sys.argv[2], [sys.argv[3]], fetch_max_wait=0.2) as c:
    batch = c.next_batch(timeout=30)
    print(" ".join(str(r.offset) for r in batch), flush=True)
    os._exit(0)  # killed mid-batch: nothing acknowledged, nothing left
"""


async def test_a_killed_member_s_records_go_to_another_after_the_lock(share_broker: Any) -> None:
    broker = share_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 1)
    await share_group(broker.bootstrap, group_id, **{"share.record.lock.duration.ms": "2000"})
    await produce(broker.bootstrap, topic, 1, 5)
    done = await trio.run_process(
        [sys.executable, "-c", _KILLED_MEMBER, broker.bootstrap, group_id, topic],
        capture_stdout=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.split() == [b"0", b"1", b"2", b"3", b"4"]
    async with pykaf.open_share_consumer(broker.bootstrap, group_id, [topic], **FAST) as b:
        with trio.fail_after(30):
            got = await b.next_batch()
    assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in range(5)]


async def test_pykaf_and_confluent_kafka_share_consumers_in_one_group(kafka_broker: Any) -> None:
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    broker = kafka_broker
    topic, group_id = unique("share"), unique("sg")
    await create(broker, topic, 2)
    await share_group(broker.bootstrap, group_id)
    seen: list[tuple[str, int, int]] = []
    by: dict[str, int] = {"pykaf": 0, "confluent": 0}

    def confluent_member() -> None:
        consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id})
        try:
            consumer.subscribe([topic])
            while len(seen) < 400:
                for m in consumer.poll(0.5):  # implicit mode: accepted on the next poll
                    assert m.error() is None, m.error()
                    seen.append((m.topic(), m.partition(), m.offset()))
                    by["confluent"] += 1
            # close() sends only acknowledgements already made: the records of the
            # last poll are implicitly accepted by a poll or commit_sync(), else
            # released (and delivered again, to a pykaf member)
            consumer.commit_sync()
        finally:
            consumer.close()

    async def pykaf_member() -> None:
        async with pykaf.open_share_consumer(
            broker.bootstrap, group_id, [topic], max_records=10, **FAST
        ) as consumer:
            while len(seen) < 400:
                batch = await consumer.next_batch(timeout=0.5)
                seen.extend(key(r) for r in batch)
                by["pykaf"] += len(batch)
                await trio.sleep(0.3)  # slow workers: the confluent-kafka one gets work too

    async def records_once_all_three_are_assigned() -> None:
        async with pykaf.open_admin(broker.bootstrap) as admin:
            while True:
                with contextlib.suppress(pykaf.errors.GroupIdNotFoundError):
                    members = (await admin.describe_share_group(group_id)).members
                    if len(members) == 3 and all(m.assignment for m in members):
                        break
                await trio.sleep(0.2)
        # in record batches of 10: the broker acquires whole batches, so one batch of
        # 200 would go to one member
        for start in range(0, 200, 10):
            await produce(broker.bootstrap, topic, 2, 10, start=start)

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, confluent_member)
            nursery.start_soon(pykaf_member)
            nursery.start_soon(pykaf_member)
            nursery.start_soon(records_once_all_three_are_assigned)
    assert len(seen) == len(set(seen)) == 400, by  # every record once, across both clients
    assert by["pykaf"] > 0 and by["confluent"] > 0, by
