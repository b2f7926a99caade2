"""``format("pykaf")`` from a job that a virtualenv's interpreter runs directly (issue 17).

PySpark starts its Python workers, and the JVM's lookup of ``pyspark_*`` data
sources, with ``PYSPARK_PYTHON`` or else ``python3`` from the PATH; run
without activating the virtualenv, that is an interpreter without pykaf, and
``format("pykaf")`` was not found. Importing ``pykaf.spark`` before the
session is made now points a local session's workers at this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

_JOB = textwrap.dedent(
    """
    import threading

    import pykaf.spark  # the job's own import; no PYSPARK_PYTHON in the environment
    import pykaf.sync
    from pykaf.testing import FakeClusterThread
    from pyspark.sql import SparkSession

    with FakeClusterThread(1) as fake:
        fake.create_topic("events", 2)
        fake.create_topic("copy", 1)
        with pykaf.sync.Producer(fake.bootstrap) as producer:
            producer.send_many("events", [b"event %d" % i for i in range(30)])
        spark = (SparkSession.builder.master("local[1]").appName("registration")
                 .config("spark.ui.enabled", "false").getOrCreate())
        df = (spark.read.format("pykaf")
              .option("kafka.bootstrap.servers", fake.bootstrap)
              .option("subscribe", "events").load())
        print("COUNT", df.count())
        where = spark.sparkContext.parallelize([0]).map(lambda _: pykaf.__file__).collect()
        print("WORKER", where[0])
        failures = []

        def write():  # a batch write from a thread other than the main one
            try:
                (df.select("value").write.format("pykaf")
                 .option("kafka.bootstrap.servers", fake.bootstrap)
                 .option("topic", "copy").save())  # no mode: as Spark's sink
            except Exception as exc:
                failures.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
        print("THREAD", " | ".join(str(failures[0]).splitlines())[:1500] if failures else "ok")
        with pykaf.sync.Admin(fake.bootstrap) as admin:
            print("COPIED", admin.list_offsets({("copy", 0): pykaf.NEWEST})[("copy", 0)])
        spark.stop()
    """
)


def test_format_found_from_an_unactivated_virtualenv(tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql")
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin
    )
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": path, "PYTHONPATH": str(ROOT)}
    for name in ("JAVA_HOME", "SPARK_LOCAL_IP", "TMPDIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert lines["COUNT"] == "30"
    assert lines["WORKER"] == str(ROOT / "pykaf" / "__init__.py")  # this tree's pykaf
    assert lines["THREAD"] == "ok"
    assert lines["COPIED"] == "30"
