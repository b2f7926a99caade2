"""``pykaf.aio``'s admin client: :class:`pykaf.Admin` seen from asyncio, every call awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pykaf
from pykaf.aio._bridge import open_in_run
from pykaf.aio._runner import Runner
from pykaf.aio._wrap import Wrapper, awaits
from pykaf.aio.client import Client, unwrap_client


class Admin(Wrapper[pykaf.Admin]):
    """Topics, configs, groups, offsets and ACLs from asyncio; get one from :func:`open_admin`.

    The same calls as :class:`pykaf.Admin`, each awaited.
    """

    __slots__ = ()

    @property
    def client(self) -> Client:
        """The cluster client the admin calls go through."""
        return Client(self._trio.client, self._runner)

    alter_broker_configs = awaits(pykaf.Admin.alter_broker_configs)
    alter_group_configs = awaits(pykaf.Admin.alter_group_configs)
    alter_group_offsets = awaits(pykaf.Admin.alter_group_offsets)
    alter_share_group_offsets = awaits(pykaf.Admin.alter_share_group_offsets)
    alter_topic_configs = awaits(pykaf.Admin.alter_topic_configs)
    create_acls = awaits(pykaf.Admin.create_acls)
    create_partitions = awaits(pykaf.Admin.create_partitions)
    create_topic = awaits(pykaf.Admin.create_topic)
    create_topics = awaits(pykaf.Admin.create_topics)
    delete_acls = awaits(pykaf.Admin.delete_acls)
    delete_group = awaits(pykaf.Admin.delete_group)
    delete_group_offsets = awaits(pykaf.Admin.delete_group_offsets)
    delete_groups = awaits(pykaf.Admin.delete_groups)
    delete_records = awaits(pykaf.Admin.delete_records)
    delete_share_group_offsets = awaits(pykaf.Admin.delete_share_group_offsets)
    delete_topic = awaits(pykaf.Admin.delete_topic)
    delete_topics = awaits(pykaf.Admin.delete_topics)
    describe_acls = awaits(pykaf.Admin.describe_acls)
    describe_broker_configs = awaits(pykaf.Admin.describe_broker_configs)
    describe_cluster = awaits(pykaf.Admin.describe_cluster)
    describe_group = awaits(pykaf.Admin.describe_group)
    describe_group_configs = awaits(pykaf.Admin.describe_group_configs)
    describe_groups = awaits(pykaf.Admin.describe_groups)
    describe_share_group = awaits(pykaf.Admin.describe_share_group)
    describe_share_groups = awaits(pykaf.Admin.describe_share_groups)
    describe_topic = awaits(pykaf.Admin.describe_topic)
    describe_topic_configs = awaits(pykaf.Admin.describe_topic_configs)
    describe_topics = awaits(pykaf.Admin.describe_topics)
    group_lag = awaits(pykaf.Admin.group_lag)
    list_group_offsets = awaits(pykaf.Admin.list_group_offsets)
    list_groups = awaits(pykaf.Admin.list_groups)
    list_offsets = awaits(pykaf.Admin.list_offsets)
    list_share_group_offsets = awaits(pykaf.Admin.list_share_group_offsets)
    list_share_groups = awaits(pykaf.Admin.list_share_groups)
    list_topics = awaits(pykaf.Admin.list_topics)


@asynccontextmanager
async def open_admin(
    bootstrap_servers_or_client: str | list[str] | Client | None = None, **config: Any
) -> AsyncIterator[Admin]:
    """Open an admin client on the running asyncio loop (see :func:`pykaf.open_admin`).

    Raises:
        RuntimeError: no asyncio loop is running.
        ConfigError: an invalid option, before anything connects.
        KafkaConnectionError: no broker could be reached.
    """

    def opener(runner: Runner) -> AbstractAsyncContextManager[pykaf.Admin]:
        return pykaf.open_admin(unwrap_client(bootstrap_servers_or_client, runner), **config)

    async with open_in_run(opener) as (admin, runner):
        yield Admin(admin, runner)


__all__ = ["Admin", "open_admin"]
