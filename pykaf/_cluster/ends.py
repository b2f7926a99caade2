"""Partitions' offsets by position or time; ends checked against the watermarks of a Fetch.

Kafka answers ListOffsets(latest) with the high watermark (the last stable
offset under read_committed). Some brokers get it wrong: Tansu answers with
an offset inside the log's last batch once batches hold more than one record
(quirk: tansu-latest-offset). A Fetch from that offset
reports the partition's real watermarks, so the end taken is the larger of
the two. It costs one Fetch round trip per partition, which planning reads
and lag reports can afford.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.client import NEWEST, Client
from pykaf._net.connection import BrokerConnection
from pykaf.protocol import quirks, versions

TopicPartition = tuple[str, int]
_LEVELS = {0: "read_uncommitted", 1: "read_committed"}


async def list_offsets(
    client: Client, specs: Mapping[TopicPartition, int], isolation_level: int = 1
) -> dict[TopicPartition, int]:
    """Each partition's offset for its spec: ``OLDEST``, ``NEWEST`` or a timestamp (ms).

    ``NEWEST`` goes through :func:`end_offsets`; the others are ListOffsets
    answers (for a time, the first offset at or after it; -1 if none), asked
    for all partitions at once.

    Raises:
        as :func:`end_offsets`.
    """
    newest = [tp for tp, spec in specs.items() if spec == NEWEST]
    out = await end_offsets(client, newest, isolation_level) if newest else {}
    out.update(
        await _listed(client, {tp: s for tp, s in specs.items() if s != NEWEST}, isolation_level)
    )
    return {tp: out[tp] for tp in specs}


async def _listed(
    client: Client, specs: Mapping[TopicPartition, int], isolation_level: int
) -> dict[TopicPartition, int]:
    """ListOffsets' answers for every partition's spec, asked concurrently."""
    out: dict[TopicPartition, int] = {}

    async def one(tp: TopicPartition, spec: int) -> None:
        out[tp] = await client.get_offset(tp[0], tp[1], spec, isolation_level=isolation_level)

    async with trio.open_nursery() as nursery:
        for tp, spec in specs.items():
            nursery.start_soon(one, tp, spec)
    return out


async def end_offsets(
    client: Client, parts: Sequence[TopicPartition], isolation_level: int = 1
) -> dict[TopicPartition, int]:
    """Each partition's end, checked against a Fetch.

    That is where the next record will be (read_uncommitted, 0), or the last
    stable offset (read_committed, ``isolation_level`` 1).

    Raises:
        KafkaTimeoutError: no Fetch answer within the client's request timeout.
        UnknownTopicOrPartitionError, and the brokers' other errors.
    """
    listed = await _listed(client, dict.fromkeys(parts, NEWEST), isolation_level)
    if not listed:
        return {}
    ends: dict[TopicPartition, int] = {}

    async def one(tp: TopicPartition) -> None:
        ends[tp] = max(listed[tp], await _fetched_end(client, tp, listed[tp], isolation_level))

    try:
        with trio.fail_after(client.config.request_timeout):
            async with trio.open_nursery() as nursery:
                for tp in parts:
                    nursery.start_soon(one, tp)
    except trio.TooSlowError:
        raise errors.KafkaTimeoutError("no Fetch answer for the partitions' ends") from None
    return {tp: ends[tp] for tp in parts}


async def _fetched_end(
    client: Client, tp: TopicPartition, offset: int, isolation_level: int
) -> int:
    """The end a Fetch from ``offset`` reports: the high watermark, or the last stable offset.

    The partition's leader is asked for at most one byte (only the watermarks
    are read); a leader change or another retriable error is followed after
    the retry backoff. -1 if the Fetch reports no end (``offset`` out of range).

    Raises:
        UnknownTopicOrPartitionError, and the leader's other non-retriable errors.
    """
    F = P.FetchRequest
    topic, partition = tp

    async def exchange(conn: BrokerConnection) -> Any:
        version = versions.FETCH.pick(conn)
        request = F(
            replica_id=-1,
            # quirk: tansu-fetch-zero-wait
            max_wait_ms=int(quirks.TANSU_MIN_FETCH_WAIT * 1000),
            min_bytes=1,
            max_bytes=1,
            isolation_level=isolation_level,
            topics=[
                F.FetchTopic(
                    topic=topic,
                    partitions=[
                        F.FetchPartition(
                            partition=partition,
                            fetch_offset=max(offset, 0),
                            partition_max_bytes=1,
                        )
                    ],
                )
            ],
        )
        return await conn.request(request, version)

    what = f"Fetch {topic}/{partition}"

    def check(response: Any) -> errors.KafkaError | None:
        code = getattr(response, "error_code", 0) or 0
        if not code:
            code = response.responses[0].partitions[0].error_code
            if code == errors.OffsetOutOfRangeError.code:
                return None
        return rq.error_of(code, what)

    # Retried without a deadline of its own: end_offsets bounds the whole.
    response = await rq.call(
        client, rq.leader(topic, partition), exchange, what=what, check=check, timeout=math.inf
    )
    rp = response.responses[0].partitions[0]
    if rp.error_code:  # OFFSET_OUT_OF_RANGE
        return -1
    lso = getattr(rp, "last_stable_offset", -1)
    return int(lso if isolation_level and lso >= 0 else rp.high_watermark)
