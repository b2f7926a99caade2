"""Conformance cases of KIP-714 client metrics: subscriptions as configs, GetTelemetrySubscriptions,
PushTelemetry.

Kafka answers both telemetry APIs (v0, sent explicitly) whether or not a
telemetry plugin is configured; it only advertises them with one. So these
cases run on the session's plain Kafka: tried on one with
``tests/data/telemetry/PushedMetricsRecorder.java`` too, every answer was the
same. Subscriptions are global: each case names its own and matches them to
client ids of its own, and removes them at the end.
"""

from __future__ import annotations

import gzip
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from conformance_harness import Answers, Differs, Target, Wire, case, norm

import pykaf
from pykaf import _compression
from pykaf import protocol as P
from pykaf._cluster.otlp import MetricPoint, encode_metrics_data

CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ZERO = uuid.UUID(int=0)
G, PUSH = P.GetTelemetrySubscriptionsRequest, P.PushTelemetryRequest
IA, D = P.IncrementalAlterConfigsRequest, P.DescribeConfigsRequest
PRODUCER = "org.apache.kafka.producer."


def alter(name: str, *changes: tuple[str, int, str | None], validate: bool = False) -> Any:
    """IncrementalAlterConfigs of one client-metrics subscription."""
    configs = [IA.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes]
    return IA(
        validate_only=validate,
        resources=[
            IA.AlterConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configs=configs
            )
        ],
    )


def subscribe(name: str, metrics: str, interval_ms: int, match: str) -> Any:
    """Create or replace a subscription."""
    return alter(
        name,
        ("metrics", SET, metrics),
        ("interval.ms", SET, str(interval_ms)),
        ("match", SET, match),
    )


def unsubscribe(name: str) -> Any:
    """Remove a subscription (every config deleted)."""
    return alter(name, *((k, DELETE, None) for k in ("metrics", "interval.ms", "match")))


def describe(name: str, keys: list[str] | None = None, synonyms: bool = True) -> Any:
    """DescribeConfigs of one client-metrics subscription."""
    return D(
        resources=[
            D.DescribeConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )


def altered(resp: Any) -> list[tuple[int, bool]]:
    """(error code, message set) per resource of an IncrementalAlterConfigs answer."""
    return [(r.error_code, r.error_message is not None) for r in resp.responses]


def subscription(resp: Any) -> dict[str, Any]:
    """A GetTelemetrySubscriptions answer, ids masked and the requested metrics sorted."""
    out = norm(resp, mask=frozenset({"client_instance_id", "subscription_id"}))
    out["requested_metrics"] = sorted(resp.requested_metrics)
    return out


def push(
    instance: uuid.UUID,
    subscription_id: int,
    metrics: bytes = b"",
    *,
    compression: int = 0,
    terminating: bool = False,
) -> Any:
    """A PushTelemetry."""
    return PUSH(
        client_instance_id=instance,
        subscription_id=subscription_id,
        terminating=terminating,
        compression_type=compression,
        metrics=metrics,
    )


def otlp(value: int = 1) -> bytes:
    """A small OTLP MetricsData, as pykaf's producers push."""
    return encode_metrics_data(
        [MetricPoint(PRODUCER + "record.send.total", value, True)],
        resource={"client_id": "conformance"},
        scope="pykaf",
        scope_version="0",
        start_ns=1,
        time_ns=2,
        temporality=1,
    )


@asynccontextmanager
async def connection(t: Target, client_id: str) -> AsyncIterator[Wire]:
    """A client of its own (its own connection and client id) to the target's node."""
    async with pykaf.open_client(t.bootstrap, client_id=client_id) as client:
        (node,) = await client.brokers()
        yield Wire(client, node.node_id)


async def fresh(w: Wire) -> Any:
    """A new client instance: GetTelemetrySubscriptions with instance id zero."""
    resp = await w.send(G(client_instance_id=ZERO))
    assert resp.error_code == 0, resp
    return resp


async def codes(w: Wire, *requests: Any) -> list[int]:
    """Each request's top-level error code, sent in turn."""
    return [(await w.send(r)).error_code for r in requests]


@case()
async def case_client_metrics_configs(t: Target, w: Wire, out: Answers) -> None:
    """CLIENT_METRICS resources: set, checked, described, deleted."""
    name = "cm-configs"
    out.add(
        "set",
        altered(
            await w.send(
                subscribe(
                    name, f"{PRODUCER}, org.x.", 1000, "client_id=cm-.*,client_software_name=pykaf"
                )
            )
        ),
    )
    refused = {
        "interval below 100": alter("cm-bad", ("interval.ms", SET, "50")),
        "interval above an hour": alter("cm-bad", ("interval.ms", SET, "3600001")),
        "interval not a number": alter("cm-bad", ("interval.ms", SET, "x")),
        "unknown config": alter("cm-bad", ("foo", SET, "1")),
        "unknown match attribute": alter("cm-bad", ("match", SET, "nope=1")),
        "match without '='": alter("cm-bad", ("match", SET, "client_id")),
        "match with two '='": alter("cm-bad", ("match", SET, "client_id=a=b")),
        "bad regex": alter("cm-bad", ("match", SET, "client_id=[")),
        "empty name": alter("", ("metrics", SET, "a")),
        "append": alter(name, ("metrics", APPEND, "org.y.")),
        "subtract": alter(name, ("interval.ms", SUBTRACT, "5")),
        "a key twice": alter("cm-bad", ("metrics", SET, "a"), ("metrics", SET, "b")),
        "a null value": alter("cm-bad", ("metrics", SET, None)),
        "good and bad together": alter("cm-bad", ("metrics", SET, "a"), ("interval.ms", SET, "1")),
    }
    for label, request in refused.items():
        out.add(label, altered(await w.send(request)))
    out.add(
        "deleting what is not set",
        altered(await w.send(alter("cm-bad", ("metrics", DELETE, None)))),
    )
    out.add(
        "validate only",
        altered(await w.send(alter("cm-bad", ("metrics", SET, "a"), validate=True))),
    )

    def settled(resp: Any) -> bool:
        return any(c.name == "interval.ms" and c.value == "1000" for c in resp.results[0].configs)

    described = await t.wait_for(lambda: w.send(describe(name)), settled)
    out.add("described with synonyms", norm(described))
    out.add("described without synonyms", norm(await w.send(describe(name, synonyms=False))))
    out.add("described, one key", norm(await w.send(describe(name, ["metrics"]))))
    out.add("refused ones were not made", norm(await w.send(describe("cm-bad"))))
    out.add("an unknown one shows the defaults", norm(await w.send(describe("cm-none"))))
    out.add("an empty name", norm(await w.send(describe(""))))
    out.add("replace one config", altered(await w.send(alter(name, ("interval.ms", SET, "2000")))))
    out.add("deleted", altered(await w.send(unsubscribe(name))))
    gone = await t.wait_for(
        lambda: w.send(describe(name)),
        lambda r: not settled(r) and all(c.config_source == 5 for c in r.results[0].configs),
    )
    out.add("deleted: the defaults again", norm(gone))


@case()
async def case_telemetry_subscriptions(t: Target, w: Wire, out: Answers) -> None:
    """GetTelemetrySubscriptions: instance ids, matching, merged subscriptions, throttling."""
    async with connection(t, "ts-client") as c:
        first = await fresh(c)
        instance = first.client_instance_id
        out.add("no subscription", subscription(first))
        out.add("an instance id is given", instance != ZERO)
        out.add("asked again too early", norm(await c.send(G(client_instance_id=instance))))
        other = uuid.uuid4()
        unknown = await c.send(G(client_instance_id=other))
        out.add("an id the broker never gave", subscription(unknown))
        out.add("that id is kept", unknown.client_instance_id == other)

        # Kafka applies config changes in order, a moment after answering: each
        # wait below looks for the effect of the last change made.
        out.add(
            "one not matching",
            altered(await w.send(subscribe("ts-x", "org.x.", 100, "client_id=nobody"))),
        )
        out.add(
            "subscribe",
            altered(await w.send(subscribe("ts-a", PRODUCER, 60_000, "client_id=ts-.*"))),
        )

        async def ask() -> Any:
            return await c.send(G(client_instance_id=instance))

        def asked(metrics: list[str]) -> Any:
            return lambda r: r.error_code == 0 and sorted(r.requested_metrics) == sorted(metrics)

        # A change to the subscriptions: the instance is evaluated again at once.
        sub = await t.wait_for(ask, asked([PRODUCER]))
        out.add("subscribed", subscription(sub))
        out.add("the same instance", sub.client_instance_id == instance)
        out.add("a new subscription id", sub.subscription_id != first.subscription_id)
        out.add("asked again too early, subscribed", norm(await ask()))

        out.add(
            "a second one",
            altered(
                await w.send(subscribe("ts-b", "org.y.", 30_000, "client_software_name=pykaf"))
            ),
        )
        both = await t.wait_for(ask, asked(["org.y.", PRODUCER]))
        out.add("two subscriptions: their metrics, the shorter interval", subscription(both))

        out.add("all metrics", altered(await w.send(subscribe("ts-c", "*", 45_000, ""))))
        every = await t.wait_for(ask, asked(["*"]))
        out.add("one asks for all: only '*'", subscription(every))

        for name in ("ts-x", "ts-a", "ts-b", "ts-c"):
            out.add(f"unsubscribe {name}", altered(await w.send(unsubscribe(name))))
        none = await t.wait_for(ask, asked([]))
        out.add("no subscription again", subscription(none))
        out.add("the first subscription id again", none.subscription_id == first.subscription_id)


@case(
    differs={
        "a payload that is not OTLP": Differs(
            fake=87,
            kafka=0,
            why="the fake decodes what clients push (to keep it for tests) and refuses what "
            "does not decode, INVALID_RECORD, as a broker plugin that parses OTLP does; Kafka "
            "only decompresses and leaves parsing to its plugin",
        )
    }
)
async def case_telemetry_pushes(t: Target, w: Wire, out: Answers) -> None:
    """PushTelemetry's checks, in Kafka's order, and the terminating push."""
    async with connection(t, "tp-client") as c:
        out.add("instance id zero", await codes(c, push(ZERO, 0)))
        out.add("instance id one", await codes(c, push(uuid.UUID(int=1), 0)))

        s = await fresh(c)
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "after subscribing, then too early",
            await codes(c, push(i, sid, otlp(1)), push(i, sid, otlp(2)), G(client_instance_id=i)),
        )

        s = await fresh(c)
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "unknown subscription id, then subscribing and pushing",
            await codes(c, push(i, sid + 1), G(client_instance_id=i), push(i, sid)),
        )

        s = await fresh(c)
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "unknown compression type, then subscribing",
            await codes(c, push(i, sid, compression=7), G(client_instance_id=i)),
        )

        s = await fresh(c)
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "too large, then subscribing",
            await codes(
                c, push(i, sid, b"x" * (s.telemetry_max_bytes + 1)), G(client_instance_id=i)
            ),
        )
        s = await fresh(c)
        out.add(
            "inflating past the limit",
            await codes(
                c,
                push(
                    s.client_instance_id,
                    s.subscription_id,
                    gzip.compress(b"\0" * (s.telemetry_max_bytes + 1)),
                    compression=1,
                ),
            ),
        )

        s = await fresh(c)
        out.add(
            "does not decompress",
            await codes(
                c, push(s.client_instance_id, s.subscription_id, b"not gzip", compression=1)
            ),
        )
        s = await fresh(c)
        out.add(
            "a payload that is not OTLP",
            (
                await c.send(
                    push(
                        s.client_instance_id,
                        s.subscription_id,
                        gzip.compress(b"\xff\xff"),
                        compression=1,
                    )
                )
            ).error_code,
        )
        for codec in (0, 1, 2, 3, 4):
            s = await fresh(c)
            data = otlp(codec)
            body = _compression.compress(codec, data) if codec else data
            out.add(
                f"compression {codec}",
                await codes(
                    c, push(s.client_instance_id, s.subscription_id, body, compression=codec)
                ),
            )

        s = await fresh(c)
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "terminating, again, terminating again, subscribing",
            await codes(
                c,
                push(i, sid, otlp(), terminating=True),
                push(i, sid, otlp()),
                push(i, sid, terminating=True),
                G(client_instance_id=i),
            ),
        )
        s = await fresh(c)
        out.add(
            "terminating at once after subscribing twice is not throttled",
            await codes(
                c,
                push(s.client_instance_id, s.subscription_id),
                push(s.client_instance_id, s.subscription_id, terminating=True),
            ),
        )


@case()
async def case_telemetry_interval_and_changes(t: Target, w: Wire, out: Answers) -> None:
    """Pushes at the interval, a changed subscription, a client instance forgotten on close."""
    out.add("subscribe", altered(await w.send(subscribe("ti-a", PRODUCER, 100, "client_id=ti-.*"))))
    async with connection(t, "ti-client") as c:
        s = await t.wait_for(
            lambda: c.send(G(client_instance_id=ZERO)), lambda r: r.requested_metrics == [PRODUCER]
        )
        out.add("subscribed", subscription(s))
        i, sid = s.client_instance_id, s.subscription_id
        out.add(
            "pushed, then too early", await codes(c, push(i, sid, otlp()), push(i, sid, otlp()))
        )
        await trio.sleep(0.3)  # three intervals
        out.add("after the interval", await codes(c, push(i, sid, otlp())))

        out.add(
            "change it",
            altered(await w.send(subscribe("ti-a", "org.apache.kafka.", 200, "client_id=ti-.*"))),
        )

        async def pushed() -> int:
            await trio.sleep(0.25)  # past the old interval: only the subscription can refuse it
            return int((await c.send(push(i, sid, otlp()))).error_code)

        out.add("the old subscription id", await t.wait_for(pushed, lambda code: code != 0))
        again = await c.send(G(client_instance_id=i))
        out.add("subscribing at once", subscription(again))
        out.add("its new id", again.subscription_id != sid)
        out.add("pushing with it at once", await codes(c, push(i, again.subscription_id, otlp())))
    out.add("unsubscribe", altered(await w.send(unsubscribe("ti-a"))))

    # A client instance is forgotten when the connection that made it closes.
    async with connection(t, "other-ti") as c:
        s = await fresh(c)  # no subscription: a five-minute interval
        i, sid = s.client_instance_id, s.subscription_id
        out.add("pushed", await codes(c, push(i, sid, otlp())))
    async with connection(t, "other-ti") as c2:

        async def pushed_again() -> int:
            return int((await c2.send(push(i, sid, otlp()))).error_code)

        out.add(
            "pushed again at once on a new connection",
            await t.wait_for(pushed_again, lambda code: code == 0),
        )
        out.add("then too early", await codes(c2, push(i, sid, otlp())))
