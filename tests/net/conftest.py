"""The network tests' brokers."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["kafka", "fake"])
def kafka_or_fake_bootstrap(request: pytest.FixtureRequest) -> str:
    """The bootstrap of the session's Apache Kafka, then of a fresh fake cluster."""
    fixture = "kafka_cluster" if request.param == "kafka" else "fake_cluster"
    return str(request.getfixturevalue(fixture).bootstrap)
