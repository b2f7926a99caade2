"""A Python data source that writes nothing: the floor of a Python ``df.write``.

``df.write.format("pykaf-bench-null")`` hands every task's rows to a Python
worker as Arrow record batches, exactly as ``format("pykaf")`` does, and the
writer only reads them. Its time is what Spark's Python data source machinery
costs a write (planning, the tasks, the Arrow hand-off) before any client
does anything: ``bench/test_spark_kafka.py`` times it beside the ``pykaf``
writer. The executors cannot import ``bench/``, so this module is pickled by
value (:func:`register`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


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


class NullDataSource(DataSource):
    """The ``pykaf-bench-null`` format: batch writes only."""

    @classmethod
    def name(cls) -> str:
        """The format name the floor is registered under."""
        return "pykaf-bench-null"

    def writer(self, schema: Any, overwrite: bool) -> NullArrowWriter:
        """The writer that reads and drops."""
        return NullArrowWriter(self.options, schema)


def register(spark: Any) -> None:
    """Register the format with ``spark``; this module goes to the workers by value."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(NullDataSource)
