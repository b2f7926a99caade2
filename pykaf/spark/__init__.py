"""pykaf for Spark jobs (``pip install 'pykaf[spark]'``).

Producing from tasks: :func:`get_producer` gives each Python worker process
one reusable :class:`pykaf.sync.Producer`; :func:`arrow_producer` makes the
function for ``df.mapInArrow`` that produces a DataFrame's rows through the
producer's columnar path and yields a summary row per task
(:data:`SUMMARY_SCHEMA`). See ``docs/spark.md`` for the traps (flush per task;
no sort or repeated action after a side-effecting step; don't produce from a
``pandas_udf``).

The ``pykaf`` data source reads and writes topics as DataFrames, batch and
streaming, with the options and columns of Spark's own Kafka connector::

    df = (spark.read.format("pykaf")
          .option("kafka.bootstrap.servers", "host:9092")
          .option("subscribe", "events").load())
    df.write.format("pykaf").option("kafka.bootstrap.servers", "host:9092") \
        .option("topic", "copy").mode("append").save()

Installing ``pykaf[spark]`` registers the format with PySpark (the
``pyspark_pykaf`` module); :func:`register` does it by hand. A read whose
offsets were deleted fails with :class:`DataLossError` (unless the option
``failOnDataLoss`` is false). pyspark is
imported only by :func:`register` and the data source's modules.
"""

from typing import Any

from pykaf.spark._producer import SUMMARY_SCHEMA, arrow_producer, get_producer
from pykaf.spark._read import DataLossError


def register(spark: Any) -> None:
    """Register the ``pykaf`` data source with ``spark`` (a SparkSession)."""
    from pykaf.spark._source import register as register_source

    register_source(spark)


__all__ = ["SUMMARY_SCHEMA", "DataLossError", "arrow_producer", "get_producer", "register"]
