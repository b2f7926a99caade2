"""KIP-848's online migration in the fake cluster: a group changing protocol with members in it.

State only, as Kafka's group coordinator does it (``group.consumer.migration.policy``
``bidirectional``, its default):

- **upgrade**: a consumer-protocol member joining a classic group of consumers
  (protocol type "consumer") turns it into a consumer group. The classic
  members become members of it with the epoch of the classic generation, their
  subscription (from the metadata of the group's protocol) and their last
  assignment as both current and target assignment; join and sync phases
  under way end with REBALANCE_IN_PROGRESS so those members rejoin.
- **downgrade**: when the last consumer-protocol member leaves (or is fenced)
  and classic members remain, the group becomes a classic group of the group
  epoch's generation, Stable, each member's assignment its target, and starts
  rebalancing: the members learn it from their heartbeats.

Committed offsets belong to the group id, not to either kind of group, and
stay. An empty group of the other kind is simply replaced.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from pykaf import errors
from pykaf import protocol as P
from pykaf.protocol.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pykaf.testing._fake.consumer_coordinator import (
    ClassicInfo,
    ConsumerGroupCoordinator,
    ConsumerGroupState,
    ConsumerMember,
    IdPartition,
    subscribed,
)
from pykaf.testing._fake.group_coordinator import (
    DEAD,
    STABLE,
    Group,
    GroupCoordinator,
    Member,
    clock,
)

__all__ = ["assignment_bytes", "classic_group", "downgrade", "ids_of", "upgrade"]

#: topic name -> (topic id, partition count), of the cluster's topics
Topics = Mapping[str, tuple[uuid.UUID, int]]


def ids_of(assignment: Mapping[str, list[int]], topics: Topics) -> set[IdPartition]:
    """An assignment by topic name as partitions by topic id (unknown topics left out)."""
    return {(topics[t][0], p) for t, ps in assignment.items() if t in topics for p in ps}


def assignment_bytes(parts: set[IdPartition], metadata: bytes, topics: Topics) -> bytes:
    """``parts`` as a classic member's assignment, in the version of its subscription."""
    names = {tid: name for name, (tid, _) in topics.items()}
    by_topic: dict[str, list[int]] = {}
    for tid, p in sorted(parts, key=lambda tp: (names.get(tp[0], ""), tp[1])):
        if tid in names:
            by_topic.setdefault(names[tid], []).append(p)
    try:
        (version,) = struct.unpack_from(">h", metadata)
    except struct.error:
        version = 0
    return encode_assignment(by_topic, version=min(max(version, 0), 3))


def upgrade(
    classic: GroupCoordinator,
    modern: ConsumerGroupCoordinator,
    g: Group,
    topics: Topics,
) -> ConsumerGroupState | None:
    """Turn the classic group ``g`` into a consumer group (None: it cannot be).

    It cannot when it is not a group of consumers, or a member's metadata
    does not parse.
    """
    if g.protocol_type != "consumer":
        return None
    generation = g.generation
    out = ConsumerGroupState(g.group_id, epoch=generation, assignment_epoch=generation)
    for m in g.members.values():
        try:
            sub = decode_subscription(m.member_id, m.instance_id, m.metadata(g.protocol))
            assigned = ids_of(decode_assignment(m.assignment), topics)
        except errors.MalformedMessageError:
            return None
        member = ConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            epoch=generation,
            previous_epoch=generation,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            topics=sorted(sub.topics),
            assigned=assigned,
            rack=sub.rack_id,
            classic=ClassicInfo(m.session_timeout_ms, list(m.protocols)),
        )
        modern.touch(member)
        out.members[m.member_id] = member
        out.target[m.member_id] = set(assigned)
    ids = {name: tid for name, (tid, _) in topics.items()}
    counts = {name: n for name, (_, n) in topics.items()}
    out.signature = tuple(
        (mid, tuple((t, counts[t]) for t in subscribed(x, ids)))
        for mid, x in sorted(out.members.items())
    )
    # Joins and syncs under way end: those members rejoin the consumer group.
    for m in g.members.values():
        if m.awaiting_join and m.join_result is None:
            m.join_result = _rejoin(m.member_id)
    g.state = DEAD
    g.notify()
    del classic.groups[g.group_id]
    modern.groups[g.group_id] = out
    return out


def _rejoin(member_id: str) -> P.JoinGroupResponse:
    return P.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=errors.RebalanceInProgressError.code,
        generation_id=-1,
        protocol_type=None,
        protocol_name="",  # (every version can carry "", and the member reads none of it)
        leader="",
        member_id=member_id,
        members=[],
    )


def downgrade(
    classic: GroupCoordinator,
    modern: ConsumerGroupCoordinator,
    g: ConsumerGroupState,
    leaving: ConsumerMember,
    topics: Topics,
) -> bool:
    """Turn the consumer group ``g`` into a classic group without ``leaving``; rebalance it.

    ``leaving`` is its last consumer-protocol member. False when it cannot be
    done (another consumer-protocol member, or nobody, would remain).
    """
    rest = [m for m in g.members.values() if m is not leaving]
    if not rest or any(m.classic is None for m in rest):
        return False
    out = Group(g.group_id, state=STABLE, generation=g.epoch, protocol_type="consumer")
    now = clock()
    for m in rest:
        assert m.classic is not None
        member = Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocol_type="consumer",
            protocols=list(m.classic.protocols),
        )
        member.touch(now)
        out.members[m.member_id] = member
        if m.instance_id is not None:
            out.static[m.instance_id] = m.member_id
    out.leader = next(iter(out.members))
    out.protocol = classic.select_protocol(out.members.values())
    for m in rest:
        member = out.members[m.member_id]
        target = g.target.get(m.member_id, set())
        member.assignment = assignment_bytes(target, member.metadata(out.protocol), topics)
    del modern.groups[g.group_id]
    classic.groups[g.group_id] = out
    classic.prepare_rebalance(out)
    return True


def classic_group(classic: GroupCoordinator, group_id: str) -> Group | None:
    """The classic group of ``group_id`` if it has members; an empty one is dropped.

    (A consumer-protocol member takes the group id over, offsets and all.)
    """
    g = classic.group(group_id)
    if g is None or g.members:
        return g
    del classic.groups[group_id]
    g.state = DEAD
    g.notify()
    return None
