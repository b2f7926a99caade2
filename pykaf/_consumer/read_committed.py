"""Which fetched records a consumer hands out: Kafka's read_committed rules.

A plain object, one per partition consumer, with no I/O, so that the rules
can be tested on crafted fetch answers. Kafka defines them as follows (the
Java consumer's fetcher and KIP-98):

- A Fetch answer in read_committed carries the **aborted transactions** that
  overlap the fetched range: (producer id, first offset) pairs. Each marks
  where an aborted transaction's data starts in this partition.
- Walking the batches in offset order, every pair whose first offset is at or
  below the current batch's last offset joins the set of *aborted producers*.
  A transactional data batch of a producer in that set is dropped whole.
- That producer's **ABORT control batch** ends its aborted transaction: the
  producer leaves the set, so its next transaction's data is seen again.
- **Control batches** (COMMIT and ABORT markers) are never handed out, in
  either isolation level.
- Nothing at or above the **last stable offset** is handed out in
  read_committed: those records belong to transactions still open. The next
  fetch starts at the last stable offset and sees them once they are decided.
- The position still advances past everything skipped (aborted data,
  markers, records compacted away), so a consumer never fetches the same
  dropped batch again.

The aborted-producer set and the not-yet-reached pairs live on between
fetches, so a transaction spanning several fetches is handled whether or not
the broker repeats the pair in later answers; ``reset()`` forgets them after a
seek.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

from pykaf._consumer.config import ISOLATION_LEVELS
from pykaf.codec import KEEP_ALL, KEEP_NONE
from pykaf.errors import ConfigError

_INT64_MAX = 2**63 - 1
# TransactionFilter._skip's answers: a batch passed over as aborted, or as control records.
_ABORTED = 1
_CONTROL = 2

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


class FilterResult:
    """What one fetch answer yields: the records to hand out and the next offset to fetch.

    Attributes:
        records: records at or after the fetch offset, in offset order, with
            aborted, control and (read_committed) unstable records removed.
        next_offset: where the next fetch starts (never behind the fetch offset).
        skipped_aborted: records dropped because their transaction aborted.
        skipped_control: control records (transaction markers) passed over.
    """

    __slots__ = ("next_offset", "records", "skipped_aborted", "skipped_control")

    def __init__(
        self, records: list[Any], next_offset: int, skipped_aborted: int, skipped_control: int
    ) -> None:
        self.records = records
        self.next_offset = next_offset
        self.skipped_aborted = skipped_aborted
        self.skipped_control = skipped_control

    def __repr__(self) -> str:
        return (
            f"FilterResult(records={len(self.records)}, next_offset={self.next_offset}, "
            f"skipped_aborted={self.skipped_aborted}, skipped_control={self.skipped_control})"
        )


class TransactionFilter:
    """Applies an isolation level to the decoded batches of one partition's fetches.

    Args:
        isolation_level: ``"read_committed"`` or ``"read_uncommitted"``.

    Raises:
        ConfigError: an unknown isolation level.
    """

    __slots__ = ("_aborted", "_pending", "_seen_pairs", "read_committed")

    def __init__(self, isolation_level: str = READ_COMMITTED) -> None:
        if isolation_level not in ISOLATION_LEVELS:
            raise ConfigError(
                f"isolation_level: {isolation_level!r} must be one of {', '.join(ISOLATION_LEVELS)}"
            )
        self.read_committed = isolation_level == READ_COMMITTED
        self._aborted: set[int] = set()  # producers inside an aborted transaction
        self._pending: list[tuple[int, int]] = []  # heap of (first_offset, producer_id)
        self._seen_pairs: set[tuple[int, int]] = set()

    def reset(self) -> None:
        """Forget transaction state (after a seek: the next fetch lists what matters)."""
        self._aborted.clear()
        self._pending.clear()
        self._seen_pairs.clear()

    @property
    def aborted_producers(self) -> frozenset[int]:
        """Producer ids currently inside an aborted transaction (for inspection and tests)."""
        return frozenset(self._aborted)

    def filter(
        self,
        batches: Sequence[Any],
        aborted: Iterable[tuple[int, int]],
        last_stable_offset: int,
        fetch_offset: int,
    ) -> FilterResult:
        """Filter one fetch answer's batches of this partition.

        Args:
            batches: decoded record batches in offset order (``RecordBatch``).
            aborted: the answer's aborted transactions as (producer id, first
                offset) pairs; ignored in read_uncommitted.
            last_stable_offset: the answer's last stable offset (-1 if unknown).
            fetch_offset: the offset this fetch asked for; earlier records of
                the first batch are left out.
        """
        limit = self._take_answer(aborted, last_stable_offset)
        records: list[Any] = []
        owned = True  # whether ``records`` is ours to extend (not a batch's own list)
        next_offset = fetch_offset
        skipped_aborted = skipped_control = 0
        for batch in batches:
            base = batch.base_offset
            if limit >= 0 and base >= limit:
                break  # an open transaction's data, or later: fetched again once stable
            last = base + batch.last_offset_delta
            if last < fetch_offset:
                continue  # wholly before the position (a re-fetched batch)
            skip = self._skip(batch, last)
            if skip:
                if skip == _ABORTED:
                    skipped_aborted += len(batch.records)
                else:
                    skipped_control += len(batch.records)
                next_offset = max(next_offset, last + 1)
                continue
            batch_records = batch.records
            if limit >= 0 and last >= limit:
                # The batch straddles the last stable offset: hand out what is below it.
                kept = [r for r in batch_records if fetch_offset <= r.offset < limit]
                if records:
                    records = records if owned else list(records)
                    records.extend(kept)
                else:
                    records = kept
                next_offset = max(next_offset, limit)
                break
            if base < fetch_offset:
                batch_records = [r for r in batch_records if r.offset >= fetch_offset]
            if not records:
                # The decoded list itself, not a copy, on the common one-batch path;
                # it is copied before anything is added to it.
                records = batch_records
                owned = batch_records is not batch.records
            elif batch_records:
                if not owned:
                    records, owned = list(records), True
                records.extend(batch_records)
            next_offset = max(next_offset, last + 1)
        return FilterResult(records, next_offset, skipped_aborted, skipped_control)

    def selector(
        self,
        aborted: Iterable[tuple[int, int]],
        last_stable_offset: int,
        fetch_offset: int,
    ) -> BatchSelector:
        """:meth:`filter`'s rules for the columnar decoder, one batch at a time.

        The arguments are :meth:`filter`'s. The selector is handed to
        ``pykaf.codec.decode_columns`` as ``select``: it sees each decoded
        batch (without its records) and says which offsets of it to keep,
        updating this filter's transaction state exactly as :meth:`filter`
        does; afterwards it holds the answer's ``next_offset`` and skip counts.
        """
        limit = self._take_answer(aborted, last_stable_offset)
        return BatchSelector(self, limit, fetch_offset)

    def _take_answer(self, aborted: Iterable[tuple[int, int]], last_stable_offset: int) -> int:
        """Note an answer's aborted transactions; the offset nothing at or above is handed out.

        -1 for no limit (read_uncommitted, or no last stable offset known).
        """
        if not self.read_committed:
            return -1
        for producer_id, first_offset in aborted:
            pair = (first_offset, producer_id)
            if pair not in self._seen_pairs:
                self._seen_pairs.add(pair)
                heapq.heappush(self._pending, pair)
        return last_stable_offset if last_stable_offset >= 0 else -1

    def _skip(self, batch: Any, last: int) -> int:
        """Whether ``batch`` (its last offset ``last``) is passed over: _ABORTED, _CONTROL or 0.

        Called with each batch in offset order: producers whose aborted
        transaction starts at or before ``last`` are inside it from here, and
        an abort marker ends its producer's.
        """
        if self.read_committed and batch.producer_id >= 0:
            pending, aborted = self._pending, self._aborted
            while pending and pending[0][0] <= last:
                first, pid = heapq.heappop(pending)
                self._seen_pairs.discard((first, pid))
                aborted.add(pid)
            if batch.is_control:
                if batch.control_type == "abort":
                    aborted.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted:
                return _ABORTED
        return _CONTROL if batch.is_control else 0


class BatchSelector:
    """One fetch answer's :meth:`TransactionFilter.filter`, as bounds per batch.

    Called with each batch in offset order, it returns the inclusive offset
    bounds of the batch's records to hand out (``KEEP_NONE`` for a batch
    skipped whole). The same rules as ``filter``, which tests hold it to.

    Attributes:
        next_offset: where the next fetch starts, once every batch was seen.
        skipped_aborted: records dropped because their transaction aborted.
        skipped_control: control records passed over.
    """

    __slots__ = (
        "_fetch_offset",
        "_filter",
        "_limit",
        "_stopped",
        "next_offset",
        "skipped_aborted",
        "skipped_control",
    )

    def __init__(self, tx_filter: TransactionFilter, limit: int, fetch_offset: int) -> None:
        self._filter = tx_filter
        self._limit = limit
        self._fetch_offset = fetch_offset
        self._stopped = False
        self.next_offset = fetch_offset
        self.skipped_aborted = 0
        self.skipped_control = 0

    def __call__(self, batch: Any) -> tuple[int, int]:
        if self._stopped:
            return KEEP_NONE
        limit, fetch_offset = self._limit, self._fetch_offset
        base = batch.base_offset
        if limit >= 0 and base >= limit:
            self._stopped = True  # an open transaction's data, or later
            return KEEP_NONE
        last = base + batch.last_offset_delta
        if last < fetch_offset:
            return KEEP_NONE  # wholly before the position
        skip = self._filter._skip(batch, last)
        if skip:
            if skip == _ABORTED:
                self.skipped_aborted += batch.record_count
            else:
                self.skipped_control += batch.record_count
            self.next_offset = max(self.next_offset, last + 1)
            return KEEP_NONE
        if limit >= 0 and last >= limit:
            # The batch straddles the last stable offset: what is below it, then stop.
            self._stopped = True
            self.next_offset = max(self.next_offset, limit)
            return (fetch_offset, limit - 1)
        self.next_offset = max(self.next_offset, last + 1)
        return (fetch_offset, _INT64_MAX) if base < fetch_offset else KEEP_ALL


__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "BatchSelector",
    "FilterResult",
    "TransactionFilter",
]
