"""The one request path (pykaf/_cluster/request.py) on MockClock, against the fake cluster."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import JITTER
from pykaf._cluster.client import Client, open_client
from pykaf.testing import FakeCluster, open_fake_cluster

OFFSET_FETCH = P.OffsetFetchRequest.API_KEY
LOADING = errors.CoordinatorLoadInProgressError.code
MOVED = errors.NotCoordinatorError.code
BACKOFF = 5.0  # the first wait; it doubles per failure up to CAP, with JITTER either way
CAP = 4 * BACKOFF


def offset_fetch(version: int) -> Any:
    F = P.OffsetFetchRequest
    return F(group_id="g", topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])


def first_error(response: Any) -> errors.KafkaError | None:
    codes = [response.error_code] + [p.error_code for t in response.topics for p in t.partitions]
    cls = next((errors.error_for_code(c) for c in codes if c), None)
    return None if cls is None else cls(f"OffsetFetch: {cls.description}")


@asynccontextmanager
async def fake_client(
    brokers: int = 1, **options: Any
) -> AsyncIterator[tuple[FakeCluster, Client]]:
    """A fake cluster in this trio run (so on its clock) with topic t, and a client of it."""
    async with open_fake_cluster(brokers) as cluster:
        cluster.create_topic("t", 1)
        async with open_client(
            cluster.bootstrap, retry_backoff=BACKOFF, retry_backoff_max=CAP, **options
        ) as client:
            yield cluster, client


async def fetch_offsets(client: Any, **options: Any) -> Any:
    return await rq.request(
        client,
        rq.group_coordinator("g"),
        P.OffsetFetchRequest,
        offset_fetch,
        max_version=7,
        check=first_error,
        **options,
    )


async def test_a_retriable_answer_is_asked_again_after_the_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client() as (cluster, client):
        cluster.start_request_tracking()
        cluster.push_request_errors(OFFSET_FETCH, LOADING, LOADING)
        started = trio.current_time()
        response = await fetch_offsets(client)
        assert first_error(response) is None
        assert cluster.count_requests(OFFSET_FETCH) == 3
        # Two waits, the second twice the first (the one backoff of pykaf._cluster.backoff).
        waited = trio.current_time() - started
        assert 3 * BACKOFF * (1 - JITTER) <= waited <= 3 * BACKOFF * (1 + JITTER)


async def test_the_deadline_raises_the_last_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client(request_timeout=60) as (cluster, client):
        cluster.push_request_errors(OFFSET_FETCH, *[LOADING] * 1000)
        started = trio.current_time()
        with pytest.raises(errors.CoordinatorLoadInProgressError, match="OffsetFetch"):
            await fetch_offsets(client)
        assert 60 <= trio.current_time() - started <= 60 + CAP * (1 + JITTER)
        # A caller's own deadline instead of request_timeout.
        started = trio.current_time()
        with pytest.raises(errors.CoordinatorLoadInProgressError):
            await fetch_offsets(client, timeout=20)
        assert 20 <= trio.current_time() - started <= 20 + CAP * (1 + JITTER)


async def test_a_non_retriable_answer_is_raised_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client() as (cluster, client):
        cluster.start_request_tracking()
        cluster.push_request_errors(OFFSET_FETCH, errors.GroupAuthorizationError.code)
        started = trio.current_time()
        with pytest.raises(errors.GroupAuthorizationError):
            await fetch_offsets(client)
        assert cluster.count_requests(OFFSET_FETCH) == 1
        assert trio.current_time() - started < BACKOFF


async def test_the_coordinator_is_found_again_after_not_coordinator(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client(3) as (cluster, client):
        cluster.set_coordinator("group", "g", 1)
        assert (await client.coordinator("g")).node_id == 1
        cluster.set_coordinator("group", "g", 2)  # the client's cache still says 1
        cluster.start_request_tracking()
        response = await fetch_offsets(client)
        assert first_error(response) is None
        assert cluster.count_requests(OFFSET_FETCH, 1) == 1  # NOT_COORDINATOR
        assert cluster.count_requests(P.FindCoordinatorRequest.API_KEY) == 1
        assert cluster.count_requests(OFFSET_FETCH, 2) == 1
        assert (await client.coordinator("g")).node_id == 2


async def test_attempt_limits_and_the_callers_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client(request_timeout=1) as (cluster, client):
        cluster.start_request_tracking()
        # min_attempts: asked that often even past the deadline.
        cluster.push_request_errors(OFFSET_FETCH, *[LOADING] * 6)
        with pytest.raises(errors.CoordinatorLoadInProgressError):
            await fetch_offsets(client, min_attempts=5)
        assert cluster.count_requests(OFFSET_FETCH) == 5
        # max_attempts without a deadline; exhausted returns the last answer.
        cluster.clear_request_errors(OFFSET_FETCH)
        cluster.push_request_errors(OFFSET_FETCH, *[LOADING] * 6)
        response = await fetch_offsets(
            client,
            timeout=math.inf,
            max_attempts=4,
            exhausted=lambda failure, answer: answer,
        )
        assert isinstance(first_error(response), errors.CoordinatorLoadInProgressError)
        assert cluster.count_requests(OFFSET_FETCH) == 5 + 4
        # refused: what a non-retried answer raises.
        cluster.clear_request_errors(OFFSET_FETCH)
        cluster.push_request_errors(OFFSET_FETCH, errors.GroupAuthorizationError.code)
        with pytest.raises(errors.KafkaTimeoutError, match="refused"):
            await fetch_offsets(client, refused=lambda e: errors.KafkaTimeoutError(f"refused: {e}"))


async def test_raised_failures_are_retried_only_when_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with fake_client(reconnect_backoff=0.01) as (_cluster, client):

        async def failing(conn: Any) -> Any:
            raise errors.KafkaConnectionError("lost")

        with pytest.raises(errors.KafkaConnectionError):
            await rq.call(client, rq.ANY_BROKER, failing, what="x")
        calls = []

        async def flaky(conn: Any) -> int:
            calls.append(trio.current_time())
            if len(calls) < 3:
                raise errors.KafkaConnectionError("lost")
            return len(calls)

        seen: list[BaseException] = []
        assert (
            await rq.call(
                client,
                rq.ANY_BROKER,
                flaky,
                what="x",
                retry_raised=(errors.KafkaConnectionError,),
                on_retry=seen.append,
            )
            == 3
        )
        assert len(seen) == 2
        assert calls[2] - calls[0] >= 3 * BACKOFF * (1 - JITTER)


async def test_deadline_and_clock_follow_the_mock_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = rq.Deadline(10)
    assert not deadline.passed
    assert deadline.remaining == pytest.approx(10)
    await trio.sleep(10)
    assert deadline.passed
    assert deadline.remaining == 0
    assert rq.now() == trio.current_time()
