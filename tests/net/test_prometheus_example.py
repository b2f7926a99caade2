"""docs/examples/prometheus_metrics.py, run: the hook's metrics reach a Prometheus scrape."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from doc_examples import load_example

from pykaf.testing import open_fake_cluster

pytest.importorskip("prometheus_client")


def _example() -> ModuleType:
    return load_example("prometheus_metrics.py")


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
