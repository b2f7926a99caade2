"""Helpers of the compatibility suite: unique names, topics, reading a partition, rows."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

import pykaf
from pykaf.testing import KafkaCluster


def unique(prefix: str) -> str:
    """A topic, group or id name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def new_topic(kafka: KafkaCluster, prefix: str, partitions: int = 1, **configs: str) -> str:
    """Create a topic of this test's own; return once every partition's leader serves it."""
    name = unique(prefix)
    await trio.to_thread.run_sync(lambda: kafka.create_topic(name, partitions, configs=configs))
    return name


async def read_partition(
    bootstrap: str, topic: str, partition: int, count: int, **config: Any
) -> list[Any]:
    """The first ``count`` records of a partition (a partition consumer from the oldest)."""
    out: list[Any] = []
    async with pykaf.open_consumer(bootstrap, **config) as consumer:
        pc = await consumer.consume_partition(topic, partition, pykaf.OLDEST)
        with trio.fail_after(30):
            while len(out) < count:
                out.extend(await pc.next_batch())
    return out


#: The user property a test sets (:func:`lacks`) when the release lacks its feature.
LACKS = "compat_lacks"


def lacks(request: pytest.FixtureRequest, what: str) -> None:
    """Record that this release lacks the test's feature (the test checked how pykaf refuses)."""
    request.node.user_properties.append((LACKS, what))
