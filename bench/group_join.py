"""Time from a member joining a group to its first record: classic vs consumer protocol.

Run (starts its own Apache Kafka; a few minutes)::

    nice -n 19 python bench/group_join.py [--rounds 5] [--test-settings]

Two cases per protocol, each ``--rounds`` times on a new group and a topic of
6 partitions that already holds records:

* **first**: the first member of a new group opens and iterates; the time to
  its first record.
* **second**: one member consumes; a second opens; the time to the second
  member's first record (the first has to give partitions up: a rebalance).

The broker runs with Kafka's own group defaults (``group.initial.rebalance.delay.ms``
3000, ``group.consumer.heartbeat.interval.ms`` 5000), which is what a user
meets; ``--test-settings`` keeps pykaf's test-cluster settings instead (no
initial delay, 1 s consumer heartbeats). Members use pykaf's defaults.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pykaf
from pykaf.testing._kafka import open_kafka_cluster

PARTITIONS = 6
KAFKA_GROUP_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.session.timeout.ms": "45000",
}


async def first_record_after_open(bootstrap: str, group: str, topic: str, protocol: str) -> float:
    """Seconds from opening a member to its first record (the member then leaves)."""
    start = trio.current_time()
    async with pykaf.open_consumer_group(
        bootstrap, group, [topic], group_protocol=protocol
    ) as member:
        async for _ in member:
            return trio.current_time() - start
    raise AssertionError("no record")


async def case_first(bootstrap: str, topic: str, protocol: str) -> float:
    return await first_record_after_open(
        bootstrap, f"first-{uuid.uuid4().hex[:8]}", topic, protocol
    )


async def case_second(bootstrap: str, topic: str, protocol: str) -> float:
    group = f"second-{uuid.uuid4().hex[:8]}"
    got_first = trio.Event()

    async def steady() -> None:
        async with pykaf.open_consumer_group(
            bootstrap, group, [topic], group_protocol=protocol
        ) as member:
            async for _ in member:
                got_first.set()
                await trio.sleep(0.001)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(steady)
        await got_first.wait()
        await trio.sleep(1)  # settled
        took = await first_record_after_open(bootstrap, group, topic, protocol)
        nursery.cancel_scope.cancel()
    return took


async def main(rounds: int, test_settings: bool) -> None:
    configs = {} if test_settings else KAFKA_GROUP_DEFAULTS
    async with open_kafka_cluster(broker_configs=configs) as kafka:
        topic = "join-bench"
        await kafka.create_topic(topic, PARTITIONS)
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            for p in range(PARTITIONS):
                # enough that the steady member is still reading when the second joins
                await producer.send_batch(topic, [b"x" * 100] * 20_000, partition=p)
        print(f"broker group settings: {configs or 'pykaf test cluster'}; rounds {rounds}")
        for case_name, case in (("first", case_first), ("second", case_second)):
            for protocol in ("classic", "consumer"):
                times = [await case(kafka.bootstrap, topic, protocol) for _ in range(rounds)]
                print(
                    f"{case_name:6} {protocol:8} median {statistics.median(times):6.3f} s  "
                    f"min {min(times):6.3f}  max {max(times):6.3f}  "
                    f"({', '.join(f'{t:.2f}' for t in times)})",
                    flush=True,
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--test-settings", action="store_true")
    args = parser.parse_args()
    trio.run(main, args.rounds, args.test_settings)
