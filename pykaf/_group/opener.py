"""Opening a consumer group member: the classic protocol's or the consumer protocol's.

:func:`open_consumer_group` validates the options once, opens (or shares) the
client, and gives a :class:`~pykaf._group.classic_member.ClassicMember` or a
:class:`~pykaf._group.heartbeat_member.HeartbeatMember` (``group_protocol=
"consumer"``, KIP-848) with its consumer and task nurseries.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from pykaf import errors
from pykaf._cluster.client import Client, client_for
from pykaf._cluster.telemetry import close_telemetry, start_telemetry
from pykaf._consumer.consumer import Consumer
from pykaf._group.classic_member import ClassicMember
from pykaf._group.config import GroupConfig, check_protocol_options
from pykaf._group.group import ConsumerGroup, membership_block
from pykaf._group.heartbeat_member import HeartbeatMember
from pykaf._group.telemetry import group_points
from pykaf._util import open_service_nursery, require_trio, start_task_nursery
from pykaf.protocol.versions import CONSUMER_GROUPS, require

__all__ = ["open_consumer_group"]


@asynccontextmanager
async def open_consumer_group(
    bootstrap_servers_or_client: str | list[str] | Client | None,
    group_id: str,
    topics: Sequence[str] | re.Pattern[str],
    **config: Any,
) -> AsyncIterator[ConsumerGroup]:
    """Open a consumer group member; leaving the block commits and leaves the group.

    With ``group_protocol="consumer"`` the member speaks KIP-848's protocol
    (the broker assigns; see ``docs/consumer.md``); the handler API and
    ``async for`` are the same on both protocols.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        group_id: the group to join.
        topics: the topics to consume; with ``group_protocol="consumer"`` also a
            compiled regular expression (``re.compile("orders-.*")``), which the
            broker matches against the cluster's topics in RE2/J syntax.
        **config: options of :class:`pykaf.GroupConfig` (consumer and client options too).

    Raises:
        ConfigError: an invalid option or an empty group id or topic list; an
            option the protocol does not use, set all the same (``assignors``,
            ``session_timeout``, ``heartbeat_interval`` or
            ``partition_watch_interval`` with ``group_protocol="consumer"``,
            where the broker decides them; ``group_remote_assignor`` with the
            classic protocol).
        BrokerFeatureError: ``group_protocol="consumer"`` on a broker without
            KIP-848 groups (Kafka 3.x), naming its release.
        KafkaConnectionError: no broker could be reached.
    """
    require_trio("pykaf.open_consumer_group()")
    if not isinstance(group_id, str) or not group_id:
        raise errors.ConfigError(f"group_id must be a non-empty string, not {group_id!r}")
    regex = isinstance(topics, re.Pattern)
    if not regex and (isinstance(topics, str) or not topics):
        raise errors.ConfigError(f"topics must be a non-empty list of topic names, not {topics!r}")
    async with AsyncExitStack() as stack:
        check_protocol_options(config)  # before anything connects
        client, cfg = await client_for(stack, GroupConfig, bootstrap_servers_or_client, config)
        if regex and cfg.group_protocol != "consumer":
            raise errors.ConfigError(
                "a regular expression subscription needs group_protocol='consumer' "
                "(the broker matches it, KIP-848)"
            )
        if cfg.group_protocol == "consumer":
            require((await client.any_connection()).versions, CONSUMER_GROUPS)
        async with open_service_nursery() as nursery:
            # Tasks live in nurseries of their own, so that aclose() inside the
            # block stops them and not the block.
            consumer = Consumer(client, cfg, await start_task_nursery(nursery))
            tasks = await start_task_nursery(nursery)
            group: ConsumerGroup
            if cfg.group_protocol == "consumer":
                group = HeartbeatMember(client, cfg, group_id, topics, consumer, tasks)
            else:
                assert not isinstance(topics, re.Pattern)  # refused above
                group = ClassicMember(client, cfg, group_id, topics, consumer, tasks)
            telemetry = start_telemetry(
                client, cfg, nursery, "consumer", lambda: group_points(group, consumer)
            )
            try:
                async with membership_block(group):
                    yield group
            finally:
                with trio.CancelScope(shield=True):
                    await close_telemetry(telemetry)
                nursery.cancel_scope.cancel()
