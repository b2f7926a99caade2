"""A consumer group inside a scope that is cancelled still commits its marks and leaves.

Trio cancels everything inside a cancelled scope, the group's connections
included; the group's close is shielded, and it needs a connection for its
last OffsetCommit and its leave. The connections end when the client closes,
not when the caller's scope is cancelled.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from group_support import create, produce

import pykaf

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker


@pytest.fixture(params=["kafka", "fake"])
def any_broker(request: pytest.FixtureRequest) -> Any:
    return bc.broker_from(request, request.param)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_cancelled_scope_still_commits_and_leaves(any_broker: Any, protocol: str) -> None:
    broker = any_broker
    topic, group_id = unique("cancelled"), unique("g")
    await create(broker, topic, 2)
    await produce(broker.bootstrap, topic, 2, 10)
    seen: list[tuple[int, int]] = []

    async def member() -> None:
        async with pykaf.open_consumer_group(
            broker.bootstrap,
            group_id,
            [topic],
            group_protocol=protocol,
            auto_commit_interval=60,  # only the close commits
        ) as group:
            async for record in group:
                seen.append((record.partition, record.offset))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member)
            while len(seen) < 20:
                await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
    assert sorted(seen) == [(p, o) for p in range(2) for o in range(10)]
    async with pykaf.open_admin(broker.bootstrap) as admin:
        offsets = await admin.list_group_offsets(group_id)
        # async for marks a record when the next one is asked for: the last one
        # handed out (of either partition) was not marked when the scope ended
        assert sum(offsets[(topic, p)].offset for p in range(2)) >= 19
        assert (await admin.describe_group(group_id)).members == []  # it left
