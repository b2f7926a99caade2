"""The exactly-once example of docs/ (docs/examples/exactly_once.py), under faults.

It runs on pykaf's fake cluster: neither real broker here returns
aborted-transaction lists, so only there can a read_committed consumer prove
that aborted output stays invisible. The output topic, read with
read_committed, must hold each input record's result exactly once.
"""

from __future__ import annotations

import random
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
import trio
from doc_examples import load_example

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import FakeCluster, open_fake_cluster

SOURCE, SINK, GROUP = "input", "output", "transformers"
PARTITIONS = 3
RECORDS = 1500

# Errors the clients must ride through (retriable, or ending in a retry).
RETRIABLE_FAULTS = [
    (P.ProduceRequest.API_KEY, errors.NotLeaderOrFollowerError.code),
    (P.ProduceRequest.API_KEY, errors.TimeoutError.code),
    (P.EndTxnRequest.API_KEY, errors.ConcurrentTransactionsError.code),
    (P.EndTxnRequest.API_KEY, errors.CoordinatorNotAvailableError.code),
    (P.AddPartitionsToTxnRequest.API_KEY, errors.ConcurrentTransactionsError.code),
    (P.AddOffsetsToTxnRequest.API_KEY, errors.CoordinatorLoadInProgressError.code),
    (P.TxnOffsetCommitRequest.API_KEY, errors.CoordinatorLoadInProgressError.code),
    (P.FetchRequest.API_KEY, errors.NotLeaderOrFollowerError.code),
    (P.HeartbeatRequest.API_KEY, errors.CoordinatorNotAvailableError.code),
]
# Errors that fail a transaction for good: it must be aborted and redone. The
# first fails a record (nothing written); the second refuses the offsets after
# the records were written (the abort leaves them in the log, invisible).
ABORTING_FAULTS = [
    (P.ProduceRequest.API_KEY, errors.InvalidRecordError.code),
    (P.TxnOffsetCommitRequest.API_KEY, errors.IllegalGenerationError.code),
]


def _example() -> ModuleType:
    return load_example("exactly_once.py")


def _expected() -> Counter[tuple[bytes | None, bytes]]:
    return Counter((b"k%d" % i, b"RECORD %d" % i) for i in range(RECORDS))


async def _fill_input(cluster: FakeCluster) -> None:
    """The input, written in batches of 20 so the transformer makes many small transactions."""
    cluster.create_topic(SOURCE, PARTITIONS)
    cluster.create_topic(SINK, PARTITIONS)
    async with pykaf.open_producer(cluster.bootstrap, batch_records=20) as producer:
        for i in range(RECORDS):
            producer.send_nowait(SOURCE, b"record %d" % i, key=b"k%d" % i)
            if i % 200 == 199:
                await producer.flush()
        await producer.flush()


def _all_committed(cluster: FakeCluster) -> bool:
    for p in range(PARTITIONS):
        done = cluster.groups.committed(GROUP, (SOURCE, p))
        if done is None or done.offset < cluster.high_watermark(SOURCE, p):
            return False
    return True


async def _read_output(cluster: FakeCluster, isolation_level: str) -> list[Any]:
    """Every record of the output topic a consumer with ``isolation_level`` is given."""
    out = []
    async with pykaf.open_consumer(cluster.bootstrap, isolation_level=isolation_level) as c:
        for p in range(PARTITIONS):
            end = cluster.high_watermark(SINK, p)
            assert cluster.last_stable_offset(SINK, p) == end, "a transaction is still open"
            pc = await c.consume_partition(SINK, p, pykaf.OLDEST)
            with trio.fail_after(20):
                while pc.position < end:
                    out.extend(await pc.next_batch())
    return out


async def _run_until_done(cluster: FakeCluster, *instances: dict[str, Any]) -> list[Any]:
    """Run transformer instances until every input offset is committed; their handlers."""
    example = _example()
    handlers: list[Any] = []
    async with trio.open_nursery() as nursery:
        for kw in instances:
            nursery.start_soon(
                lambda kw=kw: example.run_transformer(
                    cluster.bootstrap,
                    group_id=GROUP,
                    source=SOURCE,
                    sink=SINK,
                    transform=example.upper,
                    handler_ready=handlers.append,
                    consumer_options={
                        "max_partition_fetch_bytes": 1,  # one input batch per transaction
                        "session_timeout": 6.0,
                        "heartbeat_interval": 0.5,
                    },
                    request_timeout=5.0,
                    **kw,
                )
            )
        with trio.fail_after(90):
            while not _all_committed(cluster):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    return handlers


async def _check_output(cluster: FakeCluster) -> list[Any]:
    committed = await _read_output(cluster, "read_committed")
    got = Counter((r.key, r.value) for r in committed)
    missing = _expected() - got
    extra = got - _expected()
    assert not missing and not extra, (
        f"{sum(missing.values())} results missing, {sum(extra.values())} extra"
    )
    return committed


async def _inject_faults(cluster: FakeCluster, rng: random.Random) -> None:
    """A fixed budget of faults, one every 50-150 ms, in random order; then none.

    They start once the first transaction was aborted with its output written.

    Injected errors, partition leader moves, and brokers going down then up.
    The budget ends, so the run can always finish; a pending injected error
    is replaced rather than piled up (a pile would fail every retry).
    """
    # The planned abort comes first: its refused TxnOffsetCommit is a pending
    # injected error that a fault of the same API would replace, and under load
    # (the first transaction late) that left runs with no abort that wrote output.
    with trio.fail_after(60):
        while not any(
            (part := cluster.partition(SINK, p)) is not None and part.log.aborted
            for p in range(PARTITIONS)
        ):
            await trio.sleep(0.02)
    brokers = sorted(cluster.nodes)
    faults = ["retriable"] * 40 + ["aborting"] * 6 + ["leader"] * 15 + ["bounce"] * 3
    rng.shuffle(faults)
    for fault in faults:
        await trio.sleep(rng.uniform(0.05, 0.15))
        if fault in ("retriable", "aborting"):
            api, code = rng.choice(RETRIABLE_FAULTS if fault == "retriable" else ABORTING_FAULTS)
            cluster.clear_request_errors(api)
            cluster.push_request_errors(api, code)
        elif fault == "leader":
            topic = rng.choice([SOURCE, SINK])
            cluster.set_partition_leader(topic, rng.randrange(PARTITIONS), rng.choice(brokers))
        else:
            victim = rng.choice(brokers)
            cluster.broker_down(victim)
            await trio.sleep(rng.uniform(0.05, 0.2))
            cluster.broker_up(victim)


@pytest.mark.trio
async def test_example_without_faults() -> None:
    async with open_fake_cluster(3) as cluster:
        await _fill_input(cluster)
        handlers = await _run_until_done(cluster, {"transactional_id": "eos-plain"})
        await _check_output(cluster)
        assert handlers[0].committed >= RECORDS // 20 // PARTITIONS
        assert handlers[0].aborted == 0
        assert not cluster.handler_errors


@pytest.mark.trio
@pytest.mark.parametrize("seed", [1, 2])
async def test_exactly_once_under_injected_faults(seed: int) -> None:
    rng = random.Random(seed)
    async with open_fake_cluster(3) as cluster:
        await _fill_input(cluster)
        for node in cluster.nodes:  # slow every request so the run outlasts the faults
            cluster.set_rtt(node, 10)
        # The first transaction's offsets are refused 300 ms late, once its
        # records are written: an abort that leaves output in the log for sure.
        cluster.push_request_errors(
            P.TxnOffsetCommitRequest.API_KEY, errors.IllegalGenerationError.code, rtt_ms=300
        )
        async with trio.open_nursery() as faults:
            faults.start_soon(_inject_faults, cluster, rng)
            handlers = await _run_until_done(cluster, {"transactional_id": f"eos-{seed}"})
            faults.cancel_scope.cancel()
        for node in cluster.nodes:
            cluster.broker_up(node)
        committed = await _check_output(cluster)
        everything = await _read_output(cluster, "read_uncommitted")
        # aborted transactions did write (read_uncommitted sees their results);
        # read_committed did not hand them out
        assert sum(h.aborted for h in handlers) >= 1
        data = [r for r in everything if r.value is not None]
        assert len(data) > len(committed)
        assert not cluster.handler_errors


@pytest.mark.trio
async def test_a_replacement_instance_fences_the_zombie() -> None:
    """Two instances with one transactional id: the newer fences the older, output exact."""
    async with open_fake_cluster(3) as cluster:
        await _fill_input(cluster)
        example = _example()
        fenced: list[BaseException] = []

        async def zombie() -> None:
            try:
                await example.run_transformer(
                    cluster.bootstrap,
                    group_id=GROUP,
                    source=SOURCE,
                    sink=SINK,
                    transform=example.upper,
                    transactional_id="eos-shared",
                    consumer_options={"max_partition_fetch_bytes": 1},
                )
            except BaseException as exc:
                fenced.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(zombie)
            with trio.fail_after(30):  # let the first instance commit some work
                while not any(
                    (c := cluster.groups.committed(GROUP, (SOURCE, p))) is not None and c.offset > 0
                    for p in range(PARTITIONS)
                ):
                    await trio.sleep(0.02)
            await _run_until_done(cluster, {"transactional_id": "eos-shared"})
            with trio.fail_after(30):
                while not fenced:
                    await trio.sleep(0.05)
        await _check_output(cluster)
        flat = [fenced[0]]
        while getattr(flat[-1], "exceptions", None):  # an exception group: look inside
            flat.append(flat[-1].exceptions[0])
        assert any(isinstance(e, errors.ProducerFencedError) for e in flat), fenced
