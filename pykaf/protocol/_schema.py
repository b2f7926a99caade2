"""pykaf's compact message-definition language, and the schema objects it parses into.

A definition lists a message's fields, one a line, nested by two-space indents::

    Topics []MetadataRequestTopic 0+ null=1+
      TopicId uuid 10+
      Name string 0+ null=10+
    AllowAutoTopicCreation bool 4+ default=true

A line is ``Name Type Versions`` followed by any of ``null=VERSIONS`` (nullable
versions), ``tag=N tagged=VERSIONS`` (a tagged field), ``default=VALUE``
(``null``, ``true``, ``false``, an integer, a float or a double-quoted string)
and ``ignorable``. Versions are written as Kafka writes them: ``3+``, ``0-7``,
``5``, ``none``. Types are Kafka's: ``int8`` ... ``records``, ``[]T`` for arrays
and a capitalised struct name. A ``struct Name`` line at the top level declares
a struct that several fields share (Kafka's ``commonStructs``); a field whose
struct type has no indented fields refers to one of those.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

#: Versions at or above this are "open ended" (``3+``).
OPEN = 0x7FFF

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "uuid",
        "records",
    }
)

#: struct format characters of the fixed-width types.
FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}
FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
}
NULLABLE_TYPES = frozenset({"string", "bytes", "records", "array", "struct"})


class SchemaError(ValueError):
    """A definition in pykaf's compact format is malformed (a bug in pykaf)."""


class _Missing:
    """The marker of "no ``default=`` given": the type's own default applies."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; empty when ``lo > hi``."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        """Read Kafka's notation: ``3+``, ``0-7``, ``5`` or ``none``."""
        if text == "none":
            return NO_VERSIONS
        try:
            if text.endswith("+"):
                return cls(int(text[:-1]), OPEN)
            if "-" in text:
                lo, hi = text.split("-")
                return cls(int(lo), int(hi))
            v = int(text)
        except ValueError:
            raise SchemaError(f"bad version range {text!r}") from None
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        """True when no version is in the range."""
        return self.lo > self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == OPEN:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


def snake_case(name: str) -> str:
    """Kafka's CamelCase field name as a Python attribute: ``IsrNodes`` -> ``isr_nodes``."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


@dataclass(eq=False, repr=False)
class FieldSpec:
    """One field of a struct.

    Attributes:
        name: Kafka's name (``PartitionIndex``).
        attr: the Python attribute (``partition_index``).
        type: Kafka's type as written (``int32``, ``[]int32``, ``[]Topic``, ``Topic``).
        kind: a primitive name, ``array`` or ``struct``.
        elem: for arrays, the element: a primitive name or a :class:`StructSpec`.
        struct: for struct fields, the :class:`StructSpec`.
    """

    name: str
    attr: str
    type: str
    kind: str
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tagged: Versions = NO_VERSIONS
    tag: int | None = None
    default: Any = MISSING
    ignorable: bool = False
    elem: str | StructSpec | None = None
    struct: StructSpec | None = None

    def __repr__(self) -> str:
        return f"<FieldSpec {self.name} {self.type} {self.versions}>"

    def is_tagged(self, version: int) -> bool:
        """Whether the field travels in the tag buffer in ``version``."""
        return version in self.tagged and version in self.versions

    @property
    def elem_struct(self) -> StructSpec | None:
        """The element struct of an array of structs, else None."""
        return self.elem if isinstance(self.elem, StructSpec) else None


@dataclass(eq=False, repr=False)
class StructSpec:
    """A struct: a name and its fields, in wire order."""

    name: str
    fields: list[FieldSpec] = field(default_factory=list)
    #: the Python class bound to the struct (set when its message class is created)
    cls: Any = None
    #: the read-only default object decoders share (see ``_codegen.shared_default``)
    shared: Any = None

    def __repr__(self) -> str:
        return f"<StructSpec {self.name}: {len(self.fields)} fields>"

    def walk(self) -> list[StructSpec]:
        """Every struct in this one (itself first), each once, outermost first."""
        seen: dict[int, StructSpec] = {}
        stack = [self]
        while stack:
            s = stack.pop(0)
            if id(s) in seen:
                continue
            seen[id(s)] = s
            for f in s.fields:
                sub = f.struct or f.elem_struct
                if sub is not None:
                    stack.append(sub)
        return list(seen.values())


_TOKEN = re.compile(r'\S+="(?:[^"\\]|\\.)*"|\S+')


def _parse_default(text: str, type_: str) -> Any:
    if text == "null":
        return None
    if text.startswith('"'):
        value = json.loads(text)
        if not isinstance(value, str):
            raise SchemaError(f"bad default {text}")
        return value
    if type_ == "bool":
        if text not in ("true", "false"):
            raise SchemaError(f"bad bool default {text}")
        return text == "true"
    if type_ == "float64":
        return float(text)
    try:
        return int(text)
    except ValueError:
        raise SchemaError(f"bad default {text!r} for {type_}") from None


def _kind(type_: str) -> tuple[str, str | None]:
    """(kind, element or struct name) of a type token."""
    if type_.startswith("[]"):
        return "array", type_[2:]
    if type_ in PRIMITIVES:
        return type_, None
    if not type_[:1].isupper():
        raise SchemaError(f"unknown type {type_!r}")
    return "struct", type_


def parse_fields(text: str, root_name: str) -> StructSpec:
    """Parse a definition into the root :class:`StructSpec` named ``root_name``."""
    lines = []
    for lineno, raw in enumerate(textwrap.dedent(text).splitlines(), 1):
        if raw.strip():
            indent = len(raw) - len(raw.lstrip(" "))
            lines.append((lineno, indent, _TOKEN.findall(raw)))
    root = StructSpec(root_name)
    common: dict[str, StructSpec] = {}
    references: list[FieldSpec] = []
    i = 0
    while i < len(lines):
        lineno, indent, tokens = lines[i]
        if indent:
            raise SchemaError(f"line {lineno}: unexpected indent")
        if tokens[0] == "struct":
            if len(tokens) != 2:
                raise SchemaError(f"line {lineno}: expected 'struct Name'")
            sub = StructSpec(tokens[1])
            common[tokens[1]] = sub
            i = _parse_block(lines, i + 1, 2, sub, references)
        else:
            i = _parse_block(lines, i, 0, root, references, single=True)
    for f in references:
        name = struct_name(f)
        if name not in common:
            raise SchemaError(f"field {f.name}: struct {name} has no fields and is not declared")
        attach(f, common[name])
    return root


def _parse_block(
    lines: list[tuple[int, int, list[str]]],
    i: int,
    indent: int,
    parent: StructSpec,
    references: list[FieldSpec],
    single: bool = False,
) -> int:
    """Parse the field lines at ``indent`` from line ``i`` into ``parent``; return the next line."""
    while i < len(lines):
        lineno, ind, tokens = lines[i]
        if ind < indent:
            break
        if ind > indent:
            raise SchemaError(f"line {lineno}: unexpected indent")
        f = _parse_field(lineno, tokens)
        parent.fields.append(f)
        i += 1
        if f.kind == "struct" or (f.kind == "array" and f.elem is None):
            if i < len(lines) and lines[i][1] > indent:
                sub = StructSpec(struct_name(f))
                attach(f, sub)
                i = _parse_block(lines, i, lines[i][1], sub, references)
            else:
                references.append(f)
        if single:
            break
    return i


def _parse_field(lineno: int, tokens: list[str]) -> FieldSpec:
    if len(tokens) < 3:
        raise SchemaError(f"line {lineno}: expected 'Name Type Versions ...'")
    name, type_, versions = tokens[:3]
    kind, inner = _kind(type_)
    f = FieldSpec(name, snake_case(name), type_, kind, Versions.parse(versions))
    if kind == "array" and inner in PRIMITIVES:
        f.elem = inner
    for tok in tokens[3:]:
        key, _, value = tok.partition("=")
        if key == "null":
            f.nullable = Versions.parse(value)
        elif key == "tag":
            f.tag = int(value)
        elif key == "tagged":
            f.tagged = Versions.parse(value)
        elif key == "default":
            f.default = _parse_default(value, type_)
        elif key == "ignorable" and not value:
            f.ignorable = True
        else:
            raise SchemaError(f"line {lineno}: unknown attribute {tok!r}")
    if (f.tag is None) != f.tagged.empty:
        raise SchemaError(f"line {lineno}: 'tag' and 'tagged' go together")
    if not f.nullable.empty and f.kind not in NULLABLE_TYPES:
        raise SchemaError(f"line {lineno}: a {f.kind} cannot be nullable")
    return f


def struct_name(f: FieldSpec) -> str:
    """The struct name a struct or struct-array field refers to."""
    return f.type[2:] if f.type.startswith("[]") else f.type


def attach(f: FieldSpec, sub: StructSpec) -> None:
    """Make ``sub`` the struct of field ``f``."""
    if f.kind == "array":
        f.elem = sub
    else:
        f.struct = sub
