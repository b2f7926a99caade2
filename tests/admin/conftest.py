"""The admin tests' broker: Tansu, then a fresh fake cluster."""

from __future__ import annotations

from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["tansu", "fake"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Tansu, then a fresh fake cluster of three brokers."""
    return bc.broker_from(request, request.param)
