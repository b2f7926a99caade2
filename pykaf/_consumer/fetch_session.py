"""A broker fetcher's KIP-227 fetch session: what the broker was last told, and what changed.

A session lets a Fetch carry only what changed since the last one. The first
request is a *full* fetch (session id 0, epoch 0) naming every partition; the
broker answers with a session id and remembers each partition's fetch state.
Each later, *incremental* request (that id, the next epoch) names only
partitions added or whose fetch state moved (the fetch offset after records
came back, a grown ``partition_max_bytes``, a new leader epoch) and lists in
``forgotten_topics_data`` the ones no longer wanted; the broker fetches every
partition of the session from the state it holds, and answers only for those
with records, a moved high watermark or log start, or an error. A partition
left out of an incremental answer has nothing new.

The session here is the set of partitions the fetcher would have put in a
full fetch: one not fetchable this round (paused, its buffer full, detached)
is forgotten and added again when it is fetchable. Were it kept, the broker
would go on reading it from the offset it holds and send the same records in
every answer, for the client to drop.

Sessionless (``fetch_sessions=False``, or a Fetch older than v7): session id
0 and epoch -1, every request full, and the broker keeps no session. A broker
that answers a full fetch with session id 0 (its cache is full or disabled,
or it has no sessions) is asked in full again the next time, as Kafka's
client does.

This module is plain state, no I/O: :meth:`FetchSession.plan` says what the
next request carries; :meth:`FetchSession.answered` and
:meth:`FetchSession.failed` take in how it went.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykaf import errors

#: A full fetch that opens a session (with session id 0) or replaces one.
INITIAL_EPOCH = 0
#: A full fetch without a session; with a session id, it closes that session.
FINAL_EPOCH = -1
#: "no session", in requests and answers
NO_SESSION = 0
#: Fetch v7 brought the session fields (KIP-227).
MIN_SESSION_VERSION = 7
_MAX_EPOCH = 2**31 - 1

#: Top-level errors about the session itself (any top-level error ends it).
SESSION_ERRORS = frozenset(
    {
        errors.FetchSessionIdNotFoundError.code,
        errors.InvalidFetchSessionEpochError.code,
        errors.FetchSessionTopicIdError.code,
    }
)

#: A partition, as the session keys it.
PartitionKey = tuple[str, int]
#: What the broker was told of a partition: fetch offset, log start offset,
#: partition max bytes, current leader epoch.
FetchState = tuple[int, int, int, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (after the largest int32 comes 1, as in Kafka)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """What one Fetch request carries.

    Attributes:
        session_id: the session's id, or 0.
        epoch: the session epoch to send: 0 opens a session, -1 asks for none.
        send: the partitions to name in the request, in order.
        forgotten: partitions to drop from the session (incremental only).
        wanted: every partition this fetch is for, and its state when the
            request was built: an incremental answer may carry any of them.
    """

    session_id: int
    epoch: int
    send: list[PartitionKey]
    forgotten: list[PartitionKey]
    wanted: dict[PartitionKey, FetchState]

    @property
    def full(self) -> bool:
        """Whether the request names every partition (no incremental session use)."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass
class FetchSession:
    """One broker's fetch session, as its fetcher keeps it.

    Attributes:
        enabled: whether to open sessions at all (``fetch_sessions``).
        session_id: the broker's id for the session; 0 while there is none.
        epoch: the epoch the next incremental request carries.
        told: each session partition's fetch state as the broker holds it.
        full_fetches, incremental_fetches: requests of each kind answered.
        resets: sessions dropped after a session error or a failed request.
    """

    enabled: bool = True
    session_id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH
    told: dict[PartitionKey, FetchState] = field(default_factory=dict)
    full_fetches: int = 0
    incremental_fetches: int = 0
    resets: int = 0

    @property
    def open(self) -> bool:
        """Whether the broker holds a session for us (the next fetch may be incremental)."""
        return self.session_id != NO_SESSION and self.epoch > INITIAL_EPOCH

    def plan(self, wanted: dict[PartitionKey, FetchState], version: int) -> FetchPlan:
        """What the next request carries to fetch ``wanted`` (in the order given)."""
        if not self.enabled or version < MIN_SESSION_VERSION:
            return FetchPlan(NO_SESSION, FINAL_EPOCH, list(wanted), [], wanted)
        if not self.open:
            # A full fetch; with a session id (after an error) it also replaces that session.
            return FetchPlan(self.session_id, INITIAL_EPOCH, list(wanted), [], wanted)
        told = self.told
        send = [key for key, state in wanted.items() if told.get(key) != state]
        forgotten = [key for key in told if key not in wanted]
        return FetchPlan(self.session_id, self.epoch, send, forgotten, wanted)

    def answered(self, plan: FetchPlan, error_code: int, session_id: int) -> bool:
        """Take in the answer to ``plan``'s request; returns whether its partitions count.

        A session error (an unknown session id, a wrong epoch) drops the
        session: the answer carries no partitions and the next request is a
        full fetch from the positions as they are, so nothing is skipped or
        read twice. After any other top-level error the next request is a
        full fetch that replaces the session (as Kafka's client does: the
        broker may or may not have moved the epoch).
        """
        if error_code:
            if plan.epoch != FINAL_EPOCH or self.session_id != NO_SESSION:
                self._reset(keep_id=error_code != errors.FetchSessionIdNotFoundError.code)
            return False
        if plan.epoch == FINAL_EPOCH:
            self.full_fetches += 1
            return True
        if plan.full:
            self.full_fetches += 1
            self.session_id = session_id
            if session_id == NO_SESSION:  # no session for us: full fetches again
                self.epoch, self.told = INITIAL_EPOCH, {}
            else:
                self.epoch, self.told = next_epoch(INITIAL_EPOCH), dict(plan.wanted)
            return True
        self.incremental_fetches += 1
        if session_id == NO_SESSION:
            # The broker closed the session; this answer is still good.
            self.session_id, self.epoch, self.told = NO_SESSION, INITIAL_EPOCH, {}
            return True
        if session_id != self.session_id:
            # Not our session: drop the answer and start over with a full fetch.
            self._reset(keep_id=False)
            return False
        self.epoch, self.told = next_epoch(self.epoch), dict(plan.wanted)
        return True

    def failed(self) -> None:
        """The request got no answer: whether the broker moved the epoch is unknown.

        The next request is a full fetch that replaces the session.
        """
        if self.session_id != NO_SESSION:
            self._reset(keep_id=True)

    def _reset(self, *, keep_id: bool) -> None:
        if self.session_id != NO_SESSION:
            self.resets += 1
        if not keep_id:
            self.session_id = NO_SESSION
        self.epoch, self.told = INITIAL_EPOCH, {}

    def closing(self) -> FetchPlan | None:
        """The request that closes an open session (epoch -1, no partitions), or None."""
        if self.session_id == NO_SESSION:
            return None
        plan = FetchPlan(self.session_id, FINAL_EPOCH, [], [], {})
        self.session_id, self.epoch, self.told = NO_SESSION, INITIAL_EPOCH, {}
        return plan


__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "MIN_SESSION_VERSION",
    "NO_SESSION",
    "SESSION_ERRORS",
    "FetchPlan",
    "FetchSession",
    "FetchState",
    "PartitionKey",
    "next_epoch",
]
