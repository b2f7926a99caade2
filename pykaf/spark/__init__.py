"""pykaf for Spark jobs (``pip install 'pykaf[spark]'``).

Producing from tasks: :func:`get_producer` gives each Python worker process
one reusable :class:`pykaf.sync.Producer`; :func:`arrow_producer` makes the
function for ``df.mapInArrow`` that produces a DataFrame's rows through the
producer's columnar path and yields a summary row per task
(:data:`SUMMARY_SCHEMA`). See ``docs/spark.md`` for the traps (flush per task;
no sort or repeated action after a side-effecting step; don't produce from a
``pandas_udf``).

pyspark itself is imported only by the data source (not yet here); these
functions need pyarrow, which Spark's Arrow paths bring.
"""

from pykaf.spark._producer import SUMMARY_SCHEMA, arrow_producer, get_producer

__all__ = ["SUMMARY_SCHEMA", "arrow_producer", "get_producer"]
