"""pykaf's in-memory fake Kafka cluster (see :mod:`pykaf.testing`)."""

from pykaf.testing._fake.api import FakeClusterError
from pykaf.testing._fake.client_telemetry import TelemetryPush
from pykaf.testing._fake.cluster import FakeCluster, FakeClusterThread, open_fake_cluster
from pykaf.testing._fake.otlp import PushedMetric

__all__ = [
    "FakeCluster",
    "FakeClusterError",
    "FakeClusterThread",
    "PushedMetric",
    "TelemetryPush",
    "open_fake_cluster",
]
