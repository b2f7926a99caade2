"""KIP-714 client metrics: ask for a subscription, push what it names.

A :class:`Telemetry` per producer, consumer or group member runs in the
role's nursery: it asks one broker ``GetTelemetrySubscriptions`` (client
instance id zero the first time, the broker's id after), and while the
subscription names metrics, every ``push_interval_ms`` reads the role's
metrics (a :data:`Collector`), keeps those whose names start with a
requested prefix, writes them as OTLP ``MetricsData`` (delta or cumulative
sums as asked), compresses them with a codec the broker accepts, trims them to
``telemetry_max_bytes`` and sends ``PushTelemetry``. Closing sends a last push
with ``terminating`` set. Errors follow KIP-714 (and Kafka's Java client):
the broker's answer decides between subscribing again at once, after the
push interval, or stopping; nothing here ever fails the client.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

import trio

from pykaf import _compression, errors
from pykaf import protocol as P
from pykaf._cluster.client import Client
from pykaf._cluster.otlp import CUMULATIVE, DELTA, MetricPoint, encode_metrics_data
from pykaf._config import ClientConfig
from pykaf._net.connection import BrokerConnection
from pykaf._net.metrics import RequestStatistics
from pykaf._version import __version__

log = logging.getLogger("pykaf.telemetry")
#: How a stop begins when the broker lacks the KIP-714 APIs (logged at DEBUG).
_NO_KIP714 = "the broker does not speak KIP-714"

#: The role's metrics now (names in full, ``org.apache.kafka.producer...``).
Collector = Callable[[], Sequence[MetricPoint]]

_GET = P.GetTelemetrySubscriptionsRequest.API_KEY
_PUSH = P.PushTelemetryRequest.API_KEY
ZERO_UUID = UUID(int=0)
#: Milliseconds between attempts when the broker named no interval (Java's default).
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
#: Seconds the terminating push may take at close, at most.
CLOSE_TIMEOUT = 5.0
#: The codecs pykaf writes, by Kafka's compression type id.
_CODECS = {
    _compression.GZIP: "gzip",
    _compression.SNAPPY: "snappy",
    _compression.LZ4: "lz4",
    _compression.ZSTD: "zstd",
}
_RESUBSCRIBE_NOW = (errors.UnknownSubscriptionIdError, errors.UnsupportedCompressionTypeError)
#: A metric's identity across pushes (name and sorted attributes), for deltas.
MetricKey = tuple[str, tuple[tuple[str, str], ...]]
#: (mean ms, longest ms, request count).
Latency = tuple[float, float, int]
_RESUBSCRIBE_LATER = (errors.TelemetryTooLargeError, errors.ThrottlingQuotaExceededError)


@dataclass(frozen=True, slots=True)
class Subscription:
    """What the broker asked for (a ``GetTelemetrySubscriptions`` answer)."""

    subscription_id: int
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    accepted_compression_types: tuple[int, ...]
    requested_metrics: tuple[str, ...]

    def wants(self, name: str) -> bool:
        """Whether metric ``name`` matches a requested prefix ("" or "*": every one)."""
        return any(p in ("", "*") or name.startswith(p) for p in self.requested_metrics)

    @property
    def compression(self) -> int:
        """The first accepted codec pykaf writes, in the broker's order (0: none)."""
        return next((c for c in self.accepted_compression_types if c in _CODECS), 0)


@dataclass(frozen=True, slots=True)
class TelemetryStatistics:
    """A client's KIP-714 state: its instance id, subscription and pushes so far."""

    client_instance_id: UUID
    subscription_id: int | None
    requested_metrics: tuple[str, ...]
    subscriptions: int
    pushes: int
    errors: int
    stopped: str | None


class Stopped(Exception):
    """Telemetry ends for this client (the reason is the message); never leaves the task."""


def next_delay_ms(exc: errors.KafkaError, interval_ms: int) -> int:
    """KIP-714's answer to a telemetry error: milliseconds until subscribing again.

    Raises:
        Stopped: the error cannot be cured by asking again (INVALID_REQUEST,
            INVALID_RECORD, UNSUPPORTED_VERSION, or any other code): telemetry
            stops for this client, as in Kafka's Java client.
    """
    if isinstance(exc, _RESUBSCRIBE_NOW):
        return 0
    if isinstance(exc, _RESUBSCRIBE_LATER):
        return interval_ms if interval_ms > 0 else DEFAULT_INTERVAL_MS
    raise Stopped(f"{type(exc).__name__}: {exc}")


class Telemetry:
    """One client instance's KIP-714 telemetry (see the module docstring).

    Args:
        client: the cluster client it sends through.
        collect: reads the role's metrics.
        resource: OTLP resource attributes (``client_id``, the role).
    """

    def __init__(self, client: Client, collect: Collector, resource: dict[str, str]) -> None:
        self._client = client
        self._collect = collect
        self._resource = resource
        self._instance_id = ZERO_UUID
        self._sub: Subscription | None = None  # a subscription that names metrics
        self._subscription_id: int | None = None
        self._interval = 0
        self._conn: BrokerConnection | None = None
        self._lock = trio.Lock()
        self._start_ns = time.time_ns()
        self._last_push_ns = self._start_ns
        self._last_values: dict[MetricKey, int | float] = {}
        self._subscriptions = 0
        self._pushes = 0
        self._errors = 0
        self._stopped: str | None = None
        self._closed = False
        self._scope = trio.CancelScope()

    # -- the loop ---------------------------------------------------------------

    async def run(self) -> None:
        """Subscribe, push, subscribe again, ... until closed or stopped."""
        with self._scope:
            try:
                await self._loop()
            except Stopped as stop:
                self._stop(str(stop))
            except Exception as exc:  # a bug of ours must not take the client down
                log.exception("client telemetry failed")
                self._stop(f"{type(exc).__name__}: {exc}")

    async def _loop(self) -> None:
        delay_ms = 0
        first_push = True
        while True:
            await trio.sleep(delay_ms / 1000)
            if self._sub is None:
                delay_ms = await self._subscribe()
                if self._sub is not None and first_push:
                    # spread clients that start together (KIP-714's jitter)
                    delay_ms = int(delay_ms * random.uniform(0.5, 1.5))
                    first_push = False
                continue
            delay_ms = await self._push(terminating=False)

    def _interval_ms(self) -> int:
        """The last push interval the broker named (Java's default before any)."""
        return self._interval or DEFAULT_INTERVAL_MS

    def _stop(self, reason: str) -> None:
        self._stopped = reason
        # A broker without KIP-714 (no telemetry plugin, or an older Kafka) is
        # the usual case: not worth an INFO line per client.
        level = logging.DEBUG if reason.startswith(_NO_KIP714) else logging.INFO
        log.log(level, "client telemetry stopped: %s", reason)

    async def _connection(self) -> BrokerConnection:
        """The broker telemetry talks to: kept while its connection lives (KIP-714)."""
        conn = self._conn
        if conn is None or conn.broken:
            conn = self._conn = await self._client.any_connection()
        try:
            conn.version_for(_GET)
            conn.version_for(_PUSH)
        except errors.UnsupportedVersionError as exc:
            raise Stopped(f"{_NO_KIP714} ({exc})") from None
        return conn

    async def _subscribe(self) -> int:
        """Ask for the subscription; returns milliseconds until the next step.

        Leaves ``_sub`` set when the subscription names metrics (the next step
        is a push), None otherwise (the next step is asking again).
        """
        self._sub = None
        try:
            conn = await self._connection()
            resp = await conn.request(
                P.GetTelemetrySubscriptionsRequest(client_instance_id=self._instance_id)
            )
        except errors.PykafError as exc:
            log.debug("GetTelemetrySubscriptions failed: %s", exc)
            self._conn = None
            self._errors += 1
            return self._interval_ms()
        self._subscriptions += 1
        err = errors.error_for_code(resp.error_code)
        if err is not None:
            self._errors += 1
            failure = err(f"GetTelemetrySubscriptions: {err.description}")
            log.debug("%s", failure)
            return max(next_delay_ms(failure, resp.push_interval_ms), int(resp.throttle_time_ms))
        if self._instance_id == ZERO_UUID:
            self._instance_id = resp.client_instance_id
        sub = Subscription(
            subscription_id=resp.subscription_id,
            push_interval_ms=max(resp.push_interval_ms, 1),
            telemetry_max_bytes=resp.telemetry_max_bytes,
            delta_temporality=resp.delta_temporality,
            accepted_compression_types=tuple(resp.accepted_compression_types),
            requested_metrics=tuple(resp.requested_metrics),
        )
        self._interval = sub.push_interval_ms
        if sub.subscription_id != self._subscription_id:
            self._subscription_id = sub.subscription_id
            self._last_values.clear()  # a new subscription starts its deltas afresh
            self._last_push_ns = time.time_ns()
        log.debug("client telemetry subscription: %s", sub)
        if sub.requested_metrics:
            self._sub = sub
        # pushing, or (nothing asked) asking again; a throttled client waits longer
        return max(sub.push_interval_ms, int(resp.throttle_time_ms))

    # -- pushing ----------------------------------------------------------------

    def payload(self, sub: Subscription, now_ns: int) -> tuple[bytes, dict[MetricKey, int | float]]:
        """The push's metrics, compressed, within ``telemetry_max_bytes``.

        Returns the bytes and the monotonic values they were taken from (kept
        for the next delta once the push succeeded).
        """
        points: list[MetricPoint] = []
        values: dict[MetricKey, int | float] = {}
        for p in self._collect():
            if not sub.wants(p.name):
                continue
            if p.monotonic:
                key: MetricKey = (p.name, tuple(sorted(p.attributes.items())))
                values[key] = p.value
                if sub.delta_temporality:
                    last = self._last_values.get(key, 0)
                    # A counter below its last value was reset (its partition
                    # or connection closed): all of it is new.
                    delta = p.value - last if p.value >= last else p.value
                    p = MetricPoint(p.name, delta, True, p.attributes, p.description)
            points.append(p)
        start = self._last_push_ns if sub.delta_temporality else self._start_ns
        temporality = DELTA if sub.delta_temporality else CUMULATIVE
        codec = sub.compression
        while True:
            raw = encode_metrics_data(
                points,
                resource=self._resource,
                scope="pykaf",
                scope_version=__version__,
                start_ns=start,
                time_ns=now_ns,
                temporality=temporality,
            )
            data = _compression.compress(codec, raw) if codec else raw
            if sub.telemetry_max_bytes <= 0 or len(data) <= sub.telemetry_max_bytes or not points:
                return data, values
            log.debug("telemetry payload of %d bytes over the broker's limit", len(data))
            points = points[: len(points) // 2]  # too large: send fewer metrics

    def pushed(self, values: dict[MetricKey, int | float], now_ns: int) -> None:
        """Keep what a successful push sent: the next deltas start from it."""
        self._last_values = values
        self._last_push_ns = now_ns

    async def _push(self, *, terminating: bool) -> int:
        """Push once; returns milliseconds until the next step."""
        sub = self._sub
        assert sub is not None
        now_ns = time.time_ns()
        data, values = self.payload(sub, now_ns)
        request = P.PushTelemetryRequest(
            client_instance_id=self._instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=sub.compression,
            metrics=data,
        )
        try:
            async with self._lock:
                conn = await self._connection()
                resp = await conn.request(request)
        except errors.PykafError as exc:
            log.debug("PushTelemetry failed: %s", exc)
            self._conn = None
            self._errors += 1
            return sub.push_interval_ms
        self._pushes += 1
        err = errors.error_for_code(resp.error_code)
        if err is None:
            self.pushed(values, now_ns)
            return max(sub.push_interval_ms, int(resp.throttle_time_ms))
        self._errors += 1
        failure = err(f"PushTelemetry: {err.description}")
        log.debug("%s", failure)
        delay = next_delay_ms(failure, sub.push_interval_ms)
        self._sub = None  # every push error means subscribing again (Java's client)
        return max(delay, int(resp.throttle_time_ms))

    async def aclose(self) -> None:
        """Stop the loop and send the terminating push (bounded, never raising)."""
        if self._closed:
            return
        self._closed = True
        self._scope.cancel()
        if self._stopped is not None or self._sub is None:
            return
        with trio.move_on_after(CLOSE_TIMEOUT):
            try:
                await self._push(terminating=True)
            except Stopped as stop:
                self._stop(str(stop))
            except errors.PykafError as exc:
                log.debug("the terminating telemetry push failed: %s", exc)

    def statistics(self) -> TelemetryStatistics:
        """The client instance id, the subscription and the counters."""
        return TelemetryStatistics(
            client_instance_id=self._instance_id,
            subscription_id=self._subscription_id,
            requested_metrics=() if self._sub is None else self._sub.requested_metrics,
            subscriptions=self._subscriptions,
            pushes=self._pushes,
            errors=self._errors,
            stopped=self._stopped,
        )


# -- what every role pushes ----------------------------------------------------------


def latency(stats: Sequence[RequestStatistics], api: str | None = None) -> dict[int, Latency]:
    """Per broker: (mean ms, longest ms, count) of its requests (of ``api`` only, if given)."""
    by_node: dict[int, list[float]] = {}
    for s in stats:
        if api is not None and s.api != api:
            continue
        acc = by_node.setdefault(s.node_id, [0.0, 0.0, 0])
        acc[0] += s.mean_ms * s.count
        acc[1] = max(acc[1], s.max_ms)
        acc[2] += s.count
    return {node: (t / n if n else 0.0, m, int(n)) for node, (t, m, n) in by_node.items()}


def overall(per_node: dict[int, Latency]) -> Latency:
    """(mean ms, longest ms, count) over every broker of a :func:`latency` answer."""
    count = sum(n for _, _, n in per_node.values())
    total = sum(mean * n for mean, _, n in per_node.values())
    longest = max((m for _, m, _ in per_node.values()), default=0.0)
    return (total / count if count else 0.0, longest, count)


def client_points(client: Client, prefix: str) -> list[MetricPoint]:
    """The connection metrics Kafka's clients push, from ``client.statistics()``.

    ``prefix`` is the role's, ``org.apache.kafka.producer.`` or
    ``org.apache.kafka.consumer.``. Counters cover the client's open
    connections (a closed connection's requests drop out).
    """
    stats = client.statistics()
    points = [
        MetricPoint(prefix + "connection.creation.total", stats.connects, True),
        MetricPoint(prefix + "connection.count", stats.connections),
        MetricPoint(prefix + "request.total", stats.requests_sent, True),
        MetricPoint(prefix + "outgoing.byte.total", stats.bytes_sent, True),
        MetricPoint(prefix + "incoming.byte.total", stats.bytes_received, True),
    ]
    for node, (mean, longest, _) in sorted(latency(stats.requests).items()):
        attrs = {"node_id": str(node)}
        points.append(MetricPoint(prefix + "node.request.latency.avg", mean, False, attrs))
        points.append(MetricPoint(prefix + "node.request.latency.max", longest, False, attrs))
    return points


def start_telemetry(
    client: Client, config: ClientConfig, nursery: trio.Nursery, role: str, collect: Collector
) -> Telemetry | None:
    """Start a role's telemetry task (None when the role's ``enable_metrics_push`` is off)."""
    if not config.enable_metrics_push:
        return None
    telemetry = Telemetry(client, collect, {"client_id": config.client_id, "role": role})
    nursery.start_soon(telemetry.run, name=f"pykaf {role} telemetry")
    return telemetry


async def close_telemetry(telemetry: Telemetry | None) -> None:
    """The terminating push (shielded, bounded); nothing when telemetry is off."""
    if telemetry is not None:
        with trio.CancelScope(shield=True):
            await telemetry.aclose()
