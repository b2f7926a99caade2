"""``pykaf perf produce`` and ``pykaf perf consume``: throughput and latency, measured.

The producer test sends ``--records`` values of ``--size`` bytes in chunks of
``--chunk`` through the bulk path and times each chunk from being handed
over to its last acknowledgement (a chunk's latency: no timer per record).
The consumer test reads a topic's partitions from the start until it has
``--records`` records, and samples each fetched batch's age (now minus its
first record's timestamp: the end-to-end latency while a producer runs).
Both show live progress on stderr when it is a terminal (a rich progress bar
with rate and ETA, or a plain line without ``rich``: :mod:`pykaf._output`),
then a summary table, or ``--json``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

import trio

from pykaf._cluster.client import OLDEST
from pykaf._output import Progress, print_table
from pykaf.cli._common import (
    CliError,
    add_connection,
    add_producer_options,
    print_json,
    producer_options,
    settings,
)


def add_perf(sub: Any) -> None:
    """The ``perf`` subcommand and its two tests."""
    perf = sub.add_parser("perf", help="producer and consumer performance tests")
    tests = perf.add_subparsers(dest="test", required=True, metavar="TEST")
    shown = argparse.ArgumentDefaultsHelpFormatter  # -h shows each default
    p = tests.add_parser(
        "produce", help="send records as fast as possible (or at --rate)", formatter_class=shown
    )
    p.add_argument("topic")
    p.add_argument("-n", "--records", type=int, default=1_000_000, help="records to send")
    p.add_argument("-s", "--size", type=int, default=100, help="value bytes")
    p.add_argument("--chunk", type=int, default=1000, help="records per send_batch call")
    p.add_argument("--rate", type=float, help="records per second at most")
    add_producer_options(p)
    c = tests.add_parser("consume", help="read a topic from the start", formatter_class=shown)
    c.add_argument("topic")
    c.add_argument("-n", "--records", type=int, default=1_000_000, help="records to read")
    c.add_argument(
        "-t", "--timeout", type=float, default=30.0, help="give up after this many idle seconds"
    )
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


async def perf_produce(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """The producer test; returns the summary."""
    import pykaf

    if args.records < 1 or args.size < 0 or args.chunk < 1:
        raise CliError("--records and --chunk must be >= 1, --size >= 0")
    options = producer_options(args)
    value = os.urandom(args.size)
    latencies: list[float] = []
    acknowledged = 0
    progress = Progress(sys.stderr, args.size, piped_interval=None)
    progress.begin("produce", args.records, lambda: acknowledged)

    async def settle(started: float, delivery: Any) -> None:
        nonlocal acknowledged
        done = await delivery.wait()  # (not "+= await": that reads the total before waiting)
        acknowledged += done
        latencies.append((trio.current_time() - started) * 1000)

    interrupted = False
    async with pykaf.open_producer(bootstrap, **options) as producer:
        started = trio.current_time()
        sent = 0
        async with trio.open_nursery() as outer:
            outer.start_soon(progress.run)
            with trio.CancelScope() as sending:
                outer.start_soon(_on_ctrl_c, sending)
                async with trio.open_nursery() as nursery:
                    while sent < args.records:
                        n = min(args.chunk, args.records - sent)
                        if args.rate:
                            await trio.sleep_until(started + sent / args.rate)
                        t0 = trio.current_time()
                        delivery = await producer.send_batch(args.topic, [value] * n)
                        nursery.start_soon(settle, t0, delivery)  # a task per chunk
                        sent += n
            # Ctrl-C stops the sending; what was handed over is still awaited
            # (the producer's close flushes it), and the summary counts it.
            interrupted = sending.cancelled_caught
            if interrupted:
                await producer.flush()
            outer.cancel_scope.cancel()
        seconds = trio.current_time() - started
        stats = producer.statistics()
        if interrupted:  # the settle tasks were cancelled with the sending
            acknowledged = stats.records_acked
    progress.show(final=True)
    return {
        "interrupted": interrupted,
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
    progress = Progress(sys.stderr, piped_interval=None)
    progress.begin("consume", args.records, lambda: count, value_bytes=lambda: value_bytes)
    async with pykaf.open_consumer(bootstrap, **settings(args)) as consumer:
        partitions = await consumer.partitions(args.topic)
        send, receive = trio.open_memory_channel[list[Any]](len(partitions) * 2)
        started = last = trio.current_time()

        async def read(partition: int) -> None:
            pc = await consumer.consume_partition(args.topic, partition, OLDEST)
            while True:
                await send.send(await pc.next_batch())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(progress.run)
            with trio.CancelScope() as reading:
                nursery.start_soon(_on_ctrl_c, reading)
                for partition in partitions:
                    nursery.start_soon(read, partition)
                while count < args.records:
                    with trio.move_on_after(args.timeout) as idle:
                        records = await receive.receive()
                    if idle.cancelled_caught:
                        break
                    last = trio.current_time()
                    now_ms = time.time() * 1000
                    batches += 1
                    ages.append(max(0.0, now_ms - records[0].timestamp))
                    count += len(records)
                    value_bytes += sum(len(r.value or b"") for r in records)
            nursery.cancel_scope.cancel()
        # Up to the last batch: the idle wait that ended the test is no reading.
        seconds = last - started
    progress.show(final=True)
    return {
        "interrupted": reading.cancelled_caught,
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


async def _on_ctrl_c(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` at the first Ctrl-C (SIGINT): the test ends with a summary."""
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


def run_perf(args: argparse.Namespace) -> int:
    """Run one test; print its summary; exit 1 if records failed or were missing.

    Ctrl-C ends the test early: the summary of what was done, exit 130.
    """
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
    if summary["interrupted"]:
        print(f"pykaf perf: interrupted after {summary['records']:,} records", file=sys.stderr)
        return 130
    complete = summary["records"] >= args.records and not summary.get("failed")
    if not complete:
        print(f"pykaf perf: {summary['records']} of {args.records} records", file=sys.stderr)
    return 0 if complete else 1
