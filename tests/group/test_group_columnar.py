"""A consumer group's claims read as ColumnBatches and marked with mark_batch.

On Apache Kafka and pykaf's fake cluster: each batch's ``next_offset`` is the
claim's position, marking it commits that offset, and a later member resumes
exactly after the last batch.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from group_support import FAST, Recorder, produce, wait_for

import pykaf
from pykaf.testing import open_fake_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique


class ColumnRecorder(Recorder):
    """Reads each claim as ColumnBatches and marks each batch."""

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        while batch := await claim.next_batch(columnar=True):
            assert batch.next_offset == claim.position
            self.seen += [(batch.topic, batch.partition, o) for o in batch.offsets]
            session.mark_batch(batch)
        assert len(batch) == 0 and claim.revoked


@pytest.fixture(params=["kafka", "fake"])
async def group_bootstrap(request: pytest.FixtureRequest) -> Any:
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_broker")
        yield kafka.bootstrap, kafka.create
        return
    async with open_fake_cluster(3) as fake:
        yield fake.bootstrap, fake.create_topic


@pytest.mark.broker
async def test_a_group_claim_as_columns_marks_and_commits_its_batches(
    group_bootstrap: Any,
) -> None:
    bootstrap, create = group_bootstrap
    topic, group_id = unique("col-grp"), unique("g")
    create(topic, 3)
    await produce(bootstrap, topic, 3, 40)
    first = ColumnRecorder()
    async with (
        pykaf.open_consumer_group(bootstrap, group_id, [topic], **FAST) as group,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(group.consume, first)
        await wait_for(lambda: len(first.seen) == 120, what=lambda: len(first.seen))
        nursery.cancel_scope.cancel()
    assert sorted(first.seen) == [(topic, p, o) for p in range(3) for o in range(40)]
    # Leaving committed each batch's next_offset: a new member starts after them.
    await produce(bootstrap, topic, 3, 5, start=40)
    second = Recorder()
    async with (
        pykaf.open_consumer_group(bootstrap, group_id, [topic], **FAST) as group,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(group.consume, second)
        await wait_for(lambda: len(second.seen) == 15, what=lambda: len(second.seen))
        await trio.sleep(0.3)
        nursery.cancel_scope.cancel()
    assert sorted(second.seen) == [(topic, p, o) for p in range(3) for o in range(40, 45)]
