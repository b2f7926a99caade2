"""Per-record producing on asyncio: ``pykaf.aio``'s ``send_nowait`` against trio's and the peers.

Each client runs in a process of its own, one per round: a fresh producer,
a fresh 4-partition topic, 100-byte values, acks=all, linger 5 ms (the
settings of ``bench/test_producer.py``). The child opens the producer and
warms it up (one record to each partition, waited for), says it is ready,
and the timed part is from the parent's "go" to the child's "done": every
record sent and acknowledged. Then the child closes the producer and exits,
and the parent checks that the topic's high watermarks add up to every
record sent plus the warm-up.

Groups: ``aio-send_nowait-tansu`` and ``aio-send_nowait-kafka`` (Apache
Kafka, one node). Clients:

* ``pykaf[aio_send_nowait]``: ``pykaf.aio.open_producer`` inside
  ``asyncio.run()``, ``send_nowait()`` per record in a plain loop (on
  ``BufferFullError``, ``await producer.wait_for_space()``), then ``await
  flush()``: the trio round of ``test_producer.py`` line for line, on asyncio.
* ``pykaf[aio_send_nowait_uvloop]``: the same on uvloop's loop.
* ``pykaf[send_nowait]``: the same on trio (``pykaf.open_producer`` in
  ``trio.run``), the reference for the asyncio paths.
* ``aiokafka[send]``: ``await send()`` per record, the futures kept, then
  ``flush()`` and ``gather`` (``test_producer.py``'s aiokafka round;
  without idempotence on Tansu, which refuses its InitProducerId v0).
* ``confluent-kafka.aio[produce]``: ``confluent_kafka.aio.AIOProducer``,
  ``await produce()`` per record (a future each, kept), then ``flush()`` and
  ``gather``.

The slow peers send fewer records (ratios and records/s are per record).
Run one group with ``pytest bench/test_aio.py --benchmark-only -k tansu``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench._support import AIOKAFKA, PYKAF, bulk_values, note_rate, tag
from bench.test_producer import (
    LINGER_S,
    PARTITIONS,
    ROUND_TIMEOUT_S,
    VALUE_SIZE,
    AiokafkaRound,
    PykafSendNowaitRound,
    Round,
    _pykaf_options,
    _pykaf_stats,
    _ThreadedRound,
    _warm_value,
)

CONFLUENT_AIO = "confluent-kafka.aio"
RECORDS = 1_000_000
SHORT_RECORDS: dict[str, int] = {AIOKAFKA: 200_000, CONFLUENT_AIO: 200_000}
ROUNDS = 5
BROKERS = ("tansu", "kafka")
ROOT = Path(__file__).resolve().parent.parent

# (client, variant) in the order each group runs them.
CLIENTS: list[tuple[str, str]] = [
    (CONFLUENT_AIO, "produce"),
    (AIOKAFKA, "send"),
    (PYKAF, "send_nowait"),
    (PYKAF, "aio_send_nowait"),
    (PYKAF, "aio_send_nowait_uvloop"),
]

_topic_ids = itertools.count()


class PykafAioSendNowaitRound(PykafSendNowaitRound):
    """``pykaf.aio``: the trio round's loop (``produce``, inherited) on asyncio."""

    uvloop = False

    def loop_main(self) -> None:
        if self.uvloop:
            uvloop = importlib.import_module("uvloop")
            loop = uvloop.new_event_loop()
            try:
                loop.run_until_complete(self._main_aio())
            finally:
                loop.close()
        else:
            asyncio.run(self._main_aio())

    async def _main_aio(self) -> None:
        aio = importlib.import_module("pykaf.aio")
        async with aio.open_producer(self.bootstrap, **_pykaf_options()) as producer:
            for partition in range(self.partitions):
                await producer.send(self.topic, _warm_value(self.values), partition=partition)
            self.gate.ready.set()
            await asyncio.to_thread(self.gate.go.wait)
            self.gate.result = await asyncio.wait_for(self.produce(producer), ROUND_TIMEOUT_S)
            self.gate.done.set()
            self.notes.update(_pykaf_stats(producer.statistics()))


class PykafAioUvloopRound(PykafAioSendNowaitRound):
    """The same on uvloop's loop."""

    uvloop = True


class ConfluentAioRound(_ThreadedRound):
    """``confluent_kafka.aio.AIOProducer``: ``await produce()`` per record, flush, gather."""

    def loop_main(self) -> None:
        asyncio.run(self._main_async())

    async def _main_async(self) -> None:
        aio = importlib.import_module("confluent_kafka.aio")
        producer = aio.AIOProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": int(LINGER_S * 1000),
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        try:
            for partition in range(self.partitions):
                await (
                    await producer.produce(
                        self.topic, _warm_value(self.values), partition=partition
                    )
                )
            self.gate.ready.set()
            await asyncio.to_thread(self.gate.go.wait)
            topic, produce = self.topic, producer.produce
            futures = [await produce(topic, value) for value in self.values]
            await producer.flush()
            results = await asyncio.gather(*futures)  # raises the first failure
            self.gate.result = len(results)
            self.gate.done.set()
        finally:
            await producer.close()


def make_round(client: str, variant: str, broker: str, bootstrap: str, topic: str) -> Round:
    """One round of the client, in this process, on ``RECORDS`` (or fewer) fixed values."""
    values = bulk_values(RECORDS, VALUE_SIZE).values[: SHORT_RECORDS.get(client, RECORDS)]
    if client == CONFLUENT_AIO:
        return ConfluentAioRound(bootstrap, topic, values)
    if client == AIOKAFKA:
        return AiokafkaRound(bootstrap, topic, values, idempotence=broker != "tansu")
    rounds: dict[str, type[Round]] = {
        "send_nowait": PykafSendNowaitRound,
        "aio_send_nowait": PykafAioSendNowaitRound,
        "aio_send_nowait_uvloop": PykafAioUvloopRound,
    }
    return rounds[variant](bootstrap, topic, values)


def child_main(argv: list[str]) -> None:
    """The child's side: open and warm up, "ready"; on "go", run, "done"; close, report."""
    client, variant, broker, bootstrap, topic = argv
    one = make_round(client, variant, broker, bootstrap, topic)
    one.start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("the parent did not say go")
    one.run()
    print("done", flush=True)
    acknowledged = one.stop()
    print(json.dumps({"acknowledged": acknowledged, "notes": one.notes}), flush=True)


class ProcessRound:
    """A round run by a child process of its own (this file, run as a program)."""

    def __init__(self, client: str, variant: str, broker: str, bootstrap: str, topic: str):
        self.topic = topic
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.test_aio", client, variant, broker, bootstrap, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.notes: dict[str, Any] = {}

    def _expect(self, word: str) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(word):
            self.process.kill()
            raise AssertionError(f"the round's process said {line!r}, not {word!r}")
        return line

    def start(self) -> None:
        self._expect("ready")

    def run(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        self._expect("done")

    def stop(self) -> int:
        report = json.loads(self._expect("{"))
        if self.process.wait(ROUND_TIMEOUT_S) != 0:
            raise AssertionError(f"the round's process exited {self.process.returncode}")
        self.notes = report["notes"]
        return int(report["acknowledged"])


def _skip_missing(client: str, variant: str) -> None:
    if client == CONFLUENT_AIO:
        pytest.importorskip("confluent_kafka.aio")
    elif client == AIOKAFKA:
        pytest.importorskip("aiokafka")
    elif variant.endswith("uvloop"):
        pytest.importorskip("uvloop")


@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [pytest.param(b, c, v, id=f"{b}-{c}-{v}") for b in BROKERS for c, v in CLIENTS],
)
def test_aio_send_nowait(
    benchmark: Any, request: pytest.FixtureRequest, broker_name: str, client: str, variant: str
) -> None:
    _skip_missing(client, variant)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    records = SHORT_RECORDS.get(client, RECORDS)
    idempotence = not (client == AIOKAFKA and broker_name == "tansu")
    tag(
        benchmark,
        group=f"aio-send_nowait-{broker_name}",
        client=client,
        records=records,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_S * 1000,
        idempotence=idempotence,
    )
    current: list[ProcessRound] = []
    acknowledged: list[int] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        topic = f"bench-aio-{broker_name}-{client}-{variant}-{next(_topic_ids)}"
        broker.create_topic(topic, PARTITIONS)
        one = ProcessRound(client, variant, broker_name, broker.bootstrap, topic)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: ProcessRound) -> None:
        current.remove(one)
        acknowledged.append(one.stop())
        marks = broker.high_watermarks(one.topic)
        expected = records + PARTITIONS
        assert sum(marks.values()) == expected, f"{one.topic}: {marks}, {expected} were sent"
        broker.delete_topic(one.topic)
        benchmark.extra_info.update(one.notes)

    benchmark.pedantic(
        ProcessRound.run, setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])
    assert acknowledged and all(n == records for n in acknowledged), acknowledged
    note_rate(benchmark, records)


if __name__ == "__main__":  # a round's child process: python -m bench.test_aio ...
    child_main(sys.argv[1:])
