"""What a blocking facade object hosted in the portal's loop shares: its lifetime and calls.

:class:`Hosted` owns the async context the portal entered for it (an admin
client, a share consumer): :meth:`Hosted.close` leaves that context once,
from any thread, and the object is a context manager. :func:`blocks`
forwards one of the hosted object's ``async def`` methods: run in the
portal's loop, the calling thread blocked until it returns (as
``pykaf.aio``'s ``awaits`` forwards it through its bridge).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from functools import partial
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from pykaf._sync.portal import ContextHandle, Portal, get_portal
from pykaf._util import forwarded_as
from pykaf.errors import ClosedError

H = TypeVar("H", bound="Hosted")
T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

__all__ = ["Hosted", "blocks"]


class Hosted:
    """A facade over an async context entered in the portal's loop (see the module)."""

    #: what ``repr`` names it, e.g. "pykaf.sync.Admin"
    _name = "pykaf.sync object"
    #: what a call after :meth:`close` says is closed, e.g. "the admin client"
    _what = "the object"

    def _host(self, opener: Any) -> Any:
        """Enter ``opener()`` (an async context manager) in the portal; its value."""
        self._portal: Portal = get_portal()
        value, handle = self._portal.start_context(opener)
        self._handle: ContextHandle[Any] = handle
        self._lock = threading.Lock()
        self._closed = False
        #: The object the async context gave (what :func:`blocks` forwards to).
        self._hosted = value
        return value

    def _call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``method(*args, **kwargs)`` in the portal's loop and wait for it.

        Raises:
            ClosedError: the object was closed.
        """
        self._portal.check_caller()
        if self._closed:
            raise ClosedError(f"{self._what} is closed")
        result: T = self._portal.run(partial(method, *args, **kwargs))
        return result

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def close(self, timeout: float | None = None) -> None:
        """Leave the async context (what that does: the class says). Idempotent."""
        self._portal.check_caller()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._handle.exit(None, timeout)

    def __enter__(self: H) -> H:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close it."""
        self.close()

    def __repr__(self) -> str:
        return f"<{self._name} {'closed' if self._closed else 'open'}>"


def blocks(
    method: Callable[Concatenate[T, P], Awaitable[R]],
) -> Callable[Concatenate[Hosted, P], R]:
    """Forward the hosted object's ``async def`` ``method``: run in the portal; the caller waits."""
    name = method.__name__

    def forward(self: Hosted, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._call(getattr(self._hosted, name), *args, **kwargs)
        return result

    forwarded_as(forward, method)
    return forward
