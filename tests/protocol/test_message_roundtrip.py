"""Every message, every version: encode then decode gives the object back, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_values import all_versions, make, strategy

import pykaf.protocol as P
from pykaf.protocol._message import Message

CASES = all_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]


def check_roundtrip(cls: type[Message], version: int, obj: Any) -> bytes:
    data = obj.encode(version)
    assert isinstance(data, bytes)
    decoded, end = cls.decode_from(data, version)
    assert end == len(data), "the decoder did not consume exactly what the encoder wrote"
    assert decoded == obj
    assert decoded.encode(version) == data
    # memoryview and bytearray input decode the same
    assert cls.decode(memoryview(data), version) == obj
    assert cls.decode(bytearray(data), version) == obj
    # at an offset, with trailing bytes
    again, end = cls.decode_from(b"\xee" * 3 + data + b"\xff", version, 3)
    assert again == obj and end == len(data) + 3
    return data


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_every_field_non_default(cls: type[Message], version: int) -> None:
    check_roundtrip(cls, version, make(cls, version))


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_nullable_fields_null(cls: type[Message], version: int) -> None:
    check_roundtrip(cls, version, make(cls, version, nulls=True))


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_all_defaults(cls: type[Message], version: int) -> None:
    obj = cls()
    check_roundtrip(cls, version, obj)
    assert cls.decode(obj.encode(version), version) == cls()


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_unknown_tags(cls: type[Message], version: int) -> None:
    obj = make(cls, version, unknown_tags=True)
    data = obj.encode(version)
    decoded = cls.decode(data, version)
    if cls.is_flexible(version):
        assert decoded.unknown_tags == obj.unknown_tags
        assert decoded.unknown_tags
    else:
        # nowhere to put them in a non-flexible version: not written
        assert decoded.unknown_tags is None
        assert data == make(cls, version, unknown_tags=False).encode(version)


def test_fields_of_other_versions_take_defaults() -> None:
    # v0 has no allow_auto_topic_creation: decoding yields the default, true
    req = P.MetadataRequest.decode(P.MetadataRequest(topics=[]).encode(0), 0)
    assert req.allow_auto_topic_creation is True
    resp = P.MetadataResponse.decode(P.MetadataResponse().encode(0), 0)
    assert resp.controller_id == -1
    assert resp.cluster_id is None
    part = P.FetchResponse.PartitionData()
    assert part.last_stable_offset == -1
    assert part.current_leader == P.FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert part.aborted_transactions == []
    assert part.records is None


# Hypothesis: any values, not only the deterministic ones above.
HYPOTHESIS_CASES = [
    (P.MetadataResponse, 1),
    (P.MetadataResponse, 12),
    (P.FetchResponse, 4),
    (P.FetchResponse, 16),
    (P.FetchRequest, 17),
    (P.ProduceRequest, 3),
    (P.ProduceResponse, 11),
    (P.ApiVersionsResponse, 3),
    (P.JoinGroupRequest, 9),
    (P.OffsetFetchResponse, 9),
    (P.CreateTopicsRequest, 7),
    (P.DescribeConfigsResponse, 4),
    (P.ConsumerProtocolSubscription, 3),
]


@pytest.mark.parametrize(
    ("cls", "version"), HYPOTHESIS_CASES, ids=[f"{c.__name__}-v{v}" for c, v in HYPOTHESIS_CASES]
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hypothesis_roundtrip(cls: type[Message], version: int, data: st.DataObject) -> None:
    obj = data.draw(strategy(cls, version))
    check_roundtrip(cls, version, obj)
