"""Apache Kafka for the benchmarks: one KRaft node, and Kafka's own perf tools.

:class:`KafkaBench` is a :class:`bench._brokers.BenchBroker` over
:class:`pykaf.testing.KafkaCluster` (one combined broker+controller JVM with a
1 GiB heap, from the jars in ``~/.cache/pykaf/kafka-<version>``).

:func:`run_producer_perf` and :func:`run_consumer_perf` run
``org.apache.kafka.tools.ProducerPerformance`` (``kafka-producer-perf-test``)
and ``ConsumerPerformance`` (``kafka-consumer-perf-test``) from the same jars,
in a JVM started the way Kafka's scripts start them (``-Xmx512M`` from the
scripts, ``KAFKA_JVM_PERFORMANCE_OPTS``' G1 settings from
``kafka-run-class.sh``; logging at WARN on stderr, as the tools' own log4j
file has it), and parse what they print: the producer's final summary line,
the consumer's CSV line. Both report rates over their own clock, which starts
after the JVM is up and the client object exists; :attr:`PerfResult.seconds`
is that span.

The node keeps its data in memory (a directory under ``/dev/shm`` where that
is a tmpfs with room, ``PYKAF_BENCH_KAFKA_DIR`` to choose another parent) and
removes deleted topics' files after a second instead of a minute. On disk,
the kernel starts writing the broker's files back about 30 seconds after the
first writes (``vm.dirty_expire_centisecs``), and that burst (300 MB/s here)
slowed the broker in whichever round it fell: 1,000,000 records into 100
partitions took 0.4-0.6 s per round for ten rounds, then 1.3-2.3 s, with the
client's CPU unchanged and no retries. The benchmarks measure clients, so
the broker's disk is kept out of them.

``PYKAF_BENCH_KAFKA_RECORDS`` (default 1,000,000) sets the records per round
of the Kafka benchmarks (``bench/test_kafka.py``): small counts check that the
benchmarks work; the figures are taken at 1,000,000.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._brokers import BenchBroker
from pykaf.testing import KafkaCluster

#: Records per round of the Kafka benchmarks (ratios and records/s are per record).
RECORDS = int(os.environ.get("PYKAF_BENCH_KAFKA_RECORDS", "1000000"))
#: The broker JVM's heap.
BROKER_HEAP = "1g"
#: Where the node's directory goes: memory, so that no writeback lands in a round.
DATA_PARENT = os.environ.get("PYKAF_BENCH_KAFKA_DIR", "/dev/shm")
#: The room the node's directory needs there (deleted topics go within seconds).
DATA_ROOM = 4 << 30
#: Server properties of the benchmark node: deleted topics' files go after 1 s.
BROKER_CONFIGS = {"file.delete.delay.ms": "1000"}
#: How Kafka's scripts run the perf tools: kafka-{producer,consumer}-perf-test.sh
#: set KAFKA_HEAP_OPTS=-Xmx512M, kafka-run-class.sh adds KAFKA_JVM_PERFORMANCE_OPTS.
TOOL_JVM_OPTIONS = (
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_TIMEOUT_S = 300.0

_TOOLS_LOG4J = """\
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
"""

# ProducerPerformance's summary: "N records sent, R records/sec (M MB/sec), A ms avg
# latency, X ms max latency, P ms 50th, ...", and with --warmup-records W a second one,
# "N steady state records sent, ...", over the records after the first W. The 5-second
# window lines have no percentiles.
_PRODUCER_SUMMARY = re.compile(
    r"^(?P<count>\d+)(?P<steady> steady state)? records sent, "
    r"(?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$",
    re.MULTILINE,
)
_CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


class PerfToolError(RuntimeError):
    """A Kafka perf tool failed or printed something this module cannot read."""


@dataclass(frozen=True)
class PerfResult:
    """What one run of a Kafka perf tool reported."""

    records: int  # records the tool counted (acknowledged / consumed)
    records_per_s: float  # its own rate (the consumer's: after the group join)
    seconds: float  # the span its rate is over: records / records_per_s
    megabytes: float  # MiB the tool counted (values, and keys when present)
    details: dict[str, float]  # the rest of its summary (latencies, join time, ...)
    output: str


class KafkaBench(BenchBroker):
    """One Apache Kafka node (KRaft, broker and controller in one JVM) on loopback."""

    name = "kafka"

    def __init__(self) -> None:
        self._data = _data_directory()
        try:
            self._cluster = KafkaCluster(
                1, heap=BROKER_HEAP, broker_configs=BROKER_CONFIGS, directory=self._data
            ).start()
        except BaseException:
            self._remove_data()
            raise
        self._tools_log4j = self._cluster.directory / "bench-tools-log4j2.yaml"
        self._tools_log4j.write_text(_TOOLS_LOG4J)

    @property
    def bootstrap(self) -> str:
        """The node's PLAINTEXT address."""
        return self._cluster.bootstrap

    @property
    def version(self) -> str:
        """The Apache Kafka release the node runs."""
        return self._cluster.version

    @property
    def directory(self) -> Path:
        """Where the node keeps its data and log."""
        return self._cluster.directory

    def create_topic(self, topic: str, partitions: int, *, timeout: float = 30.0) -> None:
        """Create ``topic`` (replication factor 1); return once every partition has a leader.

        ``timeout``: seconds for every leader to serve (1,000 partitions take longer).
        """
        self._cluster.create_topic(topic, partitions, timeout=timeout)

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (Kafka removes its files a minute later)."""
        self._cluster.delete_topic(topic)

    def tool_command(self, main_class: str, *args: str) -> list[str]:
        """The command line running one of Kafka's tools as its script would."""
        return [
            self._cluster.java,
            *TOOL_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self._tools_log4j}",
            "-cp",
            self._cluster.classpath,
            main_class,
            *args,
        ]

    def run_tool(self, main_class: str, *args: str) -> str:
        """Run a tool to its end; return its standard output, raising if it failed."""
        done = subprocess.run(
            self.tool_command(main_class, *args),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise PerfToolError(
                f"{main_class} exited with {done.returncode}:\n{done.stdout[-3000:]}\n"
                f"{done.stderr[-3000:]}"
            )
        return done.stdout

    def close(self) -> None:
        """Stop the node and remove its directory."""
        try:
            self._cluster.close()
        finally:
            self._remove_data()

    def _remove_data(self) -> None:
        if self._data is not None:
            shutil.rmtree(self._data, ignore_errors=True)


def _data_directory() -> str | None:
    """A fresh directory under :data:`DATA_PARENT` when it has the room, else None (a temp dir)."""
    try:
        if shutil.disk_usage(DATA_PARENT).free < DATA_ROOM:
            return None
        return tempfile.mkdtemp(prefix="pykaf-bench-kafka-", dir=DATA_PARENT)
    except OSError:
        return None


# -- the perf tools ---------------------------------------------------------------------
def producer_perf_args(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    warmup_records: int = 0,
    props: Sequence[str] = (),
) -> list[str]:
    """``kafka-producer-perf-test``'s arguments: no throttle, acks=all, idempotent.

    ``warmup_records`` adds ``--warmup-records``: a second summary over the
    records after that many (the JVM's JIT warmed up by then). ``props`` are
    more producer properties (``name=value``).
    """
    warmup = ["--warmup-records", str(warmup_records)] if warmup_records else []
    return [
        *warmup,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "acks=all",
        "enable.idempotence=true",
        *props,
    ]


def parse_producer_perf(output: str, *, steady: bool = False) -> PerfResult:
    """The final summary line of ``ProducerPerformance`` (the steady-state one with ``steady``)."""
    matches = [m for m in _PRODUCER_SUMMARY.finditer(output) if bool(m["steady"]) == steady]
    if not matches:
        kind = "steady-state summary" if steady else "summary"
        raise PerfToolError(f"no {kind} line in ProducerPerformance's output:\n{output[-3000:]}")
    m = matches[-1]
    count, rate = int(m["count"]), float(m["rate"])
    if rate <= 0:
        raise PerfToolError(f"ProducerPerformance reported {rate} records/sec")
    return PerfResult(
        records=count,
        records_per_s=rate,
        seconds=count / rate,
        megabytes=float(m["mb"]) * count / rate,
        details={
            "avg_latency_ms": float(m["avg"]),
            "max_latency_ms": float(m["max"]),
            "p50_ms": float(m["p50"]),
            "p99_ms": float(m["p99"]),
        },
        output=output,
    )


def run_producer_perf(
    broker: KafkaBench,
    topic: str,
    records: int,
    record_size: int,
    warmup_records: int = 0,
    props: Sequence[str] = (),
) -> tuple[PerfResult, PerfResult | None]:
    """Run ``kafka-producer-perf-test`` once; its summary, and its steady-state one if asked."""
    output = broker.run_tool(
        PRODUCER_PERF,
        *producer_perf_args(broker.bootstrap, topic, records, record_size, warmup_records, props),
    )
    total = parse_producer_perf(output)
    return total, parse_producer_perf(output, steady=True) if warmup_records else None


def consumer_perf_args(
    bootstrap: str,
    topic: str,
    records: int,
    *,
    config_file: Path,
    partition_fetch_bytes: int,
    group: str | None = None,
) -> list[str]:
    """``kafka-consumer-perf-test``'s arguments, in a new group (it subscribes)."""
    return [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(records),
        "--group",
        group or f"bench-java-{uuid.uuid4().hex}",
        "--fetch-size",
        str(partition_fetch_bytes),
        "--consumer.config",
        str(config_file),
        "--timeout",
        "60000",
    ]


def parse_consumer_perf(output: str) -> PerfResult:
    """The CSV line after ``ConsumerPerformance``'s header.

    Its fields: start and end time, MiB read, MiB/s, records, records/s (both
    over the whole run), the group join's ms, the ms after it (fetch.time.ms),
    and MiB/s and records/s over those ms. The rate used is the last one.
    """
    if "WARNING: Exiting before consuming" in output:
        raise PerfToolError(f"ConsumerPerformance stopped short:\n{output[-3000:]}")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    try:
        row = lines[lines.index(_CONSUMER_HEADER) + 1]
    except (ValueError, IndexError):
        raise PerfToolError(
            f"no result after the header in ConsumerPerformance's output:\n{output[-3000:]}"
        ) from None
    fields = row.split(", ")
    if len(fields) != 10:
        raise PerfToolError(f"ConsumerPerformance's result has {len(fields)} fields: {row!r}")
    megabytes, records = float(fields[2]), int(fields[4])
    join_ms, fetch_ms = int(fields[6]), int(fields[7])
    if fetch_ms <= 0:
        raise PerfToolError(f"ConsumerPerformance reported {fetch_ms} ms of fetching: {row!r}")
    return PerfResult(
        records=records,
        records_per_s=records / (fetch_ms / 1000),
        seconds=fetch_ms / 1000,
        megabytes=megabytes,
        details={
            "join_ms": join_ms,
            "fetch_ms": fetch_ms,
            "records_per_s_with_join": float(fields[5]),
        },
        output=output,
    )


def run_consumer_perf(
    broker: KafkaBench,
    topic: str,
    records: int,
    *,
    consumer_config: dict[str, str],
    partition_fetch_bytes: int,
) -> PerfResult:
    """Run ``kafka-consumer-perf-test`` once in a new group; parse its result."""
    config_file = broker.directory / f"bench-consumer-{uuid.uuid4().hex}.properties"
    config_file.write_text("".join(f"{k}={v}\n" for k, v in consumer_config.items()))
    try:
        output = broker.run_tool(
            CONSUMER_PERF,
            *consumer_perf_args(
                broker.bootstrap,
                topic,
                records,
                config_file=config_file,
                partition_fetch_bytes=partition_fetch_bytes,
            ),
        )
    finally:
        config_file.unlink(missing_ok=True)
    return parse_consumer_perf(output)
