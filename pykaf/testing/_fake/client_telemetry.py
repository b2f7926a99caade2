"""KIP-714 client telemetry on the fake cluster: subscriptions, client instances, pushes.

The state behind GetTelemetrySubscriptions and PushTelemetry (``telemetry.py``
answers them), with Apache Kafka 4.3's rules:

- the broker assigns a client instance id when the client sends zero; a client
  instance's subscription is every subscription matching it (the union of
  their metrics, ``*`` alone if one asks for all; the shortest interval,
  300000 ms if none) and its subscription id a CRC-32C of that set and the
  interval, XORed with the instance id's hash: the same set gives the same id;
- any change to the subscriptions makes every client instance evaluate its
  subscription again at its next request (with fresh timestamps), so the next
  push of an old subscription id is UNKNOWN_SUBSCRIPTION_ID;
- a GetTelemetrySubscriptions within the push interval of the instance's last
  request is THROTTLING_QUOTA_EXCEEDED, unless its last error was
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE;
- a push is checked in Kafka's order: after a terminating push,
  INVALID_REQUEST; within the interval of the last push (and not just after a
  GetTelemetrySubscriptions, and not terminating), THROTTLING_QUOTA_EXCEEDED;
  another subscription id, UNKNOWN_SUBSCRIPTION_ID; a compression type Kafka
  does not know, UNSUPPORTED_COMPRESSION_TYPE; more than ``telemetry_max_bytes``,
  TELEMETRY_TOO_LARGE. The push's terminating flag is kept even when it is
  refused (as Kafka keeps it). A payload that does not decompress (or
  inflates past the limit) is INVALID_RECORD;
- a client instance is forgotten when the connection that made it closes, or
  after max(60 s, three push intervals) without a request.

Accepted payloads are decoded (``otlp.py``) and kept as :class:`TelemetryPush`.
Instances are per broker, as in Kafka; subscriptions and pushes are the cluster's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import _compression, codec, errors
from pykaf.testing._fake import client_metrics
from pykaf.testing._fake.client_metrics import ALL_METRICS, Subscription
from pykaf.testing._fake.model import Session
from pykaf.testing._fake.otlp import AttributeValue, OtlpError, PushedMetric, decode_metrics_data

ZERO_UUID = uuid.UUID(int=0)
#: ids Kafka never assigns and refuses in a push (zero, and the metadata topic's one)
RESERVED = frozenset({ZERO_UUID, uuid.UUID(int=1)})
#: what a broker accepts, in Kafka's order: zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
#: compression types a push may name (Kafka's CompressionType ids)
KNOWN_COMPRESSION_TYPES = frozenset(range(5))
DEFAULT_MAX_BYTES = 1024 * 1024
#: how long an idle client instance is kept at least (Kafka's cache expiry)
_EXPIRY_MS = 60_000
_NEVER = float("-inf")

_OK = 0
_INVALID_REQUEST = errors.InvalidRequestError.code
_THROTTLED = errors.ThrottlingQuotaExceededError.code
_UNKNOWN_SUBSCRIPTION = errors.UnknownSubscriptionIdError.code
_BAD_COMPRESSION = errors.UnsupportedCompressionTypeError.code
_TOO_LARGE = errors.TelemetryTooLargeError.code
_INVALID_RECORD = errors.InvalidRecordError.code


@dataclass(frozen=True)
class TelemetryPush:
    """One push a broker accepted, decoded.

    Attributes:
        client_instance_id: the client instance that pushed.
        client_id: the request header's client id.
        broker_id: the broker it was pushed to.
        subscription_id: the subscription id it named.
        terminating: the client's last push (it is closing).
        resource: the OTLP resource's attributes (the client's own labels).
        metrics: every data point, in the order pushed.
    """

    client_instance_id: uuid.UUID
    client_id: str | None
    broker_id: int
    subscription_id: int
    terminating: bool
    resource: dict[str, AttributeValue]
    metrics: tuple[PushedMetric, ...]

    def names(self) -> set[str]:
        """The names of the metrics pushed."""
        return {m.name for m in self.metrics}

    def value(self, name: str, **attributes: AttributeValue) -> int | float | None:
        """The value of metric ``name`` (with these attributes, when given).

        Raises:
            KeyError: no such point, or more than one (name the attributes).
        """
        found = [
            m
            for m in self.metrics
            if m.name == name and all(m.attributes.get(k) == v for k, v in attributes.items())
        ]
        if len(found) != 1:
            raise KeyError(f"{len(found)} points of {name} with {attributes} in this push")
        return found[0].value


@dataclass
class ClientInstance:
    """A client instance as one broker knows it (Kafka's ClientMetricsInstance)."""

    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    session: Session
    version: int
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get: float = _NEVER
    last_push: float = _NEVER
    last_seen: float = _NEVER
    terminating: bool = False
    last_error: int = _OK

    def may_get(self, now_ms: float) -> bool:
        """A GetTelemetrySubscriptions a push interval after the last request (noted)."""
        if now_ms - max(self.last_get, self.last_push) >= self.interval_ms:
            self.last_get = now_ms
            return True
        return False

    def may_push(self, now_ms: float) -> bool:
        """The first push after a GetTelemetrySubscriptions, or one an interval after the last."""
        ok = self.last_get > self.last_push or now_ms - self.last_push >= self.interval_ms
        if ok:
            self.last_push = now_ms
        return ok


def _java_uuid_hash(u: uuid.UUID) -> int:
    xor = (u.int >> 64) ^ (u.int & (2**64 - 1))
    return ((xor >> 32) ^ xor) & 0xFFFFFFFF


def subscription_id(metrics: Sequence[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """CRC-32C of the metrics and interval, XORed with the instance id's hash (int32)."""
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    value = codec.crc32c(text.encode()) ^ _java_uuid_hash(instance_id)
    return value - 2**32 if value >= 2**31 else value


class ClientTelemetry:
    """The cluster's client-metrics subscriptions, its brokers' client instances, the pushes.

    Attributes:
        max_bytes: the largest payload a push may carry (``telemetry.max.bytes``).
        version: bumped by every change to the subscriptions.
        pushes: every accepted push, in order.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self._instances: dict[int, dict[uuid.UUID, ClientInstance]] = {}
        self.pushes: list[TelemetryPush] = []

    # -- subscriptions (CLIENT_METRICS config resources) ------------------------

    def alter(self, name: str, changes: Sequence[Any], validate_only: bool) -> None:
        """Apply IncrementalAlterConfigs' changes to subscription ``name``.

        Raises:
            client_metrics.Refused: refused as a whole (nothing changed).
        """
        configs = client_metrics.apply(self._configs.get(name, {}), name, changes)
        if validate_only:
            return
        if not configs:
            if self._configs.pop(name, None) is not None:
                del self._subscriptions[name]
                self.version += 1
            return
        self._configs[name] = configs
        self._subscriptions[name] = client_metrics.parse(name, configs)
        self.version += 1

    def describe(self, name: str) -> list[tuple[str, str, int, int]]:
        """Subscription ``name``'s configs: (name, value, source, type)."""
        return client_metrics.describe(self._configs.get(name))

    def subscription_names(self) -> list[str]:
        """The subscriptions' names."""
        return sorted(self._configs)

    # -- client instances --------------------------------------------------------

    def _evaluate(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None], session: Session
    ) -> ClientInstance:
        metrics: set[str] = set()
        interval = client_metrics.DEFAULT_INTERVAL_MS
        everything = False
        for sub in self._subscriptions.values():
            if sub.matches(attributes):
                everything = everything or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        names = (ALL_METRICS,) if everything else tuple(sorted(metrics))
        return ClientInstance(
            instance_id,
            attributes,
            session,
            self.version,
            subscription_id(names, interval, instance_id),
            names,
            interval,
        )

    def instance(
        self,
        broker_id: int,
        instance_id: uuid.UUID,
        session: Session,
        attributes: Callable[[], dict[str, str | None]],
        now_ms: float,
    ) -> ClientInstance:
        """Broker ``broker_id``'s client instance ``instance_id``, made or evaluated again."""
        cache = self._instances.setdefault(broker_id, {})
        inst = cache.get(instance_id)
        if inst is not None and (
            inst.session.closed or now_ms - inst.last_seen > max(_EXPIRY_MS, 3 * inst.interval_ms)
        ):
            inst = None  # its connection closed, or it expired
        if inst is None:
            attrs = attributes()
            attrs["client_instance_id"] = str(instance_id)
            inst = self._evaluate(instance_id, attrs, session)
        elif inst.version < self.version:
            inst = self._evaluate(instance_id, inst.attributes, session)
        cache[instance_id] = inst
        inst.last_seen = now_ms
        return inst

    def new_instance_id(self) -> uuid.UUID:
        """A random id no broker knows and Kafka never assigns."""
        while True:
            candidate = uuid.uuid4()
            if candidate not in RESERVED and not any(
                candidate in cache for cache in self._instances.values()
            ):
                return candidate

    # -- the two requests ----------------------------------------------------------

    @staticmethod
    def check_get(inst: ClientInstance, now_ms: float) -> int:
        """GetTelemetrySubscriptions' error code for ``inst`` now (0: answer it)."""
        if not inst.may_get(now_ms) and inst.last_error not in (
            _UNKNOWN_SUBSCRIPTION,
            _BAD_COMPRESSION,
        ):
            return _THROTTLED
        inst.last_error = _OK
        return _OK

    def push(
        self,
        inst: ClientInstance,
        request: Any,
        broker_id: int,
        client_id: str | None,
        now_ms: float,
    ) -> int:
        """Check and keep one PushTelemetry; its error code (0: accepted)."""
        code = self._check_push(inst, request, now_ms)
        inst.terminating = bool(request.terminating)
        if code:
            inst.last_error = code
            return code
        data = bytes(request.metrics or b"")
        if data:
            try:
                raw = (
                    _compression.decompress(request.compression_type, data, self.max_bytes)
                    if request.compression_type
                    else data
                )
                decoded = decode_metrics_data(raw)
            except (errors.PykafError, OtlpError, ValueError):
                inst.last_error = _INVALID_RECORD
                return _INVALID_RECORD
            self.pushes.append(
                TelemetryPush(
                    inst.instance_id,
                    client_id,
                    broker_id,
                    request.subscription_id,
                    bool(request.terminating),
                    decoded.resource,
                    decoded.metrics,
                )
            )
        inst.last_error = _OK
        return _OK

    def _check_push(self, inst: ClientInstance, request: Any, now_ms: float) -> int:
        if inst.terminating:
            return _INVALID_REQUEST
        if not inst.may_push(now_ms) and not request.terminating:
            return _THROTTLED
        if request.subscription_id != inst.subscription_id:
            return _UNKNOWN_SUBSCRIPTION
        if request.compression_type not in KNOWN_COMPRESSION_TYPES:
            return _BAD_COMPRESSION
        if request.metrics is not None and len(request.metrics) > self.max_bytes:
            return _TOO_LARGE
        return _OK

    def pushed(
        self, client_instance_id: uuid.UUID | None = None, client_id: str | None = None
    ) -> list[TelemetryPush]:
        """The accepted pushes (of one client instance, or client id), oldest first."""
        return [
            p
            for p in self.pushes
            if (client_instance_id is None or p.client_instance_id == client_instance_id)
            and (client_id is None or p.client_id == client_id)
        ]


def client_attributes(
    client_id: str | None, session: Session
) -> Callable[[], dict[str, str | None]]:
    """What a subscription's ``match`` looks at, for a request on ``session``."""

    def attributes() -> dict[str, str | None]:
        host, _, port = session.peer.rpartition(":")
        return {
            "client_id": client_id,
            "client_software_name": session.software_name,
            "client_software_version": session.software_version,
            "client_source_address": host or None,
            "client_source_port": port or None,
        }

    return attributes
