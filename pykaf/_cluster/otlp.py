"""OpenTelemetry's OTLP ``MetricsData`` in protobuf: the payload of a KIP-714 push.

Writes exactly the subset of ``opentelemetry/proto/metrics/v1/metrics.proto``
a client's metrics need: one resource with string attributes, one
instrumentation scope, and per metric either a ``Gauge`` or a ``Sum``
(monotonic, delta or cumulative) of ``NumberDataPoint`` values (integers as
``as_int``, the rest as ``as_double``) with string attributes. Kept here, a
hundred lines, rather than pulling ``protobuf`` and ``opentelemetry-proto``
into pykaf's dependencies for one message; the tests decode what it writes
with those packages.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: ``AggregationTemporality`` of OTLP.
DELTA = 1
CUMULATIVE = 2

_VARINT, _I64, _LEN = 0, 1, 2


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One metric's value now.

    Attributes:
        name: the full name (``org.apache.kafka.producer.record.send.total``).
        value: an int (written as ``as_int``) or a float (``as_double``).
        monotonic: a counter that only grows (an OTLP ``Sum``); False: a
            ``Gauge``.
        attributes: the point's labels (``node_id``, ``topic``, ...).
        description: what it measures.
    """

    name: str
    value: int | float
    monotonic: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)
    description: str = ""


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 negatives: ten bytes, two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _len(number, text.encode()) if text else b""


def _key_value(key: str, value: str) -> bytes:
    # KeyValue{key=1, value=2: AnyValue{string_value=1}}
    return _string(1, key) + _len(2, _len(1, value.encode()))


def _attributes(number: int, attributes: Mapping[str, str]) -> bytes:
    return b"".join(_len(number, _key_value(k, v)) for k, v in attributes.items())


def _data_point(point: MetricPoint, start_ns: int, time_ns: int) -> bytes:
    # NumberDataPoint{start_time_unix_nano=2 fixed64, time_unix_nano=3 fixed64,
    # as_double=4 double | as_int=6 sfixed64, attributes=7}
    out = bytearray()
    if start_ns:
        out += _tag(2, _I64) + struct.pack("<Q", start_ns)
    out += _tag(3, _I64) + struct.pack("<Q", time_ns)
    if isinstance(point.value, int) and not isinstance(point.value, bool):
        out += _tag(6, _I64) + struct.pack("<q", point.value)
    else:
        out += _tag(4, _I64) + struct.pack("<d", float(point.value))
    out += _attributes(7, point.attributes)
    return bytes(out)


def _metric(point: MetricPoint, start_ns: int, time_ns: int, temporality: int) -> bytes:
    # Metric{name=1, description=2, gauge=5 | sum=7}; Gauge{data_points=1};
    # Sum{data_points=1, aggregation_temporality=2, is_monotonic=3}
    data_point = _len(1, _data_point(point, start_ns if point.monotonic else 0, time_ns))
    if point.monotonic:
        body = _len(7, data_point + _tag(2, _VARINT) + _varint(temporality) + b"\x18\x01")
    else:
        body = _len(5, data_point)
    return _string(1, point.name) + _string(2, point.description) + body


def encode_metrics_data(
    points: Iterable[MetricPoint],
    *,
    resource: Mapping[str, str],
    scope: str,
    scope_version: str,
    start_ns: int,
    time_ns: int,
    temporality: int,
) -> bytes:
    """The OTLP ``MetricsData`` of ``points`` (protobuf bytes).

    Args:
        points: the metrics; each becomes one ``Metric`` with one data point.
        resource: the resource's attributes (the client's identity).
        scope: the instrumentation scope's name (the library).
        scope_version: its version.
        start_ns: a ``Sum``'s start: the client's start (cumulative) or the
            previous push (delta), in ns since the epoch.
        time_ns: when the values were read, in ns since the epoch.
        temporality: ``DELTA`` or ``CUMULATIVE``, for the ``Sum`` metrics.
    """
    metrics = b"".join(_len(2, _metric(p, start_ns, time_ns, temporality)) for p in points)
    # InstrumentationScope{name=1, version=2}; ScopeMetrics{scope=1, metrics=2}
    scope_metrics = _len(1, _string(1, scope) + _string(2, scope_version)) + metrics
    # Resource{attributes=1}; ResourceMetrics{resource=1, scope_metrics=2}
    resource_metrics = _len(1, _attributes(1, resource)) + _len(2, scope_metrics)
    # MetricsData{resource_metrics=1}
    return _len(1, resource_metrics)
