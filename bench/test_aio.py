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
  ``trio.run``), the reference for the asyncio paths: tagged as a peer (as
  are the trio rounds of the awaited case), so ``bench/ratios.py`` gives
  asyncio against trio, ``pykaf[aio_send_nowait] | pykaf[send_nowait]``.
* ``aiokafka[send]``: ``await send()`` per record, the futures kept, then
  ``flush()`` and ``gather`` (``test_producer.py``'s aiokafka round;
  without idempotence on Tansu, which refuses its InitProducerId v0).
* ``confluent-kafka.aio[produce]``: ``confluent_kafka.aio.AIOProducer``,
  ``await produce()`` per record (a future each, kept), then ``flush()`` and
  ``gather``.

The slow peers send fewer records (ratios and records/s are per record).

Awaited sends, one record at a time (``bench/test_awaited.py``'s case: 2,000
records a round, each waited for before the next): groups
``aio-awaited-2k-tansu`` and ``aio-awaited-2k-kafka``, with
``aiokafka[send_and_wait]``, ``pykaf[send]`` and ``pykaf[send_plain]`` on trio
(the plain one not idempotent: aiokafka's settings on Tansu), and
``pykaf[aio_send]`` and ``pykaf[aio_send_plain]``, the same loops on asyncio.

Each round notes the child's CPU seconds from "go" to "done" (every thread
of its process: librdkafka's too), as ``cpu_s_per_M``.

Run one group with ``pytest bench/test_aio.py --benchmark-only -k tansu``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from bench._support import AIOKAFKA, PYKAF, CpuMeter, bulk_values, note_rate, tag
from bench.test_awaited import (
    AiokafkaSendAndWaitRound,
    PykafSendPlainRound,
    PykafSendRound,
)
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

# Awaited sends, one record at a time (``bench/test_awaited.py``'s case): the
# idempotent pair and the plain pair (aiokafka runs plain on Tansu).
AWAITED_RECORDS = 2_000
AWAITED_CLIENTS: list[tuple[str, str]] = [
    (AIOKAFKA, "send_and_wait"),
    (PYKAF, "send"),
    (PYKAF, "send_plain"),
    (PYKAF, "aio_send"),
    (PYKAF, "aio_send_plain"),
]

#: pykaf's rounds on trio: the reference of the asyncio rounds. ``bench/ratios.py``
#: takes them as peers, so each asyncio round gets a ratio against trio's
#: (``pykaf[aio_send_nowait] | pykaf[send_nowait]``); trio against the other
#: clients is measured in the trio benchmarks' own groups.
TRIO_VARIANTS = frozenset({"send_nowait", "send", "send_plain", "iter"})

_topic_ids = itertools.count()


def reference_role(client: str, variant: str) -> dict[str, str]:
    """``tag``'s role for a round: "peer" for pykaf's trio rounds, else its own."""
    return {"role": "peer"} if client == PYKAF and variant in TRIO_VARIANTS else {}


def run_loop(main: Callable[[], Coroutine[Any, Any, None]], *, uvloop: bool) -> None:
    """Run ``main()`` in a new loop: asyncio's, or uvloop's."""
    if not uvloop:
        asyncio.run(main())
        return
    loop = importlib.import_module("uvloop").new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


class PykafAioSendNowaitRound(PykafSendNowaitRound):
    """``pykaf.aio``: the trio round's loop (``produce``, inherited) on asyncio."""

    uvloop = False

    def loop_main(self) -> None:
        run_loop(self._main_aio, uvloop=self.uvloop)

    async def _main_aio(self) -> None:
        aio = importlib.import_module("pykaf.aio")
        options = {**_pykaf_options(), "idempotence": self.idempotence}
        async with aio.open_producer(self.bootstrap, **options) as producer:
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


class PykafAioSendRound(PykafAioSendNowaitRound):
    """``pykaf.aio``: ``await producer.send()`` per record (the trio round's loop) on asyncio."""

    produce = PykafSendRound.produce


class PykafAioSendPlainRound(PykafAioSendRound):
    """The same, not idempotent: aiokafka's settings on Tansu."""

    idempotence = False


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


def make_round(
    case: str, client: str, variant: str, broker: str, bootstrap: str, topic: str
) -> Round:
    """One round of the client for ``case`` ("send_nowait" or "awaited"), in this process."""
    records = records_of(case, client)
    values = bulk_values(RECORDS, VALUE_SIZE).values[:records]
    if client == CONFLUENT_AIO:
        return ConfluentAioRound(bootstrap, topic, values)
    if client == AIOKAFKA:
        peer = AiokafkaRound if case == "send_nowait" else AiokafkaSendAndWaitRound
        return peer(bootstrap, topic, values, idempotence=broker != "tansu")
    rounds: dict[str, type[Round]] = {
        "send_nowait": PykafSendNowaitRound,
        "aio_send_nowait": PykafAioSendNowaitRound,
        "aio_send_nowait_uvloop": PykafAioUvloopRound,
        "send": PykafSendRound,
        "send_plain": PykafSendPlainRound,
        "aio_send": PykafAioSendRound,
        "aio_send_plain": PykafAioSendPlainRound,
    }
    return rounds[variant](bootstrap, topic, values)


def records_of(case: str, client: str) -> int:
    """How many records one round of the client sends in ``case``."""
    if case == "awaited":
        return AWAITED_RECORDS
    return SHORT_RECORDS.get(client, RECORDS)


def child_main(argv: list[str], make: Callable[..., Round] = make_round) -> None:
    """The child's side: open and warm up, "ready"; on "go", run, "done"; close, report.

    ``make`` builds the round from ``argv`` (this module's :func:`make_round` by default).
    """
    one = make(*argv)
    one.start()
    cpu_s = run_when_told(one.run)
    acknowledged = one.stop()
    report = {"acknowledged": acknowledged, "cpu_s": cpu_s, "notes": one.notes}
    print(json.dumps(report), flush=True)


def run_when_told(run: Callable[[], object]) -> float:
    """A child's timed part: "ready"; on "go", ``run()``, "done". Returns its CPU seconds.

    The CPU time is the process's (every thread: the loop's, the caller's,
    librdkafka's), from "go" to "done".
    """
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("the parent did not say go")
    start = time.process_time()
    run()
    cpu_s = time.process_time() - start
    print("done", flush=True)
    return cpu_s


class ProcessRound:
    """A round run by a child process of its own (``module``, run as a program)."""

    module = "bench.test_aio"

    def __init__(self, *argv: str) -> None:  # the child's arguments (make_round's here)
        self.topic = argv[-1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.notes: dict[str, Any] = {}
        #: The child's CPU seconds from "go" to "done" (once it reported).
        self.cpu_s = 0.0

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

    def finish(self) -> dict[str, Any]:
        """The child's report, once it exited (0); its notes are kept."""
        report: dict[str, Any] = json.loads(self._expect("{"))
        if self.process.wait(ROUND_TIMEOUT_S) != 0:
            raise AssertionError(f"the round's process exited {self.process.returncode}")
        self.notes = report["notes"]
        self.cpu_s = float(report["cpu_s"])
        return report

    def stop(self) -> int:
        return int(self.finish()["acknowledged"])


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
    measure(benchmark, request, "send_nowait", broker_name, client, variant)


@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [pytest.param(b, c, v, id=f"{b}-{c}-{v}") for b in BROKERS for c, v in AWAITED_CLIENTS],
)
def test_aio_awaited(
    benchmark: Any, request: pytest.FixtureRequest, broker_name: str, client: str, variant: str
) -> None:
    measure(benchmark, request, "awaited", broker_name, client, variant)


def measure(
    benchmark: Any,
    request: pytest.FixtureRequest,
    case: str,
    broker_name: str,
    client: str,
    variant: str,
) -> None:
    """Time ``ROUNDS`` rounds of the client, each in a process of its own, and check them."""
    _skip_missing(client, variant)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    records = records_of(case, client)
    idempotence = not (
        (client == AIOKAFKA and broker_name == "tansu") or variant.endswith("_plain")
    )
    awaited = case == "awaited"
    tag(
        benchmark,
        group=f"aio-{'awaited-2k' if awaited else 'send_nowait'}-{broker_name}",
        client=client,
        records=records,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        idempotence=idempotence,
        **({} if awaited else {"linger_ms": LINGER_S * 1000}),
        **reference_role(client, variant),
    )

    def start() -> ProcessRound:
        topic = f"bench-aio-{broker_name}-{client}-{variant}-{next(_topic_ids)}"
        broker.create_topic(topic, PARTITIONS)
        return ProcessRound(case, client, variant, broker_name, broker.bootstrap, topic)

    run_rounds(benchmark, broker, records, start)


def run_rounds(
    benchmark: Any,
    broker: Any,
    records: int,
    start: Callable[[], ProcessRound],
    *,
    warm_records: int = PARTITIONS,
    after: Callable[[ProcessRound], None] | None = None,
) -> None:
    """Time ``ROUNDS`` rounds, each a child process ``start`` makes (on a fresh topic).

    After each round the topic must hold ``records`` plus the ``warm_records``
    of the warm-up, and the child must say every record was acknowledged;
    then the topic is deleted and ``after`` runs (outside the timing).
    """
    current: list[ProcessRound] = []
    acknowledged: list[int] = []
    cpu = CpuMeter()

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        one = start()
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: ProcessRound) -> None:
        current.remove(one)
        acknowledged.append(one.stop())
        cpu.seconds.append(one.cpu_s)
        marks = broker.high_watermarks(one.topic)
        expected = records + warm_records
        assert sum(marks.values()) == expected, f"{one.topic}: {marks}, {expected} were sent"
        broker.delete_topic(one.topic)
        if after is not None:
            after(one)
        benchmark.extra_info.update(one.notes)

    benchmark.pedantic(
        ProcessRound.run, setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])
    assert acknowledged and all(n == records for n in acknowledged), acknowledged
    note_rate(benchmark, records)
    cpu.note(benchmark, records)


if __name__ == "__main__":  # a round's child process: python -m bench.test_aio ...
    child_main(sys.argv[1:])
