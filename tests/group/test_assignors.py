"""Partition assignors and the consumer protocol's wire formats (no broker needed)."""

from __future__ import annotations

import contextlib
import itertools
import random
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykaf._group import assignors as mod
from pykaf._group.assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    assignor_for,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from pykaf.errors import ConfigError, PykafError
from pykaf.protocol import MalformedMessageError, UnsupportedVersionError

Result = dict[str, dict[str, list[int]]]
TP = tuple[str, int]

# --------------------------------------------------------------------------- hand-built bytes
# The layouts, field by field, from ConsumerProtocolSubscription.json,
# ConsumerProtocolAssignment.json and StickyAssignorUserData.json (Kafka's specs).


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def string(v: str) -> bytes:
    b = v.encode()
    return i16(len(b)) + b


def nullable_string(v: str | None) -> bytes:
    return i16(-1) if v is None else string(v)


def nullable_bytes(v: bytes | None) -> bytes:
    return i32(-1) if v is None else i32(len(v)) + v


def array(items: Iterable[Any], enc: Callable[[Any], bytes]) -> bytes:
    items = list(items)
    return i32(len(items)) + b"".join(enc(x) for x in items)


def topic_partitions(d: Mapping[str, list[int]]) -> bytes:
    return array(sorted(d.items()), lambda kv: string(kv[0]) + array(kv[1], i32))


def subscription_bytes(
    version: int,
    topics: list[str],
    user_data: bytes | None,
    owned: Mapping[str, list[int]] | None = None,
    generation: int = -1,
    rack: str | None = None,
    *,
    header: int | None = None,
) -> bytes:
    out = i16(version if header is None else header)
    out += array(topics, string) + nullable_bytes(user_data)
    if version >= 1:
        out += topic_partitions(owned or {})
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += nullable_string(rack)
    return out


def assignment_bytes(version: int, assigned: Mapping[str, list[int]], user_data: bytes | None):
    return i16(version) + topic_partitions(assigned) + nullable_bytes(user_data)


def sticky_user_data(owned: Mapping[str, list[int]], generation: int | None) -> bytes:
    out = topic_partitions(owned)
    return out if generation is None else out + i32(generation)


OWNED = {"orders": [0, 3], "payments": [1]}


# --------------------------------------------------------------------------- subscription


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_encoding_matches_the_spec_layout(version: int) -> None:
    data = encode_subscription(
        ["payments", "orders"],
        user_data=b"\x01\x02",
        owned_partitions={"payments": [1], "orders": [3, 0]},
        generation=7,
        rack_id="rack-a",
        version=version,
    )
    assert data == subscription_bytes(
        version, ["payments", "orders"], b"\x01\x02", OWNED, 7, "rack-a"
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_decodes_hand_built_bytes(version: int) -> None:
    data = subscription_bytes(version, ["b", "a"], None, OWNED, 12, None if version < 3 else "r1")
    sub = decode_subscription("m-1", "inst-1", data)
    assert sub.member_id == "m-1"
    assert sub.group_instance_id == "inst-1"
    assert sub.topics == ["b", "a"]
    assert sub.user_data is None
    assert sub.owned_partitions == (OWNED if version >= 1 else {})
    assert sub.generation == (12 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips(version: int) -> None:
    data = encode_subscription(
        ["x", "y"],
        user_data=b"ud",
        owned_partitions=OWNED,
        generation=3,
        rack_id="r",
        version=version,
    )
    assert data[:2] == i16(version)
    sub = decode_subscription("m", None, data)
    assert sub == Subscription(
        member_id="m",
        group_instance_id=None,
        topics=["x", "y"],
        user_data=b"ud",
        owned_partitions=OWNED if version >= 1 else {},
        generation=3 if version >= 2 else -1,
        rack_id="r" if version >= 3 else None,
    )


@pytest.mark.parametrize(
    ("kwargs", "version"),
    [
        ({}, 0),
        ({"user_data": b"x"}, 0),
        ({"owned_partitions": {"t": [0]}}, 1),
        ({"owned_partitions": {"t": []}}, 0),
        ({"generation": 4}, 2),
        ({"owned_partitions": {"t": [0]}, "generation": 4}, 2),
        ({"rack_id": "r"}, 3),
    ],
)
def test_subscription_default_version_is_the_lowest_that_carries_the_fields(
    kwargs: dict[str, Any], version: int
) -> None:
    assert encode_subscription(["t"], **kwargs)[:2] == i16(version)


def test_subscription_null_user_data_is_written_empty() -> None:
    # As librdkafka does: old clients cannot read null bytes, and every assignor
    # treats null and empty alike.
    assert encode_subscription(["t"]) == i16(0) + array(["t"], string) + i32(0)
    assert decode_subscription("m", None, encode_subscription(["t"])).user_data == b""


@pytest.mark.parametrize("future", [4, 9, 0x7FFF])
def test_subscription_newer_versions_are_read_as_v3(future: int) -> None:
    body = subscription_bytes(3, ["t"], b"u", {"t": [2]}, 8, "rack", header=future)
    # A future version appends fields: here an int32 and a string.
    sub = decode_subscription("m", None, body + i32(99) + string("later"))
    assert (sub.topics, sub.user_data, sub.owned_partitions) == (["t"], b"u", {"t": [2]})
    assert (sub.generation, sub.rack_id) == (8, "rack")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_trailing_bytes_are_ignored(version: int) -> None:
    data = subscription_bytes(version, ["t"], b"", {"t": [1]}, 2, "r") + b"\x00\x01junk"
    assert decode_subscription("m", None, data).topics == ["t"]


def test_subscription_accepts_bytearray_and_memoryview() -> None:
    data = subscription_bytes(2, ["t"], b"u", {"t": [0]}, 1)
    expected = decode_subscription("m", None, data)
    assert decode_subscription("m", None, bytearray(data)) == expected
    assert decode_subscription("m", None, memoryview(data)) == expected


def test_subscription_repeated_owned_topic_is_merged() -> None:
    data = i16(1) + array(["t"], string) + i32(0)
    data += array([("t", [0]), ("t", [2])], lambda kv: string(kv[0]) + array(kv[1], i32))
    assert decode_subscription("m", None, data).owned_partitions == {"t": [0, 2]}


def test_subscription_rejects_bad_arguments() -> None:
    with pytest.raises(UnsupportedVersionError):
        encode_subscription(["t"], version=4)
    with pytest.raises(TypeError):
        encode_subscription("topic")
    with pytest.raises(PykafError):
        encode_subscription(["t"], generation=2**31)


# --------------------------------------------------------------------------- assignment


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_encoding_matches_the_spec_layout(version: int) -> None:
    data = encode_assignment({"payments": [1], "orders": [3, 0]}, b"ud", version=version)
    assert data == assignment_bytes(version, OWNED, b"ud")


def test_assignment_default_is_v0_with_empty_user_data() -> None:
    assert encode_assignment({"t": [1, 0], "empty": []}) == assignment_bytes(0, {"t": [0, 1]}, b"")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 17])
def test_assignment_decodes_hand_built_bytes(version: int) -> None:
    data = assignment_bytes(version, OWNED, None) + (b"more" if version > 3 else b"")
    assert decode_assignment(data) == OWNED


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trips(version: int) -> None:
    assert decode_assignment(encode_assignment(OWNED, version=version)) == OWNED
    assert decode_assignment(encode_assignment({}, version=version)) == {}


def test_empty_assignment_bytes_mean_nothing_assigned() -> None:
    assert decode_assignment(b"") == {}
    assert decode_assignment(memoryview(b"")) == {}


# --------------------------------------------------------------------------- bad bytes

BAD_SUBSCRIPTIONS = [
    b"\x00",  # no version
    i16(-1) + array([], string) + i32(0),  # negative version
    i16(0),  # no topics
    i16(0) + i32(3) + string("a"),  # fewer topics than announced
    i16(0) + i32(1) + i16(5) + b"ab",  # string shorter than its length
    i16(0) + i32(1) + i16(2) + b"\xff\xfe" + i32(0),  # not UTF-8
    i16(0) + array(["t"], string),  # no user data
    i16(0) + array(["t"], string) + i32(10) + b"abc",  # user data cut short
    i16(0) + i32(0x7FFFFFFF),  # absurd array length
    i16(1) + array(["t"], string) + i32(0),  # v1 without owned partitions
    i16(1) + array(["t"], string) + i32(0) + i32(1) + string("t") + i32(2) + i32(0),
    i16(2) + array(["t"], string) + i32(0) + i32(0) + b"\x00\x00",  # generation cut short
    i16(3) + array(["t"], string) + i32(0) + i32(0) + i32(1) + i16(4) + b"r",  # rack cut
]

BAD_ASSIGNMENTS = [
    b"\x00",
    i16(-3) + array([], string) + i32(0),
    i16(0),
    i16(0) + i32(1) + string("t"),
    i16(0) + i32(1) + string("t") + i32(3) + i32(0),
    i16(0) + array([], string),  # no user data
    i16(0) + i32(-7),
]


@pytest.mark.parametrize("data", BAD_SUBSCRIPTIONS)
def test_bad_subscription_bytes_raise_a_pykaf_error(data: bytes) -> None:
    with pytest.raises(MalformedMessageError) as info:
        decode_subscription("m", None, data)
    assert isinstance(info.value, PykafError)


@pytest.mark.parametrize("data", BAD_ASSIGNMENTS)
def test_bad_assignment_bytes_raise_a_pykaf_error(data: bytes) -> None:
    with pytest.raises(MalformedMessageError):
        decode_assignment(data)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_is_rejected(version: int) -> None:
    sub = encode_subscription(
        ["t", "u"],
        user_data=b"abc",
        owned_partitions={"t": [1, 2]},
        generation=5,
        rack_id="r",
        version=version,
    )
    asg = encode_assignment({"t": [1, 2], "u": [0]}, b"abc", version=version)
    for cut in range(1, len(sub)):
        with pytest.raises(MalformedMessageError):
            decode_subscription("m", None, sub[:cut])
    for cut in range(1, len(asg)):
        with pytest.raises(MalformedMessageError):
            decode_assignment(asg[:cut])


def _decodes_or_raises_typed(fn: Callable[[bytes], object], data: bytes) -> None:
    with contextlib.suppress(MalformedMessageError):
        fn(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_decode_or_raise_malformed(data: bytes) -> None:
    _decodes_or_raises_typed(lambda d: decode_subscription("m", None, d), data)
    _decodes_or_raises_typed(decode_assignment, data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3), st.data())
def test_corrupted_encodings_decode_or_raise_malformed(version: int, data: st.DataObject) -> None:
    valid = bytearray(
        encode_subscription(
            ["topic-a", "b"],
            user_data=b"\x00\x01",
            owned_partitions={"topic-a": [0, 5]},
            generation=9,
            rack_id="rack",
            version=version,
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(valid) - 1))
        valid[i] = data.draw(st.integers(0, 255))
    _decodes_or_raises_typed(lambda d: decode_subscription("m", None, d), bytes(valid))
    _decodes_or_raises_typed(decode_assignment, bytes(valid))


# --------------------------------------------------------------------------- kafka-python's codecs


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_agree_with_kafka_python(version: int) -> None:
    kp = pytest.importorskip("kafka.protocol.consumer.metadata")
    fields: dict[str, Any] = {"topics": ["a", "b"], "user_data": b"x"}
    if version >= 1:
        fields["owned_partitions"] = [("a", [0, 2]), ("b", [1])]
    if version >= 2:
        fields["generation_id"] = 6
    if version >= 3:
        fields["rack_id"] = "r"
    theirs = kp.ConsumerProtocolSubscription(version=version, **fields)
    their_bytes = i16(version) + theirs.encode(version=version, header=False)
    ours = encode_subscription(
        ["a", "b"],
        user_data=b"x",
        owned_partitions={"a": [0, 2], "b": [1]},
        generation=6,
        rack_id="r",
        version=version,
    )
    assert ours == their_bytes
    back = kp.ConsumerProtocolSubscription.decode(ours[2:], version=version, header=False)
    assert list(back.topics) == ["a", "b"]


def test_assignment_bytes_agree_with_kafka_python() -> None:
    kp = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs = kp.ConsumerProtocolAssignment(
        version=0, assigned_partitions=[("a", [0, 2]), ("b", [1])], user_data=b""
    )
    assert encode_assignment({"b": [1], "a": [2, 0]}) == i16(0) + theirs.encode(
        version=0, header=False
    )


def test_sticky_user_data_agrees_with_kafka_python() -> None:
    kp = pytest.importorskip("kafka.coordinator.assignors.sticky.user_data")
    theirs = kp.StickyAssignorUserData(
        previous_assignment=[("a", [0, 2]), ("b", [1])], generation=4
    )
    sub = decode_subscription(
        "m", None, StickyAssignor().metadata(["a"], {"b": [1], "a": [2, 0]}, 4)
    )
    assert sub.user_data == theirs.encode(version=1, header=False)


# --------------------------------------------------------------------------- metadata()


def test_eager_range_and_roundrobin_write_v0_topics_only() -> None:
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        data = assignor.metadata(["b", "a", "b"], {"a": [0]}, 5)
        assert data == subscription_bytes(0, ["a", "b"], b"")


def test_sticky_metadata_carries_java_user_data_and_owned_partitions() -> None:
    data = StickyAssignor().metadata(["t", "u"], {"u": [1], "t": [2, 0]}, 7)
    owned = {"t": [0, 2], "u": [1]}
    user_data = sticky_user_data(owned, 7)
    assert data == subscription_bytes(2, ["t", "u"], user_data, owned, 7)


def test_sticky_metadata_without_history_has_empty_user_data() -> None:
    assert StickyAssignor().metadata(["t"], {}, -1) == subscription_bytes(2, ["t"], b"", {}, -1)


def test_cooperative_metadata_carries_the_generation_as_int32() -> None:
    data = CooperativeStickyAssignor().metadata(["t"], {"t": [1]}, 3)
    assert data == subscription_bytes(2, ["t"], i32(3), {"t": [1]}, 3)
    assert CooperativeStickyAssignor().metadata(["t"], {}, -1) == subscription_bytes(
        2, ["t"], i32(-1), {}, -1
    )


# --------------------------------------------------------------------------- registry


def test_names_and_protocols() -> None:
    assert {n: (c.name, c.rebalance_protocol) for n, c in ASSIGNORS.items()} == {
        "range": ("range", "eager"),
        "roundrobin": ("roundrobin", "eager"),
        "sticky": ("sticky", "eager"),
        "cooperative-sticky": ("cooperative-sticky", "cooperative"),
    }


def test_assignor_for() -> None:
    for name, cls in ASSIGNORS.items():
        assert type(assignor_for(name)) is cls
    mine = StickyAssignor()
    assert assignor_for(mine) is mine
    with pytest.raises(ConfigError, match="known"):
        assignor_for("Range")
    with pytest.raises(ConfigError):
        assignor_for(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_knows_the_same_names(name: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    assert name in ASSIGNORS
    conf = {"group.id": "g", "partition.assignment.strategy": name, "log_level": 0}
    ck.Consumer(conf).close()
    with pytest.raises(ck.KafkaException):
        ck.Consumer({**conf, "partition.assignment.strategy": name + "x"})


# --------------------------------------------------------------------------- range, roundrobin


def sub(mid: str, topics: Iterable[str], gid: str | None = None, **kw: Any) -> Subscription:
    return Subscription(member_id=mid, group_instance_id=gid, topics=list(topics), **kw)


def group(*subs: Subscription) -> dict[str, Subscription]:
    return {s.member_id: s for s in subs}


def test_range_java_example() -> None:
    members = group(sub("C0", ["t0", "t1"]), sub("C1", ["t0", "t1"]))
    assert RangeAssignor().assign(members, {"t0": 3, "t1": 3}) == {
        "C0": {"t0": [0, 1], "t1": [0, 1]},
        "C1": {"t0": [2], "t1": [2]},
    }


def test_roundrobin_java_example_with_different_subscriptions() -> None:
    members = group(sub("C0", ["t0"]), sub("C1", ["t0", "t1"]), sub("C2", ["t0", "t1", "t2"]))
    assert RoundRobinAssignor().assign(members, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


def test_static_members_sort_first_by_instance_id() -> None:
    members = group(sub("a", ["t"]), sub("z", ["t"], gid="i-2"), sub("y", ["t"], gid="i-1"))
    assert RangeAssignor().assign(members, {"t": 3}) == {
        "y": {"t": [0]},
        "z": {"t": [1]},
        "a": {"t": [2]},
    }


def test_every_member_gets_an_entry() -> None:
    members = group(sub("a", ["t"]), sub("b", ["t"]), sub("c", ["nope"]))
    for name in ASSIGNORS:
        result = assignor_for(name).assign(members, {"t": 1})
        assert set(result) == {"a", "b", "c"}
        assert result["c"] == {}
        assert sum(len(ps) for r in result.values() for ps in r.values()) <= 1


def random_membership(
    rng: random.Random, same_topics: bool
) -> tuple[dict[str, Subscription], dict[str, int]]:
    topics = [f"topic-{j}" for j in range(rng.randint(1, 5))]
    counts = {t: rng.randint(0, 12) for t in topics}
    existing = {t: n for t, n in counts.items() if rng.random() < 0.9}
    everyone = [t for t in topics if rng.random() < 0.8] or topics[:1]
    members = {}
    for _ in range(rng.randint(1, 8)):
        mid = f"consumer-{rng.randrange(10**6):06d}"
        gid = f"instance-{rng.randrange(1000):03d}" if rng.random() < 0.3 else None
        chosen = everyone if same_topics else rng.sample(topics, rng.randint(1, len(topics)))
        members[mid] = sub(mid, chosen, gid)
    return members, existing


def kafka_python_assign(
    module: Any, cls_name: str, members: Mapping[str, Subscription], counts: Mapping[str, int]
) -> Result:
    class Cluster:
        def partitions_for_topic(self, topic: str) -> set[int] | None:
            n = counts.get(topic)
            return None if n is None else set(range(n))

    # kafka-python groups static and dynamic members with itertools.groupby,
    # which needs them adjacent: hand it the static ones first.
    ordered = sorted(members.values(), key=lambda s: s.group_instance_id is None)
    kp_members = [
        SimpleNamespace(
            member_id=s.member_id,
            group_instance_id=s.group_instance_id,
            metadata=SimpleNamespace(topics=list(s.topics)),
        )
        for s in ordered
    ]
    out = getattr(module, cls_name).assign(Cluster(), kp_members)
    return {
        mid: {t: sorted(ps) for t, ps in sorted(a.assigned_partitions) if ps}
        for mid, a in out.items()
    }


@pytest.mark.parametrize("seed", range(300))
def test_range_equals_kafka_python(seed: int) -> None:
    module = pytest.importorskip("kafka.coordinator.assignors.range")
    rng = random.Random(seed)
    members, counts = random_membership(rng, same_topics=seed % 3 == 0)
    partitions = {t: n for t, n in counts.items() if any(t in s.topics for s in members.values())}
    expected = kafka_python_assign(module, "RangePartitionAssignor", members, counts)
    assert RangeAssignor().assign(members, partitions) == expected


@pytest.mark.parametrize("seed", range(300))
def test_roundrobin_equals_kafka_python(seed: int) -> None:
    # kafka-python's round robin fails when it must skip a member (it rebinds
    # member_id to a tuple), so it is compared on equal subscriptions; the
    # Java example above covers skipping.
    module = pytest.importorskip("kafka.coordinator.assignors.roundrobin")
    rng = random.Random(seed)
    members, counts = random_membership(rng, same_topics=True)
    partitions = {t: n for t, n in counts.items() if any(t in s.topics for s in members.values())}
    expected = kafka_python_assign(module, "RoundRobinPartitionAssignor", members, counts)
    assert RoundRobinAssignor().assign(members, partitions) == expected


# --------------------------------------------------------------------------- sticky: helpers


def flatten(result: Mapping[str, Mapping[str, list[int]]]) -> list[tuple[str, TP]]:
    return [(mid, (t, p)) for mid, topics in result.items() for t, ps in topics.items() for p in ps]


def loads(result: Mapping[str, Mapping[str, list[int]]]) -> dict[str, int]:
    return {mid: sum(len(ps) for ps in topics.values()) for mid, topics in result.items()}


def all_partitions(subscribed: Mapping[str, set[str]], counts: Mapping[str, int]) -> set[TP]:
    topics = set().union(*subscribed.values()) if subscribed else set()
    return {(t, p) for t in topics if t in counts for p in range(counts[t])}


def check_valid(
    result: Result, subscribed: Mapping[str, set[str]], counts: Mapping[str, int]
) -> None:
    assert set(result) == set(subscribed)
    seen: set[TP] = set()
    for mid, tp in flatten(result):
        assert tp[0] in subscribed[mid], (mid, tp)
        assert 0 <= tp[1] < counts[tp[0]]
        assert tp not in seen, f"{tp} assigned twice"
        seen.add(tp)
    for topics in result.values():
        for ps in topics.values():
            assert ps == sorted(ps) and ps


def improvable(result: Result, subscribed: Mapping[str, set[str]]) -> tuple[str, str] | None:
    """A member that could pass a partition, via others, to one with two fewer."""
    load = loads(result)
    holds = {mid: set(topics) for mid, topics in result.items()}
    for start in result:
        reached, frontier = {start}, [start]
        while frontier:
            a = frontier.pop()
            for b in result:
                if b not in reached and holds[a] & subscribed[b]:
                    reached.add(b)
                    frontier.append(b)
        for c in reached:
            if load[c] <= load[start] - 2:
                return start, c
    return None


def check_balanced(result: Result, subscribed: Mapping[str, set[str]]) -> None:
    active = {m for m, s in subscribed.items() if s}
    if len({frozenset(subscribed[m]) for m in active}) == 1:
        counts = [loads(result)[m] for m in active]
        assert max(counts) - min(counts) <= 1, loads(result)
    assert improvable(result, subscribed) is None


def moved(result: Result, owners: Mapping[TP, str]) -> int:
    where = {tp: mid for mid, tp in flatten(result)}
    return sum(1 for tp, mid in owners.items() if where.get(tp) != mid)


def fewest_moves_equal(
    subscribed: Mapping[str, set[str]], counts: Mapping[str, int], owners: Mapping[TP, str]
) -> int:
    """The fewest moves to balance when every member subscribes to the same topics."""
    n = len(all_partitions(subscribed, counts))
    quota, extra = divmod(n, len(subscribed))
    kept = [sum(1 for m in owners.values() if m == mid) for mid in subscribed]
    over = sum(max(0, k - quota) for k in kept)
    return over - min(extra, sum(1 for k in kept if k > quota))


def cost(result: Result, owners: Mapping[TP, str]) -> tuple[int, int]:
    return sum(v * v for v in loads(result).values()), moved(result, owners)


def brute_force(
    subscribed: Mapping[str, set[str]], counts: Mapping[str, int], owners: Mapping[TP, str]
) -> tuple[int, int]:
    """The least (sum of squared counts, moves) over every possible assignment."""
    parts = sorted(all_partitions(subscribed, counts))
    choices = [[m for m in subscribed if tp[0] in subscribed[m]] for tp in parts]
    members = list(subscribed)
    best = None
    for pick in itertools.product(*choices):
        load = dict.fromkeys(members, 0)
        moves = 0
        for tp, mid in zip(parts, pick, strict=True):
            load[mid] += 1
            if tp in owners and owners[tp] != mid:
                moves += 1
        key = (sum(v * v for v in load.values()), moves)
        if best is None or key < best:
            best = key
    assert best is not None
    return best


# --------------------------------------------------------------------------- sticky: simulation


@dataclass
class Member:
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)
    generation: int = -1


@dataclass
class Group:
    assignor: Assignor
    rng: random.Random
    equal: bool
    counts: dict[str, int] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    generation: int = 0
    serial: int = 0
    rounds: int = 0

    def pick_topics(self) -> list[str]:
        names = sorted(self.counts)
        if self.equal:
            return [*names, "not-created-yet"]
        return self.rng.sample(names, self.rng.randint(1, len(names)))

    def join(self) -> None:
        self.serial += 1
        self.members[f"m{self.rng.randrange(1000):03d}-{self.serial}"] = Member(self.pick_topics())

    def event(self) -> None:
        roll = self.rng.random()
        if roll < 0.3 or not self.members:
            for _ in range(self.rng.randint(1, 3)):
                self.join()
        elif roll < 0.5 and len(self.members) > 1:
            for mid in self.rng.sample(
                sorted(self.members), self.rng.randint(1, len(self.members) - 1)
            ):
                del self.members[mid]
        elif roll < 0.65:
            topic = self.rng.choice(sorted(self.counts))
            self.counts[topic] += self.rng.randint(1, 6)
        elif roll < 0.75:
            self.counts[f"t{len(self.counts)}-{self.serial}"] = self.rng.randint(1, 8)
            self.resubscribe(1.0 if self.equal else 0.4)
        elif roll < 0.82 and len(self.counts) > 1:
            del self.counts[self.rng.choice(sorted(self.counts))]
            self.resubscribe(1.0 if self.equal else 0.0)
        elif roll < 0.9 and not self.equal:
            self.resubscribe(0.3)
        # else: a rebalance with nothing changed

    def resubscribe(self, share: float) -> None:
        for member in self.members.values():
            if self.equal or self.rng.random() < share:
                member.topics = self.pick_topics()

    def subscribed(self) -> dict[str, set[str]]:
        return {
            mid: {t for t in m.topics if self.counts.get(t, 0) > 0}
            for mid, m in self.members.items()
        }

    def owners(self) -> dict[TP, str]:
        """The partitions members own and still may keep (no zombies here)."""
        out = {}
        for mid, m in self.members.items():
            for t, ps in m.owned.items():
                for p in ps:
                    if t in m.topics and p < self.counts.get(t, 0):
                        out[(t, p)] = mid
        return out

    def rebalance(self) -> Result:
        """One rebalance through the wire formats: metadata -> assign -> assignment."""
        subs = {
            mid: decode_subscription(
                mid, None, self.assignor.metadata(m.topics, m.owned, m.generation)
            )
            for mid, m in self.members.items()
        }
        wanted = {t for m in self.members.values() for t in m.topics}
        partitions = {t: n for t, n in self.counts.items() if t in wanted}
        result = self.assignor.assign(subs, partitions)
        self.generation += 1
        self.rounds += 1
        for mid, m in self.members.items():
            m.owned = decode_assignment(encode_assignment(result[mid]))
            m.generation = self.generation
        return result


def run_sticky_round(g: Group) -> None:
    subscribed = g.subscribed()
    owners = g.owners()
    claims = {(t, p): mid for mid, m in g.members.items() for t, ps in m.owned.items() for p in ps}
    everything = all_partitions(subscribed, g.counts)
    result = g.rebalance()
    check_valid(result, subscribed, g.counts)
    assigned = {tp for _mid, tp in flatten(result)}
    if g.assignor.rebalance_protocol == "eager":
        assert assigned == everything
        check_balanced(result, subscribed)
        if g.equal:
            assert moved(result, owners) == fewest_moves_equal(subscribed, g.counts, owners)
        return
    # Cooperative: whatever is withheld is being revoked from a member that claims it.
    withheld = everything - assigned
    for tp in withheld:
        assert tp in claims, f"{tp} withheld but nobody owns it"
        assert tp not in result[claims[tp]].get(tp[0], [])
    if g.equal:
        # Moved partitions are exactly the withheld ones that had a rightful owner.
        assert len(withheld & owners.keys()) == fewest_moves_equal(subscribed, g.counts, owners)
    before = {mid: set(flatten({mid: r})) for mid, r in result.items()}
    # The follow-up rebalance (the revoking members rejoin): nothing moves,
    # everything is assigned, the result is balanced.
    follow_up = g.rebalance()
    check_valid(follow_up, subscribed, g.counts)
    assert {tp for _mid, tp in flatten(follow_up)} == everything
    check_balanced(follow_up, subscribed)
    for mid, had in before.items():
        assert had <= set(flatten({mid: follow_up[mid]})), f"{mid} lost partitions"


@pytest.mark.parametrize("equal", [True, False], ids=["same-topics", "mixed-topics"])
@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@pytest.mark.parametrize("seed", range(40))
def test_sticky_rebalance_sequences(kind: str, equal: bool, seed: int) -> None:
    rng = random.Random(seed * 7919 + equal)
    g = Group(assignor_for(kind), rng, equal)
    g.counts = {f"t{j}": rng.randint(1, 10) for j in range(rng.randint(1, 3))}
    for _ in range(rng.randint(1, 4)):
        g.join()
    for _ in range(12):
        run_sticky_round(g)
        g.event()


@pytest.mark.parametrize("seed", range(120))
def test_sticky_is_optimal_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    topics = {f"t{j}": rng.randint(1, 3) for j in range(rng.randint(1, 3))}
    while sum(topics.values()) > 7:
        topics[rng.choice(sorted(topics))] -= 1
    topics = {t: n for t, n in topics.items() if n}
    subscribed = {
        f"m{i}": set(rng.sample(sorted(topics), rng.randint(1, len(topics))))
        for i in range(rng.randint(1, 4))
    }
    everything = sorted(all_partitions(subscribed, topics))
    owners = {}
    for tp in everything:
        holders = [m for m in subscribed if tp[0] in subscribed[m]]
        if rng.random() < 0.7:
            owners[tp] = rng.choice(holders)
    best = brute_force(subscribed, topics, owners)
    for shortcut in (True, False):
        result = mod._sticky_assign(subscribed, topics, owners, shortcut=shortcut)
        check_valid(result, subscribed, topics)
        assert {tp for _m, tp in flatten(result)} == set(everything)
        assert cost(result, owners) == best


HARD_CASES = [
    # Found by search: the first balanced result moves one partition too many
    # unless the member holding the extra partition is then swapped.
    (
        {"t0": 3, "t1": 3},
        {"m0": {"t1"}, "m1": {"t1"}, "m2": {"t0", "t1"}, "m3": {"t0", "t1"}},
        {"m2": ["t0-0", "t0-1", "t0-2", "t1-0", "t1-1"], "m3": ["t1-2"]},
    ),
    (
        {"t0": 3, "t1": 3},
        {"m0": {"t0", "t1"}, "m1": {"t0", "t1"}, "m2": {"t0"}, "m3": {"t0"}},
        {"m0": ["t0-0", "t0-2", "t1-0", "t1-1", "t1-2"], "m1": ["t0-1"]},
    ),
    (
        {"t0": 2, "t1": 2, "t2": 3},
        {"m0": {"t2"}, "m1": {"t0", "t1"}, "m2": {"t1", "t2"}},
        {"m1": ["t0-0", "t0-1", "t1-0", "t1-1"], "m2": ["t2-0", "t2-1", "t2-2"]},
    ),
]


@pytest.mark.parametrize("case", range(len(HARD_CASES)))
def test_sticky_is_optimal_on_hard_cases(case: int) -> None:
    topics, subscribed, held = HARD_CASES[case]
    owners = {}
    for mid, names in held.items():
        for name in names:
            t, p = name.split("-")
            owners[(t, int(p))] = mid
    result = mod._sticky_assign(subscribed, topics, owners)
    check_valid(result, subscribed, topics)
    assert cost(result, owners) == brute_force(subscribed, topics, owners)


@pytest.mark.parametrize("seed", range(60))
def test_general_route_agrees_with_the_equal_subscriptions_route(seed: int) -> None:
    rng = random.Random(seed)
    topics = {f"t{j}": rng.randint(1, 20) for j in range(rng.randint(1, 4))}
    subscribed = {f"m{i:02d}": set(topics) for i in range(rng.randint(1, 12))}
    members = sorted(subscribed)
    owners = {
        tp: rng.choice(members) for tp in all_partitions(subscribed, topics) if rng.random() < 0.8
    }
    fast = mod._sticky_assign(subscribed, topics, owners)
    slow = mod._sticky_assign(subscribed, topics, owners, shortcut=False)
    for result in (fast, slow):
        check_valid(result, subscribed, topics)
        check_balanced(result, subscribed)
        assert moved(result, owners) == fewest_moves_equal(subscribed, topics, owners)


# --------------------------------------------------------------------------- sticky: specifics


def test_sticky_keeps_everything_when_nothing_changes() -> None:
    owned = {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4]}, "c": {"t": [5, 6]}}
    members = group(*(sub(m, ["t"], owned_partitions=o, generation=3) for m, o in owned.items()))
    assert CooperativeStickyAssignor().assign(members, {"t": 7}) == owned


def test_sticky_member_joining_takes_only_what_balance_needs() -> None:
    members = group(
        sub("a", ["t"], owned_partitions={"t": [0, 1, 2]}, generation=3),
        sub("b", ["t"], owned_partitions={"t": [3, 4, 5]}, generation=3),
        sub("c", ["t"]),
    )
    result = CooperativeStickyAssignor().assign(members, {"t": 6})
    # a and b each give up one partition; withheld this round, c gets nothing yet.
    assert result == {"a": {"t": [0, 1]}, "b": {"t": [3, 4]}, "c": {}}
    eager = StickyAssignor().assign(members, {"t": 6})
    assert eager == {"a": {"t": [0, 1]}, "b": {"t": [3, 4]}, "c": {"t": [2, 5]}}


def test_sticky_takes_away_unsubscribed_topics_and_deleted_partitions() -> None:
    members = group(
        sub("a", ["t"], owned_partitions={"t": [0, 1, 7], "gone": [0], "u": [0]}, generation=2),
        sub("b", ["t", "u"], owned_partitions={"t": [2, 3]}, generation=2),
    )
    result = StickyAssignor().assign(members, {"t": 4, "u": 1})
    assert result == {"a": {"t": [0, 1]}, "b": {"t": [2, 3], "u": [0]}}
    coop = CooperativeStickyAssignor().assign(members, {"t": 4, "u": 1})
    # u-0 moves from a (which dropped u) to b: withheld until a revokes it.
    assert coop == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}


@pytest.mark.parametrize("newer", ["a", "b"])
def test_zombie_claim_loses_to_the_higher_generation(newer: str) -> None:
    gens = {"a": 5 if newer == "a" else 4, "b": 5 if newer == "b" else 4}
    members = group(
        sub("a", ["t"], owned_partitions={"t": [0, 1]}, generation=gens["a"]),
        sub("b", ["t"], owned_partitions={"t": [1, 2]}, generation=gens["b"]),
    )
    expected = (
        {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
        if newer == "a"
        else {"a": {"t": [0, 3]}, "b": {"t": [1, 2]}}
    )
    assert StickyAssignor().assign(members, {"t": 4}) == expected
    # The rightful owner keeps it: nothing to withhold.
    assert CooperativeStickyAssignor().assign(members, {"t": 4}) == expected


def test_same_generation_double_claim_is_void_and_withheld() -> None:
    members = group(
        sub("a", ["t"], owned_partitions={"t": [0, 1]}, generation=5),
        sub("b", ["t"], owned_partitions={"t": [1, 2]}, generation=5),
    )
    eager = StickyAssignor().assign(members, {"t": 4})
    check_valid(eager, {"a": {"t"}, "b": {"t"}}, {"t": 4})
    assert 0 in eager["a"]["t"] and 2 in eager["b"]["t"]
    coop = CooperativeStickyAssignor().assign(members, {"t": 4})
    assert all(1 not in topics.get("t", []) for topics in coop.values())
    assert 0 in coop["a"]["t"] and 2 in coop["b"]["t"]


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@pytest.mark.parametrize("seed", range(30))
def test_stale_claims_change_nothing(kind: str, seed: int) -> None:
    """Claims of an older generation on partitions a newer member owns are ignored."""
    rng = random.Random(seed)
    counts = {"t": rng.randint(4, 20), "u": rng.randint(1, 10)}
    mids = [f"m{i}" for i in range(rng.randint(2, 6))]
    base = mod._sticky_assign({m: {"t", "u"} for m in mids}, counts, {})
    zombie, leaver = rng.sample(mids, 2)
    # Stale claims on partitions that members of the newer generation own
    # (not the leaver's: with it gone, a stale claim would be the only one).
    others = sorted(
        (t, p) for m in mids if m not in (zombie, leaver) for t, ps in base[m].items() for p in ps
    )
    if not others:
        return
    stolen = rng.sample(others, rng.randint(1, len(others)))

    def members(with_stale: bool) -> dict[str, Subscription]:
        out = {}
        for m in mids:
            owned = {t: list(ps) for t, ps in base[m].items()}
            generation = 8
            if with_stale and m == zombie:
                generation = 6
                for t, p in stolen:
                    owned.setdefault(t, []).append(p)
            out[m] = sub(m, ["t", "u"], owned_partitions=owned, generation=generation)
        return out

    # The leaver is gone, so that the rebalance has work to do.
    clean, stale = members(False), members(True)
    del clean[leaver], stale[leaver]
    assignor = assignor_for(kind)
    assert assignor.assign(stale, counts) == assignor.assign(clean, counts)


def test_sticky_reads_java_user_data_v1_and_v0() -> None:
    def member(mid: str, user_data: bytes) -> Subscription:
        return decode_subscription(mid, None, subscription_bytes(0, ["t"], user_data))

    # a's claim on partition 1 (generation 5) beats b's (generation 4).
    v1 = group(
        member("a", sticky_user_data({"t": [0, 1, 2]}, 5)),
        member("b", sticky_user_data({"t": [1, 3]}, 4)),
    )
    assert StickyAssignor().assign(v1, {"t": 4}) == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
    v0 = group(member("a", sticky_user_data({"t": [2, 3]}, None)), member("b", b""))
    assert StickyAssignor().assign(v0, {"t": 4}) == {"a": {"t": [2, 3]}, "b": {"t": [0, 1]}}


def test_sticky_ignores_unreadable_user_data() -> None:
    members = group(
        decode_subscription("a", None, subscription_bytes(0, ["t"], b"\x00\x00\x00\x05junk")),
        decode_subscription(
            "b", None, subscription_bytes(0, ["t"], sticky_user_data({"t": [0, 1]}, 1))
        ),
    )
    assert StickyAssignor().assign(members, {"t": 4}) == {"a": {"t": [2, 3]}, "b": {"t": [0, 1]}}


def test_sticky_falls_back_to_owned_partitions_without_user_data() -> None:
    members = group(
        sub("a", ["t"], owned_partitions={"t": [2, 3]}, generation=1, user_data=b""),
        sub("b", ["t"]),
    )
    assert StickyAssignor().assign(members, {"t": 4}) == {"a": {"t": [2, 3]}, "b": {"t": [0, 1]}}


def test_cooperative_reads_the_generation_from_old_subscriptions() -> None:
    # v1 subscriptions have no generation field: Java put it in the user data
    # as an int32, librdkafka as sticky user data.
    java_old = decode_subscription("a", None, subscription_bytes(1, ["t"], i32(9), {"t": [0, 1]}))
    rdkafka_old = decode_subscription(
        "b", None, subscription_bytes(1, ["t"], sticky_user_data({"t": [1]}, 8), {"t": [1]})
    )
    coop = CooperativeStickyAssignor()
    assert coop._previous(java_old) == ({"t": [0, 1]}, 9)
    assert coop._previous(rdkafka_old) == ({"t": [1]}, 8)
    # a's generation 9 beats b's 8 for partition 1.
    assert coop.assign(group(java_old, rdkafka_old), {"t": 4}) == {
        "a": {"t": [0, 1]},
        "b": {"t": [2, 3]},
    }


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_sticky_is_deterministic(kind: str) -> None:
    rng = random.Random(5)
    counts = {f"t{j}": rng.randint(1, 15) for j in range(4)}
    subs = []
    for i in range(9):
        topics = rng.sample(sorted(counts), rng.randint(1, 4))
        owned = {t: [p for p in range(counts[t]) if rng.random() < 0.2] for t in topics}
        subs.append(sub(f"m{i}", topics, owned_partitions=owned, generation=rng.randint(1, 3)))
    results = set()
    for _ in range(5):
        rng.shuffle(subs)
        result = assignor_for(kind).assign(group(*subs), counts)
        results.add(repr(sorted((m, sorted(t.items())) for m, t in result.items())))
    assert len(results) == 1


def test_sticky_handles_large_groups_quickly() -> None:
    counts = {f"t{j}": 100 for j in range(20)}
    rng = random.Random(1)
    members = group(*(sub(f"m{i:03d}", rng.sample(sorted(counts), 12)) for i in range(200)))
    first = StickyAssignor().assign(members, counts)
    members = group(
        *(sub(m, s.topics, owned_partitions=first[m], generation=1) for m, s in members.items()),
        sub("new", sorted(counts)),
    )
    result = StickyAssignor().assign(members, counts)
    subscribed = {m: set(s.topics) for m, s in members.items()}
    check_valid(result, subscribed, counts)
    assert improvable(result, subscribed) is None


def test_sticky_with_no_members_or_topics() -> None:
    assert StickyAssignor().assign({}, {}) == {}
    assert CooperativeStickyAssignor().assign(group(sub("a", [])), {}) == {"a": {}}
