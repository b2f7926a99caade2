"""Transactional produce against plain idempotent produce, pykaf and confluent-kafka.

Cases (one pytest-benchmark group per broker and mode, every client on the
same broker in the same run):

* ``txn-200k-<broker>``: 200,000 records of 100 bytes in transactions of
  1,000 records each (200 commits a round), acks=all.
* ``idem-200k-<broker>``: the same records with the same producers'
  settings minus the transactional id: idempotent, no transactions. The pair
  shows what transactions cost each client (its txn time / its idem time,
  printed by ``bench/ratios.py`` as separate groups).

Brokers: Tansu (one node; checks sequences, fences epochs, writes markers)
and pykaf's fake cluster (three brokers, in a child process:
``python -m pykaf.testing``). The librdkafka mock cluster is left out: it
implements transactions only loosely (../shared/brokers.md).

Clients (each opened and warmed up outside the timing: one record to every
partition, in a transaction for the transactional ones, so the producer id is
held and the coordinator known):

* ``confluent-kafka``: ``begin_transaction()``, ``produce()`` per record
  (``poll(0)`` on ``BufferError``), ``commit_transaction()`` (which flushes).
  Idempotent mode: the same loop without begin/commit, one ``flush()``.
* ``pykaf[send_nowait]``: ``begin_transaction()``, ``send_nowait()`` per
  record (waiting for space on ``BufferFullError``), ``await
  commit_transaction()``. Idempotent: the loop, then ``flush()``.
* ``pykaf[send_batch]``: one ``send_batch()`` of 1,000 values per transaction.

After every round, the topic is read back with a read_committed pykaf
consumer: every record sent must be there (control markers excluded), or the
benchmark fails.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest
import trio

from bench._support import PYKAF, bulk_values, confluent_produce_all, note_rate, tag
from bench.test_producer import (
    LINGER_S,
    PARTITIONS,
    ROUND_TIMEOUT_S,
    ConfluentRound,
    Round,
    _pykaf_stats,
    _PykafRound,
    _warm_value,
)

CONFLUENT = "confluent-kafka"
RECORDS = 200_000
PER_TXN = 1_000
VALUE_SIZE = 100
ROUNDS = 3
BROKERS = ("tansu", "fake")
MODES = ("txn", "idem")
CLIENTS: list[tuple[str, str | None]] = [
    (CONFLUENT, None),
    (PYKAF, "send_nowait"),
    (PYKAF, "send_batch"),
]

_ids = itertools.count()


def _chunks(values: list[bytes]) -> list[list[bytes]]:
    return [values[i : i + PER_TXN] for i in range(0, len(values), PER_TXN)]


class ConfluentTxnRound(ConfluentRound):
    """confluent-kafka with a transactional id: a transaction per 1,000 records."""

    def start(self) -> None:
        ck = importlib.import_module("confluent_kafka")
        self.producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": int(LINGER_S * 1000),
                "acks": "all",
                "transactional.id": f"bench-ck-{next(_ids)}",
            }
        )
        self.producer.init_transactions(ROUND_TIMEOUT_S)
        self.producer.begin_transaction()
        for partition in range(PARTITIONS):
            self.producer.produce(self.topic, _warm_value(self.values), partition=partition)
        self.producer.commit_transaction(ROUND_TIMEOUT_S)

    def run(self) -> None:
        producer = self.producer
        for chunk in _chunks(self.values):
            producer.begin_transaction()
            confluent_produce_all(producer, self.topic, chunk)
            producer.commit_transaction(ROUND_TIMEOUT_S)  # raises if anything failed
        self.left = 0


class _PykafTxnRound(_PykafRound):
    """pykaf with a transactional id (``transactional``) or idempotent only."""

    transactional = True

    async def _main_async(self) -> None:
        pykaf = importlib.import_module("pykaf")
        options: dict[str, Any] = {"linger": LINGER_S, "acks": "all"}
        if self.transactional:
            options["transactional_id"] = f"bench-pykaf-{next(_ids)}"
        async with pykaf.open_producer(self.bootstrap, **options) as producer:
            if self.transactional:
                producer.begin_transaction()
            for partition in range(PARTITIONS):
                producer.send_nowait(self.topic, _warm_value(self.values), partition=partition)
            if self.transactional:
                await producer.commit_transaction()
            await producer.flush()
            self.gate.ready.set()
            await trio.to_thread.run_sync(self.gate.go.wait)
            with trio.fail_after(ROUND_TIMEOUT_S):
                self.gate.result = await self.produce(producer)
            self.gate.done.set()
            self.notes.update(_pykaf_stats(producer.statistics()))

    async def produce(self, producer: Any) -> int:
        chunks = _chunks(self.values)
        for chunk in chunks:
            if self.transactional:
                producer.begin_transaction()
            await self.send_chunk(producer, chunk)
            if self.transactional:
                await producer.commit_transaction()  # flushes; raises if a record failed
        await producer.flush()
        return len(self.values)

    async def send_chunk(self, producer: Any, chunk: list[bytes]) -> None:
        raise NotImplementedError


class PykafSendNowaitTxnRound(_PykafTxnRound):
    """``send_nowait()`` per record, a transaction per 1,000."""

    async def send_chunk(self, producer: Any, chunk: list[bytes]) -> None:
        buffer_full = importlib.import_module("pykaf.errors").BufferFullError
        topic, send = self.topic, producer.send_nowait
        for value in chunk:
            while True:
                try:
                    send(topic, value)
                    break
                except buffer_full:
                    await producer.wait_for_space()


class PykafSendBatchTxnRound(_PykafTxnRound):
    """One ``send_batch()`` of 1,000 values per transaction."""

    async def send_chunk(self, producer: Any, chunk: list[bytes]) -> None:
        await producer.send_batch(self.topic, chunk)


def _round_factory(client: str, variant: str | None, mode: str) -> Callable[..., Round]:
    transactional = mode == "txn"
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
        if transactional:
            return ConfluentTxnRound
        return ConfluentRound
    base = PykafSendNowaitTxnRound if variant == "send_nowait" else PykafSendBatchTxnRound
    return type(base.__name__, (base,), {"transactional": transactional})


async def _committed_records(bootstrap: str, topic: str) -> int:
    """Records a read_committed consumer gets from ``topic`` (markers excluded).

    Raises:
        AssertionError: a partition's last stable offset stays below its high
            watermark (a transaction left open), naming the partition.
    """
    pykaf = importlib.import_module("pykaf")
    total = 0
    async with pykaf.open_consumer(bootstrap, isolation_level="read_committed") as consumer:
        for partition in range(PARTITIONS):
            pc = await consumer.consume_partition(topic, partition, pykaf.OLDEST)
            with trio.move_on_after(ROUND_TIMEOUT_S / 4):
                while pc.high_water_mark < 0 or pc.position < pc.high_water_mark:
                    total += len(await pc.next_batch())
            assert pc.position >= pc.high_water_mark >= 0, (
                f"{topic}/{partition}: read_committed stuck at {pc.position}, high watermark "
                f"{pc.high_water_mark}, last stable offset {pc.last_stable_offset}"
            )
    return total


@pytest.mark.parametrize(
    ("broker_name", "mode", "client", "variant"),
    [
        pytest.param(b, m, c, v, id=f"{b}-{m}-{c}-{v}" if v else f"{b}-{m}-{c}")
        for b in BROKERS
        for m in MODES
        for c, v in CLIENTS
    ],
)
def test_transactional_produce(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    mode: str,
    client: str,
    variant: str | None,
) -> None:
    make_round = _round_factory(client, variant, mode)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    tag(
        benchmark,
        group=f"{mode}-200k-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        records_per_transaction=PER_TXN if mode == "txn" else None,
        acks="all",
    )
    current: list[Round] = []
    counted: list[int] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"txbench-{broker_name}-{mode}-{client}-{variant or 'default'}-{next(_ids)}"
        broker.create_topic(topic, PARTITIONS)
        one = make_round(broker.bootstrap, topic, values)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: Round) -> None:
        current.remove(one)
        assert one.stop() == RECORDS
        counted.append(trio.run(_committed_records, broker.bootstrap, one.topic))
        broker.delete_topic(one.topic)
        benchmark.extra_info.update(one.notes)

    benchmark.pedantic(lambda one: one.run(), setup=setup, teardown=teardown, rounds=ROUNDS)
    while current:
        teardown(current[0])
    assert counted and all(n == RECORDS + PARTITIONS for n in counted), (
        f"{client}: read back {counted} records per round, expected {RECORDS + PARTITIONS}"
    )
    note_rate(benchmark, RECORDS)
