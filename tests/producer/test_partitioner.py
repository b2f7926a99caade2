"""Partitioners and their hashes: known answers, both codecs agree, confluent-kafka interop."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Sequence
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykaf._producer.partitioner import (
    PARTITIONER_NAMES,
    CallablePartitioner,
    Crc32Partitioner,
    Fnv1aPartitioner,
    ManualPartitioner,
    Murmur2Partitioner,
    Partitioner,
    PartitionerError,
    RandomPartitioner,
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    partitioner_from_config,
)
from pykaf.errors import ConfigError, PykafError
from pykaf.testing import MockCluster

# Kafka's Java test vectors (Utils.murmur2), checked against kafka-python's port.
MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# The FNV reference vectors (32-bit FNV-1a).
FNV1A_VECTORS = {b"": 0x811C9DC5, b"a": 0xE40C292C, b"foobar": 0xBF9CF968}


# -- hashes -----------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), MURMUR2_VECTORS.items())
def test_murmur2_known_answers(codec: ModuleType, data: bytes, expected: int) -> None:
    assert codec.murmur2(data) == expected
    assert codec.murmur2(bytearray(data)) == expected
    assert codec.murmur2(memoryview(data)) == expected


@pytest.mark.parametrize(("data", "expected"), FNV1A_VECTORS.items())
def test_fnv1a_known_answers(codec: ModuleType, data: bytes, expected: int) -> None:
    assert codec.fnv1a_32(data) == expected
    assert codec.fnv1a_32(bytearray(data)) == expected


def test_murmur2_matches_kafka_python(codec: ModuleType) -> None:
    """An independent implementation, over every tail length."""
    default = pytest.importorskip("kafka.partitioner.default")
    rng = random.Random(3)
    for n in range(70):
        data = rng.randbytes(n)
        ref = default.murmur2(bytearray(data))
        assert codec.murmur2(data) == (ref - (1 << 32) if ref >= 1 << 31 else ref)


def test_hashes_reject_none_and_str(codec: ModuleType) -> None:
    for fn in (codec.murmur2, codec.fnv1a_32):
        with pytest.raises(TypeError):
            fn(None)
        with pytest.raises(TypeError):
            fn("text")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_both_codecs_hash_alike(both_codecs: tuple[ModuleType, ModuleType], data: bytes) -> None:
    cy, py = both_codecs
    assert cy.murmur2(data) == py.murmur2(data)
    assert cy.fnv1a_32(data) == py.fnv1a_32(data)
    assert -(1 << 31) <= cy.murmur2(data) < 1 << 31
    assert 0 <= cy.fnv1a_32(data) < 1 << 32


# -- interop with confluent-kafka (librdkafka's partitioners) ------------------------

INTEROP_KEYS = 3000


def _confluent_partitions(
    cluster: MockCluster, name: str, partitions: int, keys: Sequence[bytes | None]
) -> list[int]:
    """The partition confluent-kafka's ``partitioner=name`` chose for each key, in order."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"interop-{name}-{partitions}"
    cluster.create_topic(topic, partitions, 1)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "partitioner": name,
            "linger.ms": 20,
            "log_level": 3,
        }
    )
    chosen: dict[int, int] = {}

    def report(err: object, msg: object) -> None:
        assert err is None, err
        chosen[int(msg.value())] = msg.partition()  # type: ignore[attr-defined]

    for i, key in enumerate(keys):
        producer.produce(topic, str(i).encode(), key, on_delivery=report)
    assert producer.flush(30) == 0
    return [chosen[i] for i in range(len(keys))]


@pytest.fixture(scope="module")
def interop_keys() -> list[bytes]:
    rng = random.Random(20240501)
    return [rng.randbytes(rng.randint(1, 48)) for _ in range(INTEROP_KEYS)]


@pytest.mark.parametrize(
    ("name", "partitioner"),
    [
        ("murmur2_random", Murmur2Partitioner),
        ("fnv1a_random", Fnv1aPartitioner),
        ("consistent_random", Crc32Partitioner),
    ],
)
@pytest.mark.parametrize("partitions", [7, 12])
def test_keyed_partitioners_match_confluent(
    mock_cluster: MockCluster,
    interop_keys: list[bytes],
    name: str,
    partitioner: type[Partitioner],
    partitions: int,
) -> None:
    theirs = _confluent_partitions(mock_cluster, name, partitions, interop_keys)
    ours = partitioner_from_config(name)
    assert isinstance(ours, partitioner)
    mismatched = [
        (key, want)
        for key, want in zip(interop_keys, theirs, strict=True)
        if ours.partition("t", key, partitions, None) != want
    ]
    assert not mismatched, f"{len(mismatched)} of {len(interop_keys)} keys differ"
    assert len(set(theirs)) == partitions  # the keys spread over every partition


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("murmur2", Murmur2Partitioner(hash_null_keys=True)),
        ("fnv1a", Fnv1aPartitioner(hash_null_keys=True)),
        ("consistent", Crc32Partitioner(hash_null_keys=True)),
    ],
)
def test_hash_null_keys_matches_confluent_plain_variants(
    mock_cluster: MockCluster, name: str, ours: Partitioner
) -> None:
    """librdkafka's non-``_random`` partitioners hash null (and empty) keys as empty data."""
    keys: list[bytes | None] = [None, b""] * 5
    theirs = _confluent_partitions(mock_cluster, name, 7, keys)
    assert theirs == [ours.partition("t", key, 7, None) for key in keys]


def test_empty_keys_like_confluent_random_variants(mock_cluster: MockCluster) -> None:
    """murmur2_random and fnv1a_random hash an empty key; consistent_random does not."""
    for name, ours in [
        ("murmur2_random", Murmur2Partitioner()),
        ("fnv1a_random", Fnv1aPartitioner()),
    ]:
        (theirs,) = _confluent_partitions(mock_cluster, name, 12, [b""])
        assert ours.partition("t", b"", 12, None) == theirs
    assert Crc32Partitioner(null_key=_Fixed(5)).partition("t", b"", 12, None) == 5


# -- keyed partitioners ------------------------------------------------------------


class _Fixed:
    """A partitioner that always answers the same, recording its calls."""

    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.batches: list[tuple[str, int | None]] = []

    def partition(
        self, topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        return self.answer

    def on_new_batch(self, topic: str, previous: int | None = None) -> None:
        self.batches.append((topic, previous))


def test_keyed_formulas() -> None:
    from pykaf.codec import fnv1a_32, murmur2

    key = b"foobar"  # murmur2 negative, fnv1a top bit set
    assert Murmur2Partitioner().partition("t", key, 10, None) == (murmur2(key) & 0x7FFFFFFF) % 10
    assert Fnv1aPartitioner().partition("t", key, 10, None) == abs(fnv1a_32(key) - (1 << 32)) % 10
    assert Crc32Partitioner().partition("t", key, 10, None) == zlib.crc32(key) % 10


@pytest.mark.parametrize("cls", [Murmur2Partitioner, Fnv1aPartitioner, Crc32Partitioner])
def test_keyed_ignore_availability_and_send_null_keys_to_fallback(
    cls: type[Murmur2Partitioner],
) -> None:
    fallback = _Fixed(3)
    p = cls(null_key=fallback)
    assert p.partition("t", b"k", 8, [0]) == p.partition("t", b"k", 8, None)
    assert p.partition("t", None, 8, None) == 3
    p.on_new_batch("t", 3)
    assert fallback.batches == [("t", 3)]
    with pytest.raises(PartitionerError):
        p.partition("t", b"k", 0, None)


def test_keyed_null_keys_are_sticky_by_default() -> None:
    p = Murmur2Partitioner()
    first = p.partition("t", None, 50, None)
    assert all(p.partition("t", None, 50, None) == first for _ in range(100))
    p.on_new_batch("t", first)
    assert p.partition("t", None, 50, None) != first


# -- keyless partitioners ----------------------------------------------------------


def test_round_robin_cycles_per_topic() -> None:
    p = RoundRobinPartitioner()
    assert [p.partition("a", b"k", 3, None) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [p.partition("b", None, 2, None) for _ in range(3)] == [0, 1, 0]
    assert [p.partition("c", None, 6, [1, 4]) for _ in range(4)] == [1, 4, 1, 4]
    # Out-of-range available entries are ignored.
    assert {p.partition("d", None, 3, [2, 9]) for _ in range(4)} == {2}


def test_random_hits_every_partition_evenly() -> None:
    p = RandomPartitioner(seed=1)
    counts = Counter(p.partition("t", b"k", 8, None) for _ in range(8000))
    assert sorted(counts) == list(range(8))
    assert min(counts.values()) > 800
    assert {p.partition("t", None, 8, [2, 5]) for _ in range(200)} == {2, 5}


def test_sticky_stays_until_new_batch() -> None:
    p = UniformStickyPartitioner(seed=2)
    first = p.partition("t", None, 10, None)
    assert {p.partition("t", b"any", 10, None) for _ in range(100)} == {first}
    p.on_new_batch("t", previous=(first + 1) % 10)  # another partition's batch: no switch
    assert p.partition("t", None, 10, None) == first
    seen = {first}
    for _ in range(60):
        before = p.partition("t", None, 10, None)
        p.on_new_batch("t", before)
        after = p.partition("t", None, 10, None)
        assert after != before
        seen.add(after)
    assert seen == set(range(10))
    # Topics are independent.
    other = p.partition("u", None, 10, None)
    p.on_new_batch("u")
    assert p.partition("t", None, 10, None) == after
    assert 0 <= other < 10


def test_sticky_uses_available_partitions_only() -> None:
    p = UniformStickyPartitioner(seed=3)
    for _ in range(50):
        got = p.partition("t", None, 10, [3, 7])
        assert got in (3, 7)
        p.on_new_batch("t")
        assert p.partition("t", None, 10, [3, 7]) == ({3, 7} - {got}).pop()
        p.on_new_batch("t")
    # The sticky partition loses its leader: replaced at once.
    current = p.partition("t", None, 10, [3, 7])
    assert p.partition("t", None, 10, [4]) == 4
    assert current != 4
    # One available partition: switching keeps it.
    p.on_new_batch("t")
    assert p.partition("t", None, 10, [4]) == 4


def test_sticky_follows_shrinking_partition_count() -> None:
    p = UniformStickyPartitioner(seed=4)
    while p.partition("t", None, 10, None) < 5:
        p.on_new_batch("t")
    assert p.partition("t", None, 5, None) < 5
    with pytest.raises(PartitionerError):
        UniformStickyPartitioner().partition("t", None, 0, None)


def test_manual_always_raises() -> None:
    with pytest.raises(PartitionerError, match="names no partition"):
        ManualPartitioner().partition("t", b"k", 3, None)
    assert issubclass(PartitionerError, PykafError)


# -- callables and config ------------------------------------------------------------


def test_callable_is_wrapped_and_checked() -> None:
    def last(
        topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        return partitions - 1

    p = partitioner_from_config(last)
    assert isinstance(p, CallablePartitioner)
    assert p.partition("t", None, 4, None) == 3

    for bad in (4, -1, True, 1.0, "1", None):
        q = partitioner_from_config(lambda t, k, n, a, bad=bad: bad)
        with pytest.raises(PartitionerError, match="returned"):
            q.partition("t", b"k", 4, None)

    def boom(
        topic: str, key: bytes | None, partitions: int, available: Sequence[int] | None
    ) -> int:
        raise KeyError("x")

    with pytest.raises(PartitionerError, match="failed") as info:
        partitioner_from_config(boom).partition("t", b"k", 4, None)
    assert isinstance(info.value.__cause__, KeyError)


def test_config_names() -> None:
    assert isinstance(partitioner_from_config(None), Murmur2Partitioner)
    assert isinstance(partitioner_from_config("MURMUR2"), Murmur2Partitioner)
    expected = {
        "murmur2": Murmur2Partitioner,
        "murmur2_random": Murmur2Partitioner,
        "fnv1a": Fnv1aPartitioner,
        "fnv1a_random": Fnv1aPartitioner,
        "crc32": Crc32Partitioner,
        "consistent": Crc32Partitioner,
        "consistent_random": Crc32Partitioner,
        "round_robin": RoundRobinPartitioner,
        "random": RandomPartitioner,
        "sticky": UniformStickyPartitioner,
        "manual": ManualPartitioner,
    }
    assert set(PARTITIONER_NAMES) == set(expected)
    for name, cls in expected.items():
        assert type(partitioner_from_config(name)) is cls
    # Each call builds a fresh partitioner: no state shared between producers.
    assert partitioner_from_config("sticky") is not partitioner_from_config("sticky")
    instance = RoundRobinPartitioner()
    assert partitioner_from_config(instance) is instance


@pytest.mark.parametrize("value", ["murmur3", "", "default", 3, b"murmur2"])
def test_config_errors(value: object) -> None:
    with pytest.raises(ConfigError):
        partitioner_from_config(value)  # type: ignore[arg-type]
