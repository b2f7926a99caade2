"""The fake cluster's transaction coordinator and read_committed data plane.

confluent-kafka's transactional producer against the fake; confluent-kafka and
pykaf consumers at read_committed (pykaf's proves the aborted-transaction
lists end to end); raw requests for fencing and the coordinator's timeout.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.codec import BatchBuilder, decode_batches
from pykaf.testing import FakeCluster, FakeClusterThread, open_fake_cluster

bc = pytest.importorskip("broker_clients")
ck = bc.ck


def txn_producer(bootstrap: str, tid: str, **extra: Any) -> Any:
    producer = ck.Producer(
        {**bc.QUIET, "bootstrap.servers": bootstrap, "transactional.id": tid, **extra}
    )
    producer.init_transactions(10)
    return producer


def read(
    bootstrap: str, topic: str, partitions: list[int], isolation: str, count: int
) -> list[bytes]:
    """``count`` values from the start of ``partitions``, then make sure nothing more comes."""
    consumer = ck.Consumer(
        {
            **bc.QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in partitions])
        values: list[bytes] = []
        eofs: set[int] = set()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (len(values) < count or len(eofs) < len(partitions)):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                eofs.add(msg.partition())
                continue
            values.append(msg.value())
        assert len(values) == count, (values, count)
        return values
    finally:
        consumer.close()


def test_read_committed_sees_commits_not_aborts_read_uncommitted_sees_both() -> None:
    with FakeClusterThread(brokers=3) as fake:
        fake.create_topic("tx", 2)
        p = txn_producer(fake.bootstrap, "t-1")
        p.begin_transaction()
        for i in range(10):
            p.produce("tx", b"committed-%d" % i, partition=i % 2)
        p.commit_transaction(10)
        p.begin_transaction()
        for i in range(6):
            p.produce("tx", b"aborted-%d" % i, partition=i % 2)
        p.flush(10)
        p.abort_transaction(10)
        p.begin_transaction()
        p.produce("tx", b"last", partition=0)
        p.commit_transaction(10)
        committed = read(fake.bootstrap, "tx", [0, 1], "read_committed", 11)
        assert sorted(committed) == sorted([b"committed-%d" % i for i in range(10)] + [b"last"])
        everything = read(fake.bootstrap, "tx", [0, 1], "read_uncommitted", 17)
        assert {v for v in everything if v.startswith(b"aborted")} == {
            b"aborted-%d" % i for i in range(6)
        }
        # 11 records + 6 aborted + markers (3 on partition 0, 2 + ... on 1)
        assert fake.last_stable_offset("tx", 0) == fake.high_watermark("tx", 0)
        assert fake.cluster.handler_errors == []


def test_open_transaction_holds_back_the_last_stable_offset() -> None:
    with FakeClusterThread(brokers=1) as fake:
        fake.create_topic("lso", 1)
        p = txn_producer(fake.bootstrap, "t-lso")
        p.begin_transaction()
        p.produce("lso", b"pending")
        p.flush(10)
        assert fake.high_watermark("lso", 0) == 1
        assert fake.last_stable_offset("lso", 0) == 0
        assert read(fake.bootstrap, "lso", [0], "read_committed", 0) == []
        assert read(fake.bootstrap, "lso", [0], "read_uncommitted", 1) == [b"pending"]
        p.commit_transaction(10)
        assert fake.last_stable_offset("lso", 0) == 2  # the record and the COMMIT marker
        assert read(fake.bootstrap, "lso", [0], "read_committed", 1) == [b"pending"]


def test_interleaved_transactional_producers_on_one_partition() -> None:
    with FakeClusterThread(brokers=3) as fake:
        fake.create_topic("mix", 1)
        a = txn_producer(fake.bootstrap, "t-a")
        b = txn_producer(fake.bootstrap, "t-b")
        a.begin_transaction()
        b.begin_transaction()
        for i in range(3):
            a.produce("mix", b"a%d" % i)
            a.flush(10)
            b.produce("mix", b"b%d" % i)
            b.flush(10)
        first_a = 0
        assert fake.last_stable_offset("mix", 0) == first_a
        a.abort_transaction(10)
        assert fake.last_stable_offset("mix", 0) == 1  # b's first record holds it now
        b.commit_transaction(10)
        assert read(fake.bootstrap, "mix", [0], "read_committed", 3) == [b"b0", b"b1", b"b2"]


async def test_pykaf_consumer_drops_aborted_records_from_the_aborted_lists() -> None:
    async with open_fake_cluster(brokers=3) as cluster:
        cluster.create_topic("pk", 1)

        def write() -> None:
            p = txn_producer(cluster.bootstrap, "t-pk")
            for n in range(4):
                p.begin_transaction()
                for i in range(5):
                    p.produce("pk", b"%d-%d" % (n, i))
                p.flush(10)
                (p.commit_transaction if n % 2 else p.abort_transaction)(10)

        await trio.to_thread.run_sync(write)
        want = [b"%d-%d" % (n, i) for n in (1, 3) for i in range(5)]
        for isolation, expected in (("read_committed", want), ("read_uncommitted", None)):
            async with pykaf.open_consumer(
                cluster.bootstrap, isolation_level=isolation
            ) as consumer:
                pc = await consumer.consume_partition("pk", 0, pykaf.OLDEST)
                got: list[Any] = []
                with trio.fail_after(20):
                    while not got or got[-1].value != b"3-4":
                        got.extend(await pc.next_batch())
                values = [r.value for r in got]
                assert values == (
                    expected or [b"%d-%d" % (n, i) for n in range(4) for i in range(5)]
                )
        assert cluster.handler_errors == []


# -- raw coordinator requests ------------------------------------------------------------


async def init(client: Any, node: int, tid: str, timeout_ms: int = 60_000, **kw: int) -> Any:
    return await client.request(
        node,
        P.InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout_ms=timeout_ms,
            producer_id=kw.get("pid", -1),
            producer_epoch=kw.get("epoch", -1),
        ),
    )


async def add_partition(client: Any, node: int, tid: str, pid: int, epoch: int, topic: str) -> int:
    T = P.AddPartitionsToTxnRequest
    req = T(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
    )
    resp = await client.request(node, req, 3)
    return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


async def end(client: Any, node: int, tid: str, pid: int, epoch: int, commit: bool) -> int:
    req = P.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return int((await client.request(node, req, 3)).error_code)


async def produce_txn(
    client: Any,
    cluster: FakeCluster,
    topic: str,
    pid: int,
    epoch: int,
    seq: int,
    value: bytes,
    version: int | None = None,
) -> int:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, value)
    records = builder.build(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    part = cluster.partition(topic, 0)
    assert part is not None
    req = P.ProduceRequest(
        transactional_id="x",
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            P.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[P.ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    resp = await client.request(part.leader, req, version)
    return int(resp.responses[0].partition_responses[0].error_code)


async def test_coordinator_checks_fencing_and_partition_verification() -> None:
    async with (
        open_fake_cluster(brokers=3, max_transaction_timeout_ms=100_000) as cluster,
        pykaf.open_client(cluster.bootstrap) as client,
    ):
        cluster.create_topic("raw", 1)
        node = cluster.coordinator_for(1, "t-raw")
        other = next(n for n in cluster.nodes if n != node)
        assert (await init(client, other, "t-raw")).error_code == errors.NotCoordinatorError.code
        assert (
            await init(client, node, "t-raw", 200_000)
        ).error_code == errors.InvalidTxnTimeoutError.code
        r = await init(client, node, "t-raw")
        pid, epoch = r.producer_id, r.producer_epoch
        assert (r.error_code, epoch) == (0, 0)
        # KIP-890: a transactional batch for a partition not in the transaction
        # (TRANSACTION_ABORTABLE at Produce v11+, as Kafka answers)
        assert (
            await produce_txn(client, cluster, "raw", pid, epoch, 0, b"x")
            == errors.TransactionAbortableError.code
        )
        assert (
            await end(client, node, "t-raw", pid, epoch, True) == errors.InvalidTxnStateError.code
        )
        assert (
            await add_partition(client, node, "t-raw", pid + 1, epoch, "raw")
            == errors.InvalidPidMappingError.code
        )
        assert (
            await add_partition(client, node, "t-raw", pid, epoch, "nope")
            == errors.UnknownTopicOrPartitionError.code
        )
        assert await add_partition(client, node, "t-raw", pid, epoch, "raw") == 0
        assert await produce_txn(client, cluster, "raw", pid, epoch, 0, b"open") == 0
        assert cluster.last_stable_offset("raw", 0) == 0
        # a second InitProducerId aborts the open transaction and bumps the epoch
        r2 = await init(client, node, "t-raw")
        assert (r2.producer_id, r2.producer_epoch) == (pid, epoch + 2)
        log = cluster.topics["raw"].partitions[0].log
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted] == [
            (pid, 0, 1)
        ]
        assert cluster.last_stable_offset("raw", 0) == 2
        assert (
            await produce_txn(client, cluster, "raw", pid, epoch, 1, b"zombie")
            == errors.InvalidProducerEpochError.code
        )
        assert (
            await add_partition(client, node, "t-raw", pid, epoch, "raw")
            == errors.ProducerFencedError.code
        )
        assert await end(client, node, "t-raw", pid, epoch, True) == errors.ProducerFencedError.code
        # the aborted list reaches read_committed fetches only
        fetch = P.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=1,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                P.FetchRequest.FetchTopic(
                    topic="raw",
                    partitions=[
                        P.FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        part = (
            (await client.request(cluster.partition("raw", 0).leader, fetch))
            .responses[0]
            .partitions[0]
        )  # type: ignore[union-attr]
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
        assert [b.control_type for b in decode_batches(part.records)] == [None, "abort"]


@pytest.mark.parametrize("transaction_version", [1, 2])
async def test_transactions_v2_implicit_adds_and_epoch_bumps(transaction_version: int) -> None:
    """KIP-890 part 2 on the fake: only at ``transaction.version`` 2 and the V2 versions."""
    async with (
        open_fake_cluster(brokers=1, transaction_version=transaction_version) as cluster,
        pykaf.open_client(cluster.bootstrap) as client,
    ):
        cluster.create_topic("raw", 1)
        versions = client.newest_features()
        assert versions is not None
        assert versions.feature_level("transaction.version") == transaction_version
        v2 = transaction_version == 2
        assert versions.supports(P.EndTxnRequest.API_KEY, 5) is v2
        assert versions.supports(P.ProduceRequest.API_KEY, 12) is v2
        r = await init(client, 1, "t-v2")
        pid, epoch = r.producer_id, r.producer_epoch
        # Produce v11 never adds the partition: refused as outside the transaction
        assert await produce_txn(client, cluster, "raw", pid, epoch, 0, b"v", 11) == (
            errors.TransactionAbortableError.code
        )
        if not v2:
            return
        # v12 adds it: the transaction begins with the batch
        assert await produce_txn(client, cluster, "raw", pid, epoch, 0, b"v", 12) == 0
        assert cluster.last_stable_offset("raw", 0) == 0
        end5 = P.EndTxnRequest(
            transactional_id="t-v2", producer_id=pid, producer_epoch=epoch, committed=True
        )
        resp = await client.request(1, end5, 5)
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (0, pid, epoch + 1)
        assert cluster.last_stable_offset("raw", 0) == 2  # the record and its marker
        # a retried EndTxn (the epoch before, the transaction complete) gets the same answer
        again = await client.request(1, end5, 5)
        assert (again.error_code, again.producer_epoch) == (0, epoch + 1)
        # the old epoch is fenced: a late batch of the finished transaction is refused
        assert await produce_txn(client, cluster, "raw", pid, epoch, 1, b"v", 12) == (
            errors.InvalidProducerEpochError.code
        )
        # the new epoch's first batch opens the next transaction (TxnOffsetCommit v5's
        # implicit add is in the conformance case transactions_v2); its abort bumps again
        assert await produce_txn(client, cluster, "raw", pid, epoch + 1, 0, b"v", 12) == 0
        abort = P.EndTxnRequest(
            transactional_id="t-v2", producer_id=pid, producer_epoch=epoch + 1, committed=False
        )
        resp = await client.request(1, abort, 5)
        assert (resp.error_code, resp.producer_epoch) == (0, epoch + 2)
        # EndTxn v4 on V2 does not bump (a V1 client's end)
        assert await produce_txn(client, cluster, "raw", pid, epoch + 2, 0, b"v", 12) == 0
        assert await end(client, 1, "t-v2", pid, epoch + 2, True) == 0
        assert cluster.transactions.transactions["t-v2"].epoch == epoch + 2


async def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    async with (
        open_fake_cluster(brokers=1) as cluster,
        pykaf.open_client(cluster.bootstrap) as client,
    ):
        cluster.create_topic("slow", 1)
        r = await init(client, 1, "t-slow", timeout_ms=200)
        pid, epoch = r.producer_id, r.producer_epoch
        assert await add_partition(client, 1, "t-slow", pid, epoch, "slow") == 0
        assert await produce_txn(client, cluster, "slow", pid, epoch, 0, b"late") == 0
        log = cluster.topics["slow"].partitions[0].log
        with trio.fail_after(10):
            while cluster.last_stable_offset("slow", 0) == 0:
                event = trio.Event()
                log.add_waiter(event)  # woken by the coordinator's ABORT marker
                await event.wait()
        assert [(a.producer_id, a.first_offset) for a in log.aborted] == [(pid, 0)]
        assert await end(client, 1, "t-slow", pid, epoch, True) == errors.ProducerFencedError.code
        assert (
            await produce_txn(client, cluster, "slow", pid, epoch, 1, b"more")
            == errors.InvalidProducerEpochError.code
        )
        # KIP-360: the fenced producer may bump its epoch with its old one
        r2 = await init(client, 1, "t-slow", pid=pid, epoch=epoch)
        assert (r2.error_code, r2.producer_id, r2.producer_epoch) == (0, pid, epoch + 2)
        async with pykaf.open_consumer(
            cluster.bootstrap, isolation_level="read_committed"
        ) as consumer:
            pc = await consumer.consume_partition("slow", 0, pykaf.OLDEST)
            assert pc is not None
        assert cluster.high_watermark("slow", 0) == 2


def test_confluent_transaction_timeout_fences_the_producer() -> None:
    with FakeClusterThread(brokers=1) as fake:
        fake.create_topic("cto", 1)
        p = txn_producer(fake.bootstrap, "t-cto", **{"transaction.timeout.ms": 1000})
        p.begin_transaction()
        p.produce("cto", b"never")
        p.flush(10)
        bc.wait_for(lambda: fake.last_stable_offset("cto", 0) == 2, 10, "the coordinator's abort")
        with pytest.raises(ck.KafkaException):
            p.commit_transaction(10)
        assert read(fake.bootstrap, "cto", [0], "read_committed", 0) == []


def test_send_offsets_to_transaction_commits_the_group_offsets() -> None:
    with FakeClusterThread(brokers=3) as fake:
        if P.JoinGroupRequest.API_KEY not in fake.cluster.apis:
            pytest.skip("the fake cluster has no group APIs yet")
        fake.create_topic("src", 1)
        fake.create_topic("dst", 1)
        bc.produce({"bootstrap.servers": fake.bootstrap}, "src", [b"m%d" % i for i in range(5)])
        consumer = ck.Consumer(
            {
                **bc.QUIET,
                "bootstrap.servers": fake.bootstrap,
                "group.id": "g-txn",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        try:
            consumer.subscribe(["src"])
            got = bc._poll(consumer, 5, 20)
            assert got == [b"m%d" % i for i in range(5)]
            p = txn_producer(fake.bootstrap, "t-eos")
            p.begin_transaction()
            for v in got:
                p.produce("dst", v.upper())
            p.send_offsets_to_transaction(
                [ck.TopicPartition("src", 0, 5)], consumer.consumer_group_metadata(), 10
            )
            p.commit_transaction(10)
            (tp,) = consumer.committed([ck.TopicPartition("src", 0)], 10)
            assert tp.offset == 5
        finally:
            consumer.close()
        assert read(fake.bootstrap, "dst", [0], "read_committed", 5) == [
            b"M%d" % i for i in range(5)
        ]
