"""Reading one record per call: ``pykaf.sync.Consumer.poll()`` against confluent-kafka's ``poll()``.

Issue 33 section 2: the blocking per-record path, as a script reads a topic
(``for``/``while`` around ``poll(timeout)``), against the same loop on
confluent-kafka. The data and the process per round are
``bench/test_aio_consume.py``'s: 1,000,000 records of 100 bytes written by
confluent-kafka, an equal share in each of 4 partitions; every round runs in a
process of its own, timed from the parent's "go" to the child's "done", and
the parent checks the record count and the value bytes.

Groups ``poll-1M-tansu`` and ``poll-1M-kafka`` (one Apache Kafka node), with
``bench/test_consumer.py``'s consumer settings (64 MiB a fetch, 8 MiB a
partition, 500 ms fetch wait, read_uncommitted, CRCs checked). Clients:

* ``confluent-kafka[poll]``: ``Consumer`` with ``assign()`` at offset 0
  (``enable.auto.commit=false``, ``fetch.queue.backoff.ms=10`` as in
  ``test_consumer.py``), then ``poll(1.0)`` per record until every record is
  in, checking each message's ``error()``.
* ``pykaf[sync_poll]``: ``pykaf.sync.Consumer`` with ``assign()`` at
  ``OLDEST``, then ``poll(1.0)`` per record until every record is in.

Both sum ``len(value)`` per record. Run with
``pytest bench/test_poll.py --benchmark-only -k tansu``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from bench import test_aio_consume as aio_consume
from bench import test_consumer as cons
from bench._support import PYKAF

CONFLUENT = cons.CONFLUENT
BROKERS = ("tansu", "kafka")
CLIENTS: list[tuple[str, str]] = [(CONFLUENT, "poll"), (PYKAF, "sync_poll")]


class ConfluentPollRound(cons.ConfluentRound):
    """confluent-kafka: ``poll(1.0)`` per record."""

    def read(self) -> tuple[int, int]:
        consumer = self.consumer
        poll = consumer.poll
        total = self.data.records
        deadline = time.monotonic() + cons.ROUND_TIMEOUT_S
        count = size = 0
        while count < total:
            message = poll(1.0)
            if message is None:
                if time.monotonic() > deadline:
                    break
                continue
            if message.error() is not None:
                raise RuntimeError(f"confluent-kafka: {message.error()}")
            size += len(message.value())
            count += 1
        return count, size


class PykafSyncPollRound(cons.PykafSyncRound):
    """``pykaf.sync.Consumer``: ``poll(1.0)`` per record."""

    def run(self) -> None:
        oldest = self.pykaf.OLDEST
        self.consumer.assign([(self.topic, p, oldest) for p in self.data.partitions])
        poll = self.consumer.poll
        total = self.data.records
        deadline = time.monotonic() + cons.ROUND_TIMEOUT_S
        count = size = 0
        while count < total:
            record = poll(1.0)
            if record is None:
                if time.monotonic() > deadline:
                    break
                continue
            size += len(record.value)
            count += 1
        self.result = (count, size)


ROUNDS_OF: dict[str, type[cons.Round]] = {
    "poll": ConfluentPollRound,
    "sync_poll": PykafSyncPollRound,
}


class PollProcessRound(aio_consume.ConsumeProcessRound):
    """A round in a child process of its own (this file, run as a program)."""

    module = "bench.test_poll"


datasets = aio_consume.datasets


@pytest.mark.parametrize(
    ("broker_name", "client", "variant"),
    [pytest.param(b, c, v, id=f"{b}-{c}-{v}") for b in BROKERS for c, v in CLIENTS],
)
def test_poll(
    benchmark: Any,
    datasets: Callable[[str], cons.Dataset],
    broker_name: str,
    client: str,
    variant: str,
) -> None:
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
    aio_consume.measure(
        benchmark,
        datasets(broker_name),
        f"poll-1M-{broker_name}",
        client,
        variant,
        PollProcessRound,
    )


if __name__ == "__main__":  # a round's child process: python -m bench.test_poll ...
    aio_consume.child_main(sys.argv[1:], ROUNDS_OF)
