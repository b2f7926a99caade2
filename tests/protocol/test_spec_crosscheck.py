"""pykaf's compact definitions say what Kafka's JSON specs say, field by field.

Reads tests/data/kafka-specs/*.json itself (its own comment stripping and
version parsing, not the generator's) and compares every message pykaf has:
valid and flexible versions, API keys, and every field's name, type, versions,
nullable versions, tag and tagged versions, default and ignorability.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest

import pykaf.protocol as P
from pykaf.protocol._message import Message, spec_of
from pykaf.protocol._schema import MISSING, OPEN, FieldSpec, StructSpec

# Kafka's message definitions, kept with the tests (tests/data/kafka-specs/SOURCE.md).
SPECS = pathlib.Path(__file__).resolve().parents[1] / "data" / "kafka-specs"

# The APIs pykaf promises to speak.
REQUIRED_APIS = (
    "ApiVersions",
    "Metadata",
    "Produce",
    "Fetch",
    "ListOffsets",
    "OffsetForLeaderEpoch",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetDelete",
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "CreateTopics",
    "DeleteTopics",
    "CreatePartitions",
    "DescribeConfigs",
    "IncrementalAlterConfigs",
    "DeleteRecords",
    "DescribeCluster",
    "DescribeAcls",
    "CreateAcls",
    "DeleteAcls",
    "SaslHandshake",
    "SaslAuthenticate",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "GetTelemetrySubscriptions",
    "PushTelemetry",
    "ShareGroupHeartbeat",
    "ShareGroupDescribe",
    "ShareFetch",
    "ShareAcknowledge",
    "DescribeShareGroupOffsets",
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
)

# Versions compared: far beyond any real version, so "N+" is checked as open-ended.
UNIVERSE = range(0, 200)


def load_json(name: str) -> dict[str, Any]:
    text = (SPECS / f"{name}.json").read_text()
    # A // comment starts outside a string: drop it, keeping the string literals.
    pattern = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*')
    text = pattern.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
    data: dict[str, Any] = json.loads(text)
    return data


def json_versions(text: str | None) -> set[int]:
    if text is None or text == "none":
        return set()
    if text.endswith("+"):
        return set(range(int(text[:-1]), UNIVERSE.stop))
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def pykaf_versions(v: Any) -> set[int]:
    hi = UNIVERSE.stop - 1 if v.hi == OPEN else v.hi
    return set(range(v.lo, hi + 1))


def json_default(raw: Any, type_: str) -> Any:
    text = str(raw)
    if text == "null":
        return None
    if type_ == "bool":
        return text.lower() == "true"
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    if type_ == "float64":
        return float(text)
    return text


def messages() -> list[type[Message]]:
    return [
        *P.REQUESTS.values(),
        *P.RESPONSES.values(),
        P.ConsumerProtocolSubscription,
        P.ConsumerProtocolAssignment,
    ]


def test_every_required_api_is_there() -> None:
    names = {cls.API_NAME for cls in P.REQUESTS.values()}
    assert names == set(REQUIRED_APIS)
    for key, req in P.REQUESTS.items():
        resp = P.RESPONSES[key]
        assert req.API_KEY == resp.API_KEY == key
        assert req.__name__ == f"{req.API_NAME}Request"
        assert resp.__name__ == f"{req.API_NAME}Response"
        assert P.api_name(key) == req.API_NAME


def test_api_names_cover_every_spec() -> None:
    for path in SPECS.glob("*Request.json"):
        spec = load_json(path.stem)
        if spec.get("type") == "request":
            assert P.API_NAMES[spec["apiKey"]] == spec["name"].removesuffix("Request")


@pytest.mark.parametrize("cls", messages(), ids=lambda c: c.__name__)
def test_message_matches_spec(cls: type[Message]) -> None:
    spec = load_json(cls.__name__)
    valid = json_versions(spec["validVersions"])
    assert set(range(cls.MIN_VERSION, cls.MAX_VERSION + 1)) == valid
    flexible = json_versions(spec["flexibleVersions"])
    assert {v for v in valid if cls.is_flexible(v)} == flexible & valid
    if flexible:
        assert min(flexible) == cls.FLEXIBLE_VERSION
    else:
        assert cls.FLEXIBLE_VERSION is None
    if spec["type"] in ("request", "response"):
        assert spec["apiKey"] == cls.API_KEY  # type: ignore[attr-defined]
    assert bool(spec.get("latestVersionUnstable", False)) == cls.LATEST_VERSION_UNSTABLE
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    compare_struct(spec_of(cls), spec["fields"], common, cls.__name__)


def compare_struct(
    struct: StructSpec, fields: list[dict[str, Any]], common: dict[str, Any], path: str
) -> None:
    assert [f.name for f in struct.fields] == [f["name"] for f in fields], path
    for ours, theirs in zip(struct.fields, fields, strict=True):
        compare_field(ours, theirs, common, f"{path}.{ours.name}")


def compare_field(
    ours: FieldSpec, theirs: dict[str, Any], common: dict[str, Any], path: str
) -> None:
    assert ours.type == theirs["type"], path
    assert ours.attr == re.sub(r"(?<!^)(?=[A-Z])", "_", theirs["name"]).lower(), path
    assert pykaf_versions(ours.versions) == json_versions(theirs["versions"]), path
    assert pykaf_versions(ours.nullable) == json_versions(theirs.get("nullableVersions")), path
    assert pykaf_versions(ours.tagged) == json_versions(theirs.get("taggedVersions")), path
    assert ours.tag == theirs.get("tag"), path
    assert ours.ignorable == bool(theirs.get("ignorable", False)), path
    if "default" in theirs:
        assert ours.default == json_default(theirs["default"], theirs["type"]), path
    else:
        assert ours.default is MISSING, path
    inner = theirs["type"].removeprefix("[]")
    sub = ours.struct or ours.elem_struct
    if "fields" in theirs or inner in common:
        assert sub is not None and sub.name == inner, path
        sub_fields = theirs["fields"] if "fields" in theirs else common[inner]["fields"]
        compare_struct(sub, sub_fields, common, path)
        # the struct class is the message's attribute of that name
        assert sub.cls.__name__ == inner
    else:
        assert sub is None, path
