"""Share groups (KIP-932): queue-style consumption with per-record acknowledgement."""

from pykaf._share.config import ShareConsumerConfig
from pykaf._share.consumer import ShareConsumer
from pykaf._share.opener import open_share_consumer
from pykaf._share.records import (
    ACCEPT,
    REJECT,
    RELEASE,
    RENEW,
    AcknowledgeType,
    ShareRecord,
)

__all__ = [
    "ACCEPT",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AcknowledgeType",
    "ShareConsumer",
    "ShareConsumerConfig",
    "ShareRecord",
    "open_share_consumer",
]
