"""``pykaf perf produce`` and ``pykaf perf consume``: throughput and latency, measured.

The producer test sends ``--records`` values of ``--size`` bytes in chunks of
``--chunk`` through the bulk path and times each chunk from being handed
over to its last acknowledgement (a chunk's latency: no timer per record).
The consumer test reads a topic's partitions from the start until it has
``--records`` records, and samples each fetched batch's age (now minus its
first record's timestamp: the end-to-end latency while a producer runs).
Both print a live line on stderr each second when it is a terminal, then a
summary table, or ``--json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import trio

from pykaf._cluster.client import OLDEST
from pykaf.cli._common import (
    CliError,
    add_connection,
    add_producer_options,
    print_json,
    print_table,
    producer_options,
    settings,
)


def add_perf(sub: Any) -> None:
    """The ``perf`` subcommand and its two tests."""
    perf = sub.add_parser("perf", help="producer and consumer performance tests")
    tests = perf.add_subparsers(dest="test", required=True, metavar="TEST")
    p = tests.add_parser("produce", help="send records as fast as possible (or at --rate)")
    p.add_argument("topic")
    p.add_argument("-n", "--records", type=int, default=1_000_000)
    p.add_argument("-s", "--size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("--chunk", type=int, default=1000, help="records per send_batch call")
    p.add_argument("--rate", type=float, help="records per second at most")
    add_producer_options(p)
    c = tests.add_parser("consume", help="read a topic from the start")
    c.add_argument("topic")
    c.add_argument("-n", "--records", type=int, default=1_000_000)
    c.add_argument("-t", "--timeout", type=float, default=30.0, help="give up after idle seconds")
    for parser in (p, c):
        add_connection(parser)
        parser.add_argument("--json", action="store_true", help="the summary as JSON on stdout")
    perf.set_defaults(run=run_perf)


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p95, p99 and max of ``samples`` (nearest rank), in the samples' unit."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]

    return {"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "max": ordered[-1]}


class _Progress:
    """A line on stderr each second (only on a terminal)."""

    def __init__(self, what: str, total: int) -> None:
        self.what = what
        self.total = total
        self.live = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last = self.started

    def update(self, done: int, value_bytes: int) -> None:
        now = time.monotonic()
        if not self.live or now - self.last < 1.0:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        print(
            f"\r{self.what}: {done:,}/{self.total:,} records, {rate:,.0f} rec/s, "
            f"{value_bytes / 1e6 / max(now - self.started, 1e-9):.1f} MB/s",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def end(self) -> None:
        if self.live:
            print(file=sys.stderr)


async def perf_produce(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """The producer test; returns the summary."""
    import pykaf

    if args.records < 1 or args.size < 0 or args.chunk < 1:
        raise CliError("--records and --chunk must be >= 1, --size >= 0")
    options = producer_options(args)
    value = os.urandom(args.size)
    latencies: list[float] = []
    acknowledged = 0
    progress = _Progress("produce", args.records)

    async def settle(started: float, delivery: Any) -> None:
        nonlocal acknowledged
        done = await delivery.wait()  # (not "+= await": that reads the total before waiting)
        acknowledged += done
        latencies.append((trio.current_time() - started) * 1000)

    async with pykaf.open_producer(bootstrap, **options) as producer:
        started = trio.current_time()
        sent = 0
        async with trio.open_nursery() as nursery:
            while sent < args.records:
                n = min(args.chunk, args.records - sent)
                if args.rate:
                    await trio.sleep_until(started + sent / args.rate)
                t0 = trio.current_time()
                delivery = await producer.send_batch(args.topic, [value] * n)
                nursery.start_soon(settle, t0, delivery)  # a task per chunk, not per record
                sent += n
                progress.update(acknowledged, acknowledged * args.size)
        seconds = trio.current_time() - started
        stats = producer.statistics()
    progress.end()
    return {
        "test": "produce",
        "topic": args.topic,
        "records": acknowledged,
        "failed": sent - acknowledged,
        "value_bytes": args.size,
        "seconds": round(seconds, 3),
        "records_per_s": round(acknowledged / seconds) if seconds else None,
        "mb_per_s": round(acknowledged * args.size / 1e6 / seconds, 2) if seconds else None,
        "chunk_latency_ms": {k: round(v, 2) for k, v in percentiles(latencies).items()},
        "retries": getattr(stats, "retries", None),
    }


async def perf_consume(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """The consumer test; returns the summary."""
    import pykaf

    if args.records < 1:
        raise CliError("--records must be >= 1")
    ages: list[float] = []
    count = value_bytes = batches = 0
    progress = _Progress("consume", args.records)
    async with pykaf.open_consumer(bootstrap, **settings(args)) as consumer:
        partitions = await consumer.partitions(args.topic)
        send, receive = trio.open_memory_channel[list[Any]](len(partitions) * 2)
        started = trio.current_time()

        async def read(partition: int) -> None:
            pc = await consumer.consume_partition(args.topic, partition, OLDEST)
            while True:
                await send.send(await pc.next_batch())

        async with trio.open_nursery() as nursery:
            for partition in partitions:
                nursery.start_soon(read, partition)
            while count < args.records:
                with trio.move_on_after(args.timeout) as idle:
                    records = await receive.receive()
                if idle.cancelled_caught:
                    break
                now_ms = time.time() * 1000
                batches += 1
                ages.append(max(0.0, now_ms - records[0].timestamp))
                count += len(records)
                value_bytes += sum(len(r.value or b"") for r in records)
                progress.update(count, value_bytes)
            nursery.cancel_scope.cancel()
        seconds = trio.current_time() - started
    progress.end()
    return {
        "test": "consume",
        "topic": args.topic,
        "records": count,
        "value_bytes": value_bytes,
        "batches": batches,
        "seconds": round(seconds, 3),
        "records_per_s": round(count / seconds) if seconds else None,
        "mb_per_s": round(value_bytes / 1e6 / seconds, 2) if seconds else None,
        "batch_age_ms": {k: round(v, 2) for k, v in percentiles(ages).items()},
    }


def run_perf(args: argparse.Namespace) -> int:
    """Run one test; print its summary; exit 1 if records failed or were missing."""
    test = perf_produce if args.test == "produce" else perf_consume
    summary = trio.run(test, args.bootstrap_servers, args)
    if args.json:
        print_json(summary)
    else:
        latency = summary.get("chunk_latency_ms") or summary.get("batch_age_ms") or {}
        label = "chunk latency" if args.test == "produce" else "batch age"
        print_table(
            [
                "test",
                "records",
                "seconds",
                "records/s",
                "MB/s",
                *(f"{label} {k} ms" for k in latency),
            ],
            [
                [
                    summary["test"],
                    f"{summary['records']:,}",
                    summary["seconds"],
                    f"{summary['records_per_s'] or 0:,}",
                    summary["mb_per_s"],
                    *latency.values(),
                ]
            ],
        )
    complete = summary["records"] >= args.records and not summary.get("failed")
    if not complete:
        print(f"pykaf perf: {summary['records']} of {args.records} records", file=sys.stderr)
    return 0 if complete else 1
