"""``pykaf.sync.Admin``: the admin client for scripts and threads, through the portal."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from pykaf._admin.admin import Admin as AsyncAdmin
from pykaf._admin.admin import open_admin
from pykaf._config import bootstrap_argument
from pykaf._sync.hosted import Hosted, blocks


class Admin(Hosted):
    """A blocking admin client: :func:`pykaf.open_admin` for scripts and threads.

    ::

        with pykaf.sync.Admin("localhost:9092") as admin:
            admin.create_topic("orders", 6, 3, {"retention.ms": "86400000"})
            print(admin.describe_topic("orders").partitions)
            for lag in admin.group_lag("billing"):
                print(lag.topic, lag.partition, lag.lag)

    Every method is the async client's (same arguments, results and errors),
    run in the process's portal loop; any thread may call it.

    Args:
        bootstrap_servers: ``"host:port,..."`` or a list of ``"host:port"``.
        **config: client options (:class:`pykaf.ClientConfig`).

    Raises:
        ConfigError: an invalid option.
        KafkaConnectionError: no broker could be reached.
    """

    _name = "pykaf.sync.Admin"
    _what = "the admin client"

    def __init__(self, bootstrap_servers: str | Sequence[str], **config: Any) -> None:
        self._host(partial(open_admin, bootstrap_argument(bootstrap_servers), **config))

    alter_broker_configs = blocks(AsyncAdmin.alter_broker_configs)
    alter_group_configs = blocks(AsyncAdmin.alter_group_configs)
    alter_group_offsets = blocks(AsyncAdmin.alter_group_offsets)
    alter_share_group_offsets = blocks(AsyncAdmin.alter_share_group_offsets)
    alter_topic_configs = blocks(AsyncAdmin.alter_topic_configs)
    create_acls = blocks(AsyncAdmin.create_acls)
    create_partitions = blocks(AsyncAdmin.create_partitions)
    create_topic = blocks(AsyncAdmin.create_topic)
    create_topics = blocks(AsyncAdmin.create_topics)
    delete_acls = blocks(AsyncAdmin.delete_acls)
    delete_group = blocks(AsyncAdmin.delete_group)
    delete_group_offsets = blocks(AsyncAdmin.delete_group_offsets)
    delete_groups = blocks(AsyncAdmin.delete_groups)
    delete_records = blocks(AsyncAdmin.delete_records)
    delete_share_group_offsets = blocks(AsyncAdmin.delete_share_group_offsets)
    delete_topic = blocks(AsyncAdmin.delete_topic)
    delete_topics = blocks(AsyncAdmin.delete_topics)
    describe_acls = blocks(AsyncAdmin.describe_acls)
    describe_broker_configs = blocks(AsyncAdmin.describe_broker_configs)
    describe_cluster = blocks(AsyncAdmin.describe_cluster)
    describe_group = blocks(AsyncAdmin.describe_group)
    describe_group_configs = blocks(AsyncAdmin.describe_group_configs)
    describe_groups = blocks(AsyncAdmin.describe_groups)
    describe_share_group = blocks(AsyncAdmin.describe_share_group)
    describe_share_groups = blocks(AsyncAdmin.describe_share_groups)
    describe_topic = blocks(AsyncAdmin.describe_topic)
    describe_topic_configs = blocks(AsyncAdmin.describe_topic_configs)
    describe_topics = blocks(AsyncAdmin.describe_topics)
    group_lag = blocks(AsyncAdmin.group_lag)
    list_group_offsets = blocks(AsyncAdmin.list_group_offsets)
    list_groups = blocks(AsyncAdmin.list_groups)
    list_offsets = blocks(AsyncAdmin.list_offsets)
    list_share_group_offsets = blocks(AsyncAdmin.list_share_group_offsets)
    list_share_groups = blocks(AsyncAdmin.list_share_groups)
    list_topics = blocks(AsyncAdmin.list_topics)

    def close(self, timeout: float | None = None) -> None:
        """Close the connections. Idempotent."""
        super().close(timeout)


__all__ = ["Admin"]
