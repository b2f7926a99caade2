"""Build protocol objects whose every field (that exists in a version) is non-default.

Deterministic (seeded per message and version), so a failure reproduces.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pykaf.protocol as P
from pykaf.protocol._codegen import default_value
from pykaf.protocol._message import Message, spec_of
from pykaf.protocol._schema import FieldSpec, StructSpec

RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def all_messages() -> list[type[Message]]:
    """Every request, response and data class pykaf has."""
    classes: list[type[Message]] = [*P.REQUESTS.values(), *P.RESPONSES.values()]
    classes += [P.ConsumerProtocolSubscription, P.ConsumerProtocolAssignment]
    return classes


def all_versions() -> list[tuple[type[Message], int]]:
    """(class, version) for every version of every message."""
    return [(cls, v) for cls in all_messages() for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


class Maker:
    """Makes non-default values for one version of one message.

    Args:
        nulls: set nullable fields to None (where the version allows) instead
            of to a value.
        unknown_tags: give every struct of a flexible version an unknown tag.
    """

    def __init__(
        self, cls: type[Message], version: int, *, nulls: bool = False, unknown_tags: bool = True
    ) -> None:
        self.cls = cls
        self.version = version
        self.flexible = cls.is_flexible(version)
        self.rng = random.Random(f"{cls.__name__}-{version}-{nulls}")
        self.nulls = nulls
        self.unknown_tags = unknown_tags and self.flexible

    def message(self) -> Message:
        obj: Message = self.struct(spec_of(self.cls))
        return obj

    def struct(self, spec: StructSpec) -> Any:
        kwargs: dict[str, Any] = {}
        for f in spec.fields:
            if self.version in f.versions:
                kwargs[f.attr] = self.value(f, f.kind, f.elem or f.struct, top=True)
        if self.unknown_tags:
            # tags far above any Kafka uses, so they stay unknown
            kwargs["unknown_tags"] = {
                1000 + self.rng.randrange(50): self.rng.randbytes(self.rng.randrange(0, 4))
            }
        return spec.cls(**kwargs)

    def value(self, f: FieldSpec, kind: str, sub: Any, top: bool) -> Any:
        rng = self.rng
        if top and self.nulls and self.version in f.nullable:
            return None
        default = default_value(f) if top else None
        if kind in RANGES:
            lo, hi = RANGES[kind]
            while True:
                x = rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(-3, 300)])
                if lo <= x <= hi and x != default:
                    return x
        if kind == "bool":
            return not default if top else rng.random() < 0.5
        if kind == "float64":
            return rng.choice([1.5, -2.25e10, 3.141592653589793])
        if kind == "string":
            return rng.choice(["topic-é-✓", "a", "x" * 200, "group.id-1"])
        if kind == "bytes":
            return rng.randbytes(rng.randrange(1, 40))
        if kind == "records":
            return rng.randbytes(rng.randrange(1, 100))
        if kind == "uuid":
            return uuid.UUID(int=rng.getrandbits(128) | 1)
        if kind == "struct":
            return self.struct(sub)
        if kind == "array":
            elem_kind = "struct" if isinstance(sub, StructSpec) else sub
            return [self.value(f, elem_kind, sub, top=False) for _ in range(rng.randrange(1, 4))]
        raise AssertionError(kind)


def make(cls: type[Message], version: int, **kwargs: Any) -> Any:
    """A ``cls`` object with every field of ``version`` set to a non-default value."""
    return Maker(cls, version, **kwargs).message()


def strategy(cls: type[Message], version: int) -> Any:
    """A Hypothesis strategy for ``cls`` objects valid in ``version`` (any values)."""
    from hypothesis import strategies as st

    flexible = cls.is_flexible(version)

    def for_kind(kind: str, sub: Any, nullable: bool) -> Any:
        if kind in RANGES:
            lo, hi = RANGES[kind]
            s: Any = st.integers(lo, hi)
        elif kind == "bool":
            s = st.booleans()
        elif kind == "float64":
            s = st.floats(allow_nan=False)
        elif kind == "string":
            s = st.text(max_size=200)
        elif kind in ("bytes", "records"):
            s = st.binary(max_size=300)
        elif kind == "uuid":
            s = st.uuids()
        elif kind == "struct":
            s = for_struct(sub)
        else:
            elem = "struct" if isinstance(sub, StructSpec) else sub
            s = st.lists(for_kind(elem, sub, False), max_size=4)
        return st.none() | s if nullable else s

    def for_struct(spec: StructSpec) -> Any:
        kwargs = {
            f.attr: for_kind(f.kind, f.elem or f.struct, version in f.nullable)
            for f in spec.fields
            if version in f.versions
        }
        if flexible:
            kwargs["unknown_tags"] = st.none() | st.dictionaries(
                st.integers(1000, 100_000), st.binary(max_size=200), max_size=3
            )
        return st.builds(spec.cls, **kwargs)

    return for_struct(spec_of(cls))
