"""pykaf against kafka-python, an independent implementation of the same protocol.

Two kafka-python implementations are compared: its JSON-spec classes
(``kafka.protocol.metadata`` ...) for every message and version both have, and
its older hand-written per-version classes (``kafka.protocol.old``) for a few.
pykaf's bytes must be what kafka-python writes for the same values, and each
must read what the other wrote. Tests only: pykaf never imports kafka-python.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from protocol_values import all_versions, make

import pykaf.protocol as P
from pykaf.protocol._message import Message, spec_of
from pykaf.protocol._schema import StructSpec

kafka_protocol = pytest.importorskip("kafka.protocol")
api_message = pytest.importorskip("kafka.protocol.api_message")


def kafka_python_classes() -> dict[str, Any]:
    """kafka-python's JSON-spec message classes, by Kafka's message name."""
    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or ".schemas" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name in dir(module):
            obj = getattr(module, name)
            is_message = isinstance(obj, type) and issubclass(obj, api_message.ApiMessage)
            if is_message and obj is not api_message.ApiMessage:
                found[name] = obj
    return found


KP = kafka_python_classes()


def renamed_by_kafka_python(cls: type[Message], version: int) -> bool:
    """kafka-python renames the *_authorized_operations fields (to a bitfield type)."""
    return any(
        version in f.versions and f.attr.endswith("authorized_operations")
        for s in spec_of(cls).walk()
        for f in s.fields
    )


CASES = [
    (cls, v)
    for cls, v in all_versions()
    if cls.__name__ in KP and not renamed_by_kafka_python(cls, v)
]


def to_kafka_python(obj: Any, kcls: Any, version: int) -> Any:
    """The kafka-python object holding the same values as the pykaf ``obj``."""
    kwargs: dict[str, Any] = {}
    for f in spec_of(type(obj)).fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.attr)
        sub = f.struct or f.elem_struct
        if sub is not None and value is not None:
            sub_cls = getattr(kcls, sub.name)
            if f.kind == "array":
                value = [to_kafka_python(x, sub_cls, version) for x in value]
            else:
                value = to_kafka_python(value, sub_cls, version)
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[f.attr] = value
    return kcls(**kwargs, version=version)


def test_most_messages_are_compared() -> None:
    assert len(CASES) > 350


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
def test_same_bytes_as_kafka_python(cls: type[Message], version: int) -> None:
    obj = make(cls, version, unknown_tags=False)
    if cls is P.ApiVersionsResponse:
        obj.error_code = 0  # kafka-python re-reads an error response as v0 (KIP-511)
    data = obj.encode(version)
    theirs = to_kafka_python(obj, KP[cls.__name__], version)
    assert bytes(theirs.encode(version=version)) == data
    assert KP[cls.__name__].decode(data, version=version) == theirs
    assert cls.decode(bytes(theirs.encode(version=version)), version) == obj


# -- kafka-python's older hand-written classes: positional tuples ----------------------
def to_tuple(obj: Any, version: int) -> tuple[Any, ...]:
    """The values of ``obj`` in wire order, nested structs as tuples (the old classes' shape).

    The old classes write a struct of one field as the bare field (the wire
    format is the same: Kafka does not box), so such structs are unwrapped.
    """
    values = tuple(
        _tuple_value(f.kind, f.elem or f.struct, getattr(obj, f.attr), version)
        for f in spec_of(type(obj)).fields
        if version in f.versions
    )
    return values


def _tuple_value(kind: str, sub: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if kind == "struct":
        return _unbox(to_tuple(value, version))
    if kind == "array" and isinstance(sub, StructSpec):
        return [_unbox(to_tuple(x, version)) for x in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _unbox(values: tuple[Any, ...]) -> Any:
    return values[0] if len(values) == 1 else values


def leaves(value: Any) -> list[Any]:
    """Every scalar in ``value`` in order (dicts by insertion order)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


OLD_CASES = [
    ("metadata", "MetadataRequest", 1),
    ("metadata", "MetadataResponse", 5),
    ("fetch", "FetchRequest", 4),
    ("fetch", "FetchResponse", 4),
    ("produce", "ProduceRequest", 3),
    ("produce", "ProduceResponse", 5),
    ("group", "JoinGroupRequest", 1),
    ("group", "SyncGroupResponse", 1),
    ("commit", "OffsetCommitRequest", 2),
    ("commit", "OffsetFetchResponse", 3),
    ("list_offsets", "ListOffsetsResponse", 1),
]


@pytest.mark.parametrize(
    ("module", "name", "version"), OLD_CASES, ids=[f"{n}-v{v}" for _, n, v in OLD_CASES]
)
def test_old_kafka_python_classes(module: str, name: str, version: int) -> None:
    old = pytest.importorskip(f"kafka.protocol.old.{module}")
    old_cls = getattr(old, f"{name}_v{version}")
    cls: type[Message] = getattr(P, name)
    obj = make(cls, version, unknown_tags=False)
    data = obj.encode(version)
    values = to_tuple(obj, version)
    assert leaves(old_cls.decode(data).to_object()) == leaves(values)
    theirs = bytes(old_cls(*values).encode())
    assert theirs == data
    assert cls.decode(theirs, version) == obj
