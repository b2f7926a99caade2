"""Per-request measurements: what each broker connection counts, and the request hook.

Every request a connection answers (or fails) updates its counters per API
(count, errors, total and longest round trip), and, when the client's
``on_request`` option holds a callable, calls it with a
:class:`RequestEvent`. Counting is a few additions per request; the hook is
for metrics libraries (``docs/observability.md``) and must be quick: it runs
in the connection's reader task. A hook that raises is logged and left in
place; it never breaks the connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("pykaf.metrics")


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """One request's outcome, as the ``on_request`` hook gets it.

    Attributes:
        node_id: the broker (-1 for a bootstrap connection).
        api: the API's name (``"Produce"``, ``"Fetch"``, ...).
        api_key: its key.
        seconds: from writing the request to reading its response (or failing).
        bytes_sent: the request's size on the wire.
        error: None, or why no response came (the connection broke or timed out).
            Errors *inside* a response (per partition) are the caller's to read.
    """

    node_id: int
    api: str
    api_key: int
    seconds: float
    bytes_sent: int
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class RequestStatistics:
    """A broker's requests of one API, summed over its connections."""

    node_id: int
    api: str
    count: int
    errors: int
    mean_ms: float
    max_ms: float


class ApiCounters:
    """A connection's counters per API: count, errors, total and longest seconds."""

    __slots__ = ("by_api", "hook", "names", "node_id")

    def __init__(self, node_id: int, hook: Callable[[RequestEvent], object] | None) -> None:
        self.node_id = node_id
        self.hook = hook
        self.by_api: dict[int, list[float]] = {}
        self.names: dict[int, str] = {}

    def record(
        self,
        api_key: int,
        api: str,
        seconds: float,
        bytes_sent: int,
        error: BaseException | None,
    ) -> None:
        """Count one request's outcome and tell the hook."""
        counts = self.by_api.get(api_key)
        if counts is None:
            counts = self.by_api[api_key] = [0, 0, 0.0, 0.0]
            self.names[api_key] = api
        counts[0] += 1
        if error is not None:
            counts[1] += 1
        counts[2] += seconds
        if seconds > counts[3]:
            counts[3] = seconds
        if self.hook is not None:
            try:
                self.hook(RequestEvent(self.node_id, api, api_key, seconds, bytes_sent, error))
            except Exception:
                log.exception("the on_request hook raised")


def merge(counters: list[ApiCounters]) -> list[RequestStatistics]:
    """Sum connections' counters per broker and API."""
    summed: dict[tuple[int, int], list[float]] = {}
    names: dict[int, str] = {}
    for c in counters:
        names.update(c.names)
        for api_key, (count, errors, total, longest) in c.by_api.items():
            s = summed.setdefault((c.node_id, api_key), [0, 0, 0.0, 0.0])
            s[0] += count
            s[1] += errors
            s[2] += total
            s[3] = max(s[3], longest)
    return [
        RequestStatistics(
            node_id=node_id,
            api=names[api_key],
            count=int(count),
            errors=int(errors),
            mean_ms=round(1000 * total / count, 3) if count else 0.0,
            max_ms=round(1000 * longest, 3),
        )
        for (node_id, api_key), (count, errors, total, longest) in sorted(summed.items())
    ]
