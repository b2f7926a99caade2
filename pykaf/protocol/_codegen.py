"""What the encoder and decoder generators share: the source builder, runs, defaults.

Each (message, version) gets one straight-line encoder and one decoder with
every nested struct inlined: no per-field dispatch, no per-struct call.
Consecutive fixed-width fields share one ``struct`` call (a :class:`Run`), and
so do an int16/int32 length and the fixed-width fields before it, and an array
of numbers and the fixed-width fields after it. Generated code is registered
with :mod:`linecache`, so tracebacks through it show its lines.
"""

from __future__ import annotations

import linecache
import struct
from collections.abc import Callable
from typing import Any

from pykaf.protocol import _wire
from pykaf.protocol._errors import FieldVersionError, MalformedMessageError
from pykaf.protocol._schema import FIXED_FORMATS, MISSING, FieldSpec, StructSpec

#: A message's encoder: the parts of the body, in order (joined: the body).
Encoder = Callable[[Any], list[Any]]
Decoder = Callable[[Any, int], tuple[Any, int]]

_NEW = object.__new__
_STRUCTS: dict[str, struct.Struct] = {}


def struct_of(fmt: str) -> struct.Struct:
    """A shared ``struct.Struct`` for ``fmt``."""
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct(fmt)
    return s


def default_value(f: FieldSpec) -> Any:
    """The Python value a field takes when it is not set (immutable types only).

    Lists and structs are returned as the markers ``list`` and the struct's
    class; callers build a fresh one per object.
    """
    if f.kind == "array":
        return None if f.default is None else list
    if f.kind == "struct":
        assert f.struct is not None
        # a nullable struct may default to null (ConsumerGroupHeartbeat's Assignment)
        return None if f.default is None else f.struct.cls
    if f.default is not MISSING:
        if f.kind == "bytes" and f.default is not None:
            raise ValueError(f"{f.name}: bytes fields take no default but null")
        return f.default
    return _TYPE_DEFAULTS[f.kind]


_TYPE_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "uuid": _wire.ZERO_UUID,
    "records": None,
}


class Source:
    """Lines of generated source plus the namespace they run in."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_new": _NEW,
            "_ruv": _wire.read_uvarint,
            "_wuv": _wire.write_uvarint,
            "_wtags": _wire.write_tags,
            "_rtags": _wire.read_unknown_tags,
            "_uuid": _wire.uuid_from_bytes,
            "_astruct": _wire.array_struct,
            "_runstruct": _wire.run_struct,
            "_truncated": _wire.truncated,
            "_bad_length": _wire.bad_length,
            "_absent": FieldVersionError,
            "_Malformed": MalformedMessageError,
            "_pack_h": _wire.INT16.pack,
            "_pack_i": _wire.INT32.pack,
            "_unpack_h": _wire.INT16.unpack_from,
            "_unpack_i": _wire.INT32.unpack_from,
        }
        self._consts: dict[Any, str] = {}
        self._count = 0

    def var(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: Any, prefix: str = "K") -> str:
        """A name bound to ``value`` in the generated code's namespace."""
        key = (type(value), value if isinstance(value, (int, str, bytes)) else id(value))
        name = self._consts.get(key)
        if name is None:
            name = self.var(prefix)
            self._consts[key] = name
            self.ns[name] = value
        return name

    def literal(self, value: Any) -> str:
        """A source expression for an immutable default value."""
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return repr(value)
        return self.const(value)

    def add(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def compile(self, name: str, filename: str) -> Any:
        text = "\n".join(self.lines) + "\n"
        code = compile(text, filename, "exec")
        # Tracebacks through generated code then show its lines.
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(code, self.ns)
        return self.ns[name]


def nondefault(src: Source, f: FieldSpec, expr: str) -> str:
    """A condition true when ``expr`` (the field's value) differs from its default."""
    d = default_value(f)
    if f.kind == "array":
        return f"{expr} is not None" if d is None else expr
    if f.kind == "struct":
        assert f.struct is not None
        if d is None:
            return f"{expr} is not None"
        return struct_nondefault(src, f.struct, expr)
    if d is None:
        return f"{expr} is not None"
    return f"{expr} != {src.literal(d)}"


def struct_nondefault(src: Source, spec: StructSpec, expr: str) -> str:
    """A condition true when the struct ``expr`` differs from a default-built one."""
    parts = [f"{expr}.__class__ is not {src.const(spec.cls, 'C')}"]
    for f in spec.fields:
        parts.append(nondefault(src, f, f"{expr}.{f.attr}"))
    parts.append(f"{expr}.unknown_tags")
    cond = "(" + " or ".join(parts) + ")"
    shared = shared_default(spec)
    if shared is not None:
        cond = f"({expr} is not {src.const(shared, 'SD')} and {cond})"
    return cond


_SCALARS = frozenset(_TYPE_DEFAULTS) - {"records"}


def _read_only(self: Any, *args: Any) -> None:
    raise AttributeError(
        f"this {type(self).__name__} is the read-only default that decoded messages share; "
        f"assign a new {type(self).__name__}() to the field instead"
    )


def shared_default(spec: StructSpec) -> Any:
    """One read-only default ``spec`` object for decoders to share, if its fields allow.

    A decoded Fetch response would otherwise build three default structs per
    partition (the tagged DivergingEpoch, CurrentLeader and SnapshotId that
    brokers leave out). Only structs of scalar fields qualify: nothing in them
    could be changed in place. Returns None for the others.
    """
    if spec.shared is not None or any(f.kind not in _SCALARS for f in spec.fields):
        return spec.shared
    cls = spec.cls
    namespace = {
        "__slots__": (),
        "__setattr__": _read_only,
        "__delattr__": _read_only,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "_attrs": cls._attrs,
        "_base": cls,
        "_spec": spec,
    }
    frozen = type(cls.__name__, (cls,), namespace)
    obj: Any = _NEW(frozen)
    for f in spec.fields:
        object.__setattr__(obj, f.attr, default_value(f))
    object.__setattr__(obj, "unknown_tags", None)
    spec.shared = obj
    return obj


def default_expr(src: Source, f: FieldSpec) -> str:
    """An expression building the field's default value (fresh lists and structs)."""
    d = default_value(f)
    if d is list:
        return "[]"
    if f.kind == "struct" and d is not None:
        return f"{src.const(d, 'C')}()"
    return src.literal(d)


def is_number_array(f: FieldSpec, nullable: bool) -> bool:
    """An array of fixed-width numbers that cannot be null (one struct call reads it)."""
    return (
        f.kind == "array"
        and not nullable
        and isinstance(f.elem, str)
        and f.elem in FIXED_FORMATS
        and f.elem != "uuid"
    )


LENGTH_PREFIXED = frozenset({"string", "bytes", "records", "array"})


def array_struct_expr(src: Source, kind: str, count: str) -> str:
    """An expression for the cached ``struct.Struct`` of ``count`` values of ``kind``."""
    code = FIXED_FORMATS[kind]
    cache = src.const(_wire.array_structs(code), "AS")
    return f"({cache}.get({count}) or _astruct({code!r}, {count}))"


class Run:
    """Consecutive fixed-width values read or written by one ``struct`` call.

    A run may start with an array of numbers whose count is only known at run
    time (``start_array``); its ``struct.Struct`` is then looked up by count in
    a cache of its own place in the generated code. Reading it with a starred
    target (``*o.replicas, o.next = ...``) builds the list in the same step.
    """

    def __init__(self, src: Source) -> None:
        self.src = src
        self.items: list[tuple[str, str]] = []  # (format, expression or target)
        self.post: list[str] = []  # lines after an unpack (UUID conversions)
        # (format, the list (encoding) or its count (decoding), item size, target)
        self.array: tuple[str, str, int, str] | None = None

    def add(self, fmt: str, expr: str) -> None:
        self.items.append((fmt, expr))

    def start_array(self, fmt: str, var: str, size: int, target: str = "") -> None:
        self.array = (fmt, var, size, target)

    def _struct_expr(self, count: str) -> str:
        assert self.array is not None
        rest = "".join(c for c, _ in self.items)
        cache = self.src.const({}, "RS")
        code = self.array[0]
        return f"({cache}.get({count}) or _runstruct({cache}, {code!r}, {count}, {rest!r}))"

    def _reset(self) -> None:
        self.items.clear()
        self.post.clear()
        self.array = None

    def pack(self, out: str, d: int) -> None:
        """Emit the write of the run (if any) to ``out``; start a new one."""
        exprs = [e for _, e in self.items]
        if self.array is not None:
            x = self.array[1]
            args = ", ".join([f"*{x}", *exprs])
            self.src.add(d, f"{out} += {self._struct_expr(f'len({x})')}.pack({args})")
        elif self.items:
            pack = self.src.const(struct_of(">" + "".join(c for c, _ in self.items)).pack, "P")
            self.src.add(d, f"{out} += {pack}({', '.join(exprs)})")
        self._reset()

    def unpack(self, d: int) -> None:
        """Emit the read of the run (if any) from ``buf`` at ``pos``; start a new one."""
        targets = [t for _, t in self.items]
        rest = struct_of(">" + "".join(c for c, _ in self.items)).size
        if self.array is not None:
            # a starred target (*o.x, o.y = ...) would do, but is slower than a pop
            _, n, size, target = self.array
            values = f"[*{self._struct_expr(n)}.unpack_from(buf, pos)]"
            if not targets:
                self.src.add(d, f"{target} = {values}")
            else:
                lst = self.src.var("l")
                self.src.add(d, f"{lst} = {values}")
                if len(targets) == 1:
                    self.src.add(d, f"{targets[0]} = {lst}.pop()")
                else:
                    k = len(targets)
                    self.src.add(d, f"{', '.join(targets)}, = {lst}[-{k}:]")
                    self.src.add(d, f"del {lst}[-{k}:]")
                self.src.add(d, f"{target} = {lst}")
            self.src.add(d, f"pos += {n} * {size}" + (f" + {rest}" if rest else ""))
        elif self.items:
            unpack = self.src.const(struct_of(">" + "".join(c for c, _ in self.items)).unpack_from)
            self.src.add(d, f"{', '.join(targets)}, = {unpack}(buf, pos)")
            self.src.add(d, f"pos += {rest}")
        for line in self.post:
            self.src.add(d, line)
        self._reset()


# -- constructors ---------------------------------------------------------------
def build_init(spec: StructSpec) -> Callable[..., None]:
    """Compile ``__init__`` for ``spec``'s class: keyword-only, Kafka's defaults."""
    src = Source()
    missing = src.const(MISSING, "MISSING")
    params = []
    body = []
    for f in spec.fields:
        d = default_value(f)
        if d is list or (f.kind == "struct" and d is not None):
            params.append(f"{f.attr}={missing}")
            build = "[]" if d is list else f"{src.const(d, 'C')}()"
            body.append(f"self.{f.attr} = {build} if {f.attr} is {missing} else {f.attr}")
        else:
            params.append(f"{f.attr}={src.literal(d)}")
            body.append(f"self.{f.attr} = {f.attr}")
    params.append("unknown_tags=None")
    body.append("self.unknown_tags = unknown_tags")
    src.add(0, f"def __init__(self, *, {', '.join(params)}):")
    for line in body:
        src.add(1, line)
    fn: Callable[..., None] = src.compile("__init__", f"<pykaf {spec.name}.__init__>")
    fn.__qualname__ = f"{spec.name}.__init__"
    return fn
