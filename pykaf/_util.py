"""Small helpers shared across layers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import sniffio
import trio

from pykaf.errors import WrongAsyncLibraryError

if sys.version_info < (3, 11):  # pragma: no cover - trio installs the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]


def require_trio(what: str) -> None:
    """Refuse, with a typed error, an ``open_*`` awaited outside trio.

    One thread-local read (the current trio task); without it, asyncio code would fail deep inside
    trio with ``AttributeError: 'RunContext' object has no attribute 'runner'``.

    Raises:
        WrongAsyncLibraryError: no trio run in this thread (asyncio's, say).
    """
    try:
        # A task, not only a run: while pykaf.aio's guest run is alive, asyncio
        # code on its thread sees the run (its token) but is no trio task.
        trio.lowlevel.current_task()
    except RuntimeError:
        raise WrongAsyncLibraryError(
            f"{what} runs on trio, but was called from {_running_library()}: use pykaf.aio"
            " (the same API on asyncio) in asyncio code, pykaf.sync in blocking code, or"
            " run this under trio.run()"
        ) from None


def _running_library() -> str:
    """The async library running this code, as sniffio (a dependency of trio's) names it."""
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "code that trio does not run"


@asynccontextmanager
async def open_service_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for an ``open_*`` context manager's background tasks.

    trio wraps whatever escapes a nursery in an ExceptionGroup. Users of
    ``async with pykaf.open_client(...)`` expect the error itself
    (``except KafkaConnectionError``), so a group holding a single exception is
    unwrapped; a group of several is raised as it is.
    """
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            exc = group.exceptions[0]
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            raise exc from exc.__cause__
        raise


async def _host_nursery(
    task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED,
) -> None:
    async with trio.open_nursery() as nursery:
        task_status.started(nursery)
        await trio.sleep_forever()


async def start_task_nursery(parent: trio.Nursery) -> trio.Nursery:
    """A nursery for background tasks, hosted by a task of ``parent``.

    Cancelling it (``nursery.cancel_scope.cancel()``) stops those tasks and
    nothing else: the code running in ``parent``'s body, typically the user's
    ``async with`` block, carries on. ``parent`` must still be cancelled (or
    the hosted nursery's scope) for the parent to finish.
    """
    nursery: trio.Nursery = await parent.start(_host_nursery)
    return nursery


def forwarded_as(forward: Callable[..., Any], method: Callable[..., Any]) -> None:
    """Give ``forward`` the name, qualified name and docstring of the trio ``method`` it forwards.

    For the facades that run trio objects for callers outside trio:
    ``pykaf.aio``'s forwarders (awaited through its bridge, or called
    directly) and ``pykaf.sync``'s (run in the portal's loop), each typed
    with the trio method's own parameters.
    """
    forward.__name__ = method.__name__
    forward.__qualname__ = method.__qualname__
    forward.__doc__ = method.__doc__
