"""A group member's state table, apart from any I/O: every legal move, every illegal one."""

from __future__ import annotations

import itertools

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._group import classic as group_module
from pykaf._group.classic_member import ClassicMember
from pykaf._group.states import (
    INITIAL,
    TRANSITIONS,
    MemberEvent,
    MemberState,
    allowed,
    transition,
)
from pykaf.testing._fake import open_fake_cluster

S = MemberState
E = MemberEvent

#: The protocol's rounds as group.py walks them, written out again on purpose.
LEGAL = {
    (S.UNJOINED, E.JOIN): S.JOINING,
    (S.UNJOINED, E.LEAVE): S.LEAVING,
    (S.JOINING, E.JOIN): S.JOINING,  # member id required, rebalance in progress, retry
    (S.JOINING, E.JOINED): S.SYNCING,
    (S.JOINING, E.LOSE): S.UNJOINED,  # unknown member id: join as a new member
    (S.JOINING, E.LEAVE): S.LEAVING,
    (S.SYNCING, E.JOIN): S.JOINING,  # rebalance in progress, refused sync, retry
    (S.SYNCING, E.SYNCED): S.STABLE,
    (S.SYNCING, E.LOSE): S.UNJOINED,
    (S.SYNCING, E.LEAVE): S.LEAVING,
    (S.STABLE, E.REBALANCE): S.REBALANCING,
    (S.STABLE, E.LEAVE): S.LEAVING,
    (S.REBALANCING, E.JOIN): S.JOINING,
    (S.REBALANCING, E.LOSE): S.UNJOINED,  # heartbeat: the membership was lost
    (S.REBALANCING, E.LEAVE): S.LEAVING,
    (S.LEAVING, E.LEFT): S.UNJOINED,
}
ILLEGAL = [pair for pair in itertools.product(S, E) if pair not in LEGAL]


def test_the_table_is_exactly_the_legal_moves() -> None:
    assert set(TRANSITIONS) == set(S)
    table = {(s, e): to for s, moves in TRANSITIONS.items() for e, to in moves.items()}
    assert table == LEGAL
    assert INITIAL is S.UNJOINED


@pytest.mark.parametrize(("state", "event"), list(LEGAL), ids=str)
def test_every_legal_move(state: MemberState, event: MemberEvent) -> None:
    assert allowed(state, event)
    assert transition(state, event) is LEGAL[(state, event)]


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=str)
def test_every_illegal_move_is_refused(state: MemberState, event: MemberEvent) -> None:
    assert not allowed(state, event)
    with pytest.raises(errors.GroupStateError, match=f"no move '{event.value}' from {state.value}"):
        transition(state, event)


def test_a_generation_round_and_its_ends() -> None:
    def walk(*events: MemberEvent) -> MemberState:
        state = INITIAL
        for event in events:
            state = transition(state, event)
        return state

    round_ = (E.JOIN, E.JOINED, E.SYNCED)
    assert walk(*round_) is S.STABLE
    assert walk(*round_, E.REBALANCE, *round_) is S.STABLE  # the next generation
    assert walk(*round_, E.REBALANCE, E.LOSE, *round_) is S.STABLE  # as a new member
    assert walk(*round_, E.LEAVE, E.LEFT) is S.UNJOINED
    with pytest.raises(errors.GroupStateError):
        walk(*round_, E.JOIN)  # a generation ends before the next join
    with pytest.raises(errors.GroupStateError):
        walk(E.JOIN, E.SYNCED)  # no assignment before a generation


def test_the_error_is_pykafs_own() -> None:
    assert issubclass(errors.GroupStateError, errors.PykafError)
    assert not issubclass(errors.GroupStateError, errors.KafkaError)


def state_of(member: ClassicMember) -> MemberState:
    """The member's state (read anew: the member moves it)."""
    return member.state


class _Idle:
    async def setup(self, session: pykaf.GroupSession) -> None:
        pass

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        async for _ in claim:
            pass

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        pass


async def test_a_member_walks_the_table_on_a_fake_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    moves: list[tuple[MemberState, MemberEvent]] = []

    def recording(state: MemberState, event: MemberEvent) -> MemberState:
        moves.append((state, event))
        return transition(state, event)

    monkeypatch.setattr(group_module, "transition", recording)
    async with open_fake_cluster(1) as fake:
        fake.create_topic("member-states", 2)
        async with (
            pykaf.open_consumer_group(
                fake.bootstrap, "member-states-g", ["member-states"], heartbeat_interval=0.1
            ) as group,
            trio.open_nursery() as nursery,
        ):
            assert isinstance(group, ClassicMember)
            member: ClassicMember = group
            nursery.start_soon(group.consume, _Idle())
            with trio.fail_after(30):
                while member.state is not S.STABLE:
                    await trio.sleep(0.01)
            await group.aclose()
        assert state_of(member) is S.UNJOINED
    assert moves[0][0] is S.UNJOINED
    events = [event for _, event in moves]
    while events[:2] == [E.JOIN, E.JOIN]:
        del events[0]  # KIP-394: the first JoinGroup may ask for a member id
    assert events == [E.JOIN, E.JOINED, E.SYNCED, E.REBALANCE, E.LEAVE, E.LEFT]
