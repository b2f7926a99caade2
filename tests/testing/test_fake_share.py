"""The fake cluster's share groups beyond the conformance cases: isolation, resets, leaving.

``tests/conformance/cases_share.py`` checks the wire answers against Kafka;
``tests/share`` runs the share consumer on the fake. These cover the group
configs the others do not: ``share.isolation.level`` and the reset policies.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio

import pykaf
from pykaf import protocol as P
from pykaf.testing import open_fake_cluster

FAST = {"fetch_max_wait": 0.1, "retry_backoff": 0.05}


async def configure(bootstrap: str, group: str, **values: str) -> None:
    async with pykaf.open_admin(bootstrap) as admin:
        await admin.alter_group_configs({group: values})


async def drain(bootstrap: str, group: str, topic: str, want: int) -> list[Any]:
    got: list[Any] = []
    async with pykaf.open_share_consumer(bootstrap, group, [topic], **FAST) as consumer:
        with trio.fail_after(10):
            while len(got) < want:
                got.extend(await consumer.next_batch())
        got.extend(await consumer.next_batch(timeout=0.3))  # nothing more
    return got


async def test_read_committed_skips_aborted_and_open_transactions() -> None:
    async with open_fake_cluster(brokers=1) as fake:
        fake.create_topic("txn", 1)
        async with pykaf.open_producer(fake.bootstrap, transactional_id="t-share") as producer:
            for n, commit in ((0, False), (1, True)):
                producer.begin_transaction()
                await producer.send_batch("txn", [b"%d-a" % n, b"%d-b" % n], partition=0)
                await producer.flush()  # written before the transaction ends
                await (producer.commit_transaction() if commit else producer.abort_transaction())
            producer.begin_transaction()  # left open: held below the last stable offset
            await producer.send_batch("txn", [b"open"], partition=0)
            await producer.flush()
            for isolation, want in (
                ("read_committed", [b"1-a", b"1-b"]),
                ("read_uncommitted", [b"0-a", b"0-b", b"1-a", b"1-b", b"open"]),
            ):
                group = f"g-{isolation}"
                await configure(
                    fake.bootstrap,
                    group,
                    **{"share.auto.offset.reset": "earliest", "share.isolation.level": isolation},
                )
                got = await drain(fake.bootstrap, group, "txn", len(want))
                assert [r.value for r in got] == want
            await producer.abort_transaction()
        assert fake.handler_errors == []


async def test_latest_and_by_duration_resets() -> None:
    async with open_fake_cluster(brokers=1) as fake:
        fake.create_topic("resets", 1)
        async with pykaf.open_producer(fake.bootstrap) as producer:
            producer.send_nowait("resets", b"old", partition=0, timestamp=1_000)
            await producer.flush()
            await producer.send_batch("resets", [b"recent"], partition=0)
        await configure(
            fake.bootstrap, "by-duration", **{"share.auto.offset.reset": "by_duration:PT1H"}
        )
        got = await drain(fake.bootstrap, "by-duration", "resets", 1)
        assert [r.value for r in got] == [b"recent"]  # "old" is from 1970
        # latest (the default): the group starts at the end when first fetched
        async with pykaf.open_share_consumer(fake.bootstrap, "latest", ["resets"], **FAST) as c:
            assert await c.next_batch(timeout=0.5) == []
            async with pykaf.open_producer(fake.bootstrap) as producer:
                await producer.send_batch("resets", [b"new"], partition=0)
            with trio.fail_after(10):
                assert [r.value for r in await c.next_batch()] == [b"new"]
        assert fake.handler_errors == []


async def test_leaving_the_group_keeps_the_member_s_records_until_its_session_closes() -> None:
    """As Kafka 4.3.1: a member that left may still settle what it holds in its share session."""
    async with open_fake_cluster(brokers=1) as fake:
        fake.create_topic("leave", 1)
        await configure(fake.bootstrap, "g", **{"share.auto.offset.reset": "earliest"})
        async with pykaf.open_producer(fake.bootstrap) as producer:
            await producer.send_batch("leave", [b"a", b"b"], partition=0)
        async with pykaf.open_client(fake.bootstrap) as client:
            await client.refresh_metadata("leave")
            tid = client.metadata.topics["leave"].topic_id
            tid = tid if isinstance(tid, uuid.UUID) else uuid.UUID(bytes=bytes(tid))
            conn = await client.connect_to(await client.coordinator("g"))
            H = P.ShareGroupHeartbeatRequest
            joined = await conn.request(
                H(group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["leave"]), 1
            )
            assert joined.error_code == 0 and joined.assignment.topic_partitions
            F, A = P.ShareFetchRequest, P.ShareAcknowledgeRequest
            fetched = await conn.request(
                F(
                    group_id="g",
                    member_id="m",
                    share_session_epoch=0,
                    max_wait_ms=1000,
                    min_bytes=1,
                    max_records=10,
                    batch_size=10,
                    topics=[
                        F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(partition_index=0)])
                    ],
                    forgotten_topics_data=[],
                ),
                2,
            )
            acquired = fetched.responses[0].partitions[0].acquired_records
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [
                (0, 1, 1)
            ]
            left = await conn.request(H(group_id="g", member_id="m", member_epoch=-1), 1)
            assert (left.error_code, left.member_epoch) == (0, -1)
            acked = await conn.request(
                A(
                    group_id="g",
                    member_id="m",
                    share_session_epoch=-1,
                    topics=[
                        A.AcknowledgeTopic(
                            topic_id=tid,
                            partitions=[
                                A.AcknowledgePartition(
                                    partition_index=0,
                                    acknowledgement_batches=[
                                        A.AcknowledgementBatch(
                                            first_offset=0, last_offset=0, acknowledge_types=[1]
                                        )
                                    ],
                                )
                            ],
                        )
                    ],
                ),
                2,
            )
            assert [p.error_code for t in acked.responses for p in t.partitions] == [0]
        # closing the session gave back offset 1, not acknowledged
        got = await drain(fake.bootstrap, "g", "leave", 1)
        assert [(r.offset, r.delivery_count) for r in got] == [(1, 2)]
        assert fake.handler_errors == []
