"""pykaf's in-memory fake Kafka cluster (see :mod:`pykaf.testing`)."""

from pykaf.testing._fake.api import FakeClusterError
from pykaf.testing._fake.cluster import FakeCluster, FakeClusterThread, open_fake_cluster

__all__ = ["FakeCluster", "FakeClusterError", "FakeClusterThread", "open_fake_cluster"]
