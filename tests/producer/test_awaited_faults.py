"""Awaited sends when things go wrong, on trio and the fake cluster.

An awaited ``send()`` takes the shortest path (its request written in the
call itself, ``BrokerSink.write_now``; its answer settled by the connection's
reader; failures and late answers left to the sink's watchdog). A connection
that drops with requests in flight, and a producer that closes while sends
wait, must still leave every record retried in order or failed: never lost,
never left waiting. ``pykaf.aio``'s side of the same is in
``tests/aio/test_runner.py``.
"""

from __future__ import annotations

import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf.testing import open_fake_cluster

HOUR = 3600.0
GUARD = 60.0  # far shorter than the linger, long enough for a loaded machine
#: Longer than GUARD: a failure must be settled when it happens, not when the
#: watchdog's request timeout would have found it.
TIMEOUT = 2 * GUARD
PRODUCE = pykaf.protocol.ProduceRequest.API_KEY


async def values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of ``topic``'s partition 0, oldest first."""
    out: list[bytes] = []
    async with pykaf.open_consumer(bootstrap) as consumer:
        end = await consumer.client.get_offset(topic, 0, pykaf.NEWEST)
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        with trio.fail_after(GUARD):
            while pc.position < end:
                out += [r.value for r in await pc.next_batch()]
    return out


async def test_a_lone_awaited_send_whose_answer_is_lost_is_sent_again_once() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, linger=HOUR, request_timeout=TIMEOUT, retry_backoff=0.01
        ) as producer:
            await producer.send("t", b"warm")
            # Nothing in flight: the request goes out in the send() call; the
            # broker writes it, then drops the connection instead of answering.
            cluster.lose_responses(PRODUCE, 1)
            with trio.fail_after(GUARD):
                md = await producer.send("t", b"lost")
            stats = producer.statistics()
        assert md.offset == 1
        assert stats.retries >= 1 and stats.records_failed == 0
        assert await values(cluster.bootstrap, "t") == [b"warm", b"lost"]


async def test_sends_in_flight_as_the_connection_drops_are_each_delivered_once_in_order() -> None:
    senders, each = 6, 20
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, linger=HOUR, request_timeout=TIMEOUT, retry_backoff=0.01
        ) as producer:
            await producer.send("t", b"warm")
            cluster.set_rtt(1, 5)  # answers slow enough for requests to pile up behind one
            seen = 0

            def lose_the_third(request: object) -> bool:
                nonlocal seen
                seen += 1
                return seen == 3

            cluster.lose_responses(PRODUCE, 1, match=lose_the_third)
            offsets: dict[int, list[int]] = {s: [] for s in range(senders)}

            async def sender(s: int) -> None:
                for i in range(each):
                    md = await producer.send("t", b"%d-%d" % (s, i))
                    offsets[s].append(md.offset)

            with trio.fail_after(GUARD):
                async with trio.open_nursery() as nursery:
                    for s in range(senders):
                        nursery.start_soon(sender, s)
            stats = producer.statistics()
        assert stats.retries >= 1 and stats.records_failed == 0
        # Each record once, and each sender's records in the order it sent them.
        assert sorted(o for per in offsets.values() for o in per) == list(
            range(1, 1 + senders * each)
        )
        assert all(per == sorted(per) for per in offsets.values())
        log = await values(cluster.bootstrap, "t")
        assert len(log) == 1 + senders * each
        for s in range(senders):
            mine = [v for v in log if v.startswith(b"%d-" % s)]
            assert mine == [b"%d-%d" % (s, i) for i in range(each)]


async def test_awaited_sends_waiting_as_the_producer_closes_are_delivered() -> None:
    got: list[pykaf.RecordMetadata] = []
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with (
            trio.open_nursery() as nursery,
            pykaf.open_producer(cluster.bootstrap, linger=HOUR) as producer,
        ):
            await producer.send("t", b"warm")
            cluster.set_rtt(1, 50)

            async def send_one(i: int) -> None:
                got.append(await producer.send("t", b"%d" % i))

            for i in range(5):
                nursery.start_soon(send_one, i)
            await trio.testing.wait_all_tasks_blocked()  # each waits for its answer
        # The producer closed: it delivered what the senders were waiting for.
        assert sorted(md.offset for md in got) == [1, 2, 3, 4, 5]


async def test_awaited_sends_that_cannot_be_delivered_fail_as_the_producer_closes() -> None:
    failed: list[BaseException] = []
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        with trio.fail_after(GUARD):
            async with (
                trio.open_nursery() as nursery,
                pykaf.open_producer(
                    cluster.bootstrap, linger=HOUR, delivery_timeout=1.0, retry_backoff=0.05
                ) as producer,
            ):
                await producer.send("t", b"warm")
                cluster.set_rtt(1, 200)

                async def send_one(i: int) -> None:
                    try:
                        await producer.send("t", b"%d" % i)
                    except errors.PykafError as exc:
                        failed.append(exc)

                for i in range(5):
                    nursery.start_soon(send_one, i)
                await trio.testing.wait_all_tasks_blocked()
                cluster.broker_down(1)  # the requests in flight fail, then every retry
    # None is left waiting: each send raised (the records timed out, or the close failed them).
    assert len(failed) == 5
