"""Logging: one logger per component, none of them noisy.

A normal run (a producer sending many batches, a consumer reading them back,
a consumer group generation) logs nothing at WARNING or above, and its INFO
lines do not grow with the records or batches moved: a service can leave
pykaf at INFO.
"""

from __future__ import annotations

import logging

import pytest
import trio

import pykaf

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

# The loggers docs/observability.md lists.
DOCUMENTED = {
    "pykaf.net",
    "pykaf.cluster",
    "pykaf.producer",
    "pykaf.consumer",
    "pykaf.group",
    "pykaf.admin",
    "pykaf.portal",
    "pykaf.metrics",
    "pykaf.telemetry",
    "pykaf.testing.fake",
}


def pykaf_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.split(".")[0] == "pykaf"]


async def move(bootstrap: str, topic: str, batches: int) -> None:
    """``batches`` batches of 100 records out and back in."""
    async with pykaf.open_producer(bootstrap, linger=0, batch_records=100) as producer:
        for i in range(batches):
            await producer.send_batch(topic, [b"r%d" % j for j in range(100)], partition=i % 2)
    async with pykaf.open_consumer(bootstrap) as consumer:
        for p in (0, 1):
            pc = await consumer.consume_partition(topic, p, pykaf.OLDEST)
            got = 0
            with trio.fail_after(30):
                while got < batches // 2 * 100:
                    got += len(await pc.next_batch())


@pytest.mark.parametrize("name", ["kafka", "tansu", "mock"])
async def test_moving_records_is_quiet_at_info(
    name: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    broker = bc.broker_from(request, name)
    counts = []
    for batches in (4, 40):
        topic = bc.unique("quiet")
        await trio.to_thread.run_sync(broker.create, topic, 2)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="pykaf"):
            await move(broker.bootstrap, topic, batches)
        records = pykaf_records(caplog)
        assert records, "nothing was logged even at DEBUG: the capture is not working"
        loud = [r for r in records if r.levelno >= logging.WARNING]
        assert not loud, [r.getMessage() for r in loud]
        assert {r.name for r in records} <= DOCUMENTED
        counts.append(sum(r.levelno == logging.INFO for r in records))
    # ten times the batches, not more INFO lines
    assert counts[1] <= counts[0], counts


@pytest.mark.parametrize("name", ["kafka", "fake"])
async def test_a_group_generation_is_quiet_at_info(
    name: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    broker = bc.broker_from(request, name)
    topic = bc.unique("quiet-group")
    await trio.to_thread.run_sync(broker.create, topic, 3)
    async with pykaf.open_producer(broker.bootstrap) as producer:
        await producer.send_batch(topic, [b"x"] * 300)
    with caplog.at_level(logging.INFO, logger="pykaf"):
        async with pykaf.open_consumer_group(broker.bootstrap, bc.unique("g"), [topic]) as group:
            seen = 0
            with trio.fail_after(30):
                async for _record in group:
                    seen += 1
                    if seen == 300:
                        break
    records = pykaf_records(caplog)
    loud = [r for r in records if r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    assert {r.name for r in records} <= DOCUMENTED
    # a generation's join, sync and leave: a few lines, not one per record or fetch
    assert sum(r.levelno == logging.INFO for r in records) <= 10
