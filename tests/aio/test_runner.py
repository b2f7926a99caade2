"""pykaf.aio's trio guest run and its bridge: one run per loop, cancellation both ways, errors.

No broker but the fake cluster, run inside the loop's own trio run. Each
test runs on asyncio's loop, on uvloop's, and on a loop without
``add_reader`` (the ``run`` fixture).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from aio_loops import loop_reads

import pykaf
import pykaf.aio
from pykaf import errors
from pykaf.aio._bridge import call, hold
from pykaf.aio._runner import acquire, current_runner, release
from pykaf.aio.testing import open_fake_cluster

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

Run = Callable[[Callable[[], Any]], Any]


class Boom(Exception):
    pass


def children() -> int:
    """How many tasks the loop's trio run has going (holders and calls)."""
    runner = current_runner()
    assert runner is not None and runner.nursery is not None
    return len(runner.nursery.child_tasks)


def test_a_loops_objects_share_one_run_that_ends_with_the_last(run: Run) -> None:
    async def main() -> None:
        assert current_runner() is None
        async with open_fake_cluster() as cluster:
            first = current_runner()
            assert first is not None
            cluster.create_topic("t", 1)
            async with (
                pykaf.aio.open_producer(cluster.bootstrap) as producer,
                pykaf.aio.open_admin(cluster.bootstrap) as admin,
            ):
                assert current_runner() is first
                await producer.send("t", b"v")
                assert await admin.list_topics() == ["t"]
            assert current_runner() is first
        assert current_runner() is None
        assert not trio.lowlevel.in_trio_run()  # nothing of trio is left in the thread

    run(main)
    run(main)  # the thread hosts a new run for a new loop


def test_a_call_without_a_running_loop_names_the_entry_points() -> None:
    async def under_trio() -> None:
        async with pykaf.aio.open_producer("127.0.0.1:1"):
            pass

    with pytest.raises(RuntimeError, match=r"pykaf.aio needs a running asyncio loop.*trio API"):
        trio.run(under_trio)


def test_a_partition_consumer_read_from_another_loop_is_refused(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                await (await producer.send_batch("t", [b"a", b"b"])).wait()
            async with pykaf.aio.open_consumer(cluster.bootstrap) as consumer:
                pc = await consumer.consume_partition("t", 0, pykaf.OLDEST)

                async def elsewhere() -> None:
                    with pytest.raises(RuntimeError, match="another asyncio loop"):
                        async for _record in pc:
                            pass
                    with pytest.raises(RuntimeError, match="another asyncio loop"):
                        pc.next_nowait()

                await asyncio.to_thread(asyncio.run, elsewhere())
                # and it still reads on its own loop, from the start
                values = []
                async for record in pc:
                    values.append(record.value)
                    if len(values) == 2:
                        break
                assert values == [b"a", b"b"] and pc.position == 2

    run(main)


def test_a_plain_call_from_a_worker_thread_is_refused(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                with pytest.raises(RuntimeError, match="running asyncio loop"):
                    await asyncio.to_thread(producer.statistics)
                with pytest.raises(RuntimeError, match="another asyncio loop"):
                    await asyncio.to_thread(asyncio.run, producer.send("t", b"v"))

    run(main)


def test_an_object_used_from_another_loop_is_refused(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with (
                pykaf.aio.open_producer(cluster.bootstrap) as producer,
                pykaf.aio.open_client(cluster.bootstrap) as client,
            ):

                async def elsewhere() -> None:
                    with pytest.raises(RuntimeError, match="another asyncio loop"):
                        await producer.send("t", b"v")
                    with pytest.raises(RuntimeError, match="another asyncio loop"):
                        producer.statistics()
                    with pytest.raises(RuntimeError, match="another asyncio loop"):
                        async with pykaf.aio.open_producer(client):
                            pass

                await asyncio.to_thread(asyncio.run, elsewhere())
                # and the objects still work on their own loop
                await producer.send("t", b"v")
                assert await client.topics() == ["t"]

    run(main)


def test_cancelling_the_asyncio_side_cancels_the_trio_call(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_consumer(cluster.bootstrap, fetch_max_wait=0.05) as consumer:
                pc = await consumer.consume_partition("t", 0, pykaf.OLDEST)
                before = children()
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(pc.next_batch(), 0.1)
                assert children() == before  # the trio call ended with the asyncio one
                if sys.version_info >= (3, 11):
                    with pytest.raises(TimeoutError):
                        async with asyncio.timeout(0.1):
                            await pc.next_batch()
                    assert children() == before
                task = asyncio.create_task(pc.next_batch())
                await asyncio.sleep(0)
                assert children() == before + 1
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert children() == before
                async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                    await producer.send("t", b"after")
                batch = await pc.next_batch()  # nothing was lost by the cancelled calls
                assert [r.value for r in batch] == [b"after"]

    run(main)


def test_trio_errors_come_out_as_the_same_classes(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 2)
            async with (
                pykaf.aio.open_producer(cluster.bootstrap) as producer,
                pykaf.aio.open_admin(cluster.bootstrap) as admin,
            ):
                with pytest.raises(errors.UnknownTopicOrPartitionError):
                    await producer.send("t", b"v", partition=7)
                with pytest.raises(TypeError):
                    producer.send_nowait("t", "not bytes")  # type: ignore[arg-type]
                with pytest.raises(errors.TopicExistsError):
                    await admin.create_topic("t", 1)
                with pytest.raises(errors.ConfigError, match="transactional_id"):
                    producer.begin_transaction()

    run(main)


def test_plain_calls_that_wake_trio_work_from_asyncio(run: Run) -> None:
    """Channel sends and keyed records wake trio tasks from outside a trio tick."""

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 3)
            config = {"return_successes": True, "linger": 0}
            async with pykaf.aio.open_producer(cluster.bootstrap, **config) as producer:
                producer.input().send_nowait(pykaf.ProducerMessage("t", b"in", key=b"k"))
                message = await producer.successes().receive()
                assert (message.value, message.key) == (b"in", b"k")
                for i in range(50):
                    producer.send_nowait("t", b"%d" % i, key=b"%d" % i)
                await asyncio.wait_for(producer.flush(), 20)  # not left waiting for a trio tick
                assert producer.buffered_records == 0

    run(main)


@asynccontextmanager
async def failing_later() -> AsyncIterator[str]:
    async def boom() -> None:
        await trio.sleep(0.01)
        raise Boom

    async with trio.open_nursery() as nursery:
        nursery.start_soon(boom)
        yield "entered"


def test_a_trio_failure_cancels_the_block_and_is_raised(run: Run) -> None:
    async def main() -> None:
        runner = await acquire()
        try:
            with pytest.raises(BaseExceptionGroup) as info:
                async with hold(runner, failing_later()) as value:
                    assert value == "entered"
                    await asyncio.sleep(60)
            assert info.group_contains(Boom)
            task = asyncio.current_task()
            if sys.version_info >= (3, 11):
                assert task is not None and task.cancelling() == 0  # the cancel was taken back
        finally:
            await release(runner)

    run(main)


def test_the_blocks_exception_reaches_the_trio_context(run: Run) -> None:
    seen: list[Any] = []

    @asynccontextmanager
    async def recording() -> AsyncIterator[None]:
        try:
            yield
        except BaseException as exc:
            seen.append(type(exc))
            raise
        seen.append(None)

    async def main() -> None:
        runner = await acquire()
        try:
            with pytest.raises(Boom):
                async with hold(runner, recording()):
                    raise Boom
            async with hold(runner, recording()):
                pass
        finally:
            await release(runner)

    run(main)
    assert seen == [Boom, None]


def test_a_handler_coroutine_is_cancelled_with_its_trio_call(run: Run) -> None:
    """Trio cancelling a handler's call cancels the asyncio task running it."""
    events: list[str] = []

    class Waits:
        async def setup(self, session: pykaf.aio.GroupSession) -> None:
            events.append("setup")

        async def consume_claim(
            self, session: pykaf.aio.GroupSession, claim: pykaf.aio.Claim
        ) -> None:
            events.append("claim")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                events.append("cancelled")
                raise

        async def cleanup(self, session: pykaf.aio.GroupSession) -> None:
            events.append("cleanup")

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_consumer_group(
                cluster.bootstrap, "g", ["t"], heartbeat_interval=0.1
            ) as group:
                consuming = asyncio.create_task(group.consume(Waits()))
                while "claim" not in events:
                    await asyncio.sleep(0.01)
                consuming.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await consuming

    run(main)
    assert events[:3] == ["setup", "claim", "cancelled"]


def test_a_user_cancelled_while_the_run_starts_stops_it(run: Run) -> None:
    async def main() -> None:
        starting = asyncio.create_task(acquire())
        await asyncio.sleep(0)  # the run is starting
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(starting, 10)  # not left waiting for a run that never stops
        assert current_runner() is None
        async with open_fake_cluster() as cluster:  # and a new run starts
            cluster.create_topic("t", 1)

    run(main)


def test_every_plain_method_works_when_called_from_asyncio(run: Run) -> None:
    """The direct calls that touch trio's state (scopes, events, tasks) from outside a tick."""

    class Handler:
        def __init__(self) -> None:
            self.done = asyncio.Event()

        async def setup(self, session: pykaf.aio.GroupSession) -> None:
            pass

        async def consume_claim(
            self, session: pykaf.aio.GroupSession, claim: pykaf.aio.Claim
        ) -> None:
            batch = await claim.next_batch()
            assert claim.epoch_before(batch[-1].offset + 1) >= -1
            session.mark_offset(claim.topic, claim.partition, 2)
            session.reset_offset(claim.topic, claim.partition, 1)
            claim.seek(0)
            again = await claim.next_batch()
            assert again[0].offset == 0
            assert session.group_metadata().group_id == "g"
            self.done.set()
            await asyncio.Event().wait()  # until the group closes

        async def cleanup(self, session: pykaf.aio.GroupSession) -> None:
            pass

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_client(cluster.bootstrap) as client:
                async with pykaf.aio.open_producer(client) as producer:
                    await (await producer.send_batch("t", [b"a", b"b", b"c"])).wait()
                client.rebootstrap("a test")  # every connection closed from asyncio
                client.forget_coordinator(0, "g")
                assert await client.topics() == ["t"]  # and connected again
                client.newest_features()
                async with pykaf.aio.open_consumer(client, fetch_max_wait=0.05) as consumer:
                    pc = await consumer.consume_partition("t", 0, pykaf.OLDEST)
                    pc.pause()
                    assert pc.paused
                    pc.resume()
                    assert [r.value for r in await pc.next_batch()] == [b"a", b"b", b"c"]
                async with pykaf.aio.open_consumer_group(
                    client, "g", ["t"], heartbeat_interval=0.1
                ) as group:
                    handler = Handler()
                    consuming = asyncio.create_task(group.consume(handler))
                    await asyncio.wait_for(handler.done.wait(), 30)
                    assert group.assignment() == {"t": [0]}
                    consuming.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await consuming

    run(main)


def test_an_object_used_after_its_block_is_closed(run: Run) -> None:
    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                pass
            with pytest.raises(errors.ClosedError):
                await producer.send("t", b"v")  # the run still serves the cluster
            with pytest.raises(errors.ClosedError):
                producer.send_nowait("t", b"v")
        with pytest.raises(errors.ClosedError):
            await producer.send("t", b"v")  # and now the run has ended too

    run(main)


def test_a_cancellation_as_the_trio_call_ends_does_not_wait_for_it_again(run: Run) -> None:
    """The trio call may end between the asyncio task's cancellation and its wake-up."""

    async def main() -> None:
        runner = await acquire()
        try:
            caller: list[asyncio.Task[Any]] = []

            async def ends_after_cancelling_its_caller() -> int:
                caller[0].cancel()  # the caller wakes only after this call has ended
                return 1

            task = asyncio.create_task(call(runner, ends_after_cancelling_its_caller))
            caller.append(task)
            done, _ = await asyncio.wait({task}, timeout=5)
            assert task in done and task.cancelled()
        finally:
            await release(runner)

    run(main)


def test_a_loop_closed_with_objects_open_is_named_by_the_next_one() -> None:
    """A loop closed with a pykaf.aio object still open strands its trio run in the thread.

    Trio's run cannot move on without its host loop, and only one run fits in a
    thread; the next loop's first object says what happened instead of failing
    somewhere in trio. Run in a thread of its own, which the stranded run spoils.
    """
    import threading

    seen: list[BaseException] = []

    def scenario() -> None:
        async def leave_open() -> None:
            await acquire()  # a user that never releases: an object never closed

        loop = asyncio.new_event_loop()
        loop.run_until_complete(leave_open())
        loop.close()

        async def next_loop() -> None:
            await acquire()

        try:
            asyncio.run(next_loop())
        except BaseException as exc:  # the thread's result, checked below
            seen.append(exc)

    thread = threading.Thread(target=scenario)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError), seen
    assert "left its trio run behind" in str(seen[0]) and "1 pykaf.aio object" in str(seen[0])


def test_a_value_taken_for_a_cancelled_caller_is_kept(run: Run) -> None:
    """A trio call that took something (a record, a channel's value) as its caller was cancelled.

    Both orders: the caller cancelled before the value came back (its future is
    cancelled, the value arrives after) and after (the value is in its future
    when the cancellation wakes it). Either way the next receive gets it.
    """
    from pykaf.aio._bridge import call_keeping
    from pykaf.aio._channels import ReceiveChannel

    async def main() -> None:
        runner = await acquire()
        try:
            send, receive = trio.open_memory_channel[int](10)
            channel = ReceiveChannel(receive, runner)
            loop = asyncio.get_running_loop()

            # 1. The value is sent and the waiting caller cancelled in one go.
            task = asyncio.create_task(channel.receive())
            await asyncio.sleep(0.05)  # the trio receive waits
            send.send_nowait(1)
            task.cancel()
            await asyncio.wait({task})
            assert task.cancelled()
            assert await channel.receive() == 1

            # 2. The value is in the caller's future when its cancellation wakes it.
            kept: list[int] = []
            caller: list[asyncio.Task[int]] = []

            async def takes_then_cancels_its_caller() -> int:
                loop.call_soon(caller[0].cancel)
                return 2

            task2 = asyncio.create_task(
                call_keeping(runner, kept.append, takes_then_cancels_its_caller)
            )
            caller.append(task2)
            await asyncio.wait({task2})
            assert task2.cancelled() and kept == [2]

            # 3. The caller cancelled from inside the call, before it returns.
            caller.clear()

            async def cancels_its_caller_then_takes() -> int:
                caller[0].cancel()
                return 3

            task3 = asyncio.create_task(
                call_keeping(runner, kept.append, cancels_its_caller_then_takes)
            )
            caller.append(task3)
            await asyncio.wait({task3})
            assert task3.cancelled() and kept == [2, 3]
        finally:
            await release(runner)

    run(main)


def test_records_taken_for_a_cancelled_reader_are_read_again(run: Run) -> None:
    """asyncio.wait_for around next_batch / async for: a timeout never loses records."""

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                for i in range(50):
                    producer.send_nowait("t", b"%d" % i, partition=0)
                await producer.flush()
            async with pykaf.aio.open_consumer(cluster.bootstrap, fetch_max_wait=0.01) as consumer:
                pc = await consumer.consume_partition("t", 0, pykaf.OLDEST)
                task = asyncio.create_task(pc.next_batch())
                # Cancel as the first batch comes back: the records it took are read again.
                while not task.done() and pc.position <= 0:
                    await asyncio.sleep(0)
                task.cancel()
                await asyncio.wait({task})
                got: list[bytes | None] = []
                if not task.cancelled():
                    got.extend(r.value for r in task.result())
                while len(got) < 50:  # a record lost would time out here
                    got.extend(r.value for r in await asyncio.wait_for(pc.next_batch(), 10))
                assert got == [b"%d" % i for i in range(50)]

    run(main)


class _TaskSteps(trio.abc.Instrument):
    """Counts the trio tasks started and the steps they take, but the fake brokers'."""

    def __init__(self) -> None:
        self.spawned = 0
        self.steps = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if "serve_listeners" not in task.name:  # the fake cluster runs in the same trio run
            self.steps += 1


def test_awaited_sends_run_no_trio_task(run: Run) -> None:
    # An awaited send() is written by the asyncio task itself, its answer read
    # by the loop (add_reader) and handed to the task's future: the client's
    # trio tasks (and so trio's guest I/O thread) take no part in a loop of them.
    # A loop with no add_reader (asyncio's proactor) leaves the reading to the
    # connection's trio reader: one step of it per answer, and no other.
    async def main() -> None:
        reader_steps = 0 if loop_reads(asyncio.get_running_loop()) else 20
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap, linger=3600) as producer:
                await producer.send("t", b"warm")
                await asyncio.sleep(0.05)  # the trio side settles down
                steps = _TaskSteps()
                trio.lowlevel.add_instrument(steps)
                try:
                    mds = [await producer.send("t", b"v%d" % i) for i in range(20)]
                finally:
                    trio.lowlevel.remove_instrument(steps)
                assert [md.offset for md in mds] == list(range(1, 21))
                assert (steps.spawned, steps.steps) == (0, reader_steps)

    run(main)


async def _values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of ``topic``'s partition 0, read from asyncio."""
    out: list[bytes] = []
    async with pykaf.aio.open_consumer(bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        while len(out) < count:
            out += [r.value for r in await asyncio.wait_for(pc.next_batch(), 30)]
    return out


def test_an_awaited_send_cancelled_in_asyncio_is_still_delivered_once(run: Run) -> None:
    # The record is appended and its request written in the send() call; the
    # cancellation (task.cancel(), asyncio.timeout()) stops only the wait.
    async def main() -> None:
        async with open_fake_cluster(1) as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap, linger=3600) as producer:
                await producer.send("t", b"warm")
                cluster.set_rtt(1, 100)  # the answers come after the cancellations
                task = asyncio.create_task(producer.send("t", b"task"))
                await asyncio.sleep(0)  # it appended, wrote, and waits for the answer
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                if sys.version_info >= (3, 11):
                    with pytest.raises(TimeoutError):
                        async with asyncio.timeout(0):
                            await producer.send("t", b"timeout")
                else:  # pragma: no cover - the same, by hand
                    again = asyncio.create_task(producer.send("t", b"timeout"))
                    await asyncio.sleep(0)
                    again.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await again
                cluster.set_rtt(1, 0)
                await asyncio.wait_for(producer.flush(), 30)
                md = await asyncio.wait_for(producer.send("t", b"after"), 30)
                assert md.offset == 3
                stats = producer.statistics()
                # Settling a batch whose waiter was cancelled broke nothing: no retry.
                assert stats.records_acked == 4 and stats.records_failed == 0
                assert stats.retries == 0
            assert await _values(cluster.bootstrap, "t", 4) == [
                b"warm",
                b"task",
                b"timeout",
                b"after",
            ]

    run(main)


def test_awaited_sends_over_a_connection_that_drops_are_each_delivered_once_in_order(
    run: Run,
) -> None:
    # The loop reads the connection (add_reader): the broker's hang-up fails
    # the requests in flight there, and each record is sent again, in order.
    senders, each = 5, 20

    async def main() -> None:
        async with open_fake_cluster(1) as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(
                cluster.bootstrap, linger=3600, request_timeout=120, retry_backoff=0.01
            ) as producer:
                await producer.send("t", b"warm")
                cluster.set_rtt(1, 5)
                cluster.lose_responses(pykaf.protocol.ProduceRequest.API_KEY, 1)
                offsets: dict[int, list[int]] = {s: [] for s in range(senders)}

                async def sender(s: int) -> None:
                    for i in range(each):
                        md = await producer.send("t", b"%d-%d" % (s, i))
                        offsets[s].append(md.offset)

                await asyncio.wait_for(asyncio.gather(*(sender(s) for s in range(senders))), 60)
                stats = producer.statistics()
            assert stats.retries >= 1 and stats.records_failed == 0
            assert sorted(o for per in offsets.values() for o in per) == list(
                range(1, 1 + senders * each)
            )
            log = await _values(cluster.bootstrap, "t", 1 + senders * each)
            for s in range(senders):
                assert [v for v in log if v.startswith(b"%d-" % s)] == [
                    b"%d-%d" % (s, i) for i in range(each)
                ]

    run(main)


def test_awaited_sends_waiting_as_the_producer_closes_are_settled(run: Run) -> None:
    # Leaving the block delivers what the sends wait for; what cannot be
    # delivered fails them: no future is left unresolved.
    async def main() -> None:
        async with open_fake_cluster(1) as cluster:
            cluster.create_topic("t", 1)
            async with pykaf.aio.open_producer(cluster.bootstrap, linger=3600) as producer:
                await producer.send("t", b"warm")
                cluster.set_rtt(1, 50)
                tasks = [asyncio.create_task(producer.send("t", b"%d" % i)) for i in range(5)]
                await asyncio.sleep(0)
            mds = await asyncio.wait_for(asyncio.gather(*tasks), 30)
            assert sorted(md.offset for md in mds) == [1, 2, 3, 4, 5]
            async with pykaf.aio.open_producer(
                cluster.bootstrap, linger=3600, delivery_timeout=1.0, retry_backoff=0.05
            ) as producer:
                await producer.send("t", b"warm")
                cluster.set_rtt(1, 200)
                tasks = [asyncio.create_task(producer.send("t", b"%d" % i)) for i in range(5)]
                await asyncio.sleep(0)
                cluster.broker_down(1)
            outcomes = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
            assert all(isinstance(o, errors.PykafError) for o in outcomes), outcomes

    run(main)


def test_async_for_decodes_in_the_readers_step_one_piece_at_a_time(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Trio only waits for each fetch answer; every piece is decoded by the
    # asyncio task that reads it, when it comes to it, as a trio reader does.
    # Decoding in trio as the answers come would decode every waiting
    # partition's piece in one trio step: their records all in memory at once
    # (on Apache Kafka, four pieces of 8 MiB: an eighth more CPU in page faults).
    partitions, per_partition = 4, 300
    consumed = [0]
    seen: list[tuple[bool, int]] = []  # (in a trio task, records decoded and not handed out)
    pcs: list[pykaf.PartitionConsumer] = []
    decode = pykaf.PartitionConsumer._decode_piece

    def watched(self: pykaf.PartitionConsumer, answer: Any) -> Any:
        waiting = sum(pc.records_fetched for pc in pcs) - consumed[0]
        seen.append((trio.lowlevel.in_trio_task(), waiting))
        return decode(self, answer)

    monkeypatch.setattr(pykaf.PartitionConsumer, "_decode_piece", watched)

    async def main() -> None:
        async with open_fake_cluster() as cluster:
            cluster.create_topic("t", partitions)
            async with pykaf.aio.open_producer(cluster.bootstrap) as producer:
                for start in range(0, per_partition, 50):  # batches of 50: pieces of their own
                    for p in range(partitions):
                        values = [b"%d" % i for i in range(start, start + 50)]
                        await producer.send_batch("t", values, partition=p)
                    await producer.flush()
            async with pykaf.aio.open_consumer(
                cluster.bootstrap, fetch_max_wait=0.05, max_partition_fetch_bytes=1
            ) as consumer:

                async def one(partition: int) -> list[bytes | None]:
                    pc = await consumer.consume_partition("t", partition, pykaf.OLDEST)
                    pcs.append(pc._trio)
                    values: list[bytes | None] = []
                    async for record in pc:  # nothing awaited in the loop
                        values.append(record.value)
                        consumed[0] += 1
                        if record.offset == per_partition - 1:
                            break
                    return values

                reads = asyncio.gather(*(one(p) for p in range(partitions)))
                got = await asyncio.wait_for(reads, 30)
        assert got == [[b"%d" % i for i in range(per_partition)]] * partitions

    run(main)
    assert len(seen) >= partitions * per_partition // 50  # a piece a batch at least
    assert not any(in_trio for in_trio, _ in seen)
    assert max(waiting for _, waiting in seen) == 0
