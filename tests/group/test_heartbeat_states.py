"""The consumer-protocol (KIP-848) member's state table, apart from any I/O."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._group import consumer_machine, heartbeat_member
from pykaf._group.heartbeat_states import (
    INITIAL,
    TRANSITIONS,
    HeartbeatEvent,
    HeartbeatState,
    allowed,
    transition,
)
from pykaf.testing._fake import open_fake_cluster

S = HeartbeatState
E = HeartbeatEvent

#: The member's path as heartbeat_member.py walks it, written out again on purpose.
LEGAL = {
    (S.UNSUBSCRIBED, E.JOIN): S.JOINING,
    (S.UNSUBSCRIBED, E.LEAVE): S.LEAVING,  # closed before the first heartbeat
    (S.JOINING, E.JOIN): S.JOINING,  # epoch 0 again: the answer was lost
    (S.JOINING, E.ASSIGNED): S.RECONCILING,
    (S.RECONCILING, E.ASSIGNED): S.RECONCILING,  # a newer assignment while applying one
    (S.RECONCILING, E.RECONCILED): S.ACKNOWLEDGING,
    (S.ACKNOWLEDGING, E.ACKED): S.STABLE,
    (S.ACKNOWLEDGING, E.ASSIGNED): S.RECONCILING,
    (S.STABLE, E.ASSIGNED): S.RECONCILING,
    (S.FENCED, E.JOIN): S.JOINING,
    (S.LEAVING, E.LEFT): S.UNSUBSCRIBED,
}
for _state in (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE, S.FENCED):
    LEGAL[(_state, E.FENCE)] = S.FENCED
    LEGAL[(_state, E.LEAVE)] = S.LEAVING
ILLEGAL = [pair for pair in itertools.product(S, E) if pair not in LEGAL]


def test_the_table_is_exactly_the_legal_moves() -> None:
    assert INITIAL is S.UNSUBSCRIBED
    assert set(TRANSITIONS) == set(S)
    table = {(s, e): to for s, moves in TRANSITIONS.items() for e, to in moves.items()}
    assert table == LEGAL


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=lambda x: x.value)
def test_an_illegal_move_is_refused(state: HeartbeatState, event: HeartbeatEvent) -> None:
    assert not allowed(state, event)
    with pytest.raises(errors.GroupStateError, match=f"no move '{event.value}'"):
        transition(state, event)


def test_no_reconciliation_is_acknowledged_before_it_is_applied() -> None:
    # ACKED only follows RECONCILED: a heartbeat cannot report partitions the
    # member has not finished revoking.
    for state in (S.JOINING, S.RECONCILING, S.STABLE, S.FENCED):
        assert not allowed(state, E.ACKED)


class _Idle:
    async def setup(self, session: pykaf.GroupSession) -> None:
        pass

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        async for _ in claim:
            pass

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        pass


def _member(bootstrap: str, topic: str, **options: Any) -> Any:
    """A consumer-protocol member of group ``{topic}-g`` reading ``topic``."""
    return pykaf.open_consumer_group(
        bootstrap, f"{topic}-g", [topic], group_protocol="consumer", retry_backoff=0.05, **options
    )


async def test_a_member_walks_the_table_and_fences_itself_after_session_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the fake cluster: every move goes through the table, in the order the protocol
    takes; a coordinator that answers nothing but COORDINATOR_NOT_AVAILABLE for
    its presumed session timeout makes the member drop its claims and join again."""
    moves: list[tuple[HeartbeatState, HeartbeatEvent]] = []

    def recording(state: HeartbeatState, event: HeartbeatEvent) -> HeartbeatState:
        moves.append((state, event))
        return transition(state, event)

    monkeypatch.setattr(consumer_machine, "transition", recording)
    async with open_fake_cluster(1) as fake:
        fake.create_topic("hb-states", 2)
        async with (
            _member(fake.bootstrap, "hb-states") as group,
            trio.open_nursery() as nursery,
        ):
            assert isinstance(group, heartbeat_member.HeartbeatMember)
            # the broker's session timeout the member presumes (45 s by default)
            group.session_timeout = 1.5
            nursery.start_soon(group.consume, _Idle())
            with trio.fail_after(30):
                while group.state is not S.STABLE:
                    await trio.sleep(0.01)
            claims = list(group._claims.values())
            assert len(claims) == 2
            code = errors.CoordinatorNotAvailableError.code
            fake.push_request_errors(P.ConsumerGroupHeartbeatRequest.API_KEY, *[code] * 400)
            group._heartbeat_now.set()
            with trio.fail_after(30):
                while not all(c.revoked for c in claims):
                    await trio.sleep(0.01)
            assert (S.STABLE, E.FENCE) in moves or (S.ACKNOWLEDGING, E.FENCE) in moves
            fake.clear_request_errors(P.ConsumerGroupHeartbeatRequest.API_KEY)
            with trio.fail_after(30):
                while group.state is not S.STABLE or len(group._claims) != 2:
                    await trio.sleep(0.01)
            await group.aclose()
    path = [event for _, event in moves]
    assert path[:4] == [E.JOIN, E.ASSIGNED, E.RECONCILED, E.ACKED]
    assert path[-2:] == [E.LEAVE, E.LEFT]
    assert E.FENCE in path and path[path.index(E.FENCE) + 1] == E.JOIN


async def test_commit_of_given_offsets_without_an_epoch_or_fenced_raises() -> None:
    """On the fake cluster: marks wait for the member epoch; ``commit(offsets=)``
    joining raises REBALANCE_IN_PROGRESS, fenced FENCED_MEMBER_EPOCH, and commits nothing."""
    async with open_fake_cluster(1) as fake:
        fake.create_topic("hb-given", 1)
        async with (
            _member(fake.bootstrap, "hb-given", auto_commit=False) as group,
            trio.open_nursery() as nursery,
        ):
            assert isinstance(group, heartbeat_member.HeartbeatMember)
            await group.commit()  # no epoch yet: the marks (none) wait quietly
            with pytest.raises(errors.RebalanceInProgressError, match="hb-given/0"):
                await group.commit({("hb-given", 0): 4})
            nursery.start_soon(group.consume, _Idle())
            with trio.fail_after(30):
                while group.state is not S.STABLE:
                    await trio.sleep(0.01)
            group._fence("a test")
            with pytest.raises(errors.FencedMemberEpochError, match="hb-given/0"):
                await group.commit({("hb-given", 0): 4})
            assert fake.groups.committed("hb-given-g", ("hb-given", 0)) is None
            nursery.cancel_scope.cancel()
