"""The asyncio face of a trio object: awaited methods through the bridge, plain ones direct.

Each ``pykaf.aio`` class names the trio methods it forwards, with
:func:`awaits` (an ``async def`` of the trio object, awaited through
``_bridge.call``), :func:`direct` (a plain method, called as is: trio and
asyncio share the thread). The forwarders keep
the trio method's signature for type checkers, and its docstring.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from pykaf._util import forwarded_as
from pykaf.aio._bridge import call, wrong_loop
from pykaf.aio._runner import Runner

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


class Wrapper(Generic[T]):
    """A trio object owned by one loop's guest run, seen from asyncio."""

    __slots__ = ("_runner", "_trio")

    def __init__(self, trio_object: T, runner: Runner) -> None:
        self._trio = trio_object
        self._runner = runner

    @property
    def trio_object(self) -> T:
        """The trio object underneath (use it only from trio code in the same guest run)."""
        return self._trio

    def _check_loop(self) -> None:
        """Raise unless called from the loop the object was opened on."""
        loop = self._runner.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not loop:
            wrong_loop(loop)

    def __repr__(self) -> str:
        return f"<pykaf.aio {self._trio!r}>"


def awaits(
    method: Callable[Concatenate[T, P], Awaitable[R]],
) -> Callable[Concatenate[Wrapper[T], P], Coroutine[Any, Any, R]]:
    """Forward the trio ``async def`` ``method``: awaited in the guest run, through the bridge."""
    name = method.__name__

    async def forward(self: Wrapper[T], /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[..., Awaitable[R]] = getattr(self._trio, name)
        return await call(self._runner, bound, *args, **kwargs)

    forwarded_as(forward, method)
    return forward


def direct(method: Callable[Concatenate[T, P], R]) -> Callable[Concatenate[Wrapper[T], P], R]:
    """Forward the trio object's plain ``method``: called directly (same thread, no await)."""
    name = method.__name__

    def forward(self: Wrapper[T], /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_loop()
        bound: Callable[..., R] = getattr(self._trio, name)
        return bound(*args, **kwargs)

    forwarded_as(forward, method)
    return forward


__all__ = ["Wrapper", "awaits", "direct"]
