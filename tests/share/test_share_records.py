"""The share consumer's bookkeeping without a broker: outcomes, batches of them, records."""

from __future__ import annotations

import pytest

import pykaf
from pykaf import protocol as P
from pykaf._share.records import GAP, PendingAcks, ShareRecord, ack_batches
from pykaf.codec import Record

Batch = P.ShareAcknowledgeRequest.AcknowledgementBatch


def test_outcomes_are_kafkas_wire_codes() -> None:
    assert [int(t) for t in pykaf.AcknowledgeType] == [1, 2, 3, 4]
    assert pykaf.ACCEPT is pykaf.AcknowledgeType.ACCEPT and GAP == 0
    assert (pykaf.RELEASE, pykaf.REJECT, pykaf.RENEW) == (2, 3, 4)
    with pytest.raises(ValueError):
        pykaf.AcknowledgeType(9)


def test_consecutive_offsets_share_a_batch_and_one_type_is_sent_once() -> None:
    got = ack_batches({5: 1, 3: 1, 4: 1, 9: 2, 10: 3, 12: 0}, Batch)
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in got] == [
        (3, 5, [1]),  # one outcome for the whole range
        (9, 10, [2, 3]),  # one per offset
        (12, 12, [0]),
    ]
    assert ack_batches({}, Batch) == []


def test_pending_outcomes_a_later_one_wins_and_take_removes() -> None:
    pending = PendingAcks()
    pending.add(("t", 0), 1, 1)
    pending.add(("t", 0), 1, 2)
    pending.add(("t", 1), 7, 3)
    assert len(pending) == 2 and pending.get(("t", 0), 1) == 2
    assert sorted(pending.partitions()) == [("t", 0), ("t", 1)]
    assert pending.take([("t", 0), ("t", 9)]) == {("t", 0): {1: 2}}
    assert pending.partitions() == [("t", 1)]
    pending.drop(("t", 1))
    assert len(pending) == 0 and pending.get(("t", 1), 7) is None


def test_share_record_reads_through_to_the_record() -> None:
    rec = Record(41, 1700, b"k", b"v", [("h", b"x")], topic="t", partition=3)
    share = ShareRecord(rec, 2)
    assert (share.topic, share.partition, share.offset) == ("t", 3, 41)
    assert (share.key, share.value, share.headers, share.timestamp) == (
        b"k",
        b"v",
        [("h", b"x")],
        1700,
    )
    assert share.delivery_count == 2 and share.record is rec
    assert "delivery_count=2" in repr(share)
