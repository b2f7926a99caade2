#!/usr/bin/env python3
"""CPU time of pykaf's first ``send_nowait`` loop against the same loop once the topic is known.

A diagnostic beside ``bench/test_cold.py`` (whose peer is confluent-kafka):
on a shared machine wall-clock rounds vary by 2-5x with the load, while the
CPU time the loop's own thread spends (``time.thread_time()``) barely moves.
Each round opens a fresh producer on trio and sends 300,000 records of 100
bytes with ``send_nowait`` in a plain loop (on ``BufferFullError``, ``await
wait_for_space()``), then ``flush()``: ``cold`` to a topic it has never used
(its warm-up went to another topic), ``warm`` after one record to each of the
topic's partitions. Prints each round's CPU milliseconds (loop, flush) and
wall milliseconds, and the median cold-over-warm ratio of the loop's CPU::

    python bench/first_loop_cpu.py --broker tansu --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pykaf
from bench._support import bulk_values
from bench.test_cold import RECORDS, warmup_topic
from bench.test_producer import PARTITIONS, VALUE_SIZE, _pykaf_options


async def one_round(
    bootstrap: str, topic: str, cold: bool, values: list[bytes]
) -> tuple[float, ...]:
    """(loop CPU, flush CPU, wall) seconds of one fresh producer's loop."""
    async with pykaf.open_producer(bootstrap, **_pykaf_options()) as producer:
        if cold:
            await producer.send(warmup_topic(topic), values[0])
        else:
            for partition in range(PARTITIONS):
                await producer.send(topic, values[0], partition=partition)
        send: Any = producer.send_nowait
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for value in values:
            while True:
                try:
                    send(topic, value)
                    break
                except pykaf.errors.BufferFullError:
                    await producer.wait_for_space()
        cpu1 = time.thread_time()
        await producer.flush()
        return cpu1 - cpu0, time.thread_time() - cpu1, time.perf_counter() - wall0


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print them and the ratio; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from bench._brokers import BenchBroker, TansuBench
    from bench._kafka import KafkaBench

    values = bulk_values(RECORDS, VALUE_SIZE).values
    loops: dict[str, list[float]] = {"cold": [], "warm": []}
    broker: BenchBroker = KafkaBench() if args.broker == "kafka" else TansuBench()
    with broker:
        for n in range(args.rounds):
            for case in ("cold", "warm"):
                topic = f"first-loop-{case}-{n}"
                broker.create_topic(topic, PARTITIONS)
                broker.create_topic(warmup_topic(topic), 1)
                loop, flush, wall = trio.run(
                    one_round, broker.bootstrap, topic, case == "cold", values
                )
                marks = broker.high_watermarks(topic)
                warm = 0 if case == "cold" else PARTITIONS
                assert sum(marks.values()) == RECORDS + warm, marks
                broker.delete_topic(topic)
                broker.delete_topic(warmup_topic(topic))
                loops[case].append(loop)
                print(
                    f"round {n + 1} {case}: CPU loop {loop * 1e3:.0f} ms, flush "
                    f"{flush * 1e3:.0f} ms; wall {wall * 1e3:.0f} ms"
                )
    ratio = statistics.median(c / w for c, w in zip(loops["cold"], loops["warm"], strict=True))
    print(f"\n{args.broker}: the cold loop takes {ratio:.2f}x the warm loop's CPU (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
