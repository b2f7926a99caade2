"""A ``pykaf.aio`` object held open between a drop-in's ``start()`` and ``stop()``.

``pykaf.aio``'s openers are async context managers; aiokafka's objects are
started and stopped, often from different tasks (a FastAPI lifespan, a
FastStream broker). :class:`Held` enters the context in an asyncio task of
its own, which waits there until :meth:`Held.close`. So a failure of the
object's background work cancels that holder task, never the caller's: the
shim reports it (``error``) on the next call and on ``stop()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Generic, TypeVar

T = TypeVar("T")


class Held(Generic[T]):
    """The object of an async context manager, entered by a holder task until :meth:`close`."""

    def __init__(self) -> None:
        self.value: T | None = None
        #: What ended the holder task on its own (the object's background failure).
        self.error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._leave: asyncio.Event | None = None

    async def open(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """Enter ``make()`` in a holder task; return its object once entered.

        Raises:
            what entering raised; a cancelled caller cancels the entering too.
        """
        loop = asyncio.get_running_loop()
        entered: asyncio.Future[T] = loop.create_future()
        leave = self._leave = asyncio.Event()

        async def holder() -> None:
            try:
                async with make() as value:
                    entered.set_result(value)
                    await leave.wait()
            except BaseException as exc:
                if not entered.done():
                    entered.set_exception(exc)
                elif not leave.is_set() or not isinstance(exc, asyncio.CancelledError):
                    self.error = exc
                if not isinstance(exc, Exception):
                    raise

        task = self._task = loop.create_task(holder())
        try:
            self.value = await asyncio.shield(entered)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        return self.value

    @property
    def alive(self) -> bool:
        """Whether the object is open (entered, not closed, not failed)."""
        return self._task is not None and not self._task.done() and self.value is not None

    async def close(self) -> None:
        """Leave the context and wait for it; raises the object's own failure, if any."""
        task, leave = self._task, self._leave
        if task is None or leave is None:
            return
        leave.set()
        await asyncio.gather(task, return_exceptions=True)
        self._task = None
        self.value = None
        error, self.error = self.error, None
        if error is not None:
            raise error


__all__ = ["Held"]
