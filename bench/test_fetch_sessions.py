"""Fetch sessions (KIP-227) on Apache Kafka: 1,000 partitions of 1,000 records each.

One group, ``consume-1000x1000-kafka``, every client on the same topic in the
same run, back to back:

* ``pykaf[sessions]``: ``pykaf.open_consumer`` with ``fetch_sessions=True``
  (the default): after the first, full Fetch each request names only the
  partitions whose position moved, and the broker answers only the partitions
  with records.
* ``pykaf[no-sessions]``: the same with ``fetch_sessions=False``: every Fetch
  names all 1,000 partitions (about 28 bytes each) and every answer carries
  all 1,000, with or without records.
* ``confluent-kafka``: ``assign()`` at offset 0 and ``consume(10000,
  timeout=1.0)``, as in ``bench/test_consumer.py`` (librdkafka has no fetch
  sessions; its Fetches name every fetchable partition).

Both pykaf variants read with a task per partition and ``next_batch()``
(``bench/test_consumer.py``'s ``PykafNextBatchRound``), with that module's
fetch settings for everyone (64 MiB per Fetch, 8 MiB per partition, 500 ms
broker wait, read_uncommitted, CRC-32C checked by everyone). A round reads
every record from offset 0 and checks the count and the values' bytes outside
the timing. ``extra_info`` of the pykaf rounds holds, from the last round,
``fetch_requests``, ``fetch_request_bytes`` (their size on the wire, summed,
from the client's request metrics), ``mean_fetch_request_bytes``, and the
session's ``full_fetches`` and ``incremental_fetches``.

The data set is written once per module by confluent-kafka (acks=all,
idempotent; ``bench/test_consumer.py``'s ``_fill``): 1,000,000 values of 100
random bytes, 1,000 in each partition, checked by the high watermarks, and
the topic is deleted after the module. ``params`` is ``assign`` for all three,
so ``bench/ratios.py`` pairs each pykaf variant with confluent-kafka.

Run by hand::

    python -m pytest bench/test_fetch_sessions.py --benchmark-only -p no:randomly \\
        --benchmark-json=bench/results/fetch_sessions.json
    python bench/ratios.py bench/results/fetch_sessions.json
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from bench import test_consumer as cons
from bench._kafka import KafkaBench
from bench._support import PYKAF, CpuMeter, note_rate, tag

CONFLUENT = "confluent-kafka"
PARTITIONS = 1000
RECORDS = cons.RECORDS  # 1,000,000: 1,000 per partition
GROUP = "consume-1000x1000-kafka"
ROUNDS = 3
CREATE_TIMEOUT_S = 180.0  # 1,000 leaders, each checked with a ListOffsets
PARAMS = "assign"
CLIENTS: list[tuple[str, str | None]] = [
    (CONFLUENT, None),
    (PYKAF, "sessions"),
    (PYKAF, "no-sessions"),
]

_topic_ids = itertools.count()


@pytest.fixture(scope="module")
def dataset(bench_kafka: KafkaBench) -> Iterator[cons.Dataset]:
    """1,000 partitions of 1,000 records, written by confluent-kafka once for the module."""
    pytest.importorskip("confluent_kafka")
    assert RECORDS == PARTITIONS * 1000
    topic = f"bench-fetch-sessions-{next(_topic_ids)}"
    bench_kafka.create_topic(topic, PARTITIONS, timeout=CREATE_TIMEOUT_S)
    try:
        delivered, starts = cons._fill(bench_kafka.bootstrap, topic, PARTITIONS)
        assert delivered == RECORDS, f"the setup produced {delivered} of {RECORDS} records"
        marks = bench_kafka.high_watermarks(topic)
        assert marks == dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS), marks
        assert starts == [0] * PARTITIONS, starts
        yield cons.Dataset(bench_kafka, topic, marks)
    finally:
        bench_kafka.delete_topic(topic)


class PykafSessionRound(cons.PykafNextBatchRound):
    """pykaf's ``next_batch`` round with fetch sessions on or off; counts the Fetch bytes."""

    sessions = True

    def options(self) -> dict[str, Any]:
        self.fetch_bytes = [0, 0]  # requests, bytes on the wire
        return {
            **super().options(),
            "fetch_sessions": self.sessions,
            "on_request": self._count,
        }

    def _count(self, event: Any) -> None:
        if event.api == "Fetch" and event.error is None:
            self.fetch_bytes[0] += 1
            self.fetch_bytes[1] += event.bytes_sent

    def note_statistics(self, stats: Any) -> None:
        super().note_statistics(stats)
        requests, sent = self.fetch_bytes
        self.notes["fetch_request_bytes"] = sent
        self.notes["mean_fetch_request_bytes"] = round(sent / requests) if requests else 0
        for key in ("full_fetches", "incremental_fetches", "session_resets"):
            self.notes[key] = sum(b[key] for b in stats.brokers.values())


class PykafNoSessionRound(PykafSessionRound):
    """The same with ``fetch_sessions=False``."""

    sessions = False


def _round(client: str, variant: str | None) -> type[cons.Round]:
    if client == CONFLUENT:
        return cons.ConfluentRound
    return PykafSessionRound if variant == "sessions" else PykafNoSessionRound


@pytest.mark.parametrize(
    ("client", "variant"),
    [pytest.param(c, v, id=f"{c}-{v}" if v else c) for c, v in CLIENTS],
)
def test_fetch_sessions(
    benchmark: Any, dataset: cons.Dataset, client: str, variant: str | None
) -> None:
    make_round = _round(client, variant)
    settings = (
        {"fetch_sessions": variant == "sessions", **cons.pykaf_consumer_options()}
        if client == PYKAF
        else {"check.crcs": True, "fetch.queue.backoff.ms": cons.CONFLUENT_QUEUE_BACKOFF_MS}
    )
    tag(
        benchmark,
        group=GROUP,
        client=client,
        records=dataset.records,
        variant=variant,
        params=PARAMS,
        value_bytes=cons.VALUE_SIZE,
        partitions=PARTITIONS,
        settings=settings,
    )
    current: list[cons.Round] = []
    results: list[tuple[int, int]] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        one = make_round(dataset)
        current.append(one)
        one.start()
        return (one,), {}

    def teardown(one: cons.Round) -> None:
        current.remove(one)
        count, size = one.stop()
        results.append((count, size))
        assert count == dataset.records, f"{client}: read {count} of {dataset.records} records"
        assert size == dataset.value_bytes, f"{client}: {size} value bytes"
        benchmark.extra_info.update(one.notes)

    cpu = CpuMeter()
    benchmark.pedantic(
        lambda one: cpu.run(one.run), setup=setup, teardown=teardown, rounds=ROUNDS, iterations=1
    )
    while current:  # --benchmark-disable runs the target once, without teardown
        teardown(current[0])
    assert results, f"{client}: no round completed"
    note_rate(benchmark, dataset.records)
    cpu.note(benchmark, dataset.records)
