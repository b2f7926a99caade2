"""Request builders the conformance cases share."""

from __future__ import annotations

import time
from typing import Any

from pykaf import protocol as P
from pykaf.codec import BatchBuilder

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def now_ms() -> int:
    """The wall clock in milliseconds, rounded down to a second."""
    return int(time.time()) * 1000


def batch(
    values: list[bytes],
    *,
    ts: int | None = None,
    timestamps: list[int] | None = None,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
) -> bytes:
    """One v2 batch of ``values`` (timestamps ``ts``, ``ts+1``, ... or ``timestamps``)."""
    builder = BatchBuilder()
    base = now_ms() if ts is None else ts
    for i, v in enumerate(values):
        builder.append(timestamps[i] if timestamps is not None else base + i, None, v)
    return builder.build(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn
    )


def produce(
    topic: str,
    records: bytes,
    partition: int = 0,
    *,
    acks: int = -1,
    transactional_id: str | None = None,
) -> P.ProduceRequest:
    """A Produce of one batch to one partition."""
    return P.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            P.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    P.ProduceRequest.PartitionProduceData(index=partition, records=records)
                ],
            )
        ],
    )


def fetch(topic: str, offset: int, partition: int = 0, *, isolation: int = 0) -> P.FetchRequest:
    """A Fetch of one partition that does not wait."""
    return P.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            P.FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    P.FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def list_offsets(topic: str, timestamp: int, partition: int = 0, *, isolation: int = 0) -> Any:
    """A ListOffsets of one partition."""
    return P.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            P.ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    P.ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=partition, timestamp=timestamp
                    )
                ],
            )
        ],
    )


def one_partition(resp: Any) -> Any:
    """The only partition of a Produce, Fetch, ListOffsets or DeleteRecords answer."""
    for attr in ("responses", "topics"):
        topics = getattr(resp, attr, None)
        if topics:
            t = topics[0]
            for pattr in ("partition_responses", "partitions"):
                parts = getattr(t, pattr, None)
                if parts:
                    return parts[0]
    raise AssertionError(f"no partition in {resp!r}")
