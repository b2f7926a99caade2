"""Describing consumer-protocol (KIP-848) groups: ConsumerGroupDescribe's answer as results.

Kafka answers DescribeGroups for such a group with GROUP_ID_NOT_FOUND ("not a
classic group"), so the admin client asks ConsumerGroupDescribe first and
falls back to DescribeGroups for the groups it does not know (classic ones,
and groups that do not exist, which DescribeGroups calls "Dead").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pykaf import protocol as P
from pykaf._admin.results import GroupDescription, MemberDescription

__all__ = ["describe_request", "described", "partitions"]


def describe_request(group_ids: Sequence[str]) -> Any:
    """The ConsumerGroupDescribe request for ``group_ids``."""
    return P.ConsumerGroupDescribeRequest(
        group_ids=list(group_ids), include_authorized_operations=False
    )


def partitions(assignment: Any) -> dict[str, list[int]]:
    """An Assignment of ConsumerGroupDescribe or ShareGroupDescribe: partitions by topic."""
    out: dict[str, list[int]] = {}
    for tp in assignment.topic_partitions:
        out.setdefault(tp.topic_name, []).extend(tp.partitions)
    return {topic: sorted(ps) for topic, ps in sorted(out.items())}


def described(group: Any) -> GroupDescription:
    """One ``DescribedGroup`` of a ConsumerGroupDescribe answer, without error, as a result."""
    return GroupDescription(
        group_id=group.group_id,
        state=group.group_state,
        protocol_type="consumer",
        protocol=group.assignor_name,
        group_protocol="consumer",
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        members=[
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                assignment=partitions(m.assignment),
                member_epoch=m.member_epoch,
                target_assignment=partitions(m.target_assignment),
                subscribed_topics=sorted(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or None,  # Kafka sends ""
                rack=m.rack_id or None,
            )
            for m in group.members
        ],
    )
