"""Blocking clients for scripts and threads: the async ones driven through one portal.

::

    import pykaf.sync

    with pykaf.sync.Producer("localhost:9092", linger=0.01) as producer:
        md = producer.send("orders", b"one")          # waits for the acknowledgement
        futures = [producer.send_async("orders", b"%d" % i) for i in range(1000)]
        producer.send_many("orders", [b"a", b"b", b"c"])
        producer.flush()

    with pykaf.sync.Consumer("localhost:9092") as consumer:
        consumer.assign([("orders", 0, pykaf.OLDEST)])
        record = consumer.poll(timeout=1.0)           # one record, or None
        records = consumer.consume(100, timeout=1.0)  # what is ready, up to 100

    with pykaf.sync.Admin("localhost:9092") as admin:
        admin.create_topic("orders", partitions=6)
        lag = admin.group_lag("billing")                # per partition

    with pykaf.sync.ConsumerGroup("localhost:9092", "billing", ["orders"]) as group:
        for record in group:                          # committed once the next is asked for
            handle(record)

    with pykaf.sync.ShareConsumer("localhost:9092", "workers", ["jobs"]) as queue:
        for record in queue:                          # accepted when the next is asked for
            handle(record)

Every object here drives its async twin inside the process's shared trio loop
(:func:`pykaf._sync.portal.get_portal`), so any number of plain threads may use one
object at once. Blocking calls take ``timeout`` (seconds; raising
:class:`~pykaf.errors.KafkaTimeoutError`) and give way to Ctrl-C.
"""

from __future__ import annotations

from pykaf._sync.admin import Admin
from pykaf._sync.consumer import Consumer, ConsumerGroup
from pykaf._sync.producer import Producer
from pykaf._sync.share import ShareConsumer

__all__ = ["Admin", "Consumer", "ConsumerGroup", "Producer", "ShareConsumer"]
