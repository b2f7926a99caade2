"""The compatibility suite: the core of pykaf on one Apache Kafka release.

Every test here runs on the session's one-node ``kafka_cluster`` (SASL, TLS
and ACLs on), whose release is ``$PYKAF_KAFKA_VERSION`` or pykaf's default:
``make test`` runs the suite on the default release with everything else,
``make test-brokers`` once per release of ``KAFKA_RELEASES``.

Each test is marked ``compat("KIP-n", "feature")``: the row of the
compatibility table (``docs/compatibility.md``) it stands for. A test of a
feature the release lacks asserts the typed error pykaf raises and calls
:func:`compat_support.lacks`, so its row reads "refused" rather than "passed".
``PYKAF_BROKERS_RESULTS=path`` merges the run's outcome per row into that
JSON file under the release's version (``tools/gen_compat_docs.py`` draws the
table from it).

Every request a test sends is recorded (``Connection.send_request``) and
checked after the test against the broker's ApiVersions range for its API.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_support import LACKS

from pykaf import protocol as P
from pykaf.protocol import connection as proto_connection
from pykaf.testing import KafkaCluster
from pykaf.testing._kafka_dist import default_kafka_version

#: Outcomes per (KIP, feature) row, for PYKAF_BROKERS_RESULTS.
_rows: dict[tuple[str, str], list[str]] = {}
#: The first row's release as the cluster reported it (the jar's version).
_release: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "brokers: the compatibility suite (tests/brokers)")
    config.addinivalue_line(
        "markers", "compat(kip, feature): the compatibility table's row a test stands for"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if path.parent == here and path.name.startswith("test_compat_"):
            item.add_marker(pytest.mark.brokers)
            item.add_marker(pytest.mark.broker)


@pytest.fixture
def kafka(kafka_cluster: KafkaCluster) -> KafkaCluster:
    """The session's one-node Kafka; records its release for the results file."""
    if not _release:
        _release.append(kafka_cluster.version)
    return kafka_cluster


class _Recorder:
    """(API key, version sent, the broker's range) of every request sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, tuple[int, int] | None]] = []


@pytest.fixture(autouse=True)
def negotiation(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recorder]:
    """Check, after the test, that every request it sent is within the broker's range.

    ApiVersions itself is left out: it is sent before the range is known
    (a broker answers a version it lacks with its range, KIP-511).
    """
    recorder = _Recorder()
    original = proto_connection.Connection.send_request

    def send_request(
        self: proto_connection.Connection, request: Any, version: int | None = None, **kw: Any
    ) -> int:
        key = request.API_KEY
        if key != P.ApiVersionsRequest.API_KEY and self.versions is not None:
            used = version if version is not None else self.versions.chosen.get(key, -1)
            recorder.sent.append((key, used, self.versions.ranges.get(key)))
        return original(self, request, version, **kw)

    monkeypatch.setattr(proto_connection.Connection, "send_request", send_request)
    yield recorder
    outside = sorted(
        {
            (P.API_NAMES.get(key, str(key)), used, advertised)
            for key, used, advertised in recorder.sent
            if advertised is None or not advertised[0] <= used <= advertised[1]
        },
        key=str,
    )
    assert not outside, f"requests outside the broker's ApiVersions ranges: {outside}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each test's outcome under its compatibility row."""
    row = dict(report.user_properties).get("compat_row")
    if row is None:
        return
    kip, feature = json.loads(str(row))
    outcome = _rows.setdefault((kip, feature), [])
    if report.when == "call" or report.outcome != "passed":
        lacked = dict(report.user_properties).get(LACKS)
        if report.failed:
            outcome.append("failed")
        elif report.skipped:
            outcome.append("skipped")
        elif lacked is not None:
            outcome.append(f"refused: {lacked}")
        else:
            outcome.append("passed")


@pytest.fixture(autouse=True)
def _compat_row(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("compat")
    if marker is not None:
        kip, feature = marker.args
        request.node.user_properties.append(("compat_row", json.dumps([kip, feature])))


def _row_result(outcomes: list[str]) -> str:
    if "failed" in outcomes:
        return "failed"
    refused = sorted({o for o in outcomes if o.startswith("refused")})
    if refused:
        return refused[0]
    if outcomes and all(o == "skipped" for o in outcomes):
        return "skipped"
    return "passed"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Merge the run's rows into ``$PYKAF_BROKERS_RESULTS`` (a serial run only)."""
    path = os.environ.get("PYKAF_BROKERS_RESULTS")
    if not path or not _rows or hasattr(session.config, "workerinput"):
        return
    version = _release[0] if _release else default_kafka_version()
    target = Path(path)
    data = json.loads(target.read_text()) if target.exists() else {"releases": {}}
    data["releases"][version] = {
        "rows": {
            f"{kip} | {feature}": _row_result(outcomes)
            for (kip, feature), outcomes in sorted(_rows.items())
        }
    }
    data["releases"] = dict(
        sorted(data["releases"].items(), key=lambda kv: tuple(int(p) for p in kv[0].split(".")))
    )
    target.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
