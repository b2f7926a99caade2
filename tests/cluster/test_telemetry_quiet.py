"""A broker without KIP-714's APIs (Tansu): the client asks nothing and works on."""

from __future__ import annotations

from typing import Any

import trio

from pykaf import open_consumer, open_producer

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
