"""The conformance suite's targets: a one-node fake cluster and the session's Apache Kafka."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykaf.testing import FakeClusterThread
from pykaf.testing.fixtures import kafka_features

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conformance_harness import Target, fake_target, kafka_target


@pytest.fixture(scope="session")
def conformance_fake() -> Iterator[FakeClusterThread]:
    """One fake broker made like the Kafka fixture's node: one partition per new topic, and
    ``transaction.version`` 2 (what Kafka 4.3.1 formats a cluster with)."""
    level = kafka_features().get("transaction.version", 2)  # as the Kafka fixture's
    with FakeClusterThread(
        1, default_partitions=1, transaction_version=max(1, min(level, 2))
    ) as fake:
        yield fake
        failures = list(fake.cluster.handler_errors)
    if failures:
        pytest.fail(f"the fake cluster's request handlers raised: {failures!r}")


@pytest.fixture(params=["fake", "kafka"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each target in turn."""
    if request.param == "fake":
        return fake_target(request.getfixturevalue("conformance_fake"))
    return kafka_target(request.getfixturevalue("kafka_cluster"))
