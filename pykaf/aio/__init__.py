"""pykaf for asyncio: the trio core run inside the asyncio loop, with the same API.

::

    import asyncio
    import pykaf.aio

    async def main() -> None:
        async with pykaf.aio.open_producer("localhost:9092") as producer:
            producer.send_nowait("events", b"fast")          # no await, no thread hop
            md = await producer.send("events", b"acknowledged")
        async with pykaf.aio.open_consumer("localhost:9092") as consumer:
            pc = await consumer.consume_partition("events", 0, pykaf.OLDEST)
            async for record in pc:
                ...

    asyncio.run(main())

Every object of one loop shares one trio guest run in the loop's own thread
(``_runner.py``); awaited calls cross through a small bridge (``_bridge.py``)
and plain ones are direct calls. This module only re-exports; see
``docs/asyncio.md``.
"""

from pykaf.aio.admin import Admin, open_admin
from pykaf.aio.client import Client, open_client
from pykaf.aio.consumer import Consumer, PartitionConsumer, open_consumer
from pykaf.aio.group import (
    Claim,
    ConsumerGroup,
    ConsumerGroupHandler,
    GroupSession,
    open_consumer_group,
)
from pykaf.aio.producer import Delivery, Producer, open_producer
from pykaf.aio.share import ShareConsumer, open_share_consumer

__all__ = [
    "Admin",
    "Claim",
    "Client",
    "Consumer",
    "ConsumerGroup",
    "ConsumerGroupHandler",
    "Delivery",
    "GroupSession",
    "PartitionConsumer",
    "Producer",
    "ShareConsumer",
    "open_admin",
    "open_client",
    "open_consumer",
    "open_consumer_group",
    "open_producer",
    "open_share_consumer",
]
