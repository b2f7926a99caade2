"""Measurements for metrics libraries: the request hook, and the batch hook's event.

Every request a connection answers (or fails) updates its counters per API
(count, errors, total and longest round trip), and, when the client's
``on_request`` option holds a callable, calls it with a
:class:`RequestEvent`. Counting is a few additions per request; the hook is
for metrics libraries (``docs/observability.md``) and must be quick: it runs
in the connection's reader task. A hook that raises is logged and left in
place; it never breaks the connection.

The ``on_batch`` hook gets a :class:`BatchEvent` per record batch; the
producer raises it where a batch settles, the consumer where a fetched batch
is handed to its reader, both through :func:`report_batch`.
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
class BatchEvent:
    """One record batch, produced or fetched, as the ``on_batch`` hook gets it.

    A produced batch gives one event when it settles: acknowledged, or failed
    for good (retries exhausted, a fatal error, the delivery timeout, an
    aborted transaction, the producer closing), never once per attempt (a
    batch split because the broker found it too large: once per part). A
    fetched batch gives one event when the consumer hands its records to the
    partition's reader.

    Attributes:
        kind: ``"produce"`` or ``"fetch"``.
        topic, partition: the batch's partition.
        node_id: the broker it was last sent to or fetched from (-1: a
            produced batch that failed before it was ever sent).
        records: records in a produced batch; records of a fetched batch
            handed to the reader (``dropped`` are not).
        bytes: the batch's size on the wire, compressed, header included.
        uncompressed_bytes: a produced batch's size before compression,
            header included (None for a fetched batch, or a produced batch
            that failed before it was ever sent).
        compression: the codec's name: ``"none"``, ``"gzip"``, ``"snappy"``,
            ``"lz4"`` or ``"zstd"``.
        base_offset: the offset of the batch's first record; None for a
            produced batch that failed, was sent with ``acks=0``, or was a
            duplicate the broker had already written.
        error: why a produced batch failed; None when it was acknowledged,
            and always for a fetched batch.
        seconds: a produced batch: from its first write to a broker until it
            settled, retries and their backoff included (None when it was
            never sent); None for a fetched batch.
        retries: times a produced batch was sent again after its first
            attempt (0 for a fetched batch).
        dropped: records of a fetched batch not handed out: before the fetch
            position, in an aborted transaction, or transaction markers (0
            for a produced batch).
    """

    kind: str
    topic: str
    partition: int
    node_id: int
    records: int
    bytes: int
    uncompressed_bytes: int | None
    compression: str
    base_offset: int | None
    error: BaseException | None
    seconds: float | None
    retries: int
    dropped: int


def report_batch(hook: Callable[[BatchEvent], object], event: BatchEvent) -> None:
    """Call the ``on_batch`` hook; if it raises, log that and carry on."""
    try:
        hook(event)
    except Exception:
        log.exception("the on_batch hook raised")


@dataclass(frozen=True, slots=True)
class RequestStatistics:
    """A broker's requests of one API, summed over its connections.

    ``bytes_sent`` is the requests' size on the wire, summed (``bytes_sent /
    count`` is the mean request size: a consumer's Fetch requests shrink
    with fetch sessions, for instance).
    """

    node_id: int
    api: str
    count: int
    errors: int
    mean_ms: float
    max_ms: float
    bytes_sent: int = 0


class ApiCounters:
    """A connection's counters per API: count, errors, total and longest seconds, bytes sent."""

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
            counts = self.by_api[api_key] = [0, 0, 0.0, 0.0, 0]
            self.names[api_key] = api
        counts[0] += 1
        if error is not None:
            counts[1] += 1
        counts[2] += seconds
        if seconds > counts[3]:
            counts[3] = seconds
        counts[4] += bytes_sent
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
        for api_key, (count, errors, total, longest, sent) in c.by_api.items():
            s = summed.setdefault((c.node_id, api_key), [0, 0, 0.0, 0.0, 0])
            s[0] += count
            s[1] += errors
            s[2] += total
            s[3] = max(s[3], longest)
            s[4] += sent
    return [
        RequestStatistics(
            node_id=node_id,
            api=names[api_key],
            count=int(count),
            errors=int(errors),
            mean_ms=round(1000 * total / count, 3) if count else 0.0,
            max_ms=round(1000 * longest, 3),
            bytes_sent=int(sent),
        )
        for (node_id, api_key), (count, errors, total, longest, sent) in sorted(summed.items())
    ]
