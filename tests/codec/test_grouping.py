"""partition_order and take: keyed records grouped by partition (both implementations)."""

from __future__ import annotations

import random
from types import ModuleType

import pytest

from pykaf._columns import BinaryColumn

# Kafka's default partitioner on these keys (Java's Utils.toPositive(Utils.murmur2(key)) % n),
# from the murmur2 test vectors Java's own tests use: "21" -> -973932308 and so on.
JAVA_HASHES = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}


def expected(keys: list[bytes], count: int, murmur2: object) -> tuple[list[int], list[int]]:
    parts = [(murmur2(k) & 0x7FFFFFFF) % count for k in keys]  # type: ignore[operator]
    order = sorted(range(len(keys)), key=parts.__getitem__)
    bounds = [sum(1 for p in parts if p < q) for q in range(count + 1)]
    return order, bounds


@pytest.mark.parametrize("as_column", [False, True], ids=["list", "column"])
@pytest.mark.parametrize("count", [1, 3, 7, 100])
def test_groups_keys_as_the_default_partitioner(
    codec: ModuleType, as_column: bool, count: int
) -> None:
    rng = random.Random(count)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(500)]
    order, bounds = codec.partition_order(
        BinaryColumn.from_values(keys) if as_column else keys, count
    )
    assert (order, bounds) == expected(keys, count, codec.murmur2)
    for p in range(count):  # each partition's records keep their order
        group = order[bounds[p] : bounds[p + 1]]
        assert group == sorted(group)
        assert all((codec.murmur2(keys[i]) & 0x7FFFFFFF) % count == p for i in group)


def test_matches_javas_hashes(codec: ModuleType) -> None:
    keys = list(JAVA_HASHES)
    for count in (2, 5, 13):
        order, bounds = codec.partition_order(keys, count)
        for p in range(count):
            for i in order[bounds[p] : bounds[p + 1]]:
                assert (JAVA_HASHES[keys[i]] & 0x7FFFFFFF) % count == p


def test_given_partitions(codec: ModuleType) -> None:
    parts = [2, 0, 2, 1, 0, 2]
    order, bounds = codec.partition_order([b"k"] * 6, 3, parts)
    assert order == [1, 4, 3, 0, 2, 5] and bounds == [0, 2, 3, 6]
    with pytest.raises(ValueError, match="outside"):
        codec.partition_order([b"k"] * 2, 3, [0, 3])
    with pytest.raises(ValueError, match="outside"):
        codec.partition_order([b"k"] * 2, 3, [-1, 0])
    with pytest.raises(ValueError, match="partitions for"):
        codec.partition_order([b"k"] * 2, 3, [0])


def test_bad_keys(codec: ModuleType) -> None:
    with pytest.raises(ValueError, match="null"):
        codec.partition_order([b"a", None], 2)
    with pytest.raises(ValueError, match="null"):
        codec.partition_order(BinaryColumn.from_values([b"a", None]), 2)
    with pytest.raises(TypeError):
        codec.partition_order([b"a", "text"], 2)
    with pytest.raises(ValueError, match="at least 1"):
        codec.partition_order([b"a"], 0)
    assert codec.partition_order([], 3) == ([], [0, 0, 0, 0])


def test_take(codec: ModuleType) -> None:
    values: list[bytes | None] = [b"a", None, b"ccc", b"", b"eeeee"]
    order = [4, 1, 0, 3, 2, 1]
    assert codec.take(values, order) == [values[i] for i in order]
    assert codec.take(tuple(values), [0]) == [b"a"]
    col = codec.take(BinaryColumn.from_values(values), order)
    assert isinstance(col, BinaryColumn)
    assert list(col) == [values[i] for i in order]
    no_nulls = codec.take(BinaryColumn.from_values([b"x", b"yy"]), [1, 1, 0])
    assert list(no_nulls) == [b"yy", b"yy", b"x"] and no_nulls.validity is None
    assert list(codec.take(BinaryColumn.from_values([b"x"]), [])) == []
    for bad in ([5], [-1]):
        with pytest.raises(IndexError):
            codec.take(values, bad)
        with pytest.raises(IndexError):
            codec.take(BinaryColumn.from_values(values), bad)
