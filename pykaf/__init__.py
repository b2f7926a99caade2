"""pykaf: a high-throughput Kafka client for Python on trio, with a Cython codec.

This module only re-exports the public names; the code lives in private modules.
"""

import logging

from pykaf import codec, errors
from pykaf._admin.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from pykaf._admin.admin import Admin, open_admin
from pykaf._admin.results import (
    BrokerDescription,
    ClusterDescription,
    ConfigChange,
    ConfigEntry,
    ConfigValue,
    GroupDescription,
    GroupListing,
    MemberDescription,
    NewTopic,
    OffsetAndMetadata,
    PartitionDescription,
    PartitionLag,
    TopicDescription,
)
from pykaf._admin.share_groups import ShareGroupOffset
from pykaf._cluster.client import (
    NEWEST,
    OLDEST,
    Client,
    ClientStatistics,
    open_client,
)
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._cluster.metadata import BrokerInfo, PartitionInfo, TopicInfo
from pykaf._column_batch import ColumnBatch
from pykaf._config import ClientConfig
from pykaf._consumer.config import ConsumerConfig
from pykaf._consumer.consumer import (
    Consumer,
    ConsumerStatistics,
    PartitionStatistics,
    open_consumer,
)
from pykaf._consumer.partition import PartitionConsumer
from pykaf._group.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from pykaf._group.config import GroupConfig
from pykaf._group.group import (
    ConsumerGroup,
    GroupPartitionStatistics,
    GroupStatistics,
)
from pykaf._group.opener import open_consumer_group
from pykaf._group.session import Claim, ConsumerGroupHandler, GroupSession
from pykaf._net.metrics import BatchEvent, RequestEvent, RequestStatistics
from pykaf._producer.config import ProducerConfig
from pykaf._producer.partitioner import Partitioner
from pykaf._producer.producer import Producer, open_producer
from pykaf._producer.records import (
    BatchDelivery,
    BrokerStatistics,
    ProducerError,
    ProducerMessage,
    ProducerStatistics,
    RecordMetadata,
)
from pykaf._share import (
    ACCEPT,
    REJECT,
    RELEASE,
    RENEW,
    AcknowledgeType,
    ShareConsumer,
    ShareConsumerConfig,
    ShareRecord,
    open_share_consumer,
)
from pykaf._txn.manager import TxnStatus
from pykaf._version import __version__
from pykaf.errors import (
    AdminError,
    CommitError,
    ConsumerError,
    PartitionerError,
    PurgedError,
    TransactionAbortedError,
    TransactionStateError,
)

# A library's loggers print nothing unless the application configures logging
# (the logging HOWTO's rule): without this, Python's last-resort handler would
# write pykaf's warnings to stderr.
logging.getLogger("pykaf").addHandler(logging.NullHandler())

__all__ = [
    "ACCEPT",
    "NEWEST",
    "OLDEST",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AcknowledgeType",
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "AclPermission",
    "Admin",
    "AdminError",
    "Assignor",
    "BatchDelivery",
    "BatchEvent",
    "BrokerDescription",
    "BrokerInfo",
    "BrokerStatistics",
    "Claim",
    "Client",
    "ClientConfig",
    "ClientStatistics",
    "ClusterDescription",
    "ColumnBatch",
    "CommitError",
    "ConfigChange",
    "ConfigEntry",
    "ConfigValue",
    "Consumer",
    "ConsumerConfig",
    "ConsumerError",
    "ConsumerGroup",
    "ConsumerGroupHandler",
    "ConsumerStatistics",
    "CooperativeStickyAssignor",
    "GroupConfig",
    "GroupDescription",
    "GroupListing",
    "GroupMetadata",
    "GroupPartitionStatistics",
    "GroupSession",
    "GroupStatistics",
    "MemberDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionConsumer",
    "PartitionDescription",
    "PartitionInfo",
    "PartitionLag",
    "PartitionStatistics",
    "Partitioner",
    "PartitionerError",
    "PatternType",
    "Producer",
    "ProducerConfig",
    "ProducerError",
    "ProducerMessage",
    "ProducerStatistics",
    "PurgedError",
    "RangeAssignor",
    "RecordMetadata",
    "RequestEvent",
    "RequestStatistics",
    "ResourceType",
    "RoundRobinAssignor",
    "ShareConsumer",
    "ShareConsumerConfig",
    "ShareGroupOffset",
    "ShareRecord",
    "StickyAssignor",
    "TopicDescription",
    "TopicInfo",
    "TransactionAbortedError",
    "TransactionStateError",
    "TxnStatus",
    "__version__",
    "codec",
    "errors",
    "open_admin",
    "open_client",
    "open_consumer",
    "open_consumer_group",
    "open_producer",
    "open_share_consumer",
]
