"""Bytes written by hand from Kafka's protocol guide and JSON specs, field by field.

The helpers below are this file's own (struct.pack of one field at a time), so
a mistake shared with pykaf's code generator would have to be made twice.
"""

from __future__ import annotations

import struct
import uuid

import pytest

import pykaf.protocol as P


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s: str | None) -> bytes:  # STRING / NULLABLE_STRING
    if s is None:
        return i16(-1)
    return i16(len(s.encode())) + s.encode()


def cstring(s: str | None) -> bytes:  # COMPACT_(NULLABLE_)STRING
    if s is None:
        return b"\x00"
    return uvarint(len(s.encode()) + 1) + s.encode()


def nbytes(b: bytes | None) -> bytes:  # (NULLABLE_)BYTES / RECORDS
    return i32(-1) if b is None else i32(len(b)) + b


def cbytes(b: bytes | None) -> bytes:  # COMPACT_(NULLABLE_)BYTES / COMPACT_RECORDS
    return b"\x00" if b is None else uvarint(len(b) + 1) + b


def array(items: list[bytes] | None) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def carray(items: list[bytes] | None) -> bytes:
    return b"\x00" if items is None else uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def tags(*fields: tuple[int, bytes]) -> bytes:
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


def check(obj: object, version: int, expected: bytes) -> None:
    """``obj`` encodes to ``expected``, which decodes back to ``obj``."""
    assert obj.encode(version) == expected  # type: ignore[attr-defined]
    assert type(obj).decode(expected, version) == obj  # type: ignore[attr-defined]


# -- ApiVersions -----------------------------------------------------------------
def test_api_versions_request_v0_is_empty() -> None:
    check(P.ApiVersionsRequest(), 0, b"")


def test_api_versions_request_v0_drops_the_ignorable_software_fields() -> None:
    req = P.ApiVersionsRequest(client_software_name="pykaf", client_software_version="1.0")
    assert req.encode(0) == b""


def test_api_versions_request_v3() -> None:
    req = P.ApiVersionsRequest(client_software_name="pykaf", client_software_version="0.1.0")
    check(req, 3, cstring("pykaf") + cstring("0.1.0") + NO_TAGS)


def test_api_versions_response_v0() -> None:
    resp = P.ApiVersionsResponse(
        error_code=0,
        api_keys=[
            P.ApiVersion(api_key=0, min_version=0, max_version=9),
            P.ApiVersion(api_key=18, min_version=0, max_version=3),
        ],
    )
    expected = i16(0) + array([i16(0) + i16(0) + i16(9), i16(18) + i16(0) + i16(3)])
    check(resp, 0, expected)


def test_api_versions_response_v3_with_tagged_fields() -> None:
    resp = P.ApiVersionsResponse(
        error_code=0,
        api_keys=[P.ApiVersion(api_key=3, min_version=0, max_version=12)],
        throttle_time_ms=7,
        supported_features=[
            P.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=20)
        ],
        finalized_features_epoch=5,
        zk_migration_ready=True,
    )
    expected = (
        i16(0)
        + carray([i16(3) + i16(0) + i16(12) + NO_TAGS])
        + i32(7)
        + tags(
            (0, carray([cstring("metadata.version") + i16(1) + i16(20) + NO_TAGS])),
            (1, i64(5)),
            (3, b"\x01"),
        )
    )
    check(resp, 3, expected)


def test_api_versions_response_v3_defaults_write_no_tags() -> None:
    resp = P.ApiVersionsResponse(error_code=35, api_keys=[])
    check(resp, 3, i16(35) + carray([]) + i32(0) + NO_TAGS)


# -- Metadata --------------------------------------------------------------------
def test_metadata_request_v1() -> None:
    req = P.MetadataRequest(
        topics=[P.MetadataRequestTopic(name="foo"), P.MetadataRequestTopic(name="bar")]
    )
    check(req, 1, array([string("foo"), string("bar")]))


def test_metadata_request_v1_null_means_all_topics() -> None:
    check(P.MetadataRequest(topics=None), 1, i32(-1))


def test_metadata_request_v0_cannot_say_null() -> None:
    with pytest.raises(P.EncodeError, match="topics"):
        P.MetadataRequest(topics=None).encode(0)


def test_metadata_response_v12_flexible() -> None:
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    resp = P.MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            P.MetadataResponseBroker(node_id=1, host="kafka-1", port=9092, rack="r1"),
            P.MetadataResponseBroker(node_id=2, host="kafka-2", port=9093, rack=None),
        ],
        cluster_id="cluster-x",
        controller_id=1,
        topics=[
            P.MetadataResponseTopic(
                error_code=0,
                name="events",
                topic_id=topic_id,
                is_internal=False,
                partitions=[
                    P.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=4,
                        replica_nodes=[1, 2],
                        isr_nodes=[1],
                        offline_replicas=[2],
                    )
                ],
                topic_authorized_operations=-2147483648,
            ),
            P.MetadataResponseTopic(error_code=100, name=None, topic_id=topic_id),
        ],
    )
    broker1 = i32(1) + cstring("kafka-1") + i32(9092) + cstring("r1") + NO_TAGS
    broker2 = i32(2) + cstring("kafka-2") + i32(9093) + cstring(None) + NO_TAGS
    partition = (
        i16(0)
        + i32(0)
        + i32(1)
        + i32(4)
        + carray([i32(1), i32(2)])
        + carray([i32(1)])
        + carray([i32(2)])
        + NO_TAGS
    )
    topic1 = (
        i16(0)
        + cstring("events")
        + topic_id.bytes
        + b"\x00"
        + carray([partition])
        + i32(-2147483648)
        + NO_TAGS
    )
    topic2 = i16(100) + cstring(None) + topic_id.bytes + b"\x00" + carray([]) + i32(-2147483648)
    topic2 += NO_TAGS
    expected = (
        i32(0)
        + carray([broker1, broker2])
        + cstring("cluster-x")
        + i32(1)
        + carray([topic1, topic2])
        + NO_TAGS
    )
    check(resp, 12, expected)


# -- Produce -------------------------------------------------------------------------
def test_produce_request_v3_with_records() -> None:
    records = b"\x00" * 8 + b"fake record batch bytes"
    req = P.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            P.TopicProduceData(
                name="events",
                partition_data=[
                    P.PartitionProduceData(index=0, records=records),
                    P.PartitionProduceData(index=1, records=None),
                ],
            )
        ],
    )
    expected = (
        string(None)
        + i16(-1)
        + i32(30000)
        + array([string("events") + array([i32(0) + nbytes(records), i32(1) + nbytes(None)])])
    )
    check(req, 3, expected)
    # a records field accepts any bytes-like object, written as it is
    req.topic_data[0].partition_data[0].records = memoryview(bytearray(records))
    assert req.encode(3) == expected
    decoded = P.ProduceRequest.decode(expected, 3)
    got = decoded.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview) and got == records


# -- Fetch ---------------------------------------------------------------------------
def test_fetch_response_v4_aborted_transactions() -> None:
    records = b"batch-bytes"
    resp = P.FetchResponse(
        throttle_time_ms=10,
        responses=[
            P.FetchableTopicResponse(
                topic="txn-topic",
                partitions=[
                    P.PartitionData(
                        partition_index=3,
                        error_code=0,
                        high_watermark=100,
                        last_stable_offset=90,
                        aborted_transactions=[
                            P.AbortedTransaction(producer_id=7, first_offset=40),
                            P.AbortedTransaction(producer_id=8, first_offset=55),
                        ],
                        records=records,
                    ),
                    P.PartitionData(
                        partition_index=4,
                        error_code=1,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        aborted_transactions=None,
                        records=None,
                    ),
                ],
            )
        ],
    )
    p3 = (
        i32(3)
        + i16(0)
        + i64(100)
        + i64(90)
        + array([i64(7) + i64(40), i64(8) + i64(55)])
        + nbytes(records)
    )
    p4 = i32(4) + i16(1) + i64(-1) + i64(-1) + array(None) + nbytes(None)
    expected = i32(10) + array([string("txn-topic") + array([p3, p4])])
    check(resp, 4, expected)
    decoded = P.FetchResponse.decode(memoryview(expected), 4)
    part = decoded.responses[0].partitions[0]
    assert [a.producer_id for a in part.aborted_transactions or ()] == [7, 8]
    assert part.records == records and isinstance(part.records, memoryview)
    # zero copy: the slice shares the input's buffer
    assert part.records.obj is expected


def test_fetch_request_v12_flexible() -> None:
    req = P.FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            P.FetchTopic(
                topic="events",
                partitions=[
                    P.FetchPartition(
                        partition=0,
                        current_leader_epoch=5,
                        fetch_offset=1234,
                        last_fetched_epoch=4,
                        log_start_offset=-1,
                        partition_max_bytes=1048576,
                    )
                ],
            )
        ],
        forgotten_topics_data=[P.ForgottenTopic(topic="old", partitions=[1, 2])],
        rack_id="rack-a",
        cluster_id="c1",
    )
    partition = i32(0) + i32(5) + i64(1234) + i32(4) + i64(-1) + i32(1048576) + NO_TAGS
    expected = (
        i32(-1)
        + i32(500)
        + i32(1)
        + i32(52428800)
        + i8(1)
        + i32(0)
        + i32(-1)
        + carray([cstring("events") + carray([partition]) + NO_TAGS])
        + carray([cstring("old") + carray([i32(1), i32(2)]) + NO_TAGS])
        + cstring("rack-a")
        + tags((0, cstring("c1")))  # ClusterId is tagged (tag 0) from v12
    )
    check(req, 12, expected)


def fetch_v12_response_bytes(partition_tags: bytes, top_tags: bytes) -> bytes:
    partition = (
        i32(0)
        + i16(0)
        + i64(50)
        + i64(50)
        + i64(0)
        + carray([i64(9) + i64(10) + NO_TAGS])
        + i32(-1)
        + cbytes(b"recs")
        + partition_tags
    )
    return (
        i32(0)
        + i16(0)
        + i32(77)
        + carray([cstring("t") + carray([partition]) + NO_TAGS])
        + top_tags
    )


def test_fetch_response_v12_flexible_with_tagged_fields() -> None:
    data = fetch_v12_response_bytes(
        tags((1, i32(3) + i32(8) + NO_TAGS)),  # CurrentLeader: leader 3, epoch 8
        NO_TAGS,
    )
    resp = P.FetchResponse.decode(data, 12)
    assert resp.session_id == 77
    part = resp.responses[0].partitions[0]
    assert part.current_leader == P.FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=8)
    assert part.diverging_epoch == P.FetchResponse.EpochEndOffset(epoch=-1, end_offset=-1)
    assert part.aborted_transactions == [P.AbortedTransaction(producer_id=9, first_offset=10)]
    assert part.preferred_read_replica == -1
    assert part.records == b"recs"
    assert resp.encode(12) == data


def test_unknown_tags_are_kept_and_written_back_in_order() -> None:
    # partition: known tag 1 between unknown tags 0? no: 0 is known (DivergingEpoch);
    # use unknown 9 and 40 around known 2 (SnapshotId); top level: unknown 5.
    snapshot = i64(123) + i32(6) + NO_TAGS
    data = fetch_v12_response_bytes(
        tags((2, snapshot), (9, b"\x01\x02"), (40, b"")),
        tags((5, b"hello")),
    )
    resp = P.FetchResponse.decode(data, 12)
    part = resp.responses[0].partitions[0]
    assert part.snapshot_id == P.FetchResponse.SnapshotId(end_offset=123, epoch=6)
    assert part.unknown_tags == {9: b"\x01\x02", 40: b""}
    assert resp.unknown_tags == {5: b"hello"}
    assert resp.encode(12) == data
    # tag 0 of the top level is NodeEndpoints only from v16: at v12 it is unknown
    data = fetch_v12_response_bytes(NO_TAGS, tags((0, b"\x01")))
    assert P.FetchResponse.decode(data, 12).unknown_tags == {0: b"\x01"}
    assert P.FetchResponse.decode(data, 12).encode(12) == data


def test_unknown_tags_set_by_hand_are_written_in_tag_order() -> None:
    req = P.ApiVersionsRequest(
        client_software_name="a", client_software_version="b", unknown_tags={7: b"x", 2: b"yz"}
    )
    assert req.encode(3) == cstring("a") + cstring("b") + tags((2, b"yz"), (7, b"x"))


def test_long_compact_lengths_use_multibyte_varints() -> None:
    name = "n" * 300  # length + 1 = 301: two varint bytes
    req = P.ApiVersionsRequest(client_software_name=name, client_software_version="")
    assert req.encode(3) == b"\xad\x02" + name.encode() + b"\x01" + NO_TAGS
    check(req, 3, req.encode(3))


# -- the consumer group payloads -----------------------------------------------------
def test_consumer_protocol_subscription_v1() -> None:
    sub = P.ConsumerProtocolSubscription(
        topics=["a", "b"],
        user_data=None,
        owned_partitions=[P.ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[0])],
    )
    body = array([string("a"), string("b")]) + nbytes(None) + array([string("a") + array([i32(0)])])
    check(sub, 1, body)
    assert sub.encode_versioned(1) == i16(1) + body
    assert P.ConsumerProtocolSubscription.decode_versioned(i16(1) + body) == (sub, 1)


def test_consumer_protocol_assignment_from_a_newer_version() -> None:
    tp = P.ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[1, 2])
    body = array([string("t") + array([i32(1), i32(2)])]) + nbytes(b"ud")
    # version 9 does not exist yet: read as the newest pykaf knows, extra bytes ignored
    obj, version = P.ConsumerProtocolAssignment.decode_versioned(i16(9) + body + b"future")
    assert version == 9
    assert obj == P.ConsumerProtocolAssignment(assigned_partitions=[tp], user_data=b"ud")


# -- KIP-848 consumer groups -----------------------------------------------------------
def test_consumer_group_heartbeat_request_v1() -> None:
    tid = uuid.UUID("0123456789abcdef0123456789abcdef")
    TP = P.ConsumerGroupHeartbeatRequest.TopicPartitions
    req = P.ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=3,
        rebalance_timeout_ms=-1,
        subscribed_topic_regex="t.*",
        topic_partitions=[TP(topic_id=tid, partitions=[0, 2])],
    )
    body = (
        cstring("g")
        + cstring("m")
        + i32(3)
        + cstring(None)  # instance id
        + cstring(None)  # rack id
        + i32(-1)
        + carray(None)  # topic names unchanged
        + cstring("t.*")
        + cstring(None)  # server assignor
        + carray([tid.bytes + carray([i32(0), i32(2)]) + NO_TAGS])
        + NO_TAGS
    )
    check(req, 1, body)


def test_consumer_group_heartbeat_response_nullable_assignment() -> None:
    tid = uuid.UUID(int=7)
    head = i32(0) + i16(0) + cstring(None) + cstring("m") + i32(5) + i32(3000)
    # a null struct is one int8 -1
    check(
        P.ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=5, heartbeat_interval_ms=3000),
        0,
        head + i8(-1) + NO_TAGS,
    )
    TP = P.ConsumerGroupHeartbeatResponse.TopicPartitions
    assigned = P.ConsumerGroupHeartbeatResponse(
        member_id="m",
        member_epoch=5,
        heartbeat_interval_ms=3000,
        assignment=P.ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[TP(topic_id=tid, partitions=[1])]
        ),
    )
    # a present one is an int8 1 and the struct
    body = head + i8(1) + carray([tid.bytes + carray([i32(1)]) + NO_TAGS]) + NO_TAGS + NO_TAGS
    check(assigned, 0, body)


# -- KIP-932 share groups -----------------------------------------------------------------
def test_share_fetch_request_v1_with_acknowledgements() -> None:
    from pykaf.protocol._messages import share_fetch as SF

    tid = uuid.UUID(int=3)
    req = P.ShareFetchRequest(
        group_id="g",
        member_id="m",
        share_session_epoch=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1024,
        max_records=50,
        batch_size=50,
        topics=[
            SF.FetchTopic(
                topic_id=tid,
                partitions=[
                    SF.FetchPartition(
                        partition_index=1,
                        acknowledgement_batches=[
                            SF.AcknowledgementBatch(
                                first_offset=10, last_offset=12, acknowledge_types=[1, 2, 3]
                            )
                        ],
                    )
                ],
            )
        ],
    )
    batch = i64(10) + i64(12) + carray([i8(1), i8(2), i8(3)]) + NO_TAGS
    # v1 has no PartitionMaxBytes (v0 only) and no acquire mode / renew flag (v2+)
    part = i32(1) + carray([batch]) + NO_TAGS
    body = (
        cstring("g")
        + cstring("m")
        + i32(2)
        + i32(500)
        + i32(1)
        + i32(1024)
        + i32(50)
        + i32(50)
        + carray([tid.bytes + carray([part]) + NO_TAGS])
        + carray([])
        + NO_TAGS
    )
    check(req, 1, body)
    # v2 adds ShareAcquireMode (int8) and IsRenewAck (bool) after BatchSize
    v2 = body[: -len(carray([tid.bytes + carray([part]) + NO_TAGS]) + carray([]) + NO_TAGS)]
    rest = body[len(v2) :]
    check(req, 2, v2 + i8(0) + i8(0) + rest)


def test_share_group_heartbeat_response_v1_assignment() -> None:
    tid = uuid.UUID(int=9)
    TP = P.ShareGroupHeartbeatResponse.TopicPartitions
    resp = P.ShareGroupHeartbeatResponse(
        member_id="m",
        member_epoch=4,
        heartbeat_interval_ms=5000,
        assignment=P.ShareGroupHeartbeatResponse.Assignment(
            topic_partitions=[TP(topic_id=tid, partitions=[0, 1])]
        ),
    )
    head = i32(0) + i16(0) + cstring(None) + cstring("m") + i32(4) + i32(5000)
    body = head + i8(1) + carray([tid.bytes + carray([i32(0), i32(1)]) + NO_TAGS]) + NO_TAGS
    check(resp, 1, body + NO_TAGS)
