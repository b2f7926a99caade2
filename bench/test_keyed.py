"""Keyed records: 1,000,000 records, each with its key, pykaf against confluent-kafka.

The sizes of ``bench/test_producer.py`` (100-byte random values, acks=all,
idempotent, linger 5 ms, a fresh 4-partition topic per round, warm-up before
the timing, high watermarks checked after), with a 12-byte key per record
(``user-0000000`` .. ``user-0099999``, 100,000 distinct keys), so every
record goes where its key hashes (murmur2, the default partitioner of both).

Groups ``keyed-1M-kafka``, ``keyed-1M-tansu``, ``keyed-1M-mock``:

* ``confluent-kafka[poll]``: ``produce(topic, value, key=key)`` then
  ``poll(0)`` per record (on ``BufferError``, ``poll(0.1)`` and again),
  ``flush()``: its documented idiom.
* ``confluent-kafka``: the same without ``poll(0)`` per record (``poll(0)``
  only when its queue is full): its fastest loop.
* ``pykaf[send_batch]``: ``await send_batch(topic, values, keys=keys)`` on
  lists of 10,000, then ``flush()`` and every delivery's ``wait()``.
* ``pykaf[send_batch_column]``: the same with the values and keys as
  :class:`pykaf.codec.BinaryColumn` (Arrow's layout; made before the round,
  as a Spark or pyarrow job would hold them).
* ``pykaf[sync_produce]``: ``pykaf.sync.Producer.produce(topic, value,
  key=key)`` and ``poll(0)`` per record, ``flush()``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from bench._support import PYKAF, bulk_values, tag, time_produce_rounds
from bench.test_producer import (
    CHUNK,
    LINGER_S,
    PARTITIONS,
    RECORDS,
    ROUND_TIMEOUT_S,
    VALUE_SIZE,
    ConfluentRound,
    Round,
    _PykafRound,
    _PykafSyncRound,
)

CONFLUENT = "confluent-kafka"
ROUNDS = 5
DISTINCT_KEYS = 100_000


@cache
def keys_for(count: int) -> list[bytes]:
    """The benchmark's keys: ``user-%07d`` over 100,000 distinct users."""
    return [b"user-%07d" % (i % DISTINCT_KEYS) for i in range(count)]


class ConfluentKeyedRound(ConfluentRound):
    """``produce(..., key=)`` per record; ``poll(0)`` only when the queue is full; flush."""

    poll_each = False

    def run(self) -> None:
        topic, produce, poll = self.topic, self.producer.produce, self.producer.poll
        keys = keys_for(len(self.values))
        each = self.poll_each
        for value, key in zip(self.values, keys, strict=True):
            while True:
                try:
                    produce(topic, value, key=key)
                    break
                except BufferError:
                    poll(0.1 if each else 0)
            if each:
                poll(0)
        self.left = self.producer.flush(ROUND_TIMEOUT_S)


class ConfluentKeyedPollRound(ConfluentKeyedRound):
    """``produce(..., key=)`` and ``poll(0)`` per record (the documented idiom); flush."""

    poll_each = True


class PykafKeyedBatchRound(_PykafRound):
    """``await send_batch(..., keys=)`` per 10,000 records; flush; every ``wait()``."""

    columns = False

    def start(self) -> None:
        keys = keys_for(len(self.values))
        chunks = [
            (self.values[i : i + CHUNK], keys[i : i + CHUNK])
            for i in range(0, len(self.values), CHUNK)
        ]
        if self.columns:
            column = importlib.import_module("pykaf.codec").BinaryColumn.from_values
            chunks = [(column(v), column(k)) for v, k in chunks]
        self.chunks = chunks
        super().start()

    async def produce(self, producer: Any) -> int:
        topic = self.topic
        deliveries = [
            await producer.send_batch(topic, values, keys=keys) for values, keys in self.chunks
        ]
        await producer.flush()
        delivered = 0
        for delivery in deliveries:
            delivered += await delivery.wait()
        return delivered


class PykafKeyedColumnRound(PykafKeyedBatchRound):
    columns = True


class PykafSyncKeyedRound(_PykafSyncRound):
    """``pykaf.sync.Producer.produce(..., key=)`` and ``poll(0)`` per record; flush."""

    def run(self) -> None:
        topic, produce, poll = self.topic, self.producer.produce, self.producer.poll
        for value, key in zip(self.values, keys_for(len(self.values)), strict=True):
            produce(topic, value, key=key)
            poll(0)
        self.left = self.producer.flush(timeout=ROUND_TIMEOUT_S)

    def acknowledged(self) -> int:
        assert self.left == 0, f"pykaf.sync: {self.left} records unacknowledged after flush"
        return len(self.values)


CASES: list[tuple[str, str | None, Callable[..., Round], str]] = [
    (CONFLUENT, "poll", ConfluentKeyedPollRound, "confluent_kafka"),
    (CONFLUENT, None, ConfluentKeyedRound, "confluent_kafka"),
    (PYKAF, "send_batch", PykafKeyedBatchRound, "trio"),
    (PYKAF, "send_batch_column", PykafKeyedColumnRound, "trio"),
    (PYKAF, "sync_produce", PykafSyncKeyedRound, "trio"),
]
BROKERS = ("kafka", "tansu", "mock")


@pytest.mark.parametrize(
    ("broker_name", "client", "variant", "make_round", "needs"),
    [
        pytest.param(b, *case, id=f"{b}-{case[0]}-{case[1] or 'default'}")
        for b in BROKERS
        for case in CASES
    ],
)
def test_keyed_produce(
    benchmark: Any,
    request: pytest.FixtureRequest,
    broker_name: str,
    client: str,
    variant: str | None,
    make_round: Callable[..., Round],
    needs: str,
) -> None:
    pytest.importorskip(needs)
    broker = request.getfixturevalue(f"bench_{broker_name}")
    values = bulk_values(RECORDS, VALUE_SIZE).values
    tag(
        benchmark,
        group=f"keyed-1M-{broker_name}",
        client=client,
        records=RECORDS,
        variant=variant,
        value_bytes=VALUE_SIZE,
        key_bytes=12,
        partitions=PARTITIONS,
        acks="all",
        linger_ms=LINGER_S * 1000,
        idempotence=True,
    )
    time_produce_rounds(
        benchmark,
        broker,
        make_round,
        values,
        topic_prefix=f"bench-keyed-{broker_name}-{client}-{variant}",
        partitions=PARTITIONS,
        rounds=ROUNDS,
        label=f"{client}[{variant}]",
    )
