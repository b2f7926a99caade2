"""A protobuf wire-format reader for the tests of pykaf's OTLP writer.

Written from the protobuf encoding rules alone (varints, fixed64, length
delimited fields), independent of ``pykaf._cluster.otlp``, and read with the
field numbers of opentelemetry-proto's metrics.proto, so the tests check the
writer against a second reading of the format.
"""

from __future__ import annotations

import struct
from typing import Any


def fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; LEN values as bytes."""
    out = []
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            size, i = varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    assert i == len(data), "a field ran past the message"
    return out


def varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at ``i`` and where the next field starts."""
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def _attrs(entries: list[bytes]) -> dict[str, str]:
    out = {}
    for kv in entries:
        f = dict((n, v) for n, _, v in fields(kv))
        any_value = dict((n, v) for n, _, v in fields(f[2]))
        out[f[1].decode()] = any_value[1].decode()
    return out


def read_metrics(data: bytes) -> dict[str, Any]:
    """A MetricsData as {"resource": attrs, "scope": (name, version), "metrics": [...]}.

    Each metric: {"name", "kind" ("gauge"/"sum"), "value", "attributes",
    "start", "time", "temporality", "monotonic"}.
    """
    (rm_field,) = fields(data)
    assert rm_field[0] == 1
    rm = fields(rm_field[2])
    resource = _attrs([v for n, _, v in fields(next(v for n, _, v in rm if n == 1)) if n == 1])
    (sm,) = [v for n, _, v in rm if n == 2]
    sm_fields = fields(sm)
    scope = dict((n, v) for n, _, v in fields(next(v for n, _, v in sm_fields if n == 1)))
    metrics = []
    for n, _, m in sm_fields:
        if n != 2:
            continue
        mf = fields(m)
        name = next(v for k, _, v in mf if k == 1).decode()
        kind, body = next(("gauge" if k == 5 else "sum", v) for k, _, v in mf if k in (5, 7))
        bf = fields(body)
        (dp,) = [v for k, _, v in bf if k == 1]
        dpf = fields(dp)
        value: Any = None
        start = time = 0
        for k, _, v in dpf:
            if k == 4:
                value = struct.unpack("<d", v)[0]
            elif k == 6:
                value = struct.unpack("<q", v)[0]
            elif k == 2:
                start = struct.unpack("<Q", v)[0]
            elif k == 3:
                time = struct.unpack("<Q", v)[0]
        metrics.append(
            {
                "name": name,
                "kind": kind,
                "value": value,
                "attributes": _attrs([v for k, _, v in dpf if k == 7]),
                "start": start,
                "time": time,
                "temporality": next((v for k, _, v in bf if k == 2), 0),
                "monotonic": bool(next((v for k, _, v in bf if k == 3), 0)),
            }
        )
    return {
        "resource": resource,
        "scope": (scope[1].decode(), scope.get(2, b"").decode()),
        "metrics": metrics,
    }
