"""KIP-714 telemetry without a broker: the OTLP writer, subscriptions, errors, payloads."""

from __future__ import annotations

from typing import Any, cast

import pytest
from otlp_reader import read_metrics

from pykaf import _compression, errors
from pykaf._cluster import telemetry as T
from pykaf._cluster.otlp import CUMULATIVE, DELTA, MetricPoint, encode_metrics_data

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
