"""``pykaf.aio``'s share consumer (KIP-932 queues): :class:`pykaf.ShareConsumer` from asyncio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pykaf
from pykaf.aio._bridge import call_keeping, open_in_run
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct
from pykaf.aio.client import Client, unwrap_client


class ShareConsumer(Wrapper[pykaf.ShareConsumer]):
    """A share group member for asyncio; get one from :func:`open_share_consumer`.

    ``async for record in consumer`` (each accepted when the next is asked
    for), ``next_batch()``, ``next_record()``, ``acknowledge()``,
    ``commit()``: see :class:`pykaf.ShareConsumer`.
    """

    __slots__ = ("_kept",)

    def __init__(self, consumer: pykaf.ShareConsumer, runner: Runner) -> None:
        super().__init__(consumer, runner)
        #: A record trio handed out to a caller cancelled in that loop pass.
        self._kept: list[pykaf.ShareRecord] = []

    @property
    def group_id(self) -> str:
        """The share group."""
        return self._trio.group_id

    @property
    def member_id(self) -> str:
        """The member id (kept for the consumer's life)."""
        return self._trio.member_id

    @property
    def assignment(self) -> frozenset[Any]:
        """The partitions (``(topic, partition)``) the coordinator assigned this member."""
        return self._trio.assignment

    @property
    def acknowledge_errors(self) -> dict[Any, Exception]:
        """Acknowledgement errors the broker returned with a ShareFetch, by partition."""
        return self._trio.acknowledge_errors

    @property
    def client(self) -> Client:
        """The cluster client the consumer works through."""
        return Client(self._trio.client, self._runner)

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> pykaf.ShareRecord:
        self._check_loop()
        if self._kept:
            # Handed out by trio to a caller cancelled as it came: this caller's now.
            return self._kept.pop()
        # The rest of the current batch is handed out without crossing into trio.
        record = self._trio.next_nowait()
        if record is not None:
            return record
        return await call_keeping(self._runner, self._kept.append, self._trio.__anext__)

    next_batch = awaits(pykaf.ShareConsumer.next_batch)
    next_record = awaits(pykaf.ShareConsumer.next_record)
    commit = awaits(pykaf.ShareConsumer.commit)
    aclose = awaits(pykaf.ShareConsumer.aclose)
    acknowledge = direct(pykaf.ShareConsumer.acknowledge)
    next_nowait = direct(pykaf.ShareConsumer.next_nowait)


@asynccontextmanager
async def open_share_consumer(
    bootstrap_servers_or_client: str | list[str] | Client | None,
    group_id: str,
    topics: Sequence[str],
    **config: Any,
) -> AsyncIterator[ShareConsumer]:
    """Join the share group ``group_id`` from asyncio (see :func:`pykaf.open_share_consumer`).

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option, before anything connects.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.ShareConsumer]:
        target = unwrap_client(bootstrap_servers_or_client, runner)
        return pykaf.open_share_consumer(target, group_id, topics, **config)

    async with open_in_run(opener) as (consumer, runner):
        yield ShareConsumer(consumer, runner)


__all__ = ["ShareConsumer", "open_share_consumer"]
