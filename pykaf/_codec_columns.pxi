# Included by _codec.pyx: record batches decoded straight into columns.
#
# decode_columns walks a record set as decode_record_set does, with the same
# checks and errors, but writes each record's offset, timestamp, key, value
# and headers into growable C buffers in Arrow's layouts instead of making a
# Record. Control batches and legacy messages (tiny or rare) go through the
# row decoder and are then appended. The buffers are exported read-only
# through the buffer protocol and never written again once handed out.

from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdlib cimport free, realloc
from libc.string cimport memmove, memset

from pykaf._column_batch import ColumnBatch as _ColumnBatch
from pykaf.errors import RecordBatchTooLargeError

KEEP_ALL = (-(1 << 63), (1 << 63) - 1)
KEEP_NONE = (1, 0)

cdef char _EMPTY_BYTE[1]

# A few large freed column buffers are kept for the next decode. Each decode
# makes new buffers of about a piece's size; malloc serves those with fresh
# mmap()s, and touching their pages cost about a fifth of the decode. Blocks of
# at least _CACHE_MIN bytes, at most _CACHE_BLOCKS of them and _CACHE_BYTES in
# all, are kept (the GIL guards these globals).
DEF _CACHE_BLOCKS = 4
DEF _CACHE_MIN = 262144
DEF _CACHE_BYTES = 33554432
cdef char* _cache_ptr[_CACHE_BLOCKS]
cdef Py_ssize_t _cache_cap[_CACHE_BLOCKS]
cdef int _cache_count = 0
cdef Py_ssize_t _cache_total = 0


cdef char* _cache_take(Py_ssize_t want, Py_ssize_t* cap) noexcept:
    """The smallest kept block of at least ``want`` bytes (NULL if none); ``cap`` gets its size."""
    global _cache_count, _cache_total
    cdef int i, best = -1
    cdef char* block
    for i in range(_cache_count):
        if _cache_cap[i] >= want and (best < 0 or _cache_cap[i] < _cache_cap[best]):
            best = i
    if best < 0:
        return NULL
    block = _cache_ptr[best]
    cap[0] = _cache_cap[best]
    _cache_total -= cap[0]
    _cache_count -= 1
    _cache_ptr[best] = _cache_ptr[_cache_count]
    _cache_cap[best] = _cache_cap[_cache_count]
    return block


cdef bint _cache_keep(char* block, Py_ssize_t cap) noexcept:
    """Keep ``block`` for reuse if there is room; False if the caller must free it."""
    global _cache_count, _cache_total
    if cap < _CACHE_MIN or _cache_count >= _CACHE_BLOCKS or _cache_total + cap > _CACHE_BYTES:
        return False
    _cache_ptr[_cache_count] = block
    _cache_cap[_cache_count] = cap
    _cache_count += 1
    _cache_total += cap
    return True


@cython.final
@cython.auto_pickle(False)
cdef class _Buf:
    """A growable byte buffer, exported read-only (format "B") once filled."""

    cdef char* ptr
    cdef Py_ssize_t size
    cdef Py_ssize_t cap
    cdef Py_ssize_t exports
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        if self.ptr != NULL and not _cache_keep(self.ptr, self.cap):
            free(self.ptr)

    cdef inline int reserve(self, Py_ssize_t extra) except -1:
        if self.size + extra <= self.cap:
            return 0
        return self._grow(extra)

    cdef int _grow(self, Py_ssize_t extra) except -1:
        if self.exports:
            raise BufferError("a column buffer cannot grow while it is exported")
        cdef Py_ssize_t want = self.size + extra
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else 256
        cdef char* grown
        if cap < want:
            cap = want
        if self.ptr == NULL and cap >= _CACHE_MIN:
            grown = _cache_take(cap, &cap)
            if grown != NULL:
                self.ptr = grown
                self.cap = cap
                return 0
            cap = (cap + (cap >> 3) + 65535) & ~(<Py_ssize_t>65535)  # a later, larger piece fits
        grown = <char*>realloc(self.ptr, cap)
        if grown == NULL:
            raise MemoryError()
        self.ptr = grown
        self.cap = cap
        return 0

    cdef void trim(self) noexcept:
        """Give back the room beyond ``size`` (before the buffer is exported)."""
        cdef char* shrunk
        if self.exports or self.size == 0 or self.cap - self.size <= (self.cap >> 2):
            return  # a quarter or less unused: kept, so the block can be reused whole
        shrunk = <char*>realloc(self.ptr, self.size)
        if shrunk != NULL:
            self.ptr = shrunk
            self.cap = self.size

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("column buffers are read-only")
        self.shape[0] = self.size
        view.buf = self.ptr if self.ptr != NULL else _EMPTY_BYTE
        view.obj = self
        view.len = self.size
        view.readonly = 1
        view.itemsize = 1
        view.format = b"B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1

    def __len__(self):
        return self.size


cdef inline int _push64(_Buf b, int64_t v) except -1:
    if b.size + 8 > b.cap:
        b._grow(8)
    (<int64_t*>(b.ptr + b.size))[0] = v
    b.size += 8
    return 0


cdef inline int _push8(_Buf b, int8_t v) except -1:
    if b.size + 1 > b.cap:
        b._grow(1)
    (<int8_t*>(b.ptr + b.size))[0] = v
    b.size += 1
    return 0


cdef inline int _push32(_Buf b, int32_t v) except -1:
    if b.size + 4 > b.cap:
        b._grow(4)
    (<int32_t*>(b.ptr + b.size))[0] = v
    b.size += 4
    return 0


@cython.final
@cython.auto_pickle(False)
cdef class _BinaryWriter:
    """One binary column: int32 offsets, data, and a validity bitmap made at the first null."""

    cdef _Buf offsets
    cdef _Buf data
    cdef _Buf validity  # None while nothing is null
    cdef Py_ssize_t n
    cdef str what

    def __cinit__(self, str what):
        self.what = what
        self.offsets = _Buf()
        self.data = _Buf()
        self.validity = None
        _push32(self.offsets, 0)

    cdef int _bitmap_byte(self, Py_ssize_t i) except -1:
        """Make sure the bitmap holds the byte of element ``i`` (new bytes are 0)."""
        cdef Py_ssize_t need = (i >> 3) + 1
        cdef Py_ssize_t have = self.validity.size
        if have < need:
            self.validity.reserve(need - have)
            memset(self.validity.ptr + have, 0, need - have)
            self.validity.size = need
        return 0

    cdef int _null(self, Py_ssize_t i) except -1:
        cdef Py_ssize_t full
        if self.validity is None:
            # Everything before ``i`` was present.
            self.validity = _Buf()
            self._bitmap_byte(i)
            full = i >> 3
            memset(self.validity.ptr, 0xFF, full)
            self.validity.ptr[full] = <char>((1 << (i & 7)) - 1)
        else:
            self._bitmap_byte(i)
            self.validity.ptr[i >> 3] &= <char>~(1 << (i & 7))
        return 0

    cdef inline int push(self, const uint8_t* src, Py_ssize_t length) except -1:
        """Append one element; ``length`` -1 is a null."""
        cdef Py_ssize_t i = self.n
        cdef _Buf data = self.data
        if length < 0:
            self._null(i)
        else:
            if data.size + length > INT32_MAX:
                raise RecordBatchTooLargeError(
                    f"decoded {self.what} exceed the 2 GiB of an Arrow binary column")
            if data.size + length > data.cap:
                data._grow(length)
            if length:
                memcpy(data.ptr + data.size, src, length)
                data.size += length
            if self.validity is not None:
                self._bitmap_byte(i)
                self.validity.ptr[i >> 3] |= <char>(1 << (i & 7))
        _push32(self.offsets, <int32_t>data.size)
        self.n = i + 1
        return 0

    cdef void keep(self, Py_ssize_t first, const Py_ssize_t* idx, Py_ssize_t k) noexcept:
        """Keep elements ``idx[0..k)`` (ascending, all >= ``first``) at ``first``, ``first + 1``...

        Drops every other element from ``first`` on. Offsets are read before
        the slot they sit in is written: element ``idx[t] >= first + t``.
        """
        cdef int32_t* off = <int32_t*>self.offsets.ptr
        cdef char* data = self.data.ptr
        cdef char* bits = self.validity.ptr if self.validity is not None else NULL
        cdef Py_ssize_t t, j, d, dpos = off[first], lo, hi, nlo = 0, length
        cdef bint valid
        lo = off[idx[0]] if k else 0
        for t in range(k):
            j = idx[t]
            hi = off[j + 1]
            if t + 1 < k:
                nlo = off[idx[t + 1]]
            length = hi - lo
            if length and dpos != lo:
                memmove(data + dpos, data + lo, length)
            dpos += length
            d = first + t
            off[d + 1] = <int32_t>dpos
            if bits != NULL:
                valid = (bits[j >> 3] >> (j & 7)) & 1
                if valid:
                    bits[d >> 3] |= <char>(1 << (d & 7))
                else:
                    bits[d >> 3] &= <char>~(1 << (d & 7))
            lo = nlo
        self.n = first + k
        self.data.size = dpos
        self.offsets.size = (self.n + 1) * 4
        if bits != NULL:
            self.validity.size = (self.n + 7) >> 3
            if self.n & 7:  # the dropped elements' bits: later elements start from 0
                bits[self.n >> 3] &= <char>((1 << (self.n & 7)) - 1)

    cdef object finish(self):
        """A BinaryColumn over the buffers; the bitmap is dropped when nothing is null."""
        cdef Py_ssize_t i, nulls = 0
        cdef object validity = None
        cdef uint8_t* bits
        if self.validity is not None:
            bits = <uint8_t*>self.validity.ptr
            self.validity.size = (self.n + 7) >> 3
            if self.n & 7:
                bits[self.n >> 3] &= <uint8_t>((1 << (self.n & 7)) - 1)  # padding bits 0
            for i in range(self.n):
                if not (bits[i >> 3] >> (i & 7)) & 1:
                    nulls += 1
                    break
            if nulls:
                self.validity.trim()
                validity = self.validity
        self.offsets.trim()
        self.data.trim()
        return BinaryColumn(self.offsets, self.data, validity)


@cython.final
@cython.auto_pickle(False)
cdef class _ColumnWriter:
    """The columns of a ColumnBatch while a record set is decoded into them."""

    cdef _Buf offsets
    cdef _Buf timestamps
    cdef _Buf timestamp_types
    cdef _Buf header_offsets
    cdef _BinaryWriter keys
    cdef _BinaryWriter values
    cdef _BinaryWriter header_keys
    cdef _BinaryWriter header_values
    cdef Py_ssize_t n

    def __cinit__(self):
        self.offsets = _Buf()
        self.timestamps = _Buf()
        self.timestamp_types = _Buf()
        self.header_offsets = _Buf()
        _push32(self.header_offsets, 0)
        self.keys = _BinaryWriter("keys")
        self.values = _BinaryWriter("values")
        self.header_keys = _BinaryWriter("header keys")
        self.header_values = _BinaryWriter("header values")

    cdef int reserve(self, Py_ssize_t count) except -1:
        self.offsets.reserve(8 * count)
        self.timestamps.reserve(8 * count)
        self.timestamp_types.reserve(count)
        self.header_offsets.reserve(4 * count)
        self.keys.offsets.reserve(4 * count)
        self.values.offsets.reserve(4 * count)
        return 0

    cdef inline int end_row(self, int64_t offset, int64_t timestamp, int8_t ts_type) except -1:
        """The row whose key, value and headers were pushed is complete."""
        if self.header_keys.n > INT32_MAX:
            raise RecordBatchTooLargeError("decoded headers exceed an Arrow list column")
        _push64(self.offsets, offset)
        _push64(self.timestamps, timestamp)
        _push8(self.timestamp_types, ts_type)
        _push32(self.header_offsets, <int32_t>self.header_keys.n)
        self.n += 1
        return 0

    cdef int append_record(self, Record r) except -1:
        """Append a decoded Record (control batches and legacy messages)."""
        cdef Py_ssize_t size
        cdef const char* name
        _push_object(self.keys, r.key)
        _push_object(self.values, r.value)
        if r._headers:
            for pair in r._headers:
                name = PyUnicode_AsUTF8AndSize(pair[0], &size)
                self.header_keys.push(<const uint8_t*>name, size)
                _push_object(self.header_values, pair[1])
        self.end_row(r.offset, r.timestamp, <int8_t>r.timestamp_type)
        return 0

    cdef int keep(self, Py_ssize_t first, int64_t lo, int64_t hi, Py_ssize_t* above) except -1:
        """Keep only rows from ``first`` on whose offset is within [lo, hi]; count those above."""
        cdef int64_t* off = <int64_t*>self.offsets.ptr
        cdef int64_t* ts = <int64_t*>self.timestamps.ptr
        cdef int8_t* tst = <int8_t*>self.timestamp_types.ptr
        cdef int32_t* hofs = <int32_t*>self.header_offsets.ptr
        cdef Py_ssize_t rows = self.n - first, k = 0, m = 0, t, j, e, hfirst
        cdef Py_ssize_t* idx = NULL
        cdef Py_ssize_t* eidx = NULL
        above[0] = 0
        if rows <= 0:
            return 0
        idx = <Py_ssize_t*>malloc(rows * sizeof(Py_ssize_t))
        if idx == NULL:
            raise MemoryError()
        try:
            for j in range(first, self.n):
                if lo <= off[j] <= hi:
                    idx[k] = j
                    k += 1
                    m += hofs[j + 1] - hofs[j]
                elif off[j] > hi and lo <= hi:
                    above[0] += 1
            if k == rows:
                return 0
            hfirst = hofs[first]
            if self.header_keys.n > hfirst:
                # calloc, not malloc: GCC cannot tell that the loop below writes
                # the m entries the writers read, and warned (-Wmaybe-uninitialized)
                # of malloc's memory passed on as const. When no kept row has a
                # header (m == 0) nothing is written and the writers read nothing.
                eidx = <Py_ssize_t*>calloc(m if m else 1, sizeof(Py_ssize_t))
                if eidx == NULL:
                    raise MemoryError()
                m = 0
                for t in range(k):
                    j = idx[t]
                    for e in range(hofs[j], hofs[j + 1]):
                        eidx[m] = e
                        m += 1
                self.header_keys.keep(hfirst, eidx, m)
                self.header_values.keep(hfirst, eidx, m)
                for t in range(k):  # the entries of each kept row, now packed from hfirst
                    j = idx[t]
                    hfirst += hofs[j + 1] - hofs[j]
                    hofs[first + t + 1] = <int32_t>hfirst
            else:
                for t in range(k):
                    hofs[first + t + 1] = <int32_t>hfirst
            for t in range(k):
                j = idx[t]
                off[first + t] = off[j]
                ts[first + t] = ts[j]
                tst[first + t] = tst[j]
            self.keys.keep(first, idx, k)
            self.values.keep(first, idx, k)
            self.n = first + k
            self.offsets.size = self.n * 8
            self.timestamps.size = self.n * 8
            self.timestamp_types.size = self.n
            self.header_offsets.size = (self.n + 1) * 4
        finally:
            free(idx)
            free(eidx)
        return 0

    cdef object finish(self, object topic, int partition):
        self.offsets.trim()
        self.timestamps.trim()
        self.timestamp_types.trim()
        self.header_offsets.trim()
        return _ColumnBatch(
            topic, partition, self.offsets, self.timestamps, self.timestamp_types,
            self.keys.finish(),
            self.values.finish(), self.header_offsets, self.header_keys.finish(),
            self.header_values.finish())


cdef int _push_object(_BinaryWriter w, object value) except -1:
    """Append bytes or None (a decoded Record's field)."""
    if value is None:
        return w.push(NULL, -1)
    return w.push(<const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))


cdef inline int _push_varbytes(_BinaryWriter w, const uint8_t* p, Py_ssize_t* pos,
                               Py_ssize_t end) except -1:
    """Read a varint-length field (as _get_varbytes checks it) into a column."""
    cdef int32_t n = get_varint(p, pos, end)
    cdef Py_ssize_t i = pos[0]
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid length {n}")
        return w.push(NULL, -1)
    if n > end - i:
        raise CorruptRecordError(f"field of {n} bytes overruns its record")
    pos[0] = i + n
    return w.push(p + i, n)


cdef int _check_utf8(const uint8_t* s, Py_ssize_t n) except -1:
    """The same rule as the row decoder's str: ASCII at once, anything else through Python."""
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] & 0x80:
            break
    else:
        return 0
    try:
        PyUnicode_DecodeUTF8(<const char*>s, n, NULL)
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
    return 0


cdef int _columns_records(_ColumnWriter w, const uint8_t* p, Py_ssize_t n, int32_t count,
                          int64_t base_offset, int64_t base_ts, bint log_append,
                          int64_t log_ts) except -1:
    """_decode_records' checks, in its order, writing into ``w`` instead of making Records."""
    if count > n // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} exceeds what {n} bytes can hold")
    w.reserve(count)
    cdef Py_ssize_t pos = 0, rec_end
    cdef int32_t i, j, length, hcount, off_delta, klen
    cdef int64_t ts_delta, timestamp
    cdef _BinaryWriter header_keys = w.header_keys, header_values = w.header_values
    for i in range(count):
        length = get_varint(p, &pos, n)
        if length <= 0 or length > n - pos:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        rec_end = pos + length
        pos += 1  # the record's attributes: unused
        ts_delta = get_varlong(p, &pos, rec_end)
        off_delta = get_varint(p, &pos, rec_end)
        _push_varbytes(w.keys, p, &pos, rec_end)
        _push_varbytes(w.values, p, &pos, rec_end)
        hcount = get_varint(p, &pos, rec_end)
        if hcount:
            if hcount < 0 or hcount > rec_end - pos:
                raise CorruptRecordError(f"header count {hcount} is invalid")
            for j in range(hcount):
                klen = get_varint(p, &pos, rec_end)
                if klen < 0 or klen > rec_end - pos:
                    raise CorruptRecordError(f"header key length {klen} is invalid")
                _check_utf8(p + pos, klen)
                header_keys.push(p + pos, klen)
                pos += klen
                _push_varbytes(header_values, p, &pos, rec_end)
        if pos != rec_end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        if add_overflows(base_offset, off_delta):
            raise CorruptRecordError(f"record offset delta {off_delta} overflows int64")
        if log_append:
            timestamp = log_ts
        elif add_overflows(base_ts, ts_delta):
            raise CorruptRecordError(f"record timestamp delta {ts_delta} overflows int64")
        else:
            timestamp = base_ts + ts_delta
        w.end_row(base_offset + off_delta, timestamp, 1 if log_append else 0)
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left over after {count} records")
    return 0


cdef int _select_rows(_ColumnWriter w, object select, RecordBatch b, Py_ssize_t first,
                      list kept, list above) except -1:
    """Ask ``select`` which of the batch's rows (from ``first``) to keep, and keep them."""
    cdef int64_t lo, hi
    cdef Py_ssize_t over = 0
    b.records = []
    if select is not None:
        lo, hi = select(b)
        w.keep(first, lo, hi, &over)
    kept.append(w.n - first)
    above.append(over)
    return 0


def decode_columns(data, *, bint check_crc=True, topic=None, partition=-1, select=None):
    """Decode every complete batch in ``data`` straight into columns (see ``pykaf._codec_py``).

    Returns:
        (ColumnBatch, batches with empty ``records``, records kept per batch,
        records above ``select``'s upper bound per batch).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch, as ``decode_batches``.
        RecordBatchTooLargeError: keys, values or headers past 2 GiB (int32 offsets).
        TypeError, ValueError: topic is not a str or None, partition not an int32.
    """
    if topic is not None and not isinstance(topic, str):
        raise TypeError(f"topic must be a str or None, not {type(topic).__name__}")
    cdef Origin where
    where.topic = <PyObject*>topic if topic is not None else NULL
    where.partition = _check_partition(partition)
    cdef object owner = _as_bytes_view(data)
    cdef const uint8_t[::1] buf
    cdef Py_ssize_t n = len(owner)
    cdef Py_ssize_t pos = 0, end, first
    cdef int32_t length
    cdef int magic, codec
    cdef list batches = [], kept = [], above = [], legacy
    cdef _ColumnWriter w = _ColumnWriter()
    cdef RecordBatch b
    cdef Record r
    cdef bytes inflated
    cdef const uint8_t* h
    if n == 0:
        return w.finish(topic, where.partition), batches, kept, above
    buf = owner
    cdef const uint8_t* p = &buf[0]
    # Uncompressed, the values take less than the input: one allocation, no
    # copies as the column grows (finish() gives back what was not used).
    w.values.data.reserve(n)
    while pos < n:
        if n - pos < 12:
            break
        length = rd32(p + pos + 8)
        if length < 14:  # smaller than the smallest legacy message
            raise CorruptRecordError(f"record batch length {length} is too small")
        if <Py_ssize_t>length > n - pos - 12:
            break
        end = pos + 12 + length
        magic = p[pos + 16]
        first = w.n
        if magic == 2:
            if end - pos >= HEADER and rd16(p + pos + 21) & CONTROL_BIT:
                b = _decode_v2(owner, p, pos, end, check_crc, &where)  # a marker: one record
                for r in b.records:
                    w.append_record(r)
            else:
                b = _v2_header(p, pos, end, check_crc)
                h = p + pos
                codec = b.attributes & COMPRESSION_MASK
                if codec == 0:
                    w.values.data.reserve(end - pos - HEADER)  # the most the values can take
                    _columns_records(w, h + HEADER, end - pos - HEADER, b.record_count,
                                     b.base_offset, b.base_timestamp,
                                     (b.attributes & TIMESTAMP_TYPE_BIT) != 0, b.max_timestamp)
                else:
                    inflated = _decompress(
                        codec, PyMemoryView_FromMemory(<char*>h + HEADER, end - pos - HEADER, PyBUF_READ))
                    w.values.data.reserve(PyBytes_GET_SIZE(inflated))
                    _columns_records(w, <const uint8_t*>PyBytes_AS_STRING(inflated),
                                     PyBytes_GET_SIZE(inflated), b.record_count,
                                     b.base_offset, b.base_timestamp,
                                     (b.attributes & TIMESTAMP_TYPE_BIT) != 0, b.max_timestamp)
                    inflated = None
            batches.append(b)
            _select_rows(w, select, b, first, kept, above)
        elif magic == 0 or magic == 1:
            legacy = []
            _decode_legacy(p, pos, end, check_crc, legacy, &where)
            for b in legacy:
                first = w.n
                for r in b.records:
                    w.append_record(r)
                batches.append(b)
                _select_rows(w, select, b, first, kept, above)
        else:
            raise CorruptRecordError(f"unknown record batch magic {magic}")
        pos = end
    return w.finish(topic, where.partition), batches, kept, above
