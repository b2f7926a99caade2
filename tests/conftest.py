"""Shared fixtures: both codec implementations, and the brokers, selected per test."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Broker fixtures (tansu, mock_cluster, tls_tansu, ...) as users get them.
pytest_plugins = ["pykaf.testing.fixtures"]

# confluent-kafka helpers (broker_clients) live beside the pykaf.testing tests;
# test modules import them with pytest.importorskip("broker_clients").
sys.path.insert(0, str(Path(__file__).resolve().parent / "testing"))

NO_EXTENSIONS = os.environ.get("PYKAF_NO_EXTENSIONS") == "1"


def load_codec(kind: str) -> ModuleType:
    """Import the compiled ("cython") or pure-Python ("python") codec.

    The compiled one must load unless PYKAF_NO_EXTENSIONS=1 says it was not
    built: a missing extension is a failure, never a silent fallback.
    """
    if kind == "python":
        return importlib.import_module("pykaf._codec_py")
    try:
        return importlib.import_module("pykaf._codec")
    except ImportError as exc:
        if NO_EXTENSIONS:
            pytest.skip("PYKAF_NO_EXTENSIONS=1: compiled codec not built")
        pytest.fail(f"compiled codec pykaf._codec did not load: {exc}")


@pytest.fixture(params=["cython", "python"])
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """The codec implementation under test; every codec test runs on both."""
    return load_codec(request.param)


@pytest.fixture
def both_codecs() -> tuple[ModuleType, ModuleType]:
    """(compiled, pure-Python): for tests that compare their outputs."""
    return load_codec("cython"), load_codec("python")


@pytest.fixture(params=["kafka", "tansu", "mock"])
def broker(request: pytest.FixtureRequest) -> Any:
    """Apache Kafka and Tansu (the session's) and a librdkafka mock cluster (3 brokers), in turn."""
    return _broker_clients().broker_from(request, request.param)


@pytest.fixture(params=["kafka", "tansu"])
def real_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Apache Kafka (one node) and the session's Tansu, in turn."""
    return _broker_clients().broker_from(request, request.param)


@pytest.fixture
def tansu_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Tansu as a ``broker_clients.Broker``."""
    return _broker_clients().broker_from(request, "tansu")


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Apache Kafka (one node) as a ``broker_clients.Broker``."""
    return _broker_clients().broker_from(request, "kafka")


@pytest.fixture
def kafka3_broker(request: pytest.FixtureRequest) -> Any:
    """The session's three-node Apache Kafka as a ``broker_clients.Broker``."""
    return _broker_clients().broker_from(request, "kafka3")


def _broker_clients() -> ModuleType:
    # Importing them skips the test when confluent-kafka is missing.
    return importlib.import_module("broker_clients")
