"""TransactionFilter on crafted fetch answers: real encoded batches, decoded as a fetch would.

A ``Log`` writes a partition as a broker would (data batches, transactional
or not, and COMMIT/ABORT markers at consecutive offsets) and remembers which
producers' transactions were aborted, so each test can cut "fetch answers"
out of it, with the aborted-transactions list a broker would send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykaf import _codec as codec_cy
from pykaf import _codec_py as codec_py
from pykaf import errors
from pykaf._consumer.read_committed import TransactionFilter
from pykaf.codec import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchBuilder,
    decode_record_set,
    encode_control_batch,
)


@dataclass
class Log:
    """One partition's log, written batch by batch."""

    data: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base, last, bytes)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, last)
    open_txn: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    next: int = 0

    def write(self, values: list[bytes], pid: int = -1, txn: bool = False) -> None:
        builder = BatchBuilder()
        for v in values:
            builder.append(1_700_000_000_000, None, v)
        if txn:
            self.open_txn.setdefault(pid, self.next)
        raw = builder.build(
            base_offset=self.next,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            is_transactional=txn,
        )
        self.data.append((self.next, self.next + len(values) - 1, raw))
        self.next += len(values)

    def end(self, pid: int, commit: bool) -> None:
        raw = encode_control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=pid,
            producer_epoch=0,
            timestamp=1_700_000_000_000,
            base_offset=self.next,
        )
        first = self.open_txn.pop(pid, self.next)
        if not commit:
            self.aborted.append((pid, first, self.next))
        self.data.append((self.next, self.next, raw))
        self.next += 1

    @property
    def lso(self) -> int:
        """The first offset of the oldest open transaction, or the end of the log."""
        return min(self.open_txn.values(), default=self.next)

    def fetch(
        self, offset: int, max_batches: int = 1000
    ) -> tuple[list[Any], list[tuple[int, int]]]:
        """The batches from the one holding ``offset``, and the aborted list a broker sends."""
        chosen = [(b, last, raw) for b, last, raw in self.data if last >= offset][:max_batches]
        raw = b"".join(r for _, _, r in chosen)
        batches = decode_record_set(raw).batches if raw else []
        end = chosen[-1][1] if chosen else offset
        # A broker lists every aborted transaction overlapping the fetched range.
        aborted = [
            (pid, first) for pid, first, last in self.aborted if last >= offset and first <= end
        ]
        return batches, aborted


def consume_all(
    log: Log, isolation: str = "read_committed", max_batches: int = 1000
) -> tuple[list[bytes], int]:
    """Fetch the whole log ``max_batches`` at a time: the values handed out, the end offset."""
    filt = TransactionFilter(isolation)
    offset, out = 0, []
    for _ in range(10_000):
        batches, aborted = log.fetch(offset, max_batches)
        if not batches:
            break
        lso = log.lso if isolation == "read_committed" else -1
        result = filt.filter(batches, aborted, lso, offset)
        out.extend(r.value for r in result.records)
        assert all(r.offset >= offset for r in result.records)
        assert result.next_offset >= offset
        if result.next_offset == offset:
            break  # held back by the last stable offset
        offset = result.next_offset
    return out, offset


def test_plain_batches_pass_through_and_the_offset_advances() -> None:
    log = Log()
    log.write([b"a", b"b"])
    log.write([b"c"])
    batches, aborted = log.fetch(0)
    result = TransactionFilter("read_committed").filter(batches, aborted, log.next, 0)
    assert [r.value for r in result.records] == [b"a", b"b", b"c"]
    assert [r.offset for r in result.records] == [0, 1, 2]
    assert result.next_offset == 3


def test_records_before_the_fetch_offset_are_left_out() -> None:
    log = Log()
    log.write([b"a", b"b", b"c"])
    batches, _ = log.fetch(1)
    result = TransactionFilter("read_uncommitted").filter(batches, [], -1, 1)
    assert [r.value for r in result.records] == [b"b", b"c"]
    assert result.next_offset == 3


def test_an_aborted_transaction_is_dropped_and_a_committed_one_kept() -> None:
    log = Log()
    log.write([b"t1-a", b"t1-b"], pid=7, txn=True)
    log.end(7, commit=False)
    log.write([b"t2-a"], pid=7, txn=True)
    log.end(7, commit=True)
    batches, aborted = log.fetch(0)
    assert aborted == [(7, 0)]
    result = TransactionFilter().filter(batches, aborted, log.lso, 0)
    assert [r.value for r in result.records] == [b"t2-a"]
    assert result.next_offset == log.next == 5  # past both markers
    assert result.skipped_aborted == 2
    assert result.skipped_control == 2


def test_read_uncommitted_sees_aborted_data_but_never_markers() -> None:
    log = Log()
    log.write([b"x"], pid=7, txn=True)
    log.end(7, commit=False)
    log.write([b"y"])
    values, end = consume_all(log, "read_uncommitted")
    assert values == [b"x", b"y"]
    assert end == 3


def test_several_producers_interleaved() -> None:
    log = Log()
    log.write([b"p1-1"], pid=1, txn=True)  # aborted later
    log.write([b"p2-1"], pid=2, txn=True)  # committed later
    log.write([b"plain-1"])
    log.write([b"p1-2"], pid=1, txn=True)
    log.write([b"p3-1"], pid=3, txn=True)  # aborted later
    log.end(2, commit=True)
    log.write([b"p2-2"], pid=2, txn=True)  # a second transaction of p2, aborted
    log.end(1, commit=False)
    log.write([b"p1-3"], pid=1, txn=True)  # p1 again, after its abort: committed
    log.end(3, commit=False)
    log.end(2, commit=False)
    log.end(1, commit=True)
    log.write([b"plain-2"])
    values, end = consume_all(log)
    assert values == [b"p2-1", b"plain-1", b"p1-3", b"plain-2"]
    assert end == log.next
    # Uncommitted: every data record, in offset order.
    everything, _ = consume_all(log, "read_uncommitted")
    assert everything == [
        b"p1-1",
        b"p2-1",
        b"plain-1",
        b"p1-2",
        b"p3-1",
        b"p2-2",
        b"p1-3",
        b"plain-2",
    ]


@pytest.mark.parametrize("max_batches", [1, 2, 3])
def test_a_transaction_spanning_fetches(max_batches: int) -> None:
    log = Log()
    log.write([b"keep-0"])
    for i in range(4):
        log.write([b"aborted-%d" % i], pid=9, txn=True)
    log.write([b"other"], pid=4, txn=True)
    log.end(4, commit=True)
    log.end(9, commit=False)
    log.write([b"after"], pid=9, txn=True)
    log.end(9, commit=True)
    values, end = consume_all(log, max_batches=max_batches)
    assert values == [b"keep-0", b"other", b"after"]
    assert end == log.next


def test_a_spanning_transaction_when_the_broker_lists_it_only_once() -> None:
    # The state lives on between fetches: a broker that named the aborted
    # transaction only in the first answer still gets it dropped throughout.
    log = Log()
    for i in range(3):
        log.write([b"a%d" % i], pid=5, txn=True)
    log.end(5, commit=False)
    log.write([b"b"])
    filt = TransactionFilter()
    batches, aborted = log.fetch(0, 1)
    assert aborted == [(5, 0)]
    first = filt.filter(batches, aborted, log.lso, 0)
    assert first.records == [] and first.next_offset == 1
    assert filt.aborted_producers == {5}
    offset, out = 1, []
    while offset < log.next:
        batches, _ = log.fetch(offset, 1)
        result = filt.filter(batches, [], log.lso, offset)
        out.extend(r.value for r in result.records)
        offset = result.next_offset
    assert out == [b"b"]
    assert filt.aborted_producers == set()


def test_markers_without_data() -> None:
    log = Log()
    log.end(3, commit=False)  # an abort of a transaction that wrote nothing here
    log.end(4, commit=True)
    log.write([b"v"], pid=3, txn=True)
    log.end(3, commit=True)
    batches, aborted = log.fetch(0)
    result = TransactionFilter().filter(batches, aborted, log.lso, 0)
    assert [r.value for r in result.records] == [b"v"]
    assert result.next_offset == log.next
    assert result.skipped_control == 3
    # Only markers in the answer: nothing handed out, but the position moves on.
    only_markers = Log()
    only_markers.end(1, commit=True)
    only_markers.end(2, commit=False)
    batches, aborted = only_markers.fetch(0)
    result = TransactionFilter().filter(batches, aborted, only_markers.lso, 0)
    assert result.records == [] and result.next_offset == 2


def test_nothing_at_or_above_the_last_stable_offset() -> None:
    log = Log()
    log.write([b"before"])
    log.write([b"open-1", b"open-2"], pid=2, txn=True)  # still open: LSO = 1
    log.write([b"plain-after"])
    assert log.lso == 1
    filt = TransactionFilter()
    batches, aborted = log.fetch(0)
    result = filt.filter(batches, aborted, log.lso, 0)
    assert [r.value for r in result.records] == [b"before"]
    assert result.next_offset == 1  # waits at the LSO
    # The transaction commits: the next fetch from the LSO sees it all.
    log.end(2, commit=True)
    batches, aborted = log.fetch(1)
    result = filt.filter(batches, aborted, log.lso, 1)
    assert [r.value for r in result.records] == [b"open-1", b"open-2", b"plain-after"]
    assert result.next_offset == log.next
    # read_uncommitted never waits for the LSO.
    uncommitted = TransactionFilter("read_uncommitted")
    again = Log()
    again.write([b"x"], pid=2, txn=True)
    batches, _ = again.fetch(0)
    assert [r.value for r in uncommitted.filter(batches, [], 0, 0).records] == [b"x"]


def test_a_batch_straddling_the_last_stable_offset() -> None:
    log = Log()
    log.write([b"a", b"b", b"c", b"d"])
    batches, _ = log.fetch(0)
    result = TransactionFilter().filter(batches, [], 2, 0)
    assert [r.value for r in result.records] == [b"a", b"b"]
    assert result.next_offset == 2
    result = TransactionFilter().filter(batches, [], 4, 2)
    assert [r.value for r in result.records] == [b"c", b"d"]


def test_reset_forgets_aborted_producers() -> None:
    log = Log()
    log.write([b"a"], pid=5, txn=True)
    filt = TransactionFilter()
    batches, _ = log.fetch(0)
    filt.filter(batches, [(5, 0)], log.next, 0)
    assert filt.aborted_producers == {5}
    filt.reset()
    assert filt.aborted_producers == set()
    # After the reset the same batch, with no aborted list, is handed out.
    assert [r.value for r in filt.filter(batches, [], log.next, 0).records] == [b"a"]


def test_the_decoded_list_is_never_modified() -> None:
    log = Log()
    log.write([b"a"])
    log.write([b"b"])
    batches, _ = log.fetch(0)
    first = list(batches[0].records)  # type: ignore[attr-defined]
    result = TransactionFilter().filter(batches, [], -1, 0)
    assert [r.value for r in result.records] == [b"a", b"b"]
    assert batches[0].records == first  # type: ignore[attr-defined]


def test_an_unknown_isolation_level_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="isolation_level"):
        TransactionFilter("read_everything")


def test_markers_and_aborted_data_above_the_last_stable_offset_wait_too() -> None:
    # Whatever lies at or above the LSO is left for a later fetch, skipped
    # batches included: the position never passes the LSO.
    log = Log()
    log.write([b"a"])
    log.write([b"x"], pid=6, txn=True)
    log.end(6, commit=False)
    log.end(8, commit=True)
    batches, aborted = log.fetch(0)
    filt = TransactionFilter()
    result = filt.filter(batches, aborted, 1, 0)
    assert [r.value for r in result.records] == [b"a"]
    assert result.next_offset == 1
    assert filt.aborted_producers == set()  # the pair waits until its data is reached
    result = filt.filter(batches, aborted, 2, 1)
    assert result.records == [] and result.next_offset == 2  # x dropped, its ABORT waits
    assert filt.aborted_producers == {6}
    result = filt.filter(batches, aborted, 4, 2)
    assert result.records == [] and result.next_offset == 4
    assert filt.aborted_producers == set()


# -- the columnar decoder's selector applies the same rules ------------------------

_op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 4), st.just(0)),
    st.tuples(st.just("txn"), st.integers(1, 4), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.just(0), st.integers(1, 3)),
    st.tuples(st.just("abort"), st.just(0), st.integers(1, 3)),
)


def _log_of(ops: list[tuple[str, int, int]]) -> Log:
    log, n = Log(), 0
    for kind, count, pid in ops:
        if kind in ("plain", "txn"):
            log.write([b"%d" % (n + i) for i in range(count)], pid if kind == "txn" else -1,
                      kind == "txn")  # fmt: skip
            n += count
        elif pid in log.open_txn:
            log.end(pid, commit=kind == "commit")
    return log


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(_op, min_size=1, max_size=14),
    isolation=st.sampled_from(["read_committed", "read_uncommitted"]),
    max_batches=st.integers(1, 4),
    start=st.integers(0, 6),
    lso_back=st.integers(0, 3),
)
def test_the_columnar_selector_agrees_with_filter(
    ops: list[tuple[str, int, int]], isolation: str, max_batches: int, start: int, lso_back: int
) -> None:
    """Fetch the same log through filter() and through decode_columns(select=...), side by side.

    Both codecs; fetches that start inside a batch and last stable offsets
    inside a batch included. Records, next offsets, skip counts and the
    transaction state must match after every fetch.
    """
    log = _log_of(ops)
    for codec in (codec_py, codec_cy):
        rows, cols = TransactionFilter(isolation), TransactionFilter(isolation)
        offset = min(start, log.next)
        for _ in range(50):
            batches, aborted = log.fetch(offset, max_batches)
            if not batches:
                break
            lso = max(offset, log.lso - lso_back) if isolation == "read_committed" else -1
            raw = b"".join(r for _, last, r in log.data if last >= offset)
            want = rows.filter(batches, aborted, lso, offset)
            select = cols.selector(aborted, lso, offset)
            # The same batches the fetch decoded (decode_columns reads them all).
            columns = codec.decode_columns(raw[: sum(b.size for b in batches)], select=select)[0]
            assert list(columns.offsets) == [r.offset for r in want.records]
            assert [columns.value(i) for i in range(len(columns))] == [
                r.value for r in want.records
            ]
            assert select.next_offset == want.next_offset
            assert (select.skipped_aborted, select.skipped_control) == (
                want.skipped_aborted,
                want.skipped_control,
            )
            assert cols.aborted_producers == rows.aborted_producers
            if want.next_offset == offset:
                break
            offset = want.next_offset
