"""A fake broker's KIP-227 fetch-session cache, with Kafka's rules; state only, no I/O.

A Fetch (v7+) with epoch 0 is a full fetch that opens a session (closing the
one it names, if any); epoch -1 is a full fetch without one (closing the one
it names). Any other epoch is incremental: the named session must exist
(else FETCH_SESSION_ID_NOT_FOUND) at that epoch (else
INVALID_FETCH_SESSION_EPOCH); the request's partitions are added to it or
update its fetch state, its forgotten partitions leave it, and the broker
reads every partition of the session. The answer to an incremental fetch
carries only the partitions with records, a high watermark or log start that
moved since the session last told the client, or an error; those move to the
end of the session's order, as in Kafka. A session that loses its last
partition is dropped and the answer is sessionless. The cache holds at most
``slots`` sessions (Kafka's ``max.incremental.fetch.session.cache.slots``);
when it is full a full fetch gets session id 0 and no session, unless a
session idle for longer than the eviction time can make room.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pykaf import errors

INITIAL_EPOCH, FINAL_EPOCH, NO_SESSION = 0, -1, 0
#: Fetch v7 brought sessions
MIN_SESSION_VERSION = 7
#: Kafka's default max.incremental.fetch.session.cache.slots
DEFAULT_SLOTS = 1000
#: Kafka's min.incremental.fetch.session.eviction.ms
EVICTION_SECONDS = 120.0

Key = tuple[str, int]


@dataclass
class CachedPartition:
    """One partition of a session: the fetch state the client gave, and what it was told."""

    request: Any  # the FetchRequest.FetchPartition last sent for it
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    """One session: its id, the epoch the next request must carry, its partitions in order."""

    session_id: int
    epoch: int
    partitions: dict[Key, CachedPartition] = field(default_factory=dict)
    last_used: float = 0.0


@dataclass
class SessionContext:
    """How one Fetch request is served.

    Attributes:
        error: a top-level error code (the answer is empty and sessionless).
        reads: the partitions to read, in order: (topic, FetchPartition).
        session: the session an incremental fetch continues, or None.
        create: a full fetch that should open a session.
    """

    error: int = 0
    reads: list[tuple[str, Any]] = field(default_factory=list)
    session: FetchSession | None = None
    create: bool = False


class FetchSessionCache:
    """One broker's fetch sessions."""

    def __init__(self, clock: Callable[[], float], slots: int = DEFAULT_SLOTS) -> None:
        self.clock = clock
        self.slots = slots
        self.sessions: dict[int, FetchSession] = {}

    def context(self, req: Any, version: int) -> SessionContext:
        """Apply ``req``'s session fields to the cache; how to serve it."""
        full = [(ft.topic, fp) for ft in req.topics for fp in ft.partitions]
        if version < MIN_SESSION_VERSION:
            return SessionContext(reads=full)
        session_id, epoch = req.session_id, req.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self.sessions.pop(session_id, None)
            return SessionContext(reads=full, create=epoch == INITIAL_EPOCH)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionContext(error=errors.FetchSessionIdNotFoundError.code)
        if session.epoch != epoch:
            return SessionContext(error=errors.InvalidFetchSessionEpochError.code)
        for topic, fp in full:
            cached = session.partitions.get((topic, fp.partition))
            if cached is None:
                session.partitions[(topic, fp.partition)] = CachedPartition(fp)
            else:
                cached.request = fp
        for ft in req.forgotten_topics_data:
            for index in ft.partitions:
                session.partitions.pop((ft.topic, index), None)
        if not session.partitions:
            del self.sessions[session_id]
            return SessionContext(reads=full)
        session.epoch = next_epoch(session.epoch)
        session.last_used = self.clock()
        reads = [(topic, cached.request) for (topic, _), cached in session.partitions.items()]
        return SessionContext(reads=reads, session=session)

    def create(self, reads: list[tuple[str, Any]], answered: list[Any]) -> int:
        """Open a session for a full fetch of ``reads`` answered with ``answered``; its id or 0.

        ``answered`` holds the PartitionData answered for each of ``reads``, in
        the same order.
        """
        if not self._room():  # Kafka opens one for a fetch of no partitions too
            return NO_SESSION
        session_id = NO_SESSION
        while session_id == NO_SESSION or session_id in self.sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = FetchSession(session_id, next_epoch(INITIAL_EPOCH), last_used=self.clock())
        for (topic, fp), part in zip(reads, answered, strict=True):
            session.partitions[(topic, fp.partition)] = CachedPartition(
                fp, part.high_watermark, part.log_start_offset
            )
        self.sessions[session_id] = session
        return session_id

    def _room(self) -> bool:
        if len(self.sessions) < self.slots:
            return True
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used)
        if self.clock() - oldest.last_used < EVICTION_SECONDS:
            return False
        del self.sessions[oldest.session_id]
        return True

    def evict(self) -> int:
        """Drop every session (as a broker's cache evicting them); how many there were."""
        n = len(self.sessions)
        self.sessions.clear()
        return n


def must_answer(cached: CachedPartition, part: Any) -> bool:
    """Whether an incremental answer carries ``part``; updates what the client was told.

    Records, a high watermark or log start that moved, or an error (after
    which the cached high watermark is forgotten, so the partition is sent
    again once the error is gone).
    """
    respond = bool(part.records)
    if part.high_watermark != cached.high_watermark:
        respond = True
        cached.high_watermark = part.high_watermark
    if part.log_start_offset != cached.log_start_offset:
        respond = True
        cached.log_start_offset = part.log_start_offset
    if part.error_code:
        cached.high_watermark = -1
        respond = True
    return respond


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (1 after the largest int32)."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1
