"""A consumer group's options: every consumer option, plus membership and commits.

Validated once, when the group opens; a bad value is a ConfigError naming the
option. An option the chosen ``group_protocol`` does not use is refused when the
caller set it (:func:`check_protocol_options`), as Kafka's Java client refuses
them: with the consumer protocol (KIP-848) the broker assigns and sets the
session and heartbeat timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pykaf._config import check, opt, positive
from pykaf._consumer.config import ConsumerConfig
from pykaf._group.assignors import Assignor, assignor_for
from pykaf.errors import ConfigError


@dataclass(frozen=True)
class GroupConfig(ConsumerConfig):
    """Options of ``pykaf.open_consumer_group`` (consumer and client options apply as well).

    Where the group has no committed offset for a partition, consumption
    starts where ``auto_offset_reset`` says ("earliest" or "latest").
    """

    group_instance_id: str | None = opt(
        None,
        "Static membership (KIP-345): a stable id per instance; a restart within "
        "session_timeout keeps its partitions without a rebalance.",
    )
    assignors: Any = opt(
        ("range", "cooperative-sticky"),
        "Assignors offered to the group, preferred first: names (range, roundrobin, sticky, "
        "cooperative-sticky) or Assignor objects. The group uses one every member offers. "
        "Classic protocol only (refused with group_protocol consumer: see "
        "group_remote_assignor).",
    )
    session_timeout: float = opt(
        45.0,
        "Seconds without a heartbeat after which the coordinator drops the member. Classic "
        "protocol only (refused with group_protocol consumer: the broker's "
        "group.consumer.session.timeout.ms).",
    )
    heartbeat_interval: float = opt(
        3.0,
        "Seconds between heartbeats. Classic protocol only (refused with group_protocol "
        "consumer: the broker's group.consumer.heartbeat.interval.ms).",
    )
    rebalance_timeout: float = opt(
        300.0,
        "Seconds members have to rejoin in a rebalance; a handler that keeps a revoked "
        "partition longer is cancelled (the member has been dropped by then).",
    )
    auto_commit: bool = opt(
        True,
        "Commit marked offsets every auto_commit_interval, whenever partitions go and on "
        "close; False: only commit() commits (offsets committed by transactions).",
    )
    auto_commit_interval: float = opt(5.0, "Seconds between automatic commits.")
    partition_watch_interval: float = opt(
        5.0,
        "Seconds between the group leader's checks of the subscribed topics; a topic "
        "created or given more partitions starts a rebalance. Classic protocol only "
        "(refused with group_protocol consumer: the coordinator watches them).",
    )

    group_protocol: str = opt(
        "classic",
        "The group protocol: classic (JoinGroup/SyncGroup, the assignors run in the "
        "members) or consumer (KIP-848, Kafka 4.0+: ConsumerGroupHeartbeat, the broker "
        "assigns and members reconcile incrementally).",
    )
    group_remote_assignor: str | None = opt(
        None,
        "With group_protocol consumer: the broker-side assignor to ask for (uniform, range, "
        "or one the broker was configured with); None: the broker's default. Refused with "
        "the classic protocol.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            self.group_protocol in ("classic", "consumer"),
            "group_protocol",
            self.group_protocol,
            "must be classic or consumer",
        )
        check(
            self.group_remote_assignor is None
            or (isinstance(self.group_remote_assignor, str) and self.group_remote_assignor != ""),
            "group_remote_assignor",
            self.group_remote_assignor,
            "must be None or a non-empty assignor name",
        )
        positive("session_timeout", self.session_timeout)
        positive("heartbeat_interval", self.heartbeat_interval)
        positive("rebalance_timeout", self.rebalance_timeout)
        positive("auto_commit_interval", self.auto_commit_interval)
        positive("partition_watch_interval", self.partition_watch_interval)
        check(
            self.heartbeat_interval < self.session_timeout,
            "heartbeat_interval",
            self.heartbeat_interval,
            "must be below session_timeout",
        )
        check(
            self.group_instance_id is None
            or (isinstance(self.group_instance_id, str) and self.group_instance_id != ""),
            "group_instance_id",
            self.group_instance_id,
            "must be None or a non-empty string",
        )
        names = [self.assignors] if isinstance(self.assignors, (str, Assignor)) else self.assignors
        check(
            isinstance(names, (list, tuple)) and len(names) > 0,
            "assignors",
            self.assignors,
            "must be a non-empty list of assignor names or objects",
        )
        built = [assignor_for(a) for a in names]
        check(
            len({a.name for a in built}) == len(built),
            "assignors",
            self.assignors,
            "names an assignor twice",
        )
        check(
            self.auto_offset_reset != "none",
            "auto_offset_reset",
            self.auto_offset_reset,
            "a group needs earliest or latest for partitions with no committed offset",
        )

    def build_assignors(self) -> list[Assignor]:
        """Fresh assignor objects, in preference order."""
        names = [self.assignors] if isinstance(self.assignors, (str, Assignor)) else self.assignors
        return [assignor_for(a) for a in names]


#: Options only the classic protocol uses, and what takes their place with the
#: consumer protocol (KIP-848 moves them to the broker).
CLASSIC_ONLY: dict[str, str] = {
    "assignors": "the broker assigns: ask for one of its assignors (its "
    "group.consumer.assignors) with group_remote_assignor",
    "session_timeout": "the broker's group.consumer.session.timeout.ms sets it (for one "
    "group: the group config consumer.session.timeout.ms)",
    "heartbeat_interval": "the broker's group.consumer.heartbeat.interval.ms sets it (for one "
    "group: the group config consumer.heartbeat.interval.ms); members heartbeat at the "
    "interval the coordinator returns",
    "partition_watch_interval": "the coordinator notices new topics and partitions itself "
    "(the broker's metadata)",
}
#: Options only the consumer protocol uses, and what takes their place with the classic one.
CONSUMER_ONLY: dict[str, str] = {
    "group_remote_assignor": "classic members assign among themselves: choose with assignors",
}


def check_protocol_options(options: Mapping[str, Any]) -> None:
    """Refuse an option the chosen ``group_protocol`` does not use, when the caller set it.

    ``options`` are the options the caller passed (defaults are never
    refused). Kafka's Java client does the same: ``session.timeout.ms``,
    ``heartbeat.interval.ms`` and ``partition.assignment.strategy`` cannot be
    set with ``group.protocol=consumer``, nor ``group.remote.assignor`` with
    ``classic``.

    Raises:
        ConfigError: naming the first such option and what to set instead.
    """
    protocol = options.get("group_protocol", "classic")
    if protocol not in ("classic", "consumer"):
        return  # GroupConfig refuses it
    unused = CLASSIC_ONLY if protocol == "consumer" else CONSUMER_ONLY
    for name in sorted(set(options) & set(unused)):
        if name == "group_remote_assignor" and options[name] is None:
            continue  # None is the classic protocol's own value
        raise ConfigError(f"{name} cannot be set with group_protocol={protocol!r}: {unused[name]}")
