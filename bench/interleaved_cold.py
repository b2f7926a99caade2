#!/usr/bin/env python3
"""``bench/test_cold.py``'s rounds, interleaved: each pykaf round next to a confluent-kafka one.

On a shared machine a burst of load can land on one client's rounds only when
each client's rounds run back to back (pytest-benchmark's way). This script
runs the same rounds (each in a process of its own, the same checks) with the
two clients alternating within every round, their order swapped from one
round to the next, and prints each client's median records/s and the median
of the per-round ratios (confluent-kafka's time over pykaf's), and each
client's median CPU per record (its process's, every thread, from "go" to
"done": on a loaded machine a steadier figure than the rates)::

    python bench/interleaved_cold.py --broker tansu --rounds 9
    python bench/interleaved_cold.py --broker kafka --rounds 9 --cases cold
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import test_cold as cold
from bench.test_producer import PARTITIONS


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print the table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cases", nargs="*", default=list(cold.CASES), choices=cold.CASES)
    args = parser.parse_args(argv)
    from bench._brokers import BenchBroker, TansuBench
    from bench._kafka import KafkaBench

    clients = [client for client, _ in cold.CLIENTS]
    seconds: dict[tuple[str, str], list[float]] = {
        (case, c): [] for case in args.cases for c in clients
    }
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in seconds}
    ids = itertools.count()
    broker: BenchBroker = KafkaBench() if args.broker == "kafka" else TansuBench()
    with broker:
        for n in range(args.rounds):
            order = clients if n % 2 == 0 else clients[::-1]
            for case, client in itertools.product(args.cases, order):
                topic = f"interleaved-{case}-{n}-{next(ids)}"
                broker.create_topic(topic, PARTITIONS)
                if case == "cold":
                    broker.create_topic(cold.warmup_topic(topic), 1)
                one = cold.ColdProcessRound(case, client, args.broker, broker.bootstrap, topic)
                one.start()
                started = time.perf_counter()
                one.run()
                took = time.perf_counter() - started
                assert one.stop() == cold.RECORDS, f"{client}: records unacknowledged"
                marks = broker.high_watermarks(topic)
                warm = 0 if case == "cold" else PARTITIONS
                assert sum(marks.values()) == cold.RECORDS + warm, (client, marks)
                broker.delete_topic(topic)
                if case == "cold":
                    broker.delete_topic(cold.warmup_topic(topic))
                print(
                    f"round {n + 1} {case} {client}: {cold.RECORDS / took:,.0f} records/s, "
                    f"CPU {one.cpu_s / cold.RECORDS * 1e9:,.0f} ns/record"
                )
                seconds[case, client].append(took)
                cpu[case, client].append(one.cpu_s)
    print(f"\n{args.broker}, {cold.RECORDS:,} x 100 B, {args.rounds} rounds")
    peer, pykaf = clients
    for case in args.cases:
        for client in clients:
            rate = cold.RECORDS / statistics.median(seconds[case, client])
            per = statistics.median(cpu[case, client]) / cold.RECORDS * 1e9
            print(f"{case:5} {client:16} {rate:12,.0f} records/s, CPU {per:,.0f} ns/record")
        ratios = [p / s for p, s in zip(seconds[case, peer], seconds[case, pykaf], strict=True)]
        print(
            f"{case:5} {pykaf} / {peer}: {statistics.median(ratios):.2f}x (rounds: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + ")"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
