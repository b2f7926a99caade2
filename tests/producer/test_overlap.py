"""A loop of ``send_nowait`` without a checkpoint sends while it runs (issue 33 §1).

Neither the sinks' sender tasks nor the connections' readers run until the
loop yields; so the loop's own calls write the requests of the batches it
fills and read the answers already in (``Sinks.pump``), up to
``max_in_flight`` requests per broker at a time. The fake cluster runs in a
thread of its own here (:class:`FakeClusterThread`), so that it answers while
the loop runs; the loop sleeps now and then with ``time.sleep``, which is no
checkpoint, to give it the time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

import pykaf
from pykaf.testing import FakeClusterThread

GUARD = 60.0
HOUR = 3600.0
PRODUCE = pykaf.protocol.ProduceRequest.API_KEY
RECORDS = 20_000
#: Small batches (about 100 records of 100 B): the loop fills many. (The
#: staged records are appended every 1,024 to 4,096 records.)
BATCH_BYTES = 12_000


@pytest.fixture
def cluster() -> Iterator[FakeClusterThread]:
    with FakeClusterThread(1) as c:
        c.create_topic("t", 1)
        yield c
        errors = list(c.cluster.handler_errors)
    assert not errors, errors


def value(i: int) -> bytes:
    return b"%06d" % i + b"x" * 94


def tight_loop(send: Callable[..., None], n: int, **options: Any) -> None:
    """``n`` records, no checkpoint; a pause (``time.sleep``) every 500 for the broker."""
    for i in range(n):
        send("t", value(i), **options)
        if i % 500 == 499:
            time.sleep(0.005)


async def log_of(bootstrap: str) -> list[bytes]:
    """Every value of partition 0 of ``t``, oldest first."""
    out: list[bytes] = []
    async with pykaf.open_consumer(bootstrap) as consumer:
        end = await consumer.client.get_offset("t", 0, pykaf.NEWEST)
        pc = await consumer.consume_partition("t", 0, pykaf.OLDEST)
        with trio.fail_after(GUARD):
            while pc.position < end:
                out += [r.value for r in await pc.next_batch()]
    return out


def options(**more: Any) -> dict[str, Any]:
    return {
        "linger": HOUR,
        "batch_bytes": BATCH_BYTES,
        "flush_bytes": BATCH_BYTES,
        "max_message_bytes": BATCH_BYTES,
        "retry_backoff": 0.01,
        **more,
    }


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "per-record"])
async def test_a_loop_without_checkpoints_has_its_requests_answered_while_it_runs(
    cluster: FakeClusterThread, staged: bool
) -> None:
    # Staged: plain records (the compiled path); per-record: with a callback
    # and a header, each record appended by send_nowait's own path.
    acked: list[int] = []

    def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        assert error is None
        acked.append(md.offset)

    extra: dict[str, Any] = {} if staged else {"headers": [("h", b"1")], "on_delivery": on_delivery}
    async with pykaf.open_producer(cluster.bootstrap, **options()) as producer:
        await producer.send("t", b"warm")
        sent = producer.statistics().brokers[1].requests
        tight_loop(producer.send_nowait, RECORDS, **extra)
        # No checkpoint yet: what the loop's own calls wrote and had answered.
        during = producer.statistics()
        with trio.fail_after(GUARD):
            await producer.flush()
    # More requests than max_in_flight (5) went out: answers were read in the loop too.
    assert during.brokers[1].requests - sent > 5
    assert during.records_acked > 0
    assert await log_of(cluster.bootstrap) == [b"warm"] + [value(i) for i in range(RECORDS)]
    if not staged:
        assert acked == list(range(1, RECORDS + 1))


async def test_a_connection_dropped_under_the_loop_loses_nothing_and_keeps_the_order(
    cluster: FakeClusterThread,
) -> None:
    seen = 0

    def the_third(request: object) -> bool:
        nonlocal seen
        seen += 1
        return seen == 3

    async with pykaf.open_producer(cluster.bootstrap, **options()) as producer:
        await producer.send("t", b"warm")
        # The third request of the loop is written by the broker, then its
        # connection drops instead of the answer: every request behind it fails.
        await trio.to_thread.run_sync(lambda: cluster.lose_responses(PRODUCE, 1, the_third))
        tight_loop(producer.send_nowait, RECORDS)
        seen_in_the_loop = seen  # (counted by the broker's thread)
        with trio.fail_after(GUARD):
            await producer.flush()
        stats = producer.statistics()
    assert seen_in_the_loop == 3  # the connection dropped under the loop, which went on
    assert stats.retries >= 1 and stats.records_failed == 0
    # Each record once, in the order sent (the broker dropped the duplicates).
    assert await log_of(cluster.bootstrap) == [b"warm"] + [value(i) for i in range(RECORDS)]


async def test_the_loop_writes_no_more_than_max_in_flight_when_no_answer_comes(
    cluster: FakeClusterThread,
) -> None:
    await trio.to_thread.run_sync(cluster.set_rtt, 1, 500)  # ms: none while the loop runs
    async with pykaf.open_producer(cluster.bootstrap, **options(max_in_flight=3)) as producer:
        await producer.send("t", b"warm")
        tight_loop(producer.send_nowait, 6_000)
        during = producer.statistics()
        await trio.to_thread.run_sync(cluster.set_rtt, 1, 0)
        with trio.fail_after(GUARD):
            await producer.flush()
    assert during.in_flight == 3
    assert await log_of(cluster.bootstrap) == [b"warm"] + [value(i) for i in range(6_000)]


async def test_acks_0_leaves_the_sending_to_the_sender_task(cluster: FakeClusterThread) -> None:
    async with pykaf.open_producer(
        cluster.bootstrap, **options(acks=0, idempotence=False)
    ) as producer:
        await producer.send("t", b"warm")
        sent = producer.statistics().brokers[1].requests
        tight_loop(producer.send_nowait, 6_000)
        during = producer.statistics()
        with trio.fail_after(GUARD):
            await producer.flush()
    assert during.brokers[1].requests == sent  # nothing comes back to free a slot
    assert len(await log_of(cluster.bootstrap)) == 6_001
