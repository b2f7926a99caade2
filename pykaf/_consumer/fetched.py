"""Fetched record sets, kept as bytes and decoded a piece at a time, under a byte budget.

A Fetch answer may carry far more than the consumer asked for (a broker may ignore
``max_partition_fetch_bytes``). The fetcher does not decode an answer: it only
reads its batch headers (:func:`scan_record_set`) to learn where the next
fetch starts, the leader epochs, and where to cut the bytes into pieces of
about ``max_partition_fetch_bytes``. The partition consumer's reader decodes
one piece when it needs records, so at most one piece of a partition is ever
held as ``Record`` objects.

The bytes a consumer holds, fetched but not yet read, are counted against
``fetch_buffer_bytes`` over all its partitions (:class:`ByteBudget`): while
the count is at or over it, no Fetch is sent; reading gives bytes back and
wakes the fetchers.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pykaf.errors import CorruptRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from pykaf._net.metrics import BatchEvent

# Every format (v0/v1 message sets, v2 batches) starts with an int64 offset and
# an int32 length of what follows; the magic byte is at 16 in all of them.
_ENTRY = struct.Struct(">qi")
_LEGACY_HEADER = 12
_SMALLEST_ENTRY = 14  # a legacy v0 message with neither key nor value
# v2: partitionLeaderEpoch int32 at 12, lastOffsetDelta int32 at 23.
_EPOCH = struct.Struct(">i")
_EPOCH_AT = 12
_MAGIC_AT = 16
_LAST_DELTA_AT = 23
_V2_HEADER = 61
_INT64_MAX = 2**63 - 1


class FetchSource(Protocol):
    """The broker fetcher an answer came from, as the reader sees it when decoding."""

    node_id: int
    aborted_records: int
    batch_hook: Callable[[BatchEvent], object] | None


@dataclass(slots=True)
class Fetched:
    """One partition's record set from one Fetch answer: what the reader decodes, piece by piece.

    Attributes:
        data: the record set's bytes (whole batches only).
        cuts: where each piece ends in ``data``; a piece is one batch or more.
        start: the offset the fetch asked for (earlier records are left out).
        end: the offset to fetch after this answer (the reader's position once it is read).
        aborted: the answer's aborted transactions, (producer id, first offset) pairs.
        last_stable_offset: the answer's last stable offset (-1 if unknown).
        source: the fetcher that got it (counters and the batch hook).
        size: the bytes counted against the consumer's budget.
        piece: how many pieces the reader has decoded.
        done: where the next piece starts in ``data``.
    """

    data: Buffer
    cuts: list[int]
    start: int
    end: int
    aborted: list[tuple[int, int]] = field(default_factory=list)
    last_stable_offset: int = -1
    source: FetchSource | None = None
    size: int = 0
    piece: int = 0
    done: int = 0

    @property
    def exhausted(self) -> bool:
        """Whether every piece was decoded."""
        return self.piece >= len(self.cuts)


@dataclass(slots=True)
class ScannedSet:
    """What the batch headers of one record set tell, without decoding it.

    Attributes:
        cuts: where each piece ends (byte positions, increasing).
        end: the offset the next fetch starts at.
        epochs: (base offset, leader epoch) of each complete batch, in order.
        incomplete: no complete batch, only part of one (a broker that cuts batches).
        partial_size: then, the size the partial batch declares (0 if its header is cut too).
    """

    cuts: list[int]
    end: int
    epochs: list[tuple[int, int]]
    incomplete: bool
    partial_size: int


def scan_record_set(data: Buffer, start: int, limit: int, piece_bytes: int) -> ScannedSet:
    """Read the batch headers of a fetched record set; decode nothing.

    Args:
        data: a partition's ``records`` from a Fetch answer.
        start: the offset that was fetched.
        limit: the last stable offset in read_committed (batches from it on are
            fetched again later, so they are left out), else -1.
        piece_bytes: cut the batches into pieces of at least this many bytes
            (a batch is never split).

    Raises:
        CorruptRecordError: a length too small for a batch, or an unknown magic.
    """
    view = memoryview(data).cast("B")
    n = len(view)
    pos = 0
    piece_start = 0
    cuts: list[int] = []
    epochs: list[tuple[int, int]] = []
    end = start
    partial = 0
    incomplete = False
    while pos < n:
        if n - pos < _LEGACY_HEADER:
            incomplete = True
            break
        offset, length = _ENTRY.unpack_from(view, pos)
        if length < _SMALLEST_ENTRY:
            raise CorruptRecordError(f"record batch length {length} is too small")
        stop = pos + _LEGACY_HEADER + length
        if stop > n:
            partial, incomplete = _LEGACY_HEADER + length, True
            break
        magic = view[pos + _MAGIC_AT]
        if magic == 2:
            if stop - pos < _V2_HEADER:
                raise CorruptRecordError(
                    f"record batch of {stop - pos} bytes is shorter than its header"
                )
            base = offset
            (epoch,) = _EPOCH.unpack_from(view, pos + _EPOCH_AT)
            (delta,) = _EPOCH.unpack_from(view, pos + _LAST_DELTA_AT)
            if delta < 0 or base > _INT64_MAX - 1 - delta:
                raise CorruptRecordError(
                    f"record batch at offset {base}: bad last offset delta {delta}"
                )
            last = base + delta
        elif magic in (0, 1):
            # A legacy entry's offset is its last record's (a compressed wrapper's too).
            base = last = offset
            epoch = -1
        else:
            raise CorruptRecordError(f"unknown record batch magic {magic}")
        if 0 <= limit <= base:
            break  # an open transaction's data, or later: fetched again once stable
        epochs.append((base, epoch))
        pos = stop
        if 0 <= limit <= last:
            end = max(end, limit)  # straddles the last stable offset: only what is below
            break
        end = max(end, last + 1)
        if pos - piece_start >= piece_bytes:
            cuts.append(pos)
            piece_start = pos
    if pos > piece_start:
        cuts.append(pos)
    if cuts:
        return ScannedSet(cuts, end, epochs, False, 0)
    return ScannedSet(cuts, end, epochs, incomplete, partial)


class ByteBudget:
    """The bytes of fetched, unread record sets a consumer holds, against ``fetch_buffer_bytes``.

    Fetchers register a wake-up; when reading brings the count back under the
    limit, every fetcher is woken to send its next Fetch.

    Attributes:
        limit: ``fetch_buffer_bytes``.
        used: the bytes held now.
        peak: the most bytes held at once.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._wakers: list[Callable[[], None]] = []

    def on_room(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever the budget has room again."""
        self._wakers.append(wake)

    @property
    def full(self) -> bool:
        """Whether no more may be fetched until some is read."""
        return self.used >= self.limit

    def take(self, size: int) -> None:
        """``size`` bytes were fetched and are held."""
        self.used += size
        self.peak = max(self.peak, self.used)

    def give_back(self, size: int) -> None:
        """``size`` bytes were read (or dropped): no longer held."""
        was_full = self.full
        self.used -= size
        if was_full and not self.full:
            for wake in self._wakers:
                wake()


__all__ = ["ByteBudget", "FetchSource", "Fetched", "ScannedSet", "scan_record_set"]
