"""Build valid record batches, damage them, and compare what the two codecs make of them.

Shared by ``test_twins_agree.py`` (Hypothesis drives the choices) and
``tools/twin_probe.py`` (a seeded random generator drives many more). A
"plan" is plain data, so either driver can produce one:

* the batch: records (offset/timestamp deltas, key, value, headers), header
  fields (base offset and timestamps near the int64 limits included), codec,
  control or not;
* the damage: a list of mutations, each applied to the uncompressed records
  section (before compression, so compressed batches get damaged records
  rather than only undecompressable bytes) or to the finished batch;
* whether to rewrite batchLength after the damage (else insertions and
  deletions mostly produce "incomplete" or bad-length results).

The CRC is always re-sealed, so the damage gets past the CRC check.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import codec_wire as w

from pykaf import _compression

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: (offset, struct format) of every v2 batch header field after the length.
HEADER_FIELDS: tuple[tuple[int, str], ...] = (
    (w.BASE_OFFSET, "q"),
    (w.BATCH_LENGTH, "i"),
    (w.PARTITION_LEADER_EPOCH, "i"),
    (w.MAGIC, "b"),
    (w.ATTRIBUTES, "h"),
    (w.LAST_OFFSET_DELTA, "i"),
    (w.BASE_TIMESTAMP, "q"),
    (w.MAX_TIMESTAMP, "q"),
    (w.PRODUCER_ID, "q"),
    (w.PRODUCER_EPOCH, "h"),
    (w.BASE_SEQUENCE, "i"),
    (w.RECORD_COUNT, "i"),
)


def extremes(fmt: str) -> tuple[int, ...]:
    """The edge values of a signed big-endian field of struct format ``fmt``."""
    bits = struct.calcsize(fmt) * 8
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return (lo, lo + 1, -2, -1, 0, 1, 2, 7, 8, hi - 1, hi)


@dataclass
class RecordSpec:
    """One record of a batch to build (deltas are free: they need not be consistent)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0


@dataclass
class Mutation:
    """One piece of damage.

    ``kind`` is "flip" (xor ``arg`` into the byte at ``pos``), "set" (write byte
    ``arg``), "insert" (insert ``data``), "delete" (remove ``arg`` bytes),
    "truncate" (cut at ``pos``) or "field" (write ``arg`` into header field
    number ``pos`` of :data:`HEADER_FIELDS`). Positions wrap around the target's
    length, so any int is valid.
    """

    kind: str
    pos: int
    arg: int = 0
    data: bytes = b""
    in_records: bool = False  # apply to the uncompressed records section


@dataclass
class Plan:
    """A batch to build and the damage to do to it."""

    records: list[RecordSpec]
    codec: int = 0
    base_offset: int = 0
    base_timestamp: int = 0
    max_timestamp: int | None = None
    attributes: int = 0  # extra bits: timestamp type, transactional, control
    producer_id: int = -1
    mutations: list[Mutation] = field(default_factory=list)
    fix_length: bool = True
    legacy_magic: int | None = None  # 0 or 1: a legacy message set instead of a v2 batch


def _apply(buf: bytearray, m: Mutation, *, header: bool) -> bytearray:
    n = len(buf)
    if m.kind == "field":
        if not header:
            return buf
        off, fmt = HEADER_FIELDS[m.pos % len(HEADER_FIELDS)]
        size = struct.calcsize(fmt)
        if off + size <= n:
            bits = size * 8
            value = ((m.arg + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1)
            struct.pack_into(">" + fmt, buf, off, value)
        return buf
    if m.kind == "insert":
        p = m.pos % (n + 1)
        return buf[:p] + m.data + buf[p:]
    if m.kind == "truncate":
        return buf[: m.pos % (n + 1)]
    if n == 0:
        return buf
    p = m.pos % n
    if m.kind == "flip":
        buf[p] ^= (m.arg & 0xFF) or 1
    elif m.kind == "set":
        buf[p] = m.arg & 0xFF
    elif m.kind == "delete":
        del buf[p : p + max(1, m.arg)]
    return buf


def _wrap64(v: int) -> int:
    return ((v + 2**63) % 2**64) - 2**63


def _build_legacy(plan: Plan, magic: int) -> bytes:
    """A legacy message set (compressed in one wrapper unless codec is none or zstd)."""
    codec = plan.codec if plan.codec in (1, 2, 3) else 0
    msgs = bytearray()
    for r in plan.records:
        offset = _wrap64(plan.base_offset + r.offset_delta)
        msgs += w.legacy_message(
            r.offset_delta if codec and magic == 1 else offset,
            r.key,
            r.value,
            magic=magic,
            timestamp=_wrap64(plan.base_timestamp + r.timestamp_delta),
        )
    for m in plan.mutations:
        if m.in_records:
            msgs = _apply(msgs, m, header=False)
    if not codec:
        data = msgs
    else:
        last = plan.records[-1].offset_delta if plan.records else 0
        data = bytearray(
            w.legacy_message(
                _wrap64(plan.base_offset + last),
                None,
                _compression.compress(codec, bytes(msgs)),
                magic=magic,
                timestamp=plan.base_timestamp,
                attributes=codec | (plan.attributes & 0x08),
            )
        )
    for m in plan.mutations:
        if not m.in_records and m.kind != "field":
            data = _apply(data, m, header=False)
    return bytes(data)


def build(plan: Plan) -> bytes:
    """The damaged batch ``plan`` describes, with its CRC re-sealed (v2 only).

    Legacy message sets keep their damaged CRCs: decode them with
    ``check_crc=False`` (see :func:`snapshot`).
    """
    if plan.legacy_magic is not None:
        return _build_legacy(plan, plan.legacy_magic)
    section = bytearray()
    for r in plan.records:
        section += w.record(
            r.offset_delta,
            r.timestamp_delta,
            r.key,
            r.value,
            r.headers,
            attributes=r.attributes,
        )
    for m in plan.mutations:
        if m.in_records:
            section = _apply(section, m, header=False)
    body = bytes(section)
    if plan.codec:
        body = _compression.compress(plan.codec, body)
    data = bytearray(
        w.batch(
            body,
            count=len(plan.records),
            base_offset=plan.base_offset,
            attributes=plan.codec | plan.attributes,
            base_timestamp=plan.base_timestamp,
            max_timestamp=plan.max_timestamp,
            producer_id=plan.producer_id,
        )
    )
    for m in plan.mutations:
        if not m.in_records:
            data = _apply(data, m, header=True)
    if plan.fix_length and len(data) >= w.RECORDS:
        struct.pack_into(">i", data, w.BATCH_LENGTH, len(data) - 12)
    if len(data) >= w.ATTRIBUTES:
        data = bytearray(w.fix_crc(data))
    return bytes(data)


_BATCH_FIELDS = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "record_count", "control_type_id", "coordinator_epoch", "size",
    "last_offset", "next_offset", "compression", "compression_type", "timestamp_type",
    "is_transactional", "is_control", "control_type",
)  # fmt: skip


def snapshot(codec: ModuleType, data: bytes, *, check_crc: bool = True) -> Any:
    """Everything ``codec`` makes of ``data``: the decoded set as plain values, or the error class.

    Any exception counts as an outcome (its class), so a twin raising, say,
    OverflowError where the other raises CorruptRecordError is a disagreement.
    """
    try:
        rs = codec.decode_record_set(data, check_crc=check_crc, topic="t", partition=3)
    except Exception as exc:
        return ("error", type(exc).__name__)
    batches = []
    for b in rs.batches:
        fields = tuple((name, getattr(b, name)) for name in _BATCH_FIELDS)
        records = tuple(
            (
                r.offset,
                r.timestamp,
                r.key,
                r.value,
                tuple(r.headers),
                r.attributes,
                r.topic,
                r.partition,
                r.timestamp_type,
            )
            for r in b.records
        )
        batches.append((fields, records))
    return ("ok", tuple(batches), rs.incomplete, rs.consumed, rs.partial_size)


def first_difference(a: Any, b: Any) -> str:
    """A short description of where two snapshots differ (for failure messages)."""
    if a[0] != b[0] or a[0] == "error":
        left = a if a[0] == "error" else "decoded"
        right = b if b[0] == "error" else "decoded"
        return f"cython: {left}, python: {right}"
    if a[2:] != b[2:]:
        return f"record set: cython {a[2:]}, python {b[2:]}"
    for (fa, ra), (fb, rb) in zip(a[1], b[1], strict=False):
        for (name, va), (_n, vb) in zip(fa, fb, strict=True):
            if va != vb:
                return f"batch field {name}: cython {va!r}, python {vb!r}"
        for i, (x, y) in enumerate(zip(ra, rb, strict=False)):
            if x != y:
                return f"record {i}: cython {x!r}, python {y!r}"
    return "batch count" if len(a[1]) != len(b[1]) else "equal"


def column_snapshot(codec: ModuleType, data: bytes, *, check_crc: bool = True) -> Any:
    """What ``decode_columns`` makes of ``data``: its records as plain values, or the error."""
    try:
        c = codec.decode_columns(data, check_crc=check_crc, topic="t", partition=3)[0]
    except Exception as exc:
        return ("error", type(exc).__name__)
    return (
        "ok",
        tuple(
            (
                c.offsets[i],
                c.timestamps[i],
                c.key(i),
                c.value(i),
                tuple(c.headers(i)),
                c.timestamp_types[i],
            )
            for i in range(len(c))
        ),
    )


def rows_of(snap: Any) -> Any:
    """A :func:`snapshot`'s records as :func:`column_snapshot` gives them (or its error)."""
    if snap[0] == "error":
        return snap
    return ("ok", tuple((*r[:5], r[8]) for _, records in snap[1] for r in records))
