"""Share groups (KIP-932) on one Kafka release: consumed as a queue where the release
has them on (4.2+, or 4.1 formatted with share.version 1), refused at open elsewhere."""

from __future__ import annotations

import pytest
import trio
from compat_support import lacks, new_topic, unique

import pykaf
from pykaf.protocol.versions import BrokerFeatureError
from pykaf.testing import KafkaCluster


@pytest.mark.compat("KIP-932", "Share groups")
async def test_share_group_or_refused_at_open(
    kafka: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic, group_id = await new_topic(kafka, "share"), unique("workers")
    async with pykaf.open_producer(kafka.bootstrap) as producer:
        await producer.send_batch(topic, [b"a", b"b", b"c"], partition=0)
    enabled = kafka.release.line >= (4, 2) or kafka.features.get("share.version", 0) >= 1
    if not enabled:
        with pytest.raises(BrokerFeatureError) as info:
            async with pykaf.open_share_consumer(kafka.bootstrap, group_id, [topic]):
                pytest.fail("a share consumer opened on a broker without share groups")
        line = kafka.release.line
        assert f"Kafka {line[0]}.{line[1]}" in str(info.value)
        lacks(request, "BrokerFeatureError at open (needs 4.1 with share.version 1, 4.2 on)")
        return
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        await admin.alter_group_configs({group_id: {"share.auto.offset.reset": "earliest"}})
    async with pykaf.open_share_consumer(
        kafka.bootstrap, group_id, [topic], fetch_max_wait=0.2
    ) as consumer:
        got: list[bytes | None] = []
        with trio.fail_after(40):
            while len(got) < 3:
                batch = await consumer.next_batch()
                got += [r.value for r in batch]
                for record in batch:
                    consumer.acknowledge(record, pykaf.ACCEPT)
        await consumer.commit()
    assert sorted(v or b"" for v in got) == [b"a", b"b", b"c"]
