"""pykaf.sync.Producer against real brokers (Kafka, Tansu, the librdkafka mock), from threads."""

from __future__ import annotations

import _thread
import concurrent.futures
import gc
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

import pytest

import pykaf
import pykaf._sync.producer
import pykaf.codec
import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread, MockCluster

ck = pytest.importorskip("confluent_kafka")

ROOT = Path(pykaf.__file__).resolve().parent.parent
QUIET = {"log_level": 0}
PRODUCE = 0
# Every blocking call in these tests has a timeout, so a broken producer fails
# a test instead of hanging the run.
T = 30.0


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: Any, partitions: int = 1) -> str:
    """A fresh topic on ``broker`` (a ``broker_clients.Broker``), ready to take records."""
    topic = unique("sync")
    broker.create(topic, partitions)
    return topic


def consume(bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Any]:
    """Read ``count`` messages from the start of ``partitions`` with confluent-kafka."""
    consumer = ck.Consumer(
        {
            **QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "pykaf-unused",
            "enable.auto.commit": False,
        }
    )
    messages: list[Any] = []
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + T
        while len(messages) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            messages.append(msg)
        # Nothing more than expected either.
        extra = consumer.poll(0.5)
        assert extra is None or extra.error(), f"unexpected extra message {extra.value()!r}"
    finally:
        consumer.close()
    assert len(messages) == count, f"got {len(messages)} of {count} messages"
    return messages


def test_send_returns_metadata_and_the_record_arrives(
    real_broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(real_broker, 2)
    producer = producer_factory(real_broker.bootstrap)
    mds = [
        producer.send(
            topic,
            b"value-%d" % i,
            key=b"key-%d" % i,
            partition=1,
            headers=[("h", b"%d" % i)],
            timestamp=1_700_000_000_000 + i,
            timeout=T,
        )
        for i in range(3)
    ]
    assert [(md.topic, md.partition, md.offset) for md in mds] == [(topic, 1, i) for i in range(3)]
    assert [md.timestamp for md in mds] == [1_700_000_000_000 + i for i in range(3)]
    messages = consume(real_broker.bootstrap, topic, [0, 1], 3)
    assert [(m.partition(), m.offset()) for m in messages] == [(1, 0), (1, 1), (1, 2)]
    assert [m.value() for m in messages] == [b"value-%d" % i for i in range(3)]
    assert [m.key() for m in messages] == [b"key-%d" % i for i in range(3)]
    assert [m.headers() for m in messages] == [[("h", b"%d" % i)] for i in range(3)]
    assert [m.timestamp()[1] for m in messages] == [1_700_000_000_000 + i for i in range(3)]


def test_context_manager_delivers_and_closes(real_broker: Any) -> None:
    topic = create_topic(real_broker)
    with pykaf.sync.Producer(real_broker.bootstrap, linger=0.5) as producer:
        futures = [producer.send_async(topic, b"%d" % i) for i in range(20)]
        assert not producer.closed
    assert producer.closed
    # Leaving the block delivered what was buffered (linger alone would still wait).
    assert all(f.done() for f in futures)
    assert [f.result().offset for f in futures] == list(range(20))
    assert [m.value() for m in consume(real_broker.bootstrap, topic, [0], 20)] == [
        b"%d" % i for i in range(20)
    ]
    with pytest.raises(errors.ClosedError):
        producer.send(topic, b"late", timeout=T)
    with pytest.raises(errors.ClosedError):
        producer.send_async(topic, b"late")
    producer.close(timeout=T)  # idempotent


def test_an_exception_in_the_block_propagates_and_closes(real_broker: Any) -> None:
    topic = create_topic(real_broker)

    class Stop(Exception):
        pass

    with pytest.raises(Stop), pykaf.sync.Producer(real_broker.bootstrap) as producer:
        producer.send(topic, b"before", timeout=T)
        raise Stop
    assert producer.closed
    with pytest.raises(errors.ClosedError):
        producer.send(topic, b"after", timeout=T)


def test_send_from_many_threads(real_broker: Any, producer_factory: Any) -> None:
    topic = create_topic(real_broker, 3)
    producer = producer_factory(real_broker.bootstrap)
    threads, per_thread = 8, 40

    def worker(n: int) -> list[pykaf.RecordMetadata]:
        out = []
        for i in range(per_thread):
            if i % 2:
                out.append(producer.send(topic, b"%d-%d" % (n, i), partition=0, timeout=T))
            else:
                future = producer.send_async(topic, b"%d-%d" % (n, i), partition=0)
                out.append(future.result(T))
        return out

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(worker, range(threads)))
    offsets = sorted(md.offset for mds in results for md in mds)
    assert offsets == list(range(threads * per_thread))
    messages = consume(real_broker.bootstrap, topic, [0], threads * per_thread)
    values = [m.value() for m in messages]
    for n in range(threads):  # each thread's records arrive in the order it sent them
        mine = [v for v in values if v.startswith(b"%d-" % n)]
        assert mine == [b"%d-%d" % (n, i) for i in range(per_thread)]


def test_send_async_resolves_futures_in_order(real_broker: Any, producer_factory: Any) -> None:
    topic = create_topic(real_broker, 2)
    producer = producer_factory(real_broker.bootstrap)
    futures = [producer.send_async(topic, b"%d" % i, partition=i % 2) for i in range(2000)]
    producer.flush(timeout=T)
    assert all(f.done() for f in futures)
    mds = [f.result() for f in futures]
    assert [md.offset for md in mds[0::2]] == list(range(1000))
    assert [md.offset for md in mds[1::2]] == list(range(1000))
    assert {md.partition for md in mds[0::2]} == {0}


def test_send_async_waits_for_buffer_space_and_keeps_order(
    real_broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(real_broker)
    # A buffer of 5 records: almost every record waits for space in the loop.
    producer = producer_factory(real_broker.bootstrap, buffer_records=5)
    futures = []
    for i in range(300):
        futures.append(producer.send_async(topic, b"%d" % i))
        if i % 20 == 19:
            time.sleep(0.005)  # later records arrive while earlier ones still wait
    mds = [f.result(T) for f in futures]
    assert [md.offset for md in mds] == list(range(300))
    assert producer.statistics().buffered_records == 0
    values = [m.value() for m in consume(real_broker.bootstrap, topic, [0], 300)]
    assert values == [b"%d" % i for i in range(300)]


def test_send_many(real_broker: Any, producer_factory: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap)
    assert producer.send_many(topic, [b"a", b"b", None], keys=[b"1", None, b"3"], timeout=T) == 3
    assert producer.send_many(topic, (b"g%d" % i for i in range(4)), timeout=T) == 4
    assert producer.send_many(topic, pa.array([b"x", b"y"], pa.binary()), timeout=T) == 2
    assert producer.send_many(topic, [], timeout=T) == 0
    messages = consume(real_broker.bootstrap, topic, [0], 9)
    assert [m.value() for m in messages] == [
        b"a",
        b"b",
        None,
        *(b"g%d" % i for i in range(4)),
        b"x",
        b"y",
    ]
    assert [m.key() for m in messages[:3]] == [b"1", None, b"3"]
    with pytest.raises(ValueError):
        producer.send_many(topic, [b"a", b"b"], keys=[b"1"], timeout=T)


def test_send_many_async_pipelines_batches_in_order(
    real_broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap)
    futures = [
        producer.send_many_async(topic, [b"%d-%d" % (n, i) for i in range(100)], partition=0)
        for n in range(5)
    ]
    assert all(isinstance(f, concurrent.futures.Future) for f in futures)
    assert [f.result(T) for f in futures] == [100] * 5
    values = [m.value() for m in consume(real_broker.bootstrap, topic, [0], 500)]
    assert values == [b"%d-%d" % (n, i) for n in range(5) for i in range(100)]


def test_send_many_async_reports_failures_through_its_future() -> None:
    from pykaf.testing import FakeClusterThread

    with (
        FakeClusterThread(1, auto_create_topics=False) as strict,
        pykaf.sync.Producer(strict.bootstrap, delivery_timeout=2.0) as producer,
    ):
        future = producer.send_many_async("no-such-topic", [b"a", b"b"])
        with pytest.raises((errors.DeliveryError, errors.UnknownTopicOrPartitionError)):
            future.result(T)


def test_one_threads_mixed_calls_keep_their_order(real_broker: Any, producer_factory: Any) -> None:
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap, buffer_records=3)
    expected: list[bytes] = []
    futures = []
    for round_ in range(5):
        values = [b"%d-async-%d" % (round_, i) for i in range(10)]
        futures += [producer.send_async(topic, v) for v in values]
        expected += values
        batch = [b"%d-many-%d" % (round_, i) for i in range(7)]
        # send_many from this thread waits; the async records queued before it
        # must still be written first.
        assert producer.send_many(topic, batch, timeout=T) == 7
        expected += batch
        producer.send(topic, b"%d-sync" % round_, timeout=T)
        expected.append(b"%d-sync" % round_)
    producer.flush(timeout=T)
    assert all(f.done() and f.exception() is None for f in futures)
    values = [m.value() for m in consume(real_broker.bootstrap, topic, [0], len(expected))]
    assert values == expected


def test_flush_and_statistics(real_broker: Any, producer_factory: Any) -> None:
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap, linger=5.0)
    futures = [producer.send_async(topic, b"%d" % i) for i in range(50)]
    producer.flush(timeout=T)  # sends without waiting for the 5 s linger
    assert all(f.done() for f in futures)
    stats = producer.statistics()
    assert isinstance(stats, pykaf.ProducerStatistics)
    assert stats.records_acked == 50 and stats.buffered_records == 0


def test_record_errors_reach_the_caller(real_broker: Any, producer_factory: Any) -> None:
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap, max_message_bytes=1000)
    assert producer.send(topic, b"first", timeout=T).offset == 0
    with pytest.raises(errors.RecordTooLargeError):
        producer.send(topic, b"x" * 5000, timeout=T)
    future = producer.send_async(topic, b"x" * 5000)
    with pytest.raises(errors.RecordTooLargeError):
        future.result(T)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        producer.send(topic, b"v", partition=7, timeout=T)
    with pytest.raises(TypeError):
        producer.send(topic, "not bytes", timeout=T)  # type: ignore[arg-type]
    # Give the producer's sender time to look at the partition after that failure.
    time.sleep(0.1)
    # Only those records failed: the producer goes on.
    assert producer.send(topic, b"fine", timeout=T).offset == 1


def test_blocking_call_from_a_delivery_callback_raises(
    real_broker: Any, producer_factory: Any
) -> None:
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap)
    seen: list[BaseException] = []
    chained: list[concurrent.futures.Future[pykaf.RecordMetadata]] = []

    def callback(_: Any) -> None:
        try:
            producer.send(topic, b"from callback", timeout=T)
        except RuntimeError as exc:
            seen.append(exc)
        chained.append(producer.send_async(topic, b"chained"))  # does not block: allowed

    producer.send_async(topic, b"first").add_done_callback(callback)
    producer.flush(timeout=T)
    assert len(seen) == 1 and "loop thread" in str(seen[0])
    assert len(chained) == 1
    assert chained[0].result(T).offset == 1


def test_script_without_an_event_loop(real_broker: Any) -> None:
    topic = create_topic(real_broker)
    script = f"""
        import threading
        import pykaf.sync

        producer = pykaf.sync.Producer({real_broker.bootstrap!r}, linger=0.5, buffer_records=3)
        print(producer.send({topic!r}, b"first", timeout=30).offset, flush=True)
        threads = [
            threading.Thread(target=producer.send, args=({topic!r}, b"t%d" % i, ))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(10):
            producer.send_async({topic!r}, b"a%d" % i)
        # No flush, no close: the records buffered for the 0.5 s linger, and
        # those waiting for room in the 3-record buffer, must still be
        # delivered when the interpreter exits.
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
    values = [m.value() for m in consume(real_broker.bootstrap, topic, [0], 15)]
    assert values[0] == b"first"
    assert sorted(values[1:5]) == [b"t%d" % i for i in range(4)]
    assert values[5:] == [b"a%d" % i for i in range(10)]


def test_mock_cluster_across_brokers_and_retries(
    mock_cluster: MockCluster, producer_factory: Any
) -> None:
    # Mock only: it answers Produce with injected errors (Kafka cannot be made to).
    mock_cluster.create_topic("spread", 6, 3)
    producer = producer_factory(mock_cluster.bootstrap, retry_backoff=0.01, request_timeout=5)
    mock_cluster.push_request_errors(PRODUCE, 6, 6)  # NOT_LEADER_OR_FOLLOWER twice, then fine

    def worker(n: int) -> list[pykaf.RecordMetadata]:
        return [
            producer.send("spread", b"%d-%d" % (n, i), key=b"k%d" % i, timeout=T) for i in range(30)
        ]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = [md for mds in pool.map(worker, range(4)) for md in mds]
    assert len({(md.partition, md.offset) for md in results}) == 120
    assert len({md.partition for md in results}) > 1
    messages = consume(mock_cluster.bootstrap, "spread", list(range(6)), 120)
    assert sorted(m.value() for m in messages) == sorted(
        b"%d-%d" % (n, i) for n in range(4) for i in range(30)
    )


def test_send_timeout_on_a_slow_broker(mock_cluster: MockCluster, producer_factory: Any) -> None:
    # Mock only: it delays one broker's answers on demand (set_rtt); Kafka cannot.
    mock_cluster.create_topic("slow", 1, 1)
    mock_cluster.set_partition_leader("slow", 0, 2)
    producer = producer_factory(mock_cluster.bootstrap)
    assert producer.send("slow", b"warm", timeout=T).offset == 0
    mock_cluster.set_rtt(2, 3000)
    with pytest.raises(errors.KafkaTimeoutError):
        producer.send("slow", b"late", timeout=0.2)
    mock_cluster.set_rtt(2, 0)


def test_ctrl_c_interrupts_a_blocked_send(mock_cluster: MockCluster, producer_factory: Any) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt goes to the main thread; tests run elsewhere")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not handled by Python's default handler here")
    # Mock only: a send is kept blocked by delaying the broker's answers (set_rtt).
    mock_cluster.create_topic("stuck", 1, 1)
    mock_cluster.set_partition_leader("stuck", 0, 3)
    producer = producer_factory(mock_cluster.bootstrap)
    assert producer.send("stuck", b"warm", timeout=T).offset == 0
    mock_cluster.set_rtt(3, 5000)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            producer.send("stuck", b"interrupted")
    finally:
        timer.cancel()
    mock_cluster.set_rtt(3, 0)
    # The producer is still usable after the interruption.
    assert producer.send("stuck", b"after", timeout=T).offset >= 1


def test_send_async_blocks_when_the_buffer_is_full(
    mock_cluster: MockCluster, producer_factory: Any
) -> None:
    # Mock only: records are kept waiting by delaying the broker's answers (set_rtt).
    mock_cluster.create_topic("full", 1, 1)
    mock_cluster.set_partition_leader("full", 0, 1)
    producer = producer_factory(mock_cluster.bootstrap, buffer_records=2)
    assert producer.send("full", b"warm", timeout=T).offset == 0
    mock_cluster.set_rtt(1, 10_000)
    # 2 records fill the buffer, staged or buffered: the next one has no room.
    futures = [producer.send_async("full", b"%d" % i) for i in range(2)]
    with pytest.raises(errors.KafkaTimeoutError, match="no room"):
        producer.send_async("full", b"no room", timeout=0.2)
    mock_cluster.set_rtt(1, 0)
    assert [f.result(T).offset for f in futures] == [1, 2]


def test_bad_options_and_unreachable_brokers_fail_at_construction() -> None:
    with pytest.raises(errors.ConfigError):
        pykaf.sync.Producer("127.0.0.1:1", acks="sometimes")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.KafkaConnectionError):
        pykaf.sync.Producer(f"127.0.0.1:{port}", connect_timeout=1, request_timeout=1)


def test_send_many_takes_arrow_strings(real_broker: Any, producer_factory: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = create_topic(real_broker)
    producer = producer_factory(real_broker.bootstrap)
    assert producer.send_many(topic, pa.array(["x", None, "zé"]), timeout=T) == 3
    values = [m.value() for m in consume(real_broker.bootstrap, topic, [0], 3)]
    assert values == [b"x", None, "zé".encode()]


@pytest.mark.parametrize("name", ["Producer", "Consumer", "ConsumerGroup", "Admin"])
def test_a_confluent_style_dict_is_refused_at_once(name: str) -> None:
    # pykaf.sync.Producer({"bootstrap.servers": ...}) used to be read as the
    # host "bootstrap.servers" and fail 30 s later resolving it.
    cls = getattr(pykaf.sync, name)
    args: tuple[object, ...] = ("group", ["topic"]) if name == "ConsumerGroup" else ()
    with pytest.raises(pykaf.errors.ConfigError, match="options as keywords"):
        cls({"bootstrap.servers": "localhost:9092"}, *args)


@pytest.mark.skipif(
    pykaf.codec.IMPLEMENTATION != "cython", reason="only the compiled send_async untracks"
)
def test_send_async_futures_are_left_to_reference_counting_until_they_hold_more() -> None:
    # 300,000 live futures tracked by the cyclic collector cost more than the
    # rest of send_async; one that holds a callback or an error is tracked,
    # so a cycle through it is still collected.
    with FakeClusterThread(1) as fake, pykaf.sync.Producer(fake.bootstrap) as producer:
        fake.create_topic("t", 1)
        plain = producer.send_async("t", b"plain")
        assert not gc.is_tracked(plain)
        assert plain.result(T).offset == 0
        assert not gc.is_tracked(plain)  # a result holds nothing that leads back
        looped = producer.send_async("t", b"looped")
        keep = [looped]
        looped.add_done_callback(lambda future, keep=keep: None)  # a cycle through it
        assert gc.is_tracked(looped)
        assert looped.result(T).offset == 1
        gone = weakref.ref(looped)
        del looped, keep
        gc.collect()
        assert gone() is None
        failed = producer.send_async("t", b"x" * 2_000_000)  # over max_message_bytes
        assert isinstance(failed.exception(T), errors.RecordTooLargeError)
        assert gc.is_tracked(failed)  # its error's traceback may lead back to it


def test_a_send_many_larger_than_the_buffer_goes_first_then_the_records_behind_it() -> None:
    # The records staged after a send_many wait until it is buffered; the room
    # they held is given back, so a batch larger than the buffer still fits
    # through it and nothing waits on anything that waits on it.
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, buffer_records=10, linger=0.0) as producer,
    ):
        fake.create_topic("t", 1)
        producer.produce("t", b"warm", partition=0)  # the loop grants room: 10 records
        assert producer.flush(T) == 0
        many = producer.send_many_async("t", [b"m%d" % i for i in range(25)], partition=0)
        for i in range(30):
            producer.produce("t", b"p%d" % i, partition=0)
        assert many.result(T) == 25
        assert producer.flush(T) == 0
        assert fake.high_watermark("t", 0) == 56
        with pykaf.sync.Consumer(fake.bootstrap) as consumer:
            consumer.assign([("t", 0, pykaf.OLDEST)])
            values = [r.value for r in consumer.consume(100, timeout=T)]
            while len(values) < 56:
                more = consumer.consume(100, timeout=T)
                assert more, "records missing"
                values += [r.value for r in more]
        expected = [b"warm", *(b"m%d" % i for i in range(25)), *(b"p%d" % i for i in range(30))]
        assert values == expected
