"""SparkSessions for tests and benchmarks of Spark jobs that use pykaf.

Local, or on a Spark standalone cluster started on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pykaf.testing._tansu import free_port

#: How long a standalone cluster's master and workers may take to start.
STANDALONE_START_TIMEOUT = 90.0
LOOPBACK = "127.0.0.1"
_QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


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
    return _session("local[2]", app_name, config)


def _session(master: str, app_name: str, config: dict[str, str]) -> Any:
    """A SparkSession on ``master`` with the quick-start settings and ``config``."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.extraJavaOptions", _QUICK_JVM)
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


@contextlib.contextmanager
def standalone_spark_session(
    app_name: str = "pykaf-tests",
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    config: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """A SparkSession on a Spark standalone cluster started on loopback for it.

    A master and ``workers`` workers (``cores`` cores and ``memory`` each) run
    as processes of their own from the installed ``pyspark``; each worker
    starts an executor in a JVM of its own, whose Python workers run this
    interpreter: the shape of a job on a real cluster (tasks in other JVMs
    and processes than the driver's), which :func:`local_spark_session` does
    not have. The session is handed out once every executor has registered.
    ``config`` adds Spark settings. Everything is stopped, and the
    cluster's directory removed, on exit.

    Raises:
        ImportError: pyspark is not installed (``pip install 'pykaf[spark]'``).
        RuntimeError: a SparkContext is already running in this process, or
            the master or a worker did not start in time (their logs' ends
            are in the message).
    """
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        # getOrCreate would hand back that one, not a session on the cluster
        raise RuntimeError(
            "a SparkContext is already running in this process (one per process): "
            "stop it before starting a standalone cluster's session"
        )
    home = Path(_find_spark_home())
    spark_class = home / "bin" / "spark-class"
    base = tempfile.mkdtemp(prefix="pykaf-spark-")
    env = dict(
        os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP=LOOPBACK
    )
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", _QUICK_JVM)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(name: str, *args: str) -> Path:
        log = Path(base) / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(spark_class), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=base,
                start_new_session=True,
            )
        procs.append((proc, log))
        return log

    def wait_for(log: Path, text: str) -> None:
        deadline = time.monotonic() + STANDALONE_START_TIMEOUT
        while time.monotonic() < deadline:
            if text in log.read_text(errors="replace"):
                return
            if any(proc.poll() is not None for proc, _ in procs):
                break
            time.sleep(0.2)
        tails = "\n".join(
            f"--- {path.name}:\n{path.read_text(errors='replace')[-2000:]}" for _, path in procs
        )
        raise RuntimeError(f"the Spark standalone cluster did not start ({text!r}):\n{tails}")

    try:
        port = free_port(LOOPBACK)
        master = f"spark://{LOOPBACK}:{port}"
        started = start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--webui-port",
            "0",
        )
        wait_for(started, "I have been elected leader")
        for n in range(workers):
            work = Path(base) / f"work-{n}"
            work.mkdir()
            log = start(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                LOOPBACK,
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                "0",
                "--work-dir",
                str(work),
                master,
            )
            wait_for(log, "Successfully registered with master")
        settings = {
            "spark.executor.cores": str(cores),
            "spark.executor.memory": memory,
            "spark.cores.max": str(workers * cores),
            "spark.executor.extraJavaOptions": _QUICK_JVM,
            "spark.pyspark.python": sys.executable,
            "spark.default.parallelism": str(workers * cores),
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.ui.showConsoleProgress": "false",
            **(config or {}),
        }
        session = _session(master, app_name, settings)
        try:
            _wait_for_executors(session, workers)
            yield session
        finally:
            session.stop()
    finally:
        for proc, _ in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def _wait_for_executors(session: Any, count: int) -> None:
    """Return once ``count`` executors have registered with the driver."""
    status = session.sparkContext._jsc.sc().getExecutorMemoryStatus
    deadline = time.monotonic() + STANDALONE_START_TIMEOUT
    while status().size() < count + 1:  # the driver is listed too
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} executors did not register in time")
        time.sleep(0.2)
