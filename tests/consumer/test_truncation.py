"""Log truncation detection (KIP-320) on pykaf's fake cluster.

The fake keeps each partition's leader epoch history and answers
OffsetForLeaderEpoch as Kafka does; ``truncate_partition`` plays an unclean
leader election (the log loses its end, the epoch grows). The consumer must
notice when its position lies past the new leader's log, and only then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import FakeCluster, open_fake_cluster

FETCH = 1
OFFSET_FOR_LEADER_EPOCH = 23
TOPIC = "trunc"


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with open_fake_cluster(brokers=2) as fake:
        fake.create_topic(TOPIC, partitions=1)
        yield fake
        assert not fake.handler_errors


async def produce(cluster: FakeCluster, values: list[bytes]) -> None:
    """One batch per value, on partition 0."""
    async with pykaf.open_producer(cluster.bootstrap, linger=0) as producer:
        for v in values:
            await producer.send(TOPIC, v, partition=0)


async def read_n(pc: pykaf.PartitionConsumer, n: int, timeout: float = 10.0) -> list[Any]:
    out: list[Any] = []
    with trio.move_on_after(timeout):
        while len(out) < n:
            out.extend(await pc.next_batch())
    assert len(out) >= n, f"{len(out)} of {n} records"
    return out


async def next_error(pc: pykaf.PartitionConsumer, timeout: float = 10.0) -> BaseException:
    with trio.fail_after(timeout):
        return (await pc.errors().receive()).error


def no_error(pc: pykaf.PartitionConsumer) -> None:
    try:
        got = pc.errors().receive_nowait()
    except trio.WouldBlock:
        return
    raise AssertionError(f"unexpected error: {got!r}")


async def ten_records_over_two_epochs(cluster: FakeCluster) -> int:
    """Offsets 0-4 in epoch 0, 5-9 in epoch 1 (the leader moved); returns the leader."""
    await produce(cluster, [b"a%d" % i for i in range(5)])
    p = cluster.partition(TOPIC, 0)
    assert p is not None
    other = next(n for n in cluster.nodes if n != p.leader)
    cluster.set_partition_leader(TOPIC, 0, other)
    await produce(cluster, [b"b%d" % i for i in range(5)])
    return other


async def test_truncation_below_the_position_is_reported(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await ten_records_over_two_epochs(cluster)
    async with pykaf.open_consumer(
        cluster.bootstrap, auto_offset_reset="none", retry_backoff=0.02
    ) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        got = await read_n(pc, 10)
        assert [r.offset for r in got] == list(range(10))
        assert (pc.position, pc.position_epoch) == (10, 1)
        assert pc.epoch_at(4) == 0 and pc.epoch_at(5) == 1
        # an unclean election: offsets 7-9 are lost, epoch 2 starts at 7
        assert cluster.truncate_partition(TOPIC, 0, 7) == 7
        await produce(cluster, [b"new"])
        error = await next_error(pc)
        assert isinstance(error, errors.LogTruncationError)
        assert isinstance(error, errors.OffsetOutOfRangeError)
        assert not error.retriable
        assert (error.topic, error.partition) == (TOPIC, 0)
        assert (error.fetch_offset, error.divergent_offset, error.divergent_epoch) == (10, 7, 1)
        assert pc.paused
        # the caller decides: back to the divergent offset, and on
        pc.seek(error.divergent_offset)
        pc.resume()
        assert [r.value for r in await read_n(pc, 1)] == [b"new"]


async def test_a_leader_change_without_truncation_is_not_flagged(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await produce(cluster, [b"a%d" % i for i in range(5)])
    cluster.start_request_tracking()
    async with pykaf.open_consumer(
        cluster.bootstrap, auto_offset_reset="none", retry_backoff=0.02
    ) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        await read_n(pc, 5)
        assert cluster.count_requests(OFFSET_FOR_LEADER_EPOCH) == 0  # nothing to check yet
        p = cluster.partition(TOPIC, 0)
        assert p is not None
        cluster.set_partition_leader(TOPIC, 0, next(n for n in cluster.nodes if n != p.leader))
        await produce(cluster, [b"b%d" % i for i in range(5)])
        got = await read_n(pc, 5)
        assert [r.offset for r in got] == list(range(5, 10))
        assert cluster.count_requests(OFFSET_FOR_LEADER_EPOCH) == 1  # checked, and fine
        await trio.sleep(0.2)
        no_error(pc)
        assert not pc.paused


async def test_a_fenced_epoch_in_fetch_refreshes_and_goes_on(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The leader's epoch grows behind the consumer's back (same broker): the
    consumer's Fetch carries the old epoch, the fake answers FENCED_LEADER_EPOCH,
    and the consumer goes on under the new epoch with nothing lost."""
    await produce(cluster, [b"a%d" % i for i in range(3)])
    p = cluster.partition(TOPIC, 0)
    assert p is not None
    cluster.start_request_tracking()
    async with pykaf.open_consumer(cluster.bootstrap, retry_backoff=0.02) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        await read_n(pc, 3)
        cluster.set_partition_leader(TOPIC, 0, p.leader)  # epoch 0 -> 1
        await produce(cluster, [b"b%d" % i for i in range(3)])
        got = await read_n(pc, 3)
        assert [r.value for r in got] == [b"b0", b"b1", b"b2"]
        no_error(pc)
    fetches = [r.request for r in cluster.requests if r.api_key == FETCH]
    epochs = [f.topics[0].partitions[0].current_leader_epoch for f in fetches]
    assert epochs[0] == 0 and epochs[-1] == 1
    assert epochs == sorted(epochs)  # refreshed once, never back


async def test_resume_with_an_epoch_is_validated_before_the_first_fetch(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await ten_records_over_two_epochs(cluster)
    async with pykaf.open_consumer(cluster.bootstrap, retry_backoff=0.02) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        with trio.fail_after(10):
            for _ in range(8):  # record by record: the position stops mid-answer
                await pc.__anext__()
        saved = (pc.position, pc.position_epoch)
    assert saved == (8, 1)

    # the log still holds it: the resume reads on
    cluster.start_request_tracking()
    async with pykaf.open_consumer(cluster.bootstrap, auto_offset_reset="none") as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, saved[0], leader_epoch=saved[1])
        assert [r.value for r in await read_n(pc, 2)] == [b"b3", b"b4"]
        no_error(pc)
    apis = [r.api_key for r in cluster.requests if r.api_key in (FETCH, OFFSET_FOR_LEADER_EPOCH)]
    assert apis[0] == OFFSET_FOR_LEADER_EPOCH and FETCH in apis

    # truncated below the saved position: reported before anything is fetched
    cluster.truncate_partition(TOPIC, 0, 6)
    await produce(cluster, [b"c0", b"c1", b"c2"])
    async with pykaf.open_consumer(cluster.bootstrap, auto_offset_reset="none") as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, saved[0], leader_epoch=saved[1])
        error = await next_error(pc)
        assert isinstance(error, errors.LogTruncationError)
        assert (error.fetch_offset, error.divergent_offset) == (8, 6)
        assert pc.records_fetched == 0

    # an epoch the leader never had (above its history): no divergence point known
    async with pykaf.open_consumer(cluster.bootstrap, auto_offset_reset="none") as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, 3, leader_epoch=99)
        error = await next_error(pc)
        assert isinstance(error, errors.LogTruncationError)
        assert error.divergent_offset is None
    # ... and with a reset policy, the policy decides where to go
    async with pykaf.open_consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, 3, leader_epoch=99)
        assert (await read_n(pc, 1))[0].offset == 0


async def test_reset_policy_continues_from_the_divergent_offset(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await ten_records_over_two_epochs(cluster)
    async with pykaf.open_consumer(
        cluster.bootstrap, auto_offset_reset="latest", retry_backoff=0.02
    ) as consumer:
        pc = await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST)
        await read_n(pc, 10)
        cluster.truncate_partition(TOPIC, 0, 7)
        await produce(cluster, [b"n7", b"n8", b"n9", b"n10"])
        got = await read_n(pc, 4)
        # not "latest" (11), not the old position (10): the first divergent offset
        assert [(r.offset, r.value) for r in got] == [
            (7, b"n7"),
            (8, b"n8"),
            (9, b"n9"),
            (10, b"n10"),
        ]
        assert pc.position_epoch == 2
        no_error(pc)


async def test_group_commits_the_epoch_and_a_resume_detects_truncation(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    await ten_records_over_two_epochs(cluster)
    group = "trunc-group"

    class Handler:
        def __init__(self, want: int) -> None:
            self.want = want
            self.got: list[Any] = []
            self.done = trio.Event()

        async def setup(self, session: Any) -> None:
            pass

        async def cleanup(self, session: Any) -> None:
            pass

        async def consume_claim(self, session: Any, claim: Any) -> None:
            async for record in claim:
                self.got.append(record)
                session.mark_message(record)
                if len(self.got) >= self.want:
                    self.done.set()

    async def run(handler: Handler) -> None:
        async with (
            pykaf.open_consumer_group(
                cluster.bootstrap, group, [TOPIC], retry_backoff=0.02
            ) as member,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(member.consume, handler)
            with trio.fail_after(15):
                await handler.done.wait()
            nursery.cancel_scope.cancel()

    first = Handler(10)
    await run(first)
    assert [r.offset for r in first.got] == list(range(10))
    async with pykaf.open_client(cluster.bootstrap) as client:
        F = P.OffsetFetchRequest
        coordinator = await client.coordinator(group)
        conn = await client.connect_to(coordinator)
        resp = await conn.request(
            F(
                group_id=group,
                topics=[F.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
            ),
            7,
        )
        part = resp.topics[0].partitions[0]
        assert (part.committed_offset, part.committed_leader_epoch) == (10, 1)

    # the log loses 7-9; the new leader writes 7, 8, 9, 10, 11 meanwhile
    cluster.truncate_partition(TOPIC, 0, 7)
    await produce(cluster, [b"n%d" % i for i in range(7, 12)])
    second = Handler(5)
    await run(second)
    # from the divergent offset (the group's reset policy), not the stale 10
    assert [r.value for r in second.got[:5]] == [b"n%d" % i for i in range(7, 12)]


async def test_leader_epoch_argument_is_checked(
    cluster: FakeCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with pykaf.open_consumer(cluster.bootstrap) as consumer:
        for bad in ("1", 1.5, True, -2, 2**31):
            with pytest.raises(errors.ConfigError):
                await consumer.consume_partition(TOPIC, 0, 0, leader_epoch=bad)  # type: ignore[arg-type]
        with pytest.raises(errors.ConfigError):
            await consumer.consume_partition(TOPIC, 0, pykaf.OLDEST, leader_epoch=0)
        with pytest.raises(errors.ConfigError):
            await consumer.consume_partition(TOPIC, 0, timestamp=0, leader_epoch=0)
