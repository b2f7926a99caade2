"""Python data sources for the Spark benchmarks: the floor, and the pykaf writer timed.

* ``pykaf-bench-null``: ``df.write.format("pykaf-bench-null")`` hands every
  task's rows to a Python worker as Arrow record batches, exactly as
  ``format("pykaf")`` does, and the writer only reads them. Its time is what
  Spark's Python data source machinery costs a write (planning, the tasks,
  the Arrow hand-off) before any client does anything:
  ``bench/test_spark_kafka.py`` times it beside the ``pykaf`` writer.
  Read, it makes its rows up in memory (``MadeUpReader``): the floor of
  any Python read of as many rows.
* ``pykaf-bench-timed``: the ``pykaf`` writer itself, each task noting where
  its time went (the producer got, the Arrow batches waited for, the records
  handed to the producer, the acknowledgements waited for) as one JSON line
  in the file named by its ``phases`` option (``bench/spark_write_phases.py``
  reads them; the executors share the driver's file system on loopback).

The executors cannot import ``bench/``, so this module is pickled by value
(:func:`register`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from pykaf._sync.portal import wait_future
from pykaf.spark._savemode import check_save_mode
from pykaf.spark._source import PykafDataSource
from pykaf.spark._write import PykafCommitMessage, PykafWriter, _TaskWriter


class NullArrowWriter(DataSourceArrowWriter):
    """Reads every Arrow batch of its task (each column's buffers touched), writes nothing."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.column = "value"

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        """Read the task's batches to the end."""
        size = 0
        for batch in iterator:
            size += batch.column(self.column).nbytes
        if size < 0:  # never: keeps the read from being a dead store
            raise AssertionError(size)
        return WriterCommitMessage()


class MadeUpReader(DataSourceReader):
    """Hands Spark ``records`` rows of ``value_size``-byte values from memory, Kafka unread.

    One input partition per ``partitions``, each yielding its rows as Arrow
    batches of at most ``batch_rows`` (about a fetched piece's worth, as the
    ``pykaf`` reader yields them): the floor of any Python read of as many rows.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self.records = int(options["records"])
        self.value_size = int(options["value_size"])
        self.partitions_ = int(options["partitions"])
        self.batch_rows = int(options.get("batch_rows", "10000"))

    def partitions(self) -> list[InputPartition]:
        """One per partition, each holding how many rows it gives."""
        share, extra = divmod(self.records, self.partitions_)
        return [InputPartition(share + (i < extra)) for i in range(self.partitions_)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's rows, ``batch_rows`` at a time (the values' bytes all 'v')."""
        import pyarrow as pa

        rows: int = partition.value
        size = self.value_size
        while rows > 0:
            n = min(rows, self.batch_rows)
            offsets = pa.array(range(0, (n + 1) * size, size), pa.int32()).buffers()[1]
            values = pa.Array.from_buffers(
                pa.binary(), n, [None, offsets, pa.py_buffer(b"v" * n * size)]
            )
            yield pa.RecordBatch.from_arrays([values], names=["value"])
            rows -= n


class NullDataSource(DataSource):
    """The ``pykaf-bench-null`` format: writes that drop, reads made up (the floors)."""

    @classmethod
    def name(cls) -> str:
        """The format name the floor is registered under."""
        return "pykaf-bench-null"

    def schema(self) -> str:
        """A read's one column."""
        return "value binary"

    def writer(self, schema: Any, overwrite: bool) -> NullArrowWriter:
        """The writer that reads and drops."""
        return NullArrowWriter(self.options, schema)

    def reader(self, schema: Any) -> MadeUpReader:
        """The reader that makes its rows up (``records``, ``value_size``, ``partitions``)."""
        return MadeUpReader(self.options)


class TimedPykafWriter(PykafWriter):
    """The ``pykaf`` writer, each task noting its phases in the ``phases`` file."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        rest = dict(options)
        self.phases = rest.pop("phases")
        super().__init__(rest, schema)

    def write(self, iterator: Iterator[Any]) -> PykafCommitMessage:
        """Produce the task's batches as the ``pykaf`` writer does, timing each phase."""
        begun, cpu = time.perf_counter(), time.process_time()
        task = _TaskWriter(self.config, self.topic)
        got = time.perf_counter()
        waiting = 0.0
        rows = batches = 0
        batch_iter = iter(iterator)
        while True:
            asked = time.perf_counter()
            batch = next(batch_iter, None)
            waiting += time.perf_counter() - asked
            if batch is None:
                break
            batches += 1
            rows += batch.num_rows
            if batch.num_rows:
                task._batch(batch)
        sent = time.perf_counter()
        while task.pending:
            task.records += wait_future(task.pending.popleft())
        done = time.perf_counter()
        phases = {
            "pid": os.getpid(),
            "producer_s": got - begun,
            "arrow_wait_s": waiting,
            "handing_s": sent - got - waiting,
            "acks_s": done - sent,
            "task_s": done - begun,
            "cpu_s": time.process_time() - cpu,
            "rows": rows,
            "batches": batches,
        }
        with open(self.phases, "a") as out:
            out.write(json.dumps(phases) + "\n")
        return PykafCommitMessage(task.records)


class TimedPykafSource(PykafDataSource):
    """The ``pykaf-bench-timed`` format: the ``pykaf`` sink, its tasks timed."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "pykaf-bench-timed"

    def writer(self, schema: Any, overwrite: bool) -> TimedPykafWriter:
        """The timed writer (``overwrite`` refused as the ``pykaf`` sink refuses it)."""
        if overwrite:
            check_save_mode("overwrite")
        return TimedPykafWriter(self.options, schema)


def value_frame(spark: Any, records: int, value_size: int, partitions: int) -> Any:
    """``records`` rows of ``value_size``-byte values in ``partitions`` partitions, cached."""
    from pyspark.sql import functions as F

    value = F.lpad(F.col("id").cast("string"), value_size, "v")
    df = (
        spark.range(records, numPartitions=partitions)
        .select(F.encode(value, "utf-8").alias("value"))
        .cache()
    )
    assert df.count() == records
    return df


def register(spark: Any) -> None:
    """Register both formats with ``spark``; this module goes to the workers by value."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(NullDataSource)
    spark.dataSource.register(TimedPykafSource)
