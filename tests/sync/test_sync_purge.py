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


def test_staged_and_buffered_records_fail_with_purged_error() -> None:
    outcomes: list[BaseException | None] = []
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=5.0, buffer_records=10) as producer,
    ):
        fake.create_topic("t", 1)
        producer.produce("t", b"before", partition=0)
        producer.flush(T)
        for i in range(30):
            producer.produce(
                "t",
                b"%d" % i,
                partition=0,
                headers=HEADERS,
                on_delivery=lambda error, md: outcomes.append(error),
            )
        future = producer.send_async("t", b"future", partition=0, headers=HEADERS)
        producer.produce("t", b"unobserved", partition=0, headers=HEADERS)
        # The buffer holds 10; the rest wait in the sync producer's backlog.
        _until(lambda: producer.statistics().buffered_records == 10)
        assert producer.purge() == 32
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


def test_runs_behind_a_full_buffer_are_purged_whole() -> None:
    outcomes: list[BaseException | None] = []
    with (
        FakeClusterThread(1) as fake,
        pykaf.sync.Producer(fake.bootstrap, linger=5.0, buffer_records=10) as producer,
    ):
        fake.create_topic("t", 1)
        for i in range(40):  # a long run with callbacks: the loop hands it over, it waits
            producer.produce(
                "t", b"%d" % i, partition=0, on_delivery=lambda e, md: outcomes.append(e)
            )
        producer.produce("t", b"k", key=b"k", partition=0)  # each keyed record ends a run
        futures = [producer.send_async("t", b"f%d" % i, partition=0) for i in range(40)]
        producer.produce("t", b"k", key=b"k", partition=0)
        for i in range(40):  # and a plain run, all behind the first in the backlog
            producer.produce("t", b"p%d" % i, partition=0)
        _until(lambda: producer.statistics().buffered_records == 10)
        # 10 buffered and the 2 x 41 behind; the first run's 30 others fail as it wakes.
        assert producer.purge() == 92
        producer.flush(T)  # nothing raised: the purge told of the records without callbacks
        assert len(outcomes) == 40
        assert all(isinstance(e, errors.PurgedError) for e in outcomes)
        assert all(isinstance(f.exception(T), errors.PurgedError) for f in futures)
        assert len(producer) == 0
        assert fake.high_watermark("t", 0) == 0
