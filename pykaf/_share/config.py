"""A share consumer's options (KIP-932): fetching, acknowledging and membership.

Validated once, when the consumer opens; a bad value is a ConfigError naming
the option.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykaf._config import ClientConfig, check, opt, positive


@dataclass(frozen=True)
class ShareConsumerConfig(ClientConfig):
    """Options of ``pykaf.open_share_consumer`` (client options apply as well).

    Where a share group starts reading a partition is the group's
    ``share.auto.offset.reset`` config (a group config on the broker, default
    latest), not a client option.
    """

    max_records: int = opt(
        500,
        "Records one ShareFetch asks each broker for (MaxRecords and BatchSize); the broker "
        "may hand over more to keep a record batch whole.",
    )
    fetch_min_bytes: int = opt(1, "Bytes a broker should gather before it answers a ShareFetch.")
    fetch_max_wait: float = opt(
        0.5, "Seconds a broker may wait for fetch_min_bytes before it answers a ShareFetch."
    )
    fetch_max_bytes: int = opt(
        52_428_800, "Most bytes one ShareFetch response may carry, over all its partitions."
    )
    check_crcs: bool = opt(True, "Check every fetched batch's CRC-32C.")
    share_session_timeout: float = opt(
        45.0,
        "Seconds without a ShareGroupHeartbeat answer after which the member treats itself as "
        "dropped and joins again (the coordinator's own group.share.session.timeout.ms rules).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        positive("fetch_max_wait", self.fetch_max_wait, allow_zero=True)
        positive("share_session_timeout", self.share_session_timeout)
        for name in ("max_records", "fetch_min_bytes", "fetch_max_bytes"):
            value = getattr(self, name)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                value,
                "must be a positive integer",
            )
        check(self.max_records <= 2**31 - 1, "max_records", self.max_records, "must fit an int32")
