"""The fake cluster's data plane: Produce, Fetch, ListOffsets and the topic admin APIs.

Round trips with pykaf and confluent-kafka, and raw requests for what a client
hides: idempotent duplicates, sequence gaps, epoch fencing, fetch waits.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.codec import BatchBuilder, decode_batches
from pykaf.testing import FakeCluster, open_fake_cluster

bc = pytest.importorskip("broker_clients")

PID = 4242


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    builder = BatchBuilder()
    for i, v in enumerate(values):
        builder.append(1_700_000_000_000 + i, None, v)
    return builder.build(producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce_request(topic: str, part: int, records: bytes, acks: int = -1) -> P.ProduceRequest:
    return P.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            P.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[P.ProduceRequest.PartitionProduceData(index=part, records=records)],
            )
        ],
    )


async def produce_raw(client: Any, cluster: FakeCluster, topic: str, records: bytes) -> Any:
    """Produce to partition 0 of ``topic`` on its leader; the partition's answer."""
    leader = cluster.partition(topic, 0)
    assert leader is not None
    resp = await client.request(leader.leader, produce_request(topic, 0, records))
    return resp.responses[0].partition_responses[0]


def fetch_request(
    topic: str,
    part: int,
    offset: int,
    *,
    min_bytes: int = 1,
    max_wait_ms: int = 0,
    isolation: int = 0,
    max_bytes: int = 1 << 20,
) -> P.FetchRequest:
    return P.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            P.FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    P.FetchRequest.FetchPartition(
                        partition=part, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def values_of(records: bytes) -> list[bytes | None]:
    return [r.value for b in decode_batches(records) if not b.is_control for r in b.records]


# -- round trips ------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd"])
async def test_pykaf_producer_to_pykaf_consumer(compression: str) -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("rt", partitions=4)
        sent = {
            p: [b"%s-%d-%d" % (compression.encode(), p, i) for i in range(150)] for p in range(4)
        }
        async with pykaf.open_producer(cluster.bootstrap, compression=compression) as producer:
            for i in range(150):
                for p in range(4):
                    producer.send_nowait("rt", sent[p][i], key=b"k%d" % i, partition=p)
            await producer.flush()
        assert {p.leader for p in cluster.topics["rt"].partitions} == {1, 2, 3}
        async with pykaf.open_consumer(cluster.bootstrap) as consumer:
            for p in range(4):
                pc = await consumer.consume_partition("rt", p, pykaf.OLDEST)
                got: list[Any] = []
                with trio.fail_after(20):
                    while len(got) < 150:
                        got.extend(await pc.next_batch())
                assert [r.offset for r in got] == list(range(150))
                assert [r.value for r in got] == sent[p]
                assert [r.key for r in got] == [b"k%d" % i for i in range(150)]
        assert cluster.handler_errors == []


async def test_confluent_consumer_reads_what_pykaf_produced() -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("ck", partitions=3)
        async with pykaf.open_producer(cluster.bootstrap, compression="lz4") as producer:
            for i in range(300):
                producer.send_nowait("ck", b"v%d" % i, partition=i % 3)
            await producer.flush()
        conf = {"bootstrap.servers": cluster.bootstrap}
        got = await trio.to_thread.run_sync(lambda: bc.consume_assigned(conf, "ck", [0, 1, 2], 300))
        assert sorted(got) == sorted(b"v%d" % i for i in range(300))
        assert cluster.high_watermark("ck", 1) == 100


async def test_pykaf_consumer_reads_what_confluent_produced() -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("ck2", partitions=2)
        conf = {"bootstrap.servers": cluster.bootstrap, "compression.type": "zstd"}
        await trio.to_thread.run_sync(
            lambda: bc.produce(
                conf,
                "ck2",
                [b"c%d" % i for i in range(50)],
                partition=1,
                **{"enable.idempotence": True},
            )
        )
        async with pykaf.open_consumer(cluster.bootstrap) as consumer:
            pc = await consumer.consume_partition("ck2", 1, pykaf.OLDEST)
            got: list[Any] = []
            with trio.fail_after(20):
                while len(got) < 50:
                    got.extend(await pc.next_batch())
        assert [r.value for r in got] == [b"c%d" % i for i in range(50)]


# -- produce checks -------------------------------------------------------------------


async def test_idempotent_retry_answers_the_first_offset_and_writes_once() -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("idem", partitions=1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            first = await produce_raw(
                client, cluster, "idem", batch([b"a", b"b"], pid=PID, epoch=0, seq=0)
            )
            second = await produce_raw(
                client, cluster, "idem", batch([b"c"], pid=PID, epoch=0, seq=2)
            )
            again = await produce_raw(
                client, cluster, "idem", batch([b"a", b"b"], pid=PID, epoch=0, seq=0)
            )
            assert (first.error_code, first.base_offset) == (0, 0)
            assert (second.error_code, second.base_offset) == (0, 2)
            assert (again.error_code, again.base_offset) == (0, 0)
            assert cluster.high_watermark("idem", 0) == 3
            leader = cluster.topics["idem"].partitions[0].leader
            resp = await client.request(leader, fetch_request("idem", 0, 0))
            assert values_of(resp.responses[0].partitions[0].records) == [b"a", b"b", b"c"]


async def test_sequence_gap_epoch_fencing_and_unknown_producer() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic("seq", partitions=1)
        async with pykaf.open_client(cluster.bootstrap) as client:

            async def send(epoch: int, seq: int, pid: int = PID) -> int:
                r = await produce_raw(
                    client, cluster, "seq", batch([b"x"], pid=pid, epoch=epoch, seq=seq)
                )
                return int(r.error_code)

            # Kafka 4 takes a producer id it does not know at any sequence
            assert await send(0, 5, pid=PID + 1) == 0
            assert await send(0, 0) == 0
            assert await send(0, 2) == errors.OutOfOrderSequenceError.code
            assert await send(0, 1) == 0
            assert (
                await send(1, 3) == errors.OutOfOrderSequenceError.code
            )  # a new epoch starts at 0
            assert await send(1, 0) == 0
            assert await send(0, 2) == errors.InvalidProducerEpochError.code
            assert cluster.high_watermark("seq", 0) == 4  # PID + 1's record and PID's three


async def test_produce_errors_not_leader_unknown_corrupt() -> None:
    async with open_fake_cluster(brokers=3, auto_create_topics=False) as cluster:
        cluster.create_topic("pe", partitions=1)
        leader = cluster.topics["pe"].partitions[0].leader
        other = next(n for n in cluster.nodes if n != leader)
        good = batch([b"v"])
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        async with pykaf.open_client(cluster.bootstrap) as client:

            async def code(node: int, topic: str, part: int, records: bytes) -> int:
                resp = await client.request(node, produce_request(topic, part, records))
                return int(resp.responses[0].partition_responses[0].error_code)

            assert await code(other, "pe", 0, good) == errors.NotLeaderOrFollowerError.code
            assert await code(leader, "nope", 0, good) == errors.UnknownTopicOrPartitionError.code
            assert await code(leader, "pe", 1, good) == errors.UnknownTopicOrPartitionError.code
            assert await code(leader, "pe", 0, bytes(corrupt)) == errors.CorruptRecordError.code
            assert await code(leader, "pe", 0, good[:30]) == errors.CorruptRecordError.code
            assert await code(leader, "pe", 0, good + good) == errors.InvalidRecordError.code
            assert cluster.high_watermark("pe", 0) == 0
            assert await code(leader, "pe", 0, good) == 0
            # acks=0: written, no answer (the next request's answer comes back in order)
            conn = await client.broker_connection(leader)
            no_answer = produce_request("pe", 0, good, acks=0)
            assert await conn.request(no_answer, expect_response=False) is None
            assert await code(leader, "pe", 0, good) == 0
            assert cluster.high_watermark("pe", 0) == 3


async def test_log_append_time_topic_stamps_batches() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
        async with pykaf.open_client(cluster.bootstrap) as client:
            r = await produce_raw(client, cluster, "lat", batch([b"a"]))
            assert r.error_code == 0 and r.log_append_time_ms > 1_700_000_000_000
            resp = await client.request(1, fetch_request("lat", 0, 0))
            (b,) = decode_batches(resp.responses[0].partitions[0].records)  # CRC checked
            assert b.timestamp_type == 1 and b.max_timestamp == r.log_append_time_ms


# -- fetch ------------------------------------------------------------------------------


async def test_fetch_waits_for_min_bytes_until_data_arrives() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic("wait", partitions=1)
        log = cluster.topics["wait"].partitions[0].log
        events: list[str] = []
        async with pykaf.open_client(cluster.bootstrap) as client, trio.open_nursery() as n:
            await produce_raw(client, cluster, "wait", batch([b"early"]))

            async def waiting_fetch() -> None:
                req = fetch_request("wait", 0, 1, min_bytes=1, max_wait_ms=60_000)
                resp = await client.request(1, req)
                events.append("fetched")
                assert values_of(resp.responses[0].partitions[0].records) == [b"late"]

            n.start_soon(waiting_fetch)
            await trio.testing.wait_all_tasks_blocked()
            assert events == [] and len(log._waiters) == 1
            async with pykaf.open_client(cluster.bootstrap) as other:
                await produce_raw(other, cluster, "wait", batch([b"late"]))
            events.append("produced")
        assert events in (["produced", "fetched"], ["fetched", "produced"])
        assert "fetched" in events and log._waiters == set()


async def test_fetch_min_bytes_not_reached_returns_what_there_is_at_max_wait() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic("mw", partitions=1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            await produce_raw(client, cluster, "mw", batch([b"one"]))
            resp = await client.request(
                1, fetch_request("mw", 0, 0, min_bytes=10**6, max_wait_ms=50)
            )
            assert values_of(resp.responses[0].partitions[0].records) == [b"one"]


async def test_fetch_limits_errors_and_watermarks() -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("fl", partitions=1)
        leader = cluster.topics["fl"].partitions[0].leader
        other = next(n for n in cluster.nodes if n != leader)
        async with pykaf.open_client(cluster.bootstrap) as client:
            for i in range(3):
                await produce_raw(client, cluster, "fl", batch([b"%d" % i * 100, b"x"]))

            async def part(node: int, offset: int, **kw: Any) -> Any:
                resp = await client.request(node, fetch_request("fl", 0, offset, **kw))
                return resp.responses[0].partitions[0]

            p = await part(leader, 0, max_bytes=1)  # the first batch always comes whole
            assert values_of(p.records) == [b"0" * 100, b"x"]
            assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (6, 6, 0)
            assert p.aborted_transactions is None  # read_uncommitted: no list
            p = await part(leader, 3)  # the middle of a batch: from that batch on
            assert values_of(p.records) == [b"1" * 100, b"x", b"2" * 100, b"x"]
            assert (await part(leader, 6)).records == b""
            assert (await part(leader, 7)).error_code == errors.OffsetOutOfRangeError.code
            assert (await part(other, 0)).error_code == errors.NotLeaderOrFollowerError.code
            resp = await client.request(leader, fetch_request("none", 0, 0))
            assert (
                resp.responses[0].partitions[0].error_code
                == errors.UnknownTopicOrPartitionError.code
            )


async def test_leader_epochs_stamped_answered_and_truncated() -> None:
    """Batches carry the partition leader epoch; OffsetForLeaderEpoch answers each
    epoch's end from the epoch history; Fetch fences a stale or too new epoch;
    truncate_partition cuts whole batches and starts a new epoch at the new end."""
    async with open_fake_cluster(brokers=2) as cluster:
        cluster.create_topic("ep", partitions=1)
        leader = cluster.topics["ep"].partitions[0].leader
        other = next(n for n in cluster.nodes if n != leader)
        async with pykaf.open_client(cluster.bootstrap) as client:

            async def ends(node: int, epochs: list[int], current: int = -1) -> list[Any]:
                R = P.OffsetForLeaderEpochRequest
                req = R(
                    replica_id=-1,
                    topics=[
                        R.OffsetForLeaderTopic(
                            topic="ep",
                            partitions=[
                                R.OffsetForLeaderPartition(
                                    partition=0, current_leader_epoch=current, leader_epoch=e
                                )
                                for e in epochs
                            ],
                        )
                    ],
                )
                resp = await client.request(node, req)
                return [
                    (p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions
                ]

            async def fetched_epochs(current: int = -1) -> tuple[int, list[int]]:
                req = fetch_request("ep", 0, 0)
                req.topics[0].partitions[0].current_leader_epoch = current
                p = (await client.request(leader, req)).responses[0].partitions[0]
                return p.error_code, [b.partition_leader_epoch for b in decode_batches(p.records)]

            await produce_raw(client, cluster, "ep", batch([b"a", b"b"]))
            cluster.set_partition_leader("ep", 0, leader)  # epoch 1 from offset 2
            await produce_raw(client, cluster, "ep", batch([b"c", b"d"]))
            await produce_raw(client, cluster, "ep", batch([b"e"]))
            assert await fetched_epochs() == (0, [0, 1, 1])
            assert await fetched_epochs(1) == (0, [0, 1, 1])
            assert (await fetched_epochs(0))[0] == errors.FencedLeaderEpochError.code
            assert (await fetched_epochs(2))[0] == errors.UnknownLeaderEpochError.code
            assert await ends(leader, [0, 1, 2, -1]) == [
                (0, 0, 2),
                (0, 1, 5),
                (0, -1, -1),
                (0, -1, -1),
            ]
            assert (await ends(leader, [0], current=0))[0][0] == errors.FencedLeaderEpochError.code
            assert (await ends(other, [0]))[0][0] == errors.NotLeaderOrFollowerError.code

            assert cluster.truncate_partition("ep", 0, 3) == 2  # the batch holding 3 goes whole
            assert cluster.partition("ep", 0).leader_epoch == 2
            assert cluster.high_watermark("ep", 0) == 2
            # epoch 1 wrote nothing that survived: it is gone from the history
            assert await ends(leader, [0, 1, 2], current=2) == [(0, 0, 2), (0, 0, 2), (0, 2, 2)]
            await produce_raw(client, cluster, "ep", batch([b"x"]))
            assert await fetched_epochs(2) == (0, [0, 2])
            assert await ends(leader, [2]) == [(0, 2, 3)]
            with pytest.raises(Exception, match="below the log start"):
                cluster.truncate_partition("ep", 0, -1)


# -- list offsets and admin ---------------------------------------------------------------


async def test_list_offsets_earliest_latest_timestamp() -> None:
    async with open_fake_cluster(brokers=1) as cluster:
        cluster.create_topic("lo", partitions=1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            await produce_raw(client, cluster, "lo", batch([b"a", b"b"]))  # ts ...000, ...001
            await produce_raw(client, cluster, "lo", batch([b"c"]))  # ts ...000

            async def lookup(ts: int) -> tuple[int, int, int]:
                req = P.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        P.ListOffsetsRequest.ListOffsetsTopic(
                            name="lo",
                            partitions=[
                                P.ListOffsetsRequest.ListOffsetsPartition(
                                    partition_index=0, timestamp=ts
                                )
                            ],
                        )
                    ],
                )
                p = (await client.request(1, req)).topics[0].partitions[0]
                return p.error_code, p.offset, p.timestamp

            assert (await lookup(-1))[:2] == (0, 3)
            assert (await lookup(-2))[:2] == (0, 0)
            # the first record at or after the timestamp, not its batch (as Kafka)
            assert await lookup(1_700_000_000_001) == (0, 1, 1_700_000_000_001)
            assert await lookup(1_800_000_000_000) == (0, -1, -1)
            assert (await lookup(-3))[1:] == (1, 1_700_000_000_001)
            cluster.topics["lo"].partitions[0].log.delete_before(2)
            assert (await lookup(-2))[:2] == (0, 2)


async def test_admin_create_delete_topics_partitions_records() -> None:
    async with open_fake_cluster(brokers=3, auto_create_topics=False) as cluster:
        await admin_requests(cluster)


async def admin_requests(cluster: FakeCluster) -> None:
    async with pykaf.open_client(cluster.bootstrap) as client:
        T = P.CreateTopicsRequest.CreatableTopic

        async def create(*topics: Any, node: int = 1, validate: bool = False) -> list[int]:
            req = P.CreateTopicsRequest(
                topics=list(topics), timeout_ms=1000, validate_only=validate
            )
            return [t.error_code for t in (await client.request(node, req)).topics]

        def topic(name: str, n: int = -1, rf: int = -1, **cfg: str) -> Any:
            configs = [
                P.CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                for k, v in cfg.items()
            ]
            return T(
                name=name,
                num_partitions=n,
                replication_factor=rf,
                assignments=[],
                configs=configs,
            )

        assert await create(topic("a", 2), node=2) == [errors.NotControllerError.code]
        assert await create(topic("v", 2), validate=True) == [0]
        assert "v" not in cluster.topics
        assert await create(
            topic("a", 2, 3),
            topic("b"),
            topic("c", 0),
            topic("d", 1, 4),
            topic("bad/name"),
            topic("e", 1, message_timestamp_type="Nope"),
        ) == [
            0,
            0,
            errors.InvalidPartitionsError.code,
            errors.InvalidReplicationFactorError.code,
            errors.InvalidTopicError.code,
            errors.InvalidConfigurationError.code,
        ]
        assert len(cluster.topics["a"].partitions) == 2 and len(cluster.topics["b"].partitions) == 3
        assert cluster.topics["a"].partitions[0].replicas == [
            cluster.topics["a"].partitions[0].leader,
            *cluster.topics["a"].partitions[0].replicas[1:],
        ]
        assert await create(topic("a", 1)) == [errors.TopicExistsError.code]

        CP = P.CreatePartitionsRequest.CreatePartitionsTopic
        req = P.CreatePartitionsRequest(
            topics=[
                CP(name="a", count=4, assignments=None),
                CP(name="b", count=2, assignments=None),
                CP(name="zz", count=2, assignments=None),
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        res = (await client.request(1, req)).results
        assert [r.error_code for r in res] == [
            0,
            errors.InvalidPartitionsError.code,
            errors.UnknownTopicOrPartitionError.code,
        ]
        assert len(cluster.topics["a"].partitions) == 4
        assert (await client.request(3, req)).results[
            0
        ].error_code == errors.NotControllerError.code

        await produce_raw(client, cluster, "a", batch([b"1", b"2", b"3"]))
        leader = cluster.topics["a"].partitions[0].leader
        DR = P.DeleteRecordsRequest
        req = DR(
            topics=[
                DR.DeleteRecordsTopic(
                    name="a",
                    partitions=[DR.DeleteRecordsPartition(partition_index=0, offset=2)],
                )
            ],
            timeout_ms=1000,
        )
        p = (await client.request(leader, req)).topics[0].partitions[0]
        assert (p.error_code, p.low_watermark) == (0, 2)
        fetched = await client.request(leader, fetch_request("a", 0, 0))
        assert fetched.responses[0].partitions[0].error_code == errors.OffsetOutOfRangeError.code

        dreq = P.DeleteTopicsRequest(topic_names=["a", "nope"], timeout_ms=1000)
        res2 = (await client.request(1, dreq, 5)).responses
        assert [r.error_code for r in res2] == [0, errors.UnknownTopicOrPartitionError.code]
        assert "a" not in cluster.topics


async def test_confluent_admin_creates_topics_on_the_fake() -> None:
    async with open_fake_cluster(brokers=3, auto_create_topics=False) as cluster:
        conf = {"bootstrap.servers": cluster.bootstrap}

        def admin() -> None:
            bc.create_topic(conf, "adm", partitions=5)
            a = bc.admin_client(conf)
            fut = a.create_partitions([bc.ck.admin.NewPartitions("adm", 7)])
            fut["adm"].result(10)
            a.delete_topics(["adm"])["adm"].result(10)

        await trio.to_thread.run_sync(admin)
        assert "adm" not in cluster.topics
        assert cluster.handler_errors == []
