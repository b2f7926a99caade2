"""docs/examples/prometheus_metrics.py, run: the hook's metrics reach a Prometheus scrape."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from pykaf.testing import open_fake_cluster

pytest.importorskip("prometheus_client")
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "prometheus_metrics.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prometheus_metrics", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_scrape_counts_every_produce_request() -> None:
    example = _example()
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("scraped", 3)
        text = (await example.produce_with_metrics(cluster.bootstrap, "scraped", 3000)).decode()
    produce = re.findall(r'kafka_request_seconds_count\{api="Produce",broker="(\d+)"\} (\S+)', text)
    assert produce, text
    assert all(float(n) >= 1 for _, n in produce)
    assert re.search(r'kafka_request_seconds_count\{api="Metadata",broker="[-\d]+"\}', text)
    assert "kafka_request_failures" in text  # declared, nothing failed
    assert not re.search(r"kafka_request_failures_total\{.*\} [1-9]", text)
