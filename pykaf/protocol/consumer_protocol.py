"""Kafka's consumer-protocol assignment format, and the topic -> partitions helpers.

What a group leader sends each member in SyncGroup, and what DescribeGroups
shows of it: ``ConsumerProtocolAssignment``, an int16 version followed by the
struct. Both the groups (which write and read it) and the admin client (which
reads it from DescribeGroups) use this module, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pykaf.protocol import ConsumerProtocolAssignment

__all__ = ["decode_assignment", "encode_assignment", "merge_partitions", "partition_lists"]


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
