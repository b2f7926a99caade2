# cython: language_level=3
"""Compiled record codec: varints, record batch v2, legacy message sets, produce sets.

The hot paths (record encode and decode, the bulk columnar encode) are C loops
over typed buffers. Every read of input bytes is bounds-checked against the end
of its enclosing structure; malformed input raises CorruptRecordError. The
pure-Python twin ``pykaf._codec_py`` has the same names and writes the same
bytes; ``pykaf/_codec.pyi`` documents the interface.
"""

cimport cython
cimport cython.view
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLong, PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.pythread cimport (
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport (
    INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
)
from libc.string cimport memcpy
from libc.stdlib cimport calloc, malloc

import os as _os
import time
from operator import index as _index

from crc32c import crc32c as _crc32c

from pykaf import _compression
from pykaf._columns import BinaryColumn
from pykaf._codec_py import encode_control_batch, encode_legacy_message_set
from pykaf.errors import CorruptRecordError, RecordTooLargeError

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    int PyBUF_READ
    object PySequence_Fast(object o, const char* m)
    void PyObject_GC_UnTrack(void* op)
    void PyObject_GC_Track(void* op)
    int PyObject_GC_IsTracked(object op)
    int PyObject_IS_GC(object op)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject* PySequence_Fast_GET_ITEM(object o, Py_ssize_t i)  # borrowed

IMPLEMENTATION = "cython"

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
RECORD_BATCH_OVERHEAD = 61
NO_PRODUCER_ID = -1

DEF HEADER = 61
DEF COMPRESSION_MASK = 0x07
DEF TIMESTAMP_TYPE_BIT = 0x08
DEF TRANSACTIONAL_BIT = 0x10
DEF CONTROL_BIT = 0x20
DEF MAX_RECORD_OVERHEAD = 21  # length 5 + attributes 1 + ts delta 10 + offset delta 5
DEF INT32_MAX = 2147483647
DEF MIN_RECORD_SIZE = 7  # = _compression.MIN_RECORD_SIZE: one byte for each of 7 varints

cdef object _NAMES = _compression.NAMES
cdef object _decompress = _compression.decompress
cdef object _inflate_limit = _compression.inflate_limit
cdef object _compress = _compression.compress

__all__ = [
    "BatchBuilder", "ProduceSet", "Record", "RecordBatch", "RecordSet",
    "crc32c", "decode_batches", "fnv1a_32", "murmur2", "decode_record_set", "decode_uvarint", "decode_uvarlong",
    "decode_varint", "decode_varlong", "encode_control_batch", "encode_legacy_message_set",
    "encode_uvarint", "encode_uvarlong", "encode_varint", "encode_varlong", "record_size",
    "decode_columns", "KEEP_ALL", "KEEP_NONE",
]


# -- big-endian and varint primitives ------------------------------------------

cdef inline int16_t rd16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | p[1])

cdef inline int32_t rd32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])

cdef inline int64_t rd64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>rd32(p) << 32) | <uint32_t>rd32(p + 4))

cdef inline void wr16(uint8_t* p, int64_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void wr32(uint8_t* p, int64_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void wr64(uint8_t* p, int64_t v) noexcept nogil:
    wr32(p, <int64_t>(<uint64_t>v >> 32))
    wr32(p + 4, v)

cdef inline bint add_overflows(int64_t a, int64_t b) noexcept nogil:
    """Whether a + b falls outside int64 (checked before adding: C overflow is undefined)."""
    return (b > 0 and a > INT64_MAX - b) or (b < 0 and a < INT64_MIN - b)

cdef inline uint32_t zz32(int64_t v) noexcept nogil:
    return <uint32_t>((<uint32_t>v << 1) ^ <uint32_t>(<int32_t>v >> 31))

cdef inline uint64_t zz64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)

cdef inline int uvar_size(uint64_t u) noexcept nogil:
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n

cdef inline Py_ssize_t put_uvar(uint8_t* p, uint64_t u) noexcept nogil:
    cdef Py_ssize_t n = 0
    while u >= 0x80:
        p[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    p[n] = <uint8_t>u
    return n + 1

cdef int _varint_error(Py_ssize_t pos, Py_ssize_t end, int max_bytes) except -1:
    if pos >= end:
        raise CorruptRecordError("truncated varint")
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")

cdef inline uint64_t get_uvar(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end,
                              int max_bytes) except? 0xFFFFFFFFFFFFFFFF:
    """Read an unsigned varint of at most max_bytes (5 or 10) at pos[0], bounds-checked."""
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t value = 0
    cdef uint8_t b
    cdef int shift = 0, k
    if i < end and p[i] < 0x80:  # the common one-byte case
        pos[0] = i + 1
        return p[i]
    if i + 1 < end and p[i + 1] < 0x80:  # two bytes: lengths and deltas of 64 to 8191
        pos[0] = i + 2
        return (<uint64_t>(p[i] & 0x7F)) | (<uint64_t>p[i + 1] << 7)
    for k in range(max_bytes):
        if i >= end:
            _varint_error(i, end, max_bytes)
        b = p[i]
        i += 1
        if k == max_bytes - 1 and b > (0x0F if max_bytes == 5 else 0x01):
            _varint_error(0, 1, max_bytes)
        value |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            pos[0] = i
            return value
        shift += 7
    _varint_error(0, 1, max_bytes)
    return 0

cdef inline int32_t get_varint(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end) except? -2147483648:
    cdef uint32_t u = <uint32_t>get_uvar(p, pos, end, 5)
    return <int32_t>((u >> 1) ^ (0U - (u & 1)))

cdef inline int64_t get_varlong(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end) except? -9223372036854775807:
    cdef uint64_t u = get_uvar(p, pos, end, 10)
    return <int64_t>((u >> 1) ^ (0ULL - (u & 1)))


# -- public varint and CRC functions -------------------------------------------

cdef bytes _uvar_bytes(uint64_t u):
    cdef uint8_t tmp[10]
    cdef Py_ssize_t n = put_uvar(tmp, u)
    return PyBytes_FromStringAndSize(<char*>tmp, n)

def encode_uvarint(value):
    """Encode an unsigned 32-bit varint (at most 5 bytes)."""
    if not 0 <= value < (1 << 32):
        raise ValueError(f"uvarint {value} out of range [0, {1 << 32})")
    return _uvar_bytes(<uint64_t>value)

def encode_uvarlong(value):
    """Encode an unsigned 64-bit varint (at most 10 bytes)."""
    if not 0 <= value < (1 << 64):
        raise ValueError(f"uvarlong {value} out of range [0, {1 << 64})")
    return _uvar_bytes(<uint64_t>value)

def encode_varint(value):
    """Encode a signed 32-bit zigzag varint."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint {value} out of the int32 range")
    return _uvar_bytes(zz32(<int64_t>value))

def encode_varlong(value):
    """Encode a signed 64-bit zigzag varint."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong {value} out of the int64 range")
    return _uvar_bytes(zz64(<int64_t>value))

cdef tuple _decode_var(data, Py_ssize_t pos, int max_bytes, bint signed):
    cdef const uint8_t[::1] buf = _as_bytes_view(data)
    cdef Py_ssize_t n = buf.shape[0]
    cdef uint64_t u
    if pos < 0:
        raise ValueError("negative position")
    if pos >= n:
        raise CorruptRecordError("truncated varint")
    u = get_uvar(&buf[0], &pos, n, max_bytes)
    if not signed:
        return u, pos
    if max_bytes == 5:
        return <int32_t>((<uint32_t>u >> 1) ^ (0U - (<uint32_t>u & 1))), pos
    return <int64_t>((u >> 1) ^ (0ULL - (u & 1))), pos

def decode_uvarint(data, Py_ssize_t pos=0):
    """Decode an unsigned 32-bit varint at ``pos``; return (value, next position)."""
    return _decode_var(data, pos, 5, False)

def decode_uvarlong(data, Py_ssize_t pos=0):
    """Decode an unsigned 64-bit varint at ``pos``; return (value, next position)."""
    return _decode_var(data, pos, 10, False)

def decode_varint(data, Py_ssize_t pos=0):
    """Decode a signed 32-bit zigzag varint at ``pos``; return (value, next position)."""
    return _decode_var(data, pos, 5, True)

def decode_varlong(data, Py_ssize_t pos=0):
    """Decode a signed 64-bit zigzag varint at ``pos``; return (value, next position)."""
    return _decode_var(data, pos, 10, True)

def crc32c(data, value=0):
    """CRC-32C (Castagnoli) of ``data``, continuing from ``value``."""
    return int(_crc32c(data, value))

cdef object _as_bytes_view(object data):
    """A contiguous unsigned-byte view of any buffer (empty buffers included)."""
    if type(data) is bytes or type(data) is bytearray:
        return data
    mv = memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1 or not mv.c_contiguous or mv.format not in ("B", "b", "c"):
        mv = mv.cast("B")
    elif mv.format != "B":
        mv = mv.cast("B")
    return mv


# -- decoded objects -------------------------------------------------------------

@cython.freelist(1024)
@cython.final
@cython.no_gc
cdef class Record:
    """One record: its absolute offset, timestamp (ms), key, value and headers.

    Decoded records also say where they came from: ``topic`` and ``partition``
    (as given to the decoder; None and -1 otherwise) and ``timestamp_type``
    (0 CreateTime, 1 LogAppendTime, -1 unknown: a magic 0 message). These
    three are not compared by ``==``.

    Records hold bytes, str, None and header lists, which cannot form reference
    cycles, so the type stays out of the cyclic GC: decoding a million records
    does not set off a thousand generation-0 collections.
    """

    # Declaration order is the struct layout: partition fills the padding
    # after attributes, so the three new fields cost 16 bytes, not 24. No
    # __cinit__ (it would cost every decoded record a call, and disable the
    # automatic pickling): Record.__new__ alone leaves the fields zeroed, topic
    # None; __init__ and the decoders set all of them.
    cdef public int64_t offset
    cdef public int64_t timestamp
    cdef public object key
    cdef public object value
    cdef public int attributes
    cdef public int partition
    cdef object _headers
    cdef public object topic
    cdef public int timestamp_type

    def __init__(self, int64_t offset, int64_t timestamp, key, value, headers=None,
                 int attributes=0, *, topic=None, int partition=-1, int timestamp_type=-1):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self._headers = list(headers) if headers else None
        self.attributes = attributes
        self.topic = topic
        self.partition = partition
        self.timestamp_type = timestamp_type

    @property
    def headers(self):
        """The record's headers as ``(name, value)`` pairs, in order."""
        return list(self._headers) if self._headers else []

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return (self.offset == o.offset and self.timestamp == o.timestamp
                and _nonnull(<PyObject*>self.key, "key") == _nonnull(<PyObject*>o.key, "key")
                and _nonnull(<PyObject*>self.value, "value") == _nonnull(<PyObject*>o.value, "value")
                and self.headers == o.headers and self.attributes == o.attributes)

    __hash__ = None

    def __repr__(self):
        topic = _nonnull(<PyObject*>self.topic, "topic")
        where = (f"topic={topic!r}, partition={self.partition}, "
                 if topic is not None or self.partition != -1 else "")
        return (f"Record({where}offset={self.offset}, timestamp={self.timestamp}, "
                f"key={_nonnull(<PyObject*>self.key, 'key')!r}, "
                f"value={_nonnull(<PyObject*>self.value, 'value')!r}, headers={self.headers!r})")


cdef inline object _nonnull(PyObject* v, str name):
    """An object field read NULL-safely. The member descriptors installed below
    allow ``del record.key``, which leaves NULL in the field; a plain
    ``self.key`` would then dereference it. Raises AttributeError as the
    descriptor (and the pure-Python twin's slot) does."""
    if v == NULL:
        raise AttributeError(f"'Record' object has no attribute '{name}'")
    return <object>v


# Cython exposes ``cdef public`` fields through getset descriptors, which
# CPython's attribute specialisation does not cover. Record's fields are read
# once or more per consumed record, so they get real member descriptors (the
# kind ``__slots__`` makes): ``record.value`` then costs what a slot read costs.
cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    int T_OBJECT_EX
    int T_LONGLONG
    int T_INT

cdef extern from "Python.h":
    PyObject* PyBytes_FromStringAndSize_raw "PyBytes_FromStringAndSize" (const char* v, Py_ssize_t n)
    char* PyBytes_AS_STRING_raw "PyBytes_AS_STRING" (PyObject* o)
    int _PyBytes_Resize(PyObject** o, Py_ssize_t n)
    void Py_XDECREF(PyObject* o)
    object PyDescr_NewMember(type tp, PyMemberDef* m)
    void PyType_Modified(type tp)
    ctypedef enum PySendResult:
        PYGEN_RETURN
        PYGEN_ERROR
        PYGEN_NEXT
    ctypedef PySendResult (*sendfunc)(PyObject* iter, PyObject* arg, PyObject** result) noexcept
    ctypedef struct PyAsyncMethods:
        sendfunc am_send
    ctypedef struct PyTypeObject:
        PyObject* tp_dict
        PyAsyncMethods* tp_as_async
    void PyErr_SetString(object kind, const char* message)

DEF N_RECORD_MEMBERS = 8
cdef PyMemberDef _record_members[N_RECORD_MEMBERS]


cdef Py_ssize_t _object_slot(Record probe, object sentinel) except -1:
    """Byte offset of the object field of ``probe`` that holds ``sentinel``."""
    cdef char* base = <char*><PyObject*>probe
    cdef Py_ssize_t off
    for off in range(sizeof(PyObject), Record.__basicsize__ - sizeof(PyObject*) + 1,
                     sizeof(PyObject*)):
        if (<PyObject**>(base + off))[0] == <PyObject*>sentinel:
            return off
    raise RuntimeError("Record field not found")


cdef void _install_record_members() except *:
    cdef Record probe = Record.__new__(Record)
    cdef char* base = <char*><PyObject*>probe
    cdef dict tp_dict = <dict>(<PyTypeObject*>Record).tp_dict
    key_mark, value_mark, topic_mark = object(), object(), object()
    probe.key = key_mark
    probe.value = value_mark
    probe.topic = topic_mark
    spec = (
        (b"offset", T_LONGLONG, <char*>&probe.offset - base, b"The record's absolute offset."),
        (b"timestamp", T_LONGLONG, <char*>&probe.timestamp - base, b"Timestamp in ms."),
        (b"key", T_OBJECT_EX, _object_slot(probe, key_mark), b"The key (bytes or None)."),
        (b"value", T_OBJECT_EX, _object_slot(probe, value_mark), b"The value (bytes or None)."),
        (b"attributes", T_INT, <char*>&probe.attributes - base, b"Record attributes."),
        # Cython's tp_new sets topic to None, so T_OBJECT_EX only differs from
        # T_OBJECT after ``del record.topic``: AttributeError then, as for key,
        # value and the pure-Python twin's slots.
        (b"topic", T_OBJECT_EX, _object_slot(probe, topic_mark),
         b"The topic the record was decoded for (str or None)."),
        (b"partition", T_INT, <char*>&probe.partition - base,
         b"The partition the record was decoded for (-1 if not given)."),
        (b"timestamp_type", T_INT, <char*>&probe.timestamp_type - base,
         b"0 CreateTime, 1 LogAppendTime, -1 unknown (magic 0)."),
    )
    cdef int i
    for i in range(N_RECORD_MEMBERS):
        name, kind, off, doc = spec[i]
        _record_members[i].name = <const char*>name
        _record_members[i].type = kind
        _record_members[i].offset = off
        _record_members[i].flags = 0
        _record_members[i].doc = <const char*>doc
        tp_dict[name.decode()] = PyDescr_NewMember(Record, &_record_members[i])
    PyType_Modified(Record)


_install_record_members()


@cython.final
cdef class RecordBatch:
    """A decoded record batch (magic 2) or legacy message (magic 0/1)."""

    cdef public int64_t base_offset
    cdef public int32_t batch_length
    cdef public int32_t partition_leader_epoch
    cdef public int magic
    cdef public uint32_t crc
    cdef public int attributes
    cdef public int32_t last_offset_delta
    cdef public int64_t base_timestamp
    cdef public int64_t max_timestamp
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int32_t base_sequence
    cdef public int32_t record_count
    cdef public list records
    cdef public int control_type_id
    cdef public int32_t coordinator_epoch
    cdef public Py_ssize_t size

    def __cinit__(self):
        self.partition_leader_epoch = -1
        self.magic = 2
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.records = []
        self.control_type_id = -1
        self.coordinator_epoch = -1

    @property
    def last_offset(self):
        """Offset of the batch's last record (it may have been compacted away)."""
        return <object>self.base_offset + self.last_offset_delta  # Python ints: no wrap

    @property
    def next_offset(self):
        """The offset to fetch after this batch."""
        return <object>self.base_offset + self.last_offset_delta + 1  # Python ints: no wrap

    @property
    def compression_type(self):
        """Kafka's compression codec id (0 none .. 4 zstd)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def compression(self):
        """The compression codec's name."""
        cdef int c = self.attributes & COMPRESSION_MASK
        return _NAMES[c] if c < len(_NAMES) else f"unknown-{c}"

    @property
    def timestamp_type(self):
        """0 for CreateTime, 1 for LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self):
        """Whether the batch belongs to a transaction."""
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self):
        """Whether the batch holds a control record (e.g. a transaction marker)."""
        return self.magic >= 2 and bool(self.attributes & CONTROL_BIT)

    @property
    def control_type(self):
        """``"commit"`` or ``"abort"`` for transaction markers, else None."""
        if self.control_type_id == CONTROL_COMMIT:
            return "commit"
        if self.control_type_id == CONTROL_ABORT:
            return "abort"
        return None

    def __repr__(self):
        return (f"RecordBatch(magic={self.magic}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, records={len(self.records)}, "
                f"compression={self.compression!r}, producer_id={self.producer_id}, "
                f"transactional={self.is_transactional}, control={self.control_type!r})")


@cython.final
cdef class RecordSet:
    """What a fetch response's records field held: complete batches, maybe a partial one."""

    cdef public list batches
    cdef public bint incomplete
    cdef public Py_ssize_t consumed
    cdef public Py_ssize_t partial_size

    def __init__(self, list batches, bint incomplete, Py_ssize_t consumed, Py_ssize_t partial_size):
        self.batches = batches
        self.incomplete = incomplete
        self.consumed = consumed
        self.partial_size = partial_size

    def __repr__(self):
        return (f"RecordSet(batches={len(self.batches)}, incomplete={self.incomplete}, "
                f"consumed={self.consumed}, partial_size={self.partial_size})")


# -- reading records one by one ---------------------------------------------------

cdef object _AWAITED = object()  # a _Ready's value once it was handed out


@cython.freelist(16)
@cython.final
@cython.no_gc
cdef class _Ready:
    """An awaitable whose result is already known: ``await`` hands it out at once.

    What ``RecordCursor.__anext__`` returns when a record is waiting: no
    coroutine is created or run. Awaited through ``am_send`` (set below) it
    costs no StopIteration either; ``__next__``/``send`` raise one for
    callers that drive it by hand, as a finished coroutine would.
    """

    cdef object value

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        value = self.value
        if value is _AWAITED:
            raise RuntimeError("cannot reuse an already awaited result")
        self.value = _AWAITED
        raise StopIteration(value)

    def send(self, arg):
        """Finish: raise StopIteration with the result (``arg`` is ignored)."""
        return self.__next__()

    def throw(self, typ, val=None, tb=None):
        """Raise the given exception here, as a coroutine that has not started would."""
        self.value = _AWAITED
        if val is None:
            raise typ
        raise val

    def close(self):
        """Drop the result."""
        self.value = _AWAITED


cdef PySendResult _ready_send(PyObject* o, PyObject* arg, PyObject** result) noexcept:
    # The await protocol's fast path (CPython 3.10+ ``am_send``): the result
    # is returned, not raised in a StopIteration.
    cdef _Ready ready = <_Ready><object>o
    cdef object value = ready.value
    if value is _AWAITED:
        PyErr_SetString(RuntimeError, b"cannot reuse an already awaited result")
        return PYGEN_ERROR
    ready.value = _AWAITED
    Py_INCREF(value)
    result[0] = <PyObject*>value
    return PYGEN_RETURN


(<PyTypeObject*>_Ready).tp_as_async.am_send = _ready_send


cdef class RecordCursor:
    """Decoded records and the index of the next one: a reader's per-record side.

    A partition consumer subclasses it: ``async for`` and ``next_nowait``
    take the next record from ``_local`` without a coroutine per record; when
    the list is read out, ``__anext__`` awaits the subclass's ``_refill_next()``
    (a coroutine that fills ``_local`` and returns its first record, or
    raises StopAsyncIteration).
    """

    cdef public list _local
    cdef public Py_ssize_t _next

    def __cinit__(self, *args, **kwargs):
        self._local = []
        self._next = 0

    def __aiter__(self):
        return self

    def __anext__(self):
        cdef Py_ssize_t i = self._next
        cdef list local = self._local
        cdef _Ready ready
        if i < PyList_GET_SIZE(local):
            self._next = i + 1
            ready = _Ready.__new__(_Ready)
            ready.value = <object>PyList_GET_ITEM(local, i)
            return ready
        return self._refill_next()

    def next_nowait(self):
        """The next record if one is decoded and waiting, else None (no wait, no fetch).

        What ``async for`` hands out when it need not wait; for a caller outside
        trio (``pykaf.aio``) that reads records one by one without crossing
        into trio for each.
        """
        cdef Py_ssize_t i = self._next
        cdef list local = self._local
        if i < PyList_GET_SIZE(local):
            self._next = i + 1
            return <object>PyList_GET_ITEM(local, i)
        return None


cdef Py_ssize_t _forks = 0  # bumped in the child at every os.fork()


def _count_fork():
    global _forks
    _forks += 1


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_count_fork)


cdef class LockedTake:
    """A thread's ``poll()`` outside trio (``pykaf.sync``): the next record of ``cursor``.

    Called, it takes the next decoded record of ``cursor`` (a RecordCursor,
    or None) under ``lock``; when none waits, or the process was forked
    since it was made, it returns ``general(timeout)`` instead. No Python
    frame: the lock's own acquire and release, and the cursor's list read
    in place.
    """

    cdef public RecordCursor cursor
    cdef object _acquire, _release, _general
    cdef Py_ssize_t _forks

    def __init__(self, lock, general):
        self._acquire = lock.acquire
        self._release = lock.release
        self._general = general
        self._forks = _forks
        self.cursor = None

    def __call__(self, timeout=None):
        cdef RecordCursor cursor
        cdef list local
        cdef Py_ssize_t i
        cdef object record = None
        if self._forks == _forks:
            self._acquire()
            cursor = self.cursor
            if cursor is not None:
                local = cursor._local
                i = cursor._next
                if i < PyList_GET_SIZE(local):
                    cursor._next = i + 1
                    record = <object>PyList_GET_ITEM(local, i)
            self._release()
            if record is not None:
                return record
        return self._general(timeout)


# -- decoding -------------------------------------------------------------------

def decode_batches(data, *, bint check_crc=True, topic=None, partition=-1):
    """Decode every complete batch in ``data`` (a trailing partial batch is left out).

    Every record gets ``topic`` and ``partition`` (the same str object in all).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch.
        TypeError, ValueError: topic is not a str or None, partition not an int32.
    """
    return decode_record_set(data, check_crc=check_crc, topic=topic, partition=partition).batches


cdef int _check_partition(object partition) except? -1:
    """The partition as a C int: an integer in the int32 range, else TypeError/ValueError."""
    partition = _index(partition)
    if not -2147483648 <= partition <= 2147483647:
        raise ValueError(f"partition {partition} is outside the int32 range")
    return <int>partition


def decode_record_set(data, *, bint check_crc=True, topic=None, partition=-1):
    """Decode a fetch response's records field, reporting a trailing partial batch.

    Every record gets ``topic`` and ``partition`` (the same str object in all).

    Raises:
        CorruptRecordError: malformed bytes or a CRC mismatch.
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
    cdef Py_ssize_t pos = 0, end
    cdef int32_t length
    cdef int magic
    cdef list batches = []
    if n == 0:
        return RecordSet(batches, False, 0, 0)
    buf = owner
    cdef const uint8_t* p = &buf[0]
    while pos < n:
        if n - pos < 12:
            return RecordSet(batches, True, pos, 0)
        length = rd32(p + pos + 8)
        if length < 14:  # smaller than the smallest legacy message
            raise CorruptRecordError(f"record batch length {length} is too small")
        if <Py_ssize_t>length > n - pos - 12:
            return RecordSet(batches, True, pos, 12 + <Py_ssize_t>length)
        end = pos + 12 + length
        magic = p[pos + 16]
        if magic == 2:
            batches.append(_decode_v2(owner, p, pos, end, check_crc, &where))
        elif magic == 0 or magic == 1:
            _decode_legacy(p, pos, end, check_crc, batches, &where)
        else:
            raise CorruptRecordError(f"unknown record batch magic {magic}")
        pos = end
    return RecordSet(batches, False, pos, 0)


cdef struct Origin:
    PyObject* topic  # borrowed (the caller's argument); NULL for None
    int partition


cdef inline void _stamp(Record r, const Origin* where, int timestamp_type) noexcept:
    """Set a fresh record's origin: one INCREF of the shared topic str, no new object."""
    if where.topic != NULL:
        r.topic = <object>where.topic  # replaces the None tp_new put there
    r.partition = where.partition
    r.timestamp_type = timestamp_type


cdef RecordBatch _decode_v2(object owner, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                            bint check_crc, const Origin* where):
    cdef RecordBatch b = _v2_header(p, pos, end, check_crc)
    cdef const uint8_t* h = p + pos
    cdef int codec = b.attributes & COMPRESSION_MASK
    cdef bint log_append = (b.attributes & TIMESTAMP_TYPE_BIT) != 0
    cdef bytes inflated
    if codec == 0:
        b.records = _decode_records(h + HEADER, end - pos - HEADER, b.record_count,
                                    b.base_offset, b.base_timestamp, log_append, b.max_timestamp,
                                    where)
    else:
        inflated = _decompress(codec, PyMemoryView_FromMemory(<char*>h + HEADER, end - pos - HEADER, PyBUF_READ))
        b.records = _decode_records(<const uint8_t*>PyBytes_AS_STRING(inflated),
                                    PyBytes_GET_SIZE(inflated), b.record_count,
                                    b.base_offset, b.base_timestamp, log_append, b.max_timestamp,
                                    where)
    if b.attributes & CONTROL_BIT:
        _read_control(b)
    return b


cdef RecordBatch _v2_header(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, bint check_crc):
    """A v2 batch's header, CRC and counts checked; its records are not read."""
    if end - pos < HEADER:
        raise CorruptRecordError(f"record batch of {end - pos} bytes is shorter than its header")
    cdef const uint8_t* h = p + pos
    cdef RecordBatch b = RecordBatch.__new__(RecordBatch)
    b.base_offset = rd64(h)
    b.batch_length = rd32(h + 8)
    b.partition_leader_epoch = rd32(h + 12)
    b.magic = 2
    b.crc = <uint32_t>rd32(h + 17)
    b.attributes = <uint16_t>rd16(h + 21)
    b.last_offset_delta = rd32(h + 23)
    b.base_timestamp = rd64(h + 27)
    b.max_timestamp = rd64(h + 35)
    b.producer_id = rd64(h + 43)
    b.producer_epoch = rd16(h + 51)
    b.base_sequence = rd32(h + 53)
    b.record_count = rd32(h + 57)
    b.size = end - pos
    cdef uint32_t actual
    if check_crc:
        actual = <uint32_t>_crc32c(PyMemoryView_FromMemory(<char*>h + 21, end - pos - 21, PyBUF_READ))
        if actual != b.crc:
            raise CorruptRecordError(
                f"record batch at offset {b.base_offset}: CRC mismatch "
                f"(stored {b.crc:#010x}, computed {actual:#010x})")
    if b.record_count < 0:
        raise CorruptRecordError(f"negative record count {b.record_count}")
    if b.last_offset_delta < 0:
        raise CorruptRecordError(f"negative last offset delta {b.last_offset_delta}")
    if b.base_offset > INT64_MAX - 1 - b.last_offset_delta:
        # Kafka's offsets are int64s; the next offset to fetch must be one too.
        raise CorruptRecordError(
            f"base offset {b.base_offset} + last offset delta {b.last_offset_delta} overflows int64")
    cdef int codec = b.attributes & COMPRESSION_MASK
    cdef Py_ssize_t section = end - pos - HEADER
    if codec != 0 and b.record_count > _inflate_limit(section) // MIN_RECORD_SIZE:
        # Refuse a count the section cannot hold before inflating anything.
        raise CorruptRecordError(
            f"record count {b.record_count} exceeds what {section} compressed bytes may hold")
    return b


cdef inline object _get_varbytes(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end):
    cdef int32_t n = get_varint(p, pos, end)
    cdef Py_ssize_t i = pos[0]
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid length {n}")
        return None
    if n > end - i:
        raise CorruptRecordError(f"field of {n} bytes overruns its record")
    pos[0] = i + n
    return PyBytes_FromStringAndSize(<const char*>p + i, n)


cdef list _decode_records(const uint8_t* p, Py_ssize_t n, int32_t count, int64_t base_offset,
                          int64_t base_ts, bint log_append, int64_t log_ts, const Origin* where):
    # Each record takes at least 7 bytes; a larger count cannot be honest.
    if count > n // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} exceeds what {n} bytes can hold")
    # Filled slot by slot (a list holds NULLs safely until then: it is not
    # handed out before every slot is set, and its dealloc skips NULLs).
    cdef list records = PyList_New(count)
    cdef Py_ssize_t pos = 0, rec_end, hpos
    cdef int32_t i, j, length, hcount, off_delta, klen
    cdef int64_t ts_delta
    cdef Record r
    cdef list headers
    cdef object name
    for i in range(count):
        length = get_varint(p, &pos, n)
        if length <= 0 or length > n - pos:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        rec_end = pos + length
        r = Record.__new__(Record)
        _stamp(r, where, log_append)
        r.attributes = p[pos]
        pos += 1
        ts_delta = get_varlong(p, &pos, rec_end)
        off_delta = get_varint(p, &pos, rec_end)
        r.key = _get_varbytes(p, &pos, rec_end)
        r.value = _get_varbytes(p, &pos, rec_end)
        hcount = get_varint(p, &pos, rec_end)
        if hcount:
            if hcount < 0 or hcount > rec_end - pos:
                raise CorruptRecordError(f"header count {hcount} is invalid")
            headers = []
            for j in range(hcount):
                klen = get_varint(p, &pos, rec_end)
                if klen < 0 or klen > rec_end - pos:
                    raise CorruptRecordError(f"header key length {klen} is invalid")
                try:
                    name = PyUnicode_DecodeUTF8(<const char*>p + pos, klen, NULL)
                except UnicodeDecodeError as exc:
                    raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
                pos += klen
                headers.append((name, _get_varbytes(p, &pos, rec_end)))
            r._headers = headers
        if pos != rec_end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        if add_overflows(base_offset, off_delta):
            raise CorruptRecordError(f"record offset delta {off_delta} overflows int64")
        r.offset = base_offset + off_delta
        if log_append:
            r.timestamp = log_ts
        elif add_overflows(base_ts, ts_delta):
            raise CorruptRecordError(f"record timestamp delta {ts_delta} overflows int64")
        else:
            r.timestamp = base_ts + ts_delta
        Py_INCREF(r)
        PyList_SET_ITEM(records, i, r)
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left over after {count} records")
    return records


cdef void _read_control(RecordBatch b) except *:
    if not b.records:
        return  # the log cleaner may leave a control batch with no records
    if len(b.records) != 1:
        raise CorruptRecordError(f"control batch holds {len(b.records)} records, expected 1")
    cdef Record r = b.records[0]
    cdef bytes key = r.key
    cdef bytes value
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is too short")
    cdef const uint8_t* k = <const uint8_t*>PyBytes_AS_STRING(key)
    if rd16(k) < 0:
        raise CorruptRecordError(f"control record key version {rd16(k)}")
    b.control_type_id = rd16(k + 2)
    if b.control_type_id == CONTROL_ABORT or b.control_type_id == CONTROL_COMMIT:
        value = r.value
        if value is None or len(value) < 6:
            raise CorruptRecordError("transaction marker value is too short")
        b.coordinator_epoch = rd32(<const uint8_t*>PyBytes_AS_STRING(value) + 2)


cdef object _get_bytes32(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t i = pos[0]
    cdef int32_t n
    if end - i < 4:
        raise CorruptRecordError("legacy message is truncated")
    n = rd32(p + i)
    i += 4
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid length {n}")
        pos[0] = i
        return None
    if n > end - i:
        raise CorruptRecordError(f"field of {n} bytes overruns its message")
    pos[0] = i + n
    return PyBytes_FromStringAndSize(<const char*>p + i, n)


cdef void _decode_legacy(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, bint check_crc,
                         list out, const Origin* where) except *:
    # The caller guarantees end - pos >= 26 (12-byte prefix + the 14-byte minimum).
    cdef int64_t offset = rd64(p + pos)
    cdef uint32_t crc = <uint32_t>rd32(p + pos + 12)
    cdef int magic = p[pos + 16]
    cdef int attributes = p[pos + 17]
    cdef Py_ssize_t q = pos + 18
    cdef int64_t timestamp = -1
    cdef uint32_t actual
    if magic == 1:
        if end - q < 8:
            raise CorruptRecordError("legacy message is truncated")
        timestamp = rd64(p + q)
        q += 8
    if check_crc:
        actual = _compute_crc32(p + pos + 16, end - pos - 16)
        if actual != crc:
            raise CorruptRecordError(
                f"legacy message at offset {offset}: CRC mismatch "
                f"(stored {crc:#010x}, computed {actual:#010x})")
    key = _get_bytes32(p, &q, end)
    value = _get_bytes32(p, &q, end)
    if q != end:
        raise CorruptRecordError("legacy message size disagrees with its fields")
    cdef int codec = attributes & COMPRESSION_MASK
    cdef RecordBatch b = RecordBatch.__new__(RecordBatch)
    b.magic = magic
    b.crc = crc
    b.attributes = attributes
    b.batch_length = <int32_t>(end - pos - 12)
    b.size = end - pos
    b.base_timestamp = timestamp
    b.max_timestamp = timestamp
    cdef Record r
    if codec == 0:
        if offset == INT64_MAX:
            raise CorruptRecordError(f"legacy message offset {offset}: the next offset overflows int64")
        b.base_offset = offset
        b.record_count = 1
        r = Record.__new__(Record)
        _stamp(r, where, -1 if magic == 0 else (1 if attributes & TIMESTAMP_TYPE_BIT else 0))
        r.offset = offset
        r.timestamp = timestamp
        r.key = key
        r.value = value
        b.records = [r]
        out.append(b)
        return
    if value is None:
        raise CorruptRecordError("compressed legacy message has no value")
    cdef bytes inner_data = _decompress(codec, value)
    cdef const uint8_t* ip = <const uint8_t*>PyBytes_AS_STRING(inner_data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(inner_data), ipos = 0, iend
    cdef int32_t ilen
    cdef list inner = []
    cdef RecordBatch ib
    while ipos < n:
        if n - ipos < 26:
            raise CorruptRecordError("truncated message inside a compressed wrapper")
        ilen = rd32(ip + ipos + 8)
        if ilen < 14 or ilen > n - ipos - 12:
            raise CorruptRecordError(f"inner legacy message length {ilen} is invalid")
        iend = ipos + 12 + ilen
        if ip[ipos + 16] > 1:
            raise CorruptRecordError("inner message of a compressed wrapper has a bad magic")
        _decode_legacy(ip, ipos, iend, check_crc, inner, where)
        ib = inner[len(inner) - 1]
        if ib.attributes & COMPRESSION_MASK:
            raise CorruptRecordError("nested compressed legacy messages")
        ipos = iend
    if not inner:
        raise CorruptRecordError("compressed legacy message is empty")
    cdef list records = []
    for ib in inner:
        records.extend(ib.records)
    cdef object shift, shifted
    if magic == 1:
        # Inner offsets are relative; the wrapper carries the last one's absolute offset.
        # The wrapper's timestamp type also rules (Java's LegacyRecord): LogAppendTime
        # stamps its timestamp on every inner message; under CreateTime the inner
        # magic 1 messages are CreateTime and magic 0 ones keep -1 (no timestamp).
        shift = <object>offset - (<Record>records[len(records) - 1]).offset  # Python ints
        for r in records:
            shifted = r.offset + shift
            if not INT64_MIN <= shifted <= INT64_MAX:
                raise CorruptRecordError(f"inner message offset overflows int64 (wrapper {offset})")
            r.offset = shifted
            if attributes & TIMESTAMP_TYPE_BIT:
                r.timestamp = timestamp
                r.timestamp_type = 1
            elif r.timestamp_type != -1:
                r.timestamp_type = 0
    b.base_offset = (<Record>records[0]).offset
    span = <object>(<Record>records[len(records) - 1]).offset - b.base_offset  # Python ints
    if not 0 <= span <= INT32_MAX:
        raise CorruptRecordError(f"compressed message set spans {span} offsets")
    if (<Record>records[len(records) - 1]).offset == INT64_MAX:
        raise CorruptRecordError("compressed message set: the next offset overflows int64")
    b.last_offset_delta = <int32_t>span
    b.record_count = len(records)
    b.records = records
    out.append(b)


cdef uint32_t _compute_crc32(const uint8_t* p, Py_ssize_t n) except? 0:
    import zlib
    return zlib.crc32(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ))


# -- encoding -------------------------------------------------------------------

cdef struct Data:
    const char* ptr
    Py_ssize_t size      # -1 for null
    bint has_view


cdef inline int _get_data(object obj, Data* d, Py_buffer* view, const char* what) except -1:
    d.has_view = False
    if obj is None:
        d.ptr = NULL
        d.size = -1
        return 0
    if type(obj) is bytes:
        d.ptr = PyBytes_AS_STRING(obj)
        d.size = PyBytes_GET_SIZE(obj)
        return 0
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except TypeError:
        raise TypeError(f"{what.decode()} must be bytes or None, not {type(obj).__name__}") from None
    d.ptr = <const char*>view.buf
    d.size = view.len
    d.has_view = True
    return 0


# -- partitioner hashes ----------------------------------------------------------

DEF MURMUR2_SEED = 0x9747b28c
DEF MURMUR2_M = 0x5bd1e995
DEF FNV1A_OFFSET = 2166136261
DEF FNV1A_PRIME = 16777619

cdef inline uint32_t _murmur2(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Kafka's murmur2 (Java ``Utils.murmur2``) over ``n`` bytes, as unsigned."""
    cdef uint32_t m = MURMUR2_M
    cdef uint32_t h = (<uint32_t>MURMUR2_SEED) ^ <uint32_t>n
    cdef uint32_t k
    cdef Py_ssize_t whole = n & ~(<Py_ssize_t>3)
    cdef Py_ssize_t i = 0
    while i < whole:
        k = (<uint32_t>p[i] | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16)
             | (<uint32_t>p[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    cdef Py_ssize_t tail = n & 3
    if tail == 3:
        h ^= <uint32_t>p[whole + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>p[whole + 1] << 8
    if tail >= 1:
        h ^= <uint32_t>p[whole]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h

cdef inline uint32_t _fnv1a_32(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """32-bit FNV-1a over ``n`` bytes."""
    cdef uint32_t h = FNV1A_OFFSET
    cdef Py_ssize_t i
    for i in range(n):
        h ^= p[i]
        h *= <uint32_t>FNV1A_PRIME
    return h

cdef inline int _hash_input(object data, Data* d, Py_buffer* view) except -1:
    if data is None:
        raise TypeError("cannot hash None: data must be bytes-like")
    return _get_data(data, d, view, b"data")

def murmur2(data):
    """Kafka's murmur2 hash of ``data`` as a signed 32-bit int, as Java's ``Utils.murmur2``."""
    cdef Data d
    cdef Py_buffer view
    cdef uint32_t h
    _hash_input(data, &d, &view)
    h = _murmur2(<const uint8_t*>d.ptr, d.size)
    if d.has_view:
        PyBuffer_Release(&view)
    return <int32_t>h

def fnv1a_32(data):
    """32-bit FNV-1a hash of ``data`` (unsigned), as librdkafka's and sarama's."""
    cdef Data d
    cdef Py_buffer view
    cdef uint32_t h
    _hash_input(data, &d, &view)
    h = _fnv1a_32(<const uint8_t*>d.ptr, d.size)
    if d.has_view:
        PyBuffer_Release(&view)
    return h


cdef inline Py_ssize_t _varbytes_size(Py_ssize_t n) noexcept nogil:
    if n < 0:
        return 1
    return uvar_size(zz32(n)) + n


cdef Py_ssize_t _headers_size(object headers) except -1:
    """Encoded size of a headers array; also validates names and values."""
    if not headers:
        return 1
    cdef object seq = PySequence_Fast(headers, b"headers must be a sequence of (name, value)")
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(seq), i, nlen, size
    cdef Py_buffer view
    cdef Data d
    size = uvar_size(zz32(count))
    for i in range(count):
        item = <object>PySequence_Fast_GET_ITEM(seq, i)
        if type(item) is not tuple or PyTuple_GET_SIZE(item) != 2:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise TypeError(f"headers must be (name, value) pairs, not {item!r}")
            item = (item[0], item[1])
        name = <object>PyTuple_GET_ITEM(item, 0)
        if type(name) is not str:
            raise TypeError(f"header names must be str, not {type(name).__name__}")
        PyUnicode_AsUTF8AndSize(name, &nlen)
        _get_data(<object>PyTuple_GET_ITEM(item, 1), &d, &view, b"header value")
        if d.has_view:
            PyBuffer_Release(&view)
        size += _varbytes_size(nlen) + _varbytes_size(d.size)
    return size


def record_size(offset_delta, timestamp_delta, key, value, headers=None):
    """Encoded size of one v2 record, its length prefix included."""
    cdef Py_buffer kv, vv
    cdef Data k, v
    _get_data(key, &k, &kv, b"key")
    try:
        _get_data(value, &v, &vv, b"value")
    except BaseException:
        if k.has_view:
            PyBuffer_Release(&kv)
        raise
    if k.has_view:
        PyBuffer_Release(&kv)
    if v.has_view:
        PyBuffer_Release(&vv)
    cdef Py_ssize_t body = (1 + uvar_size(zz64(<int64_t>timestamp_delta))
                            + uvar_size(zz32(<int64_t>offset_delta))
                            + _varbytes_size(k.size) + _varbytes_size(v.size)
                            + _headers_size(headers))
    return uvar_size(zz32(body)) + body


cdef Py_ssize_t _estimate(object key, object value, object headers) except -1:
    """An upper bound on a record's encoded size (widest varints assumed)."""
    cdef Py_buffer kv, vv
    cdef Data k, v
    _get_data(key, &k, &kv, b"key")
    if k.has_view:
        PyBuffer_Release(&kv)
    _get_data(value, &v, &vv, b"value")
    if v.has_view:
        PyBuffer_Release(&vv)
    return (MAX_RECORD_OVERHEAD + _varbytes_size(k.size) + _varbytes_size(v.size)
            + _headers_size(headers))


cdef int64_t _i64(object v, str what) except? -1:
    """Convert to int64, refusing (ValueError, not a silent wrap) what does not fit."""
    try:
        return v
    except OverflowError:
        raise ValueError(f"{what} {v} does not fit in int64") from None


cdef int64_t _ranged(object v, int64_t lo, int64_t hi, str what) except? -1:
    cdef int64_t x = _i64(v, what)
    if x < lo or x > hi:
        raise ValueError(f"{what} {v} is outside [{lo}, {hi}]")
    return x


cdef int64_t _now_ms():
    return <int64_t>(time.time() * 1000)


cdef class BatchBuilder:
    """Accumulates records for one partition and builds a v2 record batch.

    ``append`` adds one record; ``extend`` adds many from columns; ``build``
    returns the finished batch (compressed, with its CRC). Sizes are tracked as
    the uncompressed batch size, as Kafka's own producers do.
    """

    # The records are written straight into a bytes object (``_raw``, owned)
    # after 61 bytes left for the header, so an uncompressed build() fills in
    # the header and hands that object out without copying. Once handed out
    # (``_sealed``) it is never written again: a later append copies first.
    cdef PyObject* _raw
    cdef uint8_t* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef bint _sealed
    cdef public int compression
    cdef public object compression_level
    cdef public Py_ssize_t max_bytes
    cdef public int32_t max_records
    cdef public int timestamp_type
    cdef readonly Py_ssize_t extended_bytes
    cdef int32_t _count
    cdef int64_t _base_ts
    cdef int64_t _max_ts

    def __cinit__(self):
        self._raw = NULL
        self._buf = NULL
        self._len = 0
        self._cap = 0
        self._sealed = False

    def __dealloc__(self):
        Py_XDECREF(self._raw)

    def __init__(self, *, int compression=0, compression_level=None, Py_ssize_t max_bytes=1048576,
                 int64_t max_records=INT32_MAX, int timestamp_type=0):
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if max_bytes <= HEADER:
            raise ValueError(f"max_bytes must exceed {HEADER}")
        if not 0 < max_records <= INT32_MAX:
            raise ValueError("max_records must be in [1, 2**31-1]")
        if timestamp_type not in (0, 1):
            raise ValueError("timestamp_type must be 0 or 1")
        self.compression = compression
        self.compression_level = compression_level
        self.max_bytes = max_bytes
        self.max_records = <int32_t>max_records
        self.timestamp_type = timestamp_type
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1

    @property
    def record_count(self):
        """Records appended so far."""
        return self._count

    @property
    def size(self):
        """Uncompressed size of the batch so far, its 61-byte header included."""
        return HEADER + self._len

    @property
    def base_timestamp(self):
        """The first record's timestamp (-1 while empty)."""
        return self._base_ts

    @property
    def max_timestamp(self):
        """The largest record timestamp (-1 while empty)."""
        return self._max_ts

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self._len + extra, cap
        cdef PyObject* fresh
        if need <= self._cap and not self._sealed:
            return 0
        # Room for four times what is needed, up to what the batch can hold:
        # a loop's runs fill a batch in one or two steps, each of which may
        # copy what is there. (The room not used is not touched, and is given
        # back when the batch is built.)
        cap = (self._cap if self._cap > need else need) * 4
        if cap < 4096:
            cap = 4096
        if cap > self.max_bytes - HEADER:
            cap = self.max_bytes - HEADER
        if cap < need:
            cap = need
        if self._raw == NULL or self._sealed:
            fresh = PyBytes_FromStringAndSize_raw(NULL, HEADER + cap)
            if fresh == NULL:
                raise MemoryError()
            if self._len:
                memcpy(PyBytes_AS_STRING_raw(fresh) + HEADER, self._buf, self._len)
            Py_XDECREF(self._raw)
            self._raw = fresh
            self._sealed = False
        elif _PyBytes_Resize(&self._raw, HEADER + cap) < 0:
            self._buf = NULL
            self._cap = 0
            self._len = 0
            self._count = 0
            raise MemoryError()
        self._buf = <uint8_t*>PyBytes_AS_STRING_raw(self._raw) + HEADER
        self._cap = cap
        return 0

    def would_overflow(self, key, value, headers=None):
        """Whether appending this record might not fit (a conservative estimate)."""
        if self._count >= self.max_records:
            return True
        cdef Py_ssize_t est = _estimate(key, value, headers)
        return HEADER + self._len + est > self.max_bytes

    cdef inline int _check_delta(self, int64_t timestamp) except -1:
        cdef int64_t base = self._base_ts
        if self._count and ((base < 0 and timestamp > INT64_MAX + base)
                            or (base > 0 and timestamp < INT64_MIN + base)):
            raise ValueError(f"timestamp {timestamp} is too far from the batch's base")
        return 0

    cdef int32_t _append(self, int64_t timestamp, const char* kp, Py_ssize_t klen,
                         const char* vp, Py_ssize_t vlen, object headers) except -2:
        """Append one record from raw pointers; -1 when the batch is full."""
        if self._count >= self.max_records:
            return -1
        self._check_delta(timestamp)
        cdef int64_t ts_delta = timestamp - self._base_ts if self._count else 0
        cdef Py_ssize_t hsize = 1 if headers is None else _headers_size(headers)
        cdef Py_ssize_t body = (1 + uvar_size(zz64(ts_delta)) + uvar_size(zz32(self._count))
                                + _varbytes_size(klen) + _varbytes_size(vlen) + hsize)
        cdef Py_ssize_t size = uvar_size(zz32(body)) + body
        if body > INT32_MAX:
            raise RecordTooLargeError(f"a record of {body} bytes exceeds Kafka's 2 GiB limit")
        if HEADER + self._len + size > self.max_bytes:
            if self._count == 0:
                raise RecordTooLargeError(
                    f"a record of {size} bytes does not fit a batch of at most "
                    f"{self.max_bytes} bytes")
            return -1
        if self._len + size > self._cap or self._sealed:
            self._reserve(size)
        cdef uint8_t* p = self._buf + self._len
        p += put_uvar(p, zz32(body))
        p[0] = 0
        p += 1
        p += put_uvar(p, zz64(ts_delta))
        p += put_uvar(p, zz32(self._count))
        if klen < 0:
            p[0] = 1
            p += 1
        else:
            p += put_uvar(p, zz32(klen))
            memcpy(p, kp, klen)
            p += klen
        if vlen < 0:
            p[0] = 1
            p += 1
        else:
            p += put_uvar(p, zz32(vlen))
            memcpy(p, vp, vlen)
            p += vlen
        if hsize == 1:
            p[0] = 0
            p += 1
        else:
            p = _write_headers(p, headers)
        self._len = p - self._buf
        if self._count == 0:
            self._base_ts = timestamp
            self._max_ts = timestamp
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        return self._count - 1

    def append(self, timestamp, key, value, headers=None):
        """Append one record; return its offset delta, or -1 if the batch is full.

        Raises:
            RecordTooLargeError: the record cannot fit even an empty batch.
            TypeError: key, value or a header has the wrong type.
            ValueError: the timestamp does not fit in int64.
        """
        cdef int overflow = 0
        cdef int64_t ts
        if type(key) is bytes and type(value) is bytes and type(timestamp) is int:
            # The common case, with no buffer to acquire and release.
            ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
            if not overflow:
                return self._append(ts, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                                    PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), headers)
        cdef Py_buffer kv, vv
        cdef Data k, v
        _get_data(key, &k, &kv, b"key")
        try:
            _get_data(value, &v, &vv, b"value")
            try:
                return self._append(_i64(timestamp, "timestamp"), k.ptr, k.size, v.ptr,
                                    v.size, headers)
            finally:
                if v.has_view:
                    PyBuffer_Release(&vv)
        finally:
            if k.has_view:
                PyBuffer_Release(&kv)

    def extend(self, values, keys=None, timestamps=None, headers=None, *,
               Py_ssize_t start=0, stop=None, timestamp=None):
        """Append ``values[start:stop]`` (with matching keys, timestamps, headers).

        Returns the index after the last record appended: ``stop`` when all
        fitted, less when the batch filled up first. Afterwards
        ``extended_bytes`` holds the bytes of the values and keys it appended
        (a null counts 0).

        Raises:
            RecordTooLargeError: the record at ``start`` cannot fit an empty batch.
            ValueError: the columns are shorter than ``stop``.
        """
        self.extended_bytes = 0
        cdef Py_ssize_t n = len(values)
        cdef Py_ssize_t stop_ = n if stop is None else stop
        if not 0 <= start <= stop_ <= n:
            raise ValueError(f"start={start}, stop={stop_} outside a column of {n} values")
        if keys is not None and len(keys) < stop_:
            raise ValueError(f"keys has {len(keys)} entries, fewer than stop={stop_}")
        if headers is not None and len(headers) < stop_:
            raise ValueError(f"headers has {len(headers)} entries, fewer than stop={stop_}")
        cdef _Column vcol = _Column(values, "values")
        cdef _Column kcol = _Column(keys, "keys") if keys is not None else None
        cdef object hseq = PySequence_Fast(headers, b"headers must be a sequence") if headers is not None else None
        cdef int64_t ts_const = 0
        cdef const int64_t[:] ts_buf
        cdef object ts_seq = None
        cdef bint ts_mode_buf = False
        if timestamps is None:
            ts_const = _now_ms() if timestamp is None else _i64(timestamp, "timestamp")
        else:
            try:
                mv = memoryview(timestamps)
            except TypeError:
                ts_seq = PySequence_Fast(timestamps, b"timestamps must be a sequence of ints")
                if PySequence_Fast_GET_SIZE(ts_seq) < stop_:
                    raise ValueError(f"timestamps has {PySequence_Fast_GET_SIZE(ts_seq)} entries, fewer than {stop_}")
            else:
                if mv.itemsize != 8 and mv.format != "B":
                    raise TypeError(f"timestamps buffer must hold int64 values, not {mv.format!r}")
                raw = mv.cast("B")
                if len(raw) % 8:
                    raise ValueError("timestamps buffer is not a whole number of int64 values")
                ts_buf = raw.cast("q")
                ts_mode_buf = True
                if ts_buf.shape[0] < stop_:
                    raise ValueError(f"timestamps has {ts_buf.shape[0]} entries, fewer than {stop_}")
        # Reserve once for what the range needs (bounded by the batch limit) so a
        # bulk append does not pay for a chain of reallocations.
        cdef Py_ssize_t want = vcol.payload(start, stop_) + (stop_ - start) * 8
        if kcol is not None:
            want += kcol.payload(start, stop_)
        if want > self.max_bytes - HEADER - self._len:
            want = self.max_bytes - HEADER - self._len
        if want > 0:
            self._reserve(want)
        cdef Py_ssize_t i
        cdef int64_t ts
        cdef const char* vp
        cdef const char* kp = NULL
        cdef Py_ssize_t vlen, klen = -1
        cdef object h = None
        cdef Py_buffer kv, vv
        cdef int got_v, got_k
        cdef Py_ssize_t payload = 0
        for i in range(start, stop_):
            if ts_mode_buf:
                ts = ts_buf[i]
            elif ts_seq is not None:
                ts = _i64(<object>PySequence_Fast_GET_ITEM(ts_seq, i), "timestamp")
            else:
                ts = ts_const
            if hseq is not None:
                h = <object>PySequence_Fast_GET_ITEM(hseq, i)
            got_v = vcol.get(i, &vp, &vlen, &vv)
            got_k = 0
            try:
                if kcol is not None:
                    got_k = kcol.get(i, &kp, &klen, &kv)
                if self._append(ts, kp, klen, vp, vlen, h) < 0:
                    self.extended_bytes = payload
                    return i
                if vlen > 0:
                    payload += vlen
                if klen > 0:
                    payload += klen
            finally:
                if got_v:
                    PyBuffer_Release(&vv)
                if got_k:
                    PyBuffer_Release(&kv)
        self.extended_bytes = payload
        return stop_

    def build(self, *, base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
              bint is_transactional=False, partition_leader_epoch=-1):
        """Return the finished batch: header, CRC-32C and (compressed) records.

        Raises:
            ValueError: the batch is empty, or a field does not fit its width.
        """
        if self._count == 0:
            raise ValueError("cannot build an empty record batch")
        return self._build(_i64(base_offset, "base_offset"), _i64(producer_id, "producer_id"),
                           <int>_ranged(producer_epoch, -32768, 32767, "producer_epoch"),
                           <int32_t>_ranged(base_sequence, -2147483648, 2147483647, "base_sequence"),
                           is_transactional,
                           <int32_t>_ranged(partition_leader_epoch, -2147483648, 2147483647,
                                            "partition_leader_epoch"))

    cdef bytes _build(self, int64_t base_offset, int64_t producer_id, int producer_epoch,
                      int32_t base_sequence, bint is_transactional,
                      int32_t partition_leader_epoch):
        cdef int attributes = self.compression
        if self.timestamp_type:
            attributes |= TIMESTAMP_TYPE_BIT
        if is_transactional:
            attributes |= TRANSACTIONAL_BIT
        cdef object out
        body = PyMemoryView_FromMemory(<char*>self._buf, self._len, PyBUF_READ)
        if self.compression:
            body = _compress(self.compression, body, self.compression_level)
        elif not self._sealed:
            # Hand out our own buffer: trim it, fill in the header, seal it.
            if self._cap > self._len and _PyBytes_Resize(&self._raw, HEADER + self._len) < 0:
                self._raw = NULL
                raise MemoryError()
            self._cap = self._len
            self._buf = <uint8_t*>PyBytes_AS_STRING_raw(self._raw) + HEADER
            self._sealed = True
            out = <object>self._raw
            _fill_header(<uint8_t*>PyBytes_AS_STRING_raw(self._raw), base_offset,
                         partition_leader_epoch, attributes, self._count - 1, self._base_ts,
                         self._max_ts, producer_id, producer_epoch, base_sequence,
                         self._count, self._len)
            return out
        return _assemble(base_offset, partition_leader_epoch, attributes, self._count - 1,
                         self._base_ts, self._max_ts, producer_id, producer_epoch,
                         base_sequence, self._count, body)


cdef uint8_t* _write_headers(uint8_t* p, object headers) except NULL:
    cdef object seq = PySequence_Fast(headers, b"headers must be a sequence of (name, value)")
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(seq), i, nlen
    cdef const char* np
    cdef Py_buffer view
    cdef Data d
    p += put_uvar(p, zz32(count))
    for i in range(count):
        item = <object>PySequence_Fast_GET_ITEM(seq, i)
        name, value = item
        np = PyUnicode_AsUTF8AndSize(name, &nlen)
        p += put_uvar(p, zz32(nlen))
        memcpy(p, np, nlen)
        p += nlen
        _get_data(value, &d, &view, b"header value")
        if d.size < 0:
            p[0] = 1
            p += 1
        else:
            p += put_uvar(p, zz32(d.size))
            memcpy(p, d.ptr, d.size)
            p += d.size
        if d.has_view:
            PyBuffer_Release(&view)
    return p


@cython.final
cdef class _Column:
    """Uniform access to a column given as a sequence of bytes|None or a BinaryColumn."""

    cdef object seq
    cdef bint binary
    cdef bint large
    cdef const int32_t[:] off32
    cdef const int64_t[:] off64
    cdef const uint8_t[:] data
    cdef const uint8_t[:] validity
    cdef bint has_validity
    cdef Py_ssize_t offset
    cdef Py_ssize_t data_len
    cdef str what

    def __cinit__(self, col, str what):
        self.what = what
        if isinstance(col, BinaryColumn):
            self.binary = True
            self.large = col.large
            if self.large:
                self.off64 = col.offsets
            else:
                self.off32 = col.offsets
            self.data = col.data
            self.data_len = len(col.data)
            self.offset = col.offset
            self.has_validity = col.validity is not None
            if self.has_validity:
                self.validity = col.validity
        else:
            self.binary = False
            self.seq = PySequence_Fast(col, b"expected a sequence of bytes or a BinaryColumn")

    cdef Py_ssize_t payload(self, Py_ssize_t start, Py_ssize_t stop) except -1:
        """Bytes of values in [start, stop): exact for a BinaryColumn and for bytes.

        Other values of a sequence are estimated at 16 bytes each.
        """
        cdef Py_ssize_t lo, hi, i, total = 0
        cdef PyObject* item
        if start >= stop:
            return 0
        if not self.binary:
            for i in range(start, stop):
                item = PySequence_Fast_GET_ITEM(self.seq, i)
                total += PyBytes_GET_SIZE(<object>item) if type(<object>item) is bytes else 16
            return total
        if self.large:
            lo = self.off64[self.offset + start]
            hi = self.off64[self.offset + stop]
        else:
            lo = self.off32[self.offset + start]
            hi = self.off32[self.offset + stop]
        return hi - lo if hi > lo else 0

    cdef int get(self, Py_ssize_t i, const char** ptr, Py_ssize_t* size, Py_buffer* view) except -1:
        """Point at element i; return 1 if a buffer view was taken and must be released."""
        cdef Py_ssize_t j, lo, hi
        cdef Data d
        if not self.binary:
            _get_data(<object>PySequence_Fast_GET_ITEM(self.seq, i), &d, view, b"value")
            ptr[0] = d.ptr
            size[0] = d.size
            return 1 if d.has_view else 0
        j = self.offset + i
        if self.has_validity and not ((self.validity[j >> 3] >> (j & 7)) & 1):
            ptr[0] = NULL
            size[0] = -1
            return 0
        if self.large:
            lo = self.off64[j]
            hi = self.off64[j + 1]
        else:
            lo = self.off32[j]
            hi = self.off32[j + 1]
        if lo < 0 or hi < lo or hi > self.data_len:
            raise ValueError(f"{self.what}[{i}]: offsets {lo}..{hi} outside the data buffer")
        ptr[0] = <const char*>&self.data[0] + lo if self.data_len else <const char*>""
        size[0] = hi - lo
        return 0


def partition_order(keys, Py_ssize_t count, parts=None):
    """Group records by partition, each partition's records in their order (a stable sort).

    Without ``parts``, record ``i`` goes where Kafka's default partitioner
    sends key ``keys[i]``: ``(murmur2(key) & 0x7fffffff) % count``. ``keys`` is
    a sequence of bytes-like keys or a BinaryColumn, with no null key. With
    ``parts`` (a sequence of ints, one per record), record ``i`` goes to
    ``parts[i]`` and ``keys`` only gives the number of records.

    Returns:
        ``(order, bounds)``: ``order`` lists the records' indices grouped by
        partition; partition ``p``'s records are ``order[bounds[p]:bounds[p + 1]]``.

    Raises:
        ValueError: ``count`` below 1, a null key, a partition outside
            ``0..count-1``, or ``parts`` of another length than ``keys``.
        TypeError: a key that is not bytes-like.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    cdef _Column col = _Column(keys, "keys")
    cdef Py_ssize_t n = len(keys)
    cdef object pseq = None
    if parts is not None:
        pseq = PySequence_Fast(parts, b"parts must be a sequence of ints")
        if PySequence_Fast_GET_SIZE(pseq) != n:
            raise ValueError(f"{PySequence_Fast_GET_SIZE(pseq)} partitions for {n} keys")
    cdef int32_t[::1] of = cython.view.array(shape=(max(n, 1),), itemsize=4, format="i")
    cdef int64_t[::1] pos = cython.view.array(shape=(count + 1,), itemsize=8, format="q")
    cdef Py_ssize_t i, part
    cdef const char* ptr
    cdef Py_ssize_t size
    cdef Py_buffer view
    pos[:] = 0
    for i in range(n):
        if pseq is None:
            if col.get(i, &ptr, &size, &view):
                part = (_murmur2(<const uint8_t*>ptr, size) & 0x7FFFFFFF) % count
                PyBuffer_Release(&view)
            elif size < 0:
                raise ValueError(f"keys[{i}] is null: a null key has no partition of its own")
            else:
                part = (_murmur2(<const uint8_t*>ptr, size) & 0x7FFFFFFF) % count
        else:
            part = _index(<object>PySequence_Fast_GET_ITEM(pseq, i))
            if part < 0 or part >= count:
                raise ValueError(f"parts[{i}] = {part} is outside 0..{count - 1}")
        of[i] = <int32_t>part
        pos[part + 1] += 1
    for part in range(count):
        pos[part + 1] += pos[part]
    bounds = [pos[part] for part in range(count + 1)]
    order = [None] * n
    for i in range(n):
        part = of[i]
        order[pos[part]] = i
        pos[part] += 1
    return order, bounds


def take(column, order):
    """``column``'s elements in ``order`` (a sequence of indices): a list, or a BinaryColumn.

    A BinaryColumn gives a BinaryColumn (int64 offsets; nulls kept); any other
    sequence gives a list.

    Raises:
        IndexError: an index outside the column.
    """
    cdef object oseq = PySequence_Fast(order, b"order must be a sequence of ints")
    cdef Py_ssize_t n = PySequence_Fast_GET_SIZE(oseq)
    cdef Py_ssize_t i, j, length, total = 0, nulls = 0
    cdef object seq
    if not isinstance(column, BinaryColumn):
        seq = PySequence_Fast(column, b"expected a sequence or a BinaryColumn")
        length = PySequence_Fast_GET_SIZE(seq)
        out = [None] * n
        for i in range(n):
            j = _index(<object>PySequence_Fast_GET_ITEM(oseq, i))
            if j < 0 or j >= length:
                raise IndexError(f"order[{i}] = {j} is outside a column of {length}")
            out[i] = <object>PySequence_Fast_GET_ITEM(seq, j)
        return out
    cdef _Column col = _Column(column, "column")
    length = len(column)
    cdef int64_t[::1] idx = cython.view.array(shape=(max(n, 1),), itemsize=8, format="q")
    cdef const char* ptr
    cdef Py_ssize_t size
    cdef Py_buffer view
    for i in range(n):
        j = _index(<object>PySequence_Fast_GET_ITEM(oseq, i))
        if j < 0 or j >= length:
            raise IndexError(f"order[{i}] = {j} is outside a column of {length}")
        idx[i] = j
        col.get(j, &ptr, &size, &view)  # a BinaryColumn takes no view
        if size < 0:
            nulls += 1
        else:
            total += size
    cdef bytes data = PyBytes_FromStringAndSize(NULL, total)
    cdef bytes offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 8)
    cdef char* dp = PyBytes_AS_STRING(data)
    cdef int64_t* op = <int64_t*>PyBytes_AS_STRING(offsets)
    cdef bytearray validity = bytearray((n + 7) // 8) if nulls else None
    cdef int64_t at = 0
    op[0] = 0
    for i in range(n):
        col.get(idx[i], &ptr, &size, &view)
        if size >= 0:
            memcpy(dp + at, ptr, size)
            at += size
            if nulls:
                validity[i >> 3] |= 1 << (i & 7)
        op[i + 1] = at
    return BinaryColumn(offsets, data, validity, large=True)


cdef void _fill_header(uint8_t* p, int64_t base_offset, int32_t leader_epoch, int attributes,
                       int32_t last_offset_delta, int64_t base_ts, int64_t max_ts,
                       int64_t producer_id, int producer_epoch, int32_t base_sequence,
                       int32_t count, Py_ssize_t blen) except *:
    """Write a v2 batch header in front of ``blen`` bytes of records, CRC included."""
    wr64(p, base_offset)
    wr32(p + 8, 49 + blen)
    wr32(p + 12, leader_epoch)
    p[16] = 2
    wr16(p + 21, attributes)
    wr32(p + 23, last_offset_delta)
    wr64(p + 27, base_ts)
    wr64(p + 35, max_ts)
    wr64(p + 43, producer_id)
    wr16(p + 51, producer_epoch)
    wr32(p + 53, base_sequence)
    wr32(p + 57, count)
    wr32(p + 17, <uint32_t>_crc32c(PyMemoryView_FromMemory(<char*>p + 21, HEADER - 21 + blen, PyBUF_READ)))


cdef bytes _assemble(int64_t base_offset, int32_t leader_epoch, int attributes,
                     int32_t last_offset_delta, int64_t base_ts, int64_t max_ts,
                     int64_t producer_id, int producer_epoch, int32_t base_sequence,
                     int32_t count, object body):
    cdef Py_buffer bv
    PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE)
    cdef Py_ssize_t blen = bv.len
    cdef bytes out
    try:
        if blen + 49 > INT32_MAX:
            raise ValueError("record batch exceeds 2 GiB")
        out = PyBytes_FromStringAndSize(NULL, HEADER + blen)
        memcpy(PyBytes_AS_STRING(out) + HEADER, bv.buf, blen)
    finally:
        PyBuffer_Release(&bv)
    _fill_header(<uint8_t*>PyBytes_AS_STRING(out), base_offset, leader_epoch, attributes,
                 last_offset_delta, base_ts, max_ts, producer_id, producer_epoch,
                 base_sequence, count, blen)
    return out


@cython.final
cdef class ProduceSet:
    """sarama's produce set: per topic and partition, the batches for one request."""

    cdef dict _batches
    cdef Py_ssize_t _bytes
    cdef Py_ssize_t _records
    cdef int _compression
    cdef object _level
    cdef Py_ssize_t _max_batch_bytes
    cdef int64_t _max_batch_records
    cdef public Py_ssize_t max_request_bytes
    cdef public Py_ssize_t flush_bytes
    cdef public Py_ssize_t flush_records

    def __init__(self, *, int compression=0, compression_level=None,
                 Py_ssize_t max_batch_bytes=1048576, int64_t max_batch_records=INT32_MAX,
                 Py_ssize_t max_request_bytes=104857600, Py_ssize_t flush_bytes=0,
                 Py_ssize_t flush_records=0):
        if max_request_bytes < max_batch_bytes:
            raise ValueError("max_request_bytes must be at least max_batch_bytes")
        BatchBuilder(compression=compression, compression_level=compression_level,
                     max_bytes=max_batch_bytes, max_records=max_batch_records)  # validate once
        self._compression = compression
        self._level = compression_level
        self._max_batch_bytes = max_batch_bytes
        self._max_batch_records = max_batch_records
        self.max_request_bytes = max_request_bytes
        self.flush_bytes = flush_bytes
        self.flush_records = flush_records
        self._batches = {}
        self._bytes = 0
        self._records = 0

    @property
    def buffered_bytes(self):
        """Uncompressed bytes buffered over all partitions (batch headers included)."""
        return self._bytes

    @property
    def buffered_records(self):
        """Records buffered over all partitions."""
        return self._records

    def __len__(self):
        return len(self._batches)

    def would_overflow(self, topic, partition, key, value, headers=None):
        """Whether this record might not fit the partition's batch or the request."""
        cdef Py_ssize_t est = _estimate(key, value, headers)
        b = self._batches.get((topic, partition))
        if b is None:
            return self._bytes + HEADER + est > self.max_request_bytes
        return self._bytes + est > self.max_request_bytes or b.would_overflow(key, value, headers)

    def ready_to_flush(self):
        """Whether the buffered records should be sent now (sarama's readyToFlush)."""
        if self._records == 0:
            return False
        if self.flush_bytes == 0 and self.flush_records == 0:
            return True
        if self.flush_records and self._records >= self.flush_records:
            return True
        return bool(self.flush_bytes and self._bytes >= self.flush_bytes)

    def add(self, topic, partition, timestamp, key, value, headers=None):
        """Add a record; return its offset delta in the batch, or -1 if the batch is full.

        Raises:
            RecordTooLargeError: the record cannot fit even an empty batch.
        """
        tp = (topic, partition)
        cdef BatchBuilder b = self._batches.get(tp)
        cdef bint fresh = b is None
        if fresh:
            b = BatchBuilder(compression=self._compression, compression_level=self._level,
                             max_bytes=self._max_batch_bytes, max_records=self._max_batch_records)
        cdef Py_ssize_t before = 0 if fresh else HEADER + b._len
        idx = b.append(timestamp, key, value, headers)
        if idx < 0:
            return -1
        if fresh:
            self._batches[tp] = b
        self._bytes += HEADER + b._len - before
        self._records += 1
        return idx

    def batch(self, topic, partition):
        """The partition's batch being filled, if any."""
        return self._batches.get((topic, partition))

    def drain(self):
        """Take every non-empty batch out, leaving the set empty."""
        out = [(tp[0], tp[1], b) for tp, b in self._batches.items()]
        self._batches = {}
        self._bytes = 0
        self._records = 0
        return out


# -- per-record staging -------------------------------------------------------

cdef object _NO_RUN = object()  # no run open: equal to no topic
# A timestamp a run's int64 column can hold; others go one by one (and fail alone).
cdef object _INT64_MIN = -(1 << 63)
cdef object _INT64_MAX = (1 << 63) - 1


@cython.final
cdef class StagerLock:
    """A lock for :class:`RecordStager`'s runs: taking it when it is free costs no call.

    A ``threading.Lock`` taken once per record costs a Python call, and on
    CPython 3.11 a clock read, each time. This one counts its holder and the
    threads waiting for it in a field changed only while the GIL is held
    (the GIL makes each change atomic): taking it free and giving it back
    with no one waiting touch nothing else. A thread that finds it taken
    waits, without the GIL, on a lock the holder hands over when it gives
    it back. Python code uses it as a ``threading.Lock`` (``with``,
    :meth:`acquire`, :meth:`release`, :meth:`locked`); not reentrant.
    """

    cdef PyThread_type_lock _handoff  # held but while handed to a waiting thread
    cdef Py_ssize_t _count  # the holder and the threads waiting (0: free)

    def __cinit__(self):
        self._handoff = PyThread_allocate_lock()
        if self._handoff == NULL:
            raise MemoryError()
        PyThread_acquire_lock(self._handoff, WAIT_LOCK)
        self._count = 0

    def __dealloc__(self):
        if self._handoff != NULL:
            PyThread_free_lock(self._handoff)

    cdef inline void take(self) noexcept:
        """Hold it, waiting (without the GIL) while another thread does."""
        self._count += 1
        if self._count > 1:
            with nogil:
                PyThread_acquire_lock(self._handoff, WAIT_LOCK)

    cdef inline void give(self) noexcept:
        """Give it back: to a waiting thread, if there is one."""
        self._count -= 1
        if self._count > 0:
            PyThread_release_lock(self._handoff)

    def acquire(self, bint blocking=True):
        """Hold it; without ``blocking``, only when it is free. Whether it is now held."""
        if not blocking and self._count:
            return False
        self.take()
        return True

    def release(self):
        """Give it back.

        Raises:
            RuntimeError: it is not held.
        """
        if self._count <= 0:
            raise RuntimeError("release unlocked lock")
        self.give()

    def locked(self):
        """Whether a thread holds it."""
        return self._count > 0

    def __enter__(self):
        self.take()
        return True

    def __exit__(self, *exc):
        self.give()


cdef class RecordStager:
    """Records staged one at a time in any thread, for a producer running in another.

    The per-record half of ``pykaf.sync.Producer``: ``produce`` and
    ``send_async`` append a plain record (a bytes value and key, or no key;
    both within ``small`` bytes; an int timestamp or none; no headers) to the
    open run of records for its topic and partition (of records without
    ``on_delivery``, with one, or of ``send_async`` records; keyed or not,
    stamped or not) under ``lock``, with no Python frame, and return; any other record, or one that opens a
    run, goes to the slow path the owner passed in (``stage`` /
    ``stage_future``), which opens runs through :meth:`open_run`,
    :meth:`open_callback_run` or :meth:`open_future_run`. ``poll(0)``
    returns 0 at once while ``ready`` is empty and calls ``poll_wait``
    otherwise. ``queued`` counts the records staged, ``accepted`` those the
    loop has taken over, ``futures`` the ``send_async`` records among them;
    past ``max_pending`` records in between, every call takes the slow path
    (which waits for room). ``joined_bytes`` adds up the values and keys of
    the records joined to runs here (not those the owner opened runs with).
    """

    cdef readonly object lock
    cdef StagerLock _fast  # the lock, when it is a StagerLock: taken with no call
    cdef object _acquire
    cdef object _release
    cdef object _stage
    cdef object _stage_future
    cdef object _poll_wait
    cdef public object future_type
    cdef public object ready
    cdef public Py_ssize_t queued
    cdef public Py_ssize_t accepted
    cdef public Py_ssize_t futures
    cdef public Py_ssize_t joined_bytes
    cdef public Py_ssize_t small
    cdef public Py_ssize_t max_pending
    # The open run: its kind (0 none, 1 plain, 2 with callbacks, 3 futures),
    # where it goes, its lists (keys None for a keyless run).
    cdef int _kind
    cdef object _topic
    cdef object _partition
    cdef list _values
    cdef list _keys
    cdef list _stamps
    cdef list _targets

    def __init__(self, lock, stage, stage_future, poll_wait, future_type, ready, *,
                 Py_ssize_t small, Py_ssize_t max_pending):
        self.reset_lock(lock)
        self._stage = stage
        self._stage_future = stage_future
        self._poll_wait = poll_wait
        self.future_type = future_type
        self.ready = ready
        self.small = small
        self.max_pending = max_pending
        self.queued = 0
        self.accepted = 0
        self.futures = 0
        self.joined_bytes = 0
        self.close_runs()

    def reset_lock(self, lock):
        """Use ``lock`` from now on (a fresh one in a forked child)."""
        self.lock = lock
        self._fast = lock if type(lock) is StagerLock else None
        self._acquire = lock.acquire
        self._release = lock.release

    cdef _open(self, int kind, topic, partition, list values, list keys, list stamps,
               list targets):
        self._kind = kind
        self._topic = topic
        self._partition = partition
        self._values = values
        self._keys = keys
        self._stamps = stamps
        self._targets = targets

    def open_run(self, topic, partition, list values, list keys=None, list timestamps=None):
        """Under ``lock``: records without ``on_delivery`` join ``values`` (``keys``, ...)."""
        self._open(1, topic, partition, values, keys, timestamps, None)

    def open_callback_run(self, topic, partition, list values, list callbacks, list keys=None,
                          list timestamps=None):
        """Under ``lock``: records with ``on_delivery`` join ``values``, it ``callbacks``."""
        self._open(2, topic, partition, values, keys, timestamps, callbacks)

    def open_future_run(self, topic, partition, list values, list futures, list keys=None,
                        list timestamps=None):
        """Under ``lock``: ``send_async`` records join ``values``, their futures ``futures``."""
        self._open(3, topic, partition, values, keys, timestamps, futures)

    def close_runs(self):
        """Under ``lock``: no open run; the next record takes the slow path."""
        self._open(0, _NO_RUN, None, None, None, None, None)

    cdef bint _plain(self, key, value, partition, headers, timestamp):
        """Whether the record may join a run (without looking at the run)."""
        return (headers is None
                and (timestamp is None
                     or (type(timestamp) is int and _INT64_MIN <= timestamp <= _INT64_MAX))
                and type(value) is bytes
                and PyBytes_GET_SIZE(value) <= self.small
                and (key is None or (type(key) is bytes and PyBytes_GET_SIZE(key) <= self.small))
                and (partition is None or type(partition) is int)
                and self.queued - self.accepted < self.max_pending)

    cdef bint _join(self, int kind, topic, partition, value, key, timestamp, target):
        """Under the lock: append the record to the open run if it is of it."""
        if (self._kind != kind or (self._keys is None) != (key is None)
                or (self._stamps is None) != (timestamp is None)):
            return False
        if not (topic == self._topic
                and (partition is self._partition or partition == self._partition)):
            return False
        self._values.append(value)
        self.joined_bytes += PyBytes_GET_SIZE(value)
        if key is not None:
            self._keys.append(key)
            self.joined_bytes += PyBytes_GET_SIZE(key)
        if timestamp is not None:
            self._stamps.append(timestamp)
        if target is not None:
            self._targets.append(target)
        self.queued += 1
        return True

    cdef inline int _hold(self) except -1:
        """Take the lock: a StagerLock with no call, any other through its ``acquire``."""
        if self._fast is not None:
            self._fast.take()
        else:
            self._acquire()
        return 0

    cdef inline int _unhold(self) except -1:
        """Give the lock back (:meth:`_hold`'s pair)."""
        if self._fast is not None:
            self._fast.give()
        else:
            self._release()
        return 0

    def produce(self, topic, value, *, key=None, partition=None, headers=None,
                timestamp=None, on_delivery=None):
        """Stage one record; see ``pykaf.sync.Producer.produce``."""
        cdef bint joined = False
        if self._plain(key, value, partition, headers, timestamp):
            self._hold()
            try:
                joined = self._join(1 if on_delivery is None else 2, topic, partition, value,
                                    key, timestamp, on_delivery)
            finally:
                self._unhold()
        if not joined:
            self._stage(topic, value, key, partition, headers, timestamp, on_delivery)

    def send_async(self, topic, value, *, key=None, partition=None, headers=None,
                   timestamp=None, timeout=None):
        """Stage one record with a future; see ``pykaf.sync.Producer.send_async``.

        The future is made untracked by the cyclic garbage collector (as
        CPython does for tuples of atoms): hundreds of thousands of live
        futures otherwise cost more in collections than the rest of the
        path. It holds no object that could lead back to it until it gets a
        waiter, a done-callback or an error, and its type tracks it again
        then (:func:`gc_track`).
        """
        future = self.future_type(self)
        PyObject_GC_UnTrack(<void*>future)
        if self._plain(key, value, partition, headers, timestamp):
            self._hold()
            try:
                if self._join(3, topic, partition, value, key, timestamp, future):
                    self.futures += 1
                    return future
            finally:
                self._unhold()
        return self._stage_future(future, topic, value, key, partition, headers, timestamp,
                                  timeout)

    def poll(self, timeout=0):
        """Run ready callbacks; see ``pykaf.sync.Producer.poll``."""
        if timeout == 0 and not self.ready:
            return 0
        return self._poll_wait(timeout)


def gc_track(obj):
    """Have the cyclic garbage collector track ``obj`` again, if it does not."""
    if PyObject_IS_GC(obj) and not PyObject_GC_IsTracked(obj):
        PyObject_GC_Track(<void*>obj)


include "_codec_columns.pxi"
