"""Log truncation detection (KIP-320) on one Kafka release.

One node cannot lose records to an unclean election (the three-node test is
``tests/consumer/test_truncation_kafka.py``), but the check is the same: a
consumer resuming at a position its leader epoch says the log should hold
asks the leader (OffsetForLeaderEpoch) where that epoch ends; a log that ends
below the position was truncated, and the consumer says so before fetching.
"""

from __future__ import annotations

import pytest
import trio
from compat_support import new_topic

import pykaf
from pykaf import errors
from pykaf.testing import KafkaCluster


@pytest.mark.compat("KIP-320", "Log truncation detection")
async def test_a_resume_past_the_epochs_end_is_a_log_truncation(kafka: KafkaCluster) -> None:
    topic = await new_topic(kafka, "trunc")
    async with pykaf.open_producer(kafka.bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % i for i in range(5)], partition=0)
    async with pykaf.open_consumer(kafka.bootstrap) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        with trio.fail_after(30):
            while pc.position < 5:
                await pc.next_batch()
        epoch = pc.position_epoch
    assert epoch >= 0
    # the position a consumer saved before its leader lost offsets 5-9
    async with pykaf.open_consumer(kafka.bootstrap, auto_offset_reset="none") as consumer:
        pc = await consumer.consume_partition(topic, 0, 10, leader_epoch=epoch)
        with trio.fail_after(30):
            error = (await pc.errors().receive()).error
        assert isinstance(error, errors.LogTruncationError)
        assert (error.fetch_offset, error.divergent_offset) == (10, 5)
        assert pc.records_fetched == 0
    # a position the epoch does hold reads on
    async with pykaf.open_consumer(kafka.bootstrap, auto_offset_reset="none") as consumer:
        pc = await consumer.consume_partition(topic, 0, 3, leader_epoch=epoch)
        with trio.fail_after(30):
            assert (await pc.__anext__()).value == b"3"
