"""pykaf: a high-throughput Kafka client for Python on trio, with a Cython codec.

This module only re-exports the public names; the code lives in private modules.
"""

from pykaf import codec, errors
from pykaf._cluster.client import (
    NEWEST,
    OLDEST,
    Client,
    ClientStatistics,
    open_client,
)
from pykaf._cluster.metadata import BrokerInfo, PartitionInfo, TopicInfo
from pykaf._config import ClientConfig
from pykaf._version import __version__

__all__ = [
    "NEWEST",
    "OLDEST",
    "BrokerInfo",
    "Client",
    "ClientConfig",
    "ClientStatistics",
    "PartitionInfo",
    "TopicInfo",
    "__version__",
    "codec",
    "errors",
    "open_client",
]
