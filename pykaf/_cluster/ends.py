"""Partitions' offsets by position or time; ends checked against the watermarks of a Fetch.

Kafka answers ListOffsets(latest) with the high watermark (the last stable
offset under read_committed). Some brokers get it wrong: Tansu 0.6 answers
with an offset inside the log's last batch once batches hold more than one
record. A Fetch from that offset reports the partition's real watermarks, so
the end taken is the larger of the two. It costs one Fetch round trip per
partition leader, which planning reads and lag reports can afford.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import trio

from pykaf import errors
from pykaf._cluster.client import NEWEST, Client

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
    from pykaf._consumer.consumer import open_consumer

    listed = await _listed(client, dict.fromkeys(parts, NEWEST), isolation_level)
    if not listed:
        return {}
    # A short max wait, not 0: Tansu never answers a Fetch whose max wait is 0.
    async with open_consumer(
        client, isolation_level=_LEVELS[isolation_level], fetch_max_wait=0.01
    ) as consumer:
        pcs = [await consumer.consume_partition(t, p, max(listed[(t, p)], 0)) for t, p in parts]
        try:
            with trio.fail_after(client.config.request_timeout):
                while any(pc.high_water_mark < 0 for pc in pcs):
                    await trio.sleep(0.005)
        except trio.TooSlowError:
            raise errors.KafkaTimeoutError("no Fetch answer for the partitions' ends") from None
        ends = {}
        for pc in pcs:
            end = pc.high_water_mark
            if isolation_level and pc.last_stable_offset >= 0:
                end = pc.last_stable_offset
            tp = (pc.topic, pc.partition)
            ends[tp] = max(listed[tp], end)
    return {tp: ends[tp] for tp in parts}
