"""Generate pykaf/protocol/_messages/ from Kafka's JSON message definitions.

Run: python tools/gen_protocol.py [path/to/kafka-specs]

Reads tests/data/kafka-specs/*.json for the APIs pykaf speaks (``APIS``) and
writes, per API, a module with one class per request, response and nested
struct: the typed attributes and ``__init__`` signature for mypy, and the
definition in pykaf's compact format (``SCHEMA``), which is all the runtime
reads. Also writes the registry (``_messages/__init__.py``) and the public
re-exports (``pykaf/protocol/__init__.py``). The output is committed; pykaf
never reads the JSON at run time.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_SPECS = ROOT / "tests" / "data" / "kafka-specs"
PACKAGE = ROOT / "pykaf" / "protocol"
OUT = PACKAGE / "_messages"


def words(text: str) -> list[str]:
    return text.split()


# The APIs pykaf speaks, in the order the registry lists them.
APIS = words("""
ApiVersions Metadata Produce Fetch ListOffsets OffsetForLeaderEpoch FindCoordinator
JoinGroup SyncGroup Heartbeat LeaveGroup OffsetCommit OffsetFetch DescribeGroups
ListGroups DeleteGroups OffsetDelete InitProducerId AddPartitionsToTxn AddOffsetsToTxn
EndTxn TxnOffsetCommit CreateTopics DeleteTopics CreatePartitions DescribeConfigs
IncrementalAlterConfigs DeleteRecords DescribeCluster DescribeAcls CreateAcls DeleteAcls
SaslHandshake SaslAuthenticate ConsumerGroupHeartbeat ConsumerGroupDescribe
GetTelemetrySubscriptions PushTelemetry
ShareGroupHeartbeat ShareGroupDescribe ShareFetch ShareAcknowledge
DescribeShareGroupOffsets AlterShareGroupOffsets DeleteShareGroupOffsets
""")
# Versioned data structures (no API key) that travel inside other messages.
DATA = ["ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]

PRIMITIVE_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "uuid": "UUID",
    "records": "Records",
}


# -- reading the JSON -------------------------------------------------------------
def strip_comments(text: str) -> str:
    """Remove ``//`` comments (outside strings) from Kafka's commented JSON."""
    out = []
    i = 0
    in_string = False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_spec(specs: pathlib.Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(strip_comments((specs / f"{name}.json").read_text()))
    return data


def snake_case(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def module_name(name: str) -> str:
    return snake_case(name)


# -- the model the templates render ----------------------------------------------
@dataclass
class Field:
    name: str
    type: str
    versions: str
    nullable: str | None
    tag: int | None
    tagged: str | None
    default: Any  # NO_DEFAULT, None (null), bool, int, float or str
    ignorable: bool
    about: str
    struct: StructDef | None = None  # for struct and struct-array types

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def inner(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructDef:
    name: str
    fields: list[Field] = field(default_factory=list)
    owner: str = ""  # "Parent.field" for the docstring
    common: bool = False


NO_DEFAULT = object()


def parse_default(raw: Any, type_: str) -> Any:
    text = str(raw)
    if text == "null":
        return None
    if type_ == "bool":
        return text.lower() == "true"
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        if re.fullmatch(r"-?0[0-7]+", text):
            return int(text, 8)
        return int(text, 0)
    if type_ == "float64":
        return float(text)
    if type_ == "string":
        return text
    raise ValueError(f"unsupported default {raw!r} for {type_}")


def build_fields(
    raw_fields: list[dict[str, Any]],
    structs: dict[str, StructDef],
    common: dict[str, StructDef],
    owner: str,
) -> list[Field]:
    out = []
    for raw in raw_fields:
        if "flexibleVersions" in raw:
            raise ValueError(f"{owner}.{raw['name']}: field-level flexibleVersions unsupported")
        default = raw.get("default", NO_DEFAULT)
        f = Field(
            name=raw["name"],
            type=raw["type"],
            versions=raw["versions"],
            nullable=raw.get("nullableVersions"),
            tag=raw.get("tag"),
            tagged=raw.get("taggedVersions"),
            default=NO_DEFAULT if default is NO_DEFAULT else parse_default(default, raw["type"]),
            ignorable=bool(raw.get("ignorable", False)),
            about=raw.get("about", ""),
        )
        inner = f.inner
        if inner not in PRIMITIVE_TYPES:
            if "fields" in raw:
                if inner in structs:
                    raise ValueError(f"struct {inner} defined twice in {owner}")
                sub = StructDef(inner, owner=f"{owner.split('.')[0]}.{f.attr}")
                structs[inner] = sub
                sub.fields = build_fields(raw["fields"], structs, common, f"{inner}")
                f.struct = sub
            elif inner in common:
                f.struct = common[inner]
            else:
                raise ValueError(f"{owner}.{f.name}: unknown struct {inner}")
        out.append(f)
    return out


@dataclass
class MessageDef:
    json_name: str
    kind: str  # request, response, data
    api_key: int | None
    valid: tuple[int, int]
    flexible: int | None
    unstable: bool
    root: StructDef
    structs: dict[str, StructDef]  # every nested struct, by name
    common: list[StructDef]


def build_message(spec: dict[str, Any]) -> MessageDef:
    name = spec["name"]
    lo, _, hi = spec["validVersions"].partition("-")
    valid = (int(lo), int(hi or lo))
    flex_raw = spec["flexibleVersions"]
    flexible = None if flex_raw == "none" else int(flex_raw.rstrip("+"))
    structs: dict[str, StructDef] = {}
    common: dict[str, StructDef] = {}
    for raw in spec.get("commonStructs", []):
        s = StructDef(raw["name"], common=True)
        common[s.name] = s
        structs[s.name] = s
    for raw in spec.get("commonStructs", []):
        common[raw["name"]].fields = build_fields(raw["fields"], structs, common, raw["name"])
    root = StructDef(name)
    root.fields = build_fields(spec["fields"], structs, common, name)
    # a common struct's docstring names its first user
    for s in structs.values():
        for f in s.fields:
            if f.struct is not None and f.struct.common and not f.struct.owner:
                f.struct.owner = f"{s.name}.{f.attr}"
    for f in root.fields:
        if f.struct is not None and f.struct.common and not f.struct.owner:
            f.struct.owner = f"{name}.{f.attr}"
    return MessageDef(
        json_name=name,
        kind=spec["type"],
        api_key=spec.get("apiKey"),
        valid=valid,
        flexible=flexible,
        unstable=bool(spec.get("latestVersionUnstable", False)),
        root=root,
        structs=structs,
        common=list(common.values()),
    )


# -- rendering the compact schema -------------------------------------------------
def format_default(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def schema_lines(msg: MessageDef) -> list[str]:
    lines: list[str] = []
    for s in msg.common:
        lines.append(f"struct {s.name}")
        _schema_struct(s, 1, lines)
    _schema_struct(msg.root, 0, lines)
    return lines


def _schema_struct(s: StructDef, depth: int, lines: list[str]) -> None:
    for f in s.fields:
        parts = [f.name, f.type, f.versions]
        if f.nullable is not None and f.nullable != "none":
            parts.append(f"null={f.nullable}")
        if f.tag is not None:
            parts.append(f"tag={f.tag}")
            parts.append(f"tagged={f.tagged}")
        if f.default is not NO_DEFAULT:
            parts.append(f"default={format_default(f.default)}")
        if f.ignorable:
            parts.append("ignorable")
        lines.append("  " * depth + " ".join(parts))
        if f.struct is not None and not f.struct.common:
            _schema_struct(f.struct, depth + 1, lines)


# -- rendering Python -------------------------------------------------------------
def py_type(f: Field) -> str:
    inner = f.inner
    base = PRIMITIVE_TYPES.get(inner, inner)
    t = f"list[{base}]" if f.is_array else base
    nullable = (f.nullable not in (None, "none")) or f.default is None or inner == "records"
    return f"{t} | None" if nullable else t


def version_note(f: Field) -> str:
    notes = []
    if f.versions != "0+":
        notes.append(f"versions {f.versions}")
    if f.nullable not in (None, "none"):
        notes.append(f"nullable {f.nullable}")
    if f.tag is not None:
        notes.append(f"tag {f.tag}")
    if f.default is not NO_DEFAULT:
        notes.append(f"default {format_default(f.default)}")
    return f" [{'; '.join(notes)}]" if notes else ""


def clean(text: str) -> str:
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace('"""', "'''")


def docstring(summary: str, fields: list[Field], indent: str) -> list[str]:
    lines = [f'{indent}"""{summary}']
    if fields:
        lines.append("")
        lines.append(f"{indent}Attributes:")
        for f in fields:
            about = clean(f.about) or "(no description in Kafka's spec)"
            body = f"{f.attr}: {about}{version_note(f)}"
            wrapped = textwrap.wrap(
                body,
                width=99,
                initial_indent=indent + "    ",
                subsequent_indent=indent + "        ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            lines.extend(wrapped)
    lines.append(f'{indent}"""')
    return lines


def init_stub(fields: list[Field], indent: str) -> list[str]:
    lines = [f"{indent}if TYPE_CHECKING:", "", f"{indent}    def __init__("]
    lines += [f"{indent}        self,", f"{indent}        *,"]
    for f in fields:
        lines.append(f"{indent}        {f.attr}: {py_type(f)} = ...,")
    lines.append(f"{indent}        unknown_tags: dict[int, bytes] | None = None,")
    lines.append(f"{indent}    ) -> None: ...")
    return lines


def slots(fields: list[Field], indent: str) -> list[str]:
    if not fields:
        return [f"{indent}__slots__ = ()"]
    one = f"{indent}__slots__ = ({', '.join(repr(f.attr) for f in fields)},)"
    if len(one) <= 100:
        return [one]
    return (
        [f"{indent}__slots__ = ("] + [f"{indent}    {f.attr!r}," for f in fields] + [f"{indent})"]
    )


def render_struct(s: StructDef) -> list[str]:
    lines = [f"class {s.name}(Struct):"]
    lines += docstring(f"An element of ``{s.owner}``.", s.fields, "    ")
    lines.append("")
    lines += slots(s.fields, "    ")
    lines += [f"    {f.attr}: {py_type(f)}" for f in s.fields]
    lines.append("")
    lines += init_stub(s.fields, "    ")
    return lines


def api_name(msg: MessageDef) -> str:
    return msg.json_name.removesuffix("Request").removesuffix("Response")


def render_message(msg: MessageDef) -> list[str]:
    base = {"request": "Request", "response": "Response", "data": "Data"}[msg.kind]
    lo, hi = msg.valid
    versions = f"version {lo}" if lo == hi else f"versions {lo}-{hi}"
    if msg.kind == "data":
        summary = f"The {msg.json_name} data structure ({versions})."
    else:
        summary = f"{api_name(msg)} {msg.kind} (API key {msg.api_key}, {versions})."
    lines = [f"class {msg.json_name}({base}):"]
    lines += docstring(summary, msg.root.fields, "    ")
    lines.append("")
    lines += slots(msg.root.fields, "    ")
    if msg.api_key is not None:
        lines.append(f"    API_KEY = {msg.api_key}")
        lines.append(f'    API_NAME = "{api_name(msg)}"')
    lines.append(f"    MIN_VERSION = {lo}")
    lines.append(f"    MAX_VERSION = {hi}")
    lines.append(f"    FLEXIBLE_VERSION = {msg.flexible}")
    if msg.unstable:
        lines.append("    LATEST_VERSION_UNSTABLE = True")
    lines.append('    SCHEMA = """')
    lines += [f"        {line}" for line in schema_lines(msg)]
    lines.append('    """')
    if msg.structs:
        lines.append("")
        lines += [f"    {name}: TypeAlias = {name}" for name in msg.structs]
    lines.append("")
    lines += [f"    {f.attr}: {py_type(f)}" for f in msg.root.fields]
    lines.append("")
    lines += init_stub(msg.root.fields, "    ")
    return lines


def struct_order(msg: MessageDef) -> list[StructDef]:
    """Every struct of ``msg``, innermost first (not needed for typing, but reads well)."""
    order: list[StructDef] = []

    def visit(s: StructDef) -> None:
        for f in s.fields:
            if f.struct is not None and f.struct not in order:
                visit(f.struct)
        if s is not msg.root and s not in order:
            order.append(s)

    visit(msg.root)
    for s in msg.common:
        if s not in order:
            visit(s)
    return order


def _struct_shape(s: StructDef) -> list[str]:
    """The schema lines of a struct's fields, to tell whether two definitions agree."""
    lines: list[str] = []
    _schema_struct(s, 0, lines)
    return lines


def render_module(title: str, sources: list[str], messages: list[MessageDef]) -> str:
    names: list[str] = []
    body: list[str] = []
    used_types = set()
    rendered: dict[str, list[str]] = {}
    for msg in messages:
        for s in struct_order(msg):
            lines = render_struct(s)
            if s.name in rendered:
                # A request and its response may each define the same struct (one inline,
                # one as a common struct): one class serves both when they agree.
                if _struct_shape(s) != rendered[s.name]:
                    raise ValueError(f"{title}: struct {s.name} defined twice in one module")
                continue
            rendered[s.name] = _struct_shape(s)
            names.append(s.name)
            body += ["", "", *lines]
        names.append(msg.json_name)
        body += ["", "", *render_message(msg)]
        for s in [msg.root, *msg.structs.values()]:
            used_types |= {PRIMITIVE_TYPES.get(f.inner) for f in s.fields}
    kinds = {"request": "Request", "response": "Response", "data": "Data"}
    bases = {kinds[m.kind] for m in messages}
    has_structs = any(m.structs for m in messages)
    if has_structs:
        bases.add("Struct")
    src_list = " and ".join(f"``{s}``" for s in sources)
    generated = (
        f"Generated by ``tools/gen_protocol.py`` from Kafka's {src_list}; "
        "edit the generator, not this file."
    )
    every = [s for m in messages for s in [m.root, *m.structs.values()]]
    multi = any([f.attr for f in s.fields] != sorted(f.attr for f in s.fields) for s in every)
    head = [
        *(["# ruff: noqa: RUF023 (__slots__ lists the fields in wire order)"] if multi else []),
        f'"""{title}.',
        "",
        *textwrap.wrap(generated, width=88, break_on_hyphens=False),
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"from typing import TYPE_CHECKING{', TypeAlias' if has_structs else ''}",
    ]
    if "UUID" in used_types:
        head.append("from uuid import UUID")
    head.append("")
    head.append(f"from pykaf.protocol._message import {', '.join(sorted(bases))}")
    if "Records" in used_types:
        head.append("from pykaf.protocol._types import Records")
    head.append("")
    head.append("__all__ = [")
    head += [f'    "{n}",' for n in sorted(names)]
    head.append("]")
    return "\n".join(head + body) + "\n"


# -- the registry and the public module ---------------------------------------------
def render_registry(modules: list[tuple[str, list[MessageDef]]], all_names: dict[int, str]) -> str:
    lines = [
        '"""Every message class pykaf has, and the names of every Kafka API.',
        "",
        "Generated by ``tools/gen_protocol.py``; edit the generator, not this file.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from pykaf.protocol._message import Request, Response",
    ]
    reqs: list[str] = []
    resps: list[str] = []
    for mod, msgs in modules:
        names = [m.json_name for m in msgs if m.kind != "data"]
        if names:
            lines.append(f"from pykaf.protocol._messages.{mod} import {', '.join(names)}")
        for m in msgs:
            if m.kind == "request":
                reqs.append(m.json_name)
            elif m.kind == "response":
                resps.append(m.json_name)
    lines += ["", '__all__ = ["API_NAMES", "REQUESTS", "RESPONSES"]', ""]
    lines.append("#: Request classes by API key.")
    lines.append("REQUESTS: dict[int, type[Request]] = {")
    lines += [f"    {r}.API_KEY: {r}," for r in reqs]
    lines.append("}")
    lines.append("#: Response classes by API key.")
    lines.append("RESPONSES: dict[int, type[Response]] = {")
    lines += [f"    {r}.API_KEY: {r}," for r in resps]
    lines.append("}")
    lines.append("#: Kafka's name of every API key in its specs (pykaf speaks those in REQUESTS).")
    lines.append("API_NAMES: dict[int, str] = {")
    lines += [f'    {k}: "{v}",' for k, v in sorted(all_names.items())]
    lines.append("}")
    return "\n".join(lines) + "\n"


PUBLIC_HEAD = '''\
"""Kafka's wire protocol, sans I/O: every request and response pykaf speaks.

One class per request and response (``MetadataRequest``, ``FetchResponse``,
...), covering all of its versions, and one per nested struct (also reachable
as an attribute of its message class: ``MetadataRequest.MetadataRequestTopic``).
Struct names that two messages share (``TopicPartition``, ``NodeEndpoint``,
``LeaderIdAndEpoch``, ``EpochEndOffset``) are only reachable that way.

Build a message with keyword arguments (omitted fields take Kafka's defaults),
``msg.encode(version)`` to get the body, ``Cls.decode(data, version)`` to read
one. Headers and framing: :func:`encode_request_header`,
:func:`decode_response_header`; :mod:`pykaf.protocol.connection` is the
connection state machine.

Generated by ``tools/gen_protocol.py`` (the message list); edit the generator.
"""

from pykaf.errors import ProtocolError, UnsupportedVersionError
from pykaf.protocol._errors import EncodeError, FieldVersionError, MalformedMessageError
from pykaf.protocol._headers import (
    RequestHeader,
    api_name,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_flexible,
    response_header_flexible,
)
from pykaf.protocol._message import Data, Message, Request, Response, Struct
from pykaf.protocol._messages import API_NAMES, REQUESTS, RESPONSES
'''

PUBLIC_HELPERS = words("""
API_NAMES REQUESTS RESPONSES Data EncodeError FieldVersionError MalformedMessageError
Message ProtocolError UnsupportedVersionError Request RequestHeader Response Struct
api_name decode_request_header decode_response_header encode_request_header
encode_response_header request_header_flexible response_header_flexible
""")


#: Struct names exported before a later API defined a struct of the same name:
#: the first module keeps exporting its own (``pykaf.protocol.DescribedGroup`` is
#: DescribeGroups', not ConsumerGroupDescribe's).
KEPT_EXPORTS = {
    "DescribedGroup": "describe_groups",
    # the share group APIs (KIP-932) define structs of these names too
    "Member": "consumer_group_describe",
    "FetchPartition": "fetch",
    "FetchTopic": "fetch",
    "ForgottenTopic": "fetch",
    "PartitionData": "fetch",
}


def render_public(modules: list[tuple[str, list[MessageDef]]]) -> str:
    counts: dict[str, int] = {}
    for _, msgs in modules:
        for s in {s for m in msgs for s in m.structs}:  # a module shares its own structs
            counts[s] = counts.get(s, 0) + 1
    lines = [PUBLIC_HEAD.rstrip("\n")]
    exported = list(PUBLIC_HELPERS)
    for mod, msgs in modules:
        names = []
        for m in msgs:
            names += [
                s.name
                for s in struct_order(m)
                if (counts[s.name] == 1 or KEPT_EXPORTS.get(s.name) == mod) and s.name not in names
            ]
            names.append(m.json_name)
        exported += names
        lines.append(f"from pykaf.protocol._messages.{mod} import (")
        lines += [f"    {n}," for n in sorted(names)]
        lines.append(")")
    lines.append("")
    lines.append("__all__ = [")
    lines += [f'    "{n}",' for n in sorted(exported)]
    lines.append("]")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    specs = pathlib.Path(argv[1]) if len(argv) > 1 else DEFAULT_SPECS
    OUT.mkdir(exist_ok=True)
    modules: list[tuple[str, list[MessageDef]]] = []
    written: list[pathlib.Path] = []
    for api in APIS:
        msgs = [build_message(load_spec(specs, api + kind)) for kind in ("Request", "Response")]
        mod = module_name(api)
        text = render_module(
            f"{api} (API key {msgs[0].api_key}): the request and the response",
            [f"{api}Request.json", f"{api}Response.json"],
            msgs,
        )
        path = OUT / f"{mod}.py"
        path.write_text(text)
        written.append(path)
        modules.append((mod, msgs))
    for name in DATA:
        msg = build_message(load_spec(specs, name))
        mod = module_name(name)
        text = render_module(f"The {name} data structure", [f"{name}.json"], [msg])
        path = OUT / f"{mod}.py"
        path.write_text(text)
        written.append(path)
        modules.append((mod, [msg]))
    all_names: dict[int, str] = {}
    for path in sorted(specs.glob("*Request.json")):
        spec = json.loads(strip_comments(path.read_text()))
        if spec.get("type") == "request" and "apiKey" in spec:
            all_names[spec["apiKey"]] = spec["name"].removesuffix("Request")
    reg = OUT / "__init__.py"
    reg.write_text(render_registry(modules, all_names))
    pub = PACKAGE / "__init__.py"
    pub.write_text(render_public(modules))
    written += [reg, pub]
    ruff = shutil.which("ruff") or str(pathlib.Path(sys.executable).parent / "ruff")
    if pathlib.Path(ruff).exists():
        subprocess.run([ruff, "format", "--quiet", *map(str, written)], check=True)
        subprocess.run(
            [ruff, "check", "--quiet", "--fix", "--select", "I,RUF022", *map(str, written)],
            check=False,
        )
    print(f"wrote {len(written)} files to {PACKAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
