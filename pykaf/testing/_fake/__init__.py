"""pykaf's in-memory fake Kafka cluster (see :mod:`pykaf.testing`)."""

from pykaf.testing._fake.cluster import (
    FakeCluster,
    FakeClusterError,
    FakeClusterThread,
    open_fake_cluster,
)

__all__ = ["FakeCluster", "FakeClusterError", "FakeClusterThread", "open_fake_cluster"]
