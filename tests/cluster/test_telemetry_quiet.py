"""KIP-714 on the second-opinion brokers.

Tansu lacks the APIs: the client asks nothing and works on. librdkafka's mock
speaks them: no metrics asked means no push; asked, pushes go out, and its
injected errors are followed (subscribe again, or stop).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio

from pykaf import errors, open_consumer, open_producer
from pykaf import protocol as P
from pykaf.testing import MockCluster

TELEMETRY = {"GetTelemetrySubscriptions", "PushTelemetry"}


async def test_quiet_on_a_broker_without_telemetry(tansu_broker: Any) -> None:
    topic = "telemetry-quiet"
    tansu_broker.create(topic, 1)
    async with open_producer(tansu_broker.bootstrap, client_id="quiet") as producer:
        await producer.send(topic, b"x")
        await trio.sleep(0.5)  # the telemetry task has looked at the broker by now
        apis = {s.api for s in producer.client.statistics().requests}
        assert "Produce" in apis and not apis & TELEMETRY
    async with open_consumer(tansu_broker.bootstrap, client_id="quiet") as consumer:
        pc = await consumer.consume_partition(topic, 0, 0)
        record = await pc.__anext__()
        assert record.value == b"x"
        apis = {s.api for s in consumer.client.statistics().requests}
        assert not apis & TELEMETRY


def telemetry_counts(client: Any) -> dict[str, int]:
    out = dict.fromkeys(TELEMETRY, 0)
    for s in client.statistics().requests:
        if s.api in out:
            out[s.api] += s.count
    return out


async def wait_until(check: Any, seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.05)


@pytest.fixture
def mock_telemetry() -> Iterator[MockCluster]:
    with MockCluster(1) as cluster:
        if not cluster.supports("rd_kafka_mock_telemetry_set_requested_metrics"):
            pytest.skip("this librdkafka's mock cluster has no KIP-714 subscription")
        cluster.create_topic("t", 1)
        yield cluster


async def test_mock_without_a_subscription_gets_no_push(mock_telemetry: MockCluster) -> None:
    # librdkafka's mock speaks KIP-714 but requests no metrics by default.
    async with open_producer(mock_telemetry.bootstrap, client_id="m") as producer:
        await producer.send("t", b"x")
        await wait_until(lambda: telemetry_counts(producer.client)["GetTelemetrySubscriptions"])
        await trio.sleep(0.5)
        assert telemetry_counts(producer.client)["PushTelemetry"] == 0


async def test_mock_pushes_and_follows_errors(mock_telemetry: MockCluster) -> None:
    mock_telemetry.set_telemetry(["org.apache.kafka.producer."], push_interval_ms=100)
    push = P.PushTelemetryRequest.API_KEY
    async with open_producer(mock_telemetry.bootstrap, client_id="m") as producer:
        await producer.send("t", b"x")
        counts = lambda: telemetry_counts(producer.client)  # noqa: E731
        await wait_until(lambda: counts()["PushTelemetry"] >= 2)
        # UNKNOWN_SUBSCRIPTION_ID: subscribe again at once, then push on.
        subscribed = counts()["GetTelemetrySubscriptions"]
        mock_telemetry.push_request_errors(push, errors.UnknownSubscriptionIdError.code)
        await wait_until(lambda: counts()["GetTelemetrySubscriptions"] > subscribed)
        pushed = counts()["PushTelemetry"]
        await wait_until(lambda: counts()["PushTelemetry"] >= pushed + 2)
        # INVALID_RECORD: telemetry stops for this client, the producer works on.
        mock_telemetry.push_request_errors(push, errors.InvalidRecordError.code)
        pushed = counts()["PushTelemetry"]
        await wait_until(lambda: counts()["PushTelemetry"] > pushed)
        stopped = counts()
        await trio.sleep(0.6)  # six push intervals
        assert counts() == stopped
        await producer.send("t", b"y")
