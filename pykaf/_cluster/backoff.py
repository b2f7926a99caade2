"""The one retry backoff of the library: exponential, capped, with jitter (KIP-580).

Every loop that tries again after a failure waits here: requests to a
coordinator or a leader, a partition's attach to its producer sink or its
fetcher, a fetcher's failed Fetch, the share consumer's rounds, the group
members' heartbeats, and the connection pool's reconnects (the latter with the
``reconnect_backoff`` pair of options, as in Kafka's own clients).

The wait after ``failures`` consecutive failures is
``min(base * 2 ** (failures - 1), cap)``, times a random factor in
``[1 - JITTER, 1 + JITTER]``, so that clients that failed together do not
retry together. No failure yet: no wait.

``tests/test_backoff.py`` fails on a ``trio.sleep`` of a backoff anywhere else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

import trio

__all__ = ["JITTER", "Backoff", "Retries", "delay"]

#: The spread of a wait around its exponential value (Kafka's clients use 0.2).
JITTER = 0.2

#: Doublings beyond this change nothing (any realistic cap is reached long before).
_MAX_EXPONENT = 30


def delay(failures: int, base: float, cap: float, jitter: float = JITTER) -> float:
    """Seconds to wait after ``failures`` consecutive failures (0 for none)."""
    if failures <= 0 or base <= 0:
        return 0.0
    term = min(base * 2.0 ** min(failures - 1, _MAX_EXPONENT), cap)
    if jitter:
        term *= random.uniform(1.0 - jitter, 1.0 + jitter)
    return term


class _RetryOptions(Protocol):
    @property
    def retry_backoff(self) -> float: ...

    @property
    def retry_backoff_max(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """A retry policy: the first wait ``base`` seconds, doubling up to ``cap``."""

    base: float
    cap: float

    @classmethod
    def of(cls, config: _RetryOptions) -> Backoff:
        """The policy a role's options set (``retry_backoff``, ``retry_backoff_max``)."""
        return cls(config.retry_backoff, max(config.retry_backoff, config.retry_backoff_max))

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (0 for none)."""
        return delay(failures, self.base, self.cap)

    async def wait(self, failures: int = 1) -> None:
        """Sleep the wait after ``failures`` consecutive failures (a checkpoint even for 0)."""
        await trio.sleep(self.delay(failures))


class Retries:
    """One loop's run of consecutive failures, and the policy's wait after each."""

    __slots__ = ("failures", "policy")

    def __init__(self, policy: Backoff) -> None:
        self.policy = policy
        #: Consecutive failures so far (0 after a success).
        self.failures = 0

    def fail(self) -> int:
        """Count one more failure; the failures in a row now."""
        self.failures += 1
        return self.failures

    async def wait(self) -> None:
        """Count one more failure and sleep the wait it earns."""
        await self.policy.wait(self.fail())

    def reset(self) -> None:
        """A success: the next failure waits the shortest time again."""
        self.failures = 0
