"""KIP-714 telemetry without a broker: the OTLP writer, subscriptions, errors, payloads."""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

import pytest
import trio
from otlp_reader import read_metrics

from pykaf import _compression, errors
from pykaf import protocol as P
from pykaf._cluster import telemetry as T
from pykaf._cluster.otlp import CUMULATIVE, DELTA, MetricPoint, encode_metrics_data
from pykaf._cluster.telemetry import ZERO_UUID

POINTS = [
    MetricPoint("org.apache.kafka.producer.record.send.total", 42, True, {}, "records sent"),
    MetricPoint(
        "org.apache.kafka.producer.node.request.latency.avg", 1.25, False, {"node_id": "3"}
    ),
    MetricPoint("org.apache.kafka.producer.connection.count", 0),
    MetricPoint("negative", -7, True),
]


def encode(points: list[MetricPoint], temporality: int = CUMULATIVE) -> bytes:
    return encode_metrics_data(
        points,
        resource={"client_id": "c1", "role": "producer"},
        scope="pykaf",
        scope_version="9.9",
        start_ns=1_000,
        time_ns=2_000_000_000_123,
        temporality=temporality,
    )


def test_otlp_read_back_independently() -> None:
    data = read_metrics(encode(POINTS, DELTA))
    assert data["resource"] == {"client_id": "c1", "role": "producer"}
    assert data["scope"] == ("pykaf", "9.9")
    by_name = {m["name"]: m for m in data["metrics"]}
    assert list(by_name) == [p.name for p in POINTS]
    sent = by_name["org.apache.kafka.producer.record.send.total"]
    assert sent["kind"] == "sum" and sent["value"] == 42 and sent["monotonic"]
    assert sent["temporality"] == DELTA and sent["start"] == 1_000
    assert sent["time"] == 2_000_000_000_123
    latency = by_name["org.apache.kafka.producer.node.request.latency.avg"]
    assert latency["kind"] == "gauge" and latency["value"] == 1.25
    assert latency["attributes"] == {"node_id": "3"} and latency["start"] == 0
    assert by_name["org.apache.kafka.producer.connection.count"]["value"] == 0
    assert by_name["negative"]["value"] == -7


def test_otlp_decodes_with_opentelemetry_proto() -> None:
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    msg = metrics_pb2.MetricsData.FromString(encode(POINTS, CUMULATIVE))
    (rm,) = msg.resource_metrics
    assert {a.key: a.value.string_value for a in rm.resource.attributes} == {
        "client_id": "c1",
        "role": "producer",
    }
    (sm,) = rm.scope_metrics
    assert (sm.scope.name, sm.scope.version) == ("pykaf", "9.9")
    m = {x.name: x for x in sm.metrics}
    sent = m["org.apache.kafka.producer.record.send.total"]
    assert sent.WhichOneof("data") == "sum" and sent.description == "records sent"
    assert sent.sum.is_monotonic
    assert sent.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    (dp,) = sent.sum.data_points
    assert dp.as_int == 42 and dp.start_time_unix_nano == 1_000
    assert dp.time_unix_nano == 2_000_000_000_123
    gauge = m["org.apache.kafka.producer.node.request.latency.avg"]
    assert gauge.WhichOneof("data") == "gauge"
    (gp,) = gauge.gauge.data_points
    assert gp.as_double == 1.25
    assert {a.key: a.value.string_value for a in gp.attributes} == {"node_id": "3"}
    assert m["negative"].sum.data_points[0].as_int == -7


def sub(**kw: Any) -> T.Subscription:
    base: dict[str, Any] = {
        "subscription_id": 7,
        "push_interval_ms": 1000,
        "telemetry_max_bytes": 1 << 20,
        "delta_temporality": False,
        "accepted_compression_types": (),
        "requested_metrics": ("org.apache.kafka.producer.",),
    }
    return T.Subscription(**{**base, **kw})


def test_requested_prefixes() -> None:
    s = sub(requested_metrics=("org.apache.kafka.producer.node.", "org.apache.kafka.consumer"))
    assert s.wants("org.apache.kafka.producer.node.request.latency.avg")
    assert s.wants("org.apache.kafka.consumer.poll.idle.ratio.avg")
    assert not s.wants("org.apache.kafka.producer.record.send.total")
    assert sub(requested_metrics=("",)).wants("anything")
    assert sub(requested_metrics=("*",)).wants("anything")
    assert not sub(requested_metrics=()).wants("anything")


def test_compression_is_the_first_accepted_one_pykaf_writes() -> None:
    assert sub(accepted_compression_types=()).compression == 0
    assert sub(accepted_compression_types=(4, 3, 1, 2)).compression == 4
    assert sub(accepted_compression_types=(9, 1)).compression == 1
    assert sub(accepted_compression_types=(9,)).compression == 0


@pytest.mark.parametrize(
    ("error", "delay"),
    [
        (errors.UnknownSubscriptionIdError, 0),
        (errors.UnsupportedCompressionTypeError, 0),
        (errors.TelemetryTooLargeError, 1000),
        (errors.ThrottlingQuotaExceededError, 1000),
    ],
)
def test_error_delays(error: type[errors.KafkaError], delay: int) -> None:
    assert T.next_delay_ms(error("x"), 1000) == delay


def test_error_delay_without_interval_is_the_default() -> None:
    assert T.next_delay_ms(errors.TelemetryTooLargeError("x"), 0) == T.DEFAULT_INTERVAL_MS


@pytest.mark.parametrize(
    "error",
    [
        errors.InvalidRequestError,
        errors.InvalidRecordError,
        errors.UnsupportedVersionError,
        errors.UnknownServerError,
    ],
)
def test_errors_that_stop(error: type[errors.KafkaError]) -> None:
    with pytest.raises(T.Stopped):
        T.next_delay_ms(error("x"), 1000)


class Values:
    def __init__(self) -> None:
        self.sent = 10

    def __call__(self) -> list[MetricPoint]:
        return [
            MetricPoint("org.apache.kafka.producer.record.send.total", self.sent, True),
            MetricPoint("org.apache.kafka.producer.connection.count", 2),
            MetricPoint("org.apache.kafka.consumer.request.total", 5, True),
        ]


def telemetry(values: Values) -> T.Telemetry:
    return T.Telemetry(cast(Any, None), values, {"client_id": "c"})


def test_payload_filters_and_keeps_cumulative_values() -> None:
    values = Values()
    t = telemetry(values)
    data, kept = t.payload(sub(), 5)
    got = {m["name"]: m for m in read_metrics(data)["metrics"]}
    assert set(got) == {
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.connection.count",
    }
    assert got["org.apache.kafka.producer.record.send.total"]["temporality"] == CUMULATIVE
    assert got["org.apache.kafka.producer.record.send.total"]["value"] == 10
    assert kept == {("org.apache.kafka.producer.record.send.total", ()): 10}


def test_payload_deltas_after_a_push() -> None:
    values = Values()
    t = telemetry(values)
    s = sub(delta_temporality=True)
    data, kept = t.payload(s, 5)
    first = {m["name"]: m for m in read_metrics(data)["metrics"]}
    assert first["org.apache.kafka.producer.record.send.total"]["value"] == 10
    t.pushed(kept, 5)  # what a successful push keeps
    values.sent = 25
    data, kept = t.payload(s, 6)
    second = {m["name"]: m for m in read_metrics(data)["metrics"]}
    sent = second["org.apache.kafka.producer.record.send.total"]
    assert sent["value"] == 15 and sent["temporality"] == DELTA
    # gauges are never deltas
    assert second["org.apache.kafka.producer.connection.count"]["value"] == 2
    # a counter that went down was reset (a closed partition or connection): all new
    t.pushed(kept, 6)
    values.sent = 4
    data, _ = t.payload(s, 7)
    third = {m["name"]: m for m in read_metrics(data)["metrics"]}
    assert third["org.apache.kafka.producer.record.send.total"]["value"] == 4


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_payload_compressed(codec: int) -> None:
    t = telemetry(Values())
    data, _ = t.payload(sub(accepted_compression_types=(codec,)), 5)
    raw = _compression.decompress(codec, data)
    assert len(read_metrics(raw)["metrics"]) == 2


def test_payload_trimmed_to_the_brokers_limit() -> None:
    t = telemetry(Values())
    full, _ = t.payload(sub(), 5)
    data, _ = t.payload(sub(telemetry_max_bytes=len(full) - 1), 5)
    assert len(data) < len(full)
    assert len(read_metrics(data)["metrics"]) == 1


# -- the loop, against a scripted broker --------------------------------------------

BROKER_ID = UUID("12345678-1234-5678-1234-567812345678")


class ScriptedConnection:
    """Answers telemetry requests from a script; keeps what it was sent, and when."""

    broken = False

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.sent: list[tuple[float, Any]] = []

    def version_for(self, api_key: int) -> int:
        return 0

    async def request(self, request: Any) -> Any:
        self.sent.append((trio.current_time(), request))
        if not self.script:
            await trio.sleep_forever()
        return self.script.pop(0)


class ScriptedClient:
    def __init__(self, conn: ScriptedConnection) -> None:
        self.conn = conn

    async def any_connection(self) -> ScriptedConnection:
        return self.conn


def subscription(**kw: Any) -> Any:
    base: dict[str, Any] = {
        "client_instance_id": BROKER_ID,
        "subscription_id": 1,
        "push_interval_ms": 1000,
        "telemetry_max_bytes": 1 << 20,
        "delta_temporality": True,
        "requested_metrics": ["org.apache.kafka.producer."],
    }
    return P.GetTelemetrySubscriptionsResponse(**{**base, **kw})


def pushed_value(request: Any) -> int:
    (m,) = [
        m
        for m in read_metrics(request.metrics)["metrics"]
        if m["name"] == "org.apache.kafka.producer.record.send.total"
    ]
    return int(m["value"])


async def test_loop_follows_the_broker(autojump_clock: Any) -> None:
    values = Values()
    conn = ScriptedConnection(
        [
            subscription(),
            P.PushTelemetryResponse(),  # accepted: 10
            P.PushTelemetryResponse(error_code=errors.TelemetryTooLargeError.code),
            subscription(client_instance_id=ZERO_UUID),  # the same subscription again
            P.PushTelemetryResponse(),
            P.PushTelemetryResponse(error_code=errors.UnknownSubscriptionIdError.code),
            subscription(client_instance_id=ZERO_UUID, subscription_id=2),
            P.PushTelemetryResponse(),
        ]
    )
    t = T.Telemetry(cast(Any, ScriptedClient(conn)), values, {"client_id": "c"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(t.run)
        while len(conn.sent) < 2:  # the first push
            await trio.sleep(0.01)
        values.sent = 25
        await trio.sleep(20)
        await t.aclose()
    kinds = [type(r).__name__.removesuffix("Request") for _, r in conn.sent]
    get, push = "GetTelemetrySubscriptions", "PushTelemetry"
    # ... and a push the script leaves unanswered, cancelled by the close
    assert kinds == [get, push, push, get, push, push, get, push, push, push]
    requests = [r for _, r in conn.sent]
    times = [when for when, _ in conn.sent]
    # the instance id is zero until the broker gave one, then the broker's
    assert requests[0].client_instance_id == ZERO_UUID
    assert all(r.client_instance_id == BROKER_ID for r in requests[1:])
    # the first push between half and one and a half intervals after subscribing
    assert 0.5 <= times[1] - times[0] <= 1.5
    assert pushed_value(requests[1]) == 10  # (values.sent became 25 after it)
    # TELEMETRY_TOO_LARGE: subscribe again after the interval; the same
    # subscription keeps its deltas, counted from the last accepted push
    assert times[3] - times[2] == pytest.approx(1.0)
    assert pushed_value(requests[2]) == 15
    assert pushed_value(requests[4]) == 15
    assert pushed_value(requests[5]) == 0
    # UNKNOWN_SUBSCRIPTION_ID: subscribe again at once; a new subscription
    # starts its deltas afresh
    assert times[6] - times[5] == pytest.approx(0.0)
    assert requests[7].subscription_id == 2 and pushed_value(requests[7]) == 25
    # then, on close, the terminating push (never answered here: given up after a while)
    assert not any(getattr(r, "terminating", False) for r in requests[:-1])
    assert requests[-1].terminating
    assert times[-1] - times[-2] < 20 and not requests[-2].terminating
    stats = t.statistics()
    assert stats.client_instance_id == BROKER_ID and stats.stopped is None
    assert stats.subscriptions == 3 and stats.pushes == 5 and stats.errors == 2


async def test_loop_stops_on_invalid_record(autojump_clock: Any) -> None:
    conn = ScriptedConnection(
        [subscription(), P.PushTelemetryResponse(error_code=errors.InvalidRecordError.code)]
    )
    t = T.Telemetry(cast(Any, ScriptedClient(conn)), Values(), {"client_id": "c"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(t.run)
        await trio.sleep(60)
        await t.aclose()  # no terminating push after a stop
    assert len(conn.sent) == 2
    assert t.statistics().stopped is not None


async def test_no_metrics_asked_means_asking_again_later(autojump_clock: Any) -> None:
    conn = ScriptedConnection([subscription(requested_metrics=[])] * 3)
    t = T.Telemetry(cast(Any, ScriptedClient(conn)), Values(), {"client_id": "c"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(t.run)
        await trio.sleep(2.5)
        await t.aclose()
    kinds = {type(r).__name__ for _, r in conn.sent}
    assert kinds == {"GetTelemetrySubscriptionsRequest"} and len(conn.sent) == 3


async def test_throttle_time_is_waited_out(autojump_clock: Any) -> None:
    conn = ScriptedConnection(
        [
            subscription(),
            P.PushTelemetryResponse(throttle_time_ms=7000),
            P.PushTelemetryResponse(
                error_code=errors.UnknownSubscriptionIdError.code, throttle_time_ms=3000
            ),
            subscription(throttle_time_ms=0),
        ]
    )
    t = T.Telemetry(cast(Any, ScriptedClient(conn)), Values(), {"client_id": "c"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(t.run)
        await trio.sleep(30)
        await t.aclose()
    times = [when for when, _ in conn.sent]
    assert times[2] - times[1] == pytest.approx(7.0)  # not the 1 s interval
    assert times[3] - times[2] == pytest.approx(3.0)  # not at once
