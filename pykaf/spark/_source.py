"""The ``pykaf`` data source: Kafka topics read and written as DataFrames.

Options and columns follow Spark's built-in Kafka connector, so a job ports
by changing the format name (Spark's own is "kafka"). Reading is in
``_read.py`` (batch) and ``_stream.py`` (streaming), writing in ``_write.py``;
option parsing in ``_options.py``. Automatic registration goes through the
top-level ``pyspark_pykaf`` module, whose ``DefaultSource`` is
:class:`PykafDataSource`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pykaf import errors
from pykaf.spark._options import EARLIEST, LATEST, flag, read_options
from pykaf.spark._read import (
    OffsetRange,
    Planner,
    input_partitions,
    read_partition,
    resolve,
    spark_schema,
)
from pykaf.spark._savemode import check_save_mode
from pykaf.spark._stream import PykafStreamReader
from pykaf.spark._write import PykafStreamWriter, PykafWriter


class PykafReader(DataSourceReader):
    """Batch read: ``startingOffsets`` (earliest) up to ``endingOffsets`` (latest).

    Offsets are resolved when the query is planned; each partition's range
    becomes one input partition, or several with ``maxRecordsPerPartition``
    or ``minPartitions``.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self.opts = read_options(options, streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        """The offset ranges to read, one input partition each.

        Raises:
            UnknownTopicOrPartitionError: a topic or partition to read does not exist.
            ConfigError: a range would end before it starts.
        """
        opts = self.opts
        with Planner(opts.config) as planner:
            parts = planner.partitions(opts.subscription)
            bounds = planner.bounds(parts)
            start = resolve(
                parts,
                opts.starting,
                EARLIEST,
                bounds,
                planner,
                no_match_latest=opts.no_match_latest,
            )
            end = resolve(parts, opts.ending, LATEST, bounds, planner)
        ranges = []
        for topic, partition in parts:
            first, last = start[(topic, partition)], end[(topic, partition)]
            if first > last:
                raise errors.ConfigError(
                    f"{topic}/{partition}: startingOffsets {first} is after endingOffsets {last}"
                )
            ranges.append(OffsetRange(topic, partition, first, last))
        return input_partitions(opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The records of one input partition, as Arrow record batches."""
        return read_partition(self.opts, partition.value)


class PykafDataSource(DataSource):
    """The ``pykaf`` format: ``spark.read``, ``readStream``, ``df.write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        """The format name (Spark's own connector has "kafka")."""
        return "pykaf"

    def schema(self) -> str:
        """The columns a read gives (Spark's Kafka source's; ``headers`` with includeHeaders).

        Spark asks for it when a read is loaded (batch or streaming; never for
        a write), so the read's options are checked here, where an error
        reaches the caller of ``load()`` as it is (a stream reader's
        constructor's error reaches it behind PySpark's ``UnboundLocalError``).

        Raises:
            ConfigError: an option is unknown, missing or malformed.
        """
        read_options(self.options, streaming=None)
        return spark_schema(flag(self.options, "includeHeaders", False))

    def reader(self, schema: Any) -> PykafReader:
        """Batch read."""
        return PykafReader(self.options)

    def streamReader(self, schema: Any) -> PykafStreamReader:
        """Streaming read."""
        return PykafStreamReader(self.options)

    def writer(self, schema: Any, overwrite: bool) -> PykafWriter:
        """Batch write; ``overwrite`` is refused (a topic is only appended to)."""
        if overwrite:
            check_save_mode("overwrite")
        return PykafWriter(self.options, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> PykafStreamWriter:
        """Streaming write (append output mode)."""
        if overwrite:
            raise errors.ConfigError("a Kafka topic can only be appended to: use append mode")
        return PykafStreamWriter(self.options, schema)


def register(spark: Any) -> None:
    """Register the ``pykaf`` format with a SparkSession."""
    spark.dataSource.register(PykafDataSource)
