"""The dispatcher: sarama's ``input()`` channel, drained in bursts into ``send_nowait``.

The dispatcher task is the channel's only reader while it runs. It takes
up to 4096 messages at a time off the channel and hands each to the same
path ``send_nowait`` takes, waiting for buffer space between them; a
message refused there goes to ``errors()`` (or the next ``flush()``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from pykaf import errors
from pykaf._producer.accumulator import Accumulator
from pykaf._producer.delivery import Reports
from pykaf._producer.records import ProducerMessage

#: How many messages one burst takes off ``input()`` at most.
_BURST = 4096


class Dispatcher:
    """Owns ``input()``: its channel, the burst taken off it, and the task reading it.

    ``send(topic, value, key=, partition=, headers=, timestamp=, on_delivery=)``
    is ``Producer.send_nowait``.
    """

    def __init__(
        self,
        send: Callable[..., None],
        accumulator: Accumulator,
        reports: Reports,
        *,
        track: bool,
    ) -> None:
        self._send_record = send
        self._acc = accumulator
        self._reports = reports
        self._track = track  # return_successes or return_errors: messages see their outcome
        self.input, self._receive = trio.open_memory_channel[ProducerMessage](1024)
        self._burst: deque[ProducerMessage] = deque()  # taken off input(), not dispatched yet
        self._running = True  # the dispatcher is input()'s only reader while it runs
        self._dispatched = trio.Event()  # set by the dispatcher after each burst

    async def run(self) -> None:
        """The dispatcher task: drain ``input()`` in bursts until it is closed."""
        receive = self._receive
        try:
            while True:
                try:
                    msg = await receive.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                burst = self._burst
                burst.append(msg)
                while len(burst) < _BURST:
                    try:
                        burst.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                        break
                await self._dispatch_burst()
                self._dispatched.set()
        finally:
            self._running = False
            self._dispatched.set()

    def close(self) -> None:
        """Close ``input()``: the task dispatches what it holds, then ends."""
        self.input.close()

    async def drain(self) -> None:
        """Return once every message already on ``input()`` is dispatched, in order.

        The dispatcher task stays the channel's only reader while it runs: a
        message it was just handed by ``receive()`` is its own before it even
        runs, so another reader would overtake it. This waits until the
        dispatcher has nothing in hand and waits on an empty channel; once the
        dispatcher has ended (the input was closed), it dispatches the rest
        itself.
        """
        receive = self._receive
        while self._running:
            stats = receive.statistics()
            if not self._burst and stats.current_buffer_used == 0 and stats.tasks_waiting_receive:
                return
            if self._dispatched.is_set():
                self._dispatched = trio.Event()
            with trio.move_on_after(0.05):
                await self._dispatched.wait()
        while True:
            await self._dispatch_burst()
            try:
                self._burst.append(receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return

    async def _dispatch_burst(self) -> None:
        """Dispatch the messages taken off ``input()`` and not dispatched yet, in order."""
        burst = self._burst
        while burst:
            await self._acc.wait_for_space_lenient()
            if burst:
                self._dispatch(burst.popleft())

    def _dispatch(self, msg: ProducerMessage) -> None:
        """One ``input()`` message into the ``send_nowait`` path; its errors to errors()."""
        target: Any = msg if self._track else None
        try:
            self._send_record(
                msg.topic,
                msg.value,
                key=msg.key,
                partition=msg.partition,
                headers=msg.headers,
                timestamp=msg.timestamp,
                on_delivery=target,
            )
        except (errors.PykafError, TypeError, ValueError) as exc:
            self._reports.refused(msg, exc)


__all__ = ["Dispatcher"]
