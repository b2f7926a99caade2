"""``Producer.purge``: buffered and in-flight records given up, on the fake cluster.

Buffered records fail with ``PurgedError(in_flight=False)`` and never reach
the log; records of a request in flight fail with ``in_flight=True`` while
the broker may still write them; with idempotence the producer bumps its
epoch so what it sends next is accepted whatever became of them.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pykaf
from pykaf import errors
from pykaf.testing import FakeCluster, open_fake_cluster

PRODUCE = pykaf.protocol.ProduceRequest.API_KEY
NOT_LEADER = 6
#: Nothing is sent before a flush (or 5 s): the records stay buffered.
HELD: dict[str, Any] = {"linger": 5.0}


async def _log(cluster: FakeCluster, topic: str) -> list[bytes | None]:
    """The values of partition 0 of ``topic``, from offset 0 to the end."""
    out: list[Any] = []
    async with pykaf.open_consumer(cluster.bootstrap) as consumer:
        end = await consumer.client.get_offset(topic, 0, pykaf.NEWEST)
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        with trio.fail_after(10):
            while pc.position < end:
                out += await pc.next_batch()
    return [m.value for m in out]


def _record(outcomes: list[BaseException | None]) -> Any:
    return lambda error, metadata: outcomes.append(error)


async def _in_flight(producer: pykaf.Producer) -> None:
    with trio.fail_after(5):
        while producer.statistics().in_flight == 0:
            await trio.sleep(0.005)


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
async def test_buffered_records_fail_with_purged_error_and_never_reach_the_log(
    idempotence: bool,
) -> None:
    outcomes: list[BaseException | None] = []
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, idempotence=idempotence, **HELD
        ) as producer:
            producer.send_nowait("t", b"before", partition=0)
            await producer.flush()
            for i in range(10):
                producer.send_nowait(
                    "t", b"%d" % i, partition=0, on_delivery=lambda e, md: outcomes.append(e)
                )
            for i in range(5):
                producer.send_nowait("t", b"unobserved %d" % i, partition=0)
            assert producer.buffered_records == 15
            assert producer.purge() == 15
            assert producer.buffered_records == 0
            assert len(outcomes) == 10
            assert all(isinstance(e, errors.PurgedError) and not e.in_flight for e in outcomes)
            await producer.flush()  # the purge told of the unobserved ones: nothing raised
            producer.send_nowait("t", b"after", partition=0)
            await producer.flush()
            assert producer.statistics().epoch_bumps == 0  # nothing was sent: no gap
        assert await _log(cluster, "t") == [b"before", b"after"]


async def test_a_waiting_send_raises_purged_error() -> None:
    # An awaited record is sent at once (it does not linger), so the send here
    # waits behind a lingering record that fills the buffer.
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, buffer_records=1, **HELD) as producer,
            trio.open_nursery() as nursery,
        ):
            await producer.flush()  # the topic is known
            outcomes: list[BaseException | None] = []
            producer.send_nowait(
                "t", b"held", partition=0, on_delivery=lambda e, md: outcomes.append(e)
            )

            async def send() -> None:
                with pytest.raises(errors.PurgedError):
                    await producer.send("t", b"x", partition=0)

            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            assert producer.purge(in_flight=False) == 1  # the buffered one; the send gives up
            assert len(outcomes) == 1 and isinstance(outcomes[0], errors.PurgedError)


async def test_in_queue_false_leaves_buffered_records_alone() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(cluster.bootstrap, **HELD) as producer:
            producer.send_nowait("t", b"kept", partition=0)
            assert producer.purge(in_queue=False) == 0
            await producer.flush()
        assert await _log(cluster, "t") == [b"kept"]


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
async def test_in_flight_records_fail_at_once_and_the_broker_may_still_write_them(
    idempotence: bool,
) -> None:
    outcomes: list[BaseException | None] = []
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(cluster.bootstrap, idempotence=idempotence) as producer:
            cluster.set_rtt(1, 500)  # the broker writes, then answers 0.5 s later
            producer.send_nowait("t", b"a", partition=0, on_delivery=_record(outcomes))
            await _in_flight(producer)
            assert producer.purge(in_queue=False) == 1
            assert len(outcomes) == 1
            assert isinstance(outcomes[0], errors.PurgedError) and outcomes[0].in_flight
            cluster.set_rtt(1, 0)
            await producer.send("t", b"b", partition=0)
            assert len(outcomes) == 1  # the ignored answer settled nothing again
            assert producer.statistics().epoch_bumps == (1 if idempotence else 0)
        # "a" was written: purging in flight gives no guarantee either way.
        assert await _log(cluster, "t") == [b"a", b"b"]


async def test_an_idempotent_producer_goes_on_after_a_purged_request_that_was_not_written() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(cluster.bootstrap, idempotence=True) as producer:
            # The first Produce is answered NOT_LEADER after 0.5 s, unwritten: had
            # the producer kept its sequence numbers, "b" would follow a gap.
            cluster.push_request_errors(PRODUCE, NOT_LEADER, rtt_ms=500)
            epoch = producer.producer_epoch
            producer.send_nowait("t", b"a", partition=0)
            await _in_flight(producer)
            assert producer.purge() == 1
            md = await producer.send("t", b"b", partition=0)
            assert md.offset == 0
            assert (producer.producer_id, producer.producer_epoch) != (-1, epoch)
            assert producer.statistics().epoch_bumps == 1
        assert await _log(cluster, "t") == [b"b"]


async def test_purging_in_a_transaction_makes_it_abort() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with pykaf.open_producer(
            cluster.bootstrap, transactional_id="purge-txn", **HELD
        ) as producer:
            producer.begin_transaction()
            producer.send_nowait("t", b"x", partition=0, on_delivery=lambda e, m: None)
            assert producer.purge() == 1
            with pytest.raises(errors.TransactionAbortableError):
                await producer.commit_transaction()
            await producer.abort_transaction()
            assert producer.statistics().epoch_bumps == 0  # nothing was sent: no gap
            producer.begin_transaction()
            producer.send_nowait("t", b"y", partition=0)
            await producer.commit_transaction()
        assert await _log(cluster, "t") == [b"y"]


async def test_purge_of_a_closed_producer_purges_nothing() -> None:
    async with open_fake_cluster(1) as cluster:
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            pass
        assert producer.purge() == 0


async def test_a_send_batch_waiting_for_space_fails_the_records_it_had_not_buffered() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, buffer_records=10, **HELD) as producer,
            trio.open_nursery() as nursery,
        ):
            deliveries: list[pykaf.BatchDelivery] = []

            async def send_batch() -> None:
                values = [b"%d" % i for i in range(25)]
                deliveries.append(await producer.send_batch("t", values, partition=0))

            nursery.start_soon(send_batch)
            with trio.fail_after(5):
                while producer.buffered_records < 10:
                    await trio.sleep(0.005)
            assert producer.purge() == 10
        with pytest.raises(errors.DeliveryError) as caught:
            await deliveries[0].wait()
        assert caught.value.records == 25
        assert all(isinstance(f[3], errors.PurgedError) for f in caught.value.failures)
        assert cluster.high_watermark("t", 0) == 0


async def test_a_send_waiting_for_buffer_space_raises_purged_error() -> None:
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 1)
        async with (
            pykaf.open_producer(cluster.bootstrap, buffer_records=1, **HELD) as producer,
            trio.open_nursery() as nursery,
        ):
            producer.send_nowait("t", b"buffered", partition=0)

            async def send() -> None:
                with pytest.raises(errors.PurgedError):
                    await producer.send("t", b"waiting", partition=0)

            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            assert producer.purge() == 1  # the buffered record; the waiting one fails as it wakes
        assert cluster.high_watermark("t", 0) == 0


@pytest.mark.parametrize("keys", [[b"a", b"d", b"b"], [b"x", None, b"z"]])
async def test_a_purge_while_send_batch_waits_for_metadata_purges_its_records(
    keys: list[bytes | None],
) -> None:
    # The keyed path with a null key goes record by record: it must see the
    # purge too, though it never waits for buffer space.
    async with open_fake_cluster(1) as fake:
        fake.create_topic("k", 2)
        async with pykaf.open_producer(fake.bootstrap, linger=0.002) as producer:
            await producer.send("k", b"warm", partition=0)
            router = producer._router
            ready_topic = router.ready_topic
            gate = trio.Event()

            async def slow(topic: str) -> Any:
                await gate.wait()
                return await ready_topic(topic)

            router.ready_topic = slow  # type: ignore[method-assign]
            outcome: list[BaseException | None] = []

            async def sender() -> None:
                delivery = await producer.send_batch("k", [b"a", b"b", b"c"], keys=keys)
                try:
                    await delivery.wait()
                    outcome.append(None)
                except errors.DeliveryError as exc:
                    outcome.append(exc.failures[0][3])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await trio.testing.wait_all_tasks_blocked()
                producer.purge()
                gate.set()
            assert len(outcome) == 1 and isinstance(outcome[0], errors.PurgedError)
