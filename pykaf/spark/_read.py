"""Reading for the ``pykaf`` data source: offset ranges planned, then read as Arrow batches.

Planning (where Spark plans the query) asks the cluster which partitions a
subscription covers and where they start and end, and cuts them into
:class:`OffsetRange` input partitions. A task reads its range with a pykaf
consumer driven through the process's portal: each fetched piece is decoded
straight into columns (``next_batch(columnar=True)``, no ``Record`` per
row) and becomes one Arrow record batch of exactly the source's schema.

A range ends by offset, never by count: compaction leaves holes, and
transaction markers and aborted records take offsets but give no row; the
consumer's position moves past them, and the task stops once its position
reaches the end of its range.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from pykaf import errors
from pykaf._cluster.client import NEWEST, OLDEST
from pykaf._cluster.ends import list_offsets
from pykaf._column_batch import ColumnBatch
from pykaf._consumer.consumer import Consumer, open_consumer
from pykaf._consumer.partition import PartitionConsumer
from pykaf._sync.portal import get_portal
from pykaf.errors import DataLossError
from pykaf.spark._options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    ReadOptions,
    Subscription,
    TimestampSpec,
)

#: The columns a read gives (Spark's Kafka source's), as DDL; ``headers`` is
#: added by ``includeHeaders``.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

TopicPartition = tuple[str, int]


def spark_schema(include_headers: bool) -> str:
    """The DDL of the rows read (with ``headers`` when asked for)."""
    return f"{KAFKA_SCHEMA}, {HEADERS_DDL}" if include_headers else KAFKA_SCHEMA


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema of the batches a read yields (exactly what Spark declares)."""
    import pyarrow as pa

    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        fields.append(("headers", pa.list_(header)))
    return pa.schema(fields)


@dataclass(frozen=True)
class OffsetRange:
    """One input partition: offsets ``start`` (inclusive) to ``end`` (exclusive) of a partition.

    Plain data, so Spark pickles it to the task cheaply.
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """How many offsets the range spans (records, markers and holes)."""
        return self.end - self.start


def split_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges into pieces of at most ``max_records`` offsets, and at least ``min_partitions``.

    Ranges are cut in proportion to their size, so large ones are cut first.
    Empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = 1
        if max_records is not None:
            pieces = max(pieces, math.ceil(r.size / max_records))
        if min_partitions is not None and len(ranges) < min_partitions:
            pieces = max(pieces, math.ceil(r.size * min_partitions / total))
        pieces = min(pieces, r.size)
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


# -- planning: what the subscription covers, and where it starts and ends ----------


class _Planner:
    """Metadata and offsets through one consumer's client (runs in the portal's loop)."""

    def __init__(self, consumer: Consumer, isolation_level: int) -> None:
        self.client = consumer.client
        self.isolation_level = isolation_level

    async def partitions(self, sub: Subscription, *, missing_ok: bool) -> list[TopicPartition]:
        client = self.client
        if sub.assign:
            assigned = []
            for topic, partition in sub.assign:
                if partition in await self._partitions_of(topic, missing_ok):
                    assigned.append((topic, partition))
                elif not missing_ok:
                    raise errors.UnknownTopicOrPartitionError(
                        f"assign: topic {topic!r} has no partition {partition}"
                    )
            return assigned
        if sub.pattern is not None:
            await client.refresh_metadata()
            topics = [t for t in await client.topics() if sub.matches(t)]
        else:
            topics = list(sub.topics)
        out = []
        for topic in sorted(topics):
            out += [(topic, p) for p in await self._partitions_of(topic, missing_ok)]
        return out

    async def _partitions_of(self, topic: str, missing_ok: bool) -> list[int]:
        try:
            return await self.client.partitions(topic)
        except errors.UnknownTopicOrPartitionError:
            if missing_ok:
                return []
            raise

    async def offsets(
        self, parts: Sequence[TopicPartition], which: int
    ) -> dict[TopicPartition, int]:
        """``OLDEST`` or ``NEWEST`` (the last stable offset under read_committed) of each.

        ``NEWEST`` is checked against a Fetch's watermarks (``end_offsets``).
        """
        return await list_offsets(self.client, dict.fromkeys(parts, which), self.isolation_level)


class Planner:
    """Asks the cluster about partitions and offsets, from a plain thread (the planner's).

    Use as a context manager; it holds one consumer (and its connections) open.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._portal = get_portal()
        self._planner: _Planner | None = None
        self._handle: Any = None

    def __enter__(self) -> Planner:
        from pykaf._consumer.config import ConsumerConfig

        level = ConsumerConfig(**self.config).isolation_code
        consumer, self._handle = self._portal.start_context(partial(open_consumer, **self.config))
        self._planner = _Planner(consumer, level)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.exit()

    def partitions(self, sub: Subscription, *, missing_ok: bool = False) -> list[TopicPartition]:
        """The partitions ``sub`` covers now, sorted.

        Raises:
            UnknownTopicOrPartitionError: a named topic or partition does not
                exist (unless ``missing_ok``: it is left out).
        """
        assert self._planner is not None
        result: list[TopicPartition] = self._portal.run(
            partial(self._planner.partitions, sub, missing_ok=missing_ok)
        )
        return result

    def offsets(self, parts: Sequence[TopicPartition], which: int) -> dict[TopicPartition, int]:
        """Each partition's earliest (``OLDEST``) or latest (``NEWEST``) offset."""
        assert self._planner is not None
        if not parts:
            return {}
        result: dict[TopicPartition, int] = self._portal.run(self._planner.offsets, parts, which)
        return result

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Each partition's first offset whose timestamp is at or after its time (ms).

        -1 for a partition with no such record (every record is older).
        """
        assert self._planner is not None
        if not times:
            return {}
        result: dict[TopicPartition, int] = self._portal.run(
            partial(list_offsets, self._planner.client, times, self._planner.isolation_level)
        )
        return result

    def bounds(
        self, parts: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Each partition's earliest and latest offsets (for :func:`resolve`)."""
        return self.earliest(parts), self.latest(parts)

    def earliest(self, parts: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        return self.offsets(parts, OLDEST)

    def latest(self, parts: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end (its last stable offset under read_committed)."""
        return self.offsets(parts, NEWEST)


def by_time(
    planner: Planner,
    parts: Sequence[TopicPartition],
    spec: TimestampSpec,
    *,
    no_match_latest: bool,
) -> dict[TopicPartition, int]:
    """Offsets by time as offsets per partition (LATEST where no record is that recent).

    A partition with no record at or after its time takes LATEST when
    ``no_match_latest`` (an ending time always does, as in Spark); otherwise
    the read is refused. Partitions the spec names but that are not read are
    kept, for :func:`resolve` to refuse.

    Raises:
        ConfigError: no record at or after a starting time, and not ``no_match_latest``.
    """
    if spec.at is not None:
        times = dict.fromkeys(parts, spec.at)
    else:
        times = {tp: t for tp, t in spec.partitions.items() if tp in set(parts)}
    found = planner.offsets_for_times(times)
    out = {tp: EARLIEST for tp in spec.partitions if tp not in times}  # refused by resolve
    for tp, offset in found.items():
        if offset >= 0:
            out[tp] = offset
        elif no_match_latest or spec.option.startswith("ending"):
            out[tp] = LATEST
        else:
            raise errors.ConfigError(
                f"option {spec.option}: {tp[0]}/{tp[1]} has no record at or after "
                f"{times[tp]} ms (startingOffsetsByTimestampStrategy=latest starts such "
                "partitions at their latest offset instead)"
            )
    return out


def resolve(
    parts: Sequence[TopicPartition],
    spec: OffsetSpec,
    default: int,
    bounds: tuple[dict[TopicPartition, int], dict[TopicPartition, int]],
    planner: Planner | None = None,
    *,
    no_match_latest: bool = False,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec``: EARLIEST, LATEST, per partition or by time.

    ``default`` is for the partitions a JSON spec leaves out; ``bounds`` are
    the partitions' earliest and latest offsets (:meth:`Planner.bounds`);
    ``planner`` looks offsets by time up (:func:`by_time`, with
    ``no_match_latest``).

    Raises:
        ConfigError: a JSON spec names a partition that is not read, or an
            offset past the partition's end, or a starting time no record is at.
    """
    if isinstance(spec, TimestampSpec):
        assert planner is not None, "offsets by time need a planner"
        spec = by_time(planner, parts, spec, no_match_latest=no_match_latest)
    if isinstance(spec, dict):
        stray = sorted(set(spec) - set(parts))
        if stray:
            named = ", ".join(f"{t}/{p}" for t, p in stray)
            raise errors.ConfigError(f"offsets given for partitions that are not read: {named}")
    earliest, latest = bounds
    out = {}
    for tp in parts:
        code = spec.get(tp, default) if isinstance(spec, dict) else spec
        if code == EARLIEST:
            out[tp] = earliest[tp]
        elif code == LATEST:
            out[tp] = latest[tp]
        elif code > latest[tp]:
            raise errors.ConfigError(
                f"{tp[0]}/{tp[1]}: offset {code} is past the partition's end {latest[tp]}"
            )
        else:
            out[tp] = code
    return out


# -- reading a range in a task -----------------------------------------------------


async def _next_columns(
    pc: PartitionConsumer, wait: float
) -> tuple[ColumnBatch | None, int, BaseException | None]:
    """The next fetched records as columns, the position after them, and the partition's error.

    No columns if ``wait`` passes first; no error unless the partition reported one.
    """
    columns: ColumnBatch | None = None
    try:
        failure: BaseException | None = pc.errors().receive_nowait()
    except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
        failure = None
    if failure is None:
        with trio.move_on_after(wait):
            columns = await pc.next_batch(columnar=True)
    return columns, pc.position, failure


def read_range(
    config: dict[str, Any],
    rng: OffsetRange | None,
    *,
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    stall_timeout: float = 120.0,
) -> Iterator[Any]:
    """The records of ``rng`` as Arrow record batches (one per fetched piece).

    Args:
        config: consumer options (``consumer_config``'s).
        rng: what to read (None: nothing).
        include_headers: add the ``headers`` column.
        fail_on_data_loss: raise if the range's first offsets are gone (deleted
            by retention); otherwise read what is left.
        stall_timeout: seconds without any progress before giving up.

    Raises:
        DataLossError: offsets of the range were deleted, and
            ``fail_on_data_loss`` is set.
        KafkaTimeoutError: no progress for ``stall_timeout`` seconds.
        ConsumerError: the partition's error (e.g. a record too large).
    """
    if rng is None or rng.size <= 0:
        return  # (Spark reads one partition of None when there are none to read)
    portal = get_portal()
    options = {**config, "auto_offset_reset": "none" if fail_on_data_loss else "earliest"}
    consumer, handle = portal.start_context(partial(open_consumer, **options))
    try:
        pc = portal.run(consumer.consume_partition, rng.topic, rng.partition, rng.start)
        wait = min(1.0, stall_timeout)
        schema = arrow_schema(include_headers)
        last_progress = time.monotonic()
        position = rng.start
        while position < rng.end:
            columns, new_position, failure = portal.run(_next_columns, pc, wait)
            if failure is not None:
                raise _data_loss(failure, rng) if fail_on_data_loss else failure
            if columns is not None:
                batch = columns_to_batch(columns, rng.topic, rng.partition, rng.end, schema)
                if batch is not None:
                    yield batch
            if new_position != position:
                position = new_position
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > stall_timeout:
                raise errors.KafkaTimeoutError(
                    f"{rng.topic}/{rng.partition}: no progress past offset {position} "
                    f"for {stall_timeout:g}s (reading up to {rng.end})"
                )
    finally:
        handle.exit()


def _data_loss(failure: BaseException, rng: OffsetRange) -> BaseException:
    cause = getattr(failure, "error", failure)
    if isinstance(cause, errors.OffsetOutOfRangeError):
        error = DataLossError(
            f"{rng.topic}/{rng.partition}: offsets from {rng.start} are no longer in the log "
            "(set failOnDataLoss=false to read what is left)"
        )
        error.__cause__ = failure
        return error
    return failure


def columns_to_batch(
    columns: ColumnBatch, topic: str, partition: int, end: int, schema: Any
) -> Any:
    """The Arrow record batch of ``schema`` for the records of ``columns`` below offset ``end``.

    None when there are none. The key, value and offset columns are the
    decoded buffers themselves; the timestamps become microseconds and the
    timestamp types int32 (-1, a magic 0 message's, reads as 0), and a
    record without headers gets a null ``headers`` (as Spark's connector
    gives it), not an empty list.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = bisect.bisect_left(columns.offsets, end)  # offsets ascend within a piece
    if n == 0:
        return None
    table = columns.to_arrow()
    if n < len(columns):
        table = table.slice(0, n)
    arrays = [
        table.column("key"),
        table.column("value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        table.column("offset"),
        table.column("timestamp").cast(pa.timestamp("us", tz="UTC")),
        pc.max_element_wise(table.column("timestamp_type"), pa.scalar(0, pa.int8())).cast(
            pa.int32()
        ),
    ]
    if len(schema) > 7:
        headers = table.column("headers")
        empty = pc.equal(pc.list_value_length(headers), 0)
        if pc.any(empty).as_py():
            headers = pa.ListArray.from_arrays(
                headers.offsets, headers.values, schema.field("headers").type, mask=empty
            )
        arrays.append(headers)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_partition(opts: ReadOptions, rng: OffsetRange | None) -> Iterator[Any]:
    """:func:`read_range` with a read's options (what both readers' ``read`` do)."""
    return read_range(
        opts.config,
        rng,
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        stall_timeout=opts.poll_timeout,
    )


def input_partitions(opts: ReadOptions, ranges: Sequence[OffsetRange]) -> list[Any]:
    """Spark input partitions for ``ranges``, cut by the read's partitioning options."""
    from pyspark.sql.datasource import InputPartition

    pieces = split_ranges(ranges, min_partitions=opts.min_partitions, max_records=opts.max_records)
    return [InputPartition(piece) for piece in pieces]
