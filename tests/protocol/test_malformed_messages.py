"""Bytes that are not a valid message raise MalformedMessageError, and only that.

Never IndexError or struct.error, never a hang, never a large allocation from
a length field.
"""

from __future__ import annotations

import contextlib
import random
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_values import all_versions, make

import pykaf.protocol as P
from pykaf.errors import ProtocolError
from pykaf.protocol._message import Message

CASES = all_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_every_truncation_is_malformed(cls: type[Message], version: int) -> None:
    data = make(cls, version).encode(version)
    for cut in range(len(data)):
        with pytest.raises(P.MalformedMessageError):
            cls.decode(data[:cut], version)
        with pytest.raises(P.MalformedMessageError):
            cls.decode(memoryview(data)[:cut], version)


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
def test_random_corruption_is_malformed_or_decodes(cls: type[Message], version: int) -> None:
    data = make(cls, version).encode(version)
    rng = random.Random(f"{cls.__name__}{version}")
    for _ in range(40):
        corrupt = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(len(corrupt)) if corrupt else 0
            corrupt[pos : pos + 1] = bytes([rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])])
        with contextlib.suppress(P.MalformedMessageError):
            cls.decode(bytes(corrupt), version)


MESSAGES = [cls for cls, _ in CASES]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64), index=st.integers(0, len(CASES) - 1))
def test_garbage_is_malformed_or_decodes(data: bytes, index: int) -> None:
    cls, version = CASES[index]
    try:
        cls.decode(data, version)
    except P.MalformedMessageError as exc:
        assert isinstance(exc, ProtocolError)


def small_allocation(fn: object) -> int:
    """Peak bytes allocated while ``fn`` runs (it must raise MalformedMessageError)."""
    tracemalloc.start()
    try:
        with pytest.raises(P.MalformedMessageError):
            fn()  # type: ignore[operator]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


HUGE = 2**31 - 1
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")


@pytest.mark.parametrize(
    ("name", "cls", "version", "data"),
    [
        # Metadata v1 response: brokers array count
        ("array count", P.MetadataResponse, 1, I32.pack(HUGE)),
        # a []int32 count, inside a partition of a Metadata response v0
        (
            "int array count",
            P.MetadataResponse,
            0,
            I32.pack(0)
            + I32.pack(1)
            + I16.pack(0)
            + I16.pack(1)
            + b"t"
            + I32.pack(1)
            + I16.pack(0)
            + I32.pack(0)
            + I32.pack(0)
            + I32.pack(HUGE),
        ),
        # Produce v3 request: records length
        (
            "records length",
            P.ProduceRequest,
            3,
            I16.pack(-1)
            + I16.pack(1)
            + I32.pack(0)
            + I32.pack(1)
            + I16.pack(1)
            + b"t"
            + I32.pack(1)
            + I32.pack(0)
            + I32.pack(HUGE)
            + b"xx",
        ),
        # SaslAuthenticate v1 request: bytes length
        ("bytes length", P.SaslAuthenticateRequest, 1, I32.pack(HUGE) + b"abc"),
        # a string of 32767 bytes with three present
        ("string length", P.SaslHandshakeRequest, 1, I16.pack(32767) + b"abc"),
        # compact array: uvarint 2**32 - 1
        ("compact array count", P.MetadataResponse, 12, I32.pack(0) + b"\xff\xff\xff\xff\x0f"),
        # compact string: uvarint 2**31
        ("compact string", P.SaslHandshakeResponse, 1, I16.pack(0) + I32.pack(HUGE)),
        # tag buffer: 2**31 tags, then a tag of 2**31 bytes
        ("tag count", P.HeartbeatResponse, 4, I32.pack(0) + I16.pack(0) + b"\xff\xff\xff\xff\x07"),
        (
            "tag size",
            P.HeartbeatResponse,
            4,
            I32.pack(0) + I16.pack(0) + b"\x01\x05\xff\xff\xff\xff\x07",
        ),
    ],
)
def test_huge_lengths_do_not_allocate(
    name: str, cls: type[Message], version: int, data: bytes
) -> None:
    assert small_allocation(lambda: cls.decode(data, version)) < 1 << 20, name


def test_varint_longer_than_five_bytes() -> None:
    data = I32.pack(0) + I16.pack(0) + b"\x80\x80\x80\x80\x80\x01"
    with pytest.raises(P.MalformedMessageError, match="varint"):
        P.HeartbeatResponse.decode(data, 4)


def test_invalid_utf8() -> None:
    with pytest.raises(P.MalformedMessageError):
        P.SaslHandshakeRequest.decode(I16.pack(2) + b"\xc3\x28", 1)


def test_null_in_a_non_nullable_field_reads_as_the_default() -> None:
    # Kafka's Java client refuses these; librdkafka's mock broker sends them (a null
    # host in a FindCoordinator error), so pykaf reads them as the type's default.
    assert P.SaslHandshakeRequest.decode(I16.pack(-1), 1).mechanism == ""
    assert P.SaslAuthenticateRequest.decode(I32.pack(-1), 1).auth_bytes == b""
    assert P.MetadataRequest.decode(I32.pack(-1), 0).topics == []
    resp = P.MetadataResponse.decode(I32.pack(0) + I32.pack(0) + I32.pack(-1), 1)
    assert resp.brokers == [] and resp.topics == []
    # a null []int32 (read with the fields around it)
    partition = I16.pack(0) + I32.pack(0) + I32.pack(1) + I32.pack(-1) + I32.pack(0)
    topic = I16.pack(0) + I16.pack(1) + b"t" + I32.pack(1) + partition
    resp = P.MetadataResponse.decode(I32.pack(0) + I32.pack(1) + topic, 0)
    assert resp.topics[0].partitions[0].replica_nodes == []
    # other negative lengths are still malformed
    with pytest.raises(P.MalformedMessageError, match="length"):
        P.SaslHandshakeRequest.decode(I16.pack(-2), 1)
    # nullable: -1 is None, -2 is invalid
    assert P.MetadataRequest.decode(I32.pack(-1), 1).topics is None
    with pytest.raises(P.MalformedMessageError):
        P.MetadataRequest.decode(I32.pack(-2), 1)


def test_known_tag_overrunning_its_size() -> None:
    # ApiVersions v3 response: tag 1 (FinalizedFeaturesEpoch, int64) declared 2 bytes long
    data = I16.pack(0) + b"\x01" + I32.pack(0) + b"\x01\x01\x02" + b"\x00" * 8
    with pytest.raises(P.MalformedMessageError, match="overruns"):
        P.ApiVersionsResponse.decode(data, 3)


def test_error_names_the_message_and_version() -> None:
    with pytest.raises(P.MalformedMessageError, match="MetadataResponse v5"):
        P.MetadataResponse.decode(b"\x00\x00", 5)
