#!/usr/bin/env python3
"""The warm ``send_nowait`` loop of two pykaf checkouts and confluent-kafka's idiom, interleaved.

For a before/after pair measured in one session: each round runs, in a fresh
process each and in an order swapped from one round to the next, the loop of
``bench/test_cold.py``'s ``warm`` case (300,000 records of 100 bytes to a
4-partition topic, after one record to each partition, then ``flush()``)
with pykaf imported from each checkout, and confluent-kafka's ``produce()`` +
``poll(0)`` per record. Each child reports the CPU its loop's thread spent,
its process's CPU (every thread) and the wall time, from the loop's start to
the end of its flush, and the wall time of the loop alone. Prints the
medians and, per checkout, the median of the per-round ratios (confluent-kafka
over pykaf) of CPU and of rate::

    python bench/compare_trees.py --broker tansu --rounds 9 /work/main .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFLUENT = "confluent-kafka"


def child(bootstrap: str, topic: str, client: str) -> dict[str, float]:
    """One round in this process (pykaf from ``sys.path``): its figures per record."""
    from bench._support import bulk_values
    from bench.test_cold import RECORDS
    from bench.test_producer import PARTITIONS, VALUE_SIZE, ConfluentPollRound, _pykaf_options

    values = bulk_values(RECORDS, VALUE_SIZE).values
    if client == CONFLUENT:
        one = ConfluentPollRound(bootstrap, topic, values)
        one.start()
        cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
        one.run()
        loop_wall = 0.0
        thread, cpu, wall = (
            time.thread_time() - thread0,
            time.process_time() - cpu0,
            time.perf_counter() - wall0,
        )
        assert one.stop() == RECORDS, "confluent-kafka: records unacknowledged"
    else:
        import trio

        import pykaf

        async def main() -> tuple[float, ...]:
            async with pykaf.open_producer(bootstrap, **_pykaf_options()) as producer:
                for partition in range(PARTITIONS):
                    await producer.send(topic, values[0], partition=partition)
                send: Any = producer.send_nowait
                full = pykaf.errors.BufferFullError
                cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
                for value in values:
                    while True:
                        try:
                            send(topic, value)
                            break
                        except full:
                            await producer.wait_for_space()
                thread1, wall1 = time.thread_time(), time.perf_counter()
                await producer.flush()
                return (
                    thread1 - thread0,
                    time.process_time() - cpu0,
                    time.perf_counter() - wall0,
                    wall1 - wall0,
                )

        thread, cpu, wall, loop_wall = trio.run(main)
    n = len(values)
    return {
        "loop_ns": thread / n * 1e9,
        "cpu_ns": cpu / n * 1e9,
        "rate": n / wall,
        "loop_ms": loop_wall * 1e3,
        "wall_ms": wall * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print each and the medians; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("trees", nargs="*", help="pykaf checkouts (default: this one)")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)), flush=True)
        return 0
    sys.path.insert(0, str(ROOT))
    from bench._brokers import BenchBroker, TansuBench
    from bench._kafka import KafkaBench
    from bench.test_producer import PARTITIONS

    trees = [str(Path(tree).resolve()) for tree in args.trees or [ROOT]]
    arms = [(tree, "pykaf") for tree in trees] + [(str(ROOT), CONFLUENT)]
    results: dict[tuple[str, str], list[dict[str, float]]] = {arm: [] for arm in arms}
    broker: BenchBroker = KafkaBench() if args.broker == "kafka" else TansuBench()
    with broker:
        for n in range(args.rounds):
            for tree, client in arms if n % 2 == 0 else arms[::-1]:
                topic = f"compare-{n}-{len(results[tree, client])}-{client}-{abs(hash(tree))}"
                broker.create_topic(topic, PARTITIONS)
                child_args = [broker.bootstrap, topic, client]
                done = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--child", *child_args],
                    env={**os.environ, "PYTHONPATH": tree},
                    cwd=tree,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise SystemExit(f"{tree} {client}: {done.stderr[-2000:]}")
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                broker.delete_topic(topic)
                results[tree, client].append(figures)
                shown = ", ".join(f"{k} {v:,.0f}" for k, v in figures.items())
                print(f"round {n + 1} {client} {tree}: {shown}", flush=True)
    print(f"\n{args.broker}, {args.rounds} rounds (medians):")
    for (tree, client), rounds in results.items():
        shown = ", ".join(f"{k} {statistics.median(r[k] for r in rounds):,.0f}" for k in rounds[0])
        print(f"{client:15} {tree}: {shown}")
    peer = results[str(ROOT), CONFLUENT]
    for tree in trees:
        ours = results[tree, "pykaf"]
        cpu = statistics.median(p["cpu_ns"] / o["cpu_ns"] for p, o in zip(peer, ours, strict=True))
        rate = statistics.median(o["rate"] / p["rate"] for p, o in zip(peer, ours, strict=True))
        print(
            f"{tree}: {CONFLUENT} CPU / pykaf CPU {cpu:.2f}x; pykaf rate / {CONFLUENT} {rate:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
