"""pytest hooks for the benchmarks: say which implementations ran, in the header and the JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench._support import aiokafka_info, kafka_python_info, pykaf_info


def _implementations() -> dict[str, Any]:
    return {"pykaf": pykaf_info(), "aiokafka": aiokafka_info(), "kafka-python": kafka_python_info()}


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
    return lines


def pytest_benchmark_update_json(
    config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
) -> None:
    """Record the implementations in the saved JSON, for ``ratios.py`` to print."""
    output_json["pykaf_bench"] = {"implementations": _implementations()}
