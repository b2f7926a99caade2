"""Generate a message's decoder for one version (see :mod:`pykaf.protocol._codegen`).

Decoders trust nothing: every count is checked against the bytes left before
a list is built, and every length that could run past the end is caught by
one check at the end (a slice past the end is merely short, so checking once
is enough). ``struct.error``/``IndexError`` from reading past the end are
turned into :class:`MalformedMessageError` by :meth:`Message.decode`.
"""

from __future__ import annotations

from pykaf.protocol._codegen import (
    LENGTH_PREFIXED,
    Decoder,
    Run,
    Source,
    array_struct_expr,
    default_expr,
    is_number_array,
    shared_default,
    struct_of,
)
from pykaf.protocol._schema import FIXED_FORMATS, FIXED_SIZES, MISSING, FieldSpec, StructSpec


def has_records(spec: StructSpec) -> bool:
    """Whether ``spec`` or a struct inside it has a ``records`` field."""
    return any(f.kind == "records" for s in spec.walk() for f in s.fields)


def build_decoder(spec: StructSpec, version: int, flexible: bool, view: bool) -> Decoder:
    """Compile the decoder of ``spec`` for ``version``.

    ``view`` selects the variant for memoryview input (strings are decoded with
    ``str(view, "utf-8")``, which a memoryview supports and ``.decode`` not);
    otherwise the input is ``bytes``.
    """
    src = Source()
    src.add(0, "def decode(buf, pos):")
    src.add(1, "end = len(buf)")
    if has_records(spec):
        src.add(1, "mv = buf" if view else "mv = memoryview(buf)")
    root = _dec_struct(src, spec, 1, version, flexible, view, spec.name)
    src.add(1, f"if pos > end: raise _truncated({spec.name!r})")
    src.add(1, f"return {root}, pos")
    fn: Decoder = src.compile("decode", f"<pykaf decode {spec.name} v{version}>")
    return fn


def min_size(spec: StructSpec, v: int, flex: bool) -> int:
    """The fewest bytes an encoding of ``spec`` in version ``v`` can take."""
    size = 1 if flex else 0  # the tag buffer
    for f in spec.fields:
        if v not in f.versions or (flex and f.is_tagged(v)):
            continue
        if f.kind == "struct" and v in f.nullable:
            size += 1  # the null marker alone
        else:
            size += _min_value_size(f.kind, f.elem or f.struct, v, flex)
    return size


def _min_value_size(kind: str, sub: str | StructSpec | None, v: int, flex: bool) -> int:
    if kind in FIXED_SIZES:
        return FIXED_SIZES[kind]
    if kind == "struct":
        assert isinstance(sub, StructSpec)
        return min_size(sub, v, flex)
    if flex:
        return 1
    return 2 if kind == "string" else 4


def _dec_struct(
    src: Source, spec: StructSpec, d: int, v: int, flex: bool, view: bool, path: str
) -> str:
    """Emit code building one ``spec`` object from ``buf`` at ``pos``; return its variable."""
    o = src.var("o")
    src.add(d, f"{o} = _new({src.const(spec.cls, 'C')})")
    run = Run(src)
    tagged: list[FieldSpec] = []
    for f in spec.fields:
        target = f"{o}.{f.attr}"
        if v not in f.versions or (flex and f.is_tagged(v)):
            if f.kind == "struct" and f.default is MISSING:
                assert f.struct is not None
                shared = shared_default(f.struct)
                if shared is not None:
                    src.add(d, f"{target} = {src.const(shared, 'SD')}")
                else:
                    src.add(d, f"{target} = {_dec_default_struct(src, f.struct, d)}")
            else:
                src.add(d, f"{target} = {default_expr(src, f)}")
            if v in f.versions:
                tagged.append(f)
            continue
        if f.kind in FIXED_FORMATS:
            if f.kind == "uuid":
                tmp = src.var("id")
                run.add("16s", tmp)
                run.post.append(f"{target} = _uuid({tmp})")
            else:
                run.add(FIXED_FORMATS[f.kind], target)
            continue
        sub = f.elem or f.struct
        nullable = v in f.nullable
        fpath = f"{path}.{f.attr}"
        length = None
        if not flex and f.kind in LENGTH_PREFIXED:
            # read the int16/int32 length with the fixed-width fields before it
            length = src.var("n")
            run.add("h" if f.kind == "string" else "i", length)
        run.unpack(d)
        if is_number_array(f, nullable):
            assert isinstance(sub, str)
            n = length or _dec_length(src, d, f.kind, flex)
            size = FIXED_SIZES[sub]
            src.add(d, f"if {n} == -1: {n} = 0")  # a null read as empty (see _dec_value)
            src.add(d, f"if {n} < 0 or {n} * {size} > end - pos: raise _bad_length({fpath!r}, {n})")
            # the numbers start the next run: one unpack for them and what follows
            run.start_array(FIXED_FORMATS[sub], n, size, target)
            continue
        _dec_value(src, f.kind, sub, nullable, target, d, v, flex, view, fpath, length)
    run.unpack(d)
    if flex:
        _dec_tags(src, tagged, o, d, v, view, path)
    else:
        src.add(d, f"{o}.unknown_tags = None")
    return o


_NULL_AS = {"string": "''", "bytes": "b''", "records": "None", "array": "[]"}


def _dec_default_struct(src: Source, spec: StructSpec, d: int) -> str:
    """Emit code building a default ``spec`` object (cheaper than calling its class)."""
    o = src.var("o")
    src.add(d, f"{o} = _new({src.const(spec.cls, 'C')})")
    for f in spec.fields:
        if f.kind == "struct" and f.default is MISSING:
            assert f.struct is not None
            value = _dec_default_struct(src, f.struct, d)
        else:
            value = default_expr(src, f)
        src.add(d, f"{o}.{f.attr} = {value}")
    src.add(d, f"{o}.unknown_tags = None")
    return o


def _dec_uvarint(src: Source, d: int, n: str) -> None:
    src.add(d, f"{n} = buf[pos]")
    src.add(d, "pos += 1")
    src.add(d, f"if {n} > 127: {n}, pos = _ruv(buf, pos, {n})")


def _dec_length(src: Source, d: int, kind: str, flex: bool) -> str:
    """Emit the read of a length or count; return its variable (-1 means null)."""
    n = src.var("n")
    if flex:
        _dec_uvarint(src, d, n)
        src.add(d, f"{n} -= 1")
    elif kind == "string":
        src.add(d, f"{n}, = _unpack_h(buf, pos)")
        src.add(d, "pos += 2")
    else:
        src.add(d, f"{n}, = _unpack_i(buf, pos)")
        src.add(d, "pos += 4")
    return n


def _dec_value(
    src: Source,
    kind: str,
    sub: str | StructSpec | None,
    nullable: bool,
    target: str,
    d: int,
    v: int,
    flex: bool,
    view: bool,
    path: str,
    length: str | None = None,
) -> None:
    """Emit code reading one value of type ``kind`` into ``target``.

    ``length`` names a variable already holding the value's length, if the
    caller read it (with the fixed-width fields before it).
    """
    if kind in FIXED_FORMATS:
        s = struct_of(">" + FIXED_FORMATS[kind])
        unpack = src.const(s.unpack_from, "U")
        if kind == "uuid":
            src.add(d, f"{target} = _uuid({unpack}(buf, pos)[0])")
        else:
            src.add(d, f"{target}, = {unpack}(buf, pos)")
        src.add(d, f"pos += {s.size}")
        return
    if kind == "struct":
        assert isinstance(sub, StructSpec)
        if nullable:
            # an int8 marker: negative for null, else the struct follows
            src.add(d, "if buf[pos] > 127:")
            src.add(d + 1, f"{target} = None")
            src.add(d + 1, "pos += 1")
            src.add(d, "else:")
            d += 1
            src.add(d, "pos += 1")
        obj = _dec_struct(src, sub, d, v, flex, view, path)
        src.add(d, f"{target} = {obj}")
        return
    n = length or _dec_length(src, d, kind, flex)
    # A null where the version does not allow one is read as the type's default
    # (Kafka's Java client would refuse it; librdkafka's mock broker sends them:
    # quirk: mock-null-fields).
    null = "None" if nullable else _NULL_AS[kind]
    src.add(d, f"if {n} == -1: {target} = {null}")
    src.add(d, f"elif {n} < 0: raise _bad_length({path!r}, {n})")
    src.add(d, "else:")
    d += 1
    if kind in ("string", "bytes", "records"):
        e = src.var("e")
        src.add(d, f"{e} = pos + {n}")
        if kind == "string":
            expr = f"str(buf[pos:{e}], 'utf-8')" if view else f"buf[pos:{e}].decode()"
        elif kind == "bytes":
            expr = f"bytes(buf[pos:{e}])" if view else f"buf[pos:{e}]"
        else:
            src.add(d, f"if {e} > end: raise _truncated({path!r})")
            expr = f"mv[pos:{e}]"
        src.add(d, f"{target} = {expr}")
        src.add(d, f"pos = {e}")
        return
    assert kind == "array", kind
    elem_kind = "struct" if isinstance(sub, StructSpec) else str(sub)
    size = max(1, _min_value_size(elem_kind, sub, v, flex))
    src.add(d, f"if {n} * {size} > end - pos: raise _bad_length({path!r}, {n})")
    if elem_kind in FIXED_FORMATS and elem_kind != "uuid":
        src.add(d, f"{target} = [*{array_struct_expr(src, elem_kind, n)}.unpack_from(buf, pos)]")
        src.add(d, f"pos += {n} * {FIXED_SIZES[elem_kind]}")
        return
    src.add(d, f"if not {n}: {target} = []")  # often: no aborted transactions, no errors
    src.add(d, "else:")
    d += 1
    lst = src.var("l")
    src.add(d, f"{lst} = []")
    src.add(d, f"for _ in range({n}):")
    if elem_kind == "struct":
        assert isinstance(sub, StructSpec)
        obj = _dec_struct(src, sub, d + 1, v, flex, view, path + "[]")
        src.add(d + 1, f"{lst}.append({obj})")
    else:
        e = src.var("x")
        _dec_value(src, elem_kind, None, False, e, d + 1, v, flex, view, path + "[]")
        src.add(d + 1, f"{lst}.append({e})")
    src.add(d, f"{target} = {lst}")


def _dec_tags(
    src: Source, tagged: list[FieldSpec], o: str, d: int, v: int, view: bool, path: str
) -> None:
    nt = src.var("nt")
    _dec_uvarint(src, d, nt)
    if not tagged:
        src.add(d, f"if {nt}: {o}.unknown_tags, pos = _rtags(buf, pos, {nt}, end)")
        src.add(d, f"else: {o}.unknown_tags = None")
        return
    u = src.var("u")
    tg = src.var("tg")
    sz = src.var("sz")
    te = src.var("te")
    src.add(d, f"if not {nt}: {o}.unknown_tags = None")  # the common case: no tags
    src.add(d, "else:")
    d += 1
    src.add(d, f"{u} = None")
    src.add(d, f"for _ in range({nt}):")
    d1 = d + 1
    _dec_uvarint(src, d1, tg)
    _dec_uvarint(src, d1, sz)
    src.add(d1, f"{te} = pos + {sz}")
    src.add(d1, f"if {te} > end: raise _truncated({path + ' tagged field'!r})")
    for i, f in enumerate(sorted(tagged, key=lambda f: f.tag or 0)):
        src.add(d1, f"{'if' if i == 0 else 'elif'} {tg} == {f.tag}:")
        fpath = f"{path}.{f.attr}"
        sub = f.elem or f.struct
        _dec_value(src, f.kind, sub, v in f.nullable, f"{o}.{f.attr}", d1 + 1, v, True, view, fpath)
        src.add(d1 + 1, f"if pos > {te}: raise _Malformed({fpath + ' overruns its tag'!r})")
    src.add(d1, "else:")
    src.add(d1 + 1, f"if {u} is None: {u} = {{}}")
    src.add(d1 + 1, f"{u}[{tg}] = bytes(buf[pos:{te}])")
    src.add(d1, f"pos = {te}")
    src.add(d, f"{o}.unknown_tags = {u}")
