"""Generate a message's encoder for one version (see :mod:`pykaf.protocol._codegen`).

The encoder appends to one ``bytearray`` and returns the list of parts: that
buffer, and after a large record set (a Produce request's) the set itself and
a fresh buffer, so that the caller joins them once (with the request's size
and header, for a request sent). Values are not type-checked here: a
bad one surfaces as a ``struct.error`` or ``AttributeError``, which
:meth:`Message.encode` turns into an :class:`EncodeError` naming the field.
Fields absent from the version must hold their default unless Kafka marks
them ignorable (:class:`FieldVersionError`).
"""

from __future__ import annotations

from pykaf.protocol._codegen import (
    LENGTH_PREFIXED,
    Encoder,
    Run,
    Source,
    array_struct_expr,
    is_number_array,
    nondefault,
    struct_of,
)
from pykaf.protocol._schema import FIXED_FORMATS, FIXED_SIZES, FieldSpec, StructSpec

#: A record set of at least this many bytes is a part of its own, joined at
#: the end (see ``_enc_value``), not appended to the encoder's buffer.
_PART_BYTES = 4096


def build_encoder(spec: StructSpec, version: int, flexible: bool) -> Encoder:
    """Compile the encoder of ``spec`` (a message) for ``version``: it returns the parts."""
    src = Source()
    src.add(0, "def encode(o):")
    src.add(1, "out = bytearray()")
    src.add(1, "parts = [out]")
    _enc_struct(src, spec, "o", "out", 1, version, flexible)
    src.add(1, "return parts")
    fn: Encoder = src.compile("encode", f"<pykaf encode {spec.name} v{version}>")
    return fn


def _enc_struct(
    src: Source, spec: StructSpec, o: str, out: str, d: int, v: int, flex: bool
) -> None:
    run = Run(src)
    tagged: list[FieldSpec] = []
    for f in spec.fields:
        value = f"{o}.{f.attr}"
        if v not in f.versions:
            if not f.ignorable:
                cond = nondefault(src, f, value)
                src.add(d, f"if {cond}: raise _absent({spec.name!r}, {f.attr!r}, {v})")
            continue
        if flex and f.is_tagged(v):
            tagged.append(f)
            continue
        if f.kind in FIXED_FORMATS:
            run.add(FIXED_FORMATS[f.kind], value + ".bytes" if f.kind == "uuid" else value)
            continue
        sub = f.elem or f.struct
        nullable = v in f.nullable
        if not flex and f.kind in LENGTH_PREFIXED:
            # the int16/int32 length is fixed-width: it joins the run before it
            x, length = _enc_prefix(src, f.kind, nullable, value, d)
            run.add("h" if f.kind == "string" else "i", length)
            run.pack(out, d)
        elif is_number_array(f, nullable):
            x = src.var("x")
            src.add(d, f"{x} = {value}")
            run.pack(out, d)
            _enc_uvarint(src, d, out, f"len({x}) + 1")
        else:
            run.pack(out, d)
            _enc_value(src, f.kind, sub, nullable, value, out, d, v, flex)
            continue
        if is_number_array(f, nullable):
            # the numbers start the next run: one pack for them and what follows
            assert isinstance(sub, str)
            run.start_array(FIXED_FORMATS[sub], x, FIXED_SIZES[sub])
        else:
            _enc_body(src, f.kind, sub, nullable, x, out, d, v, flex)
    run.pack(out, d)
    if flex:
        _enc_tags(src, tagged, o, out, d, v)


def _enc_prefix(src: Source, kind: str, nullable: bool, expr: str, d: int) -> tuple[str, str]:
    """Emit what a length-prefixed value needs before its length is packed.

    Returns the variable holding what the body writes (the encoded string, the
    bytes, the list) and the expression of its length (-1 for null).
    """
    x = src.var("x")
    if kind == "string":
        if nullable:
            src.add(d, f"{x} = {expr}")
            src.add(d, f"if {x} is not None: {x} = {x}.encode()")
        else:
            src.add(d, f"{x} = {expr}.encode()")
    else:
        src.add(d, f"{x} = {expr}")
    return x, f"-1 if {x} is None else len({x})" if nullable else f"len({x})"


def _enc_body(
    src: Source,
    kind: str,
    sub: str | StructSpec | None,
    nullable: bool,
    x: str,
    out: str,
    d: int,
    v: int,
    flex: bool,
) -> None:
    """Emit the part of a length-prefixed value after its length."""
    if nullable:
        src.add(d, f"if {x} is not None:")
        d += 1
    if kind == "records":
        _enc_records(src, d, x, out)
    elif kind != "array":
        src.add(d, f"{out} += {x}")
    elif isinstance(sub, str) and sub in FIXED_FORMATS and sub != "uuid":
        src.add(d, f"{out} += {array_struct_expr(src, sub, f'len({x})')}.pack(*{x})")
    else:
        e = src.var("e")
        src.add(d, f"for {e} in {x}:")
        elem_kind = "struct" if isinstance(sub, StructSpec) else str(sub)
        _enc_value(src, elem_kind, sub, False, e, out, d + 1, v, flex)


def _enc_uvarint(src: Source, d: int, out: str, expr: str) -> None:
    n = src.var("n")
    src.add(d, f"{n} = {expr}")
    src.add(d, f"if {n} < 128: {out}.append({n})")
    src.add(d, f"else: _wuv({out}, {n})")


def _enc_null(src: Source, d: int, out: str, flex: bool, kind: str) -> None:
    if flex:
        src.add(d, f"{out}.append(0)")
    elif kind == "string":
        src.add(d, f"{out} += b'\\xff\\xff'")
    else:
        src.add(d, f"{out} += b'\\xff\\xff\\xff\\xff'")


def _enc_records(src: Source, d: int, x: str, out: str) -> None:
    """Append the record set ``x`` (its length written already).

    A large one is not copied into the message's buffer (and again when the
    buffer grows and when it is turned into bytes): it is a part of its own,
    and the parts are joined once, by the caller. (In a tagged field's own
    buffer it is appended.)
    """
    if out != "out":
        src.add(d, f"{out} += {x}")
        return
    src.add(d, f"if len({x}) >= {_PART_BYTES}:")
    src.add(d + 1, f"parts.append({x}); out = bytearray(); parts.append(out)")
    src.add(d, f"else: out += {x}")


def _enc_value(
    src: Source,
    kind: str,
    sub: str | StructSpec | None,
    nullable: bool,
    expr: str,
    out: str,
    d: int,
    v: int,
    flex: bool,
) -> None:
    """Append the encoding of ``expr`` (a value of type ``kind``) to ``out``."""
    if kind in FIXED_FORMATS:
        fmt = ">" + FIXED_FORMATS[kind]
        pack = src.const(struct_of(fmt).pack, "P")
        src.add(d, f"{out} += {pack}({expr}{'.bytes' if kind == 'uuid' else ''})")
        return
    if kind == "struct":
        assert isinstance(sub, StructSpec)
        if expr.isidentifier():
            x = expr
        else:
            x = src.var("x")
            src.add(d, f"{x} = {expr}")
        if nullable:
            # Kafka's nullable struct: an int8 marker, -1 for null, 1 before the struct
            src.add(d, f"if {x} is None: {out}.append(255)")
            src.add(d, "else:")
            d += 1
            src.add(d, f"{out}.append(1)")
        _enc_struct(src, sub, x, out, d, v, flex)
        return
    x = src.var("x")
    src.add(d, f"{x} = {expr}")
    if nullable:
        src.add(d, f"if {x} is None:")
        _enc_null(src, d + 1, out, flex, kind)
        src.add(d, "else:")
        d += 1
    if kind == "string":
        b = src.var("b")
        src.add(d, f"{b} = {x}.encode()")
        if flex:
            _enc_uvarint(src, d, out, f"len({b}) + 1")
        else:
            src.add(d, f"{out} += _pack_h(len({b}))")
        src.add(d, f"{out} += {b}")
    elif kind in ("bytes", "records"):
        if flex:
            _enc_uvarint(src, d, out, f"len({x}) + 1")
        else:
            src.add(d, f"{out} += _pack_i(len({x}))")
        if kind == "records":
            _enc_records(src, d, x, out)
        else:
            src.add(d, f"{out} += {x}")
    elif kind == "array":
        if flex:
            _enc_uvarint(src, d, out, f"len({x}) + 1")
        else:
            src.add(d, f"{out} += _pack_i(len({x}))")
        if isinstance(sub, str) and sub in FIXED_FORMATS and sub != "uuid":
            src.add(d, f"{out} += {array_struct_expr(src, sub, f'len({x})')}.pack(*{x})")
        else:
            e = src.var("e")
            src.add(d, f"for {e} in {x}:")
            elem_kind = "struct" if isinstance(sub, StructSpec) else str(sub)
            _enc_value(src, elem_kind, sub, False, e, out, d + 1, v, flex)
    else:
        raise AssertionError(f"unknown kind {kind}")


def _enc_tags(src: Source, tagged: list[FieldSpec], o: str, out: str, d: int, v: int) -> None:
    u = src.var("u")
    src.add(d, f"{u} = {o}.unknown_tags")
    if not tagged:
        src.add(d, f"if {u}: _wtags({out}, (), {u})")
        src.add(d, f"else: {out}.append(0)")
        return
    t = src.var("t")
    src.add(d, f"{t} = []")
    for f in sorted(tagged, key=lambda f: f.tag or 0):
        x = src.var("x")
        src.add(d, f"{x} = {o}.{f.attr}")
        src.add(d, f"if {nondefault(src, f, x)}:")
        tb = src.var("tb")
        src.add(d + 1, f"{tb} = bytearray()")
        _enc_value(src, f.kind, f.elem or f.struct, v in f.nullable, x, tb, d + 1, v, True)
        src.add(d + 1, f"{t}.append(({f.tag}, {tb}))")
    src.add(d, f"if {t} or {u}: _wtags({out}, {t}, {u})")
    src.add(d, f"else: {out}.append(0)")
