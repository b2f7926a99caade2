"""``send_nowait``'s staging fed from other threads (what ``pykaf.sync`` stands on).

The async producer runs in a portal's loop; plain threads call its
``send_nowait`` (the compiled stager) directly. Runs, loose records (headers,
large values) and keyed records keep each thread's order; room in the buffer
comes from the loop, and a thread that finds none waits for it, then gives
up; closing, or a loop that stops, leaves no record unreported.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf._producer.staging import SMALL, Staging
from pykaf._sync.portal import ContextHandle, Portal, get_portal

bc = pytest.importorskip("broker_clients")

T = 30.0


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Any:
    """pykaf's fake cluster."""
    return bc.broker_from(request, "fake")


@pytest.fixture
def opened(broker: Any) -> Iterator[Any]:
    """Opens async producers in the shared portal; exits what a test left open."""
    portal = get_portal()
    handles: list[ContextHandle[Any]] = []

    def open_(**config: Any) -> tuple[Portal, Any, Staging]:
        producer, handle = portal.start_context(
            partial(pykaf.open_producer, broker.bootstrap, **config), timeout=T
        )
        handles.append(handle)
        assert producer._staging is not None
        return portal, producer, producer._staging

    yield open_
    for handle in handles:
        if not handle.done:
            handle.exit(timeout=T)


def _record(thread: int, i: int) -> dict[str, Any]:
    """Thread ``thread``'s record ``i``: plain, keyed, with headers, or too big for a run."""
    value = b"%d-%d" % (thread, i)
    kind = i % 10
    if kind == 3:
        return {"value": value, "key": b"k%d" % (i % 3), "partition": 0}
    if kind == 5:
        return {"value": value, "headers": [("h", b"1")]}
    if kind == 7:
        return {"value": value + b"." * SMALL}
    return {"value": value}


def test_threads_keep_their_order_whatever_the_mix(broker: Any, opened: Any) -> None:
    topic = bc.unique("threads")
    broker.create(topic, 1)
    portal, producer, staging = opened(linger=0.005)
    heard: list[tuple[bytes, BaseException | None, Any]] = []
    n = 3000  # past a CHUNK's reservation with two threads

    def on(value: bytes) -> Any:
        return lambda e, md: heard.append((value, e, md))

    def produce(thread: int) -> None:
        for i in range(n):
            record = _record(thread, i)
            value = record.pop("value")
            producer.send_nowait(
                topic, value, on_delivery=on(value) if i % 4 == 0 else None, **record
            )

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(T)
    portal.run(producer.flush, timeout=T)
    values = bc.consume_assigned(broker.conf, topic, [0], 2 * n, timeout=T)
    for t in range(2):
        mine = [v for v in values if v.startswith(b"%d-" % t)]
        assert mine == [_record(t, i)["value"] for i in range(n)]
    assert len(heard) == 2 * ((n + 3) // 4)
    assert all(e is None and values[md.offset] == value for value, e, md in heard)
    assert staging.staged == 0


def test_keyed_records_go_where_their_keys_hash(broker: Any, opened: Any) -> None:
    topic = bc.unique("threads-keyed")
    broker.create(topic, 4)
    portal, producer, _ = opened(linger=0.005)
    portal.run(producer.send, topic, b"warm")  # the topic is known: keyed runs hash at drain
    heard: list[tuple[int, Any]] = []

    def produce() -> None:
        for i in range(400):
            producer.send_nowait(
                topic,
                b"%d" % i,
                key=b"key-%d" % (i % 8),
                on_delivery=lambda e, md, i=i: heard.append((i, md)),
            )

    thread = threading.Thread(target=produce)
    thread.start()
    thread.join(T)
    portal.run(producer.flush, timeout=T)
    assert len(heard) == 400
    where: dict[int, int] = {}
    for i, md in heard:  # one partition per key, in order there
        assert where.setdefault(i % 8, md.partition) == md.partition
    for k in range(8):
        offsets = [md.offset for i, md in sorted(heard, key=lambda h: h[0]) if i % 8 == k]
        assert offsets == sorted(offsets)


def test_a_thread_without_room_waits_then_raises_buffer_full(opened: Any, broker: Any) -> None:
    topic = bc.unique("threads-full")
    broker.create(topic, 1)
    portal, producer, staging = opened(buffer_records=100, linger=30.0)
    staging.block = 0.2
    taken: list[int] = []
    raised: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(1000):
                producer.send_nowait(topic, b"%d" % i)
                taken.append(i)
        except errors.BufferFullError as exc:
            raised.append(exc)

    thread = threading.Thread(target=produce)
    thread.start()
    thread.join(T)
    assert raised and len(taken) == 100  # exactly the limit, staged or not
    assert portal.run_sync(lambda: producer.buffered_records) == 100
    portal.run(producer.flush, timeout=T)
    values = bc.consume_assigned(broker.conf, topic, [0], 100, timeout=T)
    assert values == [b"%d" % i for i in range(100)]


def test_a_thread_waiting_for_room_goes_on_once_there_is_some(opened: Any, broker: Any) -> None:
    topic = bc.unique("threads-wait")
    broker.create(topic, 1)
    portal, producer, staging = opened(buffer_records=50, linger=0.05)
    staging.block = T

    def produce() -> None:
        for i in range(500):  # ten times the buffer: it waits for acknowledgements
            producer.send_nowait(topic, b"%d" % i)

    thread = threading.Thread(target=produce)
    thread.start()
    thread.join(T)
    portal.run(producer.flush, timeout=T)
    values = bc.consume_assigned(broker.conf, topic, [0], 500, timeout=T)
    assert values == [b"%d" % i for i in range(500)]


def test_closing_while_threads_produce_leaves_nothing_unreported(opened: Any, broker: Any) -> None:
    topic = bc.unique("threads-close")
    broker.create(topic, 1)
    portal, producer, staging = opened(linger=0.002)
    staging.block = 1.0
    heard: dict[bytes, list[BaseException | None]] = {}
    lock = threading.Lock()
    raised: list[bytes] = []
    started = threading.Barrier(3)

    def on(value: bytes) -> Any:
        def hear(error: BaseException | None, md: Any) -> None:
            with lock:
                heard.setdefault(value, []).append(error)

        return hear

    def produce(t: int) -> None:
        started.wait(T)
        for i in range(20_000):
            record = _record(t, i)
            value = record.pop("value")
            try:
                producer.send_nowait(topic, value, on_delivery=on(value), **record)
            except errors.ClosedError:
                raised.append(value)

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    started.wait(T)
    portal.run(producer.flush, timeout=T)  # the producer closes while they produce
    portal.run(producer.aclose, timeout=T)
    for thread in threads:
        thread.join(T)
    portal.run(trio.sleep, 0.05)  # drains scheduled after the close have run
    sent = {_record(t, i)["value"] for t in range(2) for i in range(20_000)}
    assert set(heard) | set(raised) == sent
    assert all(len(errs) == 1 for errs in heard.values())  # each told once
    assert not set(heard) & set(raised)
    failed = [v for v, errs in heard.items() if errs[0] is not None]
    assert all(isinstance(heard[v][0], errors.ClosedError) for v in failed)


def test_records_staged_when_the_loop_has_stopped_are_failed_or_withdrawn(
    opened: Any, broker: Any
) -> None:
    topic = bc.unique("threads-stopped")
    broker.create(topic, 1)
    _, producer, staging = opened(linger=0.002)
    token = staging._token
    heard: list[BaseException | None] = []

    class Stopped:
        def run_sync_soon(self, *args: Any) -> None:
            raise trio.RunFinishedError("the loop has stopped")

    def produce(value: bytes, **record: Any) -> None:
        producer.send_nowait(topic, value, on_delivery=lambda e, md: heard.append(e), **record)

    with staging.stager.lock:
        staging._scheduled = True  # a drain is asked for already: these wait for it
    thread = threading.Thread(target=lambda: [produce(b"a"), produce(b"b", headers=[("h", b"")])])
    thread.start()
    thread.join(T)
    assert staging.staged == 2
    with staging.stager.lock:
        staging._scheduled = False  # ...but the loop stops before it runs
    staging._token = Stopped()  # type: ignore[assignment]
    raised: list[BaseException] = []

    def last() -> None:
        try:
            produce(b"c")
        except errors.ClosedError as exc:
            raised.append(exc)

    thread = threading.Thread(target=last)
    thread.start()
    thread.join(T)
    staging._token = token
    assert len(raised) == 1  # the caller's own record is withdrawn: it hears of it here
    assert len(heard) == 2 and all(isinstance(e, errors.ClosedError) for e in heard)
    assert staging.staged == 0 and not staging.runs
