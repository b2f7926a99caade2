"""What a blocking facade object hosted in the portal's loop shares: its lifetime.

:class:`Hosted` owns the async context the portal entered for it (an admin
client, a share consumer): :meth:`Hosted.close` leaves that context once,
from any thread, and the object is a context manager.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, TypeVar

from pykaf._sync.portal import ContextHandle, Portal, get_portal

H = TypeVar("H", bound="Hosted")

__all__ = ["Hosted"]


class Hosted:
    """A facade over an async context entered in the portal's loop (see the module)."""

    #: what ``repr`` names it, e.g. "pykaf.sync.Admin"
    _name = "pykaf.sync object"

    def _host(self, opener: Any) -> Any:
        """Enter ``opener()`` (an async context manager) in the portal; its value."""
        self._portal: Portal = get_portal()
        value, handle = self._portal.start_context(opener)
        self._handle: ContextHandle[Any] = handle
        self._lock = threading.Lock()
        self._closed = False
        return value

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
