"""The brokers the share group tests run on: Apache Kafka 4.3, and pykaf's fake cluster."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(params=["kafka", "fake"])
def share_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Apache Kafka, then a fresh fake cluster (3 brokers), as a ``Broker``."""
    broker_clients = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
    return broker_clients.broker_from(request, request.param)
