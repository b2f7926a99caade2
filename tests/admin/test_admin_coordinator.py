"""Admin group calls ride out a coordinator that moves, is missing or still loads."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import open_fake_cluster

LOADING = errors.CoordinatorLoadInProgressError.code
MOVED = errors.NotCoordinatorError.code
MISSING = errors.CoordinatorNotAvailableError.code


@pytest.mark.parametrize(
    "codes", [[LOADING, LOADING], [MOVED], [MISSING, LOADING]], ids=["loading", "moved", "mixed"]
)
async def test_group_offsets_are_read_after_retriable_coordinator_answers(
    codes: list[int], autojump_clock: trio.testing.MockClock
) -> None:
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS on a group's first use while it
    # reads __consumer_offsets: the admin call must wait, not raise it.
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("orders", 1)
        async with pykaf.open_admin(cluster.bootstrap, retry_backoff=0.01) as admin:
            await admin.alter_group_offsets("billing", {("orders", 0): 7})
            cluster.start_request_tracking()
            cluster.push_request_errors(P.OffsetFetchRequest.API_KEY, *codes)
            offsets = await admin.list_group_offsets("billing")
            assert {tp: o.offset for tp, o in offsets.items()} == {("orders", 0): 7}
            asked = cluster.count_requests(P.OffsetFetchRequest.API_KEY, None)
            assert asked == len(codes) + 1


async def test_a_coordinator_that_keeps_loading_is_reported_after_the_request_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        open_fake_cluster(1) as cluster,
        pykaf.open_admin(cluster.bootstrap, retry_backoff=0.01, request_timeout=0.3) as admin,
    ):
        cluster.push_request_errors(P.OffsetFetchRequest.API_KEY, *[LOADING] * 1000)
        with pytest.raises(errors.CoordinatorLoadInProgressError):
            await admin.list_group_offsets("billing")


async def test_a_non_retriable_answer_is_raised_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_fake_cluster(1) as cluster, pykaf.open_admin(cluster.bootstrap) as admin:
        cluster.start_request_tracking()
        cluster.push_request_errors(
            P.OffsetFetchRequest.API_KEY, errors.GroupAuthorizationError.code
        )
        with pytest.raises(errors.GroupAuthorizationError):
            await admin.list_group_offsets("billing")
        assert cluster.count_requests(P.OffsetFetchRequest.API_KEY, None) == 1
