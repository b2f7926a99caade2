"""Per-API request counters in ``Client.statistics()``, and the ``on_request`` hook."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._net.connection import _Slot
from pykaf.testing import open_fake_cluster


async def test_requests_are_counted_per_broker_and_api_and_reported_to_the_hook() -> None:
    events: list[pykaf.RequestEvent] = []
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("metered", 3)
        async with pykaf.open_client(cluster.bootstrap, on_request=events.append) as client:
            async with pykaf.open_producer(client, linger=0.001) as producer:
                for p in range(3):
                    await producer.send("metered", b"v", partition=p)
            stats = client.statistics().requests
    by_api: dict[str, list[pykaf.RequestStatistics]] = {}
    for s in stats:
        by_api.setdefault(s.api, []).append(s)
    assert {"ApiVersions", "Metadata", "Produce"} <= set(by_api)
    # three partitions, one per broker: every broker answered one Produce
    assert sorted(s.node_id for s in by_api["Produce"]) == [1, 2, 3]
    for s in stats:
        assert s.count >= 1 and s.errors == 0 and 0 <= s.mean_ms <= s.max_ms
    assert sum(s.count for s in stats) == len(events)
    produce = [e for e in events if e.api == "Produce"]
    assert len(produce) == 3 and all(e.api_key == 0 for e in produce)
    assert all(e.error is None and e.seconds >= 0 and e.bytes_sent > 0 for e in events)
    # each API's bytes are its requests' sizes on the wire, summed (a bootstrap
    # connection's events name node -1, its counters the node it turned out to be)
    for api, per_node in by_api.items():
        sizes = [e.bytes_sent for e in events if e.api == api]
        assert sum(s.bytes_sent for s in per_node) == sum(sizes) > 0, api
    assert all(s.bytes_sent > 0 for s in stats)


async def test_each_request_is_timed_from_its_own_send(kafka_or_fake_bootstrap: str) -> None:
    """No request can take longer than the whole run that made it.

    Kafka on loopback answers fast enough that the reader saw some answers
    before the sender stamped the request as sent: they were timed from
    trio's clock origin (hours).
    """
    events: list[pykaf.RequestEvent] = []
    bootstrap = kafka_or_fake_bootstrap
    started = trio.current_time()
    async with pykaf.open_client(bootstrap, on_request=events.append) as client:
        for _ in range(200):
            await client.refresh_metadata()
        stats = client.statistics().requests
    elapsed = trio.current_time() - started
    assert len(events) >= 200
    assert all(0 <= e.seconds <= elapsed for e in events), max(e.seconds for e in events)
    assert all(s.max_ms <= elapsed * 1000 for s in stats)


async def test_a_request_without_an_answer_is_reported_with_its_error() -> None:
    events: list[pykaf.RequestEvent] = []
    async with (
        open_fake_cluster(1) as cluster,
        pykaf.open_client(
            cluster.bootstrap, on_request=events.append, request_timeout=0.3
        ) as client,
    ):
        await client.refresh_metadata()
        cluster.set_rtt(1, 2000)
        conn = await client.any_connection()
        with pytest.raises(errors.KafkaTimeoutError):
            await conn.request(pykaf.protocol.MetadataRequest(topics=None))
        failed = [s for s in client.statistics().requests if s.errors]
    timed_out = [e for e in events if e.error is not None]
    assert len(timed_out) == 1 and timed_out[0].api == "Metadata"
    assert isinstance(timed_out[0].error, errors.KafkaTimeoutError)
    assert timed_out[0].seconds >= 0.25
    # the connection that failed is closed: its counts left the statistics with it
    assert failed == []


async def test_a_hook_that_raises_breaks_nothing(caplog: Any) -> None:
    def broken(event: pykaf.RequestEvent) -> None:
        raise RuntimeError("metrics backend down")

    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_client(cluster.bootstrap, on_request=broken) as client:
            await client.refresh_metadata()
            assert await client.partitions("t") == [0]
    assert "on_request hook raised" in caplog.text


def test_on_request_must_be_callable() -> None:
    with pytest.raises(errors.ConfigError, match="on_request"):
        pykaf.ClientConfig(on_request=42)  # type: ignore[arg-type]


async def test_hook_events_reach_a_trio_channel_without_blocking() -> None:
    """The pattern docs/observability.md shows: send_nowait into a memory channel."""
    send, receive = trio.open_memory_channel[pykaf.RequestEvent](1000)
    async with (
        open_fake_cluster(1) as cluster,
        pykaf.open_client(cluster.bootstrap, on_request=send.send_nowait) as client,
    ):
        await client.refresh_metadata()
    send.close()
    apis = {e.api async for e in receive}
    assert "Metadata" in apis


async def test_a_response_is_freed_once_read_without_the_garbage_collector() -> None:
    """A request's slot and its response refer to each other only until it is read.

    A cycle would keep every response (a Fetch's megabytes of record sets) until
    the next full collection, which a consumer's allocations rarely trigger.
    """
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("freed", 1)
        async with pykaf.open_client(cluster.bootstrap) as client:
            await client.refresh_metadata("freed")
            gc.collect()
            gc.disable()
            try:
                for _ in range(20):
                    await client.refresh_metadata("freed")
                slots = sum(isinstance(o, _Slot) for o in gc.get_objects())
            finally:
                gc.enable()
    assert slots <= 2


async def test_a_produce_answer_that_is_late_times_out_and_the_record_is_sent_again() -> None:
    # The producer's watchdog is not woken per request: it sleeps until the
    # oldest request in flight could be late, then fails its connection.
    events: list[pykaf.RequestEvent] = []
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, on_request=events.append, request_timeout=0.3, retry_backoff=0.01
        ) as producer:
            await producer.send("t", b"warm")
            cluster.set_rtt(1, 2000)

            async def answer_again_soon() -> None:
                while not any(isinstance(e.error, errors.KafkaTimeoutError) for e in events):
                    await trio.sleep(0.05)
                cluster.set_rtt(1, 0)

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(answer_again_soon)
                    md = await producer.send("t", b"late")
            stats = producer.statistics()
    timed_out = [e for e in events if isinstance(e.error, errors.KafkaTimeoutError)]
    assert timed_out and timed_out[0].api == "Produce"
    assert stats.retries >= 1 and stats.records_acked == 2
    assert md.offset >= 1
