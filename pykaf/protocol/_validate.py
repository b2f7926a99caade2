"""Say which field made an encoder fail, and why.

Encoders are generated for speed and do no type checking of their own: a bad
value surfaces as a ``struct.error`` or ``AttributeError`` with no field name.
When that happens, this module walks the object against its schema (slowly,
once) to name the field: ``topics[0].partitions[2].partition_index: 2**40 is
out of range for int32``.

It imports nothing of :mod:`pykaf.protocol._message` (which imports it): the
caller hands over the object's parsed definition.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pykaf.protocol._schema import StructSpec

_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_BYTES_LIKE = (bytes, bytearray, memoryview)


def explain(obj: Any, spec: StructSpec, version: int, exc: BaseException) -> str:
    """A message naming the first invalid field of ``obj`` (defined by ``spec``) in ``version``."""
    name = type(obj).__name__
    flexible = bool(obj.is_flexible(version))
    problem = _check_struct(spec, obj, version, flexible, "")
    if problem is None:
        return f"cannot encode {name} v{version}: {type(exc).__name__}: {exc}"
    path, why = problem
    return f"cannot encode {name} v{version}: {path.lstrip('.')}: {why}"


def _check_struct(
    spec: StructSpec, obj: Any, v: int, flex: bool, path: str
) -> tuple[str, str] | None:
    if not isinstance(obj, spec.cls):
        return path, f"expected a {spec.cls.__name__}, got {type(obj).__name__}"
    for f in spec.fields:
        if v not in f.versions:
            continue
        try:
            value = getattr(obj, f.attr)
        except AttributeError:
            return f"{path}.{f.attr}", "not set"
        sub = f.elem or f.struct
        problem = _check_value(f.kind, sub, v in f.nullable, value, v, flex, f"{path}.{f.attr}")
        if problem is not None:
            return problem
    tags = getattr(obj, "unknown_tags", None)
    if tags is not None and not (
        isinstance(tags, dict)
        and all(isinstance(k, int) and isinstance(b, _BYTES_LIKE) for k, b in tags.items())
    ):
        return f"{path}.unknown_tags", "must be a dict of int to bytes"
    return None


def _check_value(
    kind: str,
    sub: str | StructSpec | None,
    nullable: bool,
    value: Any,
    v: int,
    flex: bool,
    path: str,
) -> tuple[str, str] | None:
    if value is None:
        if nullable:
            return None
        return path, f"None is not allowed in version {v}"
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        if not isinstance(value, int):
            return path, f"expected an int, got {type(value).__name__}"
        if not lo <= value <= hi:
            return path, f"{value} is out of range for {kind}"
    elif kind == "float64":
        if not isinstance(value, (int, float)):
            return path, f"expected a float, got {type(value).__name__}"
    elif kind == "uuid":
        if not isinstance(value, UUID):
            return path, f"expected a uuid.UUID, got {type(value).__name__}"
    elif kind == "string":
        if not isinstance(value, str):
            return path, f"expected a str, got {type(value).__name__}"
        try:
            data = value.encode()
        except UnicodeEncodeError as exc:
            return path, f"not encodable as UTF-8 ({exc})"
        if not flex and len(data) > 0x7FFF:
            return path, f"{len(data)} bytes is too long for a (non-compact) string"
    elif kind in ("bytes", "records"):
        if not isinstance(value, _BYTES_LIKE):
            return path, f"expected bytes, got {type(value).__name__}"
    elif kind == "array":
        if not isinstance(value, (list, tuple)):
            return path, f"expected a list, got {type(value).__name__}"
        elem_kind = "struct" if isinstance(sub, StructSpec) else str(sub)
        for i, item in enumerate(value):
            problem = _check_value(elem_kind, sub, False, item, v, flex, f"{path}[{i}]")
            if problem is not None:
                return problem
    elif kind == "struct":
        assert isinstance(sub, StructSpec)
        return _check_struct(sub, value, v, flex, path)
    return None
