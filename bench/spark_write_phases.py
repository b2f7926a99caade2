"""Where a Spark write's time goes: the job's planning and stage, and each pykaf task's phases.

Writes one cached DataFrame to Apache Kafka round after round with three
formats, each round in this order: the floor of any Python ``df.write``
(``pykaf-bench-null``: reads its Arrow batches, writes nothing), the ``pykaf``
sink with each task timed (``pykaf-bench-timed``, ``bench/_spark_sources.py``)
and Spark's own connector (``kafka``). For each job it prints the time before
its stage ran (planning, which for a Python sink includes the driver's Python
calls), the stage (its tasks, every executor's), and after (the commit); for
the pykaf tasks, the median task's phases: getting the producer, waiting for
Spark's Arrow batches, handing the rows to the producer (which waits when
``PIPELINE`` parts are in flight), waiting for the last acknowledgements, and
the task's CPU (every thread of its Python worker). The first round is the
session's first job of each format (Python workers starting, producers
connecting); the summary is the median of the rounds after it.

    python bench/spark_write_phases.py --records 1000000 --value-size 100 --partitions 4
    python bench/spark_write_phases.py --records 300000 --value-size 8 --partitions 6

``--spark standalone`` runs a master and two one-core workers on loopback
(``pykaf.testing.standalone_spark_session``); ``--spark local`` runs local[2].
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FORMATS = ("pykaf-bench-null", "pykaf-bench-timed", "kafka")
PHASES = ("producer_s", "arrow_wait_s", "handing_s", "acks_s", "task_s", "cpu_s")


def _stamp(text: str) -> float:
    when = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fGMT")
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def _stages(spark: Any) -> list[dict[str, Any]]:
    """Every completed stage, from the driver's REST API."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url, timeout=30) as answer:
        stages: list[dict[str, Any]] = json.load(answer)
    return stages


def _job(spark: Any, run: Any) -> dict[str, float]:
    """Run ``run()`` (one write); its time before, in and after its stages."""
    known = {s["stageId"] for s in _stages(spark)}
    started = time.time()
    run()
    ended = time.time()
    new: list[dict[str, Any]] = []
    for _ in range(50):  # the listener reports a stage's end a moment after the job's
        new = [s for s in _stages(spark) if s["stageId"] not in known]
        if new:
            break
        time.sleep(0.1)
    first = min(_stamp(s["submissionTime"]) for s in new)
    last = max(_stamp(s["completionTime"]) for s in new)
    return {
        "job_s": ended - started,
        "before_s": first - started,
        "stage_s": last - first,
        "after_s": ended - last,
        "executor_run_s": sum(s["executorRunTime"] for s in new) / 1000,
        "executor_cpu_s": sum(s["executorCpuTime"] for s in new) / 1e9,
        "tasks": sum(s["numTasks"] for s in new),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark", choices=("standalone", "local"), default="standalone")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)

    from bench._kafka import KafkaBench
    from bench._spark_sources import register as register_sources
    from bench._spark_sources import value_frame
    from pykaf.spark import register
    from pykaf.testing import local_spark_session, standalone_spark_session
    from pykaf.testing._kafka_dist import spark_kafka_jars

    jars = ",".join(str(jar) for jar in spark_kafka_jars())
    settings = {"spark.driver.memory": "2g", "spark.jars": jars, "spark.ui.enabled": "true"}
    phases_file = Path(tempfile.mkdtemp(prefix="pykaf-phases-")) / "tasks.jsonl"
    results: dict[str, list[dict[str, float]]] = {fmt: [] for fmt in FORMATS}
    tasks: list[list[dict[str, float]]] = []
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(KafkaBench())
        if args.spark == "local":
            spark = local_spark_session("pykaf-phases", **settings)
            stack.callback(spark.stop)
        else:
            spark = stack.enter_context(standalone_spark_session("pykaf-phases", config=settings))
        register(spark)
        register_sources(spark)
        df = value_frame(spark, args.records, args.value_size, args.partitions)
        for round_no in range(args.rounds):
            for fmt in FORMATS:
                topic = f"phases-{round_no}-{fmt}"
                kafka.create_topic(topic, args.partitions)
                writer = df.write.format(fmt).mode("append")
                if fmt != "pykaf-bench-null":
                    writer = (
                        writer.option("kafka.bootstrap.servers", kafka.bootstrap)
                        .option("topic", topic)
                        .option("kafka.linger.ms", "5")
                    )
                if fmt == "pykaf-bench-timed":
                    writer = writer.option("phases", str(phases_file))
                    phases_file.write_text("")
                job = _job(spark, writer.save)
                written = sum(kafka.high_watermarks(topic).values())
                want = 0 if fmt == "pykaf-bench-null" else args.records
                assert written == want, f"{fmt}: {written} records written, not {want}"
                kafka.delete_topic(topic)
                results[fmt].append(job)
                if fmt == "pykaf-bench-timed":
                    lines = phases_file.read_text().splitlines()
                    tasks.append([json.loads(line) for line in lines])
                print(
                    f"round {round_no + 1} {fmt:18} job {job['job_s']:6.3f} s: "
                    f"before {job['before_s']:.3f}, stage {job['stage_s']:.3f}, "
                    f"after {job['after_s']:.3f} ({job['tasks']:.0f} tasks, executors' run "
                    f"{job['executor_run_s']:.3f} s, CPU {job['executor_cpu_s']:.3f} s)",
                    flush=True,
                )
    later = slice(1, None) if args.rounds > 1 else slice(None)
    print(
        f"\n{args.spark}, {args.records:,} rows of {args.value_size} B, {args.partitions} "
        f"partitions: medians of rounds {2 if args.rounds > 1 else 1}-{args.rounds}"
    )
    for fmt in FORMATS:
        jobs = results[fmt][later]
        cells = ", ".join(
            f"{key[:-2]} {statistics.median(j[key] for j in jobs):.3f} s"
            for key in ("job_s", "before_s", "stage_s", "after_s")
        )
        rate = args.records / statistics.median(j["job_s"] for j in jobs)
        print(f"  {fmt:18} {cells} ({rate / 1e3:,.0f}k rows/s)")
    every = [task for tasks_of_round in tasks[later] for task in tasks_of_round]
    print(
        "  pykaf's median task: "
        + ", ".join(
            f"{key[:-2]} {statistics.median(t[key] for t in every):.3f} s" for key in PHASES
        )
    )
    first = tasks[0]
    print(
        "  pykaf's tasks in round 1: "
        + ", ".join(
            f"{key[:-2]} {statistics.median(t[key] for t in first):.3f} s" for key in PHASES
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
