"""The compat tests' brokers and the two modules they run the same code on."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["fake", "mock", "kafka"])
def compat_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, a librdkafka mock cluster, then the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["fake", "kafka"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, then Apache Kafka (the librdkafka mock has no controller)."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["confluent_kafka", "pykaf.compat.confluent_kafka"])
def ck(request: pytest.FixtureRequest) -> ModuleType:
    """The real confluent-kafka package, then pykaf's drop-in: the same test runs on both."""
    return importlib.import_module(request.param)


@pytest.fixture(params=["confluent_kafka.admin", "pykaf.compat.confluent_kafka.admin"])
def ck_admin(request: pytest.FixtureRequest) -> ModuleType:
    """confluent-kafka's admin module, then pykaf's."""
    return importlib.import_module(request.param)
