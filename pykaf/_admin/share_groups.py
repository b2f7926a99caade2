"""Share groups (KIP-932) for the admin client: describe, start offsets, listing filter.

ShareGroupDescribe describes share groups (DescribeGroups answers one as a
"Dead" group with no members, so ``describe_groups`` asks ShareGroupDescribe
too); DescribeShareGroupOffsets gives each partition's *start
offset* (the first record not yet settled for good) and lag;
AlterShareGroupOffsets moves start offsets of an empty group;
DeleteShareGroupOffsets forgets a group's state for whole topics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf._admin.consumer_groups import partitions
from pykaf._admin.results import GroupDescription, MemberDescription

__all__ = [
    "ShareGroupOffset",
    "alter_offsets_request",
    "delete_offsets_request",
    "describe_offsets_request",
    "describe_request",
    "described",
    "offsets_of",
    "partition_errors",
]

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ShareGroupOffset:
    """A share group's position in one partition.

    Attributes:
        start_offset: the first offset not yet settled for good (accepted,
            rejected or past the delivery limit); records before it are never
            delivered again. -1 when the group has no state for the partition.
        leader_epoch: the leader epoch of the start offset (-1 unknown).
        lag: records from the start offset to the end not yet settled for good
            (DescribeShareGroupOffsets v1+, Kafka 4.2+); -1 when unknown.
    """

    start_offset: int
    leader_epoch: int = -1
    lag: int = -1


def describe_request(group_ids: Sequence[str]) -> Any:
    """The ShareGroupDescribe request for ``group_ids``."""
    return P.ShareGroupDescribeRequest(
        group_ids=list(group_ids), include_authorized_operations=False
    )


def described(group: Any) -> GroupDescription:
    """One ``DescribedGroup`` of a ShareGroupDescribe answer, without error, as a result."""
    return GroupDescription(
        group_id=group.group_id,
        state=group.group_state,
        protocol_type="share",
        protocol=group.assignor_name,
        group_protocol="share",
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        members=[
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=None,
                client_id=m.client_id,
                client_host=m.client_host,
                assignment=partitions(m.assignment),
                member_epoch=m.member_epoch,
                subscribed_topics=sorted(m.subscribed_topic_names),
            )
            for m in group.members
        ],
    )


def describe_offsets_request(group_id: str, partitions: Sequence[TopicPartition] | None) -> Any:
    """DescribeShareGroupOffsets for ``partitions`` of ``group_id`` (None: all it has)."""
    R = P.DescribeShareGroupOffsetsRequest
    topics: list[Any] | None = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [
            R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ]
    return R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)])


def offsets_of(
    response: Any, group_id: str
) -> tuple[dict[TopicPartition, ShareGroupOffset], dict[Any, errors.KafkaError]]:
    """The start offsets in a DescribeShareGroupOffsets answer, and the errors met."""
    out: dict[TopicPartition, ShareGroupOffset] = {}
    failures: dict[Any, errors.KafkaError] = {}
    for g in response.groups:
        err = errors.error_for_code(g.error_code)
        if err is not None:
            failures[group_id] = err(
                f"share group {group_id!r}: {g.error_message or err.description}"
            )
            continue
        for t in g.topics:
            for p in t.partitions:
                perr = errors.error_for_code(p.error_code)
                tp = (t.topic_name, p.partition_index)
                if perr is not None:
                    failures[tp] = perr(f"{tp[0]}/{tp[1]}: {p.error_message or perr.description}")
                    continue
                out[tp] = ShareGroupOffset(p.start_offset, p.leader_epoch, p.lag)
    return out, failures


def alter_offsets_request(group_id: str, offsets: Mapping[TopicPartition, int]) -> Any:
    """AlterShareGroupOffsets setting ``offsets`` (start offsets) of ``group_id``."""
    R = P.AlterShareGroupOffsetsRequest
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            R.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    return R(
        group_id=group_id,
        topics=[
            R.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


def delete_offsets_request(group_id: str, topics: Sequence[str]) -> Any:
    """DeleteShareGroupOffsets forgetting ``group_id``'s state of whole ``topics``."""
    R = P.DeleteShareGroupOffsetsRequest
    return R(
        group_id=group_id,
        topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics],
    )


def partition_errors(response: Any) -> dict[Any, errors.KafkaError]:
    """Errors of an Alter/DeleteShareGroupOffsets answer: top level, per topic or partition."""
    failures: dict[Any, errors.KafkaError] = {}
    err = errors.error_for_code(response.error_code)
    if err is not None:
        failures[None] = err(response.error_message or err.description)
        return failures
    for t in response.responses:
        terr = errors.error_for_code(getattr(t, "error_code", 0))
        if terr is not None:
            failures[t.topic_name] = terr(f"{t.topic_name}: {t.error_message or terr.description}")
        for p in getattr(t, "partitions", ()):
            perr = errors.error_for_code(p.error_code)
            if perr is not None:
                tp = (t.topic_name, p.partition_index)
                failures[tp] = perr(f"{tp[0]}/{tp[1]}: {p.error_message or perr.description}")
    return failures
