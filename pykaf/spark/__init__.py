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
``pyspark_pykaf`` module); :func:`register` does it by hand. Importing this
module before the session is made, with ``PYSPARK_PYTHON`` unset, makes
this interpreter the Python of a local session's workers (see
``docs/spark.md``, "Registration"). A read whose
offsets were deleted fails with :class:`DataLossError` (unless the option
``failOnDataLoss`` is false). When PySpark is installed, importing this
module lets ``df.write.format("pykaf").save()`` without a mode append, as
Spark's Kafka sink does (``_savemode.py``: Spark refuses that mode for
Python data sources before they see the write).
"""

import os
import sys
from typing import Any

from pykaf.errors import DataLossError
from pykaf.spark._producer import SUMMARY_SCHEMA, arrow_producer, get_producer
from pykaf.spark._savemode import activate
from pykaf.spark._savemode import install as install_save_modes


def _master_from_env() -> str | None:
    """The master the environment names for a session made here (None: not said)."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    for i, arg in enumerate(args):
        if arg == "--master" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--master="):
            return arg.split("=", 1)[1]
    return os.environ.get("MASTER")


def _default_worker_python() -> None:
    """Make this interpreter the Python workers' when nothing else chose one.

    Applies before this process starts Spark (no JVM yet, not run by
    ``spark-submit``), with ``PYSPARK_PYTHON`` unset and no non-local master
    named by the environment: Spark's JVM inherits the variable, so its data
    source lookup finds ``pyspark_pykaf`` and the tasks run with pykaf.
    """
    if os.environ.get("PYSPARK_PYTHON") or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return
    context = sys.modules.get("pyspark.core.context")
    if context is not None and getattr(context.SparkContext, "_gateway", None) is not None:
        return  # a JVM runs already: its environment is fixed (register() still helps)
    master = _master_from_env()
    if master is None or master.startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


_default_worker_python()
install_save_modes()


def register(spark: Any) -> None:
    """Register the ``pykaf`` data source with ``spark`` (a SparkSession).

    For a local master (``local``, ``local[N]``, ...) with no ``PYSPARK_PYTHON``
    set, the session's Python workers are pointed at this interpreter
    (``sys.executable``) first: PySpark would otherwise start them with
    ``python3`` from the PATH, which need not have pykaf (a virtualenv's
    interpreter run without activating it). On a cluster the executors'
    Python is the cluster's to set (``PYSPARK_PYTHON`` or
    ``spark.pyspark.python``), and must have pykaf installed.

    It also makes ``spark`` the calling thread's active session in Spark's
    JVM: Spark looks a Python data source up for a write through that
    thread's active session. A batch ``save()`` of format ``pykaf`` does it
    by itself (the wrapper this module installs); a thread that writes
    otherwise (a stream) may call this first.
    """
    from pykaf.spark._source import register as register_source

    context = spark.sparkContext
    if context.master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable  # for sessions made later
        context.pythonExec = sys.executable  # what this session's workers run
    register_source(spark)
    activate(spark)


__all__ = ["SUMMARY_SCHEMA", "DataLossError", "arrow_producer", "get_producer", "register"]
