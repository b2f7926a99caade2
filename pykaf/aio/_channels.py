"""Trio memory channels seen from asyncio (the producer's ``input()``, ``successes()``, ...).

``*_nowait`` calls go straight to the trio channel (same thread); the
waiting ones go through the bridge.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

from pykaf.aio._bridge import call, call_keeping
from pykaf.aio._runner import Runner

T = TypeVar("T")


class SendChannel(Generic[T]):
    """The sending end of a trio memory channel, for asyncio."""

    __slots__ = ("_channel", "_runner")

    def __init__(self, channel: trio.MemorySendChannel[T], runner: Runner) -> None:
        self._channel = channel
        self._runner = runner

    async def send(self, value: T) -> None:
        """Send ``value``, waiting while the channel is full."""
        await call(self._runner, self._channel.send, value)

    def send_nowait(self, value: T) -> None:
        """Send ``value`` now (``trio.WouldBlock`` when the channel is full)."""
        self._channel.send_nowait(value)


class ReceiveChannel(Generic[T]):
    """The receiving end of a trio memory channel, for asyncio (``async for`` works)."""

    __slots__ = ("_channel", "_kept", "_runner")

    def __init__(self, channel: trio.MemoryReceiveChannel[T], runner: Runner) -> None:
        self._channel = channel
        self._runner = runner
        #: A value received for a caller cancelled in that loop pass.
        self._kept: list[T] = []

    async def receive(self) -> T:
        """The next value, waiting for one (``trio.EndOfChannel`` once closed and empty)."""
        if self._kept:
            return self._kept.pop()
        return await call_keeping(self._runner, self._kept.append, self._channel.receive)

    def receive_nowait(self) -> T:
        """The next value if one is there (``trio.WouldBlock`` if not)."""
        if self._kept:
            return self._kept.pop()
        return self._channel.receive_nowait()

    def __aiter__(self) -> ReceiveChannel[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return self.receive_nowait()
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


__all__ = ["ReceiveChannel", "SendChannel"]
