"""A trio event loop in a daemon thread that plain threads call into (the sync facade's engine).

One :class:`Portal` per process runs ``trio.run`` in a background thread. Blocking
calls hand their work to the loop with the loop's trio token and wait on a
threading primitive in short slices, so a blocked call in the main thread still
sees Ctrl-C: the interrupted call is cancelled in the loop and the
``KeyboardInterrupt`` goes on in the caller.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import inspect
import logging
import os
import sys
import threading
import time
import warnings
from asyncio import _get_running_loop as _running_asyncio_loop
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, suppress
from typing import Any, Generic, TypeVar

import trio

from pykaf.errors import ClosedError, KafkaTimeoutError

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

__all__ = ["ContextHandle", "Portal", "get_portal", "wait_future"]

T = TypeVar("T")
log = logging.getLogger("pykaf.portal")

#: How long a waiting thread sleeps between checks for Ctrl-C and a dead loop.
_POLL = 0.1
#: After a call's timeout, how long the caller still waits for the loop to report
#: it, before deciding the loop is stuck and raising the timeout itself.
_TIMEOUT_GRACE = 1.0
#: How long an interrupted caller waits for the loop to finish cancelling its call.
_CANCEL_WAIT = 1.0
#: At interpreter exit: seconds open context managers (producers left open) get to
#: exit normally, then seconds the cancelled loop gets to stop.
EXIT_GRACE = 5.0
_STOP_WAIT = 1.0


class _Result(Generic[T]):
    """A call's result or exception, set once by the loop and read by threads."""

    __slots__ = ("_error", "_event", "_value")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def set_value(self, value: T) -> None:
        self._value = value
        self._event.set()

    def set_error(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def get(self) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class _Call(_Result[T]):
    """One ``Portal.run`` call: its cancel scope, timeout and result."""

    __slots__ = ("interrupted", "scope", "timeout")

    def __init__(self, timeout: float | None) -> None:
        super().__init__()
        self.timeout = timeout
        # Created here so an interrupted caller can cancel the call even before
        # the loop has started it (cancelling an unentered scope is remembered).
        self.scope = trio.CancelScope()
        self.interrupted = False


class Portal:
    """One trio event loop in a daemon thread, callable from plain threads.

    The loop starts on first use. Calls made from any number of threads run as
    tasks of one nursery in the loop; each blocks its caller until it is done.

    Blocked callers in the main thread are interrupted by Ctrl-C: the call is
    cancelled in the loop and ``KeyboardInterrupt`` is raised in the caller.
    A portal belongs to the process that made it: after ``os.fork()`` the child
    must use a new one (:func:`get_portal` makes it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._thread: threading.Thread | None = None
        self._thread_ident: int | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._finished = threading.Event()
        self._accepting = False
        self._shutting_down = False
        self._closed = False
        self._crash: BaseException | None = None
        self._handles: set[ContextHandle[Any]] = set()
        self._exit_grace = EXIT_GRACE

    # -- state -----------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The id of the process this portal belongs to."""
        return self._pid

    @property
    def running(self) -> bool:
        """True while the loop thread runs and accepts calls."""
        return self._ready.is_set() and not self._finished.is_set() and not self._closed

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` was called or the loop thread ended."""
        return self._closed or self._finished.is_set()

    def in_loop_thread(self) -> bool:
        """True when called from the portal's own event loop thread."""
        return self._thread_ident is not None and threading.get_ident() == self._thread_ident

    def check_caller(self) -> None:
        """Raise RuntimeError where a blocking call would deadlock or cannot work.

        That is: in the portal's own loop thread, or in a process forked from
        the one that made the portal.
        """
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"this pykaf portal belongs to process {self._pid}: objects of the sync "
                "facade made before os.fork() cannot be used in the child; make new ones"
            )
        if self.in_loop_thread():
            raise RuntimeError(
                "a blocking pykaf call was made from the portal's own event loop thread "
                "(e.g. in a delivery callback), where it would deadlock: inside the loop, "
                "use the async API"
            )

    def _ensure_started(self) -> trio.lowlevel.TrioToken:
        self.check_caller()
        if not _warned_asyncio and _running_asyncio_loop() is not None:
            _warn_asyncio()
        if not self._ready.is_set():
            with self._lock:
                if self._closed:
                    raise ClosedError("the pykaf portal has shut down")
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._thread_main, name="pykaf-portal", daemon=True
                    )
                    self._thread.start()
            while not self._ready.wait(_POLL):
                pass
        if self._closed or self._finished.is_set() or self._token is None:
            raise ClosedError("the pykaf portal has shut down") from self._crash
        return self._token

    # -- the loop thread -------------------------------------------------------

    def _thread_main(self) -> None:
        self._thread_ident = threading.get_ident()
        try:
            trio.run(self._main)
        except BaseException as exc:  # pragma: no cover - _main does not raise
            self._crash = exc
        finally:
            self._accepting = False
            self._finished.set()
            self._ready.set()

    async def _main(self) -> None:
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._accepting = True
            self._ready.set()
            await self._stop.wait()
            # Let open context managers (producers left open) exit normally first:
            # that delivers what they buffered. Then cancel whatever is left.
            with trio.move_on_after(self._exit_grace):
                for handle in list(self._handles):
                    handle._request_exit(None)
                for handle in list(self._handles):
                    await handle._done.wait()
            self._accepting = False
            nursery.cancel_scope.cancel()

    def _spawn(
        self, name: str, task: Callable[..., Awaitable[object]], result: _Result[Any], *args: Any
    ) -> None:
        # Runs as a run_sync_soon callback: it must never raise, or trio.run dies.
        try:
            if not self._accepting or self._nursery is None:
                raise ClosedError("the pykaf portal has shut down")
            self._nursery.start_soon(task, *args, name=name)
        except BaseException as exc:
            result.set_error(exc)

    def _schedule(
        self, token: trio.lowlevel.TrioToken, fn: Callable[..., object], *args: Any
    ) -> None:
        try:
            token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise ClosedError("the pykaf portal has shut down") from None

    async def _run_call(
        self, call: _Call[T], async_fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]
    ) -> None:
        if call.timeout is not None:
            call.scope.deadline = trio.current_time() + call.timeout
        finished = False
        value: Any = None
        try:
            with call.scope:
                value = await async_fn(*args)
                finished = True
        except BaseException as exc:
            if self._shutting_down and _is_cancelled(exc):
                call.set_error(ClosedError("the pykaf portal shut down during the call"))
                raise
            call.set_error(exc)
            return
        if finished:
            call.set_value(value)
        elif call.interrupted:
            call.set_error(KeyboardInterrupt())
        else:
            call.set_error(_timeout_error(async_fn, call.timeout))

    # -- calls from plain threads ----------------------------------------------

    def run(
        self, async_fn: Callable[..., Awaitable[T]], *args: Any, timeout: float | None = None
    ) -> T:
        """Run ``await async_fn(*args)`` in the loop and return its result.

        Blocks the calling thread; exceptions propagate with their own type.
        Keyword arguments: bind them with ``functools.partial``.

        Args:
            async_fn: an async function; it runs as a task of the portal's nursery.
            *args: its positional arguments.
            timeout: seconds; when they pass the call is cancelled in the loop and
                :class:`~pykaf.errors.KafkaTimeoutError` is raised. None: no limit.

        Raises:
            KafkaTimeoutError: the timeout passed.
            KeyboardInterrupt: Ctrl-C while blocked in the main thread (the call
                is cancelled in the loop first).
            ClosedError: the portal has shut down.
            RuntimeError: called from the loop thread itself, or from a process
                forked after the portal was made.
        """
        token = self._ensure_started()
        call: _Call[T] = _Call(timeout)
        return self._wait(token, call, _name(async_fn), async_fn, args)

    def run_sync(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run ``fn(*args)`` in the loop thread and return its result.

        For touching loop-side objects that are not thread-safe (e.g. reading a
        producer's statistics). ``fn`` runs inside a trio task, so it may use
        trio's synchronous functions (``trio.current_time()``, nursery
        ``start_soon``); it must not block.
        """

        async def call_sync() -> T:
            return fn(*args)

        call_sync.__qualname__ = _qualname(fn)
        return self.run(call_sync, timeout=timeout)

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Schedule ``fn(*args)`` in the loop thread and return at once.

        Callable from any thread of the portal's process, the loop thread
        included. Exceptions ``fn`` raises are logged, never raised: the loop
        must not die of them.

        Raises:
            ClosedError: the portal has shut down.
        """
        if os.getpid() != self._pid:
            self.check_caller()
        token = self._token if self._ready.is_set() else self._ensure_started()
        if token is None or self._finished.is_set():
            raise ClosedError("the pykaf portal has shut down")
        self._schedule(token, _logged, fn, args)

    def start_soon(self, async_fn: Callable[..., Awaitable[object]], *args: Any) -> None:
        """In the loop thread: start a background task in the portal's nursery.

        The task lives until it returns or the portal shuts down. Exceptions it
        raises are logged, never raised (they would take the loop down).

        Raises:
            ClosedError: the portal is shutting down.
            RuntimeError: not called from the loop thread.
        """
        if not self.in_loop_thread():
            raise RuntimeError("Portal.start_soon() is for the loop thread; use call_soon()")
        if not self._accepting or self._nursery is None:
            raise ClosedError("the pykaf portal is shutting down")
        self._nursery.start_soon(self._background, async_fn, args, name=_name(async_fn))

    async def _background(
        self, async_fn: Callable[..., Awaitable[object]], args: tuple[Any, ...]
    ) -> None:
        try:
            await async_fn(*args)
        except BaseException as exc:
            if _is_cancelled(exc):
                raise
            log.exception("pykaf portal background task %s failed", _qualname(async_fn))

    def _wait(
        self,
        token: trio.lowlevel.TrioToken,
        call: _Call[T],
        name: str,
        async_fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
    ) -> T:
        # Scheduling happens inside the try: a Ctrl-C arriving just after the
        # loop took the call must still cancel it.
        give_up = None
        if call.timeout is not None:
            give_up = time.monotonic() + call.timeout + _TIMEOUT_GRACE
        try:
            self._schedule(token, self._spawn, name, self._run_call, call, call, async_fn, args)
            while not call.wait(_POLL):
                if self._finished.is_set() or (give_up is not None and time.monotonic() > give_up):
                    break
        except BaseException as exc:  # KeyboardInterrupt (or another async exception)
            if not call.done() and not isinstance(exc, ClosedError):
                call.interrupted = True
                self._cancel(token, call)
                call.wait(_CANCEL_WAIT)
            raise
        if not call.done():
            self._cancel(token, call)
            if self._finished.is_set():
                raise ClosedError("the pykaf portal stopped during the call")
            # The loop did not report back in time: something blocks it.
            raise _timeout_error(None, call.timeout)
        return call.get()

    @staticmethod
    def _cancel(token: trio.lowlevel.TrioToken, call: _Call[Any]) -> None:
        _call_soon(token, call.scope.cancel)

    def start_context(
        self,
        cm_factory: Callable[..., AbstractAsyncContextManager[T]],
        *args: Any,
        timeout: float | None = None,
    ) -> tuple[T, ContextHandle[T]]:
        """Enter ``cm_factory(*args)`` (an async context manager) in the loop.

        A task of the portal enters the context manager and holds it open, so
        the nurseries it opens live in the loop, until :meth:`ContextHandle.exit`
        asks it to leave. At interpreter exit, contexts still open are exited
        normally (for up to :data:`EXIT_GRACE` seconds), then cancelled.

        Returns:
            ``(entered object, handle)``: what ``__aenter__`` returned, to be used
            only inside the loop (through :meth:`run`), and the handle that exits.

        Raises:
            Whatever ``__aenter__`` raised; KafkaTimeoutError when ``timeout``
            passes first (the context is then abandoned).
        """
        handle: ContextHandle[T] = ContextHandle(self)
        value = self.run(handle._enter, cm_factory, args, timeout=timeout)
        return value, handle

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop the loop: exit open contexts normally, then cancel every task.

        Calls still running get :class:`~pykaf.errors.ClosedError`. Never hangs:
        if tasks ignore cancellation (or the loop is blocked), the daemon thread
        is left behind after ``timeout`` (default: :data:`EXIT_GRACE`) plus one
        second. Idempotent; a no-op in a process forked from the portal's.
        """
        if os.getpid() != self._pid:
            return
        if self.in_loop_thread():
            raise RuntimeError("Portal.shutdown() called from the portal's own loop thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:
            self._finished.set()
            return
        while not self._ready.wait(_POLL):
            pass
        grace = self._exit_grace if timeout is None else timeout
        self._exit_grace = grace
        token, stop = self._token, self._stop
        if token is not None and stop is not None:
            self._shutting_down = True
            _call_soon(token, stop.set)
        thread.join(grace + _STOP_WAIT)

    def __repr__(self) -> str:
        state = "running" if self.running else "closed" if self.closed else "idle"
        return f"<Portal {state} pid={self._pid}>"


class ContextHandle(Generic[T]):
    """Holds an async context manager open in a portal's loop; exits it on request.

    Made by :meth:`Portal.start_context`.
    """

    def __init__(self, portal: Portal) -> None:
        self._portal = portal
        self._exit_requested = trio.Event()
        self._done = trio.Event()
        self._exit_exc: BaseException | None = None
        self._scope = trio.CancelScope()
        self._result: _Result[bool] = _Result()
        #: Awaited in the loop before a normal exit (not one with an exception),
        #: at interpreter exit too: e.g. to hand queued work to the context's object.
        self.before_exit: Callable[[], Awaitable[object]] | None = None

    @property
    def done(self) -> bool:
        """True once the context manager has exited (or failed to)."""
        return self._result.done()

    async def _enter(
        self, cm_factory: Callable[..., AbstractAsyncContextManager[T]], args: tuple[Any, ...]
    ) -> T:
        nursery = self._portal._nursery
        assert nursery is not None
        try:
            value: T = await nursery.start(self._hold, cm_factory, args)
        except BaseException:
            self._scope.cancel()
            raise
        return value

    async def _hold(
        self,
        cm_factory: Callable[..., AbstractAsyncContextManager[T]],
        args: tuple[Any, ...],
        task_status: trio.TaskStatus[T],
    ) -> None:
        # Until started(), errors go to nursery.start()'s caller (_enter). After
        # it, they are reported through _result, never raised: an exception
        # escaping a portal task would take the whole loop down.
        started = False
        self._portal._handles.add(self)
        try:
            with self._scope:
                cm = cm_factory(*args)
                value = await cm.__aenter__()
                try:
                    task_status.started(value)
                    started = True
                    await self._exit_requested.wait()
                except BaseException as exc:
                    # The context's own nursery (or the portal) cancelled us.
                    if not await cm.__aexit__(type(exc), exc, exc.__traceback__):
                        raise
                    self._result.set_value(True)
                    return
                ended = self._exit_exc
                if ended is None and self.before_exit is not None:
                    try:
                        await self.before_exit()
                    except BaseException as exc:
                        ended = exc
                try:
                    suppressed = await cm.__aexit__(
                        None if ended is None else type(ended),
                        ended,
                        None if ended is None else ended.__traceback__,
                    )
                except BaseException as exit_exc:
                    if exit_exc is not ended:
                        raise
                    suppressed = False
                self._result.set_value(bool(suppressed))
        except BaseException as exc:
            shutdown = self._portal._shutting_down and _is_cancelled(exc)
            if not self._result.done():
                self._result.set_error(
                    ClosedError("the pykaf portal shut down") if shutdown else exc
                )
            if shutdown or not started:
                raise
        finally:
            if not self._result.done():  # our own scope caught a cancellation
                self._result.set_error(ClosedError("the context was abandoned"))
            self._portal._handles.discard(self)
            self._done.set()

    def _request_exit(self, exc: BaseException | None) -> None:
        if not self._exit_requested.is_set():
            self._exit_exc = exc
            self._exit_requested.set()

    async def aexit(self, exc: BaseException | None = None) -> bool:
        """In the loop: exit the context manager and wait until it has.

        ``exc`` (if any) is passed to ``__aexit__`` as the exception that ended the
        block. Returns whether ``__aexit__`` suppressed it; raises what
        ``__aexit__`` raised. If this call is cancelled, the context is
        abandoned (its exit is cancelled). Calling it again returns or raises
        the same again.
        """
        self._request_exit(exc)
        try:
            await self._done.wait()
        except BaseException:
            self._scope.cancel()
            raise
        return self._result.get()

    def exit(self, exc: BaseException | None = None, timeout: float | None = None) -> bool:
        """From a plain thread: exit the context manager; see :meth:`aexit`.

        Raises:
            KafkaTimeoutError: ``timeout`` passed first; the exit is cancelled.
            Whatever ``__aexit__`` raised.
        """
        if self._result.done():
            return self._result.get()
        return self._portal.run(self.aexit, exc, timeout=timeout)

    def abandon(self) -> None:
        """Cancel the context (from any thread); its exit runs under cancellation."""
        token = self._portal._token
        if token is not None and not self._result.done():
            _call_soon(token, self._scope.cancel)


def wait_future(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
    """Wait for a ``concurrent.futures.Future`` in a way Ctrl-C can interrupt.

    On timeout or interruption the future is cancelled (which only succeeds if
    its work has not started).

    Raises:
        KafkaTimeoutError: ``timeout`` passed.
        concurrent.futures.CancelledError: the future was cancelled.
        Whatever the future's work raised.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wait = _POLL if deadline is None else min(_POLL, max(deadline - time.monotonic(), 0))
            done, _ = concurrent.futures.wait([future], wait)
            if done:
                return future.result()
            if deadline is not None and time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"no result within {timeout} s")
    except BaseException:
        future.cancel()
        raise


def _logged(fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except BaseException:
        log.exception("pykaf portal callback %s failed", _qualname(fn))


def _call_soon(token: trio.lowlevel.TrioToken, fn: Callable[[], object]) -> None:
    """``fn()`` in the loop soon; nothing if the loop has already finished."""
    with suppress(trio.RunFinishedError):
        token.run_sync_soon(fn)


def _is_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancelled(e) for e in exc.exceptions)
    return False


def _qualname(fn: Callable[..., object]) -> str:
    """``fn``'s name for task names and messages (a partial is named for its function)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    return _qualname(inner) if callable(inner) else repr(fn)


def _name(fn: Callable[..., object]) -> str:
    return f"pykaf-portal:{_qualname(fn)}"


def _timeout_error(fn: Callable[..., object] | None, timeout: float | None) -> KafkaTimeoutError:
    what = "the call" if fn is None else _qualname(fn)
    return KafkaTimeoutError(f"{what} did not finish within {timeout} s")


# -- the process's shared portal ------------------------------------------------

_shared_lock = threading.Lock()
_shared: Portal | None = None


#: Whether :func:`_warn_asyncio` has spoken (once per process).
_warned_asyncio = False
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _warn_asyncio() -> None:
    """Warn, once, that a blocking call was made inside a running asyncio loop.

    A warning, not an error: Jupyter runs every cell inside a running loop,
    and blocking code is at home in a notebook.
    """
    global _warned_asyncio
    _warned_asyncio = True
    # Point at the caller's line: the first frame outside pykaf.
    level = 1
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(
        "pykaf.sync blocks the running asyncio loop while it waits; in asyncio code use "
        "pykaf.aio instead (async with pykaf.aio.open_producer(...), the same API awaited). "
        "This warning is shown once.",
        RuntimeWarning,
        stacklevel=level,
    )


def get_portal() -> Portal:
    """The process's shared portal, made on first use (and again after a fork or shutdown)."""
    global _shared
    with _shared_lock:
        portal = _shared
        if portal is None or portal.pid != os.getpid() or portal.closed:
            portal = _shared = Portal()
        return portal


def _shutdown_shared() -> None:
    portal = _shared
    if portal is not None and portal.pid == os.getpid():
        portal.shutdown()


def _after_fork_in_child() -> None:
    # The loop thread does not exist in the child, and the lock may have been
    # held by a thread that does not exist either.
    global _shared, _shared_lock
    _shared_lock = threading.Lock()
    _shared = None


atexit.register(_shutdown_shared)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
