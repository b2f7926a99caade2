"""The admin tests' brokers: Apache Kafka, Tansu and a fresh fake cluster."""

from __future__ import annotations

from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["kafka", "tansu", "fake"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Apache Kafka and Tansu, then a fresh fake cluster of three brokers."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["kafka", "fake"])
def kafka_or_fake(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka, then a fresh fake cluster: for the APIs Tansu lacks."""
    return bc.broker_from(request, request.param)
