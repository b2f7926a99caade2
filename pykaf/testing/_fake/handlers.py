"""Every API the fake cluster answers, gathered from the handler modules."""

from __future__ import annotations

from pykaf.testing._fake import (
    acls,
    configs,
    consumer_groups,
    data,
    groups,
    meta,
    share_fetch,
    share_groups,
    telemetry,
    txn,
)
from pykaf.testing._fake.api import Api


def all_apis() -> list[Api]:
    """The APIs of every handler module (a later module's entry wins for one key)."""
    return [
        *meta.APIS,
        *data.APIS,
        *txn.APIS,
        *groups.APIS,
        *consumer_groups.APIS,
        *share_groups.APIS,
        *share_fetch.APIS,
        *configs.APIS,
        *acls.APIS,
        *telemetry.APIS,
    ]
