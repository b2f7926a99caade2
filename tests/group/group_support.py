"""What the consumer-protocol (KIP-848) and migration tests share: options, handlers, waits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import trio

import pykaf

FAST = {
    "group_protocol": "consumer",
    "rebalance_timeout": 10.0,
    "auto_commit_interval": 0.2,
    "fetch_max_wait": 0.05,
    "retry_backoff": 0.05,
}


class Overlap:
    """Live claims per partition across members: a second live claim is an overlap."""

    def __init__(self) -> None:
        self.live: dict[tuple[str, int], str] = {}
        self.overlaps: list[tuple[tuple[str, int], str, str]] = []

    def start(self, tp: tuple[str, int], who: str) -> None:
        if tp in self.live:
            self.overlaps.append((tp, self.live[tp], who))
        self.live[tp] = who

    def end(self, tp: tuple[str, int], who: str) -> None:
        if self.live.get(tp) == who:
            del self.live[tp]


class Recorder:
    """A handler recording what each claim saw, marking every record."""

    def __init__(self, name: str = "", overlap: Overlap | None = None) -> None:
        self.name = name
        self.overlap = overlap
        self.seen: list[tuple[str, int, int]] = []
        self.setups = 0
        self.cleanups = 0
        self.claims: dict[tuple[str, int], list[pykaf.Claim]] = defaultdict(list)

    async def setup(self, session: pykaf.GroupSession) -> None:
        self.setups += 1

    async def consume_claim(self, session: pykaf.GroupSession, claim: pykaf.Claim) -> None:
        tp = (claim.topic, claim.partition)
        self.claims[tp].append(claim)
        if self.overlap is not None:
            self.overlap.start(tp, self.name)
        try:
            async for record in claim:
                self.seen.append((record.topic, record.partition, record.offset))
                session.mark_message(record)
        finally:
            if self.overlap is not None:
                self.overlap.end(tp, self.name)

    async def cleanup(self, session: pykaf.GroupSession) -> None:
        self.cleanups += 1


async def create(broker: Any, topic: str, partitions: int) -> None:
    """Create a topic (the fake cluster's control blocks: call it from a thread)."""
    await trio.to_thread.run_sync(broker.create, topic, partitions)


async def produce(bootstrap: str, topic: str, partitions: int, per: int, start: int = 0) -> None:
    async with pykaf.open_producer(bootstrap) as producer:
        for p in range(partitions):
            await producer.send_batch(
                topic, [b"%d-%d" % (p, start + i) for i in range(per)], partition=p
            )


async def wait_for(cond: Callable[[], bool], timeout: float = 40.0, what: Any = "") -> None:
    with trio.move_on_after(timeout):
        while not cond():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"not within {timeout} s: {what() if callable(what) else what or cond}")


def owned(*groups: pykaf.ConsumerGroup, topic: str) -> list[int]:
    return sorted(p for g in groups for p in g.assignment().get(topic, []))


def every(topic: str, partitions: int, per: int) -> set[tuple[str, int, int]]:
    return {(topic, p, o) for p in range(partitions) for o in range(per)}
