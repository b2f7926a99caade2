"""KIP-714 client metrics against Apache Kafka and the fake cluster: subscribe, push, stop.

Kafka advertises GetTelemetrySubscriptions and PushTelemetry only with a
client telemetry exporter configured, so the Kafka side runs its own one-node
cluster with ``tests/data/telemetry/PushedMetricsRecorder.java`` (compiled
here) as its metrics reporter: it writes every push the broker accepted to a
file, which the tests decode. The fake cluster (``client_telemetry=True``)
keeps the pushes it accepted (``pushed_metrics()``), read here the same way.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from otlp_reader import read_metrics

from pykaf import open_consumer, open_consumer_group, open_producer
from pykaf import protocol as P
from pykaf._cluster.client import Client, open_client
from pykaf._cluster.otlp import CUMULATIVE, DELTA
from pykaf._cluster.telemetry import ZERO_UUID
from pykaf.testing import FakeClusterThread, KafkaCluster, TelemetryPush

SOURCE = Path(__file__).parents[1] / "data" / "telemetry" / "PushedMetricsRecorder.java"
CLIENT_METRICS = 16  # ConfigResource type of a client-metrics subscription
INTERVAL_MS = 300
PRODUCER = "org.apache.kafka.producer."
CONSUMER = "org.apache.kafka.consumer."
TOPICS = ("telemetry-events", "telemetry-group")  # only the group test writes to the second
#: (terminating, decoded metrics as ``otlp_reader.read_metrics`` gives them) per push
Pushes = list[tuple[bool, dict[str, Any]]]


@dataclass
class TelemetryCluster:
    """A broker that takes pushes, and every push it accepted so far."""

    name: str
    bootstrap: str
    all_pushes: Callable[[], Pushes]
    instance_ids: Callable[[], set[str]]

    def pushed(self, client_id: str) -> Pushes:
        """Every accepted push of ``client_id`` (by its OTLP resource), in order."""
        return [(t, d) for t, d in self.all_pushes() if d["resource"].get("client_id") == client_id]


def kafka_pushes(directory: Path) -> Pushes:
    """The reporter's files: <n>-<instance id>-<terminating>.bin, in order."""
    out = []
    files = sorted(directory.glob("*.bin"), key=lambda p: int(p.name.split("-", 1)[0]))
    for path in files:
        out.append((path.stem.endswith("-true"), read_metrics(path.read_bytes())))
    return out


def as_read(push: TelemetryPush) -> tuple[bool, dict[str, Any]]:
    """A fake cluster's push in ``read_metrics``' form."""
    temporality = {"delta": DELTA, "cumulative": CUMULATIVE}
    metrics = [
        {
            "name": m.name,
            "kind": m.kind,
            "value": m.value,
            "attributes": m.attributes,
            "start": m.start_ns,
            "time": m.time_ns,
            "temporality": temporality.get(m.temporality, 0),
            "monotonic": m.monotonic,
        }
        for m in push.metrics
    ]
    return push.terminating, {"resource": push.resource, "metrics": metrics}


@pytest.fixture(scope="module")
def kafka_telemetry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TelemetryCluster]:
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
        for topic in TOPICS:
            cluster.create_topic(topic, 1)
        yield TelemetryCluster(
            "kafka",
            cluster.bootstrap,
            lambda: kafka_pushes(pushes),
            lambda: {p.name.split("-", 1)[1].rsplit("-", 1)[0] for p in pushes.glob("*.bin")},
        )


@pytest.fixture(scope="module")
def fake_telemetry() -> Iterator[TelemetryCluster]:
    with FakeClusterThread(1, client_telemetry=True) as fake:
        for topic in TOPICS:
            fake.create_topic(topic, 1)
        yield TelemetryCluster(
            "fake",
            fake.bootstrap,
            # read from the tests' trio loop: the cluster itself, not the thread's controls
            lambda: [as_read(p) for p in fake.cluster.pushed_metrics()],
            lambda: {str(p.client_instance_id) for p in fake.cluster.pushed_metrics()},
        )
        failures = list(fake.cluster.handler_errors)
    if failures:
        pytest.fail(f"the fake cluster's request handlers raised: {failures!r}")


async def alter_subscription(bootstrap: str, name: str, values: dict[str, str | None]) -> None:
    """Set (a value) or delete (None) configs of client-metrics subscription ``name``."""
    R = P.IncrementalAlterConfigsRequest
    configs = [
        R.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
        for k, v in values.items()
    ]
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


async def subscribe(bootstrap: str, name: str, metrics: str, match: str) -> None:
    """Create (or change) client-metrics subscription ``name`` with IncrementalAlterConfigs."""
    values = {"metrics": metrics, "interval.ms": str(INTERVAL_MS), "match": match}
    await alter_subscription(bootstrap, name, dict(values))


async def unsubscribe(bootstrap: str, name: str) -> None:
    """Remove client-metrics subscription ``name`` (every config deleted)."""
    await alter_subscription(bootstrap, name, dict.fromkeys(("metrics", "interval.ms", "match")))


def counts(client: Client) -> dict[str, tuple[int, int]]:
    """(requests, failed requests) per telemetry API, over the client's connections."""
    out = {"GetTelemetrySubscriptions": (0, 0), "PushTelemetry": (0, 0)}
    for s in client.statistics().requests:
        if s.api in out:
            n, e = out[s.api]
            out[s.api] = (n + s.count, e + s.errors)
    return out


async def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await trio.sleep(0.1)


@pytest.fixture(scope="module", params=["kafka", "fake"])
def subscribed(request: pytest.FixtureRequest) -> TelemetryCluster:
    """Each broker in turn, with clients whose id starts ``tm-`` subscribed."""
    cluster: TelemetryCluster = request.getfixturevalue(f"{request.param}_telemetry")
    trio.run(
        subscribe, cluster.bootstrap, "pykaf-tests", f"{PRODUCER},{CONSUMER}", "client_id=tm-.*"
    )
    return cluster


async def test_producer_pushes_its_metrics(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_producer(bootstrap, client_id="tm-producer") as producer:
        for i in range(5):
            await producer.send("telemetry-events", b"v%d" % i)
        await wait_for(lambda: counts(producer.client)["PushTelemetry"][0] >= 2)
        c = counts(producer.client)
        assert c["GetTelemetrySubscriptions"][0] >= 1
        assert c["GetTelemetrySubscriptions"][1] == 0 and c["PushTelemetry"][1] == 0
        await wait_for(lambda: len(pushed("tm-producer")) >= 2)
    await wait_for(lambda: pushed("tm-producer")[-1][0])  # the terminating push
    got = pushed("tm-producer")
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


async def test_group_member_pushes_consumer_metrics(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
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
        await wait_for(lambda: len(pushed("tm-group")) >= 2)
        assert counts(member.client)["PushTelemetry"][1] == 0
    await wait_for(lambda: pushed("tm-group")[-1][0])
    last = {m["name"]: m for m in pushed("tm-group")[-1][1]["metrics"]}
    assert all(name.startswith(CONSUMER) for name in last)

    def total(name: str) -> int:
        return sum(
            m["value"] for _, d in pushed("tm-group") for m in d["metrics"] if m["name"] == name
        )

    assert total(CONSUMER + "fetch.manager.fetch.total") >= 1
    assert total(CONSUMER + "fetch.manager.records.consumed.total") == 3
    assert total(CONSUMER + "coordinator.rebalance.total") >= 1
    assert CONSUMER + "coordinator.commit.latency.avg" in last


async def test_consumer_pushes(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_consumer(bootstrap, client_id="tm-consumer") as consumer:
        await consumer.consume_partition("telemetry-events", 0)
        await wait_for(lambda: counts(consumer.client)["PushTelemetry"][0] >= 1)
        await wait_for(lambda: len(pushed("tm-consumer")) >= 1)
    names = {m["name"] for _, d in pushed("tm-consumer") for m in d["metrics"]}
    assert CONSUMER + "fetch.manager.records.lag.max" in names


async def test_option_off_asks_nothing(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_producer(bootstrap, client_id="tm-off", enable_metrics_push=False) as p:
        await p.send("telemetry-events", b"x")
        await trio.sleep(3 * INTERVAL_MS / 1000)
        assert counts(p.client) == {"GetTelemetrySubscriptions": (0, 0), "PushTelemetry": (0, 0)}
    assert pushed("tm-off") == []


async def test_no_subscription_asks_and_pushes_nothing(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_producer(bootstrap, client_id="unmatched") as p:
        await p.send("telemetry-events", b"x")
        await wait_for(lambda: counts(p.client)["GetTelemetrySubscriptions"][0] >= 1)
        await trio.sleep(3 * INTERVAL_MS / 1000)
        assert counts(p.client)["PushTelemetry"] == (0, 0)
    assert pushed("unmatched") == []


async def test_a_changed_subscription_is_followed(subscribed: TelemetryCluster) -> None:
    # Changing the subscriptions makes the next push UNKNOWN_SUBSCRIPTION_ID:
    # the client subscribes again at once and goes on pushing.
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_producer(bootstrap, client_id="tm-change") as producer:
        await wait_for(lambda: len(pushed("tm-change")) >= 1)
        before = counts(producer.client)["GetTelemetrySubscriptions"][0]
        await subscribe(bootstrap, "pykaf-change", PRODUCER + "record.", "client_id=tm-change")
        await wait_for(lambda: counts(producer.client)["GetTelemetrySubscriptions"][0] > before)
        n = len(pushed("tm-change"))
        await wait_for(lambda: len(pushed("tm-change")) > n)


async def test_instance_id_is_the_brokers(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    async with open_producer(bootstrap, client_id="tm-id") as producer:
        await wait_for(lambda: len(pushed("tm-id")) >= 1)
    assert producer.closed
    ids = subscribed.instance_ids()
    assert ids and str(ZERO_UUID) not in ids


async def test_pushes_what_is_asked_at_the_interval(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    await subscribe(bootstrap, "pykaf-narrow", PRODUCER + "record.", "client_id=narrow-.*")
    async with open_producer(bootstrap, client_id="narrow-1") as producer:
        await producer.send("telemetry-events", b"n")
        await wait_for(lambda: len(pushed("narrow-1")) >= 3)
    got = pushed("narrow-1")
    names = {m["name"] for _, d in got for m in d["metrics"]}
    assert PRODUCER + "record.send.total" in names
    assert all(name.startswith(PRODUCER + "record.") for name in names), names
    # Each push's points are taken at one moment: pushes are an interval apart at least.
    taken = [d["metrics"][0]["time"] for terminating, d in got if not terminating]
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(taken)]
    assert len(gaps_ms) >= 2 and min(gaps_ms) >= INTERVAL_MS * 0.95, gaps_ms
    assert sorted(gaps_ms)[len(gaps_ms) // 2] < INTERVAL_MS * 3 + 500, gaps_ms
    assert [t for t, _ in got].count(True) == 1 and got[-1][0]


async def test_pushing_stops_when_the_subscription_goes(subscribed: TelemetryCluster) -> None:
    bootstrap, pushed = subscribed.bootstrap, subscribed.pushed
    await subscribe(bootstrap, "pykaf-stop", PRODUCER, "client_id=stop-.*")
    async with open_producer(bootstrap, client_id="stop-1") as producer:
        await wait_for(lambda: len(pushed("stop-1")) >= 1)
        await unsubscribe(bootstrap, "pykaf-stop")
        # The next push names a subscription that is gone (UNKNOWN_SUBSCRIPTION_ID):
        # the client asks again at once, is asked for nothing, and pushes no more.
        await wait_for(lambda: counts(producer.client)["GetTelemetrySubscriptions"][0] >= 2)
        n, before = len(pushed("stop-1")), counts(producer.client)
        await trio.sleep(3 * INTERVAL_MS / 1000)
        assert counts(producer.client) == before
        assert len(pushed("stop-1")) == n
    assert not any(terminating for terminating, _ in pushed("stop-1"))
