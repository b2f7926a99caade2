"""One share group's state of one partition (KIP-932): which records are in flight, and how.

State only, no I/O. The *share-partition start offset* (SPSO) is the first
record not yet settled for good; records from it up to the *end offset*
(SPEO + 1) are in flight, each Available, Acquired (by one member, until its
acquisition lock expires), Acknowledged or Archived, with a delivery count.
Records past the end are read from the log when a member fetches: whole
batches are acquired at a time (a fetch may get more than it asked for, as
from Kafka), control batches and, under ``read_committed``, the batches of
aborted transactions are archived unread. An Available record is acquired
again record by record, its delivery count one higher. A record released, or
whose lock expired, at the delivery count limit is archived instead. The
start offset moves past the settled records at the front.

The start offset is None until the first fetch *loads* the partition: then
the group's ``share.auto.offset.reset`` decides it (Kafka initialises the
state when the partition is first assigned and resolves the offset when the
leader first loads it, so DescribeShareGroupOffsets says -1 until then).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pykaf import errors
from pykaf.testing._fake.log import PartitionLog

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "Available", "Acquired", "Acknowledged", "Archived"
#: Acknowledgement types on the wire (KIP-932; RENEW is KIP-1222's).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_INVALID_REQUEST = errors.InvalidRequestError.code
_INVALID_STATE = errors.InvalidRecordStateError.code
_DURATION = re.compile(
    r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE
)


@dataclass(slots=True)
class InFlight:
    """One in-flight record: its state, delivery count, holder and lock deadline."""

    state: str
    delivery_count: int = 0
    member: str | None = None
    deadline: float = 0.0


@dataclass(frozen=True)
class AckBatch:
    """One acknowledgement batch of a request: offsets ``first``..``last`` and their types."""

    first: int
    last: int
    types: list[int]


def duration_ms(spec: str) -> int | None:
    """Milliseconds of an ISO-8601 duration like ``PT1H`` or ``P1DT30M`` (None: not one)."""
    m = _DURATION.fullmatch(spec)
    if m is None or not any(m.groups()):
        return None
    days, hours, minutes, seconds = m.groups()
    total = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
    return int((total + float(seconds or 0)) * 1000)


def reset_offset(log: PartitionLog, policy: str) -> int:
    """Where a share group starts reading ``log``: earliest, latest or ``by_duration:<ISO>``."""
    if policy == "earliest":
        return log.log_start_offset
    if policy.startswith("by_duration:"):
        ms = duration_ms(policy.removeprefix("by_duration:")) or 0
        found = log.offset_for_timestamp(int(time.time() * 1000) - ms)
        return log.high_watermark if found is None else found[0]
    return log.high_watermark


@dataclass
class SharePartitionState:
    """A share group's view of one partition; see the module's docstring."""

    start_offset: int | None = None
    end_offset: int = 0
    records: dict[int, InFlight] = field(default_factory=dict)

    # -- loading and settling ------------------------------------------------------

    def load(self, log: PartitionLog, policy: str) -> None:
        """Resolve the start offset on first use; skip records the log no longer has."""
        if self.start_offset is None:
            self.start_offset = self.end_offset = reset_offset(log, policy)
        if self.start_offset < log.log_start_offset:
            self.records = {o: r for o, r in self.records.items() if o >= log.log_start_offset}
            self.start_offset = log.log_start_offset
            self.end_offset = max(self.end_offset, self.start_offset)
        self._advance()

    def set_start(self, offset: int) -> None:
        """A new start offset (AlterShareGroupOffsets): nothing is in flight any more."""
        self.start_offset = self.end_offset = offset
        self.records.clear()

    def _advance(self) -> None:
        """Move the start offset past the settled records at the front."""
        if self.start_offset is None:
            return
        while self.start_offset < self.end_offset:
            r = self.records.get(self.start_offset)
            if r is not None and r.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            self.records.pop(self.start_offset, None)
            self.start_offset += 1

    def expire(self, now: float, limit: int) -> bool:
        """Acquisition locks that ran out give their records back; whether any did."""
        changed = False
        for r in self.records.values():
            if r.state == ACQUIRED and r.deadline <= now:
                self._give_back(r, limit)
                changed = True
        if changed:
            self._advance()
        return changed

    def next_deadline(self) -> float | None:
        """When the earliest acquisition lock runs out (None: nothing acquired)."""
        deadlines = [r.deadline for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines, default=None)

    @staticmethod
    def _give_back(r: InFlight, limit: int) -> None:
        r.state = ARCHIVED if r.delivery_count >= limit else AVAILABLE
        r.member = None

    def release_member(self, member: str, limit: int) -> int:
        """Give back every record ``member`` holds (its share session closed); how many."""
        n = 0
        for r in self.records.values():
            if r.state == ACQUIRED and r.member == member:
                self._give_back(r, limit)
                n += 1
        self._advance()
        return n

    # -- acquiring -----------------------------------------------------------------

    def acquire(
        self,
        log: PartitionLog,
        member: str,
        max_records: int,
        deadline: float,
        *,
        read_committed: bool = False,
    ) -> list[tuple[int, int, int]]:
        """Acquire records for ``member``: (first, last, delivery count) ranges, in order."""
        assert self.start_offset is not None, "load() first"
        got: list[int] = []

        def take(offset: int, r: InFlight) -> None:
            r.state, r.member, r.deadline = ACQUIRED, member, deadline
            r.delivery_count += 1
            got.append(offset)

        for offset in range(self.start_offset, self.end_offset):
            if len(got) >= max_records:
                break
            r = self.records.get(offset)
            if r is not None and r.state == AVAILABLE:
                take(offset, r)
        upto = log.last_stable_offset if read_committed else log.high_watermark
        for base, last, control, producer_id in _batches_from(log, self.end_offset, upto):
            if len(got) >= max_records:
                break
            first = max(base, self.end_offset)
            skip = control or (read_committed and _aborted(log, producer_id, base, last))
            for offset in range(first, last + 1):
                r = self.records[offset] = InFlight(ARCHIVED if skip else AVAILABLE)
                if not skip:
                    take(offset, r)
            self.end_offset = last + 1
        self._advance()
        return _ranges((o, self.records[o].delivery_count) for o in got)

    # -- acknowledging ---------------------------------------------------------------

    def acknowledge(
        self,
        member: str,
        batches: list[AckBatch],
        *,
        limit: int,
        renew: bool,
        lock_deadline: float,
    ) -> tuple[int, str | None]:
        """Apply one partition's acknowledgements, all or none: (error code, message).

        As Kafka 4.3: malformed batches, offsets past the records in flight and
        RENEW without ``renew`` (IsRenewAck) are INVALID_REQUEST; a record
        another member holds, or nobody holds (settled ones in flight too), is
        INVALID_RECORD_STATE; a record before the start offset is left as it
        is, without an error.
        """
        changes: list[tuple[InFlight, int]] = []
        for b in batches:
            count = b.last - b.first + 1
            if count < 1 or len(b.types) not in (1, count):
                return _INVALID_REQUEST, None
            if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in b.types):
                return _INVALID_REQUEST, None
            if RENEW in b.types and not renew:
                return _INVALID_REQUEST, None
            if self.start_offset is None or b.last >= self.end_offset:
                return (
                    _INVALID_REQUEST,
                    "Batch record not found. The first offset in request is past acquired records.",
                )
            for i, offset in enumerate(range(b.first, b.last + 1)):
                r = self.records.get(offset)
                if r is None:
                    continue  # before the start offset: settled for good already
                if r.state != ACQUIRED:
                    return (
                        _INVALID_STATE,
                        "The offset cannot be acknowledged. The offset is not acquired.",
                    )
                if r.member != member:
                    return _INVALID_STATE, "Member is not the owner of offset"
                changes.append((r, b.types[0] if len(b.types) == 1 else b.types[i]))
        for r, kind in changes:
            if kind == ACCEPT:
                r.state, r.member = ACKNOWLEDGED, None
            elif kind == RELEASE:
                self._give_back(r, limit)
            elif kind == RENEW:
                r.deadline = lock_deadline
            else:  # REJECT, GAP
                r.state, r.member = ARCHIVED, None
        self._advance()
        return 0, None

    # -- describing ----------------------------------------------------------------

    def lag(self, log: PartitionLog) -> int:
        """Records from the start offset to the log's end not yet settled for good (-1 unknown)."""
        if self.start_offset is None:
            return -1
        settled = sum(
            1
            for o, r in self.records.items()
            if o >= self.start_offset and r.state in (ACKNOWLEDGED, ARCHIVED)
        )
        return log.high_watermark - self.start_offset - settled

    def holders(self) -> set[str]:
        """Members holding records of this partition now."""
        return {r.member for r in self.records.values() if r.member is not None}


def _batches_from(
    log: PartitionLog, offset: int, upto: int
) -> Iterator[tuple[int, int, bool, int]]:
    """(base, last offset, control, producer id) of the log's batches from ``offset`` on."""
    for b in log.batches_from(offset):
        if b.last_offset < offset:
            continue
        if b.base_offset >= upto:
            return
        yield b.base_offset, b.last_offset, b.header.control, b.header.producer_id


def _aborted(log: PartitionLog, producer_id: int, base: int, last: int) -> bool:
    return any(a.producer_id == producer_id for a in log.aborted_between(base, last))


def _ranges(offsets: Iterable[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Consecutive offsets with one delivery count as (first, last, count) ranges."""
    out: list[tuple[int, int, int]] = []
    for offset, count in offsets:
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], offset, count)
        else:
            out.append((offset, offset, count))
    return out


def stored_batches(log: PartitionLog, ranges: list[tuple[int, int, int]]) -> bytes:
    """The stored batches holding the offsets of ``ranges`` (each batch once, in order)."""
    if not ranges:
        return b""
    wanted = [(first, last) for first, last, _ in ranges]
    end = wanted[-1][1]
    out = []
    for b in log.batches_from(wanted[0][0]):
        if b.base_offset > end:
            break
        if any(b.base_offset <= last and b.last_offset >= first for first, last in wanted):
            out.append(b.data)
    return b"".join(out)
