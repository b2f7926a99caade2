"""RecordCursor: the per-record side of a partition consumer (``async for``, ``next_nowait``).

Both twins hand out the list's records in order, await ``_refill_next()``
once the list is read out, and stop when it raises StopAsyncIteration. The
compiled one hands a waiting record out without a coroutine: what
``__anext__`` returns then must still behave as an awaitable that finishes at
once (``await``, and driven by hand like a coroutine).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import pytest
import trio
from test_stager import _Lock


def _cursor(codec: ModuleType, pieces: list[list[Any]]) -> Any:
    class Cursor(codec.RecordCursor):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._local = []
            self._next = 0
            self.refills = 0

        async def _refill_next(self) -> Any:
            if not pieces:
                raise StopAsyncIteration
            await trio.lowlevel.checkpoint()
            self.refills += 1
            self._local = pieces.pop(0)
            self._next = 1
            return self._local[0]

    return Cursor()


def _records(codec: ModuleType, start: int, count: int) -> list[Any]:
    return [codec.Record(i, 0, None, b"v%d" % i) for i in range(start, start + count)]


async def test_async_for_hands_out_every_record_in_order(codec: ModuleType) -> None:
    pieces = [_records(codec, 0, 3), _records(codec, 3, 1), _records(codec, 4, 2)]
    cursor = _cursor(codec, pieces)
    assert cursor.__aiter__() is cursor
    offsets = [record.offset async for record in cursor]
    assert offsets == list(range(6))
    assert cursor.refills == 3
    # Read out: it stays so.
    with pytest.raises(StopAsyncIteration):
        await cursor.__anext__()


async def test_next_nowait_takes_from_the_same_list(codec: ModuleType) -> None:
    cursor = _cursor(codec, [_records(codec, 0, 3)])
    assert cursor.next_nowait() is None  # nothing decoded yet: no wait, no refill
    first = await cursor.__anext__()
    assert first.offset == 0
    assert cursor.next_nowait().offset == 1
    assert (await cursor.__anext__()).offset == 2
    assert cursor.next_nowait() is None
    assert cursor.refills == 1


async def test_a_waiting_record_is_an_awaitable_that_finishes_at_once(codec: ModuleType) -> None:
    records = _records(codec, 0, 4)
    cursor = _cursor(codec, [])
    cursor._local = records
    # Two taken before either is awaited: each gets a record of its own (which
    # one is not promised: the compiled twin takes it when called, the
    # pure-Python one when awaited).
    a, b = cursor.__anext__(), cursor.__anext__()
    assert inspect.isawaitable(a)
    assert {(await b).offset, (await a).offset} == {0, 1}
    # Driven by hand, as an event loop would drive a coroutine.
    c = cursor.__anext__()
    it = c.__await__()
    with pytest.raises(StopIteration) as stop:
        it.send(None)
    assert stop.value.value is records[2]
    # A finished awaitable is not reused.
    with pytest.raises(RuntimeError):
        it.send(None)
    # An exception thrown in comes out, as from a coroutine not yet started.
    it = cursor.__anext__().__await__()
    with pytest.raises(KeyError):
        it.throw(KeyError("k"))
    it.close()


async def test_no_checkpoint_while_records_wait(codec: ModuleType) -> None:
    # Handing out a decoded record never yields to trio (as before: a list
    # and an index); only a refill may.
    cursor = _cursor(codec, [])
    cursor._local = _records(codec, 0, 50)
    with trio.CancelScope() as scope:
        scope.cancel()
        count = 0
        async for _ in cursor:
            count += 1
            if count == 50:
                break
    assert count == 50


async def test_the_compiled_cursor_makes_no_coroutine_for_a_waiting_record() -> None:
    # The point of the compiled cursor: ``async for`` over decoded records runs
    # no coroutine per record (a coroutine per record cost ~0.4 us each).
    from tests.conftest import load_codec

    codec = load_codec("cython")
    cursor = _cursor(codec, [_records(codec, 1, 1)])
    cursor._local = _records(codec, 0, 1)
    waiting = cursor.__anext__()
    assert not inspect.iscoroutine(waiting)
    assert (await waiting).offset == 0
    refill = cursor.__anext__()  # the list is read out: the refill's coroutine
    assert inspect.iscoroutine(refill)
    assert (await refill).offset == 1


def test_locked_take_takes_from_its_cursor_under_the_lock(codec: ModuleType) -> None:
    """LockedTake (pykaf.sync's poll): the cursor's next record under the lock, else general()."""
    lock = _Lock()
    asked: list[float | None] = []
    cursor = _cursor(codec, [])
    seen_held: list[bool] = []

    def general(timeout: float | None) -> str:
        seen_held.append(lock.held)
        asked.append(timeout)
        return "general"

    take = codec.LockedTake(lock, general)
    assert take(1.5) == "general"  # no cursor yet
    take.cursor = cursor
    assert take() == "general"  # a cursor with nothing decoded
    cursor._local = _records(codec, 0, 2)
    assert take(0.5).offset == 0
    assert take().offset == 1
    assert cursor.next_nowait() is None  # taken from the cursor itself: its position moved
    assert take(0.2) == "general"
    take.cursor = None
    assert take(0) == "general"
    assert asked == [1.5, None, 0.2, 0]
    assert seen_held == [False] * 4  # the general way runs without the lock
    assert lock.taken == 6 and not lock.held
