"""Exactly-once consume-transform-produce with pykaf (see docs/transactions.md).

Read records from ``source`` as a member of ``group_id``, write
``transform(record)`` to ``sink``, and commit the consumed offsets in the same
transaction as the output (KIP-447). Whatever fails, a consumer reading
``sink`` with ``isolation_level="read_committed"`` sees each input record's
result exactly once:

* a transaction that fails is aborted: its output is never visible, its
  offsets are never committed, and the claim seeks back to reprocess it;
* an instance that dies mid-transaction leaves it open; the next producer
  with the same ``transactional_id`` (a restart) aborts it when it starts;
* a zombie (an instance that was replaced but still runs) is fenced: its next
  transactional call raises ``ProducerFencedError`` and it stops.

Run it (a fake cluster on loopback stands in for Kafka)::

    python docs/examples/exactly_once.py

This file is imported by ``tests/transactions/test_exactly_once.py``, which
runs it under injected faults and checks the output record by record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

import pykaf
from pykaf import errors
from pykaf.codec import Record


class TransformHandler:
    """A consumer group handler turning each batch of a claim into one transaction.

    One transactional producer serves every claim of the member; a lock keeps
    one transaction open at a time (a producer has at most one).
    """

    def __init__(self, producer: Any, sink: str, transform: Callable[[Record], bytes]) -> None:
        self.producer = producer
        self.sink = sink
        self.transform = transform
        self.lock = trio.Lock()
        self.committed = 0  # transactions committed
        self.aborted = 0  # transactions aborted (and reprocessed)

    async def setup(self, session: Any) -> None:
        """Nothing to prepare: offsets come from the group's committed ones."""

    async def cleanup(self, session: Any) -> None:
        """Nothing to release: the producer outlives the generation."""

    async def consume_claim(self, session: Any, claim: Any) -> None:
        """Transform the claim's records a fetch at a time, one transaction each."""
        while True:
            batch = await claim.next_batch()
            if not batch:
                return  # the claim ended (revoked, or the group is closing)
            async with self.lock:
                if not await self._transact(session, claim, batch):
                    claim.seek(batch[0].offset)  # aborted: do it again

    async def _transact(self, session: Any, claim: Any, batch: list[Record]) -> bool:
        """One transaction for ``batch``; True once committed, False once aborted."""
        producer = self.producer
        producer.begin_transaction()
        try:
            await producer.send_batch(
                self.sink,
                [self.transform(r) for r in batch],
                keys=[r.key for r in batch],
            )
            next_offset = batch[-1].offset + 1
            await producer.send_offsets_to_transaction(
                {(claim.topic, claim.partition): next_offset}, session.group_metadata()
            )
            await self._retry(producer.commit_transaction, pykaf.TxnStatus.COMMITTING)
        except errors.PykafError:
            if producer.txn_status is pykaf.TxnStatus.FATAL_ERROR:
                raise  # fenced, or refused for good: this instance must stop
            await self._retry(producer.abort_transaction, pykaf.TxnStatus.ABORTING)
            self.aborted += 1
            return False
        self.committed += 1
        return True

    async def _retry(self, end: Callable[[], Awaitable[None]], ending: pykaf.TxnStatus) -> None:
        """Commit or abort; one that timed out is called again (that resumes it)."""
        while True:
            try:
                await end()
                return
            except errors.KafkaTimeoutError:
                if self.producer.txn_status is not ending:
                    raise


async def run_transformer(
    bootstrap: str,
    *,
    group_id: str,
    source: str,
    sink: str,
    transactional_id: str,
    transform: Callable[[Record], bytes],
    handler_ready: Callable[[TransformHandler], None] | None = None,
    consumer_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> None:
    """Consume ``source``, produce ``transform(record)`` to ``sink``, exactly once; until cancelled.

    ``options`` go to both the producer and the group (client options such as
    ``request_timeout`` or SASL settings), ``consumer_options`` to the group
    only (``max_partition_fetch_bytes``, ``session_timeout``, ...).
    ``handler_ready`` is called with the handler once it exists (its counters
    show progress).

    Raises:
        ProducerFencedError: another instance with the same ``transactional_id``
            took over (this one is a zombie and stops).
    """
    async with (
        pykaf.open_producer(bootstrap, transactional_id=transactional_id, **options) as producer,
        pykaf.open_consumer_group(
            bootstrap,
            group_id,
            [source],
            isolation_level="read_committed",  # never transform aborted input
            auto_commit=False,  # offsets are committed by the transactions only
            auto_offset_reset="earliest",  # a partition with no commit starts at its start
            **{**options, **(consumer_options or {})},
        ) as group,
    ):
        handler = TransformHandler(producer, sink, transform)
        if handler_ready is not None:
            handler_ready(handler)
        await group.consume(handler)


def upper(record: Record) -> bytes:
    """The example's transformation: the value in capitals."""
    return (record.value or b"").upper()


async def main() -> None:
    """Run the example against a fake cluster: 1,000 records through, read back once each."""
    from pykaf.testing import open_fake_cluster

    async with open_fake_cluster(3) as cluster:
        cluster.create_topic("words", 3)
        cluster.create_topic("shouted", 3)
        async with pykaf.open_producer(cluster.bootstrap) as producer:
            await producer.send_batch("words", [b"word %d" % i for i in range(1000)])
            await producer.flush()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: run_transformer(
                    cluster.bootstrap,
                    group_id="shouter",
                    source="words",
                    sink="shouted",
                    transactional_id="shouter-1",
                    transform=upper,
                )
            )
            seen: list[bytes] = []
            async with pykaf.open_consumer(
                cluster.bootstrap, isolation_level="read_committed"
            ) as consumer:
                parts = [
                    await consumer.consume_partition("shouted", p, pykaf.OLDEST) for p in range(3)
                ]
                while len(seen) < 1000:
                    for pc in parts:
                        with trio.move_on_after(0.1):
                            seen.extend(r.value for r in await pc.next_batch() if r.value)
            nursery.cancel_scope.cancel()
        expected = sorted(b"WORD %d" % i for i in range(1000))
        verdict = "exactly once" if sorted(seen) == expected else "NOT exactly once"
        print(f"{len(seen)} records transformed, {verdict}")


if __name__ == "__main__":
    trio.run(main)
