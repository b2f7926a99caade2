"""pykaf.sync.Consumer and pykaf.sync.ConsumerGroup against Kafka, Tansu and the librdkafka mock:
records come back whole and in order per partition, from plain threads and a
process without an event loop; poll/consume timeouts, seek, pause, positions;
group members in threads split the partitions and commits cover exactly the
records handed out; close, Ctrl-C and bad options.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.codec import Record

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

ROOT = Path(pykaf.__file__).resolve().parent.parent
T = 30.0  # every wait has a limit: a broken consumer fails a test instead of hanging it
FAST = {"fetch_max_wait": 0.05, "retry_backoff": 0.05}
GROUP = {
    **FAST,
    "heartbeat_interval": 0.2,
    "session_timeout": 6.0,
    "rebalance_timeout": 4.0,
    "auto_commit_interval": 0.2,
}
TS = 1_700_000_000_000


@pytest.fixture
def group_broker(request: pytest.FixtureRequest, broker: Any) -> Any:
    """``broker``, with the mock's initial rebalance delay taken down to 0.2 s."""
    if broker.name == "mock":
        request.getfixturevalue("mock_cluster").set_group_initial_rebalance_delay(200)
    return broker


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """A list to put sync consumers in; whatever is still open is closed afterwards."""
    made: list[Any] = []
    yield made
    for obj in made:
        if not obj.closed:
            obj.close(timeout=T)


def expected(partition: int, i: int) -> tuple[bytes | None, bytes | None, list[Any], int]:
    """(key, value, headers, timestamp) of record ``i`` of ``partition``."""
    key = None if i % 5 == 0 else b"k%d" % i
    value = None if i % 11 == 7 else b"p%d-v%d" % (partition, i)
    headers = [("i", b"%d" % i), ("none", None)] if i % 3 == 0 else []
    return key, value, headers, TS + i


def produce(bootstrap: str, topic: str, partitions: int, n: int, start: int = 0) -> None:
    """``n`` records per partition (numbered from ``start``), with keys, headers, timestamps."""
    with pykaf.sync.Producer(bootstrap, linger=0.002) as producer:
        for p in range(partitions):
            rows = [expected(p, i) for i in range(start, start + n)]
            producer.send_many(
                topic,
                [r[1] for r in rows],
                keys=[r[0] for r in rows],
                headers=[r[2] or None for r in rows],
                timestamps=[r[3] for r in rows],
                partition=p,
                timeout=T,
            )


def check(record: Record, topic: str, partition: int, offset: int, start: int = 0) -> None:
    key, value, headers, ts = expected(partition, offset + start)
    assert (record.topic, record.partition, record.offset) == (topic, partition, offset)
    assert (record.key, record.value, list(record.headers)) == (key, value, headers)
    assert (record.timestamp, record.timestamp_type) == (ts, 0)


def poll_n(reader: Any, n: int, timeout: float = T) -> list[Record]:
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records"
        record = reader.poll(timeout=0.5)
        if record is not None:
            out.append(record)
    return out


def by_partition(records: list[Record]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r.offset)
    return dict(out)


# ------------------------------------------------------------------ Consumer


def test_reads_back_every_record_in_order(broker: Any, closing: list[Any]) -> None:
    topic = unique("sc")
    broker.create(topic, 3)
    produce(broker.bootstrap, topic, 3, 120)
    consumer = pykaf.sync.Consumer(broker.bootstrap, **FAST)
    closing.append(consumer)
    consumer.assign([(topic, p, pykaf.OLDEST) for p in range(3)])
    assert consumer.assignment() == [(topic, 0), (topic, 1), (topic, 2)]
    records = poll_n(consumer, 360)
    assert by_partition(records) == {p: list(range(120)) for p in range(3)}
    for r in records:
        check(r, topic, r.partition, r.offset)
    started = time.monotonic()
    assert consumer.poll(timeout=0.3) is None  # nothing more, and the timeout is kept
    assert 0.25 < time.monotonic() - started < 3
    assert consumer.poll(timeout=0) is None
    assert [consumer.position(topic, p) for p in range(3)] == [120, 120, 120]
    stats = consumer.statistics()
    assert isinstance(stats, pykaf.ConsumerStatistics)
    assert stats.lag == 0 and {p.position for p in stats.partitions} == {120}


def test_consume_hands_out_batches(real_broker: Any, closing: list[Any]) -> None:
    topic = unique("sc")
    real_broker.create(topic, 2)
    produce(real_broker.bootstrap, topic, 2, 300)
    consumer = pykaf.sync.Consumer(real_broker.bootstrap, **FAST)
    closing.append(consumer)
    consumer.assign([(topic, 0, pykaf.OLDEST), (topic, 1, 250)])
    first = consumer.consume(max_records=7, timeout=T)
    assert 1 <= len(first) <= 7
    records = list(first)
    deadline = time.monotonic() + T
    while len(records) < 350 and time.monotonic() < deadline:
        batch = consumer.consume(max_records=64, timeout=1)
        assert len(batch) <= 64
        records += batch
    assert by_partition(records) == {0: list(range(300)), 1: list(range(250, 300))}
    for r in records:
        check(r, topic, r.partition, r.offset)
    assert consumer.consume(timeout=0.2) == []
    with pytest.raises(errors.ConfigError):
        consumer.consume(max_records=0)


@pytest.fixture(params=["kafka", "mock"])
def exact_broker(request: pytest.FixtureRequest) -> Any:
    """Kafka and the mock: not Tansu, whose ListOffsets NEWEST is wrong after
    multi-record batches and which never answers OFFSET_OUT_OF_RANGE."""
    return bc.broker_from(request, request.param)


def test_seek_pause_resume_and_assign(exact_broker: Any, closing: list[Any]) -> None:
    topic = unique("sc")
    exact_broker.create(topic, 2)
    produce(exact_broker.bootstrap, topic, 2, 50)
    consumer = pykaf.sync.Consumer(exact_broker.bootstrap, **FAST)
    closing.append(consumer)
    # NEWEST is the default: records written before assign() are not read.
    consumer.assign([(topic, 0), (topic, 1, 10)])
    ones = poll_n(consumer, 40)
    assert by_partition(ones) == {1: list(range(10, 50))}
    assert consumer.position(topic, 0) == 50

    consumer.seek(topic, 0, 45)
    consumer.seek(topic, 1, 48)
    got = poll_n(consumer, 7)
    assert by_partition(got) == {0: [45, 46, 47, 48, 49], 1: [48, 49]}
    for r in got:
        check(r, topic, r.partition, r.offset)

    # A seek drops what was fetched but not handed out: the next record is the one sought.
    consumer.seek(topic, 0, pykaf.OLDEST)
    assert [r.offset for r in poll_n(consumer, 3)] == [0, 1, 2]
    assert consumer.position(topic, 0) == 3
    consumer.seek(topic, 0, 40)

    consumer.pause(topic, 0)
    produce(exact_broker.bootstrap, topic, 2, 5, start=50)
    later = poll_n(consumer, 5)
    assert by_partition(later) == {1: [50, 51, 52, 53, 54]}
    assert consumer.poll(timeout=0.3) is None  # partition 0 is paused
    assert consumer.position(topic, 0) == 40
    consumer.resume(topic, 0)
    resumed = poll_n(consumer, 15)
    assert by_partition(resumed) == {0: list(range(40, 55))}
    for r in resumed:
        check(r, topic, 0, r.offset)

    # assign() replaces the assignment; a kept partition keeps its position.
    consumer.assign([(topic, 0)])
    assert consumer.assignment() == [(topic, 0)]
    assert consumer.position(topic, 0) == 55
    with pytest.raises(errors.ConfigError, match="not assigned"):
        consumer.seek(topic, 1, 0)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        consumer.assign([(topic, 0), (topic, 9)])
    assert consumer.assignment() == [(topic, 0)]  # a failed assign changes nothing
    for bad in ([(topic,)], [(topic, 0, -3)], [(topic, 0, "x")], [(topic, 0), (topic, 0)]):
        with pytest.raises(errors.ConfigError):
            consumer.assign(bad)  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError):
        consumer.seek(topic, 0, -5)
    consumer.unassign()
    assert consumer.assignment() == []


def test_partition_errors_surface_from_poll(exact_broker: Any, closing: list[Any]) -> None:
    topic = unique("sc")
    exact_broker.create(topic, 2)
    produce(exact_broker.bootstrap, topic, 2, 5)
    consumer = pykaf.sync.Consumer(exact_broker.bootstrap, auto_offset_reset="none", **FAST)
    closing.append(consumer)
    consumer.assign([(topic, 0, 1000), (topic, 1, pykaf.OLDEST)])
    got: list[Record] = []
    failure: pykaf.ConsumerError | None = None
    deadline = time.monotonic() + T
    while (failure is None or len(got) < 5) and time.monotonic() < deadline:
        try:
            record = consumer.poll(timeout=0.5)
        except pykaf.ConsumerError as exc:
            failure = exc
            continue
        if record is not None:
            got.append(record)
    assert failure is not None and (failure.topic, failure.partition) == (topic, 0)
    assert isinstance(failure.error, errors.OffsetOutOfRangeError)
    assert by_partition(got) == {1: [0, 1, 2, 3, 4]}  # the other partition goes on


def test_threads_iterate_and_close_ends_the_iteration(real_broker: Any) -> None:
    topic = unique("sc")
    real_broker.create(topic, 3)
    consumer = pykaf.sync.Consumer(real_broker.bootstrap, **FAST)
    consumer.assign([(topic, p, pykaf.OLDEST) for p in range(3)])
    seen: dict[str, list[Record]] = defaultdict(list)

    def reader(name: str) -> None:
        for record in consumer:  # blocks between records; ends at close()
            seen[name].append(record)

    threads = [threading.Thread(target=reader, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    produce(real_broker.bootstrap, topic, 3, 200)
    deadline = time.monotonic() + T
    while sum(len(v) for v in seen.values()) < 600 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    consumer.close(timeout=T)
    for t in threads:
        t.join(T)
        assert not t.is_alive()
    every = sorted((r.partition, r.offset) for v in seen.values() for r in v)
    assert every == [(p, i) for p in range(3) for i in range(200)]  # each exactly once
    for records in seen.values():  # each thread got a partition's records in order
        for offsets in by_partition(records).values():
            assert offsets == sorted(offsets)
    assert consumer.closed
    with pytest.raises(errors.ClosedError):
        consumer.poll(timeout=0)
    with pytest.raises(errors.ClosedError):
        consumer.consume(timeout=0)
    with pytest.raises(errors.ClosedError):
        consumer.seek(topic, 0, 0)
    assert list(consumer) == []
    consumer.close()  # idempotent


def test_ctrl_c_interrupts_a_blocked_poll(real_broker: Any, closing: list[Any]) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt goes to the main thread; tests run elsewhere")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not handled by Python's default handler here")
    topic = unique("sc")
    real_broker.create(topic, 1)
    consumer = pykaf.sync.Consumer(real_broker.bootstrap, **FAST)
    closing.append(consumer)
    consumer.assign([(topic, 0, pykaf.OLDEST)])
    for blocked in (consumer.poll, consumer.consume, lambda: next(iter(consumer))):
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                blocked()
        finally:
            timer.cancel()
        assert time.monotonic() - started < 5
    # Still usable afterwards.
    produce(real_broker.bootstrap, topic, 1, 3)
    assert [r.offset for r in poll_n(consumer, 3)] == [0, 1, 2]


def test_bad_options_fail_at_construction() -> None:
    with pytest.raises(errors.ConfigError):
        pykaf.sync.Consumer("127.0.0.1:1", isolation_level="sometimes")
    with pytest.raises(errors.ConfigError):
        pykaf.sync.ConsumerGroup("127.0.0.1:1", "g", ["t"], heartbeat_interval=-1)
    with pytest.raises(errors.ConfigError):
        pykaf.sync.ConsumerGroup("127.0.0.1:1", "", ["t"])
    with pytest.raises(errors.ConfigError):
        pykaf.sync.ConsumerGroup("127.0.0.1:1", "g", "t")
    with pytest.raises(errors.ConfigError, match="columnar"):
        pykaf.sync.Consumer("127.0.0.1:1", columnar="yes")  # type: ignore[arg-type]


def test_script_without_an_event_loop(real_broker: Any) -> None:
    topic = unique("sc")
    real_broker.create(topic, 2)
    produce(real_broker.bootstrap, topic, 2, 10)
    script = f"""
        import os
        import pykaf, pykaf.sync

        consumer = pykaf.sync.Consumer({real_broker.bootstrap!r}, fetch_max_wait=0.05)
        consumer.assign([({topic!r}, 0, pykaf.OLDEST), ({topic!r}, 1, pykaf.OLDEST)])
        records = []
        while len(records) < 20:
            records += consumer.consume(100, timeout=30)
        print(sorted((r.partition, r.offset) for r in records) == [
            (p, i) for p in range(2) for i in range(10)
        ], flush=True)
        group = pykaf.sync.ConsumerGroup(
            {real_broker.bootstrap!r}, {unique("g")!r}, [{topic!r}],
            heartbeat_interval=0.2, session_timeout=6, fetch_max_wait=0.05,
        )
        seen = 0
        for record in group:
            seen += 1
            if seen == 20:
                break
        print(seen, flush=True)
        child = os.fork()
        if child == 0:  # objects made before a fork cannot be used in the child
            try:
                consumer.poll(timeout=0)
                os._exit(10)
            except RuntimeError:
                os._exit(0)
        _, status = os.waitpid(child, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        # No close: both are closed at interpreter exit.
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
    assert result.stdout.split() == ["True", "20", "child", "0"], result.stdout


# ------------------------------------------------------------------ ConsumerGroup


def wait_until(cond: Any, what: str, timeout: float = T) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_two_group_members_in_threads_split_the_partitions(
    group_broker: Any, closing: list[Any]
) -> None:
    broker = group_broker
    topic, group_id = unique("sg"), unique("g")
    broker.create(topic, 4)
    seen: dict[int, list[Record]] = {0: [], 1: []}
    stop = threading.Event()

    def member(n: int, group: pykaf.sync.ConsumerGroup) -> None:
        while not stop.is_set():
            seen[n] += group.consume(max_records=50, timeout=0.1)

    one = pykaf.sync.ConsumerGroup(broker.bootstrap, group_id, [topic], **GROUP)
    closing.append(one)
    threads = [threading.Thread(target=member, args=(0, one))]
    threads[0].start()
    try:
        # The first member alone reads everything.
        wait_until(lambda: one.assignment() == {topic: [0, 1, 2, 3]}, "the first assignment")
        produce(broker.bootstrap, topic, 4, 100)
        wait_until(lambda: len(seen[0]) >= 400, "the first 400 records")
        # The auto-commit takes them in (the mock refuses the commit on revoke
        # once the rebalance has begun, so it could not be counted on).
        wait_until(
            lambda: {p.committed for p in one.statistics().partitions} == {100},
            "the auto-commit",
        )
        two = pykaf.sync.ConsumerGroup(broker.bootstrap, group_id, [topic], **GROUP)
        closing.append(two)
        threads.append(threading.Thread(target=member, args=(1, two)))
        threads[1].start()

        def split() -> bool:
            a, b = one.assignment().get(topic, []), two.assignment().get(topic, [])
            return bool(a) and bool(b) and sorted(a + b) == [0, 1, 2, 3]

        wait_until(split, "a split between the two members")
        produce(broker.bootstrap, topic, 4, 100, start=100)
        wait_until(lambda: len(seen[0]) + len(seen[1]) >= 800, "every record")
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(T)
    mine = {0: one.assignment()[topic], 1: two.assignment()[topic]}
    # The second member starts where the first one's commits left its
    # partitions, and neither member sees a record twice.
    first = by_partition(seen[0])
    assert first == {p: list(range(200 if p in mine[0] else 100)) for p in range(4)}
    assert by_partition(seen[1]) == {p: list(range(100, 200)) for p in mine[1]}
    for r in seen[0] + seen[1]:
        check(r, topic, r.partition, r.offset)
    one.commit(timeout=T)
    two.commit(timeout=T)
    committed = {p.partition: p.committed for g in (one, two) for p in g.statistics().partitions}
    assert committed == {p: 200 for p in range(4)}


def test_commit_covers_what_was_handed_out_and_a_new_member_resumes(
    group_broker: Any,
) -> None:
    broker = group_broker
    topic, group_id = unique("sg"), unique("g")
    broker.create(topic, 1)
    produce(broker.bootstrap, topic, 1, 30)
    # The mock lets the next member in only once the one that left has timed out.
    config = {**GROUP, "session_timeout": 3.0}

    class Crash(Exception):
        pass

    with (
        pytest.raises(Crash),
        pykaf.sync.ConsumerGroup(
            broker.bootstrap, group_id, [topic], **{**config, "auto_commit_interval": 3600.0}
        ) as first,
    ):
        assert [r.offset for r in poll_n(first, 10)] == list(range(10))
        first.commit(timeout=T)  # the 10th record too: commit() marks all handed out
        [stats] = first.statistics().partitions
        assert (stats.committed, stats.position) == (10, 10)
        assert [r.offset for r in poll_n(first, 5)] == [10, 11, 12, 13, 14]
        # Leaving by an exception: 10-13 are done (the next one was asked for),
        # 14 is not; the close commits 14 and nothing past it.
        raise Crash
    assert first.closed
    with pytest.raises(errors.ClosedError):
        first.poll(timeout=0)
    with pytest.raises(errors.ClosedError):
        first.commit()

    with pykaf.sync.ConsumerGroup(broker.bootstrap, group_id, [topic], **config) as second:
        records = poll_n(second, 16)
        assert [r.offset for r in records] == list(range(14, 30))
        for r in records:
            check(r, topic, 0, r.offset)

        def committed() -> int:
            return int(second.statistics().partitions[0].committed)

        # The auto-commit takes what is done: not the last record, until the next call.
        wait_until(lambda: committed() == 29, "the auto-commit of 14-28")
        time.sleep(0.5)
        assert committed() == 29
        assert second.poll(timeout=0.3) is None
        wait_until(lambda: committed() == 30, "the auto-commit of 29")
        assert second.statistics().lag == 0


# -- auto_mark=False and mark: only marked offsets are committed --------------------


def _committed(fake: Any, group_id: str) -> int:
    with pykaf.sync.Admin(fake.bootstrap) as admin:
        found = admin.list_group_offsets(group_id, [("t", 0)])
    meta = found.get(("t", 0))
    return -1 if meta is None else meta.offset


@pytest.fixture
def fake() -> Any:
    """A fake cluster whose one-partition topic "t" holds 10 records."""
    from pykaf.testing import FakeClusterThread

    with FakeClusterThread(1) as cluster:
        cluster.create_topic("t", 1)
        with pykaf.sync.Producer(cluster.bootstrap, linger=0.002) as producer:
            producer.send_many("t", [b"%d" % i for i in range(10)], partition=0)
        yield cluster


def test_without_auto_mark_commits_carry_only_the_marked_offsets(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(
        fake.bootstrap, "manual", ["t"], auto_mark=False, auto_commit=False, **GROUP
    ) as group:
        assert [r.offset for r in poll_n(group, 6)] == list(range(6))
        group.mark("t", 0, 3)
        group.mark("t", 0, 2)  # marks only move forward
        group.commit(timeout=T)
        assert _committed(fake, "manual") == 3
        with pytest.raises(errors.ConfigError):
            group.mark("t", 1, 1)  # not assigned: the topic has one partition
    # Closing commits the mark, not what was handed out.
    assert _committed(fake, "manual") == 3


def test_without_auto_mark_auto_commit_commits_the_marks(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(fake.bootstrap, "auto", ["t"], auto_mark=False, **GROUP) as group:
        poll_n(group, 8)
        group.poll(timeout=0.3)  # asking for more marks nothing without auto_mark
        group.mark("t", 0, 5)
        wait_until(lambda: _committed(fake, "auto") == 5, "the auto-commit of the mark")
    assert _committed(fake, "auto") == 5


def test_with_auto_mark_what_was_handed_out_is_committed(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(fake.bootstrap, "default", ["t"], **GROUP) as group:
        poll_n(group, 4)
        group.commit(timeout=T)
        assert _committed(fake, "default") == 4


def test_commit_of_given_offsets_commits_those_and_leaves_the_marks(fake: Any) -> None:
    """commit(offsets=) commits exactly what it names; the next plain commit the marks."""
    with pykaf.sync.ConsumerGroup(
        fake.bootstrap, "given", ["t"], auto_commit=False, **GROUP
    ) as group:
        poll_n(group, 6)
        group.commit(offsets={("t", 0): 2}, timeout=T)
        assert _committed(fake, "given") == 2  # not 6: what was handed out waits
        group.commit(timeout=T)
        assert _committed(fake, "given") == 6
        group.commit(offsets={("t", 0): 1}, timeout=T)  # any offset, backwards too
        assert _committed(fake, "given") == 1
        group.commit(timeout=T)  # the mark, committed before, goes again
        assert _committed(fake, "given") == 6


# -- columnar=True: fetched pieces handed out as ColumnBatch ---------------------------


def columns_n(reader: Any, n: int, timeout: float = T) -> list[pykaf.ColumnBatch]:
    """``consume_columns`` until the batches hold ``n`` records."""
    out: list[pykaf.ColumnBatch] = []
    deadline = time.monotonic() + timeout
    while sum(len(b) for b in out) < n:
        assert time.monotonic() < deadline, f"got {sum(len(b) for b in out)} of {n} records"
        batch = reader.consume_columns(timeout=0.5)
        if batch is not None:
            assert len(batch) > 0
            out.append(batch)
    return out


def check_columns(batch: pykaf.ColumnBatch, topic: str) -> list[int]:
    """Check every record of ``batch`` against :func:`expected`; its offsets."""
    assert batch.topic == topic
    offsets = list(batch.offsets)
    for i, offset in enumerate(offsets):
        key, value, headers, ts = expected(batch.partition, offset)
        assert (batch.key(i), batch.value(i), batch.headers(i)) == (key, value, headers)
        assert (batch.timestamps[i], batch.timestamp_types[i]) == (ts, 0)
    assert batch.next_offset == offsets[-1] + 1
    return offsets


def test_columnar_consumer_hands_out_column_batches(broker: Any, closing: list[Any]) -> None:
    topic = unique("scc")
    broker.create(topic, 3)
    produce(broker.bootstrap, topic, 3, 120)
    consumer = pykaf.sync.Consumer(broker.bootstrap, columnar=True, **FAST)
    closing.append(consumer)
    consumer.assign([(topic, p, pykaf.OLDEST) for p in range(3)])
    got: dict[int, list[int]] = defaultdict(list)
    for batch in columns_n(consumer, 360):
        got[batch.partition] += check_columns(batch, topic)
    assert dict(got) == {p: list(range(120)) for p in range(3)}
    assert [consumer.position(topic, p) for p in range(3)] == [120, 120, 120]
    assert consumer.consume_columns(timeout=0.2) is None
    # Rows are refused on a columnar consumer, and columns on a row consumer.
    for call in (
        lambda: consumer.poll(timeout=0),
        lambda: consumer.consume(10, 0),
        lambda: iter(consumer),
    ):
        with pytest.raises(errors.ConfigError, match="consume_columns"):
            call()
    rows = pykaf.sync.Consumer(broker.bootstrap, **FAST)
    closing.append(rows)
    with pytest.raises(errors.ConfigError, match="columnar=True"):
        rows.consume_columns(timeout=0)
    # A seek drops what was fetched: the next batch of the partition starts there.
    consumer.seek(topic, 1, 100)
    again = columns_n(consumer, 20)
    assert [o for b in again for o in check_columns(b, topic)] == list(range(100, 120))
    assert {b.partition for b in again} == {1}
    consumer.close(timeout=T)
    with pytest.raises(errors.ClosedError):
        consumer.consume_columns(timeout=0)


def test_columnar_group_commits_the_batches_handed_out(group_broker: Any) -> None:
    broker = group_broker
    topic, group_id = unique("sgc"), unique("g")
    broker.create(topic, 2)
    produce(broker.bootstrap, topic, 2, 40)
    with pykaf.sync.ConsumerGroup(
        broker.bootstrap, group_id, [topic], columnar=True, auto_commit=False, **GROUP
    ) as group:
        got: dict[int, list[int]] = defaultdict(list)
        for batch in columns_n(group, 80):
            got[batch.partition] += check_columns(batch, topic)
        assert dict(got) == {0: list(range(40)), 1: list(range(40))}
        group.commit(timeout=T)  # every batch handed out, the last one included
        stats = group.statistics()
        assert sorted((p.partition, p.committed) for p in stats.partitions) == [(0, 40), (1, 40)]
        with pytest.raises(errors.ConfigError, match="consume_columns"):
            group.poll(timeout=0)
