"""Reading on asyncio: ``pykaf.aio``'s ``async for`` against trio's and aiokafka's ``getmany``.

One topic per broker, filled once by confluent-kafka (``bench/test_consumer.py``'s
data: 1,000,000 records of 100 bytes, an equal share in each of 4 partitions,
batched by librdkafka, so no client reads batches its own producer shaped).
Every round runs in a process of its own: the child opens its consumer and
learns the topic (untimed), says it is ready, and the timed part is from the
parent's "go" to the child's "done": every record read from offset 0, each
value's length summed. The parent checks the count and the bytes.

Groups ``aio-consume-1M-tansu`` and ``aio-consume-1M-kafka`` (one Apache Kafka
node), with ``bench/test_consumer.py``'s consumer settings (64 MiB a fetch,
8 MiB a partition, 500 ms fetch wait, CRCs checked). Clients:

* ``aiokafka[getmany]``: ``assign()``, ``seek_to_beginning()``, then
  ``getmany(timeout_ms=1000, max_records=10000)`` until every record is in
  (``test_consumer.py``'s aiokafka round).
* ``pykaf[aio_iter]``: ``pykaf.aio.open_consumer`` inside ``asyncio.run()``,
  a task per partition, ``async for record in pc`` from ``OLDEST`` to the
  partition's end (``test_consumer.py``'s ``iter`` round on asyncio).
* ``pykaf[aio_iter_uvloop]``: the same on uvloop's loop.
* ``pykaf[iter]``: the same on trio, the reference for the asyncio paths:
  tagged as a peer, so ``bench/ratios.py`` gives ``pykaf[aio_iter] |
  pykaf[iter]`` (asyncio against trio, > 1: asyncio is faster) beside
  ``pykaf[aio_iter] | aiokafka[getmany]``.

Each round notes the child's CPU seconds from "go" to "done" (every thread
of its process), as ``cpu_s_per_M``; ``bench/ratios.py`` prints their ratios.

Run one group with ``pytest bench/test_aio_consume.py --benchmark-only -k tansu``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import pytest

from bench import test_aio as aio_bench
from bench import test_consumer as cons
from bench._support import AIOKAFKA, PYKAF, CpuMeter, note_rate, tag

ROUNDS = 5
PARTITIONS = 4
BROKERS = ("tansu", "kafka")
CLIENTS: list[tuple[str, str]] = [
    (AIOKAFKA, "getmany"),
    (PYKAF, "iter"),
    (PYKAF, "aio_iter"),
    (PYKAF, "aio_iter_uvloop"),
]

_topic_ids = itertools.count()


class _Bootstrap:
    """What a round needs of its broker in the child: the address."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


class PykafAioIterRound(cons.PykafIterRound):
    """``pykaf.aio``: a task per partition, ``async for`` to the end, on asyncio."""

    uvloop = False

    def loop_main(self) -> None:
        aio_bench.run_loop(self._main_aio, uvloop=self.uvloop)

    async def _main_aio(self) -> None:
        aio = importlib.import_module("pykaf.aio")
        async with aio.open_consumer(self.bootstrap, **self.options()) as consumer:
            partitions = await consumer.partitions(self.topic)
            assert sorted(partitions) == self.data.partitions, partitions
            self.gate.ready.set()
            await asyncio.to_thread(self.gate.go.wait)

            async def one(partition: int) -> tuple[int, int]:
                pc = await consumer.consume_partition(self.topic, partition, -2)  # OLDEST
                return await self.read(pc, self.data.ends[partition])

            reads = asyncio.gather(*(one(p) for p in self.data.partitions))
            done = await asyncio.wait_for(reads, cons.ROUND_TIMEOUT_S)
            self.result = (sum(c for c, _ in done), sum(s for _, s in done))
            self.gate.done.set()
            self.note_statistics(consumer.statistics())


class PykafAioIterUvloopRound(PykafAioIterRound):
    """The same on uvloop's loop."""

    uvloop = True


ROUNDS_OF: dict[str, type[cons.Round]] = {
    "getmany": cons.AiokafkaRound,
    "iter": cons.PykafIterRound,
    "aio_iter": PykafAioIterRound,
    "aio_iter_uvloop": PykafAioIterUvloopRound,
}


def child_main(argv: list[str], rounds: Mapping[str, type[cons.Round]] = ROUNDS_OF) -> None:
    """The child's side: open, "ready"; on "go", read, "done"; close, report."""
    variant, bootstrap, topic, ends = argv
    broker = cast(Any, _Bootstrap(bootstrap))
    data = cons.Dataset(broker, topic, {int(p): n for p, n in json.loads(ends).items()})
    one = rounds[variant](data)
    one.start()
    cpu_s = aio_bench.run_when_told(one.run)
    count, size = one.stop()
    report = {"count": count, "size": size, "cpu_s": cpu_s, "notes": one.notes}
    print(json.dumps(report), flush=True)


class ConsumeProcessRound(aio_bench.ProcessRound):
    """A reading round in a child process of its own (this file, run as a program)."""

    module = "bench.test_aio_consume"

    def stop(self) -> int:
        report = self.finish()
        self.size = int(report["size"])
        return int(report["count"])


def fill(broker: Any, topic: str) -> cons.Dataset:
    """``topic`` made on ``broker`` and filled by confluent-kafka: every record, from offset 0."""
    broker.create_topic(topic, PARTITIONS)
    delivered, starts = cons._fill(broker.bootstrap, topic, PARTITIONS)
    assert delivered == cons.RECORDS and starts == [0] * PARTITIONS, (delivered, starts)
    marks = broker.high_watermarks(topic)
    assert sum(marks.values()) == cons.RECORDS, marks
    return cons.Dataset(broker, topic, marks)


@pytest.fixture(scope="module")
def datasets(request: pytest.FixtureRequest) -> Iterator[Callable[[str], cons.Dataset]]:
    """The topic of each broker, filled on first use and deleted after the module."""
    made: dict[str, cons.Dataset] = {}

    def get(name: str) -> cons.Dataset:
        if name not in made:
            broker = request.getfixturevalue(f"bench_{name}")
            made[name] = fill(broker, f"bench-aio-consume-{name}-{next(_topic_ids)}")
        return made[name]

    yield get
    for dataset in made.values():
        dataset.broker.delete_topic(dataset.topic)


@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [pytest.param(b, c, v, id=f"{b}-{c}-{v}") for b in BROKERS for c, v in CLIENTS],
)
def test_aio_consume(
    benchmark: Any,
    datasets: Callable[[str], cons.Dataset],
    broker_name: str,
    client: str,
    variant: str,
) -> None:
    if client == AIOKAFKA:
        pytest.importorskip("aiokafka")
    elif variant.endswith("uvloop"):
        pytest.importorskip("uvloop")
    measure(benchmark, datasets(broker_name), f"aio-consume-1M-{broker_name}", client, variant)


def measure(
    benchmark: Any,
    data: cons.Dataset,
    group: str,
    client: str,
    variant: str,
    process_round: type[ConsumeProcessRound] = ConsumeProcessRound,
) -> None:
    """Time ``ROUNDS`` reading rounds of ``variant``, each in a process of its own; check them."""
    tag(
        benchmark,
        group=group,
        client=client,
        records=data.records,
        variant=variant,
        value_bytes=cons.VALUE_SIZE,
        partitions=PARTITIONS,
        **aio_bench.reference_role(client, variant),
    )
    current: list[ConsumeProcessRound] = []
    read: list[tuple[int, int]] = []
    cpu = CpuMeter()

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        ends = json.dumps({str(p): n for p, n in data.ends.items()})
        one = process_round(variant, data.broker.bootstrap, data.topic, ends)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: ConsumeProcessRound) -> None:
        current.remove(one)
        read.append((one.stop(), one.size))
        cpu.seconds.append(one.cpu_s)
        benchmark.extra_info.update(one.notes)

    benchmark.pedantic(
        ConsumeProcessRound.run, setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])
    expected = (data.records, data.value_bytes)
    assert read and all(got == expected for got in read), (read, expected)
    note_rate(benchmark, data.records)
    cpu.note(benchmark, data.records)


if __name__ == "__main__":  # a round's child process: python -m bench.test_aio_consume ...
    child_main(sys.argv[1:])
