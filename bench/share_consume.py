"""A share consumer's time from opening to its first records, and how fast one member drains.

Run (starts its own Apache Kafka; about a minute)::

    nice -n 19 python bench/share_consume.py [--rounds 5] [--test-settings]

* **join**: ``--rounds`` times, a new share group (``share.auto.offset.reset``
  earliest) on a topic of 4 partitions that holds records: seconds from
  ``open_share_consumer`` to its first batch.
* **drain**: one member of a new group reads 90,000 records of 100 bytes with
  implicit acknowledgement (``max_records`` 2000): records per second.

The broker runs with Kafka's own share group defaults
(``group.share.heartbeat.interval.ms`` 5000), which is what a user meets;
``--test-settings`` keeps pykaf's test-cluster settings (1 s heartbeats).
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

PARTITIONS = 4
PER_PARTITION = 25_000
KAFKA_SHARE_DEFAULTS = {
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.session.timeout.ms": "45000",
}


async def new_group(bootstrap: str, prefix: str) -> str:
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    async with pykaf.open_admin(bootstrap) as admin:
        await admin.alter_group_configs({group: {"share.auto.offset.reset": "earliest"}})
    return group


async def join(bootstrap: str, topic: str) -> float:
    group = await new_group(bootstrap, "join")
    start = trio.current_time()
    async with pykaf.open_share_consumer(bootstrap, group, [topic]) as consumer:
        await consumer.next_batch()
        return trio.current_time() - start


async def drain(bootstrap: str, topic: str) -> tuple[int, float]:
    group = await new_group(bootstrap, "drain")
    async with pykaf.open_share_consumer(bootstrap, group, [topic], max_records=2000) as c:
        count = len(await c.next_batch())
        start = trio.current_time()
        while count < 90_000:
            count += len(await c.next_batch())
        return count, trio.current_time() - start


async def main(rounds: int, test_settings: bool) -> None:
    configs = {} if test_settings else KAFKA_SHARE_DEFAULTS
    async with open_kafka_cluster(broker_configs=configs) as kafka:
        topic = "share-bench"
        await kafka.create_topic(topic, PARTITIONS)
        async with pykaf.open_producer(kafka.bootstrap) as producer:
            for p in range(PARTITIONS):
                for _ in range(PER_PARTITION // 5000):
                    await producer.send_batch(topic, [b"x" * 100] * 5000, partition=p)
        print(f"broker share settings: {configs or 'pykaf test cluster'}; rounds {rounds}")
        times = [await join(kafka.bootstrap, topic) for _ in range(rounds)]
        print(
            f"join   median {statistics.median(times):6.3f} s  min {min(times):6.3f}  "
            f"max {max(times):6.3f}  ({', '.join(f'{t:.2f}' for t in times)})",
            flush=True,
        )
        count, took = await drain(kafka.bootstrap, topic)
        print(f"drain  {count} records in {took:.2f} s: {count / took:,.0f} records/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--test-settings", action="store_true")
    args = parser.parse_args()
    trio.run(main, args.rounds, args.test_settings)
