"""``pykaf.sync.Admin``: the admin client for scripts and threads, through the portal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pykaf._admin.acls import AclBinding, AclFilter
from pykaf._admin.admin import open_admin
from pykaf._admin.results import (
    ClusterDescription,
    ConfigEntry,
    ConfigValue,
    GroupDescription,
    GroupListing,
    NewTopic,
    OffsetAndMetadata,
    PartitionLag,
    TopicDescription,
    TopicPartition,
)
from pykaf._admin.share_groups import ShareGroupOffset
from pykaf._config import bootstrap_argument
from pykaf._sync.hosted import Hosted
from pykaf.errors import ClosedError


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

    def __init__(self, bootstrap_servers: str | Sequence[str], **config: Any) -> None:
        servers = bootstrap_argument(bootstrap_servers)
        self._admin = self._host(partial(open_admin, servers, **config))

    def _run(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        self._portal.check_caller()
        if self._closed:
            raise ClosedError("the admin client is closed")
        return self._portal.run(partial(method, *args, **kwargs))

    # -- topics -------------------------------------------------------------------

    def create_topics(
        self,
        topics: Sequence[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Create topics; see :meth:`pykaf.Admin.create_topics`."""
        self._run(self._admin.create_topics, topics, validate_only=validate_only, timeout=timeout)

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Create one topic; see :meth:`pykaf.Admin.create_topic`."""
        self._run(
            self._admin.create_topic,
            name,
            partitions,
            replication_factor,
            configs,
            validate_only=validate_only,
            timeout=timeout,
        )

    def delete_topics(self, names: Sequence[str], *, timeout: float | None = None) -> None:
        """Delete topics; see :meth:`pykaf.Admin.delete_topics`."""
        self._run(self._admin.delete_topics, names, timeout=timeout)

    def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        """Delete one topic; see :meth:`pykaf.Admin.delete_topic`."""
        self._run(self._admin.delete_topic, name, timeout=timeout)

    def list_topics(self, *, internal: bool = False) -> list[str]:
        """The topic names; see :meth:`pykaf.Admin.list_topics`."""
        result: list[str] = self._run(self._admin.list_topics, internal=internal)
        return result

    def describe_topics(self, names: Sequence[str]) -> dict[str, TopicDescription]:
        """Describe topics; see :meth:`pykaf.Admin.describe_topics`."""
        result: dict[str, TopicDescription] = self._run(self._admin.describe_topics, names)
        return result

    def describe_topic(self, name: str) -> TopicDescription:
        """Describe one topic; see :meth:`pykaf.Admin.describe_topic`."""
        result: TopicDescription = self._run(self._admin.describe_topic, name)
        return result

    def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Grow topics; see :meth:`pykaf.Admin.create_partitions`."""
        self._run(
            self._admin.create_partitions, counts, validate_only=validate_only, timeout=timeout
        )

    def describe_cluster(self) -> ClusterDescription:
        """The cluster; see :meth:`pykaf.Admin.describe_cluster`."""
        result: ClusterDescription = self._run(self._admin.describe_cluster)
        return result

    def describe_topic_configs(
        self, names: Sequence[str], *, keys: Sequence[str] | None = None
    ) -> dict[str, dict[str, ConfigEntry]]:
        """Topics' configs; see :meth:`pykaf.Admin.describe_topic_configs`."""
        result: dict[str, dict[str, ConfigEntry]] = self._run(
            self._admin.describe_topic_configs, names, keys=keys
        )
        return result

    def describe_group_configs(
        self, group_ids: Sequence[str], *, keys: Sequence[str] | None = None
    ) -> dict[str, dict[str, ConfigEntry]]:
        """Groups' configs; see :meth:`pykaf.Admin.describe_group_configs`."""
        result: dict[str, dict[str, ConfigEntry]] = self._run(
            self._admin.describe_group_configs, group_ids, keys=keys
        )
        return result

    def describe_broker_configs(
        self, node_ids: Sequence[int] | None = None, *, keys: Sequence[str] | None = None
    ) -> dict[int, dict[str, ConfigEntry]]:
        """Brokers' configs; see :meth:`pykaf.Admin.describe_broker_configs`."""
        result: dict[int, dict[str, ConfigEntry]] = self._run(
            self._admin.describe_broker_configs, node_ids, keys=keys
        )
        return result

    def alter_topic_configs(
        self,
        changes: Mapping[str, Mapping[str, ConfigValue]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Change topics' configs; see :meth:`pykaf.Admin.alter_topic_configs`."""
        self._run(self._admin.alter_topic_configs, changes, validate_only=validate_only)

    def alter_broker_configs(
        self,
        changes: Mapping[int | None, Mapping[str, ConfigValue]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Change brokers' configs; see :meth:`pykaf.Admin.alter_broker_configs`."""
        self._run(self._admin.alter_broker_configs, changes, validate_only=validate_only)

    # -- ACLs ---------------------------------------------------------------------

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The bindings a filter matches; see :meth:`pykaf.Admin.describe_acls`."""
        result: list[AclBinding] = self._run(self._admin.describe_acls, acl_filter)
        return result

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add ACL bindings; see :meth:`pykaf.Admin.create_acls`."""
        self._run(self._admin.create_acls, bindings)

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Delete matching bindings; see :meth:`pykaf.Admin.delete_acls`."""
        result: list[AclBinding] = self._run(self._admin.delete_acls, filters)
        return result

    # -- groups -------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group; see :meth:`pykaf.Admin.list_groups`."""
        result: list[GroupListing] = self._run(self._admin.list_groups)
        return result

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """Describe groups; see :meth:`pykaf.Admin.describe_groups`."""
        result: dict[str, GroupDescription] = self._run(self._admin.describe_groups, group_ids)
        return result

    def describe_group(self, group_id: str) -> GroupDescription:
        """Describe one group; see :meth:`pykaf.Admin.describe_group`."""
        result: GroupDescription = self._run(self._admin.describe_group, group_id)
        return result

    def delete_groups(self, group_ids: Sequence[str]) -> None:
        """Delete groups; see :meth:`pykaf.Admin.delete_groups`."""
        self._run(self._admin.delete_groups, group_ids)

    def delete_group(self, group_id: str) -> None:
        """Delete one group; see :meth:`pykaf.Admin.delete_group`."""
        self._run(self._admin.delete_group, group_id)

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets; see :meth:`pykaf.Admin.list_group_offsets`."""
        result: dict[TopicPartition, OffsetAndMetadata] = self._run(
            partial(self._admin.list_group_offsets, require_stable=require_stable),
            group_id,
            partitions,
        )
        return result

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Set a group's offsets; see :meth:`pykaf.Admin.alter_group_offsets`."""
        self._run(self._admin.alter_group_offsets, group_id, offsets)

    def delete_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        """Forget a group's offsets; see :meth:`pykaf.Admin.delete_group_offsets`."""
        self._run(self._admin.delete_group_offsets, group_id, partitions)

    def alter_group_configs(
        self, changes: Mapping[str, Mapping[str, ConfigValue]], *, validate_only: bool = False
    ) -> None:
        """Change group configs; see :meth:`pykaf.Admin.alter_group_configs`."""
        self._run(self._admin.alter_group_configs, changes, validate_only=validate_only)

    def list_share_groups(self) -> list[GroupListing]:
        """List share groups; see :meth:`pykaf.Admin.list_share_groups`."""
        result: list[GroupListing] = self._run(self._admin.list_share_groups)
        return result

    def describe_share_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """Describe share groups; see :meth:`pykaf.Admin.describe_share_groups`."""
        result: dict[str, GroupDescription] = self._run(
            self._admin.describe_share_groups, group_ids
        )
        return result

    def describe_share_group(self, group_id: str) -> GroupDescription:
        """Describe one share group; see :meth:`pykaf.Admin.describe_share_group`."""
        result: GroupDescription = self._run(self._admin.describe_share_group, group_id)
        return result

    def list_share_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, ShareGroupOffset]:
        """A share group's start offsets; see :meth:`pykaf.Admin.list_share_group_offsets`."""
        result: dict[TopicPartition, ShareGroupOffset] = self._run(
            self._admin.list_share_group_offsets, group_id, partitions
        )
        return result

    def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Move start offsets; see :meth:`pykaf.Admin.alter_share_group_offsets`."""
        self._run(self._admin.alter_share_group_offsets, group_id, offsets)

    def delete_share_group_offsets(self, group_id: str, topics: Sequence[str]) -> None:
        """Forget topics' state; see :meth:`pykaf.Admin.delete_share_group_offsets`."""
        self._run(self._admin.delete_share_group_offsets, group_id, topics)

    def group_lag(self, group_id: str, topics: Sequence[str] | None = None) -> list[PartitionLag]:
        """A group's lag; see :meth:`pykaf.Admin.group_lag`."""
        result: list[PartitionLag] = self._run(self._admin.group_lag, group_id, topics)
        return result

    # -- offsets and records ------------------------------------------------------

    def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, isolation_level: str = "read_committed"
    ) -> dict[TopicPartition, int]:
        """Partitions' offsets; see :meth:`pykaf.Admin.list_offsets`."""
        result: dict[TopicPartition, int] = self._run(
            self._admin.list_offsets, specs, isolation_level=isolation_level
        )
        return result

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Delete records; see :meth:`pykaf.Admin.delete_records`."""
        result: dict[TopicPartition, int] = self._run(
            self._admin.delete_records, before, timeout=timeout
        )
        return result

    _name = "pykaf.sync.Admin"

    def close(self, timeout: float | None = None) -> None:
        """Close the connections. Idempotent."""
        super().close(timeout)


__all__ = ["Admin"]
