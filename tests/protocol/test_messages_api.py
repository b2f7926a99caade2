"""The message classes as callers use them: construction, defaults, errors, registries."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import pykaf.protocol as P
from pykaf.errors import ProtocolError, UnsupportedVersionError


def test_class_attributes() -> None:
    assert P.MetadataRequest.API_KEY == 3
    assert P.MetadataRequest.API_NAME == "Metadata"
    assert (P.MetadataRequest.MIN_VERSION, P.MetadataRequest.MAX_VERSION) == (0, 13)
    assert P.MetadataRequest.FLEXIBLE_VERSION == 9
    assert P.SaslHandshakeRequest.FLEXIBLE_VERSION is None
    assert P.FetchResponse.API_KEY == 1
    assert P.REQUESTS[0] is P.ProduceRequest and P.RESPONSES[0] is P.ProduceResponse
    assert P.EndTxnRequest.LATEST_VERSION_UNSTABLE
    assert not P.MetadataRequest.LATEST_VERSION_UNSTABLE


def test_nested_structs_are_attributes_and_exports() -> None:
    assert P.MetadataRequest.MetadataRequestTopic is P.MetadataRequestTopic
    assert P.FetchResponse.AbortedTransaction is P.AbortedTransaction
    # names two messages share are only reachable through their message
    assert P.FetchResponse.NodeEndpoint is not P.ProduceResponse.NodeEndpoint  # type: ignore[comparison-overlap]
    assert not hasattr(P, "NodeEndpoint")
    assert not hasattr(P, "TopicPartition")
    assert P.ConsumerProtocolAssignment.TopicPartition.__name__ == "TopicPartition"
    assert issubclass(P.MetadataRequestTopic, P.Struct)
    assert issubclass(P.MetadataRequest, P.Request)
    assert issubclass(P.MetadataResponse, P.Response)
    assert issubclass(P.ConsumerProtocolSubscription, P.Data)


def test_public_names_are_exported_once_and_documented() -> None:
    assert len(P.__all__) == len(set(P.__all__))
    for name in P.__all__:
        obj = getattr(P, name)
        if callable(obj):
            assert obj.__doc__, name


def test_defaults() -> None:
    req = P.MetadataRequest()
    assert req.topics == []  # nullable, no default: Kafka's default (empty)
    assert req.allow_auto_topic_creation is True
    broker = P.MetadataResponseBroker()
    assert (broker.node_id, broker.host, broker.rack) == (0, "", None)
    topic = P.MetadataResponseTopic()
    assert topic.topic_id == uuid.UUID(int=0)
    assert topic.topic_authorized_operations == -(2**31)
    assert P.FetchRequest().max_bytes == 0x7FFFFFFF
    assert P.FetchRequest().replica_state == P.FetchRequest.ReplicaState(
        replica_id=-1, replica_epoch=-1
    )
    assert P.ConsumerProtocolSubscription().user_data is None
    assert P.PartitionProduceData().records is None
    assert P.ApiVersionsResponse().unknown_tags is None
    # lists are not shared between instances
    a, b = P.MetadataRequest(), P.MetadataRequest()
    assert a.topics is not b.topics


def test_keyword_only_and_unknown_fields_refused() -> None:
    with pytest.raises(TypeError):
        P.MetadataRequest([])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        P.MetadataRequest(topicz=[])  # type: ignore[call-arg]


def test_eq_and_repr() -> None:
    a = P.MetadataRequestTopic(name="x")
    assert a == P.MetadataRequestTopic(name="x")
    assert a != P.MetadataRequestTopic(name="y")
    assert a != P.MetadataRequestTopic(name="x", unknown_tags={1: b""})
    assert P.MetadataRequestTopic(name="x", unknown_tags={}) == a
    assert "name='x'" in repr(a) and repr(a).startswith("MetadataRequestTopic(")
    with pytest.raises(TypeError):
        hash(a)
    part = (
        P.FetchResponse.decode(
            P.FetchResponse(
                responses=[P.FetchableTopicResponse(partitions=[P.PartitionData(records=b"abc")])]
            ).encode(4),
            4,
        )
        .responses[0]
        .partitions[0]
    )
    assert "records=<3 bytes>" in repr(part)


def test_version_out_of_range() -> None:
    with pytest.raises(UnsupportedVersionError, match="0-13"):
        P.MetadataRequest().encode(14)
    with pytest.raises(UnsupportedVersionError):
        P.MetadataResponse.decode(b"", -1)


def test_non_default_field_missing_from_the_version() -> None:
    req = P.MetadataRequest(topics=[], include_cluster_authorized_operations=True)
    with pytest.raises(P.FieldVersionError) as info:
        req.encode(11)
    err = info.value
    assert isinstance(err, UnsupportedVersionError) and isinstance(err, ProtocolError)
    assert (err.message_name, err.field, err.version) == (
        "MetadataRequest",
        "include_cluster_authorized_operations",
        11,
    )
    req.encode(10)  # the field exists there
    with pytest.raises(P.FieldVersionError, match="allow_auto_topic_creation"):
        P.MetadataRequest(topics=[], allow_auto_topic_creation=False).encode(3)
    # nested, and a tagged struct
    fetch = P.FetchRequest(
        topics=[P.FetchTopic(partitions=[P.FetchPartition(last_fetched_epoch=3)])]
    )
    with pytest.raises(P.FieldVersionError, match="last_fetched_epoch"):
        fetch.encode(11)
    fetch = P.FetchRequest(replica_state=P.FetchRequest.ReplicaState(replica_epoch=2))
    with pytest.raises(P.FieldVersionError, match="replica_state"):
        fetch.encode(14)


def test_ignorable_fields_are_dropped_silently() -> None:
    req = P.FetchRequest(isolation_level=1, rack_id="r", max_bytes=5)
    assert req.encode(3) == P.FetchRequest(max_bytes=5).encode(3)
    assert P.FetchRequest.decode(req.encode(3), 3).isolation_level == 0
    resp = P.MetadataResponse(throttle_time_ms=100, controller_id=3)
    assert resp.encode(0) == P.MetadataResponse().encode(0)


BAD: Any = "x"  # a value of the wrong type, hidden from mypy
NOT_A_FETCH_TOPIC: Any = P.MetadataRequestTopic()
NOT_A_STR: Any = 5


@pytest.mark.parametrize(
    ("obj", "version", "match"),
    [
        (
            P.MetadataRequest(topics=[P.MetadataRequestTopic(name=NOT_A_STR)]),
            1,
            r"topics\[0\]\.name",
        ),
        (P.MetadataRequest(topics=[P.MetadataRequestTopic(name=None)]), 9, r"name: None"),
        (P.FetchRequest(max_wait_ms=2**31), 4, "max_wait_ms: 2147483648 is out of range for int32"),
        (P.FetchRequest(topics=[NOT_A_FETCH_TOPIC]), 4, "expected a FetchTopic"),
        (
            P.ProduceRequest(
                topic_data=[
                    P.TopicProduceData(partition_data=[P.PartitionProduceData(records=BAD)])
                ]
            ),
            3,
            "records: expected bytes",
        ),
        (P.SaslHandshakeRequest(mechanism="x" * 40000), 1, "too long"),
        (P.MetadataResponse(topics=[P.MetadataResponseTopic(topic_id=BAD)]), 10, "expected a uuid"),
        (P.MetadataRequest(topics=None), 0, "topics: None is not allowed in version 0"),
    ],
)
def test_encode_errors_name_the_field(obj: P.Message, version: int, match: str) -> None:
    with pytest.raises(P.EncodeError, match=match) as info:
        obj.encode(version)
    assert isinstance(info.value, ValueError)


def test_records_are_written_as_given() -> None:
    batch = bytes(range(256)) * 4
    for records in (batch, bytearray(batch), memoryview(batch)):
        req = P.ProduceRequest(
            topic_data=[
                P.TopicProduceData(partition_data=[P.PartitionProduceData(records=records)])
            ]
        )
        for version in (3, 9, 11):
            data = req.encode(version)
            assert batch in data
            got = P.ProduceRequest.decode(data, version).topic_data[0].partition_data[0].records
            assert isinstance(got, memoryview) and got == batch


def test_large_record_sets_are_joined_in_order() -> None:
    """Record sets of 4 KiB and more are parts of their own, joined once: same bytes."""
    small, large = bytes(range(256)), bytes(range(256)) * 64
    sets = [large, small, large[::-1], memoryview(large), bytearray(small), large]
    req = P.ProduceRequest(
        transactional_id="t",
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            P.TopicProduceData(
                name=name,
                partition_data=[
                    P.PartitionProduceData(index=i, records=records)
                    for i, records in enumerate(sets)
                ],
            )
            for name in ("a", "b")
        ],
    )
    for version in (3, 9, 11):
        data = req.encode(version)
        assert type(data) is bytes
        got = P.ProduceRequest.decode(data, version)
        assert [t.name for t in got.topic_data] == ["a", "b"]
        for topic in got.topic_data:
            assert [p.index for p in topic.partition_data] == list(range(len(sets)))
            assert [bytes(p.records) for p in topic.partition_data] == [bytes(r) for r in sets]
        assert P.ProduceRequest.decode(data, version).encode(version) == data
        parts = req.encode_parts(version)
        assert b"".join(parts) == data
        # The large sets are parts of their own, not copied; the small ones are not.
        assert sum(part is large for part in parts) == 2 * 2
        assert all(part is not small for part in parts)


def test_decoded_struct_defaults_are_shared_and_read_only() -> None:
    data = P.FetchResponse(
        responses=[P.FetchableTopicResponse(partitions=[P.PartitionData(), P.PartitionData()])]
    ).encode(12)
    first, second = P.FetchResponse.decode(data, 12).responses[0].partitions
    default = P.FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert first.current_leader == default and default == first.current_leader
    assert first.current_leader is second.current_leader  # one object, not one per partition
    assert repr(first.current_leader) == "LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)"
    assert isinstance(first.current_leader, P.FetchResponse.LeaderIdAndEpoch)
    with pytest.raises(AttributeError, match="read-only default"):
        first.current_leader.leader_id = 3
    # replacing the field is how to change it; the other partition keeps the default
    first.current_leader = P.FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=1)
    again = P.FetchResponse.decode(P.FetchResponse.decode(data, 12).encode(12), 12)
    assert again.encode(12) == data
    assert second.current_leader == default
    # objects built by callers get a fresh, mutable default
    built = P.PartitionData()
    built.current_leader.leader_id = 5
    assert P.PartitionData().current_leader.leader_id == -1
