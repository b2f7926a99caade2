"""``pykaf.aio``'s cluster client: :class:`pykaf.Client` seen from asyncio.

The raw broker connections (``broker_connection``, ``any_connection``,
``connect_to``) stay trio's: asyncio reaches a broker through
:meth:`Client.request`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pykaf
from pykaf.aio._bridge import open_in_run
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits, direct


class Client(Wrapper[pykaf.Client]):
    """A cluster client for asyncio; get one from :func:`open_client` (see :class:`pykaf.Client`).

    Pass it to the other ``open_*`` functions of ``pykaf.aio`` to share its
    connections (it stays open after them).
    """

    __slots__ = ()

    @property
    def closed(self) -> bool:
        """Whether the client was closed."""
        return self._trio.closed

    @property
    def cluster_id(self) -> str | None:
        """The cluster id from the last metadata response."""
        return self._trio.cluster_id

    @property
    def config(self) -> pykaf.ClientConfig:
        """The client's options."""
        return self._trio.config

    def _unwrap_for(self, runner: Runner) -> pykaf.Client:
        if self._runner is not runner:
            raise RuntimeError(
                "this pykaf.aio.Client belongs to another asyncio loop; open one per loop"
            )
        return self._trio

    aclose = awaits(pykaf.Client.aclose)
    brokers = awaits(pykaf.Client.brokers)
    controller = awaits(pykaf.Client.controller)
    coordinator = awaits(pykaf.Client.coordinator)
    get_offset = awaits(pykaf.Client.get_offset)
    in_sync_replicas = awaits(pykaf.Client.in_sync_replicas)
    leader = awaits(pykaf.Client.leader)
    offline_replicas = awaits(pykaf.Client.offline_replicas)
    partitions = awaits(pykaf.Client.partitions)
    refresh_coordinator = awaits(pykaf.Client.refresh_coordinator)
    refresh_metadata = awaits(pykaf.Client.refresh_metadata)
    refresh_transaction_coordinator = awaits(pykaf.Client.refresh_transaction_coordinator)
    replicas = awaits(pykaf.Client.replicas)
    request = awaits(pykaf.Client.request)
    topics = awaits(pykaf.Client.topics)
    transaction_coordinator = awaits(pykaf.Client.transaction_coordinator)
    writable_partitions = awaits(pykaf.Client.writable_partitions)
    forget_coordinator = direct(pykaf.Client.forget_coordinator)
    newest_features = direct(pykaf.Client.newest_features)
    rebootstrap = direct(pykaf.Client.rebootstrap)
    statistics = direct(pykaf.Client.statistics)


def unwrap_client(
    target: str | list[str] | Client | pykaf.Client | None, runner: Runner
) -> str | list[str] | pykaf.Client | None:
    """The trio client under an asyncio one (checked to be of the same loop), or ``target``.

    Raises:
        RuntimeError: ``target`` is a client of another loop.
    """
    if isinstance(target, Client):
        return target._unwrap_for(runner)
    return target


@asynccontextmanager
async def open_client(
    bootstrap_servers: str | list[str] | None = None, **config: Any
) -> AsyncIterator[Client]:
    """Connect to a cluster from asyncio; the client is closed when the block exits.

    See :func:`pykaf.open_client`.

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option (before anything connects).
        KafkaConnectionError: no bootstrap broker could be reached.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.Client]:
        return pykaf.open_client(bootstrap_servers, **config)

    async with open_in_run(opener) as (client, runner):
        yield Client(client, runner)


__all__ = ["Client", "open_client", "unwrap_client"]
