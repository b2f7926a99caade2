"""``RecordStager``: the per-record staging of ``pykaf.sync.Producer``, on both codecs."""

from __future__ import annotations

import threading
import time
from collections import deque
from types import ModuleType
from typing import Any

import pytest


class _Lock:
    """A lock that records whether it is held, and refuses to be taken twice."""

    def __init__(self) -> None:
        self.held = False
        self.taken = 0

    def acquire(self) -> bool:
        assert not self.held
        self.held = True
        self.taken += 1
        return True

    def release(self) -> None:
        assert self.held
        self.held = False

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Owner:
    """The slow paths a stager calls, recording each call."""

    def __init__(self, lock: _Lock) -> None:
        self.lock = lock
        self.staged: list[tuple[Any, ...]] = []
        self.futures: list[tuple[Any, ...]] = []
        self.polls: list[float | None] = []

    def stage(self, *args: Any) -> None:
        assert not self.lock.held
        self.staged.append(args)

    def stage_future(self, future: Any, *args: Any) -> Any:
        assert not self.lock.held
        self.futures.append((future, *args))
        return future

    def poll_wait(self, timeout: float | None) -> int:
        self.polls.append(timeout)
        return 7


class _Future:
    def __init__(self, stager: Any) -> None:
        self.stager = stager


def _stager(codec: ModuleType, small: int = 100, max_pending: int = 5) -> tuple[Any, _Owner]:
    lock = _Lock()
    owner = _Owner(lock)
    stager = codec.RecordStager(
        lock,
        owner.stage,
        owner.stage_future,
        owner.poll_wait,
        _Future,
        deque(),
        small=small,
        max_pending=max_pending,
    )
    return stager, owner


def test_plain_records_join_the_open_run_under_the_lock(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    stager.produce("t", b"first")  # no run open yet: the slow path opens one
    assert owner.staged == [("t", b"first", None, None, None, None, None)]
    values: list[bytes] = [b"first"]
    stager.open_run("t", None, values)
    stager.produce("t", b"a")
    stager.produce("t", b"b", partition=None)
    assert values == [b"first", b"a", b"b"]
    assert stager.queued == 2  # the slow path counts its own
    assert owner.lock.taken == 3 and not owner.lock.held  # the first call looked too
    assert len(owner.staged) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key": b"k"},
        {"headers": [("h", b"v")]},
        {"timestamp": 5},
        {"partition": 1},  # the run is for partition None
        {"partition": True},  # not an int
        {"topic": "other"},
        {"value": bytearray(b"v")},
        {"value": None},
        {"value": b"x" * 101},  # over small
    ],
)
def test_records_that_do_not_fit_the_run_take_the_slow_path(
    codec: ModuleType, kwargs: dict[str, Any]
) -> None:
    stager, owner = _stager(codec)
    values: list[bytes] = []
    stager.open_run("t", None, values)
    kwargs = dict(kwargs)  # the parameter is shared by both codecs' runs
    topic = kwargs.pop("topic", "t")
    value = kwargs.pop("value", b"v")
    stager.produce(topic, value, **kwargs)
    assert values == []
    assert stager.queued == 0
    (call,) = owner.staged
    assert call[:2] == (topic, value)


def test_joined_bytes_adds_up_the_values_and_keys_joined(codec: ModuleType) -> None:
    stager, owner = _stager(codec, max_pending=10)
    stager.open_run("t", None, [b"opened"], [b"key"])  # the owner's: not counted
    stager.produce("t", b"abc", key=b"k1")
    stager.produce("t", b"abcd", key=b"k2", headers=[("h", b"")])  # slow path: not counted
    stager.produce("t", b"", key=b"")
    stager.open_run("t", None, [b"x"])
    stager.produce("t", b"12345")
    stager.produce("t", b"6", on_delivery=print)  # not of the open run: not counted
    assert stager.joined_bytes == 3 + 2 + 0 + 0 + 5
    assert len(owner.staged) == 2


def test_past_max_pending_every_record_takes_the_slow_path(codec: ModuleType) -> None:
    stager, owner = _stager(codec, max_pending=2)
    values: list[bytes] = []
    stager.open_run("t", 0, values)
    stager.produce("t", b"1", partition=0)
    stager.produce("t", b"2", partition=0)
    stager.produce("t", b"3", partition=0)  # 2 wait for the loop: the slow path waits for room
    assert values == [b"1", b"2"]
    assert [c[1] for c in owner.staged] == [b"3"]
    stager.accepted = 2  # the loop took them
    stager.produce("t", b"4", partition=0)
    assert values == [b"1", b"2", b"4"]


def test_records_with_a_callback_join_a_callback_run(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    values: list[bytes] = []
    callbacks: list[Any] = []

    def cb(error: Any, md: Any) -> None: ...

    stager.open_run("t", None, [])
    stager.produce("t", b"v", on_delivery=cb)  # the open run is of records without one
    assert len(owner.staged) == 1
    stager.open_callback_run("t", None, values, callbacks)
    stager.produce("t", b"a", on_delivery=cb)
    stager.produce("t", b"b")  # no callback: not this run
    assert values == [b"a"] and callbacks == [cb]
    assert len(owner.staged) == 2


def test_send_async_makes_the_future_and_joins_a_future_run(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    first = stager.send_async("t", b"first", timeout=3.0)
    assert isinstance(first, _Future) and first.stager is stager
    assert owner.futures == [(first, "t", b"first", None, None, None, None, 3.0)]
    values: list[bytes] = []
    futures: list[Any] = []
    stager.open_future_run("t", 2, values, futures)
    second = stager.send_async("t", b"second", partition=2)
    assert values == [b"second"] and futures == [second]
    assert (stager.queued, stager.futures) == (1, 1)
    stager.produce("t", b"plain", partition=2)  # a produce record: not a future run's
    assert values == [b"second"]
    stager.send_async("t", b"keyed", key=b"k", partition=2)
    assert len(owner.futures) == 2


def test_opening_a_run_closes_the_others(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    plain: list[bytes] = []
    stager.open_run("t", None, plain)
    stager.open_future_run("t", None, [], [])
    stager.produce("t", b"v")
    assert plain == [] and len(owner.staged) == 1
    stager.close_runs()
    stager.send_async("t", b"v")
    assert len(owner.futures) == 1


def test_poll_returns_at_once_when_nothing_is_ready(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    assert stager.poll() == 0
    assert stager.poll(0) == 0
    assert owner.polls == []
    assert stager.poll(1.5) == 7  # may wait: the owner's
    assert stager.poll(None) == 7
    stager.ready.append("a callback")
    assert stager.poll(0) == 7
    assert owner.polls == [1.5, None, 0]


def test_reset_lock_takes_the_new_lock(codec: ModuleType) -> None:
    stager, _owner = _stager(codec)
    lock = threading.Lock()
    stager.reset_lock(lock)
    assert stager.lock is lock
    values: list[bytes] = []
    stager.open_run("t", None, values)
    stager.produce("t", b"v")
    assert values == [b"v"] and not lock.locked()


def test_keyed_records_join_only_a_keyed_run(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    values: list[bytes] = []
    keys: list[bytes] = []
    stager.open_run("t", None, values, keys)
    stager.produce("t", b"a", key=b"1")
    stager.produce("t", b"b")  # keyless: not this run
    stager.produce("t", b"c", key="2")  # type: ignore[arg-type]  # not bytes
    stager.produce("t", b"d", key=b"k" * 101)  # over small
    assert values == [b"a"] and keys == [b"1"]
    assert [call[1] for call in owner.staged] == [b"b", b"c", b"d"]
    callbacks: list[Any] = []
    stager.open_callback_run("t", 3, values, callbacks, keys)
    stager.produce("t", b"e", key=b"2", partition=3, on_delivery=print)
    futures: list[Any] = []
    stager.open_future_run("t", 3, values, futures, keys)
    future = stager.send_async("t", b"f", key=b"3", partition=3)
    assert values == [b"a", b"e", b"f"] and keys == [b"1", b"2", b"3"]
    assert callbacks == [print] and futures == [future]


def test_stamped_records_join_only_a_stamped_run(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    values: list[bytes] = []
    stamps: list[int] = []
    stager.open_run("t", None, values, None, stamps)
    stager.produce("t", b"a", timestamp=5)
    stager.produce("t", b"b")  # no timestamp: not this run
    stager.produce("t", b"c", timestamp=5.5)  # type: ignore[arg-type]  # not an int
    assert values == [b"a"] and stamps == [5]
    assert [call[1] for call in owner.staged] == [b"b", b"c"]
    futures: list[Any] = []
    stager.open_future_run("t", None, values, futures, None, stamps)
    stager.send_async("t", b"d", timestamp=6)
    assert values == [b"a", b"d"] and stamps == [5, 6] and len(futures) == 1


def test_a_timestamp_past_int64_takes_the_slow_path(codec: ModuleType) -> None:
    stager, owner = _stager(codec)
    values: list[bytes] = []
    stamps: list[int] = []
    stager.open_run("t", None, values, None, stamps)
    stager.produce("t", b"a", timestamp=(1 << 63) - 1)
    stager.produce("t", b"b", timestamp=1 << 63)
    stager.produce("t", b"c", timestamp=-(1 << 63) - 1)
    assert values == [b"a"]
    assert [call[1] for call in owner.staged] == [b"b", b"c"]


def test_stager_lock_is_a_lock(codec: ModuleType) -> None:
    lock = codec.StagerLock()
    assert not lock.locked()
    assert lock.acquire() is True
    assert lock.locked()
    assert lock.acquire(blocking=False) is False  # held: not taken twice
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()


def _with_stager_lock(codec: ModuleType) -> tuple[Any, _Owner, Any, list[bytes]]:
    """A stager on a StagerLock, a plain run open for "t"; and the run's values."""
    stager, owner = _stager(codec)
    lock = codec.StagerLock()
    stager.reset_lock(lock)
    values: list[bytes] = []
    stager.open_run("t", None, values)
    return stager, owner, lock, values


def test_stager_lock_is_taken_by_produce_and_given_back(codec: ModuleType) -> None:
    stager, owner, lock, values = _with_stager_lock(codec)
    stager.produce("t", b"a")
    stager.send_async("t", b"b")  # not a futures run: the slow path, the lock given back
    assert values == [b"a"] and not lock.locked()
    assert [f[1:3] for f in owner.futures] == [("t", b"b")]


def test_stager_lock_makes_another_thread_wait(codec: ModuleType) -> None:
    """A record staged in another thread waits while the lock is held, then joins."""
    stager, _owner, lock, values = _with_stager_lock(codec)
    done = threading.Event()

    def produce() -> None:
        stager.produce("t", b"late")
        done.set()

    with lock:
        thread = threading.Thread(target=produce)
        thread.start()
        assert not done.wait(0.1)  # it waits for the lock
        values.append(b"first")  # what the holder does under it goes first
    thread.join(10)
    assert done.is_set() and values == [b"first", b"late"]
    assert not lock.locked()


def test_stager_lock_excludes_threads(codec: ModuleType) -> None:
    """Read-modify-write sections under the lock in four threads lose no update."""
    lock = codec.StagerLock()
    shared = [0]
    rounds = 2000

    def bump() -> None:
        for _ in range(rounds):
            with lock:
                seen = shared[0]
                if seen % 7 == 0:
                    time.sleep(0)  # let another thread run here
                shared[0] = seen + 1

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert shared[0] == 4 * rounds and not lock.locked()
