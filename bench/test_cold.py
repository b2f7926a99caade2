"""The first loop of a fresh producer: ``send_nowait`` to a topic it has not used yet.

Issue 33 §1: ``docs/producer.md``'s example runs ``send_nowait`` in a tight
loop to a topic the producer has never sent to. Until the loop reaches a
checkpoint the producer cannot learn the topic's partitions, so every record
of that loop waits for them. This file times that first loop against
confluent-kafka's idiom on the same fresh start, and the same loop once the
topic is known.

Each round runs in a process of its own (``bench/test_aio.py``'s harness): a
fresh producer, a fresh 4-partition topic, 300,000 records of 100 bytes
(no keys), acks=all, linger 5 ms, idempotent. The child opens the producer
and warms it up, says it is ready, and the timed part is from the parent's
"go" to the child's "done": every record sent and acknowledged. Then the
parent checks that the topic's high watermarks add up to the records sent.

Groups (``cold-300k-tansu``, ``cold-300k-kafka``, ``warm-300k-tansu``,
``warm-300k-kafka``); the clients and their warm-ups:

* ``cold``: the warm-up sends one record to *another* topic (one partition,
  made for the round) and waits for it, so that the producer is connected
  and holds its producer id, but has never heard of the round's topic.
* ``warm``: the warm-up sends one record to each partition of the round's
  topic and waits for them (``bench/test_producer.py``'s warm-up).

* ``confluent-kafka[poll]``: ``produce()`` then ``poll(0)`` per record
  (``poll(0.1)`` and again on ``BufferError``), then ``flush()``.
* ``pykaf[send_nowait]``: ``send_nowait()`` per record in a plain loop (on
  ``BufferFullError``, ``await producer.wait_for_space()``), then
  ``await flush()``, on trio.

Run with ``pytest bench/test_cold.py --benchmark-only -k tansu
--benchmark-json=/tmp/cold.json`` and ``python bench/ratios.py
/tmp/cold.json`` for the ratios.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import pytest

from bench._support import PYKAF, bulk_values, tag
from bench.test_aio import ProcessRound, child_main, run_rounds
from bench.test_producer import (
    LINGER_S,
    PARTITIONS,
    ROUND_TIMEOUT_S,
    VALUE_SIZE,
    ConfluentPollRound,
    PykafSendNowaitRound,
    Round,
    _warm_value,
)

CONFLUENT = "confluent-kafka"
RECORDS = 300_000
ROUNDS = 5
BROKERS = ("tansu", "kafka")
CASES = ("cold", "warm")
CLIENTS: list[tuple[str, str]] = [(CONFLUENT, "poll"), (PYKAF, "send_nowait")]

_topic_ids = itertools.count()


def warmup_topic(topic: str) -> str:
    """The one-partition topic a cold round's warm-up sends to."""
    return f"{topic}-warmup"


class ConfluentColdRound(ConfluentPollRound):
    """confluent-kafka's idiom; the warm-up never touches the round's topic."""

    def warm_up(self) -> None:
        self.producer.produce(warmup_topic(self.topic), _warm_value(self.values))
        left = self.producer.flush(ROUND_TIMEOUT_S)
        assert left == 0, "confluent-kafka: the warm-up record was not acknowledged"


class PykafColdRound(PykafSendNowaitRound):
    """pykaf's ``send_nowait`` loop; the warm-up never touches the round's topic."""

    async def warm_up(self, producer: Any) -> None:
        await producer.send(warmup_topic(self.topic), _warm_value(self.values))


def make_round(case: str, client: str, broker: str, bootstrap: str, topic: str) -> Round:
    """One round of ``client`` for ``case`` ("cold" or "warm"), in this process."""
    values = bulk_values(RECORDS, VALUE_SIZE).values
    cold = case == "cold"
    if client == CONFLUENT:
        return (ConfluentColdRound if cold else ConfluentPollRound)(bootstrap, topic, values)
    return (PykafColdRound if cold else PykafSendNowaitRound)(bootstrap, topic, values)


class ColdProcessRound(ProcessRound):
    """A round in a child process running this module."""

    module = "bench.test_cold"


@pytest.mark.parametrize(
    ("case", "broker_name", "client", "variant"),
    [
        pytest.param(case, b, c, v, id=f"{case}-{b}-{c}-{v}")
        for case in CASES
        for b in BROKERS
        for c, v in CLIENTS
    ],
)
def test_first_loop(
    benchmark: Any,
    request: pytest.FixtureRequest,
    case: str,
    broker_name: str,
    client: str,
    variant: str,
) -> None:
    if client == CONFLUENT:
        pytest.importorskip("confluent_kafka")
    broker = request.getfixturevalue(f"bench_{broker_name}")
    tag(
        benchmark,
        group=f"{case}-300k-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_S * 1000,
        idempotence=True,
    )
    cold = case == "cold"

    def start() -> ProcessRound:
        topic = f"bench-{case}-{broker_name}-{client}-{variant}-{next(_topic_ids)}"
        broker.create_topic(topic, PARTITIONS)
        if cold:
            broker.create_topic(warmup_topic(topic), 1)
        return ColdProcessRound(case, client, broker_name, broker.bootstrap, topic)

    def after(one: ProcessRound) -> None:
        if cold:
            broker.delete_topic(warmup_topic(one.topic))

    # A cold round's topic holds the records only; a warm one's, the warm-up's too.
    run_rounds(
        benchmark, broker, RECORDS, start, warm_records=0 if cold else PARTITIONS, after=after
    )


if __name__ == "__main__":  # a round's child process: python -m bench.test_cold ...
    child_main(sys.argv[1:], make_round)
