#!/usr/bin/env python3
"""poll() per record, interleaved: confluent-kafka's and pykaf.sync's rounds alternate.

``bench/test_poll.py`` runs each client's rounds back to back, so a burst of
load from other processes on a shared machine can land on one client's rounds
only. This script alternates the two within every round, each round in a
process of its own (``test_poll.py``'s rounds and checks: every record read,
the value bytes summed), on one topic filled once by confluent-kafka
(1,000,000 x 100 B in 4 partitions), and prints each client's median
records/s and pykaf's ratio to confluent-kafka from the per-round pairs::

    python bench/interleaved_poll.py --broker tansu --rounds 7

``--broker kafka`` runs one Apache Kafka node (``bench/_kafka.py``) and one
untimed warm-up round first (its JIT).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import test_consumer as cons
from bench.test_aio_consume import fill
from bench.test_poll import CLIENTS, PollProcessRound


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print the table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=None, help="untimed rounds first")
    args = parser.parse_args(argv)
    from bench._brokers import BenchBroker, TansuBench
    from bench._kafka import KafkaBench

    warmup = args.warmup if args.warmup is not None else int(args.broker == "kafka")
    broker: BenchBroker = KafkaBench() if args.broker == "kafka" else TansuBench()
    seconds: dict[str, list[float]] = {variant: [] for _, variant in CLIENTS}
    with broker:
        data = fill(broker, f"interleaved-poll-{time.time_ns()}")
        topic = data.topic
        ends_json = json.dumps({str(p): n for p, n in data.ends.items()})
        for n in range(-warmup, args.rounds):
            for client, variant in CLIENTS:
                one = PollProcessRound(variant, broker.bootstrap, topic, ends_json)
                one.start()
                started = time.perf_counter()
                one.run()
                took = time.perf_counter() - started
                count = one.stop()
                assert (count, one.size) == (cons.RECORDS, cons.RECORDS * cons.VALUE_SIZE), (
                    f"{client}[{variant}]: {count} records, {one.size} bytes"
                )
                what = "warm-up" if n < 0 else f"round {n + 1}"
                print(f"{what} {client}[{variant}]: {cons.RECORDS / took:,.0f} records/s")
                if n >= 0:
                    seconds[variant].append(took)
        broker.delete_topic(topic)
    (_, peer), (_, subject) = CLIENTS
    print(f"\n{args.broker}, {cons.RECORDS:,} x {cons.VALUE_SIZE} B, {args.rounds} rounds")
    for client, variant in CLIENTS:
        print(f"{client}[{variant}]: {cons.RECORDS / statistics.median(seconds[variant]):,.0f}/s")
    ratios = [p / s for p, s in zip(seconds[peer], seconds[subject], strict=True)]
    print(
        f"pykaf[{subject}] / confluent-kafka[{peer}]: {statistics.median(ratios):.2f}x "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
