"""The consumer's options: defaults, meaning and validation.

Every client option applies too (``ConsumerConfig`` extends ``ClientConfig``).
Validated once, when the consumer opens; a bad value is a ConfigError naming
the option.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykaf._config import ClientConfig, check, opt, positive

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
OFFSET_RESETS = ("earliest", "latest", "none")


@dataclass(frozen=True)
class ConsumerConfig(ClientConfig):
    """Options of ``pykaf.open_consumer`` (client options apply as well)."""

    isolation_level: str = opt(
        "read_committed",
        "read_committed: only committed transactional records, nothing at or above the "
        "last stable offset; read_uncommitted: everything written.",
    )
    fetch_min_bytes: int = opt(1, "Bytes a broker should gather before it answers a Fetch.")
    fetch_max_wait: float = opt(
        0.5, "Seconds a broker may wait for fetch_min_bytes before it answers anyway."
    )
    fetch_max_bytes: int = opt(
        52_428_800, "Most bytes one Fetch response may carry, over all its partitions."
    )
    max_partition_fetch_bytes: int = opt(
        1_048_576,
        "Most bytes fetched per partition per request; grows (doubling) when one batch is "
        "larger, up to fetch_max_bytes.",
    )
    skip_oversized_records: bool = opt(
        False,
        "A batch larger than fetch_max_bytes: skip it (True, reported on errors()) or stop "
        "the partition with RecordTooLargeError (False).",
    )
    auto_offset_reset: str = opt(
        "earliest",
        "Where to go when the position is out of range: earliest, latest, or none (the "
        "partition consumer gets OffsetOutOfRangeError). After a log truncation (an unclean "
        "leader election, KIP-320) earliest and latest continue from the first divergent "
        "offset; none reports LogTruncationError.",
    )
    check_crcs: bool = opt(True, "Check every fetched batch's CRC-32C.")
    fetch_sessions: bool = opt(
        True,
        "Open a KIP-227 fetch session with each broker: after the first, full Fetch, each "
        "request names only the partitions added or whose position moved, and lists the ones "
        "dropped. False: every Fetch names every partition and the broker keeps no session.",
    )
    partition_buffer: int = opt(
        4, "Fetch answers a partition consumer holds, unread, before its fetching pauses."
    )
    fetch_buffer_bytes: int = opt(
        67_108_864,
        "Most record-set bytes the consumer holds fetched but unread, over all partitions. A "
        "Fetch asks for no more than the room left (a broker still sends one whole batch). At "
        "or over it, only partitions whose reader waits with nothing buffered are fetched (so "
        "that no reader starves), else none until the application reads; so it is exceeded by "
        "at most one answer per broker, plus one per such waiting reader (a broker may send "
        "more than asked). Answers are kept as bytes and decoded about "
        "max_partition_fetch_bytes at a time as they are read.",
    )
    client_rack: str | None = opt(
        None,
        "The consumer's rack (Java's client.rack). Sent in every Fetch: a broker with a "
        "rack-aware replica.selector.class names a replica in this rack, and the partition is "
        "fetched from it (KIP-392) until it fails or metadata_max_age passes. Groups also send "
        "it for rack-aware assignment (ConsumerGroupHeartbeat, the classic subscription v3).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            self.isolation_level in ISOLATION_LEVELS,
            "isolation_level",
            self.isolation_level,
            f"must be one of {', '.join(ISOLATION_LEVELS)}",
        )
        check(
            self.auto_offset_reset in OFFSET_RESETS,
            "auto_offset_reset",
            self.auto_offset_reset,
            f"must be one of {', '.join(OFFSET_RESETS)}",
        )
        positive("fetch_max_wait", self.fetch_max_wait, allow_zero=True)
        for name in (
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "partition_buffer",
            "fetch_buffer_bytes",
        ):
            value = getattr(self, name)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                name,
                value,
                "must be an integer >= 1",
            )
        check(
            isinstance(self.fetch_min_bytes, int) and self.fetch_min_bytes >= 0,
            "fetch_min_bytes",
            self.fetch_min_bytes,
            "must be an integer >= 0",
        )
        check(
            self.client_rack is None or isinstance(self.client_rack, str),
            "client_rack",
            self.client_rack,
            "must be None or a string",
        )

    @property
    def isolation_code(self) -> int:
        """Kafka's isolation level byte (0 read_uncommitted, 1 read_committed)."""
        return ISOLATION_LEVELS[self.isolation_level]
