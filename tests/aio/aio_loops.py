"""Asyncio loops for pykaf.aio's tests (imported by the conftest and by test modules)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class NoWatchLoop(asyncio.SelectorEventLoop):
    """A selector loop that refuses to watch a descriptor, as asyncio's proactor loop does.

    Windows' proactor loop has no ``add_reader``: pykaf.aio then leaves the
    reading of its broker connections to trio (``READ_HOST`` in
    ``pykaf/_net/connection.py``). This loop runs that fallback on Linux. Its
    own machinery (its self-pipe, its sockets) uses the private
    ``_add_reader``, which still works; only public callers are refused.
    """

    def __init__(self) -> None:
        super().__init__()
        #: How many times each refused method was asked.
        self.asked: dict[str, int] = {}

    def _refuse(self, name: str) -> None:
        self.asked[name] = self.asked.get(name, 0) + 1
        raise NotImplementedError

    def add_reader(self, fd: Any, callback: Callable[..., object], *args: Any) -> None:
        self._refuse("add_reader")

    def remove_reader(self, fd: Any) -> bool:
        self._refuse("remove_reader")
        return False

    def add_writer(self, fd: Any, callback: Callable[..., object], *args: Any) -> None:
        self._refuse("add_writer")

    def remove_writer(self, fd: Any) -> bool:
        self._refuse("remove_writer")
        return False


def loop_reads(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` reads pykaf's connections itself (``add_reader``), or leaves it to trio."""
    return not isinstance(loop, NoWatchLoop)
