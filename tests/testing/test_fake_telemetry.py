"""The fake cluster's KIP-714 client telemetry: its OTLP reader, its rules, its controls.

What it answers is checked against Apache Kafka by tests/conformance
(``cases_telemetry.py``) and pykaf's clients push to it in
tests/cluster/test_telemetry_brokers.py; these tests cover what Kafka cannot
show from outside: the decoded pushes, the controls, client instances
forgotten or kept, and what the option changes.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster.otlp import DELTA, MetricPoint, encode_metrics_data
from pykaf.testing import FakeClusterError, FakeClusterThread, open_fake_cluster
from pykaf.testing._fake.client_telemetry import ClientTelemetry, subscription_id
from pykaf.testing._fake.model import Session
from pykaf.testing._fake.otlp import OtlpError, decode_metrics_data

PRODUCER = "org.apache.kafka.producer."
ZERO = uuid.UUID(int=0)
TELEMETRY_APIS = {P.GetTelemetrySubscriptionsRequest.API_KEY, P.PushTelemetryRequest.API_KEY}


# -- the OTLP reader ------------------------------------------------------------------


def test_reads_what_pykaf_writes() -> None:
    data = encode_metrics_data(
        [
            MetricPoint(PRODUCER + "record.send.total", 42, True, {}, "records sent"),
            MetricPoint(PRODUCER + "node.request.latency.avg", 1.25, False, {"node_id": "3"}),
            MetricPoint("negative", -7, True),
        ],
        resource={"client_id": "c1", "role": "producer"},
        scope="pykaf",
        scope_version="1",
        start_ns=1_000,
        time_ns=2_000,
        temporality=DELTA,
    )
    decoded = decode_metrics_data(data)
    assert decoded.resource == {"client_id": "c1", "role": "producer"}
    sent, latency, negative = decoded.metrics
    assert (sent.name, sent.kind, sent.value, sent.monotonic) == (
        PRODUCER + "record.send.total",
        "sum",
        42,
        True,
    )
    assert (sent.temporality, sent.start_ns, sent.time_ns) == ("delta", 1_000, 2_000)
    assert sent.description == "records sent"
    assert (latency.kind, latency.value, latency.attributes) == ("gauge", 1.25, {"node_id": "3"})
    assert latency.temporality == ""
    assert negative.value == -7


def test_reads_opentelemetry_protos_own_encoding() -> None:
    pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    msg = pb.MetricsData()
    rm = msg.resource_metrics.add()
    attr = rm.resource.attributes.add()
    attr.key, attr.value.int_value = "pid", -3
    metrics = rm.scope_metrics.add().metrics
    gauge = metrics.add(name="g")
    point = gauge.gauge.data_points.add(as_double=0.5, time_unix_nano=9)
    flag = point.attributes.add()
    flag.key, flag.value.bool_value = "up", True
    counter = metrics.add(name="c")
    counter.sum.is_monotonic = True
    counter.sum.aggregation_temporality = pb.AGGREGATION_TEMPORALITY_CUMULATIVE
    counter.sum.data_points.add(as_int=2**40)
    counter.sum.data_points.add(as_int=-1)
    metrics.add(name="h").histogram.data_points.add(count=3)
    decoded = decode_metrics_data(msg.SerializeToString())
    assert decoded.resource == {"pid": -3}
    g, c1, c2, h = decoded.metrics
    assert (g.kind, g.value, g.attributes, g.time_ns) == ("gauge", 0.5, {"up": True}, 9)
    assert (c1.value, c2.value, c1.temporality, c1.monotonic) == (2**40, -1, "cumulative", True)
    assert (h.name, h.kind, h.value) == ("h", "histogram", None)


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05abc",  # a length past the end
        b"\x0a\x80",  # a varint cut short
        b"\x0b",  # a group (wire type 3)
        b"\x00\x00",  # field number 0
        b"\x0a" + b"\xff" * 11,  # a varint of 11 bytes
        b"\x0a\x06\x12\x04\x12\x02\x0a\x00",  # a metric holding no data
        b"\x0a\x08\x12\x06\x12\x04\x0a\x02\xff\xfe",  # a name that is not UTF-8
    ],
)
def test_malformed_payloads_are_refused(data: bytes) -> None:
    with pytest.raises(OtlpError):
        decode_metrics_data(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_are_refused(data: bytes) -> None:
    # What a client pushes is untrusted: nothing but OtlpError may come out.
    with contextlib.suppress(OtlpError):
        decode_metrics_data(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_cut_or_flipped_payload_decodes_or_is_refused(data: st.DataObject) -> None:
    good = bytearray(
        encode_metrics_data(
            [MetricPoint("a.total", 3, True, {"k": "v"}), MetricPoint("b", 0.5)],
            resource={"client_id": "c"},
            scope="s",
            scope_version="1",
            start_ns=1,
            time_ns=2,
            temporality=DELTA,
        )
    )
    i = data.draw(st.integers(0, len(good) - 1))
    good[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    with contextlib.suppress(OtlpError):
        decode_metrics_data(bytes(good[:cut]))


def test_fixed_fields_of_the_wrong_size_are_refused() -> None:
    # A data point whose as_double (field 4) is a varint, not 8 bytes.
    point = b"\x20\x01"
    gauge = b"\x0a" + bytes([len(point)]) + point
    metric = b"\x0a\x01g" + b"\x2a" + bytes([len(gauge)]) + gauge
    scope = b"\x12" + bytes([len(metric)]) + metric
    rm = b"\x12" + bytes([len(scope)]) + scope
    with pytest.raises(OtlpError):
        decode_metrics_data(b"\x0a" + bytes([len(rm)]) + rm)


# -- the rules, without I/O (times in ms are given) ------------------------------------


def attrs(client_id: str = "app-1") -> Any:
    return lambda: {
        "client_id": client_id,
        "client_software_name": "pykaf",
        "client_software_version": "1.0",
        "client_source_address": "127.0.0.1",
        "client_source_port": "5000",
    }


def alter(state: ClientTelemetry, name: str, **values: str | None) -> None:
    A = P.IncrementalAlterConfigsRequest.AlterableConfig
    changes = [
        A(name=k.replace("_", "."), config_operation=0 if v is not None else 1, value=v)
        for k, v in values.items()
    ]
    state.alter(name, changes, validate_only=False)


def test_subscription_ids_are_kafkas() -> None:
    # Seen on Kafka 4.3.1: this instance id, no metrics, the default interval.
    instance = uuid.UUID("06dd696d-2a24-4efe-92e7-035a0bb3ab32")
    assert subscription_id((), 300_000, instance) == 1634391077
    other = uuid.UUID("5e3dbcc5-225a-48f2-997a-396a0c2047f3")
    assert subscription_id(("org.apache.kafka.consumer.",), 30_000, other) == -1879960421


def test_matching_subscriptions_merge() -> None:
    state = ClientTelemetry()
    alter(state, "a", metrics="org.x.", interval_ms="1000", match="client_id=app-.*")
    alter(state, "b", metrics="org.y.", interval_ms="500", match="client_software_name=pykaf")
    alter(state, "c", metrics="org.z.", interval_ms="100", match="client_source_port=6000")
    inst = state.instance(1, uuid.uuid4(), Session("127.0.0.1:5000"), attrs(), 0)
    assert (inst.metrics, inst.interval_ms) == (("org.x.", "org.y."), 500)
    other = state.instance(1, uuid.uuid4(), Session("127.0.0.1:5000"), attrs("web"), 0)
    assert (other.metrics, other.interval_ms) == (("org.y.",), 500)
    alter(state, "d", metrics="*", match=None)
    assert state.instance(1, inst.instance_id, inst.session, attrs(), 1).metrics == ("*",)


def test_throttling_follows_kafkas_timestamps() -> None:
    state = ClientTelemetry()
    alter(state, "a", metrics=PRODUCER, interval_ms="1000")
    session = Session("127.0.0.1:5000")
    inst = state.instance(1, uuid.uuid4(), session, attrs(), 0)
    assert state.check_get(inst, 0) == 0
    assert state.check_get(inst, 999) == errors.ThrottlingQuotaExceededError.code
    push = P.PushTelemetryRequest(subscription_id=inst.subscription_id, metrics=b"")
    assert state.push(inst, push, 1, "app-1", 10) == 0  # the first push after subscribing
    assert state.push(inst, push, 1, "app-1", 500) == errors.ThrottlingQuotaExceededError.code
    assert state.push(inst, push, 1, "app-1", 1010) == 0
    assert state.check_get(inst, 2000) == errors.ThrottlingQuotaExceededError.code
    assert state.check_get(inst, 2010) == 0


def test_instances_are_forgotten_on_close_or_when_idle() -> None:
    state = ClientTelemetry()
    session = Session("127.0.0.1:5000")
    first = state.instance(1, uuid.uuid4(), session, attrs(), 0)
    assert state.instance(1, first.instance_id, session, attrs(), 59_000) is first
    # idle longer than max(60 s, three intervals of 300 s)
    assert state.instance(1, first.instance_id, session, attrs(), 959_000) is first
    assert state.instance(1, first.instance_id, session, attrs(), 1_860_000) is not first
    again = state.instance(1, first.instance_id, session, attrs(), 1_860_001)
    session.closed = True  # the connection that made it closed
    assert state.instance(1, first.instance_id, Session("x:1"), attrs(), 1_860_002) is not again
    # ... and each broker has its own
    assert state.instance(2, first.instance_id, session, attrs(), 0) is not again


def test_a_change_evaluates_instances_again_keeping_their_attributes() -> None:
    state = ClientTelemetry()
    session = Session("127.0.0.1:5000")
    inst = state.instance(1, uuid.uuid4(), session, attrs("app-1"), 0)
    assert inst.metrics == ()
    alter(state, "a", metrics=PRODUCER, match="client_id=app-.*")
    # a request under another client id does not change what the instance is
    again = state.instance(1, inst.instance_id, session, attrs("other"), 1)
    assert again.metrics == (PRODUCER,) and again.subscription_id != inst.subscription_id
    alter(state, "a", metrics=None, interval_ms=None, match=None)
    assert state.subscription_names() == []
    back = state.instance(1, inst.instance_id, session, attrs(), 2)
    assert back.subscription_id == inst.subscription_id


# -- the fake cluster's controls and option ------------------------------------------------


async def test_a_producer_pushes_and_the_test_reads_it() -> None:
    async with open_fake_cluster(1, client_telemetry=True) as fake:
        fake.create_topic("t", 1)
        fake.set_client_metrics("all", [PRODUCER + "record."], interval_ms=100)
        async with pykaf.open_producer(fake.bootstrap, client_id="app") as producer:
            for i in range(3):
                await producer.send("t", b"%d" % i)
            with trio.fail_after(10):
                while len(fake.pushed_metrics(client_id="app")) < 2:
                    await trio.sleep(0.05)
        pushes = fake.pushed_metrics(client_id="app")
        assert pushes[-1].terminating and not any(p.terminating for p in pushes[:-1])
        assert {p.client_instance_id for p in pushes} == {pushes[0].client_instance_id}
        assert fake.pushed_metrics(pushes[0].client_instance_id) == pushes
        assert fake.pushed_metrics(client_id="nobody") == []
        sent = sum(p.value(PRODUCER + "record.send.total") or 0 for p in pushes)
        assert sent == 3  # deltas, as Kafka asks
        assert all(n.startswith(PRODUCER + "record.") for p in pushes for n in p.names())
        assert pushes[0].resource["client_id"] == "app" and pushes[0].broker_id == 1
        with pytest.raises(KeyError):
            pushes[0].value("no.such.metric")


async def test_without_the_option_nothing_is_advertised_or_pushed() -> None:
    async with open_fake_cluster(1) as fake:
        fake.create_topic("t", 1)
        fake.set_client_metrics("all", ["*"], interval_ms=100)
        fake.start_request_tracking()
        async with pykaf.open_producer(fake.bootstrap, client_id="app") as producer:
            await producer.send("t", b"x")
            conn = await producer.client.any_connection()
            with pytest.raises(errors.UnsupportedVersionError):
                conn.version_for(P.GetTelemetrySubscriptionsRequest.API_KEY)
            await trio.sleep(0.3)
        assert not any(r.api_key in TELEMETRY_APIS for r in fake.requests)
        assert fake.pushed_metrics() == []


def test_controls_check_subscriptions_and_work_from_a_thread() -> None:
    with FakeClusterThread(1, client_telemetry=True) as fake:
        with pytest.raises(FakeClusterError, match="interval"):
            fake.set_client_metrics("bad", ["*"], interval_ms=50)
        with pytest.raises(FakeClusterError, match="pattern"):
            fake.set_client_metrics("bad", ["*"], match={"nope": "x"})
        fake.set_client_metrics("s", [PRODUCER], interval_ms=1000, match={"client_id": "a.*"})
        assert fake.cluster.telemetry.subscription_names() == ["s"]
        assert [c[:2] for c in fake.cluster.telemetry.describe("s")] == [
            ("interval.ms", "1000"),
            ("match", "client_id=a.*"),
            ("metrics", PRODUCER),
        ]
        fake.delete_client_metrics("s")
        fake.delete_client_metrics("never-made")
        assert fake.cluster.telemetry.subscription_names() == []
        assert fake.pushed_metrics() == []


async def test_a_push_to_another_broker_is_a_new_instance_there() -> None:
    # As on Kafka: instances are per broker, and the subscription id is the same there.
    async with open_fake_cluster(2, client_telemetry=True) as fake:
        fake.set_client_metrics("all", ["*"], interval_ms=60_000)
        async with pykaf.open_client(fake.bootstrap) as client:
            got = await client.request(
                1, P.GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
            )
            data = encode_metrics_data(
                [MetricPoint("m", 1)],
                resource={},
                scope="s",
                scope_version="1",
                start_ns=0,
                time_ns=1,
                temporality=DELTA,
            )
            push = P.PushTelemetryRequest(
                client_instance_id=got.client_instance_id,
                subscription_id=got.subscription_id,
                metrics=data,
            )
            assert (await client.request(1, push)).error_code == 0
            assert (await client.request(1, push)).error_code == 89  # too early on broker 1
            assert (await client.request(2, push)).error_code == 0  # a new instance on 2
        assert [p.broker_id for p in fake.pushed_metrics()] == [1, 2]


def test_the_command_turns_it_on() -> None:
    from pykaf.testing.__main__ import build, parser

    assert build(parser().parse_args(["--client-telemetry"])).client_telemetry
    assert not build(parser().parse_args([])).client_telemetry
