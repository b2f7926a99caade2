"""docs/examples/prometheus_metrics.py, run: the hooks' metrics reach a Prometheus scrape."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from doc_examples import load_example

from pykaf.testing import open_fake_cluster

pytest.importorskip("prometheus_client")


def _example() -> ModuleType:
    return load_example("prometheus_metrics.py")


def _value(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{name}\{{{labels}\}} (\S+)$", text, re.MULTILINE)
    assert match, f"{name}{{{labels}}} is not in the scrape:\n{text}"
    return float(match.group(1))


async def test_the_scrape_counts_every_request_and_batch() -> None:
    example = _example()
    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("scraped", 3)
        raw = await example.produce_and_consume_with_metrics(cluster.bootstrap, "scraped", 3000)
    text = raw.decode()
    produce = re.findall(r'kafka_request_seconds_count\{api="Produce",broker="(\d+)"\} (\S+)', text)
    assert produce, text
    assert all(float(n) >= 1 for _, n in produce)
    assert re.search(r'kafka_request_seconds_count\{api="Fetch",broker="\d+"\}', text)
    assert re.search(r'kafka_request_seconds_count\{api="Metadata",broker="[-\d]+"\}', text)
    # Declared; no Produce failed (Fetch long polls still open fail when the consumer closes).
    assert "kafka_request_failures" in text
    assert not re.search(r'kafka_request_failures_total\{api="Produce".*\} [1-9]', text)
    # Every record is in exactly one produced batch and one fetched batch.
    for kind in ("produce", "fetch"):
        labels = f'kind="{kind}",topic="scraped"'
        assert _value(text, "kafka_batch_records_sum", labels) == 3000
        batches = _value(text, "kafka_batch_records_count", labels)
        assert 1 <= batches <= 3000
        assert _value(text, "kafka_batch_bytes_total", labels) > 3000  # a byte a value at least
    # The fetched batches are the produced ones: same count, same bytes.
    assert _value(text, "kafka_batch_records_count", 'kind="fetch",topic="scraped"') == _value(
        text, "kafka_batch_records_count", 'kind="produce",topic="scraped"'
    )
    assert _value(text, "kafka_batch_bytes_total", 'kind="fetch",topic="scraped"') == _value(
        text, "kafka_batch_bytes_total", 'kind="produce",topic="scraped"'
    )
    assert "kafka_produce_batch_failures" in text  # declared, nothing failed
    assert not re.search(r"kafka_produce_batch_failures_total\{.*\} [1-9]", text)
