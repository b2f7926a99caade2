"""The transactional producer on Kafka and Tansu: commit, abort, fencing, offsets, states.

Both write COMMIT/ABORT control batches and hold the last stable offset
below an open transaction. Tansu's Fetch never lists aborted transactions,
so a read_committed consumer cannot drop aborted records there; Kafka's
does. Aborts are checked on the log itself on both: the records, then an
ABORT marker, and the last stable offset held back while the transaction
was open. Kafka writes the markers after answering EndTxn (transactions v1),
Tansu before.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._group.offsets import OffsetManager
from pykaf.codec import decode_batches

bc = pytest.importorskip("broker_clients")  # skips itself without confluent-kafka
Broker = bc.Broker
unique = bc.unique

pytestmark = pytest.mark.broker

FAST = {"linger": 0.005, "request_timeout": 10.0}


def new_topic(broker: Broker, partitions: int = 1) -> str:
    topic = unique("txn")
    broker.create(topic, partitions)
    return topic


def txn_producer(broker: Broker, tid: str | None = None, **config: Any) -> Any:
    return pykaf.open_producer(
        broker.bootstrap, transactional_id=tid or unique("tid"), **{**FAST, **config}
    )


def read_committed(conf: dict[str, Any], topic: str, partitions: int, count: int) -> list[bytes]:
    """``count`` values a confluent-kafka read_committed consumer reads."""
    conf = {**conf, "isolation.level": "read_committed"}
    return list(bc.consume_assigned(conf, topic, range(partitions), count))


async def raw_fetch(client: pykaf.Client, topic: str, partition: int = 0) -> tuple[Any, list[Any]]:
    """A read_uncommitted Fetch from offset 0: the answer and every batch, markers too."""
    leader = await client.leader(topic, partition)
    conn = await client.broker_connection(leader.node_id)
    version = min(11, conn.version_for(1))  # topic names, not ids
    F = P.FetchRequest
    wanted = F.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
    req = F(max_wait_ms=10, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
    req.topics = [F.FetchTopic(topic=topic, partitions=[wanted])]
    resp = await conn.request(req, version)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    return part, decode_batches(part.records or b"", topic=topic, partition=partition)


def shape(batches: list[Any]) -> list[str]:
    """The log as a list: "data:N" for N records of a transactional batch, or the marker."""
    out = []
    for b in batches:
        if b.is_control:
            out.append(str(b.control_type))
        else:
            assert b.is_transactional
            out.append(f"data:{b.record_count}")
    return out


async def log_shape(broker: Broker, topic: str) -> list[str]:
    """The log once every transaction in it has ended (its marker is written).

    Kafka writes markers after answering EndTxn: until then the last stable
    offset stays below the high watermark.
    """
    async with pykaf.open_client(broker.bootstrap) as client:
        with trio.fail_after(20):
            part, batches = await raw_fetch(client, topic)
            while part.last_stable_offset < part.high_watermark:
                await trio.sleep(0.01)
                part, batches = await raw_fetch(client, topic)
    merged: list[str] = []
    count = 0
    for item in shape(batches):  # batching is the producer's business: count records
        if item.startswith("data:"):
            count += int(item[5:])
            continue
        if count:
            merged.append(f"data:{count}")
            count = 0
        merged.append(item)
    if count:
        merged.append(f"data:{count}")
    return merged


# ---------------------------------------------------------------------- commit


async def test_committed_records_are_visible_to_read_committed_consumers(
    real_broker: Broker,
) -> None:
    topic = new_topic(real_broker, 3)
    async with txn_producer(real_broker) as producer:
        assert producer.txn_status is pykaf.TxnStatus.READY
        producer.begin_transaction()
        assert producer.txn_status is pykaf.TxnStatus.IN_TRANSACTION
        for i in range(30):
            producer.send_nowait(topic, b"v%d" % i, key=b"k%d" % i)
        md = await producer.send(topic, b"last", partition=1)
        assert md.offset >= 0
        await producer.commit_transaction()
        assert producer.txn_status is pykaf.TxnStatus.READY
    values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 3, 31)
    assert sorted(values) == sorted([b"v%d" % i for i in range(30)] + [b"last"])
    # and pykaf's own consumer (read_committed) reads them too
    async with pykaf.open_consumer(real_broker.bootstrap, isolation_level="read_committed") as c:
        pc = await c.consume_partition(topic, 1, pykaf.OLDEST)
        with trio.fail_after(10):
            got: list[bytes | None] = []
            while b"last" not in got:
                got.extend(r.value for r in await pc.next_batch())


async def test_commit_writes_a_commit_marker_after_the_records(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    async with txn_producer(real_broker) as producer:
        for n in (3, 2):
            producer.begin_transaction()
            for i in range(n):
                producer.send_nowait(topic, b"x%d" % i)
            await producer.commit_transaction()
    assert await log_shape(real_broker, topic) == ["data:3", "commit", "data:2", "commit"]


async def test_an_empty_transaction_commits_and_aborts_without_markers(
    real_broker: Broker,
) -> None:
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        await producer.commit_transaction()
        producer.begin_transaction()
        await producer.abort_transaction()
        assert producer.txn_status is pykaf.TxnStatus.READY


async def test_send_batch_and_input_channel_join_the_transaction(real_broker: Broker) -> None:
    topic = new_topic(real_broker, 2)
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        delivery = await producer.send_batch(topic, [b"b%d" % i for i in range(50)])
        await producer.input().send(pykaf.ProducerMessage(topic, b"from-input"))
        await producer.commit_transaction()  # the input() message belongs to it too
        assert await delivery.wait() == 50
    values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 2, 51)
    assert len(values) == 51 and b"from-input" in values


# ---------------------------------------------------------------------- abort


async def test_abort_writes_an_abort_marker_and_the_lso_is_held_while_open(
    real_broker: Broker,
) -> None:
    topic = new_topic(real_broker)
    async with (
        txn_producer(real_broker) as producer,
        pykaf.open_client(real_broker.bootstrap) as client,
    ):
        producer.begin_transaction()
        producer.send_nowait(topic, b"committed")
        await producer.commit_transaction()
        producer.begin_transaction()
        for i in range(4):
            await producer.send(topic, b"aborted-%d" % i)
        part, _ = await raw_fetch(client, topic)
        # open transaction: the last stable offset stays at its first record
        assert part.high_watermark == 6
        assert part.last_stable_offset == 2
        await producer.abort_transaction()
        assert producer.txn_status is pykaf.TxnStatus.READY
        part, batches = await raw_fetch(client, topic)
        if real_broker.name == "kafka":
            # Kafka's coordinator answers EndTxn (v1 transactions) once the abort is
            # prepared in its log and writes the markers afterwards: wait for them.
            with trio.fail_after(20):
                while part.high_watermark < 7:
                    await trio.sleep(0.01)
                    part, batches = await raw_fetch(client, topic)
        assert part.last_stable_offset == part.high_watermark == 7
        assert batches[-1].control_type == "abort"
        # a new transaction after the abort commits normally
        producer.begin_transaction()
        await producer.send(topic, b"after")
        await producer.commit_transaction()
    assert await log_shape(real_broker, topic) == [
        "data:1",
        "commit",
        "data:4",
        "abort",
        "data:1",
        "commit",
    ]
    if real_broker.name == "kafka":
        # Kafka lists the aborted transaction in Fetch: read_committed drops its records.
        values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 1, 2)
        assert values == [b"committed", b"after"]
    else:
        # Tansu lists no aborted transactions in Fetch: read_committed reads them too.
        values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 1, 6)
        assert values[0] == b"committed" and values[-1] == b"after"


async def test_abort_fails_unsent_records_with_transaction_aborted(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    results: list[BaseException | None] = []
    async with txn_producer(real_broker, linger=30.0) as producer:
        producer.begin_transaction()
        for i in range(5):  # lingering: none is sent before the abort
            producer.send_nowait(topic, b"%d" % i, on_delivery=lambda e, md: results.append(e))
        await producer.abort_transaction()
        assert len(results) == 5
        assert all(isinstance(e, pykaf.TransactionAbortedError) for e in results)
        assert producer.statistics().buffered_records == 0
        producer.begin_transaction()
        producer.send_nowait(topic, b"next")
        producer.send_nowait(topic, b"after", on_delivery=lambda e, md: results.append(e))
        await producer.commit_transaction()  # flushes: no lingering
    assert results[5:] == [None]
    assert await log_shape(real_broker, topic) == ["data:2", "commit"]


async def test_closing_with_an_open_transaction_aborts_it(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        await producer.send(topic, b"never-committed")
    assert await log_shape(real_broker, topic) == ["data:1", "abort"]


# ---------------------------------------------------------------------- errors


async def test_a_failed_record_makes_the_transaction_abortable(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    async with txn_producer(real_broker, allow_auto_create_topics=False) as producer:
        producer.begin_transaction()
        await producer.send(topic, b"fine")
        producer.send_nowait(unique("missing"), b"lost")  # its topic does not exist
        with trio.fail_after(20):
            while producer.txn_status is pykaf.TxnStatus.IN_TRANSACTION:
                await trio.sleep(0.05)
        assert producer.txn_status is pykaf.TxnStatus.ABORTABLE_ERROR
        with pytest.raises(errors.TransactionAbortableError) as info:
            await producer.commit_transaction()
        assert isinstance(info.value.__cause__, errors.UnknownTopicOrPartitionError)
        with pytest.raises(errors.TransactionAbortableError):
            producer.send_nowait(topic, b"refused")
        with pytest.raises(errors.TransactionAbortableError):
            producer.begin_transaction()
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send(topic, b"again")
        await producer.commit_transaction()
        await producer.flush()  # the aborted transaction's failure is not raised again
    assert await log_shape(real_broker, topic) == ["data:1", "abort", "data:1", "commit"]


async def test_a_second_producer_with_the_same_id_fences_the_first(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    tid = unique("tid")
    async with txn_producer(real_broker, tid) as first:
        first.begin_transaction()
        await first.send(topic, b"from-first")
        async with txn_producer(real_broker, tid) as second:
            assert second.statistics().producer_epoch > first.statistics().producer_epoch
            with pytest.raises(errors.ProducerFencedError):
                first.send_nowait(topic, b"more")
                await first.commit_transaction()
            assert first.txn_status is pykaf.TxnStatus.FATAL_ERROR
            for call in (first.begin_transaction, lambda: first.send_nowait(topic, b"x")):
                with pytest.raises(errors.ProducerFencedError):
                    call()
            for acall in (first.commit_transaction, first.abort_transaction):
                with pytest.raises(errors.ProducerFencedError):
                    await acall()
            second.begin_transaction()
            await second.send(topic, b"from-second")
            await second.commit_transaction()
    # The second producer's InitProducerId aborted the first's open transaction.
    assert await log_shape(real_broker, topic) == ["data:1", "abort", "data:1", "commit"]
    if real_broker.name == "kafka":
        # Kafka lists the aborted transaction in Fetch: read_committed drops it.
        values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 1, 1)
        assert values == [b"from-second"]
    else:
        # Tansu lists no aborted transactions in Fetch: read_committed reads them too.
        values = await trio.to_thread.run_sync(read_committed, real_broker.conf, topic, 1, 2)
        assert values == [b"from-first", b"from-second"]


# ---------------------------------------------------------------------- offsets


async def committed_offsets(broker: Broker, group: str, topic: str) -> dict[Any, int]:
    async with pykaf.open_client(broker.bootstrap) as client:
        return await OffsetManager(client, group, None).fetch([(topic, 0), (topic, 1)])


async def test_offsets_sent_in_a_transaction_commit_with_it_and_not_on_abort(
    real_broker: Broker,
) -> None:
    topic = new_topic(real_broker, 2)
    out = new_topic(real_broker)
    group = unique("group")
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        await producer.send(out, b"result")
        await producer.send_offsets_to_transaction(
            {(topic, 0): 5, (topic, 1): (7, "meta")}, pykaf.GroupMetadata(group)
        )
        await producer.commit_transaction()
        assert await committed_offsets(real_broker, group, topic) == {(topic, 0): 5, (topic, 1): 7}

        producer.begin_transaction()
        await producer.send_offsets_to_transaction({(topic, 0): 9}, group)  # a group id works
        await producer.abort_transaction()
        assert await committed_offsets(real_broker, group, topic) == {(topic, 0): 5, (topic, 1): 7}


async def test_offsets_from_a_consumer_group_session(real_broker: Broker) -> None:
    source = new_topic(real_broker)
    out = new_topic(real_broker)
    group = unique("group")
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        for i in range(3):
            await producer.send(source, b"in-%d" % i)
        await producer.commit_transaction()
    seen: list[Any] = []

    class Handler:
        async def setup(self, session: pykaf.GroupSession) -> None:
            pass

        async def cleanup(self, session: pykaf.GroupSession) -> None:
            pass

        async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
            async for record in claim:
                producer.begin_transaction()
                await producer.send(out, b"out-" + (record.value or b""))
                await producer.send_offsets_to_transaction(
                    {(record.topic, record.partition): record.offset + 1},
                    session.group_metadata(),
                )
                await producer.commit_transaction()
                seen.append(session.group_metadata())
                if len(seen) == 3:
                    done.set()

    done = trio.Event()
    async with (
        txn_producer(real_broker) as producer,
        pykaf.open_consumer_group(
            real_broker.bootstrap,
            group,
            [source],
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            heartbeat_interval=0.2,
            session_timeout=6.0,
            rebalance_timeout=4.0,
            fetch_max_wait=0.05,
        ) as cg,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(cg.consume, Handler())
        with trio.fail_after(30):
            await done.wait()
        nursery.cancel_scope.cancel()
    gm = seen[0]
    assert gm.group_id == group and gm.generation_id >= 0 and gm.member_id
    offsets = await committed_offsets(real_broker, group, source)
    assert offsets[(source, 0)] == 3  # after the last record (the commit marker is at 3)


# ---------------------------------------------------------------------- the state machine


async def test_transactional_calls_in_the_wrong_state_raise(real_broker: Broker) -> None:
    topic = new_topic(real_broker)
    async with txn_producer(real_broker) as producer:
        with pytest.raises(pykaf.TransactionStateError, match="begin_transaction"):
            producer.send_nowait(topic, b"outside")
        with pytest.raises(pykaf.TransactionStateError):
            await producer.send(topic, b"outside")
        with pytest.raises(pykaf.TransactionStateError):
            await producer.send_batch(topic, [b"outside"])
        with pytest.raises(pykaf.TransactionStateError, match="no transaction to commit"):
            await producer.commit_transaction()
        with pytest.raises(pykaf.TransactionStateError, match="no transaction to abort"):
            await producer.abort_transaction()
        with pytest.raises(pykaf.TransactionStateError):
            await producer.send_offsets_to_transaction({(topic, 0): 1}, "g")
        producer.begin_transaction()
        with pytest.raises(pykaf.TransactionStateError, match="already open"):
            producer.begin_transaction()
        await producer.commit_transaction()
        with pytest.raises(errors.InvalidTxnStateError):  # the Kafka error's subclass
            producer.send_nowait(topic, b"after commit")
        assert producer.statistics().records_sent == 0


async def test_a_producer_without_transactional_id_has_no_transactions(
    real_broker: Broker,
) -> None:
    async with pykaf.open_producer(real_broker.bootstrap) as producer:
        assert producer.txn_status is None
        with pytest.raises(errors.ConfigError, match="transactional_id"):
            producer.begin_transaction()


async def test_bad_offsets_are_refused_before_any_request(real_broker: Broker) -> None:
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        with pytest.raises(TypeError):
            await producer.send_offsets_to_transaction({("t", "0"): 1}, "g")  # type: ignore[dict-item]
        with pytest.raises(ValueError):
            await producer.send_offsets_to_transaction({("t", 0): -1}, "g")
        with pytest.raises(TypeError):
            await producer.send_offsets_to_transaction({("t", 0): 1}, 42)
        assert producer.txn_status is pykaf.TxnStatus.IN_TRANSACTION
        await producer.abort_transaction()


async def test_an_abort_after_lost_sequence_numbers_bumps_the_epoch(real_broker: Broker) -> None:
    """Sequence numbers spent on records never written: new epoch, sequences from 0 (KIP-360)."""
    topic = new_topic(real_broker)
    async with txn_producer(real_broker) as producer:
        producer.begin_transaction()
        await producer.send(topic, b"one")
        await producer.send(topic, b"two")
        before = producer.statistics()
        assert producer.txn is not None
        producer.txn.needs_bump = True  # as after a built batch was dropped
        await producer.abort_transaction()
        after = producer.statistics()
        assert after.producer_id == before.producer_id
        assert after.producer_epoch == before.producer_epoch + 1
        # V1 asks InitProducerId for it; on V2 the abort's EndTxn v5 bumped it already
        assert after.epoch_bumps == (0 if after.transaction_version == 2 else 1)
        producer.begin_transaction()
        await producer.send(topic, b"three")  # sequence 0 of the new epoch: accepted
        await producer.commit_transaction()
    assert await log_shape(real_broker, topic) == ["data:2", "abort", "data:1", "commit"]
