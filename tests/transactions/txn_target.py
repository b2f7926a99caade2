"""TxnTarget: the broker a transaction test runs on (see conftest.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import trio

import pykaf
from pykaf._group.offsets import OffsetManager
from pykaf.testing import FakeCluster, KafkaCluster


@dataclass
class TxnTarget:
    """A broker for a transaction test: ``name`` is "kafka" or "fake"."""

    name: str
    bootstrap: str
    fake: FakeCluster | None = None
    kafka: KafkaCluster | None = None

    @staticmethod
    def unique(prefix: str) -> str:
        """A topic, group or transactional id no other test uses (Kafka keeps them all)."""
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def topic(self, prefix: str, partitions: int = 1) -> str:
        """A new topic, every partition's leader serving it."""
        name = self.unique(prefix)
        if self.fake is not None:
            self.fake.create_topic(name, partitions)
        else:
            kafka = self.kafka
            assert kafka is not None
            replicas = min(3, len(kafka.node_ids))
            await trio.to_thread.run_sync(lambda: kafka.create_topic(name, partitions, replicas))
        return name

    async def end(self, topic: str, partition: int, *, committed: bool) -> int:
        """The last stable offset (``committed``) or the high watermark (ListOffsets)."""
        async with pykaf.open_client(self.bootstrap) as client:
            return await client.get_offset(
                topic, partition, pykaf.NEWEST, isolation_level=int(committed)
            )

    async def committed(self, group: str, topic: str, partition: int) -> int:
        """The group's committed offset of the partition (-1: none), waiting out pending ones."""
        async with pykaf.open_client(self.bootstrap) as client:
            offsets = await OffsetManager(client, group, None).fetch([(topic, partition)])
        return offsets[(topic, partition)]

    async def settled_end(self, topic: str, partition: int) -> int:
        """The high watermark once no transaction is open in the partition.

        Kafka writes a transaction's markers after answering EndTxn (v1
        transactions): until then the last stable offset stays below it.
        """
        with trio.fail_after(20):
            while True:
                hw = await self.end(topic, partition, committed=False)
                if await self.end(topic, partition, committed=True) == hw:
                    return hw
                await trio.sleep(0.01)

    async def read(
        self, topic: str, partitions: int, isolation_level: str = "read_committed"
    ) -> list[Any]:
        """Every record a pykaf consumer of this isolation level reads, to the settled end."""
        out: list[Any] = []
        async with pykaf.open_consumer(self.bootstrap, isolation_level=isolation_level) as c:
            for p in range(partitions):
                limit = await self.settled_end(topic, p)
                pc = await c.consume_partition(topic, p, pykaf.OLDEST)
                with trio.fail_after(20):
                    while pc.position < limit:
                        out.extend(await pc.next_batch())
        return out
