"""The producer's options: defaults, meaning and validation.

Every client option applies too (``ProducerConfig`` extends ``ClientConfig``).
Validated once, when the producer opens; a bad value is a ConfigError naming
the option, and options that only make sense together are checked together
(idempotence needs acks="all", retries and at most 5 requests in flight).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf._config import ClientConfig, check, opt, positive
from pykaf.codec import COMPRESSION_NAMES

#: acks values: 0 (no answer), 1 (the leader wrote it), -1 / "all" (every in-sync replica).
ACKS = (0, 1, -1)

#: Levels each codec accepts (None: the codec's default).
COMPRESSION_LEVELS = {
    "none": None,
    "gzip": range(0, 10),
    "snappy": None,
    "lz4": range(0, 17),
    "zstd": range(-131072, 23),
}

Interceptor = Callable[..., Any]


def normalize_acks(value: Any) -> int:
    """Kafka's acks as an int: 0, 1 or -1 ("all" and -1 are the same)."""
    if isinstance(value, str) and value.lower() == "all":
        return -1
    if isinstance(value, int) and not isinstance(value, bool) and value in ACKS:
        return value
    raise ValueError(value)


@dataclass(frozen=True)
class ProducerConfig(ClientConfig):
    """Options of ``pykaf.open_producer`` (client options apply as well)."""

    acks: int | str = opt(
        "all",
        'Acknowledgement to wait for: 0 (none), 1 (the leader) or "all" (every in-sync replica).',
    )
    linger: float = opt(0.005, "Seconds a batch may wait for more records before it is sent.")
    batch_bytes: int = opt(
        1_048_576, "Largest record batch, in uncompressed bytes (Kafka's max.message.bytes)."
    )
    batch_records: int = opt(
        100_000, "Most records in one batch; a full batch is sent without waiting for linger."
    )
    flush_bytes: int = opt(
        1_000_000,
        "A partition's batch is sent once it holds this many bytes (0: only on linger;"
        " librdkafka's batch.size); a backed-up partition's batch grows up to batch_bytes.",
    )
    max_message_bytes: int = opt(
        1_048_576, "Largest single record (key, value and headers); larger ones fail alone."
    )
    max_request_bytes: int = opt(
        1_048_576,
        "Largest Produce request (Java's max.request.size); batches for one broker are split"
        " across requests, a request holding one batch at least.",
    )
    compression: str = opt(
        "none", "Compression of record batches: none, gzip, snappy, lz4 or zstd."
    )
    compression_level: int | None = opt(
        None, "Compression level (gzip 0-9, lz4 0-16, zstd up to 22); None: the codec's default."
    )
    retries: int = opt(
        2_147_483_647, "Times a retriable failure is retried (bounded by delivery_timeout)."
    )
    delivery_timeout: float = opt(
        120.0, "Seconds from send() until a record is acknowledged or fails for good."
    )
    max_in_flight: int = opt(
        5, "Produce requests in flight per broker (at most 5 with idempotence)."
    )
    idempotence: bool = opt(
        True, "Exactly-once per partition: producer id, sequence numbers, no duplicates."
    )
    transactional_id: str | None = opt(
        None, "Enables transactions (implies idempotence); unique per producer instance."
    )
    transaction_timeout: float = opt(
        60.0, "Seconds the coordinator lets a transaction stay open before aborting it."
    )
    buffer_bytes: int = opt(
        33_554_432, "Bytes of records buffered before send() waits and send_nowait() raises."
    )
    buffer_records: int = opt(
        1_000_000, "Records buffered before send() waits and send_nowait() raises."
    )
    partitioner: str | Callable[..., int] = opt(
        "murmur2",
        "murmur2 (Java's default), fnv1a, crc32, round_robin, random, sticky, "
        "manual, the *_random variants, or a callable (topic, key, partitions, available).",
    )
    return_successes: bool = opt(
        False, "Deliver acknowledged input() messages on the successes() channel (sarama style)."
    )
    return_errors: bool = opt(
        True, "Deliver failed input() messages on errors(); off: flush() raises for them."
    )
    on_send: Sequence[Interceptor] = opt(
        (), "Interceptors called with each record as it is sent; may return a new record."
    )
    on_acknowledgement: Sequence[Interceptor] = opt(
        (), "Interceptors called with each record's metadata or error once it completes."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            acks = normalize_acks(self.acks)
        except ValueError:
            check(False, "acks", self.acks, 'must be 0, 1, -1 or "all"')
        positive("linger", self.linger, allow_zero=True)
        positive("delivery_timeout", self.delivery_timeout)
        positive("transaction_timeout", self.transaction_timeout)
        for name in (
            "batch_bytes",
            "batch_records",
            "max_message_bytes",
            "max_request_bytes",
            "buffer_bytes",
            "buffer_records",
            "max_in_flight",
        ):
            value = getattr(self, name)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                name,
                value,
                "must be an integer >= 1",
            )
        check(
            isinstance(self.flush_bytes, int) and self.flush_bytes >= 0,
            "flush_bytes",
            self.flush_bytes,
            "must be an integer >= 0",
        )
        check(
            isinstance(self.retries, int) and self.retries >= 0,
            "retries",
            self.retries,
            "must be an integer >= 0",
        )
        check(self.batch_bytes > 61, "batch_bytes", self.batch_bytes, "must exceed 61 bytes")
        check(
            self.max_message_bytes <= self.batch_bytes,
            "max_message_bytes",
            self.max_message_bytes,
            f"must not exceed batch_bytes ({self.batch_bytes})",
        )
        check(
            self.batch_bytes <= self.max_request_bytes,
            "batch_bytes",
            self.batch_bytes,
            f"must not exceed max_request_bytes ({self.max_request_bytes})",
        )
        codec = self.compression.lower() if isinstance(self.compression, str) else None
        check(
            codec in COMPRESSION_NAMES,
            "compression",
            self.compression,
            f"must be one of {', '.join(COMPRESSION_NAMES)}",
        )
        if self.compression_level is not None:
            levels = COMPRESSION_LEVELS[codec or "none"]
            check(
                levels is not None and self.compression_level in levels,
                "compression_level",
                self.compression_level,
                f"is not a level of {codec}",
            )
        if self.idempotence or self.transactional_id is not None:
            what = "transactions" if self.transactional_id is not None else "idempotence"
            check(acks == -1, "acks", self.acks, f'{what} needs acks="all"')
            check(self.retries > 0, "retries", self.retries, f"{what} needs retries > 0")
            check(
                self.max_in_flight <= 5,
                "max_in_flight",
                self.max_in_flight,
                f"{what} keeps order with at most 5 requests in flight",
            )
        if self.transactional_id is not None:
            check(
                isinstance(self.transactional_id, str) and self.transactional_id != "",
                "transactional_id",
                self.transactional_id,
                "must be a non-empty string",
            )
        if isinstance(self.partitioner, str):
            from pykaf._producer.partitioner import partitioner_from_config

            partitioner_from_config(self.partitioner)  # raises ConfigError
        else:
            check(
                callable(self.partitioner)
                or callable(getattr(self.partitioner, "partition", None)),
                "partitioner",
                self.partitioner,
                "must be a name, a callable or an object with a partition() method",
            )
        for name in ("on_send", "on_acknowledgement"):
            for fn in getattr(self, name):
                check(callable(fn), name, fn, "interceptors must be callable")

    @property
    def acks_int(self) -> int:
        """The acks setting as Kafka's integer (0, 1 or -1)."""
        return normalize_acks(self.acks)

    @property
    def compression_code(self) -> int:
        """The compression codec's Kafka id."""
        return COMPRESSION_NAMES.index(self.compression.lower())
