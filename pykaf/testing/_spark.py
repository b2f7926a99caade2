"""A local SparkSession for tests and benchmarks of Spark jobs that use pykaf."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def local_spark_session(app_name: str = "pykaf-tests", **config: str) -> Any:
    """A ``local[2]`` SparkSession that starts quickly and runs this interpreter's workers.

    The workers run ``sys.executable`` (so they see the packages the caller
    sees, pykaf's included), the JVM starts with quick-start options, the UI
    is off, and Python's SIGINT handler is put back afterwards (SparkContext
    installs its own, which would swallow Ctrl-C in later blocking calls).
    ``config`` adds Spark settings. Stop the session when done.

    Raises:
        ImportError: pyspark is not installed (``pip install 'pykaf[spark]'``).
        Exception: the JVM did not start (no Java).
    """
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
    )
    for name, value in config.items():
        builder = builder.config(name, value)
    sigint = signal.getsignal(signal.SIGINT)
    try:
        session = builder.getOrCreate()
    finally:
        signal.signal(signal.SIGINT, sigint)
    session.sparkContext.setLogLevel("ERROR")
    return session
