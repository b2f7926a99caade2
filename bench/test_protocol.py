"""Protocol message benchmarks: pykaf's generated codecs against kafka-python's.

Cases (one pytest-benchmark group each; ``records`` counts partitions):

* ``metadata-v{8,12}-{encode,decode}``: a Metadata response of 100 topics x 10
  partitions (1,000 partitions, 3 replicas each, 3 brokers).
* ``fetch-v{11,12}-{encode,decode}``: a Fetch response of 10 topics x 10
  partitions, each carrying a small record batch (5 records, ~400 bytes).

Peers: ``kafka-python`` is its JSON-spec classes (``kafka.protocol.metadata``,
``kafka.protocol.consumer.fetch``); ``kafka-python[classic]`` its older
hand-written per-version classes (``kafka.protocol.old``), which stop at
Metadata v8 and Fetch v11, so the flexible versions (v12) have one peer.
``pykaf[view]`` decodes a Fetch response from a memoryview (what
:class:`pykaf.protocol.connection.Connection` hands the decoder).

Decoding touches what a client reads (every partition's error code and high
watermark, or leader and replicas). Each benchmark checks its result once,
outside the timing: pykaf's bytes equal kafka-python's, and each side decodes
what was encoded.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

import pykaf.protocol as P
from bench._support import KAFKA_PYTHON, PYKAF, note_rate, tag
from pykaf.protocol._message import Message, spec_of
from pykaf.protocol._schema import StructSpec

TOPICS = 100
PARTITIONS = 10
FETCH_TOPICS = 10
FETCH_PARTITIONS = 10
BENCH = pytest.mark.benchmark(max_time=2.0, min_rounds=20, warmup=True, warmup_iterations=5)

CLASSIC = "classic"
CLIENTS = [(PYKAF, None), (KAFKA_PYTHON, None), (KAFKA_PYTHON, CLASSIC)]
# The classic kafka-python classes stop at Metadata v8 and Fetch v11.
CLASSIC_MAX = {"metadata": 8, "fetch": 11}


# -- the messages -----------------------------------------------------------------
@cache
def metadata_response() -> P.MetadataResponse:
    brokers = [
        P.MetadataResponseBroker(node_id=i, host=f"broker-{i}.kafka.local", port=9092, rack=f"r{i}")
        for i in range(3)
    ]
    topics = []
    for t in range(TOPICS):
        partitions = [
            P.MetadataResponsePartition(
                error_code=0,
                partition_index=p,
                leader_id=p % 3,
                leader_epoch=7,
                replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                offline_replicas=[],
            )
            for p in range(PARTITIONS)
        ]
        topics.append(
            P.MetadataResponseTopic(
                error_code=0,
                name=f"topic-{t:03d}.events",
                topic_id=uuid.UUID(int=t + 1),
                is_internal=False,
                partitions=partitions,
                topic_authorized_operations=-(2**31),
            )
        )
    return P.MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id="cluster-1", controller_id=1, topics=topics
    )


@cache
def record_batch() -> bytes:
    from pykaf.codec import BatchBuilder

    builder = BatchBuilder(compression=0, max_bytes=1 << 20)
    for i in range(5):
        builder.append(1_700_000_000_000 + i, b"key-%d" % i, b"value-%d-" % i + b"x" * 50)
    data: bytes = builder.build()
    return data


@cache
def fetch_response() -> P.FetchResponse:
    batch = record_batch()
    responses = [
        P.FetchableTopicResponse(
            topic=f"topic-{t:03d}.events",
            partitions=[
                P.PartitionData(
                    partition_index=p,
                    error_code=0,
                    high_watermark=100_000 + p,
                    last_stable_offset=100_000 + p,
                    log_start_offset=0,
                    aborted_transactions=[],
                    preferred_read_replica=-1,
                    records=batch,
                )
                for p in range(FETCH_PARTITIONS)
            ],
        )
        for t in range(FETCH_TOPICS)
    ]
    return P.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


CASES: dict[str, tuple[Callable[[], Message], int]] = {
    "metadata": (metadata_response, TOPICS * PARTITIONS),
    "fetch": (fetch_response, FETCH_TOPICS * FETCH_PARTITIONS),
}
VERSIONS = {"metadata": (8, 12), "fetch": (11, 12)}


# -- kafka-python's objects for the same values -------------------------------------
def _load(variant: str | None, api: str) -> Any:
    """kafka-python's module for ``api``: the classic classes or the JSON-spec ones."""
    if variant == CLASSIC:
        module = "metadata" if api == "metadata" else "fetch"
        return pytest.importorskip(f"kafka.protocol.old.{module}")
    name = "kafka.protocol.metadata" if api == "metadata" else "kafka.protocol.consumer.fetch"
    return pytest.importorskip(name)


def to_kafka_python(obj: Any, kcls: Any, version: int) -> Any:
    """kafka-python's JSON-spec object with the values of the pykaf ``obj``."""
    kwargs: dict[str, Any] = {}
    for f in spec_of(type(obj)).fields:
        if version not in f.versions or f.attr.endswith("authorized_operations"):
            continue
        value = getattr(obj, f.attr)
        sub = f.struct or f.elem_struct
        if sub is not None and value is not None:
            sub_cls = getattr(kcls, sub.name)
            if f.kind == "array":
                value = [to_kafka_python(x, sub_cls, version) for x in value]
            else:
                value = to_kafka_python(value, sub_cls, version)
        kwargs[f.attr] = value
    return kcls(**kwargs, version=version)


def to_tuple(obj: Any, version: int) -> tuple[Any, ...]:
    """The positional values the classic classes take (structs of one field unboxed)."""
    out = []
    for f in spec_of(type(obj)).fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.attr)
        sub = f.struct or f.elem_struct
        if isinstance(sub, StructSpec) and value is not None:
            value = [_unbox(to_tuple(x, version)) for x in value]
        elif f.attr.endswith("authorized_operations"):
            value = {bit for bit in range(32) if (value & 0xFFFFFFFF) >> bit & 1}  # a bit set
        out.append(value)
    return tuple(out)


def _unbox(values: tuple[Any, ...]) -> Any:
    return values[0] if len(values) == 1 else values


def peer_object(api: str, variant: str | None, version: int) -> Any:
    """kafka-python's message holding the benchmark's values."""
    obj = CASES[api][0]()
    module = _load(variant, api)
    name = "MetadataResponse" if api == "metadata" else "FetchResponse"
    if variant == CLASSIC:
        return getattr(module, f"{name}_v{version}")(*to_tuple(obj, version))
    return to_kafka_python(obj, getattr(module, name), version)


# -- what decoding touches ----------------------------------------------------------
def touch(api: str, resp: Any) -> int:
    """Read what a client reads from every partition; return a checksum."""
    total = 0
    if api == "metadata":
        for t in resp.topics:
            for p in t.partitions:
                total += p.leader_id + len(p.replica_nodes) + p.error_code
    else:
        for t in resp.responses:
            for p in t.partitions:
                total += p.high_watermark + p.error_code + len(p.records)
    return total


def touch_classic(api: str, resp: Any) -> int:
    # the classic classes decode nested structs to tuples: index them like kafka-python does
    total = 0
    if api == "metadata":
        for t in resp.topics:  # (error_code, name, is_internal, partitions, ...)
            for p in t[3]:  # (error_code, partition, leader, epoch, replicas, ...)
                total += p[2] + len(p[4]) + p[0]
    else:
        for t in resp.responses:  # (topic, partitions)
            for p in t[1]:  # (partition, error_code, high_watermark, ..., records)
                total += p[2] + p[1] + len(p[-1])
    return total


def _cases() -> list[Any]:
    params = []
    for api, versions in VERSIONS.items():
        for version in versions:
            for client, variant in CLIENTS:
                if variant == CLASSIC and version > CLASSIC_MAX[api]:
                    continue
                label = client + (f"[{variant}]" if variant else "")
                params.append(
                    pytest.param(api, version, client, variant, id=f"{api}-v{version}-{label}")
                )
    return params


def _decode_cases() -> list[Any]:
    out = _cases()
    for version in VERSIONS["fetch"]:
        out.append(
            pytest.param("fetch", version, PYKAF, "view", id=f"fetch-v{version}-pykaf[view]")
        )
    return out


@BENCH
@pytest.mark.parametrize(("api", "version", "client", "variant"), _cases())
def test_encode(benchmark: Any, api: str, version: int, client: str, variant: str | None) -> None:
    build, count = CASES[api]
    msg = build()
    expected = msg.encode(version)
    encode: Callable[[], bytes | bytearray]
    if client == PYKAF:
        encode = lambda: msg.encode(version)  # noqa: E731
    elif variant == CLASSIC:
        peer = peer_object(api, variant, version)
        encode = peer.encode
    else:
        peer = peer_object(api, variant, version)
        encode = lambda: peer.encode(version=version)  # noqa: E731
    tag(benchmark, group=f"{api}-v{version}-encode", client=client, records=count, variant=variant)
    data = benchmark(encode)
    note_rate(benchmark, count)
    # kafka-python writes tagged fields even at their defaults (Kafka omits them), so
    # its bytes may be longer; they must decode to the same message.
    same = type(msg).decode(bytes(data), version) == type(msg).decode(expected, version)
    assert same, f"{client} {variant or ''} encoded different values"
    if data != expected:
        assert client == KAFKA_PYTHON and version >= 12, f"{client} wrote different bytes"


@BENCH
@pytest.mark.parametrize(("api", "version", "client", "variant"), _decode_cases())
def test_decode(benchmark: Any, api: str, version: int, client: str, variant: str | None) -> None:
    build, count = CASES[api]
    msg = build()
    data = msg.encode(version)
    cls = type(msg)
    expected = touch(api, msg)
    decode: Callable[[], int]
    if client == PYKAF:
        buf: bytes | memoryview = memoryview(data) if variant == "view" else data
        decode = lambda: touch(api, cls.decode(buf, version))  # noqa: E731
    elif variant == CLASSIC:
        name = "MetadataResponse" if api == "metadata" else "FetchResponse"
        peer_cls = getattr(_load(variant, api), f"{name}_v{version}")
        decode = lambda: touch_classic(api, peer_cls.decode(data))  # noqa: E731
    else:
        name = "MetadataResponse" if api == "metadata" else "FetchResponse"
        peer_cls = getattr(_load(variant, api), name)
        decode = lambda: touch(api, peer_cls.decode(data, version=version))  # noqa: E731
    tag(benchmark, group=f"{api}-v{version}-decode", client=client, records=count, variant=variant)
    total = benchmark(decode)
    note_rate(benchmark, count)
    assert total == expected, f"{client} {variant or ''} decoded different values"
