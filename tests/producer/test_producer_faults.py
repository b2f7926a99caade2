"""The producer under faults: injected errors, leader moves, dead brokers, epoch bumps.

Most tests run on librdkafka's mock cluster (3 brokers) and check, for tens
of thousands of records sent with several requests in flight, that every
record is acknowledged exactly once and that confluent-kafka reads every
value back exactly once and in order (each value is ``b"<partition>:<seq>"``).

The mock checks no sequence numbers for an idempotent producer without a
transactional id, so it accepts a batch sent after one that failed and is
being retried: a retriable error that hits one request while later requests
of the same partitions are already in flight reorders the log (a real broker
answers those with OUT_OF_ORDER_SEQUENCE_NUMBER and the producer retries them
in order). To keep the order checks meaningful, injected errors answer every
Produce request until the producer has retried and has nothing in flight
(:func:`_stop_failing_when`), and brokers go down only while nothing is
in flight to them (the mock would drop answers to requests it had already
written, and without sequence checks the retries would be duplicates), and a
partition's leader never moves back to a broker that may still get requests
for it (a request failed by the old leadership and the next one accepted by
the new would reorder the log). The
test with short error bursts between pipelined requests checks exactly-once
but not order. Kafka and Tansu, which do check sequences, run the long
pipelined idempotent run; Kafka's three nodes, stopped one at a time, show
leader moves with sequence checks (test_leader_stopped_mid_stream...).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.codec import RecordBatch, decode_record_set
from pykaf.testing import ALL_BROKERS, KafkaCluster, MockCluster

ck = pytest.importorskip("confluent_kafka")

PRODUCE, FETCH = 0, 1
PARTITIONS = 6
RECORDS = 30_000
#: Small batches and short backoffs: many batches in flight, quick retries.
FAST: dict[str, Any] = {
    "linger": 0.002,
    "flush_bytes": 1024,
    "max_in_flight": 5,
    "retry_backoff": 0.01,
    "retry_backoff_max": 0.05,
    "request_timeout": 5,
    "reconnect_backoff": 0.01,
    "reconnect_backoff_max": 0.05,
}

pytestmark = pytest.mark.broker


def _topic() -> str:
    return f"faults-{uuid.uuid4().hex[:10]}"


class Ledger:
    """Records sent with ``send_nowait`` and what their callbacks reported.

    Record ``i`` goes to partition ``i % partitions`` with the value
    ``b"<partition>:<seq>"``, ``seq`` counting from 0 in each partition.
    """

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.expected: list[list[bytes]] = [[] for _ in range(partitions)]
        self.where: list[tuple[int, int]] = []
        self.calls: list[int] = []
        self.outcomes: list[Any] = []

    def send(self, producer: pykaf.Producer, topic: str, partition: int | None = None) -> int:
        i = len(self.calls)
        p = i % self.partitions if partition is None else partition
        seq = len(self.expected[p])
        value = b"%d:%09d" % (p, seq)
        self.expected[p].append(value)
        self.where.append((p, seq))
        self.calls.append(0)
        self.outcomes.append(None)

        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            self.calls[i] += 1
            self.outcomes[i] = md if error is None else error

        producer.send_nowait(topic, value, partition=p, on_delivery=on_delivery)
        return i

    async def send_many(
        self, producer: pykaf.Producer, topic: str, count: int, *, chunk: int = 500
    ) -> None:
        """Send ``count`` records, letting the producer's tasks run between chunks."""
        for start in range(0, count, chunk):
            for _ in range(min(chunk, count - start)):
                self.send(producer, topic)
            await trio.sleep(0)

    def failures(self) -> dict[int, BaseException]:
        return {i: o for i, o in enumerate(self.outcomes) if isinstance(o, BaseException)}

    def assert_each_called_once(self) -> None:
        wrong = [(i, c) for i, c in enumerate(self.calls) if c != 1]
        assert not wrong, f"{len(wrong)} callbacks not called exactly once, e.g. {wrong[:5]}"

    def assert_all_acked_once(self) -> None:
        """Each callback once, no error, offsets 0..n-1 in each partition in send order."""
        self.assert_each_called_once()
        failed = self.failures()
        assert not failed, f"{len(failed)} records failed, e.g. {list(failed.values())[:3]}"
        offsets: list[list[int]] = [[] for _ in range(self.partitions)]
        for (p, _), md in zip(self.where, self.outcomes, strict=True):
            assert md.partition == p
            offsets[p].append(md.offset)
        for p, got in enumerate(offsets):
            assert got == list(range(len(got))), f"partition {p}: offsets out of order"

    def counts(self) -> list[int]:
        return [len(v) for v in self.expected]


def _read_back(
    bootstrap: str, topic: str, counts: list[int], *, timeout: float = 30.0
) -> tuple[list[list[bytes]], list[int]]:
    """Every value of each partition (from offset 0) and its high watermark.

    Reads until each partition has ``counts[p]`` values, then a little
    longer so that duplicates would show up too.
    """
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pykaf-faults",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
            "log_level": 0,
        }
    )
    values: list[list[bytes]] = [[] for _ in counts]
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(len(counts))])
        deadline = time.monotonic() + timeout
        settle = None
        while time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.1):
                if msg.error():
                    raise AssertionError(f"consume error: {msg.error()}")
                values[msg.partition()].append(msg.value())
            if settle is None and all(len(v) >= c for v, c in zip(values, counts, strict=True)):
                settle = time.monotonic() + 0.3
            if settle is not None and time.monotonic() > settle:
                break
        # The high watermark of the last Fetch (Tansu's ListOffsets is off).
        highs = [
            consumer.get_watermark_offsets(ck.TopicPartition(topic, p), cached=True)[1]
            for p in range(len(counts))
        ]
        for p, high in enumerate(highs):
            if high < 0:  # no Fetch answer for it held one: ask the leader
                highs[p] = consumer.get_watermark_offsets(
                    ck.TopicPartition(topic, p), timeout=10, cached=False
                )[1]
    finally:
        consumer.close()
    return values, highs


async def _assert_read_back_in_order(bootstrap: str, topic: str, ledger: Ledger) -> None:
    values, highs = await trio.to_thread.run_sync(_read_back, bootstrap, topic, ledger.counts())
    assert highs == ledger.counts(), "the log holds more (or fewer) records than were sent"
    for p, (got, want) in enumerate(zip(values, ledger.expected, strict=True)):
        if got != want:
            at = next(
                (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                min(len(got), len(want)),
            )
            pytest.fail(
                f"partition {p}: {len(got)} values read, {len(want)} sent; first difference "
                f"at {at}: {got[at : at + 3]} != {want[at : at + 3]}"
            )


def _fail_every_produce(cluster: MockCluster, code: int) -> None:
    """Answer every Produce request with ``code`` until :func:`_stop_failing_when`."""
    cluster.push_request_errors(PRODUCE, *[code] * 20_000)


async def _stop_failing_when(
    cluster: MockCluster,
    producer: pykaf.Producer,
    until: Callable[[pykaf.ProducerStatistics], bool],
) -> None:
    """Stop the injected Produce errors once ``until(statistics)`` holds.

    They stop at a moment when no request is in flight, so every request the
    producer sent since the first failure failed: the partitions' batches
    come back in order and are retried in order.
    """
    with trio.fail_after(30):
        while True:
            await trio.sleep(0.001)
            st = producer.statistics()
            if until(st) and st.in_flight == 0:
                cluster.clear_request_errors(PRODUCE)
                return


async def _wait_for(
    producer: pykaf.Producer, ok: Callable[[pykaf.ProducerStatistics], bool]
) -> None:
    """Wait until ``ok(statistics)`` holds (a hang guard, not a timing check)."""
    with trio.fail_after(20):
        while not ok(producer.statistics()):
            await trio.sleep(0.001)


def _produce_requests(cluster: MockCluster) -> dict[int, int]:
    counts = dict.fromkeys(cluster.broker_ids, 0)
    for r in cluster.get_requests():
        if r.api_key == PRODUCE:
            counts[r.broker_id] += 1
    return counts


async def _log_batches(client: pykaf.Client, topic: str, partition: int) -> list[RecordBatch]:
    """Every record batch of the partition's log, headers included (raw Fetch requests)."""
    conn = await client.broker_connection((await client.leader(topic, partition)).node_id)
    version = min(conn.version_for(FETCH), 12)  # topics by name
    batches: list[RecordBatch] = []
    while True:
        fetch = P.FetchPartition(
            partition=partition,
            fetch_offset=batches[-1].next_offset if batches else 0,
            partition_max_bytes=1 << 20,
        )
        resp = await conn.request(
            P.FetchRequest(
                max_bytes=1 << 20, topics=[P.FetchTopic(topic=topic, partitions=[fetch])]
            ),
            version,
        )
        data = resp.responses[0].partitions[0]
        assert data.error_code == 0
        got = decode_record_set(data.records or b"").batches
        batches.extend(got)
        if not got or batches[-1].next_offset >= data.high_watermark:
            return batches


def _assert_sequences_restart_per_producer(batches: list[RecordBatch]) -> list[tuple[int, int]]:
    """Each producer id/epoch's batches follow each other, sequences from 0 without a gap.

    What a broker that checks sequences would have enforced. Returns the
    (producer id, epoch) pairs in the order they appear in the log.
    """
    seen: list[tuple[int, int]] = []
    expected = 0
    for b in batches:
        pid = (b.producer_id, b.producer_epoch)
        if not seen or seen[-1] != pid:
            assert pid not in seen, f"producer {pid} writes again after {seen[-1]}"
            seen.append(pid)
            expected = 0
        assert b.base_sequence == expected, (pid, b.base_offset, b.base_sequence, expected)
        expected += b.record_count
    return seen


def _spread_leaders(cluster: MockCluster, topic: str, partitions: int = PARTITIONS) -> None:
    cluster.create_topic(topic, partitions, 3)
    for p in range(partitions):
        cluster.set_partition_leader(topic, p, p % 3 + 1)


# ---------------------------------------------------------------------------- retriable errors


@pytest.mark.parametrize(
    "error",
    [errors.NotLeaderOrFollowerError, errors.TimeoutError, errors.NotEnoughReplicasError],
    ids=lambda e: e.__name__,
)
async def test_retriable_produce_errors_are_retried_in_order(
    mock_cluster: MockCluster, error: type[errors.KafkaError]
) -> None:
    topic = _topic()
    _spread_leaders(mock_cluster, topic)
    mock_cluster.set_rtt(ALL_BROKERS, 2)  # answers take a while: requests pile up in flight
    ledger = Ledger(PARTITIONS)
    async with pykaf.open_producer(mock_cluster.bootstrap, **FAST) as producer:
        mock_cluster.start_request_tracking()
        await ledger.send_many(producer, topic, RECORDS // 3)
        await _wait_for(producer, lambda s: s.records_acked > 0)  # mid-run
        assert producer.statistics().retries == 0
        _fail_every_produce(mock_cluster, error.code)
        await ledger.send_many(producer, topic, RECORDS // 3)  # while every request fails
        await _stop_failing_when(
            mock_cluster, producer, lambda s: s.retries >= 20 and s.errors >= 30
        )
        await ledger.send_many(producer, topic, RECORDS - 2 * (RECORDS // 3))
        await producer.flush()
        st = producer.statistics()
        tracked = _produce_requests(mock_cluster)
    ledger.assert_all_acked_once()
    assert st.retries >= 20 and st.errors >= 30
    assert (st.records_acked, st.records_failed, st.buffered_records) == (RECORDS, 0, 0)
    assert st.epoch_bumps == 0
    # Every request the producer counts reached its broker (none more, none less).
    assert tracked == {b: st.brokers[b].requests for b in mock_cluster.broker_ids}
    assert sum(s.errors for s in st.brokers.values()) == st.errors
    await _assert_read_back_in_order(mock_cluster.bootstrap, topic, ledger)


async def test_short_error_bursts_between_pipelined_requests_lose_and_duplicate_nothing(
    mock_cluster: MockCluster,
) -> None:
    # One or two failed requests while later ones of the same partitions are
    # in flight: the mock writes those later ones (it checks no sequences), so
    # only exactly-once is checked here, not the order.
    topic = _topic()
    _spread_leaders(mock_cluster, topic)
    mock_cluster.set_rtt(ALL_BROKERS, 2)
    ledger = Ledger(PARTITIONS)
    bursts = 0
    async with pykaf.open_producer(mock_cluster.bootstrap, **FAST) as producer:
        for step in range(10):
            await ledger.send_many(producer, topic, RECORDS // 10)
            mock_cluster.push_request_errors(PRODUCE, *[errors.TimeoutError.code] * (step % 2 + 1))
            bursts += step % 2 + 1
        await producer.flush()
        st = producer.statistics()
    ledger.assert_each_called_once()
    assert not ledger.failures()
    assert st.errors >= bursts and st.retries > 0  # every pushed error met a request
    assert (st.records_acked, st.records_failed) == (RECORDS, 0)
    values, highs = await trio.to_thread.run_sync(
        _read_back, mock_cluster.bootstrap, topic, ledger.counts()
    )
    assert highs == ledger.counts()
    for got, want in zip(values, ledger.expected, strict=True):
        assert sorted(got) == want


# ---------------------------------------------------------------------------- leaders and brokers


async def test_leaders_move_while_producing_with_send_batch(mock_cluster: MockCluster) -> None:
    topic = _topic()
    _spread_leaders(mock_cluster, topic)
    leaders = {p: p % 3 + 1 for p in range(PARTITIONS)}
    expected: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    deliveries = []

    async def send_round(producer: pykaf.Producer, per_partition: int) -> None:
        for p in range(PARTITIONS):
            start = len(expected[p])
            values = [b"%d:%09d" % (p, start + k) for k in range(per_partition)]
            expected[p].extend(values)
            # in slices, so that the batches of one partition spread over requests
            for k in range(0, per_partition, 250):
                deliveries.append(
                    await producer.send_batch(topic, values[k : k + 250], partition=p)
                )
            await trio.sleep(0)

    async with pykaf.open_producer(mock_cluster.bootstrap, **FAST) as producer:
        mock_cluster.start_request_tracking()
        # One partition moves each round, while requests are in flight; each
        # moves twice, never back to a broker that led it (see the docstring).
        for step in range(2 * PARTITIONS):
            await send_round(producer, RECORDS // PARTITIONS // 16)
            p = step % PARTITIONS
            leaders[p] = leaders[p] % 3 + 1
            mock_cluster.set_partition_leader(topic, p, leaders[p])
        await send_round(producer, RECORDS // PARTITIONS // 16)
        await producer.flush()
        moved = producer.statistics()
        assert moved.retries > 0 and moved.errors > 0  # NOT_LEADER_OR_FOLLOWER answers
        # Everything on broker 3 now: once the producer knows, only broker 3 gets requests.
        for p in range(PARTITIONS):
            mock_cluster.set_partition_leader(topic, p, 3)
        await send_round(producer, RECORDS // PARTITIONS // 10)
        await producer.flush()
        before, tracked_before = producer.statistics(), _produce_requests(mock_cluster)
        await send_round(producer, RECORDS // PARTITIONS // 10)
        await producer.flush()
        after, tracked_after = producer.statistics(), _produce_requests(mock_cluster)
    for b in (1, 2):
        assert after.brokers[b].requests == before.brokers[b].requests
        assert tracked_after[b] == tracked_before[b]
    assert (
        tracked_after[3] - tracked_before[3]
        == after.brokers[3].requests - before.brokers[3].requests
        > 0
    )
    assert after.errors == before.errors
    total = sum(len(v) for v in expected)
    assert sum([await d.wait() for d in deliveries]) == total
    assert all(d.failed == 0 for d in deliveries)
    assert (after.records_acked, after.records_failed) == (total, 0)
    ledger = Ledger(PARTITIONS)
    ledger.expected = expected
    await _assert_read_back_in_order(mock_cluster.bootstrap, topic, ledger)


async def test_a_broker_down_then_up_while_producing(mock_cluster: MockCluster) -> None:
    topic = _topic()
    _spread_leaders(mock_cluster, topic)
    ledger = Ledger(PARTITIONS)
    async with pykaf.open_producer(mock_cluster.bootstrap, **FAST) as producer:
        mock_cluster.start_request_tracking()
        await ledger.send_many(producer, topic, RECORDS // 3)
        # Down once it has taken requests, and while none is in flight to it
        # (see the module docstring).
        await _wait_for(
            producer,
            lambda s: 2 in s.brokers and s.brokers[2].requests > 0 and not s.brokers[2].in_flight,
        )
        mock_cluster.broker_down(2)
        down_at = _produce_requests(mock_cluster)[2]
        assert down_at > 0
        await ledger.send_many(producer, topic, RECORDS // 3)
        await _wait_for(producer, lambda s: s.brokers[2].errors > 0)  # it could not connect
        # The mock then reports no leader for broker 2's partitions: the
        # producer backs off and looks again, a few times before the broker is back.
        await trio.sleep(0.3)
        assert _produce_requests(mock_cluster)[2] == down_at
        stuck = producer.statistics()
        assert stuck.buffered_records > 0  # the partitions of broker 2 wait
        mock_cluster.broker_up(2)
        await ledger.send_many(producer, topic, RECORDS - 2 * (RECORDS // 3))
        await producer.flush()
        st = producer.statistics()
    ledger.assert_all_acked_once()
    assert st.brokers[2].errors > 0
    assert (st.records_acked, st.records_failed, st.buffered_records) == (RECORDS, 0, 0)
    assert _produce_requests(mock_cluster)[2] > down_at
    await _assert_read_back_in_order(mock_cluster.bootstrap, topic, ledger)


# ---------------------------------------------------------------------------- idempotence


@pytest.mark.parametrize(
    "error",
    [errors.OutOfOrderSequenceError, errors.UnknownProducerIdError],
    ids=lambda e: e.__name__,
)
async def test_sequence_errors_bump_the_epoch_and_keep_every_record_once_in_order(
    mock_cluster: MockCluster, error: type[errors.KafkaError]
) -> None:
    # KIP-360: wait for the requests in flight, InitProducerId, re-stamp the
    # built batches with sequences from 0. The mock refuses to bump the epoch
    # of a producer without a transactional id (INVALID_PRODUCER_ID_MAPPING),
    # so the producer gets a new id, as Kafka itself gives such a producer.
    topic = _topic()
    _spread_leaders(mock_cluster, topic)
    mock_cluster.set_rtt(ALL_BROKERS, 2)
    ledger = Ledger(PARTITIONS)
    async with pykaf.open_producer(mock_cluster.bootstrap, **FAST) as producer:
        first = (producer.producer_id, producer.producer_epoch)
        await ledger.send_many(producer, topic, RECORDS // 3)
        await _wait_for(producer, lambda s: s.records_acked > 0)
        _fail_every_produce(mock_cluster, error.code)
        await ledger.send_many(producer, topic, RECORDS // 3)
        # Two bumps at least: the second re-stamps batches re-stamped by the first.
        await _stop_failing_when(mock_cluster, producer, lambda s: s.epoch_bumps >= 2)
        await ledger.send_many(producer, topic, RECORDS - 2 * (RECORDS // 3))
        await producer.flush()
        st = producer.statistics()
        logs = [await _log_batches(producer.client, topic, p) for p in range(PARTITIONS)]
    ledger.assert_all_acked_once()
    assert st.epoch_bumps >= 2 and st.errors > 0
    assert (st.records_acked, st.records_failed) == (RECORDS, 0)
    assert (st.producer_id, st.producer_epoch) != first
    seen = set()
    for batches in logs:
        producers = _assert_sequences_restart_per_producer(batches)
        assert producers[-1] == (st.producer_id, st.producer_epoch)
        seen.update(producers)
    assert first in seen and len(seen) >= 2
    await _assert_read_back_in_order(mock_cluster.bootstrap, topic, ledger)


async def test_a_long_pipelined_idempotent_run_passes_the_brokers_sequence_checks(
    real_broker: Any,
) -> None:
    # Kafka and Tansu check every batch's sequence: a gap, a reordering or a duplicate
    # would come back as OUT_OF_ORDER_SEQUENCE_NUMBER / DUPLICATE_SEQUENCE_NUMBER.
    topic, partitions, records = _topic(), 4, 300_000
    await trio.to_thread.run_sync(real_broker.create, topic, partitions)
    ledger = Ledger(partitions)
    most_in_flight = 0
    async with pykaf.open_producer(
        real_broker.bootstrap, linger=0.001, flush_bytes=2048, max_in_flight=5
    ) as producer:
        assert producer.idempotent
        for _ in range(records // 1000):
            for _ in range(1000):
                ledger.send(producer, topic)
            await trio.sleep(0)
            most_in_flight = max(most_in_flight, producer.statistics().in_flight)
        await producer.flush()
        st = producer.statistics()
    assert most_in_flight > 1  # requests were pipelined
    assert st.batches_sent > 1000
    assert (st.errors, st.epoch_bumps, st.retries) == (0, 0, 0)
    assert (st.records_acked, st.records_failed) == (records, 0)
    ledger.assert_all_acked_once()
    await _assert_read_back_in_order(real_broker.bootstrap, topic, ledger)


@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "killed"])
async def test_leader_stopped_mid_stream_loses_duplicates_and_reorders_nothing(
    kafka_cluster3: KafkaCluster, kill: bool
) -> None:
    # Kafka's three nodes, replication 3, acks=all: the leader of partition 0
    # stops (a clean shutdown hands its partitions over first; a SIGKILL leaves
    # them until the controller fences it) while records keep coming, and
    # starts again. The new leader has the producer's sequence state, so a
    # batch written before the stop and sent again is a duplicate it drops.
    cluster = kafka_cluster3
    topic, partitions = _topic(), 3
    await trio.to_thread.run_sync(lambda: cluster.create_topic(topic, partitions, 3))
    ledger = Ledger(partitions)
    config = {**FAST, "request_timeout": 10, "delivery_timeout": 120}
    async with pykaf.open_producer(cluster.bootstrap, **config) as producer:
        assert producer.idempotent
        stop = trio.Event()

        async def feed() -> None:
            while not stop.is_set():
                await ledger.send_many(producer, topic, 100)
                await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            await _wait_for(producer, lambda s: s.records_acked >= 2000)
            victim = (await producer.client.leader(topic, 0)).node_id
            try:
                await trio.to_thread.run_sync(lambda: cluster.broker_down(victim, kill=kill))
                down = producer.statistics().records_acked
                # Partition 0 itself moves on: records of it are acknowledged again.
                acked_p0 = _acked(ledger, 0)
                with trio.fail_after(90):  # a hang guard (a kill waits for the fencing)
                    while _acked(ledger, 0) < acked_p0 + 500:
                        await trio.sleep(0.01)
                moved_to = (await producer.client.leader(topic, 0)).node_id
                assert producer.statistics().records_acked > down
            finally:
                await trio.to_thread.run_sync(cluster.broker_up, victim)
            up = producer.statistics().records_acked
            await _wait_for(producer, lambda s: s.records_acked >= up + 2000)
            stop.set()
        await producer.flush()
        st = producer.statistics()
    assert moved_to != victim
    # The stopped leader's requests failed (NOT_LEADER_OR_FOLLOWER, or the connection)
    # and were sent again.
    assert st.errors > 0 and st.retries > 0
    assert sum(b.errors for b in st.brokers.values()) == st.errors
    assert (st.records_acked, st.records_failed, st.buffered_records) == (len(ledger.calls), 0, 0)
    ledger.assert_all_acked_once()
    await _wait_in_sync(cluster.bootstrap, topic, 3)
    await _assert_read_back_in_order(cluster.bootstrap, topic, ledger)


async def _wait_in_sync(bootstrap: str, topic: str, replicas: int) -> None:
    """Wait until every partition of ``topic`` has a leader and ``replicas`` in sync.

    A node started again catches up and may take its partitions back (the
    preferred leader election); a reader started meanwhile can spend its whole
    read-back chasing a leader that is moving.
    """
    async with pykaf.open_admin(bootstrap) as admin:
        with trio.fail_after(60):
            while True:
                parts = (await admin.describe_topics([topic]))[topic].partitions
                if all(p.leader >= 0 and len(p.isr) == replicas for p in parts):
                    return
                await trio.sleep(0.2)


def _acked(ledger: Ledger, partition: int) -> int:
    """Records of ``partition`` acknowledged so far."""
    return sum(
        1
        for (p, _), o in zip(ledger.where, ledger.outcomes, strict=True)
        if p == partition and isinstance(o, pykaf.RecordMetadata)
    )


# ---------------------------------------------------------------------------- failing for good


@pytest.mark.parametrize(
    ("error", "idempotence"),
    [
        (errors.TopicAuthorizationError, True),
        (errors.RecordBatchTooLargeError, True),
        (errors.InvalidRequiredAcksError, False),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else f"idempotence={v}",
)
async def test_a_non_retriable_error_fails_only_its_batch(
    mock_cluster: MockCluster, error: type[errors.KafkaError], idempotence: bool
) -> None:
    topic = _topic()
    mock_cluster.create_topic(topic, 1, 1)
    ledger = Ledger(1)
    async with pykaf.open_producer(
        mock_cluster.bootstrap, **{**FAST, "idempotence": idempotence}
    ) as producer:
        ledger.send(producer, topic)
        await producer.flush()
        mock_cluster.start_request_tracking()
        mock_cluster.push_request_errors(PRODUCE, error.code)
        for _ in range(1000):  # about 19 batches; the first request fails
            ledger.send(producer, topic)
        await producer.flush()
        mock_cluster.push_request_errors(PRODUCE, error.code)
        with pytest.raises(error):
            await producer.send(topic, b"alone", partition=0)
        after = await producer.send(topic, b"after", partition=0)
        st = producer.statistics()
        requests = sum(_produce_requests(mock_cluster).values())
    ledger.assert_each_called_once()
    failed = ledger.failures()
    assert failed and all(isinstance(e, error) for e in failed.values())
    # Exactly the records of the first batch sent after the error: a run after record 0.
    assert sorted(failed) == list(range(1, 1 + len(failed))) and len(failed) < 100
    assert st.retries == 0 and requests == st.batches_sent - 1  # nothing was sent twice
    assert st.records_failed == len(failed) + 1
    assert st.epoch_bumps == (2 if idempotence else 0)  # each failure left a sequence gap
    kept = [v for i, v in enumerate(ledger.expected[0]) if i not in failed]
    assert after.offset == len(kept)
    values, highs = await trio.to_thread.run_sync(
        _read_back, mock_cluster.bootstrap, topic, [len(kept) + 1]
    )
    assert values == [[*kept, b"after"]] and highs == [len(kept) + 1]


@pytest.mark.parametrize(
    "error", [errors.NotLeaderOrFollowerError, errors.TimeoutError], ids=lambda e: e.__name__
)
async def test_without_retries_a_retriable_error_fails_at_once(
    mock_cluster: MockCluster, error: type[errors.KafkaError]
) -> None:
    topic = _topic()
    mock_cluster.create_topic(topic, 1, 1)
    async with pykaf.open_producer(
        mock_cluster.bootstrap, **{**FAST, "idempotence": False, "retries": 0}
    ) as producer:
        first = await producer.send(topic, b"first", partition=0)
        mock_cluster.start_request_tracking()
        mock_cluster.push_request_errors(PRODUCE, error.code)
        with pytest.raises(error):
            await producer.send(topic, b"lost", partition=0)
        assert sum(_produce_requests(mock_cluster).values()) == 1  # not sent again
        second = await producer.send(topic, b"second", partition=0)
        st = producer.statistics()
    assert st.retries == 0 and st.records_failed == 1 and st.errors == 1
    assert second.offset == first.offset + 1
    values, highs = await trio.to_thread.run_sync(_read_back, mock_cluster.bootstrap, topic, [2])
    assert values == [[b"first", b"second"]] and highs == [2]


async def test_records_time_out_when_every_broker_is_down(mock_cluster: MockCluster) -> None:
    topic = _topic()
    mock_cluster.create_topic(topic, 3, 1)
    ledger = Ledger(3)
    with trio.fail_after(60):  # nothing hangs, closing included
        async with pykaf.open_producer(
            mock_cluster.bootstrap, **{**FAST, "delivery_timeout": 1.5, "request_timeout": 1}
        ) as producer:
            for p in range(3):
                await producer.send(topic, b"warm-up", partition=p)
            mock_cluster.broker_down(ALL_BROKERS)
            await ledger.send_many(producer, topic, 300, chunk=100)
            for _ in range(50):
                producer.send_nowait(topic, b"nobody waits")
            delivery = await producer.send_batch(topic, [b"bulk"] * 100)
            with pytest.raises(errors.KafkaTimeoutError):
                await producer.send(topic, b"awaited", partition=0)
            with pytest.raises(errors.DeliveryError) as info:
                await producer.flush()
            st = producer.statistics()
    ledger.assert_each_called_once()
    failed = ledger.failures()
    assert len(failed) == 300
    assert all(isinstance(e, errors.KafkaTimeoutError) for e in failed.values())
    # flush() reports the records nobody else heard of: the 50, and the bulk not awaited yet.
    assert info.value.records == 150
    assert all(isinstance(f[3], errors.KafkaTimeoutError) for f in info.value.failures)
    with pytest.raises(errors.DeliveryError):
        await delivery.wait()
    assert (delivery.failed, delivery.acked) == (100, 0)
    assert (st.records_acked, st.records_failed, st.buffered_records) == (3, 451, 0)
