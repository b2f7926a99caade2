"""``pykaf.aio``'s consumer groups: :class:`pykaf.ConsumerGroup` seen from asyncio.

A handler's ``setup``, ``consume_claim`` and ``cleanup`` are asyncio
coroutines: the trio group awaits each as an asyncio task of the loop
(``_bridge.run_asyncio``), and cancels it when trio cancels the call (a
revoked claim, the group closing). The session and claims they get are
:class:`GroupSession` and :class:`Claim`, for asyncio.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import pykaf
from pykaf.aio._bridge import call, call_keeping, open_in_run, run_asyncio
from pykaf.aio._reader import RecordReader
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client
from pykaf.codec import Record


class Claim(RecordReader[pykaf.Claim]):
    """One partition given to this member, for asyncio (see :class:`pykaf.Claim`).

    ``async for record in claim`` and ``await claim.next_batch()`` decode
    each fetched piece in the reading task, as a partition consumer's do;
    when the claim ends, the records taken and not handed out are dropped
    with the claim's own, and the iteration stops.
    """

    __slots__ = ("_end_position",)

    def __init__(self, trio_object: pykaf.Claim, runner: Runner) -> None:
        super().__init__(trio_object, runner)
        #: The position when the claim ended (-1 while it runs).
        self._end_position = -1
        trio_object.on_end = self._ended_now

    def _ended_now(self) -> None:
        # The trio claim ends (in trio, in this thread): nothing taken is handed out after.
        self._end_position = self.position
        self._drop_taken()

    @property
    def position(self) -> int:
        """The offset of the next record the claim hands out (where it stopped once ended)."""
        if self._end_position >= 0:
            return self._end_position
        return super().position

    @property
    def initial_offset(self) -> int:
        """Where consumption started (committed offset, or the reset)."""
        return self._trio.initial_offset

    @property
    def revoked(self) -> bool:
        """Whether the claim has ended."""
        return self._trio.revoked

    epoch_before = direct(pykaf.Claim.epoch_before)


class GroupSession(Wrapper[pykaf.GroupSession]):
    """One generation of the group as this member sees it, for asyncio.

    See :class:`pykaf.GroupSession`.
    """

    __slots__ = ()

    @property
    def group_id(self) -> str:
        """The group."""
        return self._trio.group_id

    @property
    def member_id(self) -> str:
        """The member id in the generation."""
        return self._trio.member_id

    @property
    def generation_id(self) -> int:
        """The generation (a consumer-protocol member's current member epoch)."""
        return self._trio.generation_id

    @property
    def claims(self) -> dict[str, list[int]]:
        """Topic -> partitions assigned to this member in the generation."""
        return self._trio.claims

    commit = awaits(pykaf.GroupSession.commit)
    group_metadata = direct(pykaf.GroupSession.group_metadata)
    mark_batch = direct(pykaf.GroupSession.mark_batch)
    mark_message = direct(pykaf.GroupSession.mark_message)
    mark_offset = direct(pykaf.GroupSession.mark_offset)
    reset_offset = direct(pykaf.GroupSession.reset_offset)


class ConsumerGroupHandler(Protocol):
    """What :meth:`ConsumerGroup.consume` runs: sarama's handler, with asyncio coroutines."""

    async def setup(self, session: GroupSession) -> None:
        """A generation starts, before any consume_claim of it."""

    async def consume_claim(self, session: GroupSession, claim: Claim) -> None:
        """Consume one claim; return once its records end."""

    async def cleanup(self, session: GroupSession) -> None:
        """A generation ended, after its revoked claims' consume_claim returned."""


class _TrioHandler:
    """The trio group's handler: each call runs the asyncio handler's coroutine."""

    def __init__(self, handler: ConsumerGroupHandler, runner: Runner) -> None:
        self._handler = handler
        self._runner = runner
        self._session: tuple[pykaf.GroupSession, GroupSession] | None = None

    def _wrap(self, session: pykaf.GroupSession) -> GroupSession:
        # One asyncio session per generation, the same object in every call.
        if self._session is None or self._session[0] is not session:
            self._session = (session, GroupSession(session, self._runner))
        return self._session[1]

    async def setup(self, session: pykaf.GroupSession) -> None:
        await run_asyncio(self._runner.loop, self._handler.setup, self._wrap(session))

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        await run_asyncio(
            self._runner.loop,
            self._handler.consume_claim,
            self._wrap(session),
            Claim(claim, self._runner),
        )

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        await run_asyncio(self._runner.loop, self._handler.cleanup, self._wrap(session))


class ConsumerGroup(Wrapper[pykaf.ConsumerGroup]):
    """A consumer group member for asyncio; get one from :func:`open_consumer_group`.

    ``async for record in group`` (committed as you go) or
    ``await group.consume(handler)`` with a :class:`ConsumerGroupHandler`
    whose methods are asyncio coroutines. See :class:`pykaf.ConsumerGroup`.
    """

    __slots__ = ("_kept",)

    def __init__(self, group: pykaf.ConsumerGroup, runner: Runner) -> None:
        super().__init__(group, runner)
        #: A record trio handed out to a caller cancelled in that loop pass.
        self._kept: list[Record] = []

    @property
    def group_id(self) -> str:
        """The group."""
        return self._trio.group_id

    @property
    def member_id(self) -> str:
        """The member id ("" before it joined)."""
        return self._trio.member_id

    @property
    def generation_id(self) -> int:
        """The current generation (-1 outside one)."""
        return self._trio.generation_id

    @property
    def client(self) -> Client:
        """The cluster client the group works through."""
        return Client(self._trio.client, self._runner)

    @property
    def config(self) -> pykaf.GroupConfig:
        """The group's options."""
        return self._trio.config

    async def consume(self, handler: ConsumerGroupHandler) -> None:
        """Run ``handler`` (asyncio coroutines) over each generation until the group closes.

        See :meth:`pykaf.ConsumerGroup.consume`.
        """
        await call(self._runner, self._trio.consume, _TrioHandler(handler, self._runner))

    def __aiter__(self) -> ConsumerGroup:
        return self

    async def __anext__(self) -> Record:
        self._check_loop()
        if self._kept:
            # Handed out by trio to a caller cancelled as it came: this caller's now.
            return self._kept.pop()
        # The records already fetched are handed out (and marked) without crossing into trio.
        record = self._trio.next_nowait()
        if record is None:
            record = await call_keeping(self._runner, self._keep, self._trio.next_record)
            if record is None:
                raise StopAsyncIteration
        return record

    def _keep(self, record: Record | None) -> None:
        if record is not None:
            self._kept.append(record)

    next_nowait = direct(pykaf.ConsumerGroup.next_nowait)
    next_record = awaits(pykaf.ConsumerGroup.next_record)
    commit = awaits(pykaf.ConsumerGroup.commit)
    aclose = awaits(pykaf.ConsumerGroup.aclose)
    assignment = direct(pykaf.ConsumerGroup.assignment)
    group_metadata = direct(pykaf.ConsumerGroup.group_metadata)
    statistics = direct(pykaf.ConsumerGroup.statistics)


@asynccontextmanager
async def open_consumer_group(
    bootstrap_servers_or_client: str | list[str] | Client | None,
    group_id: str,
    topics: Sequence[str] | re.Pattern[str],
    **config: Any,
) -> AsyncIterator[ConsumerGroup]:
    """Join ``group_id`` from asyncio (see :func:`pykaf.open_consumer_group`).

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option, before anything connects.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.ConsumerGroup]:
        target = unwrap_client(bootstrap_servers_or_client, runner)
        return pykaf.open_consumer_group(target, group_id, topics, **config)

    async with open_in_run(opener) as (group, runner):
        yield ConsumerGroup(group, runner)


__all__ = [
    "Claim",
    "ConsumerGroup",
    "ConsumerGroupHandler",
    "GroupSession",
    "open_consumer_group",
]
