"""A local SparkSession for the whole test session (the ``spark`` marker's tests)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2], small and quick to start; skipped without pyspark or Java."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    opts = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    # The workers run this interpreter (its packages), not whatever python3 is on PATH.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    sigint = signal.getsignal(signal.SIGINT)
    try:
        session = (
            pyspark_sql.SparkSession.builder.master("local[2]")
            .appName("pykaf-tests")
            .config("spark.driver.extraJavaOptions", opts)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
    except Exception as exc:  # no Java, or the JVM did not start
        pytest.skip(f"no local Spark: {exc}")
    finally:
        # SparkContext installs its own SIGINT handler (to cancel jobs); the
        # sync facades' Ctrl-C tests, later in the session, need Python's.
        signal.signal(signal.SIGINT, sigint)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
