"""Awaiting across the two loops of one thread: asyncio awaits trio work, and the reverse.

Both run in the asyncio loop's thread (``_runner.py``), so a call crosses
with no lock and no thread: :func:`call` starts the trio function as a task
in the guest run's nursery and awaits an asyncio future that the task
resolves directly. Cancellation goes both ways: cancelling the asyncio task
(``task.cancel()``, ``asyncio.timeout()``) cancels the trio task's scope and
waits for it to finish before the ``CancelledError`` goes on; a trio scope
cancelled around :func:`run_asyncio` cancels the asyncio task it awaits, and
waits for it the same way. Errors cross unchanged (the same ``pykaf.errors``
classes).

:func:`hold` enters a trio async context manager (``pykaf.open_producer``,
...) in a trio task of its own that stays inside it until the asyncio side
leaves; if the trio side fails on its own (a background task's error), the
asyncio task inside the block is cancelled and the error raised when it
leaves, as a trio nursery would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

import trio

from pykaf import errors
from pykaf.aio._runner import Runner, acquire, release, running_loop, wait_uncancellable

T = TypeVar("T")

_ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


def _closed() -> errors.ClosedError:
    return errors.ClosedError("pykaf.aio's trio run closed before the call finished")


class _Call:
    """One trio call awaited from asyncio."""

    __slots__ = ("cancelled", "ended", "finished", "fut", "orphaned", "scope")

    def __init__(
        self, fut: asyncio.Future[Any], orphaned: Callable[[Any], None] | None = None
    ) -> None:
        self.fut = fut
        #: Takes a value the trio side returned after its caller was cancelled.
        self.orphaned = orphaned
        self.scope: trio.CancelScope | None = None
        self.cancelled = False
        #: Whether the trio task has finished (it may before the asyncio side hears of it).
        self.ended = False
        self.finished: asyncio.Future[None] | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()


async def _run_call(
    call: _Call, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    fut = call.fut
    try:
        with trio.CancelScope() as scope:
            call.scope = scope
            if call.cancelled:
                scope.cancel()
            try:
                value = await fn(*args, **kwargs)
            except trio.Cancelled:
                raise
            except BaseException as exc:  # handed to the awaiting asyncio task
                if not fut.done():
                    fut.set_exception(exc)
            else:
                if not fut.done():
                    fut.set_result(value)
                elif call.orphaned is not None:
                    # The caller was cancelled while this was on its way: not lost.
                    call.orphaned(value)
    finally:
        call.ended = True
        if not fut.done():
            fut.set_exception(_closed())
        if call.finished is not None and not call.finished.done():
            call.finished.set_result(None)


async def call(runner: Runner, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await the trio function ``fn(*args, **kwargs)`` in ``runner``'s guest run.

    Raises:
        RuntimeError: called from another loop than the object's, or with none.
        ClosedError: the object's run has closed.
    """
    return await _call(runner, None, fn, args, kwargs)


async def call_keeping(
    runner: Runner,
    orphaned: Callable[[T], None],
    fn: Callable[..., Awaitable[T]],
    *args: Any,
    **kwargs: Any,
) -> T:
    """:func:`call` for a trio function that takes something (records, a channel's value).

    When the caller is cancelled in the loop pass in which ``fn`` returned,
    the value it took would be lost with the cancellation: ``orphaned(value)``
    gets it instead (to hand it out again, or to seek back to it), and the
    caller is cancelled as asked.
    """
    return await _call(runner, orphaned, fn, args, kwargs)


async def _call(
    runner: Runner,
    orphaned: Callable[[T], None] | None,
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    loop = runner.loop
    if asyncio.get_running_loop() is not loop:
        wrong_loop(loop)
    nursery = runner.nursery
    if nursery is None or runner.stopping:
        raise errors.ClosedError("the pykaf.aio object is closed (its trio run has ended)")
    fut: asyncio.Future[T] = loop.create_future()
    job = _Call(fut, orphaned)
    nursery.start_soon(_run_call, job, fn, args, kwargs)
    try:
        return await fut
    except asyncio.CancelledError:
        if not job.ended and (not fut.done() or fut.cancelled()):
            # The trio side gets the cancellation and finishes before this goes on
            # (unless it finished already, in the loop pass that cancelled this task).
            job.finished = loop.create_future()
            job.cancel()
            await wait_uncancellable(job.finished)
        if orphaned is not None and fut.done() and not fut.cancelled() and fut.exception() is None:
            orphaned(fut.result())
        raise


def wrong_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Raise the error of an object used from another loop than the one it was opened on."""
    running_loop()  # raises first when there is no loop at all
    raise RuntimeError(
        f"this pykaf.aio object belongs to another asyncio loop ({loop!r}); "
        "open one per loop (each loop hosts its own pykaf run)"
    )


async def run_asyncio(
    loop: asyncio.AbstractEventLoop, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any
) -> T:
    """From trio: run the asyncio coroutine ``fn(*args)`` as a task of ``loop`` and await it.

    Cancelling the trio scope around it cancels the asyncio task, and waits
    for it to finish.
    """
    task = loop.create_task(fn(*args))
    done = trio.Event()
    task.add_done_callback(lambda _: done.set())
    try:
        await done.wait()
    except BaseException:
        task.cancel()
        with trio.CancelScope(shield=True):
            await done.wait()
        raise
    if task.cancelled():
        # Cancelled from the asyncio side, not by trio: as trio sees it, the call stopped.
        raise errors.ClosedError("the asyncio task of a pykaf.aio handler was cancelled")
    return task.result()


class _Held:
    """A trio async context manager held open by a trio task for an asyncio block."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.entered: asyncio.Future[Any] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self.leave = trio.Event()
        #: The asyncio block's exception, handed to the context's ``__aexit__``.
        self.block_error: BaseException | None = None
        #: Whether ``__aexit__`` suppressed the block's exception.
        self.suppressed = False
        #: What the trio side raised of its own (to be raised on the asyncio side).
        self.error: BaseException | None = None
        self.scope: trio.CancelScope | None = None
        self.cancelled = False
        self.on_failure: Callable[[], object] | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, trio.Cancelled):
            if self.cancelled:
                return  # the asyncio side cancelled, and raises its own CancelledError
            exc = _closed()
        self.error = exc


async def _hold(cm: AbstractAsyncContextManager[Any], held: _Held) -> None:
    try:
        with trio.CancelScope() as scope:
            held.scope = scope
            if held.cancelled:
                scope.cancel()
            value = await cm.__aenter__()
            held.entered.set_result(value)
            try:
                await held.leave.wait()
                exc = held.block_error
            except BaseException as own:  # the context's own tasks failed (or it was cancelled)
                exc = own
                if held.on_failure is not None and not held.leave.is_set():
                    held.on_failure()
            suppressed = await cm.__aexit__(type(exc) if exc else None, exc, _tb(exc))
            if exc is not None and exc is held.block_error:
                held.suppressed = bool(suppressed)
            elif exc is not None and not suppressed:
                held.fail(exc)
    except BaseException as exc:
        if exc is not held.block_error:
            held.fail(exc)
    finally:
        if not held.entered.done():
            held.entered.set_exception(held.error or _closed())
        held.done.set_result(None)


def _tb(exc: BaseException | None) -> TracebackType | None:
    return None if exc is None else exc.__traceback__


@asynccontextmanager
async def hold(runner: Runner, cm: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """Enter the trio context manager ``cm`` in the guest run for the length of this block.

    Leaving the block leaves ``cm`` (with the block's exception, if any) and
    waits for it; a failure of ``cm``'s own tasks cancels the block, and is
    raised when it leaves.
    """
    loop = runner.loop
    nursery = runner.nursery
    if nursery is None:
        raise errors.ClosedError("pykaf.aio's trio run has ended")
    held = _Held(loop)
    nursery.start_soon(_hold, cm, held)
    try:
        value = await held.entered
    except asyncio.CancelledError:
        held.cancel()
        await wait_uncancellable(held.done)
        raise
    task = asyncio.current_task()
    failed = False

    def fail() -> None:
        nonlocal failed
        failed = True
        if task is not None:
            task.cancel()

    held.on_failure = fail
    block_error: BaseException | None = None
    try:
        yield value
    except BaseException as exc:
        block_error = exc
    if not (failed and isinstance(block_error, asyncio.CancelledError)):
        held.block_error = block_error
    held.leave.set()
    cancelled = False
    while not held.done.done():
        try:
            await asyncio.shield(held.done)
        except asyncio.CancelledError:
            cancelled = True
            held.cancel()  # stop the trio side's exit (a flush, say), then go on
    if failed and task is not None and hasattr(task, "uncancel"):
        task.uncancel()  # the cancellation was ours, to stop the block
    if held.error is not None:
        raise held.error
    if held.block_error is not None and not held.suppressed:
        raise held.block_error
    if cancelled:
        raise asyncio.CancelledError


@asynccontextmanager
async def open_in_run(
    open_trio: Callable[[Runner], AbstractAsyncContextManager[T]],
) -> AsyncIterator[tuple[T, Runner]]:
    """The ``pykaf.aio`` opener's frame: the loop's run, ``open_trio(run)`` held open in it.

    Yields the trio object with the run; the run is released (and stopped,
    if this was its last user) after the trio context has left.
    """
    runner = await acquire()
    try:
        async with hold(runner, open_trio(runner)) as value:
            yield value, runner
    finally:
        await release(runner)
