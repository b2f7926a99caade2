"""``pykaf.sync.Producer.purge``: staged, buffered and in-flight records given up (fake cluster)."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import pytest

import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread

T = 10.0
HEADERS = [("h", b"1")]  # records with headers are staged one by one, never in runs


def _until(check: Any, timeout: float = T) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_staged_and_buffered_records_fail_with_purged_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcomes: list[BaseException | None] = []
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=5.0, buffer_records=40) as producer,
    ):
        fake.create_topic("t", 1)
        producer.produce("t", b"before", partition=0)
        producer.flush(T)
        for i in range(10):  # buffered (one by one: they have headers), held by linger
            producer.produce(
                "t",
                b"%d" % i,
                partition=0,
                headers=HEADERS,
                on_delivery=lambda error, md: outcomes.append(error),
            )
        _until(lambda: producer._staging.staged == 0)
        with monkeypatch.context() as m:
            m.setattr(producer._staging, "_scheduled", True)  # the loop drains nothing more
            for i in range(10, 30):  # staged in the caller's thread, not drained yet
                producer.produce(
                    "t", b"%d" % i, partition=0, on_delivery=lambda e, md: outcomes.append(e)
                )
            future = producer.send_async("t", b"future", partition=0)
            producer.produce("t", b"unobserved", partition=0)
            assert producer._staging.staged == 22
            assert producer.purge() == 32
        assert producer._staging.staged == 0
        assert producer.statistics().buffered_records == 0
        assert producer.poll(0) == 30
        assert len(outcomes) == 30
        assert all(isinstance(e, errors.PurgedError) and not e.in_flight for e in outcomes)
        with pytest.raises(errors.PurgedError):
            future.result(T)
        assert len(producer) == 0
        producer.flush(T)  # the purge told of the unobserved record: nothing raised
        producer.produce("t", b"after", partition=0, headers=HEADERS)
        producer.flush(T)
        assert fake.high_watermark("t", 0) == 2  # "before" and "after"


def test_in_flight_records_fail_with_in_flight_set() -> None:
    outcomes: list[BaseException | None] = []
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=0.0) as producer,
    ):
        fake.create_topic("t", 1)
        producer.send("t", b"warm-up", partition=0)
        fake.set_rtt(1, 500)
        producer.produce("t", b"a", partition=0, on_delivery=lambda e, md: outcomes.append(e))
        _until(lambda: producer.statistics().in_flight > 0)
        assert producer.purge(in_queue=False) == 1
        assert producer.poll(0) == 1
        assert isinstance(outcomes[0], errors.PurgedError) and outcomes[0].in_flight
        fake.set_rtt(1, 0)
        producer.flush(T)
        assert len(outcomes) == 1


def test_purge_of_a_closed_producer_purges_nothing() -> None:
    with FakeClusterThread(1) as fake:
        producer = pykaf.sync.Producer(fake.bootstrap)
        producer.close(T)
        assert producer.purge() == 0


def test_a_send_many_waiting_for_space_fails_its_unbuffered_records() -> None:
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=5.0, buffer_records=10) as producer,
    ):
        fake.create_topic("t", 1)
        future: concurrent.futures.Future[int] = producer.send_many_async(
            "t", [b"%d" % i for i in range(25)], partition=0
        )
        _until(lambda: producer.statistics().buffered_records == 10)
        assert producer.purge() == 10  # the 15 others fail as the waiting call wakes
        with pytest.raises(errors.DeliveryError) as caught:
            future.result(T)
        assert caught.value.records == 25
        assert all(isinstance(f[3], errors.PurgedError) for f in caught.value.failures)
        producer.flush(T)
        assert fake.high_watermark("t", 0) == 0


def test_staged_runs_behind_a_send_many_are_purged_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes: list[BaseException | None] = []
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=5.0, buffer_records=10) as producer,
    ):
        fake.create_topic("t", 1)
        # A send_many larger than the buffer: it buffers 10 and waits for room
        # (linger holds them), and every record staged after it waits for it.
        ahead = producer.send_many_async("t", [b"m%d" % i for i in range(15)], partition=0)
        _until(lambda: producer.statistics().buffered_records == 10)
        staging = producer._staging
        with monkeypatch.context() as m:
            m.setattr(staging, "_scheduled", True)
            m.setattr(staging.stager, "max_pending", 200)  # as if room had been granted
            for i in range(40):  # a run with callbacks
                producer.produce(
                    "t", b"%d" % i, partition=0, on_delivery=lambda e, md: outcomes.append(e)
                )
            producer.produce("t", b"k", key=b"k", partition=0)  # each keyed record ends a run
            futures = [producer.send_async("t", b"f%d" % i, partition=0) for i in range(40)]
            producer.produce("t", b"k", key=b"k", partition=0)
            for i in range(40):  # and a plain run
                producer.produce("t", b"p%d" % i, partition=0)
            assert staging.staged == 122
        # The 10 buffered and the 122 staged behind the send_many; its other 5
        # fail as it wakes.
        assert producer.purge() == 132
        with pytest.raises(errors.DeliveryError) as info:
            ahead.result(T)
        assert info.value.records == 15
        assert all(isinstance(e, errors.PurgedError) for *_, e in info.value.failures)
        producer.flush(T)  # nothing raised: the purge told of the records without callbacks
        assert len(outcomes) == 40
        assert all(isinstance(e, errors.PurgedError) for e in outcomes)
        assert all(isinstance(f.exception(T), errors.PurgedError) for f in futures)
        assert len(producer) == 0
        assert fake.high_watermark("t", 0) == 0
