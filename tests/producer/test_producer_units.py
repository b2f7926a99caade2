"""The producer's plain objects, without a broker: batches, re-stamping, retry order."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from pykaf import errors
from pykaf._columns import BinaryColumn
from pykaf._producer.batch import ORDINAL_STEP, ProducerBatch, restamp
from pykaf._producer.config import ProducerConfig
from pykaf._producer.delivery import _call_hook
from pykaf._producer.partitioner import PartitionerError
from pykaf._producer.producer import Producer
from pykaf._producer.records import BatchDelivery
from pykaf._producer.state import PartitionState, TopicState
from pykaf.codec import COMPRESSION_LZ4, BatchBuilder, decode_batches, murmur2


def _built(compression: int = 0) -> bytes:
    b = BatchBuilder(compression=compression)
    for i in range(5):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")])
    return b.build(producer_id=7, producer_epoch=1, base_sequence=100)


@pytest.mark.parametrize("compression", [0, COMPRESSION_LZ4])
def test_restamp_changes_the_producer_fields_and_keeps_a_valid_crc(compression: int) -> None:
    raw = _built(compression)
    out = restamp(raw, 9001, 4, 0)
    (before,) = decode_batches(raw)
    (after,) = decode_batches(out, check_crc=True)  # raises on a stale CRC
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (9001, 4, 0)
    assert after.crc != before.crc
    assert [r.value for r in after.records] == [r.value for r in before.records]
    assert [r.headers for r in after.records] == [r.headers for r in before.records]
    assert after.compression_type == compression
    assert len(out) == len(raw)


def test_restamp_of_the_same_values_is_the_identity() -> None:
    raw = _built()
    assert restamp(raw, 7, 1, 100) == raw


def _batch(p: PartitionState, count: int = 1) -> ProducerBatch:
    b = ProducerBatch(p.topic, p.partition, BatchBuilder(), 0.0, p.next_ordinal)
    p.next_ordinal += ORDINAL_STEP
    b.count = count
    return b


def test_requeue_puts_returned_batches_first_in_their_original_order() -> None:
    p = PartitionState("t", 0)
    b0, b1, b2, b3 = (_batch(p) for _ in range(4))
    p.queue.append(b3)  # sealed later, never sent
    # Answers came back out of order (two requests, the later one first).
    p.retry.extend([b2, b0, b1])
    p.requeue()
    assert list(p.queue) == [b0, b1, b2, b3]
    assert p.retry == []


def test_batches_lists_everything_unsettled_oldest_first() -> None:
    p = PartitionState("t", 0)
    b0, b1, b2, b3 = (_batch(p) for _ in range(4))
    p.inflight.append(b1)
    p.retry.append(b0)
    p.queue.append(b2)
    p.open = b3
    assert p.batches() == [b0, b1, b2, b3]
    p.open = _batch(p, count=0)  # an empty open batch holds nothing to wait for
    assert p.batches() == [b0, b1, b2]


def test_add_delivery_merges_consecutive_records_of_one_call() -> None:
    p = PartitionState("t", 0)
    b = _batch(p)
    d1, d2 = BatchDelivery(10), BatchDelivery(5)
    b.add_delivery(d1, 3, 0, 0)
    b.add_delivery(d1, 4, 3, 3)
    b.add_delivery(d2, 5, 7, 0)
    b.add_delivery(d1, 2, 13, 7)  # not next to d1's records (12 is someone else's)
    b.add_delivery(d1, 1, 15, 3)  # next in the batch, not in the call (keyed records)
    assert b.deliveries == [[d1, 7, 0, 0], [d2, 5, 7, 0], [d1, 2, 13, 7], [d1, 1, 15, 3]]


def test_a_split_batch_hands_each_record_and_its_tracking_to_its_part() -> None:
    p = PartitionState("t", 0)
    b, later = _batch(p, count=10), _batch(p)
    d1, d2 = BatchDelivery(5), BatchDelivery(2)
    b.buffered = 100
    b.timestamps = list(range(10))
    b.add_delivery(d1, 3, 0, 0)  # records 0-2
    b.add_waiter(3)  # record 3: a send() waits for it
    b.extras = [(4, 44, "cb4"), (9, 99, "cb9")]  # callbacks
    b.observed += 2
    b.add_delivery(d2, 2, 5, 0)  # records 5-6
    b.add_delivery(d1, 2, 7, 3)  # records 7-8
    lo = b.part(0, 4, b"lo", 20, 40, 100)
    hi = b.part(4, 10, b"hi", 24, 60, 200)
    b.split_into([(0, lo), (4, hi)])
    assert (lo.count, lo.raw, lo.base_sequence, lo.buffered) == (4, b"lo", 20, 40)
    assert (lo.deliveries, lo.waiters, lo.extras, lo.observed) == (
        [[d1, 3, 0, 0]],
        [0 + 3],
        None,
        1,
    )
    assert lo.timestamps == [0, 1, 2, 3]
    assert hi.deliveries == [[d2, 2, 1, 0], [d1, 2, 3, 3]]
    assert (hi.waiters, hi.extras, hi.observed) == (None, [(0, 44, "cb4"), (5, 99, "cb9")], 2)
    assert hi.timestamps == [4, 5, 6, 7, 8, 9]
    assert b.done and b.raw is None and b.deliveries is None
    assert b.locate(3) == (lo, 3) and b.locate(4) == (hi, 0) and b.locate(9) == (hi, 5)
    # A part split again: records find their place; parts sort between the batches.
    hi_a = hi.part(0, 2, b"a", 24, 30, 1)
    hi_b = hi.part(2, 6, b"b", 26, 30, 1)
    hi.split_into([(0, hi_a), (2, hi_b)])
    assert b.locate(6) == (hi_b, 0) and b.locate(5) == (hi_a, 1)
    assert hi_b.deliveries == [[d2, 1, 0, 1], [d1, 2, 1, 3]] and hi_b.extras == [(3, 99, "cb9")]
    p.retry.extend([later, hi_b, lo, hi_a])
    p.requeue()
    assert list(p.queue) == [lo, hi_a, hi_b, later]
    assert "#0+6 4 records" in repr(hi_b) and "split in 2" in repr(b)


async def test_batch_delivery_counts_and_raises_for_failures() -> None:
    ok = BatchDelivery(5)
    ok.settle_records("t", 0, 2, None)
    assert not ok.done
    ok.settle_records("t", 1, 3, None)
    assert ok.done
    assert await ok.wait() == 5

    bad = BatchDelivery(6)
    boom = errors.NotEnoughReplicasError("t/1: not enough replicas")

    async def settle_later() -> None:
        await trio.sleep(0.01)
        bad.settle_records("t", 0, 4, None)
        bad.settle_records("t", 1, 2, boom)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle_later)
        with pytest.raises(errors.DeliveryError) as info:
            await bad.wait()
    assert info.value.failures == [("t", 1, 2, boom)]
    assert info.value.records == 2
    assert (bad.acked, bad.failed) == (4, 2)


async def test_batch_wait_returns_once_settled() -> None:
    p = PartitionState("t", 0)
    b = _batch(p)

    async def settle() -> None:
        await trio.sleep(0.01)
        b.done = True
        assert b.event is not None
        b.event.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle)
        await b.wait()
    assert b.done


def test_span_bytes_counts_data_between_offsets() -> None:
    col = BinaryColumn.from_values([b"ab", None, b"cde", b""])
    assert col.span_bytes(0, 4) == 5
    assert col.span_bytes(1, 3) == 3
    assert col.span_bytes(2, 2) == 0
    with pytest.raises(IndexError):
        col.span_bytes(3, 5)


class _NoTasks:
    """A stand-in nursery: the tests below drive the hot path without tasks."""

    def start_soon(self, *args: object, **kwargs: object) -> None:
        pass


def _offline_producer(**options: object) -> tuple[Producer, TopicState]:
    cfg = ProducerConfig.from_kwargs(**options)
    producer = Producer(None, cfg, _NoTasks())  # type: ignore[arg-type]
    t = TopicState("t")
    t.parts = [PartitionState("t", i) for i in range(4)]
    t.count = 4
    producer._router.topics["t"] = t
    return producer, t


def _drain(producer: Producer) -> None:
    """Append what send_nowait staged (the loop would at the caller's next checkpoint)."""
    producer._acc.drain_staged()


def _partitions_used(t: TopicState) -> list[int]:
    out = []
    for p in t.parts:
        for b in p.batches():
            out.extend([p.partition] * b.count)
    return out


async def test_null_keys_stick_to_one_partition_until_its_batch_is_sealed() -> None:
    producer, t = _offline_producer(batch_records=10)
    for _ in range(10):
        producer.send_nowait("t", b"v")
    _drain(producer)
    first = [p.partition for p in t.parts if p.batches()]
    assert len(first) == 1  # ten records, one partition
    producer.send_nowait("t", b"v")  # the batch was full: sealed, a new sticky partition
    _drain(producer)
    used = sorted({p.partition for p in t.parts if p.batches()})
    assert len(used) == 2 and first[0] in used
    assert sum(len(p.queue) for p in t.parts) == 1
    assert producer.buffered_records == 11


async def test_a_non_sticky_partitioner_is_asked_for_every_null_key() -> None:
    producer, t = _offline_producer(partitioner="round_robin")
    for _ in range(8):
        producer.send_nowait("t", b"v")
    assert sorted(_partitions_used(t)) == [0, 0, 1, 1, 2, 2, 3, 3]


async def test_keyed_records_follow_murmur2_and_explicit_partitions_are_checked() -> None:
    producer, t = _offline_producer()
    producer.send_nowait("t", b"v", key=b"user-1")
    expected = (murmur2(b"user-1") & 0x7FFFFFFF) % 4
    assert _partitions_used(t) == [expected]
    producer.send_nowait("t", b"v", partition=3)
    _drain(producer)
    assert sorted(_partitions_used(t)) == sorted([expected, 3])
    for bad in (4, -1, True, "1"):
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.send_nowait("t", b"v", partition=bad)  # type: ignore[arg-type]
    assert producer.buffered_records == 2


async def test_a_partitioner_answer_out_of_range_fails_the_record() -> None:
    class Bad:
        def partition(self, topic: str, key: object, partitions: int, available: object) -> int:
            return partitions  # one too many

    producer, _t = _offline_producer(partitioner=Bad())
    with pytest.raises(PartitionerError):
        producer.send_nowait("t", b"v")
    assert producer.buffered_records == 0


async def test_send_nowait_refuses_when_the_buffer_is_full() -> None:
    producer, _t = _offline_producer(buffer_records=5)
    for _ in range(5):
        producer.send_nowait("t", b"v")
    with pytest.raises(errors.BufferFullError):
        producer.send_nowait("t", b"v")
    assert producer.buffered_records == 5


async def test_a_record_over_max_message_bytes_fails_alone() -> None:
    producer, _t = _offline_producer(max_message_bytes=1000)
    with pytest.raises(errors.RecordTooLargeError):
        producer.send_nowait("t", b"x" * 1000)
    producer.send_nowait("t", b"x" * 900)
    assert producer.buffered_records == 1


async def test_one_record_larger_than_flush_bytes_gets_a_batch_of_its_own() -> None:
    producer, t = _offline_producer(
        flush_bytes=1000, batch_bytes=100_000, max_message_bytes=100_000
    )
    producer.send_nowait("t", b"x" * 5000, partition=0)
    assert t.parts[0].open is not None and t.parts[0].open.count == 1


async def test_send_batch_fails_only_the_record_too_large_for_any_batch() -> None:
    producer, t = _offline_producer(batch_bytes=10_000, max_message_bytes=10_000)
    values = [b"a" * 10, b"b" * 20_000, b"c" * 10]
    delivery = await producer.send_batch("t", values, partition=1)
    assert (delivery.failed, delivery.pending) == (1, 2)
    assert sum(b.count for b in t.parts[1].batches()) == 2
    assert producer.buffered_records == 2
    ((topic, partition, count, error),) = delivery._failures
    assert (topic, partition, count) == ("t", 1, 1)
    assert isinstance(error, errors.RecordTooLargeError)


async def test_send_batch_sticky_fills_one_partition_then_the_next() -> None:
    producer, t = _offline_producer(batch_records=100)
    delivery = await producer.send_batch("t", [b"v"] * 250)
    counts = sorted(b.count for p in t.parts for b in p.batches())
    assert counts == [50, 100, 100]
    assert delivery.pending == 250
    assert producer.buffered_records == 250


async def test_a_delivery_awaited_after_its_failure_takes_it_back_from_flush() -> None:
    producer, _t = _offline_producer(batch_bytes=10_000, max_message_bytes=10_000)
    delivery = await producer.send_batch("t", [b"x" * 20_000], partition=0)
    assert len(producer._reports.unreported) == 1  # nobody has awaited it yet
    with pytest.raises(errors.DeliveryError):
        await delivery.wait()
    assert producer._reports.unreported == []  # the delivery reported it: flush will not again
    ignored = await producer.send_batch("t", [b"x" * 20_000], partition=0)
    assert not ignored.observed
    with pytest.raises(errors.DeliveryError) as info:
        producer._reports.raise_unreported()
    assert info.value.records == 1


async def test_the_sender_is_woken_when_a_batch_gets_its_first_record() -> None:
    producer, t = _offline_producer()

    class Sender:
        wakes = 0

        def wake(self) -> None:
            self.wakes += 1

    sender = Sender()
    t.parts[0].broker = sender  # type: ignore[assignment]
    with pytest.raises(TypeError):
        producer.send_nowait("t", "not bytes", partition=0)  # type: ignore[arg-type]
    assert sender.wakes == 0
    producer.send_nowait("t", b"v", partition=0)
    producer.send_nowait("t", b"v", partition=0)
    _drain(producer)
    assert sender.wakes == 1


@pytest.mark.parametrize("keyed", [False, True])
async def test_send_batch_closed_part_way_fails_only_the_unbuffered_records(keyed: bool) -> None:
    # The buffer holds 5 of 8 records; the producer closes while send_batch
    # waits for room. The 5 buffered may still be delivered, so they must not
    # be reported failed: send_batch returns and the delivery fails the 3 others.
    producer, _t = _offline_producer(buffer_records=5)
    settled: list[tuple[int, int, BaseException | None]] = []

    def hook(partition: int, index: int, count: int, offset: int, ts: int, error: Any) -> None:
        settled.append((index, count, error))

    values = [b"v%d" % i for i in range(8)]
    keys = [b"k%d" % i for i in range(8)] if keyed else None
    deliveries = []

    async def send() -> None:
        deliveries.append(
            await producer.send_batch("t", values, keys=keys, partition=None, on_settle=hook)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        assert producer.buffered_records == 5 and not deliveries
        producer._acc.close()
    (delivery,) = deliveries
    assert (delivery.pending, delivery.failed) == (5, 3)
    failed = sorted(i for index, n, _ in settled for i in range(index, index + n))
    assert len(failed) == 3
    if not keyed:  # keyed records are buffered grouped by partition: any 3 of them
        assert failed == [5, 6, 7]
    assert all(isinstance(error, errors.ClosedError) for _, _, error in settled)


async def test_send_batch_closed_before_any_record_is_buffered_raises() -> None:
    producer, _t = _offline_producer(buffer_records=5)
    for _ in range(5):
        producer.send_nowait("t", b"v")
    with trio.move_on_after(5):
        async with trio.open_nursery() as nursery:
            outcome: list[BaseException] = []

            async def send() -> None:
                try:
                    await producer.send_batch("t", [b"a", b"b"])
                except errors.ClosedError as exc:
                    outcome.append(exc)

            nursery.start_soon(send)
            await trio.testing.wait_all_tasks_blocked()
            producer._acc.close()
    assert len(outcome) == 1


async def test_keyed_send_batch_fails_only_the_record_too_large() -> None:
    producer, _t = _offline_producer(batch_bytes=10_000, max_message_bytes=10_000)
    values = [b"a" * 10, b"b" * 20_000, b"c" * 10]
    delivery = await producer.send_batch("t", values, keys=[b"1", b"2", b"3"])
    assert (delivery.failed, delivery.pending) == (1, 2)


async def test_keyed_send_batch_groups_by_partition_and_maps_indices_back() -> None:
    producer, t = _offline_producer()
    settled: list[tuple[int, int, int]] = []

    def hook(partition: int, index: int, count: int, offset: int, ts: int, error: Any) -> None:
        settled.append((partition, index, count))

    keys = [b"k%d" % (i % 5) for i in range(40)]
    delivery = await producer.send_batch(
        "t", [b"v%d" % i for i in range(40)], keys=keys, on_settle=hook
    )
    assert delivery.order is not None and sorted(delivery.order) == list(range(40))
    want = [(murmur2(k) & 0x7FFFFFFF) % 4 for k in keys]
    for p in t.parts:
        for b in p.batches():
            assert b.count == want.count(p.partition)
    # Fail every batch: the hook hears each call index once, in runs of consecutive ones.
    for p in t.parts:
        for b in p.batches():
            for delivery_, n, _first, index in b.deliveries or []:
                _call_hook(delivery_, p.partition, index, n, -1, -1, errors.ClosedError("x"))
    heard = sorted(i for _, index, count in settled for i in range(index, index + count))
    assert heard == list(range(40))
    assert all(want[index] == partition for partition, index, _ in settled)


async def test_keyed_send_batch_refuses_a_bad_partition_before_buffering_any() -> None:
    class Bad:
        def partition(self, topic: str, key: Any, partitions: int, available: Any) -> int:
            return 9 if key == b"bad" else 0

    producer, _t = _offline_producer(partitioner=Bad())
    with pytest.raises(PartitionerError):
        await producer.send_batch("t", [b"a", b"b"], keys=[b"good", b"bad"])
    assert producer.buffered_records == 0


def _batch_sizes(p: PartitionState) -> list[int]:
    sizes = []
    for b in p.batches():
        assert b.builder is not None
        sizes.append(b.builder.size)
    return sizes


@pytest.mark.parametrize("how", ["send_batch", "send_nowait"])
async def test_a_backed_up_partition_grows_its_open_batch_up_to_batch_bytes(how: str) -> None:
    # Nothing is sent here: once the first batch is sealed at flush_bytes it
    # waits in the partition's queue, and the next batches grow to batch_bytes.
    producer, t = _offline_producer(flush_bytes=1000, batch_bytes=8000, max_message_bytes=1000)
    values = [b"x" * 100] * 300
    if how == "send_batch":
        await producer.send_batch("t", values, partition=2)
    else:
        for value in values:
            producer.send_nowait("t", value, partition=2)
        _drain(producer)
    sizes = _batch_sizes(t.parts[2])
    assert sum(b.count for b in t.parts[2].batches()) == 300
    assert sizes[0] <= 1000  # sealed at flush_bytes: nothing was waiting yet
    assert all(size <= 8000 for size in sizes)
    assert all(size > 4000 for size in sizes[1:-1])  # grown while the queue was backed up


async def test_sticky_records_move_on_instead_of_growing_a_batch() -> None:
    producer, t = _offline_producer(flush_bytes=1000, batch_bytes=8000, max_message_bytes=1000)
    await producer.send_batch("t", [b"x" * 100] * 300)
    sizes = [size for p in t.parts for size in _batch_sizes(p)]
    assert len(sizes) > 20 and max(sizes) <= 1000


async def test_a_one_partition_topic_grows_its_batch_for_null_keys_too() -> None:
    producer, _t = _offline_producer(flush_bytes=1000, batch_bytes=8000, max_message_bytes=1000)
    one = TopicState("one")
    one.parts = [PartitionState("one", 0)]
    one.count = 1
    producer._router.topics["one"] = one
    for _ in range(300):
        producer.send_nowait("one", b"x" * 100)
    _drain(producer)
    sizes = _batch_sizes(one.parts[0])
    assert sizes[0] <= 1000 and max(sizes) > 4000


async def test_a_batch_full_of_records_does_not_grow() -> None:
    producer, t = _offline_producer(
        flush_bytes=1000, batch_bytes=8000, max_message_bytes=1000, batch_records=5
    )
    await producer.send_batch("t", [b"x"] * 50, partition=0)
    assert [b.count for b in t.parts[0].batches()] == [5] * 10
