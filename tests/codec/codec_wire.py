"""An independent, deliberately naive model of Kafka's wire formats for the codec tests.

Nothing here imports pykaf's codec: these helpers assemble and parse record
batches (magic 2) and legacy messages (magic 0/1) straight from Kafka's
specification, with no range checks, so tests can also forge malformed input
(wrong lengths, huge counts, over-long varints) that still carries a valid CRC.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import crc32c as _crc32c

HeaderSpec = tuple[str | bytes, bytes | None]

# Byte offsets of the v2 batch header fields (Kafka's DefaultRecordBatch).
BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORD_COUNT = 57
RECORDS = 61

ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


def crc32c(data: bytes) -> int:
    """CRC-32C from the reference ``crc32c`` package."""
    return int(_crc32c.crc32c(data))


def zigzag(n: int) -> int:
    """Zigzag-encode a signed 64-bit integer."""
    return (n << 1) ^ (n >> 63)


def unzigzag(n: int) -> int:
    """Invert :func:`zigzag`."""
    return (n >> 1) ^ -(n & 1)


def uvarint(n: int) -> bytes:
    """Unsigned LEB128 with no length limit (so tests can forge over-long values)."""
    if n < 0:
        raise ValueError(n)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n: int) -> bytes:
    """Zigzag varint (or varlong: the encoding is the same)."""
    return uvarint(zigzag(n))


def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Parse an unsigned LEB128 value with no length limit."""
    value = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Parse a zigzag varint/varlong."""
    value, pos = read_uvarint(data, pos)
    return unzigzag(value), pos


def _nullable(b: bytes | None) -> bytes:
    if b is None:
        return varint(-1)
    return varint(len(b)) + b


def record_body(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[HeaderSpec] = (),
    *,
    attributes: int = 0,
) -> bytes:
    """One v2 record without its length prefix."""
    out = bytearray([attributes & 0xFF])
    out += varint(timestamp_delta)
    out += varint(offset_delta)
    out += _nullable(key)
    out += _nullable(value)
    out += varint(len(headers))
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else hkey
        out += varint(len(kb)) + kb
        out += _nullable(hvalue)
    return bytes(out)


def record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[HeaderSpec] = (),
    *,
    attributes: int = 0,
) -> bytes:
    """One v2 record with its varint length prefix."""
    body = record_body(offset_delta, timestamp_delta, key, value, headers, attributes=attributes)
    return varint(len(body)) + body


def batch(
    records: bytes,
    *,
    count: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 0,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
    crc: int | None = None,
    batch_length: int | None = None,
) -> bytes:
    """A v2 record batch around an already-encoded records section."""
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            count - 1 if last_offset_delta is None else last_offset_delta,
            base_timestamp,
            base_timestamp if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    head = struct.pack(
        ">qiibI",
        base_offset,
        len(tail) + 9 if batch_length is None else batch_length,
        partition_leader_epoch,
        magic,
        crc32c(tail) if crc is None else crc,
    )
    return head + tail


def fix_crc(data: bytes | bytearray) -> bytes:
    """Recompute a v2 batch's CRC-32C (bytes 17..21) over bytes 21..end."""
    buf = bytearray(data)
    struct.pack_into(">I", buf, CRC, crc32c(bytes(buf[ATTRIBUTES:])))
    return bytes(buf)


def fix_length(data: bytes | bytearray) -> bytes:
    """Rewrite a v2 batch's batchLength to match its actual size, then its CRC."""
    buf = bytearray(data)
    struct.pack_into(">i", buf, BATCH_LENGTH, len(buf) - 12)
    return fix_crc(buf)


def patch(data: bytes, offset: int, fmt: str, value: int, *, recrc: bool = True) -> bytes:
    """Overwrite one big-endian header field; recompute the CRC unless told not to."""
    buf = bytearray(data)
    struct.pack_into(">" + fmt, buf, offset, value)
    return fix_crc(buf) if recrc else bytes(buf)


def with_records(data: bytes, records: bytes, attributes: int | None = None) -> bytes:
    """Replace a v2 batch's records section (and optionally attributes); fix length and CRC."""
    buf = bytearray(data[:RECORDS]) + records
    if attributes is not None:
        struct.pack_into(">h", buf, ATTRIBUTES, attributes)
    return fix_length(buf)


@dataclass
class ParsedBatch:
    """A v2 batch split into its fields by :func:`parse_batch`."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: bytes = field(repr=False)


def parse_batch(data: bytes) -> ParsedBatch:
    """Split one v2 batch (exactly ``data``) into its header fields and records section."""
    fields = struct.unpack_from(">qiibIhiqqqhii", data, 0)
    return ParsedBatch(*fields, records=bytes(data[RECORDS:]))


@dataclass
class ParsedRecord:
    """One v2 record as :func:`parse_records` found it."""

    length: int
    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def parse_records(section: bytes, count: int) -> list[ParsedRecord]:
    """Parse exactly ``count`` v2 records filling ``section`` (asserts on any slack)."""
    out: list[ParsedRecord] = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(section, pos)
        start = pos
        attributes = section[pos]
        pos += 1
        ts_delta, pos = read_varint(section, pos)
        off_delta, pos = read_varint(section, pos)
        klen, pos = read_varint(section, pos)
        key = None if klen < 0 else section[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = read_varint(section, pos)
        value = None if vlen < 0 else section[pos : pos + vlen]
        pos += max(vlen, 0)
        nh, pos = read_varint(section, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(nh):
            hk, pos = read_varint(section, pos)
            hkey = section[pos : pos + hk].decode()
            pos += hk
            hv, pos = read_varint(section, pos)
            hval = None if hv < 0 else section[pos : pos + hv]
            pos += max(hv, 0)
            headers.append((hkey, hval))
        assert pos - start == length, "record length prefix disagrees with its fields"
        out.append(ParsedRecord(length, attributes, ts_delta, off_delta, key, value, headers))
    assert pos == len(section), "bytes left over after the last record"
    return out


# -- legacy message sets (magic 0 and 1) --------------------------------------


def _legacy_bytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int,
    timestamp: int = 0,
    attributes: int = 0,
    crc: int | None = None,
) -> bytes:
    """One legacy message with its log overhead (offset int64 + size int32)."""
    body = struct.pack(">bb", magic, attributes)
    if magic >= 1:
        body += struct.pack(">q", timestamp)
    body += _legacy_bytes(key) + _legacy_bytes(value)
    checksum = zlib.crc32(body) if crc is None else crc
    message = struct.pack(">I", checksum) + body
    return struct.pack(">qi", offset, len(message)) + message


@dataclass
class LegacyMessage:
    """A legacy message as :func:`parse_legacy` found it."""

    offset: int
    crc: int
    magic: int
    attributes: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None


def parse_legacy(data: bytes) -> list[LegacyMessage]:
    """Parse a whole legacy message set (no decompression)."""
    out: list[LegacyMessage] = []
    pos = 0
    while pos < len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        pos += 12
        end = pos + size
        crc, magic, attributes = struct.unpack_from(">Ibb", data, pos)
        assert zlib.crc32(data[pos + 4 : end]) == crc, "legacy CRC mismatch"
        p = pos + 6
        timestamp = None
        if magic >= 1:
            (timestamp,) = struct.unpack_from(">q", data, p)
            p += 8
        fields: list[bytes | None] = []
        for _ in range(2):
            (n,) = struct.unpack_from(">i", data, p)
            p += 4
            fields.append(None if n < 0 else data[p : p + n])
            p += max(n, 0)
        assert p == end, "legacy message size disagrees with its fields"
        out.append(LegacyMessage(offset, crc, magic, attributes, timestamp, *fields))
        pos = end
    return out


# -- comparing decoded objects -------------------------------------------------


def rec_tuple(r: Any) -> tuple[int, int, bytes | None, bytes | None, list[Any]]:
    """A decoded Record as a plain tuple for comparisons."""
    return (r.offset, r.timestamp, r.key, r.value, list(r.headers))
