"""``send_nowait``'s staging: plain records join runs, handed to the accumulator in bulk.

A plain record (a bytes value of at most ``SMALL`` bytes and within
``max_message_bytes``, no key, no headers, an int timestamp or none, a valid
partition or, with the default sticky partitioner, none, of a topic whose
partitions are known) is appended to the open run of records for its topic
and partition by :class:`pykaf.codec.RecordStager`, compiled, with no Python
frame. Runs are appended to their partitions' batches by the column path
(``BatchBuilder.extend``, a range of records per call) when the producer's
loop next runs a scheduled callback, that is, at the caller's next
checkpoint, or before anything else touches the buffer: every other way of
appending, ``flush``, ``purge`` and the statistics drain the runs first, so
records keep their order and the counts are exact.

The buffer's limits hold exactly: a run that opens reserves room in the
buffer for up to ``CHUNK`` records at ``SMALL`` bytes each (what the other
paths then see as taken), and the compiled path stages no more records than
reserved; a drain gives the reservation back and counts the records
themselves. A plain record that finds no room left after a drain, and any
other record, takes ``send_nowait``'s own path (after the runs), which
raises ``BufferFullError`` on a full buffer as before. A record without its
own timestamp is stamped when its run is appended.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

import trio

from pykaf._producer.accumulator import RECORD_OVERHEAD, Accumulator
from pykaf._producer.delivery import OnDelivery, Reports
from pykaf._producer.records import BatchDelivery, RecordMetadata
from pykaf._producer.state import TopicState
from pykaf.codec import RecordStager

log = logging.getLogger("pykaf.producer")

#: Records a run reserves room for at a time (the compiled path stages that many).
CHUNK = 4096
#: The largest value staged (bytes); larger ones take ``send_nowait``'s own path.
SMALL = 2048
#: The buffer bytes one staged record reserves: the most it can count for.
PER_RECORD = SMALL + RECORD_OVERHEAD
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

SendNowait = Callable[..., None]
#: Makes a RecordMetadata from a tuple without the named tuple's Python ``__new__``.
_new_metadata = tuple.__new__


class _Run:
    """Staged records for one topic and partition, in order."""

    __slots__ = ("callbacks", "partition", "stamps", "topic", "values")

    def __init__(
        self,
        topic: str,
        partition: int | None,
        values: list[bytes],
        stamps: list[int] | None,
        callbacks: list[OnDelivery] | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.values = values
        self.stamps = stamps
        self.callbacks = callbacks


class _Callbacks:
    """A run's ``on_settle`` hook: each record's ``on_delivery(error, metadata)``."""

    __slots__ = ("callbacks", "stamps", "topic")

    def __init__(self, topic: str, callbacks: list[OnDelivery], stamps: list[int] | None) -> None:
        self.topic = topic
        self.callbacks = callbacks
        self.stamps = stamps

    def __call__(
        self,
        partition: int,
        index: int,
        count: int,
        offset: int,
        timestamp: int,
        error: BaseException | None,
    ) -> None:
        topic = self.topic
        made = _new_metadata
        offsets: Iterable[int] = range(offset, offset + count) if offset >= 0 else repeat(-1, count)
        stamps = self.stamps
        # -1: the records carried their own timestamps (the broker did not stamp them).
        times: Iterable[int] = (
            stamps[index : index + count]
            if timestamp == -1 and stamps is not None
            else repeat(timestamp, count)
        )
        for callback, where, stamp in zip(
            self.callbacks[index : index + count], offsets, times, strict=True
        ):
            try:
                callback(error, made(RecordMetadata, (topic, partition, where, stamp)))
            except Exception:
                log.exception("on_delivery callback failed")


def _no_futures(*args: Any) -> Any:
    raise TypeError("the async producer stages no futures")


def _no_poll(timeout: float | None) -> int:
    raise TypeError("the async producer has no poll")


class Staging:
    """The async producer's staged runs (see the module's docstring).

    ``send_nowait`` is :attr:`stager`'s ``produce``; records it does not
    stage go to ``fallback`` (the producer's own ``send_nowait``).
    """

    def __init__(
        self,
        acc: Accumulator,
        topics: dict[str, TopicState],
        reports: Reports,
        fallback: SendNowait,
    ) -> None:
        self._acc = acc
        self._topics = topics
        self._reports = reports
        self._fallback = fallback
        self._token = trio.lowlevel.current_trio_token()
        # The accumulator holds the same list: it drains before anything else appends.
        self.runs: list[_Run] = acc.staged
        acc.drain_staged = self.drain
        self._scheduled = False
        self._reserved = 0  # records reserved in the buffer (PER_RECORD bytes each)
        self.stager = RecordStager(
            threading.Lock(),
            self._stage,
            _no_futures,
            _no_poll,
            _no_futures,
            [],
            small=min(SMALL, acc.max_message - RECORD_OVERHEAD),
            max_pending=0,
        )
        # The sticky partitioner picks one partition per batch for null keys, as
        # the bulk path does; another partitioner is asked for every record.
        self._sticky = acc.sticky_nulls

    @property
    def staged(self) -> int:
        """Records staged and not appended yet."""
        return self.stager.queued - self.stager.accepted

    def _reserve(self) -> bool:
        """Reserve buffer room for up to ``CHUNK`` more records; False when there is none."""
        acc = self._acc
        room = min(
            CHUNK,
            acc.max_records - acc.buffered_records,
            (acc.max_bytes - acc.buffered_bytes) // PER_RECORD,
        )
        if room <= 0:
            return False
        acc.reserve(room, room * PER_RECORD)
        self._reserved += room
        self.stager.max_pending = self.staged + room
        return True

    def _stage(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: Any,
        headers: Any,
        timestamp: Any,
        on_delivery: OnDelivery | None,
    ) -> None:
        """A record the compiled path did not take: open a run for it, or send it alone."""
        acc = self._acc
        t = self._topics.get(topic)
        plain = (
            type(value) is bytes
            and len(value) <= self.stager.small
            and key is None
            and headers is None
            and (
                timestamp is None
                or (type(timestamp) is int and _INT64_MIN <= timestamp <= _INT64_MAX)
            )
            and t is not None
            and t.count > 0
            and (
                (partition is None and self._sticky)
                or (type(partition) is int and 0 <= partition < t.count)
            )
            and not (acc.closing or acc.gated)
        )
        if plain and self.staged >= self.stager.max_pending:  # the reservation is used up
            self.drain()
            plain = self._reserve()
        if not plain:
            self.drain()  # the staged records go first
            self._fallback(
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp=timestamp,
                on_delivery=on_delivery,
            )
            return
        values = [value]
        stamps = None if timestamp is None else [timestamp]
        stager = self.stager
        if on_delivery is None:
            stager.open_run(topic, partition, values, None, stamps)
            run = _Run(topic, partition, values, stamps, None)
        else:
            callbacks = [on_delivery]
            stager.open_callback_run(topic, partition, values, callbacks, None, stamps)
            run = _Run(topic, partition, values, stamps, callbacks)
        stager.queued += 1
        self.runs.append(run)
        if not self._scheduled:
            self._scheduled = True
            self._token.run_sync_soon(self._drain_soon)

    def _drain_soon(self) -> None:
        self._scheduled = False
        self.drain()

    def drain(self) -> None:
        """Append every staged run to its partitions' batches, in order; never raises."""
        if not self.runs:
            return
        runs = self.runs.copy()
        self.runs.clear()
        stager = self.stager
        stager.close_runs()
        stager.max_pending = 0  # the next record reserves again
        acc = self._acc
        reserved, self._reserved = self._reserved, 0
        acc.unreserve(reserved, reserved * PER_RECORD)  # the records count for themselves now
        now = time.time_ns() // 1_000_000
        for run in runs:
            n = len(run.values)
            stager.accepted += n
            delivery = BatchDelivery(n)
            if run.stamps is None:
                delivery.timestamp = now
            if run.callbacks is not None:
                delivery.on_settle = _Callbacks(run.topic, run.callbacks, run.stamps)
                delivery.observed = True
            # A run opened for a topic whose partitions were known; those stay known.
            t = self._topics[run.topic]
            done = [0, acc.purges]
            try:
                acc.append_run_now(t, run.values, run.stamps, run.partition, now, delivery, done)
            except Exception as exc:  # not expected: fail the rest, never lose them silently
                log.exception("appending staged records failed")
                part = -1 if run.partition is None else run.partition
                self._reports.fail_alone(run.topic, part, exc, delivery, done[0], n - done[0])
        acc.release(0, 0)  # what the reservation held and the records do not: wake who waits


__all__ = ["CHUNK", "SMALL", "Staging"]
