"""Streaming read for the ``pykaf`` data source: ``spark.readStream.format("pykaf")``.

The stream's position is an offset per partition, as JSON
(``{"topic": {"0": 42}}``, Spark's Kafka source's shape), so Spark checkpoints
it and a restarted query goes on from there. Each micro-batch reads, per
partition, from the previous end to an end chosen by ``latestOffset``:
everything available, or ``maxOffsetsPerTrigger`` offsets spread over the
partitions in proportion to what each has waiting. ``trigger(availableNow=True)``
reads up to the offsets at the query's start, in as many micro-batches as the
limit asks for, then stops. Partitions that appear later are read from their
earliest offset.

Spark pickles the reader and builds it more than once; nothing live is kept
on it: each call opens a short-lived :class:`~pykaf.spark._read.Planner`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pykaf import errors
from pykaf.spark._options import LATEST, ReadOptions, read_options
from pykaf.spark._read import (
    OffsetRange,
    Planner,
    TopicPartition,
    input_partitions,
    read_partition,
    resolve,
)

Offsets = dict[TopicPartition, int]


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Offsets as the stream's checkpointed position: ``{"topic": {"0": 42}}``."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(position: Mapping[str, Mapping[str, int]]) -> Offsets:
    """The inverse of :func:`to_json`."""
    return {
        (topic, int(partition)): int(offset)
        for topic, parts in position.items()
        for partition, offset in parts.items()
    }


def limit_offsets(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """Ends that move at most ``max_rows`` offsets past ``start`` in all.

    The limit is shared in proportion to what each partition has waiting; at
    least one offset moves while any is waiting.
    """
    waiting = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    end = {}
    for tp, offset in latest.items():
        begin = start.get(tp, offset)
        end[tp] = begin + waiting[tp] * max_rows // total
    if all(end[tp] == start.get(tp, end[tp]) for tp in end):
        tp = max(waiting, key=lambda k: waiting[k])
        end[tp] += 1
    return end


class PykafStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Kafka partitions as a stream of micro-batches (see the module's docstring)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        # An error raised here reaches the query behind PySpark's
        # UnboundLocalError (its runner's cleanup uses the reader it failed to
        # make): keep it, and raise it from the first call instead.
        self._opts: ReadOptions | None = None
        self._error: errors.ConfigError | None = None
        try:
            self._opts = read_options(options, streaming=True)
        except errors.ConfigError as exc:
            self._error = exc
        #: trigger(availableNow=True): the offsets not to read past.
        self.target: Offsets | None = None
        #: When the last micro-batch was let through (for maxTriggerDelay).
        self.last_trigger = time.monotonic()

    @property
    def opts(self) -> ReadOptions:
        """The stream's options, checked.

        Raises:
            ConfigError: an option is unknown, malformed or not valid for a stream.
        """
        if self._opts is None:
            assert self._error is not None
            raise self._error
        return self._opts

    def _parts(self, planner: Planner) -> list[TopicPartition]:
        return planner.partitions(self.opts.subscription, missing_ok=True)

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query starts: ``startingOffsets`` (latest by default) or by time."""
        with Planner(self.opts.config) as planner:
            parts = self._parts(planner)
            bounds = planner.bounds(parts)
            starting, latest_if_none = self.opts.starting, self.opts.no_match_latest
            offsets = resolve(
                parts, starting, LATEST, bounds, planner, no_match_latest=latest_if_none
            )
            return to_json(offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        """Note the current end of every partition: the query reads up to it and stops."""
        with Planner(self.opts.config) as planner:
            self.target = planner.latest(self._parts(planner))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` when given, else everything available."""
        if self.opts.max_per_trigger is not None:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, dict[str, int]]:
        """The end of the next micro-batch: what is available, within ``limit``.

        Nothing new while ``minOffsetsPerTrigger`` holds the micro-batch back.
        """
        begin = from_json(start or {})
        with Planner(self.opts.config) as planner:
            parts = self._parts(planner)
            latest = planner.latest(parts)
            new = [tp for tp in parts if tp not in begin]
            begin.update(planner.earliest(new))
        if self.target is not None:
            # Past the query's start: nothing newer, and no partition made since.
            latest = {tp: min(o, self.target[tp]) for tp, o in latest.items() if tp in self.target}
            latest.update({tp: begin[tp] for tp in parts if tp not in self.target})
        latest = {tp: max(o, begin[tp]) for tp, o in latest.items()}
        if self._delayed(begin, latest):
            latest = {tp: begin[tp] for tp in latest}
        if limit is None:  # Spark before 4.2 passes no limit: apply the option here
            limit = self.getDefaultReadLimit()
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(begin, latest, limit.max_rows)
        # Partitions that vanished keep their position (they may come back).
        ends = {tp: o for tp, o in begin.items() if tp not in latest}
        ends.update(latest)
        return to_json(ends)

    def _delayed(self, begin: Offsets, latest: Offsets) -> bool:
        """``minOffsetsPerTrigger``: hold the micro-batch back while fewer offsets wait.

        Not past ``maxTriggerDelay`` since the last micro-batch, nor under
        ``trigger(availableNow=True)`` (it would wait for data that need not come).
        """
        opts, now = self.opts, time.monotonic()
        if opts.min_per_trigger is not None and self.target is None:
            waiting = sum(max(0, offset - begin[tp]) for tp, offset in latest.items())
            if waiting < opts.min_per_trigger and now - self.last_trigger < opts.max_trigger_delay:
                return True
        self.last_trigger = now
        return False

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """The current end of every partition (for the query's progress reports)."""
        with Planner(self.opts.config) as planner:
            return to_json(planner.latest(self._parts(planner)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One input partition per partition's offsets from ``start`` to ``end``.

        Ranges are split by ``maxRecordsPerPartition`` and ``minPartitions``.
        """
        begin, stop = from_json(start), from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            with Planner(self.opts.config) as planner:
                begin.update(planner.earliest(new))
        ranges = [OffsetRange(t, p, begin[(t, p)], offset) for (t, p), offset in stop.items()]
        return input_partitions(self.opts, ranges)

    def read(self, partition: InputPartition) -> Any:
        """The records of one input partition, as Arrow record batches."""
        return read_partition(self.opts, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the position lives in Spark's checkpoint, not in Kafka."""
