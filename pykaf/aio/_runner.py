"""One trio guest run per asyncio loop, shared by every ``pykaf.aio`` object on it.

The trio core runs inside the asyncio loop's own thread
(:func:`trio.lowlevel.start_guest_run`): trio's ticks are callbacks of the
asyncio loop, so an asyncio task may call a trio object's plain methods
(``send_nowait``, ``seek``, statistics) directly, with no thread hop. Trio
wakes itself when such a call reschedules one of its tasks (``Event.set``, a
channel's ``send_nowait``): its runner forces a guest tick whenever its run
queue fills from outside one. Trio's guest mode waits for I/O in a thread of
its own, so each such wake crosses threads twice; the run's broker
connections are therefore read by the asyncio loop itself (its
``add_reader``; ``READ_HOST``), and an awaited ``send()`` is written and
answered without waking trio at all (``producer.py``).

The run starts with the first object opened on a loop and stops, after its
tasks have finished, when the last one closes; so ``asyncio.run()`` ends with
no trio run left in its thread. Only the run itself lives here; awaiting trio
work from asyncio (and the reverse) is ``_bridge.py``'s job.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

import outcome
import trio

from pykaf import errors
from pykaf._net.connection import READ_HOST

#: The guest run of each loop that has one (or is starting or stopping one).
_runners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Runner] = weakref.WeakKeyDictionary()

#: The guest run alive in this thread (``.runner``), if any: trio allows one per thread.
_in_thread = threading.local()


def running_loop(what: str = "pykaf.aio") -> asyncio.AbstractEventLoop:
    """The running asyncio loop, or a clear error naming the entry points when there is none.

    Raises:
        RuntimeError: no asyncio loop runs in this thread.
    """
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            f"{what} needs a running asyncio loop (call it from a coroutine run by "
            "asyncio.run()); use pykaf's trio API (pykaf.open_producer, ...) under trio, "
            "or pykaf.sync from plain threads"
        ) from None


class Runner:
    """The trio guest run hosted by one asyncio loop, counted by its users."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        #: The asyncio loop that hosts the run.
        self.loop = loop
        #: The nursery the bridge starts trio work in (set once the run is up).
        self.nursery: trio.Nursery | None = None
        self.users = 0
        #: Whether the run was told to stop (a new user then waits for a new run).
        self.stopping = False
        self._stop = trio.Event()  # set from the asyncio side: the run ends
        self._started: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[None] = loop.create_future()

    def start(self) -> None:
        """Start the guest run; :meth:`wait_started` waits until its nursery is up."""
        loop = self.loop
        _in_thread.runner = self
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=self._finished,
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self) -> None:
        # The loop reads the run's plain TCP connections itself (its add_reader):
        # an answer is handed over in the loop's thread, without waking trio's
        # guest I/O thread first and crossing back (pykaf._net.connection.READ_HOST).
        READ_HOST.set(self.loop)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            if not self._started.done():
                self._started.set_result(None)
            await self._stop.wait()
            # Every object has closed: whatever is left (nothing, normally) is cancelled.
            nursery.cancel_scope.cancel()
        self.nursery = None

    def _finished(self, result: outcome.Outcome[None]) -> None:
        if _runners.get(self.loop) is self:
            del _runners[self.loop]
        if getattr(_in_thread, "runner", None) is self:
            _in_thread.runner = None
        error = result.error if isinstance(result, outcome.Error) else None
        for fut in (self._started, self._done):
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)

    async def wait_started(self) -> None:
        """Wait until the run's nursery is up."""
        await asyncio.shield(self._started)
        if self.nursery is None:
            raise errors.ClosedError("pykaf.aio's trio run ended before it started")

    async def close(self) -> None:
        """Stop the run (its users all gone) and wait until trio has finished in this thread."""
        self.stopping = True
        self._stop.set()
        done = self._done
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                # Leaving trio running past the loop would leave the thread
                # unable to host another run: finish first, then give way.
                if not done.done():
                    await wait_uncancellable(done)
                raise
        done.result()


async def wait_uncancellable(fut: asyncio.Future[Any]) -> None:
    """Wait for ``fut`` even if cancelled meanwhile (the caller raises the cancellation)."""
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            continue


async def acquire() -> Runner:
    """The running loop's guest run, started if needed, counted as one more user.

    Raises:
        RuntimeError: no asyncio loop runs in this thread, or trio already runs in it
            (use pykaf's trio API there).
    """
    loop = running_loop()
    runner = _runners.get(loop)
    while runner is not None and runner.stopping:
        # Only one trio run fits in a thread: the old one ends before a new one starts.
        await asyncio.wait([runner._done])
        runner = _runners.get(loop)
    if runner is None:
        stranded: Runner | None = getattr(_in_thread, "runner", None)
        if stranded is not None and stranded.loop.is_closed():
            raise RuntimeError(
                "pykaf.aio cannot start: a loop closed earlier in this thread left its trio run "
                f"behind ({stranded.users} pykaf.aio object(s) of it never closed). Close every "
                "pykaf.aio object (leave its 'async with', or stop() a drop-in) before the "
                "loop closes; asyncio.run() does so for objects in its tasks"
            )
        if trio.lowlevel.in_trio_run():
            raise RuntimeError(
                "pykaf.aio cannot start inside a trio run: use pykaf's trio API "
                "(pykaf.open_producer, ...) there"
            )
        runner = _runners[loop] = Runner(loop)
        runner.start()
    runner.users += 1
    try:
        await runner.wait_started()
    except BaseException:
        await release(runner)
        raise
    return runner


async def release(runner: Runner) -> None:
    """One user fewer; the last one stops the run and waits for it to end."""
    runner.users -= 1
    if runner.users == 0:
        await runner.close()


def current_runner() -> Runner | None:
    """The running loop's guest run, if it has one (for tests and diagnostics)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return _runners.get(loop)


__all__ = [
    "Runner",
    "acquire",
    "current_runner",
    "release",
    "running_loop",
    "wait_uncancellable",
]
