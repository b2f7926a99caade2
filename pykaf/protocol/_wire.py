"""Small wire helpers the generated encoders and decoders call: varints, tag buffers, UUIDs.

The hot paths (one-byte varints, empty tag buffers) are inlined by the code
generator; these functions are the slow or rare paths.
"""

from __future__ import annotations

import struct
from typing import Any
from uuid import UUID, SafeUUID

from pykaf.protocol._errors import MalformedMessageError

ZERO_UUID = UUID(int=0)
_ZERO16 = bytes(16)
_new = object.__new__
_setattr = object.__setattr__
_UNKNOWN = SafeUUID.unknown

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")


def read_uvarint(buf: Any, pos: int, first: int) -> tuple[int, int]:
    """Continue an unsigned varint whose first byte ``first`` (>= 0x80) was read.

    ``pos`` is the position after that byte. Kafka's lengths and tags are
    32-bit, so a varint longer than five bytes is malformed.
    """
    value = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise MalformedMessageError("unsigned varint longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**32) as an unsigned varint."""
    if value < 0 or value > 0xFFFFFFFF:
        raise OverflowError(f"unsigned varint out of range: {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_bytes(value: int) -> bytes:
    """``value`` as an unsigned varint, as bytes."""
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def write_tags(
    out: bytearray,
    known: list[tuple[int, bytearray]] | tuple[()],
    unknown: dict[int, bytes] | None,
) -> None:
    """Append a tag buffer: the known tagged fields and the unknown ones, by tag.

    A known tag wins over an unknown entry with the same number (the object
    was decoded from a version that did not know the tag).
    """
    items: dict[int, bytes | bytearray] = {}
    if unknown:
        items.update(unknown)
    for tag, data in known:
        items[tag] = data
    write_uvarint(out, len(items))
    for tag in sorted(items):
        value = items[tag]
        write_uvarint(out, tag)
        write_uvarint(out, len(value))
        out += value


def read_unknown_tags(buf: Any, pos: int, count: int, end: int) -> tuple[dict[int, bytes], int]:
    """Read ``count`` tagged fields that are all unknown; return them and the new position."""
    tags: dict[int, bytes] = {}
    for _ in range(count):
        tag = buf[pos]
        pos += 1
        if tag > 0x7F:
            tag, pos = read_uvarint(buf, pos, tag)
        size = buf[pos]
        pos += 1
        if size > 0x7F:
            size, pos = read_uvarint(buf, pos, size)
        stop = pos + size
        if stop > end:
            raise MalformedMessageError(f"tagged field {tag} runs past the end of the data")
        tags[tag] = bytes(buf[pos:stop])
        pos = stop
    return tags, pos


def skip_tags(buf: Any, pos: int, end: int) -> int:
    """Skip a whole tag buffer starting at ``pos``; return the position after it."""
    count = buf[pos]
    pos += 1
    if count > 0x7F:
        count, pos = read_uvarint(buf, pos, count)
    if count:
        _, pos = read_unknown_tags(buf, pos, count, end)
    return pos


def uuid_from_bytes(data: bytes) -> UUID:
    """A UUID from 16 bytes, without ``UUID.__init__``'s argument checking."""
    if data == _ZERO16:
        return ZERO_UUID
    u: UUID = _new(UUID)
    _setattr(u, "int", int.from_bytes(data, "big"))
    _setattr(u, "is_safe", _UNKNOWN)
    return u


_ARRAY_STRUCTS: dict[str, dict[int, struct.Struct]] = {}


def array_structs(code: str) -> dict[int, struct.Struct]:
    """The cache of ``struct.Struct`` objects for arrays of format ``code``, by count."""
    return _ARRAY_STRUCTS.setdefault(code, {})


def array_struct(code: str, count: int) -> struct.Struct:
    """A ``struct.Struct`` for ``count`` big-endian values of format ``code`` (cached if small)."""
    s = struct.Struct(f">{count}{code}")
    cache = array_structs(code)
    if count <= 512:
        cache[count] = s
    return s


def run_struct(cache: dict[int, struct.Struct], code: str, count: int, rest: str) -> struct.Struct:
    """The ``struct.Struct`` of ``count`` values of ``code`` then ``rest``, cached if small."""
    s = struct.Struct(f">{count}{code}{rest}")
    if count <= 256:
        cache[count] = s
    return s


def truncated(what: str) -> MalformedMessageError:
    """The error for data that ends too soon."""
    return MalformedMessageError(f"{what}: the data ends too soon")


def bad_length(what: str, length: int) -> MalformedMessageError:
    """The error for a length or count the data cannot hold."""
    return MalformedMessageError(f"{what}: invalid length {length}")
