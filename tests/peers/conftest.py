"""Fixtures of the peer-client tests (helpers in ``peer_support.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from peer_support import JavaTools, build_go_peer

from pykaf.testing import KafkaCluster


@pytest.fixture(scope="session")
def java_tools(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> JavaTools:
    """Kafka's Java tools, run against the session's ``kafka_cluster``."""
    return JavaTools(kafka_cluster, tmp_path_factory.mktemp("java-tools"))


@pytest.fixture(scope="session")
def go_peer() -> Path:
    """The Go peer program (``peer <sarama|franz> <command> ...``), built once per session."""
    return build_go_peer()
