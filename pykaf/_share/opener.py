"""Opening a share consumer: validate, open (or share) the client, start the heartbeats."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from pykaf import errors
from pykaf._cluster.client import Client, client_for
from pykaf._share.config import ShareConsumerConfig
from pykaf._share.consumer import ShareConsumer
from pykaf._util import require_trio
from pykaf.protocol.versions import SHARE_GROUPS, require

__all__ = ["open_share_consumer"]

log = logging.getLogger("pykaf.share")


@asynccontextmanager
async def open_share_consumer(
    bootstrap_servers_or_client: str | list[str] | Client | None,
    group_id: str,
    topics: Sequence[str],
    **config: Any,
) -> AsyncIterator[ShareConsumer]:
    """Join share group ``group_id`` (KIP-932, Kafka 4.1+) and consume ``topics`` as a queue.

    Leaving the block accepts the records handed out and not acknowledged,
    releases the ones fetched but not handed out, and leaves the group. See
    ``docs/share-groups.md``.

    Args:
        bootstrap_servers_or_client: "host:port,..." (or a list), or an open
            :class:`pykaf.Client` to share (it stays open afterwards).
        group_id: the share group.
        topics: the topic names to consume.
        **config: options of :class:`pykaf.ShareConsumerConfig` (client options too).

    Raises:
        ConfigError: an invalid option or an empty group id or topic list.
        BrokerFeatureError: the broker has no share groups (before Kafka 4.1),
            naming its release.
        KafkaConnectionError: no broker could be reached.
        TopicAuthorizationError: the member may not describe one of ``topics``.
    """
    require_trio("pykaf.open_share_consumer()")
    if not isinstance(group_id, str) or not group_id:
        raise errors.ConfigError(f"group_id must be a non-empty string, not {group_id!r}")
    if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
        raise errors.ConfigError(f"topics must be a non-empty list of topic names, not {topics!r}")
    async with AsyncExitStack() as stack:
        client, cfg = await client_for(
            stack, ShareConsumerConfig, bootstrap_servers_or_client, config
        )
        require((await client.any_connection()).versions, SHARE_GROUPS)
        await client.refresh_metadata(*topics)
        await _warn_missing(client, group_id, topics)
        consumer = ShareConsumer(client, cfg, group_id, topics)
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.membership.run)
            try:
                yield consumer
            finally:
                await consumer.aclose()
                nursery.cancel_scope.cancel()


async def _warn_missing(client: Client, group_id: str, topics: Sequence[str]) -> None:
    """Warn of each topic that does not exist once metadata was waited for.

    Not an error: the group assigns a topic's partitions once it is created,
    as a consumer group does; but until then the member waits with nothing to
    fetch, which the warning says instead of waiting silently.
    """
    for topic in dict.fromkeys(topics):
        try:
            await client.partitions(topic)  # waits as a consumer does (auto-creation too)
        except errors.UnknownTopicOrPartitionError as exc:
            log.warning(
                "share group %s: %s; this member gets no records of it until it is created",
                group_id,
                exc,
            )
