"""Registers pykaf's ``pykaf`` format with Spark automatically.

PySpark (4.0 and later) looks for top-level modules named ``pyspark_*`` that
expose a ``DefaultSource`` data source, and registers each under its name;
installing ``pykaf[spark]`` installs this one, so ``spark.read.format("pykaf")``
works without calling :func:`pykaf.spark.register`.
"""

from pykaf.spark._source import PykafDataSource as DefaultSource

__all__ = ["DefaultSource"]
