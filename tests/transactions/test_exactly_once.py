"""The exactly-once example of docs/ (docs/examples/exactly_once.py), under faults.

It runs on Apache Kafka and pykaf's fake cluster, which both return
aborted-transaction lists, so a read_committed consumer proves that aborted
output stays invisible (Tansu and the mock list none). The output topic,
read with read_committed, must hold each input record's result exactly once.
Faults: on the fake, injected errors, leader moves and brokers bounced at
random (only the fake can inject them); on Kafka's three nodes, a node
killed mid-run and started again.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
import trio
from doc_examples import load_example
from trio.testing import MockClock
from txn_target import TxnTarget

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._group.offsets import OffsetManager
from pykaf.testing import FakeCluster, KafkaCluster, open_fake_cluster

pytestmark = pytest.mark.broker

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


@dataclass
class Run:
    """One run of the example: its broker and the names it uses."""

    target: TxnTarget
    source: str
    sink: str
    group: str

    @property
    def bootstrap(self) -> str:
        return self.target.bootstrap


async def _new_run(target: TxnTarget) -> Run:
    """Input and output topics, and the input, written in batches of 20 (many small
    transactions for the transformer)."""
    run = Run(
        target,
        await target.topic("input", PARTITIONS),
        await target.topic("output", PARTITIONS),
        target.unique("transformers"),
    )
    async with pykaf.open_producer(target.bootstrap, batch_records=20) as producer:
        for i in range(RECORDS):
            producer.send_nowait(run.source, b"record %d" % i, key=b"k%d" % i)
            if i % 200 == 199:
                await producer.flush()
        await producer.flush()
    return run


def _example() -> ModuleType:
    return load_example("exactly_once.py")


def _expected() -> Counter[tuple[bytes | None, bytes]]:
    return Counter((b"k%d" % i, b"RECORD %d" % i) for i in range(RECORDS))


async def _committed(run: Run, client: pykaf.Client) -> list[int]:
    """The group's committed offset of each input partition (-1: none)."""
    tps = [(run.source, p) for p in range(PARTITIONS)]
    offsets = await OffsetManager(client, run.group, None).fetch(tps)
    return [offsets[tp] for tp in tps]


async def _wait_all_committed(run: Run, timeout: float) -> None:
    """Until every input offset is committed (a hang guard, not a timing check)."""
    async with pykaf.open_client(run.bootstrap) as client:
        ends = [await client.get_offset(run.source, p, pykaf.NEWEST) for p in range(PARTITIONS)]
        with trio.fail_after(timeout):
            while True:
                try:
                    done = await _committed(run, client)
                    if all(c >= e for c, e in zip(done, ends, strict=True)):
                        return
                except errors.PykafError:  # a coordinator moving (a node stopped)
                    pass
                await trio.sleep(0.1)


async def _run_until_done(
    run: Run,
    *instances: dict[str, Any],
    timeout: float = 90.0,
    handlers: list[Any] | None = None,
    **options: Any,
) -> list[Any]:
    """Run transformer instances until every input offset is committed; their handlers.

    ``handlers`` gets each instance's handler as soon as it exists.
    """
    example = _example()
    handlers = [] if handlers is None else handlers
    async with trio.open_nursery() as nursery:
        for kw in instances:
            nursery.start_soon(
                lambda kw=kw: example.run_transformer(
                    run.bootstrap,
                    group_id=run.group,
                    source=run.source,
                    sink=run.sink,
                    transform=example.upper,
                    handler_ready=handlers.append,
                    consumer_options={
                        "max_partition_fetch_bytes": 1,  # one input batch per transaction
                        "session_timeout": 6.0,
                        "heartbeat_interval": 0.5,
                    },
                    **{"request_timeout": 5.0, **options},
                    **kw,
                )
            )
        await _wait_all_committed(run, timeout)
        nursery.cancel_scope.cancel()
    return handlers


async def _check_output(run: Run) -> list[Any]:
    fake = run.target.fake
    for p in range(PARTITIONS):  # the fake writes markers before it answers EndTxn
        assert fake is None or (
            fake.last_stable_offset(run.sink, p) == fake.high_watermark(run.sink, p)
        ), "a transaction is still open"
    committed = await run.target.read(run.sink, PARTITIONS)
    got = Counter((r.key, r.value) for r in committed)
    missing = _expected() - got
    extra = got - _expected()
    assert not missing and not extra, (
        f"{sum(missing.values())} results missing, {sum(extra.values())} extra"
    )
    return committed


async def _inject_faults(run: Run, cluster: FakeCluster, rng: random.Random) -> None:
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
            (part := cluster.partition(run.sink, p)) is not None and part.log.aborted
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
            topic = rng.choice([run.source, run.sink])
            cluster.set_partition_leader(topic, rng.randrange(PARTITIONS), rng.choice(brokers))
        else:
            victim = rng.choice(brokers)
            cluster.broker_down(victim)
            await trio.sleep(rng.uniform(0.05, 0.2))
            cluster.broker_up(victim)


async def test_example_without_faults(target: TxnTarget, fake_clock: MockClock | None) -> None:
    run = await _new_run(target)
    handlers = await _run_until_done(run, {"transactional_id": target.unique("eos-plain")})
    await _check_output(run)
    assert handlers[0].committed >= RECORDS // 20 // PARTITIONS
    assert handlers[0].aborted == 0


# Fake only: Kafka cannot be made to answer chosen requests with chosen errors.
@pytest.mark.parametrize("seed", [1, 2])
async def test_exactly_once_under_injected_faults(seed: int, autojump_clock: MockClock) -> None:
    rng = random.Random(seed)
    async with open_fake_cluster(3) as cluster:
        run = await _new_run(TxnTarget("fake", cluster.bootstrap, fake=cluster))
        for node in cluster.nodes:  # slow every request so the run outlasts the faults
            cluster.set_rtt(node, 10)
        # The first transaction's offsets are refused 300 ms late, once its
        # records are written: an abort that leaves output in the log for sure.
        cluster.push_request_errors(
            P.TxnOffsetCommitRequest.API_KEY, errors.IllegalGenerationError.code, rtt_ms=300
        )
        async with trio.open_nursery() as faults:
            faults.start_soon(_inject_faults, run, cluster, rng)
            handlers = await _run_until_done(run, {"transactional_id": f"eos-{seed}"})
            faults.cancel_scope.cancel()
        for node in cluster.nodes:
            cluster.broker_up(node)
        committed = await _check_output(run)
        everything = await run.target.read(run.sink, PARTITIONS, "read_uncommitted")
        # aborted transactions did write (read_uncommitted sees their results);
        # read_committed did not hand them out
        assert sum(h.aborted for h in handlers) >= 1
        data = [r for r in everything if r.value is not None]
        assert len(data) > len(committed)
        assert not cluster.handler_errors


@pytest.mark.parametrize("kill", ["transaction-coordinator", "sink-leader"])
async def test_exactly_once_with_a_kafka_node_killed_mid_run(
    kafka_cluster3: KafkaCluster, kill: str
) -> None:
    """Kafka, three nodes: one is killed (SIGKILL) while transactions run, then restarted.

    The node is the transaction coordinator of the instance's transactional
    id, or the leader of an output partition; the coordinator or leader moves,
    requests to the dead node time out, transactions abort or carry on.
    """
    kafka = kafka_cluster3
    target = TxnTarget("kafka3", kafka.bootstrap, kafka=kafka)
    run = await _new_run(target)
    tid = target.unique("eos-kill")
    handlers: list[Any] = []
    async with pykaf.open_client(kafka.bootstrap) as client:
        if kill == "transaction-coordinator":
            victim = (await client.transaction_coordinator(tid)).node_id
        else:
            victim = (await client.leader(run.sink, 0)).node_id

        async def kill_and_restart() -> None:
            with trio.fail_after(60):  # the first transactions are committed
                while sum(h.committed for h in handlers) < 3:
                    await trio.sleep(0.05)
            await trio.to_thread.run_sync(lambda: kafka.broker_down(victim, kill=True))
            try:
                with trio.fail_after(120):  # the run goes on without the node
                    done = sum(h.committed for h in handlers)
                    while sum(h.committed for h in handlers) < done + 5:
                        await trio.sleep(0.05)
            finally:
                await trio.to_thread.run_sync(kafka.broker_up, victim)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_and_restart)
                await _run_until_done(
                    run, {"transactional_id": tid}, timeout=240.0, handlers=handlers
                )
        finally:
            if not kafka.running(victim):
                await trio.to_thread.run_sync(kafka.broker_up, victim)
    await _check_output(run)
    assert sum(h.committed for h in handlers) >= RECORDS // 20 // PARTITIONS


async def test_a_replacement_instance_fences_the_zombie(
    target: TxnTarget, fake_clock: MockClock | None
) -> None:
    """Two instances with one transactional id: the newer fences the older, output exact.

    The first instance (the zombie) commits one transaction, then its next one
    waits until the replacement exists (its producer initialised, so its epoch
    is the newer). Without that gate the zombie could finish its partitions
    before the replacement starts and never touch its producer again, so never
    learn it was fenced.
    """
    run = await _new_run(target)
    tid = target.unique("eos-shared")
    example = _example()
    fenced: list[BaseException] = []
    replacement_ready = trio.Event()

    def gate_after_first_commit(handler: Any) -> None:
        transact = handler._transact

        async def gated(session: Any, claim: Any, batch: list[Any]) -> bool:
            if handler.committed >= 1:
                await replacement_ready.wait()
            return bool(await transact(session, claim, batch))

        handler._transact = gated

    async def zombie() -> None:
        try:
            await example.run_transformer(
                run.bootstrap,
                group_id=run.group,
                source=run.source,
                sink=run.sink,
                transform=example.upper,
                transactional_id=tid,
                handler_ready=gate_after_first_commit,
                consumer_options={"max_partition_fetch_bytes": 1},
            )
        except BaseException as exc:
            fenced.append(exc)

    async def open_gate(handlers: list[Any]) -> None:
        while not handlers:  # the replacement's producer is initialised
            await trio.sleep(0.01)
        replacement_ready.set()

    async with trio.open_nursery() as nursery, pykaf.open_client(run.bootstrap) as client:
        nursery.start_soon(zombie)
        with trio.fail_after(60):  # let the first instance commit some work
            while not any(c > 0 for c in await _committed(run, client)):
                # The first instance ending before any commit is the failure to
                # report, not the wait running out.
                assert not fenced, f"the first instance ended before committing: {fenced!r}"
                await trio.sleep(0.05)
        handlers: list[Any] = []
        nursery.start_soon(open_gate, handlers)
        await _run_until_done(run, {"transactional_id": tid}, handlers=handlers)
        with trio.fail_after(30):
            while not fenced:
                await trio.sleep(0.05)
    await _check_output(run)
    flat = [fenced[0]]
    while getattr(flat[-1], "exceptions", None):  # an exception group: look inside
        flat.append(flat[-1].exceptions[0])
    assert any(isinstance(e, errors.ProducerFencedError) for e in flat), fenced
