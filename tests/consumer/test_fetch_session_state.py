"""The fetch session's bookkeeping (``pykaf._consumer.fetch_session``), without a broker."""

from __future__ import annotations

from pykaf import errors
from pykaf._consumer.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSession, next_epoch

A, B, C = ("t", 0), ("t", 1), ("u", 0)
V = 12  # the fetcher's Fetch version


def opened() -> FetchSession:
    """A session the broker opened (id 77) after a full fetch of A and B."""
    s = FetchSession()
    plan = s.plan({A: (0, -1, 100, 0), B: (5, -1, 100, 0)}, V)
    assert plan.full and plan.epoch == INITIAL_EPOCH and plan.session_id == 0
    assert plan.send == [A, B] and plan.forgotten == []
    assert s.answered(plan, 0, 77)
    assert s.open and s.session_id == 77 and s.epoch == 1
    return s


def test_incremental_sends_only_what_changed_and_forgets_the_rest() -> None:
    s = opened()
    plan = s.plan({A: (3, -1, 100, 0), B: (5, -1, 100, 0), C: (0, -1, 100, 2)}, V)
    assert not plan.full and (plan.session_id, plan.epoch) == (77, 1)
    assert plan.send == [A, C] and plan.forgotten == []
    assert s.answered(plan, 0, 77) and s.epoch == 2
    plan = s.plan({B: (5, -1, 200, 0), C: (0, -1, 100, 2)}, V)  # B grew, A gone
    assert plan.send == [B] and plan.forgotten == [A]
    assert s.answered(plan, 0, 77) and s.epoch == 3 and set(s.told) == {B, C}
    plan = s.plan({B: (5, -1, 200, 0), C: (0, -1, 100, 2)}, V)
    assert plan.send == [] and plan.forgotten == [] and plan.wanted.keys() == {B, C}


def test_session_errors_fall_back_to_a_full_fetch() -> None:
    s = opened()
    plan = s.plan({A: (1, -1, 100, 0)}, V)
    assert not s.answered(plan, errors.InvalidFetchSessionEpochError.code, 0)
    assert not s.open and s.resets == 1
    plan = s.plan({A: (1, -1, 100, 0), B: (5, -1, 100, 0)}, V)
    # the epoch error keeps the id: the full fetch replaces that session
    assert plan.full and (plan.session_id, plan.epoch) == (77, INITIAL_EPOCH)
    assert plan.send == [A, B]
    assert s.answered(plan, 0, 78) and s.session_id == 78
    plan = s.plan({A: (1, -1, 100, 0)}, V)
    assert not s.answered(plan, errors.FetchSessionIdNotFoundError.code, 0)
    plan = s.plan({A: (1, -1, 100, 0)}, V)
    assert plan.full and (plan.session_id, plan.epoch) == (0, INITIAL_EPOCH)


def test_a_failed_request_or_a_foreign_answer_means_a_full_fetch_next() -> None:
    s = opened()
    s.failed()
    assert s.plan({A: (0, -1, 100, 0)}, V).full
    s = opened()
    plan = s.plan({A: (0, -1, 100, 0)}, V)
    assert not s.answered(plan, 0, 99)  # an answer for another session: dropped
    assert s.plan({A: (0, -1, 100, 0)}, V).session_id == 0


def test_a_broker_without_sessions_is_asked_in_full_every_time() -> None:
    s = FetchSession()
    for _ in range(3):
        plan = s.plan({A: (0, -1, 100, 0)}, V)
        assert plan.full and plan.epoch == INITIAL_EPOCH
        assert s.answered(plan, 0, 0)
    assert s.full_fetches == 3 and s.incremental_fetches == 0 and s.resets == 0


def test_sessions_off_or_an_old_version_send_epoch_minus_one() -> None:
    for s, version in ((FetchSession(enabled=False), V), (FetchSession(), 6)):
        plan = s.plan({A: (0, -1, 100, 0)}, version)
        assert (plan.session_id, plan.epoch) == (0, FINAL_EPOCH) and plan.send == [A]
        assert s.answered(plan, 0, 0) and not s.open


def test_closing_and_the_epoch_wrap() -> None:
    s = opened()
    plan = s.closing()
    assert plan is not None and (plan.session_id, plan.epoch) == (77, FINAL_EPOCH)
    assert s.closing() is None and not s.open
    assert next_epoch(2**31 - 1) == 1 and next_epoch(1) == 2
