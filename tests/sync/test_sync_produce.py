"""pykaf.sync.Producer.produce: records staged in the caller's thread, callbacks from poll/flush."""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
import time
import uuid
from typing import Any

import pytest
import trio

import pykaf
import pykaf._sync.producer
import pykaf.sync
from pykaf import errors
from pykaf.testing import MockCluster

broker_clients = pytest.importorskip("broker_clients")

T = 30.0  # every blocking call has a timeout: a broken producer fails, never hangs
TS = 1_700_000_000_000


@pytest.fixture(params=["fake", "mock", "kafka"])
def broker(request: pytest.FixtureRequest) -> Any:
    """pykaf's fake cluster, a librdkafka mock cluster and the session's Apache Kafka."""
    return broker_clients.broker_from(request, request.param)


def create_topic(broker: Any, partitions: int = 1) -> str:
    topic = f"produce-{uuid.uuid4().hex[:8]}"
    broker.create(topic, partitions)
    return topic


def poll_until(producer: pykaf.sync.Producer, count: int) -> int:
    """poll() until ``count`` callbacks ran (each poll waits up to T for one)."""
    ran = 0
    while ran < count:
        served = producer.poll(T)
        assert served, f"no callback within {T} s after {ran} of {count}"
        ran += served
    return ran


def test_callbacks_run_in_the_callers_thread_from_poll(broker: Any, producer_factory: Any) -> None:
    topic = create_topic(broker, 2)
    producer = producer_factory(broker.bootstrap)
    seen: list[tuple[int, int, BaseException | None, pykaf.RecordMetadata, int]] = []

    def callback_for(i: int) -> Any:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            seen.append((i, threading.get_ident(), error, md, len(producer)))

        return on_delivery

    for i in range(40):
        producer.produce(
            topic,
            b"value-%d" % i,
            key=b"key-%d" % i,
            partition=i % 2,
            headers=[("h", b"%d" % i)],
            timestamp=TS + i,
            on_delivery=callback_for(i),
        )
    # Nothing runs a callback but poll and flush: every record still counts.
    assert len(producer) == 40
    assert poll_until(producer, 40) == 40
    assert len(producer) == 0
    assert producer.poll(0) == 0
    for p in (0, 1):  # in the order produced, per partition
        assert [i for i, *_ in seen if i % 2 == p] == list(range(p, 40, 2))
    assert {ident for _, ident, *_ in seen} == {threading.get_ident()}
    assert all(error is None for _, _, error, _, _ in seen)
    for i, _, _, md, _ in seen:
        assert (md.topic, md.partition, md.offset) == (topic, i % 2, i // 2)
        if broker.name != "mock":  # the mock answers with a log append time of its own
            assert md.timestamp == TS + i
    for p in (0, 1):
        values = broker_clients.consume_assigned(broker.conf, topic, [p], 20, timeout=T)
        assert values == [b"value-%d" % i for i in range(p, 40, 2)]


def test_flush_runs_the_callbacks_and_returns_what_is_left(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap, linger=5.0)
    offsets: list[int] = []
    callers: set[int] = set()

    def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        assert error is None
        offsets.append(md.offset)
        callers.add(threading.get_ident())

    for i in range(300):  # plain records (the bulk path) and records with a callback
        producer.produce(topic, b"%d" % i, on_delivery=on_delivery if i % 3 == 0 else None)
    assert len(producer) == 300
    assert producer.flush(timeout=T) == 0  # sends without waiting for the 5 s linger
    assert len(producer) == 0
    assert offsets == list(range(0, 300, 3))
    assert callers == {threading.get_ident()}
    assert producer.statistics().records_acked == 300
    values = broker_clients.consume_assigned(broker.conf, topic, [0], 300, timeout=T)
    assert values == [b"%d" % i for i in range(300)]


def test_threads_producing_at_once_keep_their_order(broker: Any, producer_factory: Any) -> None:
    topic = create_topic(broker, 2)
    producer = producer_factory(broker.bootstrap)
    threads, per_thread = 4, 3000
    start = threading.Barrier(threads)

    def worker(n: int) -> None:
        start.wait()
        for i in range(per_thread):
            value = b"%d-%d" % (n, i)
            if i % 500 == 7:  # a record off the bulk path, between runs
                producer.produce(topic, value, partition=0, headers=[("n", b"%d" % n)])
            elif i % 2:
                producer.produce(topic, value, key=b"k", partition=1)
            else:
                producer.produce(topic, value, partition=0)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(T)
    assert producer.flush(timeout=T) == 0
    assert len(producer) == 0
    for p in (0, 1):  # each partition holds each thread's records in the order it sent them
        expected = [i for i in range(per_thread) if (i % 2 == 1 and i % 500 != 7) == bool(p)]
        sent = broker_clients.consume_assigned(
            broker.conf, topic, [p], threads * len(expected), timeout=T
        )
        for n in range(threads):
            assert [int(v.split(b"-")[1]) for v in sent if v.startswith(b"%d-" % n)] == expected


def test_failures_reach_on_delivery_or_the_next_flush(broker: Any, producer_factory: Any) -> None:
    topic = create_topic(broker, 2)
    producer = producer_factory(broker.bootstrap, max_message_bytes=1000)
    failed: list[tuple[BaseException | None, pykaf.RecordMetadata]] = []

    def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        failed.append((error, md))

    producer.produce(topic, b"v", partition=7, on_delivery=on_delivery)
    producer.produce(topic, b"x" * 5000, on_delivery=on_delivery)
    assert producer.flush(timeout=T) == 0  # the callbacks had them: nothing to raise
    assert {type(e): md.partition for e, md in failed} == {
        errors.UnknownTopicOrPartitionError: 7,
        errors.RecordTooLargeError: -1,
    }
    # Without a callback, the next flush raises them (a long run, the bulk path, too).
    producer.produce(topic, b"first", partition=0)
    for i in range(40):
        producer.produce(topic, b"%d" % i, partition=9)
    producer.produce(topic, b"x" * 5000)
    with pytest.raises(errors.DeliveryError) as info:
        producer.flush(timeout=T)
    assert info.value.records == 41
    kinds = {type(error) for _, _, _, error in info.value.failures}
    assert kinds == {errors.UnknownTopicOrPartitionError, errors.RecordTooLargeError}
    assert len(producer) == 0
    assert producer.flush(timeout=T) == 0  # reported once
    # The producer goes on.
    producer.produce(topic, b"fine", partition=0, on_delivery=on_delivery)
    producer.flush(timeout=T)
    assert failed[-1][0] is None and failed[-1][1].offset == 1


def test_close_delivers_what_is_staged(broker: Any) -> None:
    topic = create_topic(broker)
    delivered: list[int] = []
    producer = pykaf.sync.Producer(broker.bootstrap, linger=5.0)
    for i in range(500):
        producer.produce(topic, b"%d" % i)
    producer.produce(topic, b"last", on_delivery=lambda error, md: delivered.append(md.offset))
    producer.close(timeout=T)
    assert delivered == [500]  # close ran the callback, in this thread
    assert len(producer) == 0
    with pytest.raises(errors.ClosedError):
        producer.produce(topic, b"late")
    values = broker_clients.consume_assigned(broker.conf, topic, [0], 501, timeout=T)
    assert values == [b"%d" % i for i in range(500)] + [b"last"]


def test_poll_waits_for_a_callback_and_raises_what_a_callback_raises(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    assert producer.poll(T) == 0  # nothing produced: returns at once

    class Boom(Exception):
        pass

    def explode(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        raise Boom

    ok: list[int] = []
    producer.produce(topic, b"a", on_delivery=explode)
    producer.produce(topic, b"b", on_delivery=lambda error, md: ok.append(md.offset))
    producer.produce(topic, b"c", on_delivery=lambda error, md: ok.append(md.offset))
    with pytest.raises(Boom):
        producer.flush(timeout=T)
    assert len(producer) == 2  # their callbacks have not run yet
    assert producer.poll(0) == 2
    assert ok == [1, 2]


def test_a_full_buffer_blocks_produce_then_raises(
    mock_cluster: MockCluster, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mock only: records are kept in the buffer by delaying the broker's answers.
    mock_cluster.create_topic("full", 1, 1)
    mock_cluster.set_partition_leader("full", 0, 1)
    producer = producer_factory(mock_cluster.bootstrap, buffer_records=2, produce_block_timeout=0.2)
    assert producer.send("full", b"warm", timeout=T).offset == 0
    mock_cluster.set_rtt(1, 10_000)
    # One rule: 2 records fill the buffer, staged or buffered; the next one has no room.
    for i in range(2):
        producer.produce("full", b"%d" % i)
    with pytest.raises(errors.BufferFullError):
        producer.produce("full", b"no room")
    # A blocked produce goes on once room frees.
    done = threading.Event()

    def blocked() -> None:
        producer.produce("full", b"2")
        done.set()

    thread = threading.Thread(target=blocked)
    with monkeypatch.context() as m:
        m.setattr(producer._staging, "block", T)
        thread.start()
        mock_cluster.set_rtt(1, 0)
        thread.join(T)
    assert done.is_set()
    assert producer.flush(timeout=T) == 0
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    values = broker_clients.consume_assigned(conf, "full", [0], 4, timeout=T)
    assert values == [b"warm", b"0", b"1", b"2"]


def test_produce_block_timeout_is_checked() -> None:
    with pytest.raises(errors.ConfigError, match="produce_block_timeout"):
        pykaf.sync.Producer("127.0.0.1:1", produce_block_timeout=-1)


def test_send_async_futures_resolve_on_the_same_path(broker: Any, producer_factory: Any) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    done: list[int] = []
    futures = []
    for i in range(600):  # send_async and produce records mixed: one order
        if i % 3:
            producer.produce(topic, b"%d" % i)
        else:
            future = producer.send_async(topic, b"%d" % i)
            future.add_done_callback(lambda f: done.append(f.result().offset))
            futures.append(future)
    assert all(isinstance(f, concurrent.futures.Future) for f in futures)
    first = futures[0].result(T)  # waits (other futures settling meanwhile do not end it)
    assert first.offset == 0
    finished, _ = concurrent.futures.wait(futures, T)
    assert len(finished) == len(futures)
    assert [f.result().offset for f in futures] == list(range(0, 600, 3))
    assert sorted(done) == list(range(0, 600, 3))
    assert producer.flush(timeout=T) == 0
    values = broker_clients.consume_assigned(broker.conf, topic, [0], 600, timeout=T)
    assert values == [b"%d" % i for i in range(600)]
    # A failure goes to its future, not to flush.
    bad = producer.send_async(topic, b"v", partition=5)
    assert producer.flush(timeout=T) == 0
    assert isinstance(bad.exception(T), errors.UnknownTopicOrPartitionError)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        bad.result(0)


def test_a_forked_child_cannot_produce_through_its_parents_producer(
    broker: Any, producer_factory: Any
) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no os.fork here")
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap, linger=5.0)
    for i in range(100):  # a run is open and staged when the fork happens
        producer.produce(topic, b"%d" % i)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is its exit status
        try:
            producer.produce(topic, b"from the child")
            os._exit(10)  # staged where no loop will ever take it
        except RuntimeError:
            os._exit(0)
        except BaseException:
            os._exit(11)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert producer.flush(timeout=T) == 0
    values = broker_clients.consume_assigned(broker.conf, topic, [0], 100, timeout=T)
    assert values == [b"%d" % i for i in range(100)]


def test_a_bad_partition_fails_alone_even_beside_a_run(broker: Any, producer_factory: Any) -> None:
    topic = create_topic(broker, 2)
    producer = producer_factory(broker.bootstrap)
    for i in range(20):
        producer.produce(topic, b"%d" % i, partition=1)
    producer.produce(topic, b"bool", partition=True)  # type: ignore[arg-type]
    producer.produce(topic, b"last", partition=1)
    with pytest.raises(errors.DeliveryError) as info:
        producer.flush(timeout=T)
    assert info.value.records == 1
    values = broker_clients.consume_assigned(broker.conf, topic, [1], 21, timeout=T)
    assert values == [b"%d" % i for i in range(20)] + [b"last"]


def test_runs_of_records_with_callbacks_take_the_bulk_path(
    broker: Any, producer_factory: Any
) -> None:
    """Long runs with a callback per record: each callback hears of its own record."""
    topic = create_topic(broker, 3)
    producer = producer_factory(broker.bootstrap)
    seen: dict[bytes, tuple[BaseException | None, pykaf.RecordMetadata, int]] = {}

    def callback_for(value: bytes) -> Any:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            assert value not in seen, f"{value!r} heard of twice"
            seen[value] = (error, md, threading.get_ident())

        return on_delivery

    sent = []
    for i in range(600):  # keyless (sticky), keyed, then to partition 2: three long runs
        value = b"v-%d" % i
        sent.append(value)
        if i < 200:
            producer.produce(topic, value, on_delivery=callback_for(value))
        elif i < 400:
            producer.produce(topic, value, key=b"k%d" % (i % 7), on_delivery=callback_for(value))
        else:
            producer.produce(topic, value, partition=2, on_delivery=callback_for(value))
    for i in range(40):  # a long run to a partition that does not exist
        value = b"bad-%d" % i
        producer.produce(topic, value, partition=9, on_delivery=callback_for(value))
    assert len(producer) == 640
    assert producer.flush(timeout=T) == 0  # the callbacks had the failures: nothing to raise
    assert len(producer) == 0
    assert len(seen) == 640
    assert {ident for _, _, ident in seen.values()} == {threading.get_ident()}
    for i in range(40):
        error, md, _ = seen[b"bad-%d" % i]
        assert isinstance(error, errors.UnknownTopicOrPartitionError)
        assert (md.topic, md.offset) == (topic, -1)
    for value in sent:
        error, md, _ = seen[value]
        assert error is None and md.topic == topic and md.timestamp > 0
        assert md.partition == 2 or int(value[2:]) < 400
    for p in range(3):  # every record's offset is where the broker holds it
        mine = sorted((md.offset, v) for v, (_, md, _) in seen.items() if md.partition == p)
        assert [offset for offset, _ in mine] == list(range(len(mine)))
        held = broker_clients.consume_assigned(broker.conf, topic, [p], len(mine), timeout=T)
        assert held == [v for _, v in mine]


def test_a_broker_failure_of_a_long_run_reaches_its_callbacks_only(
    mock_cluster: MockCluster, producer_factory: Any
) -> None:
    """A run with callbacks the broker refuses: each callback is told once, flush() is quiet."""
    mock_cluster.create_topic("refused", 1)
    mock_cluster.push_request_errors(0, *[errors.TopicAuthorizationError.code] * 50)  # Produce
    producer = producer_factory(mock_cluster.bootstrap)
    heard: dict[int, BaseException | None] = {}

    def callback_for(i: int) -> Any:
        def on_delivery(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
            assert i not in heard, f"record {i} heard of twice"
            heard[i] = error

        return on_delivery

    for i in range(40):  # one long run, to the bulk path
        producer.produce("refused", b"v-%d" % i, partition=0, on_delivery=callback_for(i))
    assert producer.flush(timeout=T) == 0  # the callbacks had the failures: nothing to raise
    producer.close()  # nor at close
    mock_cluster.clear_request_errors(0)
    assert sorted(heard) == list(range(40))
    assert all(isinstance(e, errors.TopicAuthorizationError) for e in heard.values())


def test_a_callback_raising_in_a_long_run_leaves_the_rest_for_the_next_poll(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)

    class Boom(Exception):
        pass

    ok: list[int] = []

    def note(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        assert error is None
        ok.append(md.offset)

    def explode(error: BaseException | None, md: pykaf.RecordMetadata) -> None:
        raise Boom(md.offset)

    for i in range(100):  # one run of records with callbacks: the bulk path
        producer.produce(topic, b"%d" % i, partition=0, on_delivery=explode if i == 40 else note)
    with pytest.raises(Boom) as info:
        producer.flush(timeout=T)
    assert info.value.args == (40,)
    assert ok == list(range(40))
    assert len(producer) == 59  # their callbacks have not run yet
    assert producer.flush(timeout=T) == 0
    assert ok == list(range(40)) + list(range(41, 100))
    assert len(producer) == 0


def test_cancelled_send_async_futures_are_withdrawn_while_they_wait(
    mock_cluster: MockCluster, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock_cluster.create_topic("withdraw", 1, 1)
    producer = producer_factory(mock_cluster.bootstrap)
    producer.produce("withdraw", b"warm")  # room is granted: the records below are staged at once
    assert producer.flush(timeout=T) == 0
    staging = producer._staging
    with monkeypatch.context() as m:
        m.setattr(staging, "_scheduled", True)  # the loop is busy: nothing is drained yet
        ahead = producer.send_many_async("withdraw", [b"a%d" % i for i in range(5)])
        # Behind the batch, a long run and a short one.
        futures = [producer.send_async("withdraw", b"%d" % i) for i in range(40)]
        producer.produce("withdraw", b"keyed", key=b"k")  # ends the run
        futures += [producer.send_async("withdraw", b"%d" % i) for i in range(40, 45)]
        assert staging.staged == 46
        cancelled = {i for i in [*range(10, 20), 41, 43] if futures[i].cancel()}
        assert cancelled == {*range(10, 20), 41, 43}
    assert producer.flush(timeout=T) == 0
    assert ahead.result(T) == 5
    kept = [i for i in range(45) if i not in cancelled]
    assert all(futures[i].cancelled() for i in cancelled)
    assert [futures[i].result(0).offset for i in kept] == [
        *range(6, 36),
        *range(37, 37 + len(kept) - 30),
    ]
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    count = 1 + 5 + len(kept) + 1
    values = broker_clients.consume_assigned(conf, "withdraw", [0], count, timeout=T)
    assert values[6:36] == [b"%d" % i for i in kept[:30]]
    assert values[36] == b"keyed"
    assert values[37:] == [b"%d" % i for i in kept[30:]]


class _StoppedLoop:
    """A trio token whose loop has stopped; ``before`` runs first (the loop's last act)."""

    def __init__(self, before: Any = None) -> None:
        self.before = before

    def run_sync_soon(self, *args: Any, **kwargs: Any) -> None:
        if self.before is not None:
            self.before()
        raise trio.RunFinishedError("the loop has stopped")


def test_records_staged_when_the_loop_stops_fail_reported_never_dropped(
    broker: Any, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    producer.produce(topic, b"warm")  # room is granted: the records below are staged at once
    assert producer.flush(timeout=T) == 0
    staging = producer._staging
    heard: list[BaseException | None] = []
    with monkeypatch.context() as m:
        # Other threads' records staged while a drain is scheduled (none is asked for)...
        m.setattr(staging, "_scheduled", True)
        producer.produce(topic, b"cb", on_delivery=lambda e, md: heard.append(e))
        producer.produce(topic, b"plain")
        early = producer.send_async(topic, b"future")
    # ...then this caller's record finds the loop stopped.
    with monkeypatch.context() as m:
        m.setattr(staging, "_token", _StoppedLoop())
        with pytest.raises(errors.ClosedError):
            producer.produce(topic, b"mine", on_delivery=lambda e, md: heard.append(e))
    assert isinstance(early.exception(T), errors.ClosedError)
    assert producer.poll(0) == 1
    assert len(heard) == 1 and isinstance(heard[0], errors.ClosedError)  # not "mine"'s
    with pytest.raises(errors.DeliveryError) as info:
        producer.flush(timeout=T)
    assert info.value.records == 1  # "plain"
    assert len(producer) == 0
    # The producer goes on once the loop takes calls again.
    producer.produce(topic, b"after")
    assert producer.flush(timeout=T) == 0
    assert broker_clients.consume_assigned(broker.conf, topic, [0], 2, timeout=T) == [
        b"warm",
        b"after",
    ]


def test_keyed_records_take_the_bulk_path_and_each_callback_hears_of_its_own(
    broker: Any, producer_factory: Any
) -> None:
    from pykaf.codec import murmur2

    topic = create_topic(broker, 3)
    producer = producer_factory(broker.bootstrap)
    heard: dict[int, tuple[BaseException | None, pykaf.RecordMetadata]] = {}

    def callback_for(i: int) -> Any:
        return lambda error, md: heard.__setitem__(i, (error, md))

    keys = [b"key-%d" % (i % 7) for i in range(300)]
    for i, key in enumerate(keys):  # one keyed run: grouped by partition in the loop
        producer.produce(topic, b"%d" % i, key=key, on_delivery=callback_for(i))
    for i, key in enumerate(keys):  # and a keyed run without callbacks
        producer.produce(topic, b"plain-%d" % i, key=key)
    assert producer.flush(timeout=T) == 0
    assert sorted(heard) == list(range(300))
    offsets: dict[int, list[int]] = {}
    for i in range(300):
        error, md = heard[i]
        assert error is None
        assert md.partition == (murmur2(keys[i]) & 0x7FFFFFFF) % 3
        offsets.setdefault(md.partition, []).append(md.offset)
    for got in offsets.values():  # each partition's records in the order produced
        assert got == list(range(len(got)))
    for partition, got in offsets.items():
        values = broker_clients.consume_assigned(
            broker.conf, topic, [partition], 2 * len(got), timeout=T
        )
        mine = [i for i in range(300) if heard[i][1].partition == partition]
        assert values == [b"%d" % i for i in mine] + [b"plain-%d" % i for i in mine]


def test_records_with_their_own_timestamps_ride_runs_and_keep_them(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    heard: list[tuple[int, pykaf.RecordMetadata]] = []
    for i in range(100):  # a long run with callbacks, stamped
        producer.produce(
            topic,
            b"%d" % i,
            timestamp=TS + i,
            on_delivery=lambda error, md, i=i: heard.append((i, md)),
        )
    futures = [producer.send_async(topic, b"f%d" % i, timestamp=TS + 1000 + i) for i in range(50)]
    for i in range(5):  # and a short one
        producer.produce(topic, b"s%d" % i, timestamp=TS + 2000 + i)
    assert producer.flush(timeout=T) == 0
    # librdkafka's mock answers every Produce with log_append_time 1234, which
    # pykaf reports as the broker's LogAppendTime; Kafka and the fake send -1.
    mock = broker.name == "mock"
    assert [md.timestamp for _, md in sorted(heard)] == (
        [1234] * 100 if mock else [TS + i for i in range(100)]
    )
    assert [f.result(0).timestamp for f in futures] == (
        [1234] * 50 if mock else [TS + 1000 + i for i in range(50)]
    )
    records: list[Any] = []
    with pykaf.sync.Consumer(broker.bootstrap) as consumer:
        consumer.assign([(topic, 0, 0)])
        while len(records) < 155:
            got = consumer.consume(200, timeout=T)
            assert got, f"only {len(records)} of 155 records"
            records += got
    assert [r.timestamp for r in records] == (
        [TS + i for i in range(100)]
        + [TS + 1000 + i for i in range(50)]
        + [TS + 2000 + i for i in range(5)]
    )


def test_a_future_cancelled_before_the_loop_takes_it_is_skipped(
    mock_cluster: MockCluster, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records with headers are staged one by one, each asking the loop for its
    # room; the drain is held back while the future is cancelled, as when the
    # loop is busy.
    mock_cluster.create_topic("cancelled", 1, 1)
    producer = producer_factory(mock_cluster.bootstrap)
    assert producer.send("cancelled", b"warm", timeout=T).offset == 0
    staging = producer._staging
    with monkeypatch.context() as m:
        m.setattr(staging, "drain", lambda: None)
        m.setattr(staging, "_drain_soon", lambda: None)
        future = producer.send_async("cancelled", b"x", headers=[("h", b"v")])
        producer.produce("cancelled", b"after1", headers=[("h", b"v")])
        assert future.cancel()
        assert staging.staged == 2
    producer.produce("cancelled", b"after2", headers=[("h", b"v")])  # asks for the drain
    assert producer.flush(timeout=T) == 0
    assert future.cancelled()
    assert len(producer) == 0
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    values = broker_clients.consume_assigned(conf, "cancelled", [0], 3, timeout=T)
    assert values == [b"warm", b"after1", b"after2"]


def test_closing_by_an_exception_with_records_staged_and_in_flight_tells_each_record_once(
    mock_cluster: MockCluster, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock_cluster.create_topic("abandon", 1, 1)
    mock_cluster.set_partition_leader("abandon", 0, 1)
    producer = producer_factory(mock_cluster.bootstrap, buffer_records=100)
    assert producer.send("abandon", b"warm", timeout=T).offset == 0
    mock_cluster.set_rtt(1, 3000)
    heard: collections.Counter[int] = collections.Counter()
    for i in range(20):  # sent, and in flight for 3 s
        producer.produce(
            "abandon", b"%d" % i, partition=0, on_delivery=lambda e, md, i=i: heard.update([i])
        )
    deadline = time.monotonic() + T
    while producer.statistics().in_flight == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    staging = producer._staging
    monkeypatch.setattr(staging, "_scheduled", True)  # the loop is not asked to drain these
    for i in range(20, 40):
        producer.produce(
            "abandon", b"%d" % i, partition=0, on_delivery=lambda e, md, i=i: heard.update([i])
        )
    assert staging.staged == 20
    producer.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)
    mock_cluster.set_rtt(1, 0)
    producer.poll(0)
    assert sorted(heard) == list(range(40))
    assert max(heard.values()) == 1
    assert len(producer) == 0


def test_a_failed_stamped_run_tells_each_record_its_own_timestamp(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    heard: list[tuple[int, BaseException | None, pykaf.RecordMetadata]] = []
    for i in range(20):  # a long run to a partition the topic does not have
        producer.produce(
            topic,
            b"%d" % i,
            partition=7,
            timestamp=TS + i,
            on_delivery=lambda error, md, i=i: heard.append((i, error, md)),
        )
    assert producer.flush(timeout=T) == 0
    assert [i for i, _, _ in heard] == list(range(20))
    assert all(isinstance(error, errors.UnknownTopicOrPartitionError) for _, error, _ in heard)
    assert [md.timestamp for _, _, md in heard] == [TS + i for i in range(20)]


def test_a_record_the_loop_took_before_it_stopped_is_the_loops_to_report(
    broker: Any, producer_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    staging = producer._staging
    portal = producer._portal
    heard: list[BaseException | None] = []
    with monkeypatch.context() as m:
        # A flush elsewhere drains what was staged, then the loop refuses the call.
        m.setattr(staging, "_token", _StoppedLoop(lambda: portal.run_sync(staging.drain)))
        producer.produce(topic, b"taken", on_delivery=lambda e, md: heard.append(e))  # no error
    assert producer.flush(timeout=T) == 0
    assert heard == [None]
    assert broker_clients.consume_assigned(broker.conf, topic, [0], 1, timeout=T) == [b"taken"]


def test_a_timestamp_past_int64_fails_alone_beside_a_stamped_run(
    broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(broker)
    producer = producer_factory(broker.bootstrap)
    heard: dict[int, BaseException | None] = {}
    for i in range(40):
        stamp = 1 << 64 if i == 20 else TS + i
        producer.produce(
            topic,
            b"%d" % i,
            timestamp=stamp,
            on_delivery=lambda e, md, i=i: heard.__setitem__(i, e),
        )
    assert producer.flush(timeout=T) == 0
    assert sorted(heard) == list(range(40))
    assert [i for i, error in heard.items() if error is not None] == [20]
    values = broker_clients.consume_assigned(broker.conf, topic, [0], 39, timeout=T)
    assert values == [b"%d" % i for i in range(40) if i != 20]
