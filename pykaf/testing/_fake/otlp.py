"""Reading what clients push (KIP-714): OpenTelemetry's OTLP ``MetricsData`` protobuf.

A bounds-checked protobuf reader for the one message the fake cluster keeps,
with the field numbers of opentelemetry-proto's ``metrics.proto``, written
from the protobuf encoding rules. Every read is checked against the end of its
enclosing message; anything that is not a well-formed ``MetricsData`` raises
:class:`OtlpError` (the push is then refused with INVALID_RECORD).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

#: protobuf wire types
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
#: OTLP's AggregationTemporality
DELTA, CUMULATIVE = 1, 2
#: Metric's data fields, by field number
_KINDS = {5: "gauge", 7: "sum", 9: "histogram", 10: "exponential_histogram", 11: "summary"}

AttributeValue = str | bool | int | float | bytes | None


class OtlpError(ValueError):
    """Bytes that are not a well-formed OTLP ``MetricsData``."""


@dataclass(frozen=True)
class PushedMetric:
    """One data point of a pushed metric.

    Attributes:
        name: the metric's name (``org.apache.kafka.producer.record.send.total``).
        kind: ``"gauge"`` or ``"sum"`` (``"histogram"``, ``"summary"``, ... are
            kept by name only, with ``value`` None).
        value: the point's value (an int or a float), None for other kinds.
        attributes: the point's attributes (``{"node_id": "1"}``).
        monotonic: a sum that only grows (a counter).
        temporality: ``"delta"`` or ``"cumulative"`` for sums, ``""`` for gauges.
        start_ns: when the point's interval starts (ns since the epoch; 0 if unset).
        time_ns: when the value was taken (ns since the epoch).
        description: the metric's description ("" if none).
    """

    name: str
    kind: str
    value: int | float | None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    monotonic: bool = False
    temporality: str = ""
    start_ns: int = 0
    time_ns: int = 0
    description: str = ""


@dataclass(frozen=True)
class MetricsData:
    """A decoded ``MetricsData``: the (first) resource's attributes and every point."""

    resource: dict[str, AttributeValue]
    metrics: tuple[PushedMetric, ...]


def _varint(data: bytes, i: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= end:
            raise OtlpError("a varint runs past its message")
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift >= 70:
            raise OtlpError("a varint longer than 10 bytes")


def _fields(
    data: bytes, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of one message; LEN values as bytes."""
    end = len(data) if end is None else end
    i = start
    while i < end:
        key, i = _varint(data, i, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OtlpError("field number 0")
        value: object
        if wire == _VARINT:
            value, i = _varint(data, i, end)
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if i + size > end:
                raise OtlpError("a fixed-size field runs past its message")
            value, i = data[i : i + size], i + size
        elif wire == _LEN:
            size, i = _varint(data, i, end)
            if size > end - i:
                raise OtlpError("a length-delimited field runs past its message")
            value, i = data[i : i + size], i + size
        else:
            raise OtlpError(f"wire type {wire} (groups are not used by OTLP)")
        yield number, wire, value


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise OtlpError("a string field is not length-delimited")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise OtlpError("a string field is not UTF-8") from None


def _message(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise OtlpError("a message field is not length-delimited")
    return value


def _fixed(value: object, fmt: str) -> int | float:
    if not isinstance(value, bytes) or len(value) != struct.calcsize(fmt):
        raise OtlpError("a fixed-size field of the wrong wire type")
    result: int | float = struct.unpack(fmt, value)[0]
    return result


def _any_value(data: bytes) -> AttributeValue:
    """An ``AnyValue``: string, bool, int, double or bytes (arrays and maps as bytes)."""
    out: AttributeValue = None
    for number, _, value in _fields(data):
        if number == 1:
            out = _text(value)
        elif number == 2 and isinstance(value, int):
            out = bool(value)
        elif number == 3 and isinstance(value, int):
            out = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 4:
            out = _fixed(value, "<d")
        elif number in (5, 6, 7):
            out = _message(value)
    return out


def _attributes(entries: list[bytes]) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for entry in entries:
        key, value = "", None
        for number, _, v in _fields(entry):
            if number == 1:
                key = _text(v)
            elif number == 2:
                value = _any_value(_message(v))
        out[key] = value
    return out


def _number_point(data: bytes) -> tuple[int | float | None, dict[str, AttributeValue], int, int]:
    """A ``NumberDataPoint``: (value, attributes, start ns, time ns)."""
    value: int | float | None = None
    attrs: list[bytes] = []
    start = time = 0
    for number, _, v in _fields(data):
        if number == 4:
            value = _fixed(v, "<d")
        elif number == 6:
            value = _fixed(v, "<q")
        elif number == 2:
            start = int(_fixed(v, "<Q"))
        elif number == 3:
            time = int(_fixed(v, "<Q"))
        elif number == 7:
            attrs.append(_message(v))
    return value, _attributes(attrs), start, time


def _metric(data: bytes) -> list[PushedMetric]:
    name = description = ""
    kind, body = "", b""
    for number, _, v in _fields(data):
        if number == 1:
            name = _text(v)
        elif number == 2:
            description = _text(v)
        elif number in _KINDS:
            kind, body = _KINDS[number], _message(v)
    if not kind:
        raise OtlpError(f"metric {name!r} holds no data")
    if kind not in ("gauge", "sum"):
        return [PushedMetric(name, kind, None, description=description)]
    points: list[bytes] = []
    temporality, monotonic = 0, False
    for number, _, v in _fields(body):
        if number == 1:
            points.append(_message(v))
        elif number == 2 and isinstance(v, int):
            temporality = v
        elif number == 3 and isinstance(v, int):
            monotonic = bool(v)
    words = {DELTA: "delta", CUMULATIVE: "cumulative"}
    out = []
    for p in points:
        value, attrs, start, time = _number_point(p)
        out.append(
            PushedMetric(
                name,
                kind,
                value,
                attrs,
                monotonic,
                words.get(temporality, "") if kind == "sum" else "",
                start,
                time,
                description,
            )
        )
    return out


def decode_metrics_data(data: bytes) -> MetricsData:
    """Decode an OTLP ``MetricsData`` message.

    Raises:
        OtlpError: the bytes are not a well-formed ``MetricsData``.
    """
    resource: dict[str, AttributeValue] | None = None
    metrics: list[PushedMetric] = []
    for number, _, rm in _fields(data):
        if number != 1:
            continue
        for n, _, v in _fields(_message(rm)):
            if n == 1 and resource is None:
                resource = _attributes([_message(a) for k, _, a in _fields(_message(v)) if k == 1])
            elif n == 2:
                for k, _, m in _fields(_message(v)):
                    if k == 2:
                        metrics.extend(_metric(_message(m)))
    return MetricsData(resource or {}, tuple(metrics))
