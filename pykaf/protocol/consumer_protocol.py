"""Kafka's consumer-protocol formats: subscriptions, assignments, topic -> partitions.

What a member sends in JoinGroup for each assignor it offers
(``ConsumerProtocolSubscription``: its topics, the assignor's user data and,
from v1, the partitions it owns) and what the group leader sends each member
in SyncGroup, which DescribeGroups shows too (``ConsumerProtocolAssignment``).
Both are an int16 version followed by the struct. Kafka only ever appends
fields, so a reader treats a newer version as the newest it knows and ignores
what follows: :func:`decode_subscription` and :func:`decode_assignment` accept
v0-v3 and any trailing bytes. The groups (which write and read both) and the
admin client (which reads assignments from DescribeGroups) use this module, so
neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pykaf.protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

__all__ = [
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "merge_partitions",
    "partition_lists",
    "with_rack",
]


def partition_lists(owned: Mapping[str, Sequence[int]]) -> list[tuple[str, list[int]]]:
    """``owned`` sorted by topic, each topic's partitions sorted and unique."""
    return [(t, sorted({int(p) for p in ps})) for t, ps in sorted(owned.items()) if len(ps)]


def merge_partitions(pairs: Iterable[tuple[str, list[int]]]) -> dict[str, list[int]]:
    """Topic -> partitions from (topic, partitions) pairs; a repeated topic is merged."""
    out: dict[str, list[int]] = {}
    for topic, partitions in pairs:
        out.setdefault(topic, []).extend(partitions)
    return out


def encode_assignment(
    assignment: Mapping[str, Sequence[int]], user_data: bytes | None = None, *, version: int = 0
) -> bytes:
    """A member's assignment (its SyncGroup bytes) in Kafka's consumer format.

    Topics and partitions are written sorted; topics without partitions are
    left out. ``user_data`` None is written as empty bytes (as a
    subscription's is). All versions 0-3 have the same layout; v0, the
    default, is the one every client reads.

    Raises:
        UnsupportedVersionError: ``version`` is not 0-3.
        EncodeError: a value does not fit its wire type.
    """
    tp_cls = ConsumerProtocolAssignment.TopicPartition
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[
            tp_cls(topic=t, partitions=ps) for t, ps in partition_lists(assignment)
        ],
        user_data=b"" if user_data is None else bytes(user_data),
    )
    return msg.encode_versioned(version)


def decode_assignment(data: bytes | bytearray | memoryview) -> dict[str, list[int]]:
    """Read a member's assignment: topic -> partitions (user data is dropped).

    Empty bytes mean no partitions: the coordinator sends them to a member the
    leader gave nothing to. Versions past 3 and trailing bytes are accepted as a
    subscription's reader does.

    Raises:
        MalformedMessageError: the bytes are not an assignment.
    """
    if len(data) == 0:
        return {}
    msg, _version = ConsumerProtocolAssignment.decode_versioned(data)
    return merge_partitions((tp.topic, list(tp.partitions)) for tp in msg.assigned_partitions)


@dataclass(frozen=True)
class Subscription:
    """One member's subscription, as the group leader sees it.

    Attributes:
        member_id: the member id the coordinator gave the member.
        group_instance_id: its static membership id (None for a dynamic member).
        topics: the topics it subscribes to, as it sent them.
        user_data: the assignor's own data (None if the member sent null).
        owned_partitions: the partitions it owns, by topic (the v1+ field; the
            sticky assignor reads its previous assignment from ``user_data``).
        generation: the generation its ``owned_partitions`` belong to (the v2+
            field), -1 when unknown.
        rack_id: the member's rack (the v3+ field), None when not set.
    """

    member_id: str
    group_instance_id: str | None
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation: int = -1
    rack_id: str | None = None


def encode_subscription(
    topics: Iterable[str],
    *,
    user_data: bytes | None = None,
    owned_partitions: Mapping[str, Sequence[int]] | None = None,
    generation: int = -1,
    rack_id: str | None = None,
    version: int | None = None,
) -> bytes:
    """A member's subscription (JoinGroup protocol metadata) in Kafka's consumer format.

    Args:
        topics: the subscribed topics, written in this order.
        user_data: the assignor's data. None is written as empty bytes, as
            librdkafka does (Kafka 0.9 clients cannot read null; every
            assignor treats the two alike).
        owned_partitions: topic -> partitions the member owns (v1+), written
            sorted.
        generation: the generation those belong to (v2+), -1 when unknown.
        rack_id: the member's rack (v3+).
        version: the ``ConsumerProtocolSubscription`` version to write. By
            default, the lowest one that carries every field given (v0 when
            there are only topics and user data), which every client reads.
            A field the chosen version lacks is left out, as Kafka does.

    Raises:
        UnsupportedVersionError: ``version`` is not 0-3.
        EncodeError: a value does not fit its wire type.
    """
    if isinstance(topics, str):
        raise TypeError("topics must be a collection of topic names, not a string")
    tp_cls = ConsumerProtocolSubscription.TopicPartition
    owned = [tp_cls(topic=t, partitions=ps) for t, ps in partition_lists(owned_partitions or {})]
    if version is None:
        if rack_id is not None:
            version = 3
        elif generation != -1:
            version = 2
        else:
            version = 1 if owned else 0
    msg = ConsumerProtocolSubscription(
        topics=list(topics),
        user_data=b"" if user_data is None else bytes(user_data),
        owned_partitions=owned,
        generation_id=generation,
        rack_id=rack_id,
    )
    return msg.encode_versioned(version)


def decode_subscription(
    member_id: str, group_instance_id: str | None, data: bytes | bytearray | memoryview
) -> Subscription:
    """Read a member's subscription (its JoinGroup protocol metadata).

    Versions 0-3 are read as they are; a newer version is read as v3 (Kafka
    only appends fields) and bytes after the known fields are ignored.

    Raises:
        MalformedMessageError: the bytes are not a subscription (too short, a
            negative version, truncated or corrupt fields).
    """
    msg, _version = ConsumerProtocolSubscription.decode_versioned(data)
    return Subscription(
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=list(msg.topics),
        user_data=None if msg.user_data is None else bytes(msg.user_data),
        owned_partitions=merge_partitions(
            (tp.topic, list(tp.partitions)) for tp in msg.owned_partitions
        ),
        generation=msg.generation_id,
        rack_id=msg.rack_id,
    )


def with_rack(metadata: bytes | bytearray | memoryview, rack_id: str) -> bytes:
    """A subscription with the member's rack added: the same fields, written as v3.

    Fields the subscription's own version lacks stay empty (owned partitions
    of a v0 subscription, whose member gave them up before joining, are not
    made up), so assignors read it as before; rack-aware ones see the rack.

    Raises:
        MalformedMessageError: ``metadata`` is not a subscription.
    """
    msg, version = ConsumerProtocolSubscription.decode_versioned(metadata)
    msg.rack_id = rack_id  # (fields the version lacked decoded to their empty defaults)
    return msg.encode_versioned(max(version, 3))
