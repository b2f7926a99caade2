#!/usr/bin/env python3
"""Per-record producing, interleaved: confluent-kafka's idiom against pykaf.sync, round by round.

``bench/test_producer.py`` runs each client's rounds back to back, so a burst
of load from other processes on a shared machine can land on one client's
rounds only. This script alternates the clients within every round (the same
broker, the same 100-byte values, the same checks as ``test_producer.py``:
each round's fresh 4-partition topic must hold every record) and prints each
client's median records/s and its ratio to confluent-kafka's
``produce()`` + ``poll(0)`` loop, from the per-round pairs::

    python bench/interleaved.py --broker tansu --rounds 5 --records 1000000

Clients: ``confluent-kafka[poll]`` (the peer), ``pykaf[sync_produce]``
(``produce()`` + ``poll(0)`` per record, ``flush()``), ``pykaf[sync]``
(``send_async()`` per record, every future kept and checked, ``flush()``),
``pykaf[sync_many]`` (``send_many()`` per 10,000 values);
with a delivery callback per record, ``pykaf[sync_produce_cb]`` against
``confluent-kafka[poll_cb]``; and the async producer on trio,
``pykaf[send_nowait]`` (``send_nowait()`` per record, ``flush()``) and
``pykaf[send_nowait_cb]`` (with ``on_delivery=``, against ``poll_cb``).

Awaited sends (``bench/test_awaited.py``; use ``--records 2000``):
``pykaf[send]`` (``await send()`` per record) and ``pykaf[send_plain]``
(the same, not idempotent: aiokafka's settings on Tansu) against
``aiokafka[send_and_wait]``, and ``pykaf[sync_send]`` (the blocking
``send()``) against ``confluent-kafka[produce_flush]`` (``produce()`` then
``flush()`` per record)::

    python bench/interleaved.py --broker tansu --rounds 7 --records 2000 \\
        --clients aiokafka[send_and_wait] pykaf[send] \\
                  confluent-kafka[produce_flush] pykaf[sync_send]

On asyncio (``bench/test_aio.py``'s rounds): ``pykaf[aio_send]`` and
``pykaf[aio_send_plain]`` (``pykaf.aio``'s ``await send()`` per record)
against ``aiokafka[send_and_wait]``.

Besides records/s, each client's median CPU time per record is printed: the
process's (every thread's), from the start of the timed part to its end,
which load from other processes disturbs less than the wall time.

``--broker kafka`` runs one Apache Kafka node (``bench/_kafka.py``) and one
untimed warm-up round first (its JIT); ``--pykaf-option flush_bytes=1000000``
gives every pykaf client another option, to try it against the same peer
rounds.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import test_aio as aio
from bench import test_awaited as awaited
from bench import test_producer as prod
from bench._support import bulk_values

CLIENTS = {
    "confluent-kafka[poll]": prod.ConfluentPollRound,
    "confluent-kafka[poll_cb]": prod.ConfluentPollCallbackRound,
    "pykaf[sync_produce]": prod.PykafSyncProduceRound,
    "pykaf[sync_produce_cb]": prod.PykafSyncProduceCallbackRound,
    "pykaf[sync]": prod.PykafSyncRound,
    "pykaf[sync_many]": prod.PykafSyncManyRound,
    "pykaf[send_nowait]": prod.PykafSendNowaitRound,
    "pykaf[send_nowait_cb]": prod.PykafSendNowaitCallbackRound,
    "aiokafka[send_and_wait]": awaited.AiokafkaSendAndWaitRound,
    "confluent-kafka[produce_flush]": awaited.ConfluentFlushRound,
    "pykaf[send]": awaited.PykafSendRound,
    "pykaf[send_plain]": awaited.PykafSendPlainRound,
    "pykaf[sync_send]": awaited.PykafSyncSendRound,
    "pykaf[aio_send]": aio.PykafAioSendRound,
    "pykaf[aio_send_plain]": aio.PykafAioSendPlainRound,
}
PEER = "confluent-kafka[poll]"
#: Each pykaf client's peer, where it is not PEER: the same idiom on confluent-kafka.
PEERS = {
    "pykaf[sync_produce_cb]": "confluent-kafka[poll_cb]",
    "pykaf[send_nowait_cb]": "confluent-kafka[poll_cb]",
    "pykaf[send]": "aiokafka[send_and_wait]",
    "pykaf[send_plain]": "aiokafka[send_and_wait]",
    "pykaf[sync_send]": "confluent-kafka[produce_flush]",
    "pykaf[aio_send]": "aiokafka[send_and_wait]",
    "pykaf[aio_send_plain]": "aiokafka[send_and_wait]",
}


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print the table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("tansu", "mock", "kafka"), default="tansu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--clients", nargs="*", default=list(CLIENTS), choices=list(CLIENTS))
    parser.add_argument(
        "--pykaf-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pykaf producer option for every pykaf client (VALUE read as a Python literal)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed rounds first (default: 1 on kafka, for the broker's JIT; 0 elsewhere)",
    )
    args = parser.parse_args(argv)
    from bench._brokers import BenchBroker, MockBench, TansuBench
    from bench._kafka import KafkaBench

    for option in args.pykaf_option:
        name, _, text = option.partition("=")
        prod.PYKAF_OPTIONS[name] = ast.literal_eval(text)
    warmup = args.warmup if args.warmup is not None else int(args.broker == "kafka")
    values = bulk_values(args.records, prod.VALUE_SIZE).values
    seconds: dict[str, list[float]] = {name: [] for name in args.clients}
    cpu: dict[str, list[float]] = {name: [] for name in args.clients}
    ids = itertools.count()
    broker: BenchBroker
    if args.broker == "tansu":
        broker = TansuBench()
    elif args.broker == "kafka":
        broker = KafkaBench()
    else:
        broker = MockBench(3)
    with broker:
        for n in range(-warmup, args.rounds):
            for name in args.clients:
                topic = f"interleaved-{name.replace('[', '-').rstrip(']')}-{next(ids)}"
                broker.create_topic(topic, prod.PARTITIONS)
                if name == "aiokafka[send_and_wait]":  # Tansu refuses its InitProducerId v0
                    one = CLIENTS[name](
                        broker.bootstrap, topic, values, idempotence=args.broker != "tansu"
                    )
                else:
                    one = CLIENTS[name](broker.bootstrap, topic, values)
                one.start()
                started, cpu_started = time.perf_counter(), time.process_time()
                one.run()
                took = time.perf_counter() - started
                cpu_took = time.process_time() - cpu_started
                assert one.stop() == len(values), f"{name}: records unacknowledged"
                marks = broker.high_watermarks(topic)
                assert sum(marks.values()) == len(values) + prod.PARTITIONS, (name, marks)
                broker.delete_topic(topic)
                what = "warm-up" if n < 0 else f"round {n + 1}"
                print(f"{what} {name}: {len(values) / took:,.0f} records/s")
                if n >= 0:
                    seconds[name].append(took)
                    cpu[name].append(cpu_took)
    options = f", pykaf options {prod.PYKAF_OPTIONS}" if prod.PYKAF_OPTIONS else ""
    print(f"\n{args.broker}, {args.records:,} x {prod.VALUE_SIZE} B, {args.rounds} rounds{options}")
    for name in args.clients:
        rate = len(values) / statistics.median(seconds[name])
        cpu_us = statistics.median(cpu[name]) / len(values) * 1e6
        line = f"{name:24} {rate:12,.0f} records/s {cpu_us:8.1f} us CPU/record"
        peer = PEERS.get(name, PEER)
        if peer in seconds and name.startswith("pykaf"):
            ratios = [p / s for p, s in zip(seconds[peer], seconds[name], strict=True)]
            line += f"  {statistics.median(ratios):.2f}x {peer} (rounds: "
            line += ", ".join(f"{r:.2f}" for r in ratios) + ")"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
