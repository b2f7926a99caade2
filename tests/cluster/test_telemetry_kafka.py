"""KIP-714 client metrics against Apache Kafka: subscribe, push, stop.

Kafka offers GetTelemetrySubscriptions and PushTelemetry only with a client
telemetry exporter configured, so these tests run their own one-node cluster
with ``tests/data/telemetry/PushedMetricsRecorder.java`` (compiled here) as
its metrics reporter: it writes every push the broker accepted to a file,
which the tests decode.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from otlp_reader import read_metrics

from pykaf import open_consumer, open_consumer_group, open_producer
from pykaf import protocol as P
from pykaf._cluster.client import Client, open_client
from pykaf._cluster.otlp import DELTA
from pykaf._cluster.telemetry import ZERO_UUID
from pykaf.testing import KafkaCluster

SOURCE = Path(__file__).parents[1] / "data" / "telemetry" / "PushedMetricsRecorder.java"
CLIENT_METRICS = 16  # ConfigResource type of a client-metrics subscription
INTERVAL_MS = 500
PRODUCER = "org.apache.kafka.producer."
CONSUMER = "org.apache.kafka.consumer."


@pytest.fixture(scope="module")
def telemetry_kafka(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KafkaCluster, Path]]:
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("needs javac (a JDK) to build the broker's telemetry reporter")
    classes = tmp_path_factory.mktemp("reporter")
    pushes = tmp_path_factory.mktemp("pushes")
    probe = KafkaCluster(1)
    subprocess.run(
        [javac, "-d", str(classes), "-cp", probe.classpath, str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    configs = {"metric.reporters": "PushedMetricsRecorder", "pykaf.telemetry.dir": str(pushes)}
    with KafkaCluster(1, broker_configs=configs, plugins=[classes]) as cluster:
        cluster.create_topic("telemetry-events", 1)
        cluster.create_topic("telemetry-group", 1)  # only the group test writes here
        yield cluster, pushes


async def subscribe(bootstrap: str, name: str, metrics: str, match: str) -> None:
    """Create (or change) client-metrics subscription ``name`` with IncrementalAlterConfigs."""
    R = P.IncrementalAlterConfigsRequest
    values = {"metrics": metrics, "interval.ms": str(INTERVAL_MS), "match": match}
    configs = [R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in values.items()]
    request = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configs=configs
            )
        ]
    )
    async with open_client(bootstrap) as client:
        conn = await client.any_connection()
        response = await conn.request(request)
    assert [r.error_code for r in response.responses] == [0]


def counts(client: Client) -> dict[str, tuple[int, int]]:
    """(requests, failed requests) per telemetry API, over the client's connections."""
    out = {"GetTelemetrySubscriptions": (0, 0), "PushTelemetry": (0, 0)}
    for s in client.statistics().requests:
        if s.api in out:
            n, e = out[s.api]
            out[s.api] = (n + s.count, e + s.errors)
    return out


def pushed(directory: Path, client_id: str) -> list[tuple[bool, dict[str, Any]]]:
    """(terminating, decoded metrics) of every accepted push of ``client_id``, in order."""
    out = []
    files = sorted(directory.glob("*.bin"), key=lambda p: int(p.name.split("-", 1)[0]))
    for path in files:
        data = read_metrics(path.read_bytes())
        if data["resource"].get("client_id") == client_id:
            out.append((path.stem.endswith("-true"), data))
    return out


async def wait_for(check: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await trio.sleep(0.1)


@pytest.fixture(scope="module")
def subscribed(telemetry_kafka: tuple[KafkaCluster, Path]) -> tuple[str, Path]:
    cluster, pushes = telemetry_kafka
    trio.run(
        subscribe, cluster.bootstrap, "pykaf-tests", f"{PRODUCER},{CONSUMER}", "client_id=tm-.*"
    )
    return cluster.bootstrap, pushes


async def test_producer_pushes_its_metrics(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    async with open_producer(bootstrap, client_id="tm-producer") as producer:
        for i in range(5):
            await producer.send("telemetry-events", b"v%d" % i)
        await wait_for(lambda: counts(producer.client)["PushTelemetry"][0] >= 2)
        c = counts(producer.client)
        assert c["GetTelemetrySubscriptions"][0] >= 1
        assert c["GetTelemetrySubscriptions"][1] == 0 and c["PushTelemetry"][1] == 0
        await wait_for(lambda: len(pushed(pushes, "tm-producer")) >= 2)
    await wait_for(lambda: pushed(pushes, "tm-producer")[-1][0])  # the terminating push
    got = pushed(pushes, "tm-producer")
    assert [t for t, _ in got].count(True) == 1
    last = {m["name"]: m for m in got[-1][1]["metrics"]}
    assert got[-1][1]["resource"]["role"] == "producer"
    assert all(name.startswith(PRODUCER) for name in last)
    sent = last[PRODUCER + "record.send.total"]
    assert sent["kind"] == "sum" and sent["monotonic"]
    # Kafka asks for deltas (its default): each push counts what is new since
    # the previous one, so the pushes add up to the five records.
    assert sent["temporality"] == DELTA
    deltas = [
        m["value"]
        for _, d in got
        for m in d["metrics"]
        if m["name"] == PRODUCER + "record.send.total"
    ]
    assert sum(deltas) == 5 and all(v >= 0 for v in deltas)
    creations = [
        m["value"]
        for _, d in got
        for m in d["metrics"]
        if m["name"] == PRODUCER + "connection.creation.total"
    ]
    assert sum(creations) >= 1
    assert any(m["attributes"].get("node_id") == "1" for m in got[-1][1]["metrics"])
    assert PRODUCER + "node.request.latency.avg" in last


async def test_group_member_pushes_consumer_metrics(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    group = f"tm-group-{time.time_ns()}"
    async with open_producer(bootstrap, enable_metrics_push=False) as producer:
        for i in range(3):
            await producer.send("telemetry-group", b"g%d" % i)
    async with open_consumer_group(
        bootstrap,
        group,
        ["telemetry-group"],
        client_id="tm-group",
        auto_offset_reset="earliest",
        auto_commit_interval=0.2,
    ) as member:
        seen = 0
        async for _record in member:
            seen += 1
            if seen == 3:
                break
        await wait_for(lambda: len(pushed(pushes, "tm-group")) >= 2)
        assert counts(member.client)["PushTelemetry"][1] == 0
    await wait_for(lambda: pushed(pushes, "tm-group")[-1][0])
    last = {m["name"]: m for m in pushed(pushes, "tm-group")[-1][1]["metrics"]}
    assert all(name.startswith(CONSUMER) for name in last)

    def total(name: str) -> int:
        return sum(
            m["value"]
            for _, d in pushed(pushes, "tm-group")
            for m in d["metrics"]
            if m["name"] == name
        )

    assert total(CONSUMER + "fetch.manager.fetch.total") >= 1
    assert total(CONSUMER + "fetch.manager.records.consumed.total") == 3
    assert total(CONSUMER + "coordinator.rebalance.total") >= 1
    assert CONSUMER + "coordinator.commit.latency.avg" in last


async def test_consumer_pushes(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    async with open_consumer(bootstrap, client_id="tm-consumer") as consumer:
        await consumer.consume_partition("telemetry-events", 0)
        await wait_for(lambda: counts(consumer.client)["PushTelemetry"][0] >= 1)
        await wait_for(lambda: len(pushed(pushes, "tm-consumer")) >= 1)
    names = {m["name"] for _, d in pushed(pushes, "tm-consumer") for m in d["metrics"]}
    assert CONSUMER + "fetch.manager.records.lag.max" in names


async def test_option_off_asks_nothing(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    async with open_producer(bootstrap, client_id="tm-off", enable_metrics_push=False) as p:
        await p.send("telemetry-events", b"x")
        await trio.sleep(3 * INTERVAL_MS / 1000)
        assert counts(p.client) == {"GetTelemetrySubscriptions": (0, 0), "PushTelemetry": (0, 0)}
    assert pushed(pushes, "tm-off") == []


async def test_no_subscription_asks_and_pushes_nothing(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    async with open_producer(bootstrap, client_id="unmatched") as p:
        await p.send("telemetry-events", b"x")
        await wait_for(lambda: counts(p.client)["GetTelemetrySubscriptions"][0] >= 1)
        await trio.sleep(3 * INTERVAL_MS / 1000)
        assert counts(p.client)["PushTelemetry"] == (0, 0)
    assert pushed(pushes, "unmatched") == []


async def test_a_changed_subscription_is_followed(subscribed: tuple[str, Path]) -> None:
    # Changing the subscriptions makes the next push UNKNOWN_SUBSCRIPTION_ID:
    # the client subscribes again at once and goes on pushing.
    bootstrap, pushes = subscribed
    async with open_producer(bootstrap, client_id="tm-change") as producer:
        await wait_for(lambda: len(pushed(pushes, "tm-change")) >= 1)
        before = counts(producer.client)["GetTelemetrySubscriptions"][0]
        await subscribe(bootstrap, "pykaf-change", PRODUCER + "record.", "client_id=tm-change")
        await wait_for(lambda: counts(producer.client)["GetTelemetrySubscriptions"][0] > before)
        n = len(pushed(pushes, "tm-change"))
        await wait_for(lambda: len(pushed(pushes, "tm-change")) > n)


async def test_instance_id_is_the_brokers(subscribed: tuple[str, Path]) -> None:
    bootstrap, pushes = subscribed
    async with open_producer(bootstrap, client_id="tm-id") as producer:
        await wait_for(lambda: len(pushed(pushes, "tm-id")) >= 1)
    assert producer.closed
    ids = {p.name.split("-", 1)[1].rsplit("-", 1)[0] for p in pushes.glob("*.bin")}
    assert ids and str(ZERO_UUID) not in ids
