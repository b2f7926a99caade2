"""Decode record batches written by a real client (librdkafka) and fetched from Tansu.

The fixtures in tests/data/realclient come from tools/make_realclient_fixtures.py:
``<case>.bin`` is the partition's raw records bytes (every batch, control
batches included, fetched read_uncommitted), ``<case>.json`` what
confluent-kafka's consumer returned for them plus each batch's fixed header
fields. Every test runs on both codec implementations.
"""

from __future__ import annotations

import json
import pathlib
from functools import cache
from types import ModuleType
from typing import Any

import pytest

from pykaf.errors import CorruptRecordError

DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "data" / "realclient"
CASES = sorted(p.stem for p in DATA_DIR.glob("*.json")) if DATA_DIR.is_dir() else []

if not CASES:
    pytest.skip(
        f"no real-client fixtures in {DATA_DIR} (make them with tools/make_realclient_fixtures.py)",
        allow_module_level=True,
    )

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADER_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)


@cache
def load(case: str) -> tuple[dict[str, Any], bytes]:
    doc = json.loads((DATA_DIR / f"{case}.json").read_text())
    raw = (DATA_DIR / doc["records_file"]).read_bytes()
    return doc, raw


def unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def expected_records(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What confluent's read_uncommitted consumer returned, as comparable tuples."""
    return [
        (
            m["offset"],
            m["timestamp"],
            unhex(m["key"]),
            unhex(m["value"]),
            [(name, unhex(value)) for name, value in m["headers"]],
        )
        for m in doc["consumer"]["read_uncommitted"]
    ]


def data_batches(batches: list[Any]) -> list[Any]:
    return [b for b in batches if not b.is_control]


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_records_equal_what_confluent_consumed(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    batches = codec.decode_batches(raw, check_crc=True)
    got = [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers))
        for b in data_batches(batches)
        for r in b.records
    ]
    want = expected_records(doc)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, f"{case}: offset {w[0]}"
    # Header values decode as bytes (or None), names as str.
    for b in data_batches(batches):
        for r in b.records:
            for name, value in r.headers:
                assert type(name) is str
                assert value is None or type(value) is bytes


def test_timestamp_types(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    kinds = {m["timestamp_type"] for m in doc["consumer"]["read_uncommitted"]}
    assert kinds == {"create_time"}
    for b in codec.decode_batches(raw):
        assert b.timestamp_type == codec.TIMESTAMP_CREATE_TIME


def test_batch_headers_match_the_raw_bytes(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    batches = codec.decode_batches(raw, check_crc=True)
    assert len(batches) == len(doc["batches"])
    for b, want in zip(batches, doc["batches"], strict=True):
        got = {name: getattr(b, name) for name in HEADER_FIELDS}
        assert got == {name: want[name] for name in HEADER_FIELDS}
        assert b.size == 12 + want["batch_length"]
        assert len(b.records) == b.record_count


def test_batches_cover_the_fetched_offsets(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    batches = codec.decode_batches(raw, check_crc=True)
    assert len(data_batches(batches)) > 1
    expected_offset = 0
    for b in batches:
        assert b.magic == 2
        assert b.base_offset == expected_offset, "gap or overlap between batches"
        assert b.last_offset == b.base_offset + b.last_offset_delta
        assert b.next_offset == b.last_offset + 1
        # Nothing is compacted: the records fill base_offset..last_offset exactly.
        assert [r.offset for r in b.records] == list(range(b.base_offset, b.next_offset))
        assert b.records[0].timestamp == b.base_timestamp
        assert max(r.timestamp for r in b.records) == b.max_timestamp
        expected_offset = b.next_offset
    assert expected_offset == doc["high_watermark"]
    assert sum(b.size for b in batches) == len(raw)


def test_record_set_whole_and_truncated(codec: ModuleType, case: str) -> None:
    _, raw = load(case)
    whole = codec.decode_record_set(raw, check_crc=True)
    assert not whole.incomplete
    assert whole.consumed == len(raw)
    assert whole.partial_size == 0
    n = len(whole.batches)
    last = whole.batches[-1]
    # What a Fetch response cut off in the middle of the last batch looks like.
    for cut in (1, 12, last.size - 17, last.size - 5):
        part = codec.decode_record_set(raw[: len(raw) - cut], check_crc=True)
        assert part.incomplete
        assert part.consumed == len(raw) - last.size
        if last.size - cut >= 12:  # the partial batch's length field is there
            assert part.partial_size == last.size
        assert [b.base_offset for b in part.batches] == [
            b.base_offset for b in whole.batches[: n - 1]
        ]


def test_crc_is_checked(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    first = doc["batches"][0]
    # Flip a bit in the first batch's records section (covered by the CRC).
    pos = 61 + (first["batch_length"] + 12 - 61) // 2
    bad = bytearray(raw)
    bad[pos] ^= 0x01
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(bytes(bad), check_crc=True)
    # A wrong CRC field itself is caught too.
    bad = bytearray(raw)
    bad[17] ^= 0x80
    with pytest.raises(CorruptRecordError):
        codec.decode_batches(bytes(bad))


def test_compression_matches_the_case(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    for b in codec.decode_batches(raw):
        if b.is_control:
            assert b.compression == "none"
            continue
        assert b.compression == doc["compression"]
        assert b.compression_type == COMPRESSION_CODES[doc["compression"]]
        assert b.attributes & 0x07 == COMPRESSION_CODES[doc["compression"]]


def test_producer_ids_and_sequences(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    batches = data_batches(codec.decode_batches(raw))
    if not doc["idempotent"]:
        for b in batches:
            assert b.producer_id == codec.NO_PRODUCER_ID
            assert b.producer_epoch == -1
            assert b.base_sequence == -1
            assert not b.is_transactional
        return
    next_sequence: dict[tuple[int, int], int] = {}
    for b in batches:
        assert b.producer_id >= 0
        assert b.producer_epoch >= 0
        assert b.base_sequence >= 0
        key = (b.producer_id, b.producer_epoch)
        assert b.base_sequence == next_sequence.get(key, 0), "sequences not consecutive"
        next_sequence[key] = b.base_sequence + b.record_count
        assert b.is_transactional == doc["transactional"]


def test_control_batches(codec: ModuleType, case: str) -> None:
    doc, raw = load(case)
    batches = codec.decode_batches(raw)
    controls = [b for b in batches if b.is_control]
    if not doc["transactional"]:
        assert controls == []
        for b in batches:
            assert b.control_type is None
            assert b.control_type_id == -1
        return
    producer_ids = {b.producer_id for b in data_batches(batches)}
    assert len(producer_ids) == 1
    for b in controls:
        assert b.is_transactional
        assert b.record_count == 1
        assert b.producer_id in producer_ids
        assert b.coordinator_epoch >= 0
        want_id = {"commit": codec.CONTROL_COMMIT, "abort": codec.CONTROL_ABORT}
        assert b.control_type_id == want_id[b.control_type]
    for b in data_batches(batches):
        assert b.is_transactional
        assert b.control_type is None


def txn_of(record: Any) -> int:
    return int(dict(record.headers)["txn"] or b"0")


TXN_CASES = [c for c in CASES if load(c)[0]["transactional"]]


@pytest.mark.parametrize("txn_case", TXN_CASES or [pytest.param(None, marks=pytest.mark.skip)])
def test_transaction_markers_in_order(codec: ModuleType, txn_case: str) -> None:
    _, raw = load(txn_case)
    batches = codec.decode_batches(raw)
    # The log as a sequence: "commit"/"abort" markers and the transaction number
    # of each data batch (from the records' "txn" header).
    layout: list[str | int] = []
    for b in batches:
        if b.is_control:
            layout.append(b.control_type)
        else:
            txns = {txn_of(r) for r in b.records}
            assert len(txns) == 1
            layout.append(txns.pop())
    assert [x for x in layout if isinstance(x, str)] == ["commit", "abort", "commit"]
    assert layout == [1, 1, "commit", 2, "abort", 3, "commit"]


def test_read_committed_from_the_markers(codec: ModuleType, case: str) -> None:
    """What a read_committed consumer must keep, derived from the control batches.

    Tansu sends no aborted-transaction lists, so confluent's read_committed
    consumer got the aborted records too (recorded in the fixture as Tansu's
    behaviour); the markers themselves still say which records to drop.
    """
    doc, raw = load(case)
    batches = codec.decode_batches(raw)
    kept: list[int] = []
    pending: dict[int, list[int]] = {}
    for b in batches:
        if b.is_control:
            offsets = pending.pop(b.producer_id, [])
            if b.control_type == "commit":
                kept.extend(offsets)
        elif b.is_transactional:
            pending.setdefault(b.producer_id, []).extend(r.offset for r in b.records)
        else:
            kept.extend(r.offset for r in b.records)
    assert pending == {}
    consumed = doc["consumer"]["read_uncommitted"]
    if doc["transactional"]:
        committed = [
            m["offset"]
            for m in consumed
            if dict((n, unhex(v)) for n, v in m["headers"]).get("fate") == b"commit"
        ]
        assert sorted(kept) == committed
        assert len(committed) < len(consumed)
    else:
        assert sorted(kept) == [m["offset"] for m in consumed]
    # Tansu's behaviour, recorded by the fixture tool: nothing filtered.
    assert doc["consumer"]["read_committed"] == consumed
