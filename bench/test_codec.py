"""Record-batch codec benchmarks: pykaf against aiokafka (Cython) and kafka-python.

Cases (one pytest-benchmark group each):

* ``encode-{none,lz4,zstd}``: 1,000 records (10-byte keys, 100-byte values, no
  headers) appended one by one into a v2 batch, then built.
* ``decode-{none,lz4,zstd}``: the same records, already encoded, decoded with
  every key and value touched (CRC checked, as each client's consumer does by
  default).
* ``bulk-encode``: 1,000,000 100-byte values (no keys) into one batch; pykaf
  from a ``BinaryColumn`` and from a list through ``BatchBuilder.extend``,
  aiokafka by its per-record ``append`` (it has no bulk path). The pure-Python
  twin takes ~12 us a record whatever the count, so it encodes the first
  100,000 only (ratios and records/s are per record) to keep the run short.

Compression levels are compared like for like: aiokafka always compresses lz4
at level 9 (its builder takes no level), pykaf and kafka-python default to
level 0, so pykaf runs lz4 at both levels and each is paired with the peer of
the same level (``params``). zstd is level 3 everywhere.

Each benchmark checks its own output once (outside the timing): a broken
benchmark fails instead of looking fast.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from bench._support import (
    AIOKAFKA,
    BASE_TIMESTAMP,
    BATCH_HEADER_SIZE,
    COMPRESSIONS,
    KAFKA_PYTHON,
    PYKAF,
    PYKAF_PY,
    RecordSet,
    aiokafka_info,
    bulk_values,
    check_v2_batch,
    load_aiokafka,
    load_kafka_python,
    load_pykaf,
    note_rate,
    small_records,
    tag,
)

SMALL = 1000
BULK = 1_000_000
BATCH_BYTES = 1 << 20  # per-batch limit for the 1,000-record cases (the batch is ~115 KB)
BULK_BATCH_BYTES = 1 << 20  # Kafka's default max message size: batches a producer sends
NO_HEADERS: list[tuple[str, bytes | None]] = []

# Small cases: pytest-benchmark picks the round count from max_time. The warm-up
# lets allocators and caches settle before the first timed round.
SMALL_BENCH = pytest.mark.benchmark(max_time=2.0, min_rounds=20, warmup=True, warmup_iterations=5)


def _aiokafka_lz4_level() -> int:
    """The lz4 level aiokafka's builder uses (its ``lz4_encode`` default; 9 in 0.11-0.14)."""
    try:
        from aiokafka import codec
    except ImportError:
        return 9
    default = inspect.signature(codec.lz4_encode).parameters["level"].default
    return int(default)


def _level_params(compression: str, level: int | None) -> str:
    return "" if level is None else f"{compression}-level={level}"


# Which lz4/zstd level each peer uses; pykaf runs at each of them.
PEER_LEVELS: dict[str, dict[str, int | None]] = {
    AIOKAFKA: {"none": None, "lz4": _aiokafka_lz4_level(), "zstd": 3},
    KAFKA_PYTHON: {"none": None, "lz4": 0, "zstd": 3},  # python-lz4 and zstandard defaults
}


def _encode_cases() -> list[Any]:
    cases = []
    for compression in COMPRESSIONS:
        levels = sorted(
            {lv for peer in PEER_LEVELS.values() if (lv := peer[compression]) is not None}
        )
        subject_levels: list[int | None] = list(levels) or [None]
        for client in (PYKAF, AIOKAFKA, KAFKA_PYTHON, PYKAF_PY):
            if client in PEER_LEVELS:
                client_levels = [PEER_LEVELS[client][compression]]
            else:
                client_levels = subject_levels
            for level in client_levels:
                suffix = "" if level is None else f"-l{level}"
                cases.append(
                    pytest.param(
                        compression, client, level, None, id=f"{compression}-{client}{suffix}"
                    )
                )
                if client == PYKAF:
                    # The same records through extend(): how a batching producer
                    # encodes, without a Python-level call per record.
                    cases.append(
                        pytest.param(
                            compression,
                            client,
                            level,
                            "extend",
                            id=f"{compression}-{client}-extend{suffix}",
                        )
                    )
    return cases


# -- encoders: each returns a function that encodes a RecordSet into one batch --
def _pykaf_encoder(
    client: str, compression: int, level: int | None, rs: RecordSet, variant: str | None = None
) -> Callable[[], bytes]:
    codec = load_pykaf(client)
    builder_cls = codec.BatchBuilder
    kwargs = {} if level is None else {"compression_level": level}
    timestamps, keys, values = rs.timestamps, rs.keys, rs.values

    if variant == "extend":

        def encode_columns() -> bytes:
            builder = builder_cls(compression=compression, max_bytes=BATCH_BYTES, **kwargs)
            builder.extend(values, keys, timestamps)
            data: bytes = builder.build()
            return data

        return encode_columns

    def encode() -> bytes:
        builder = builder_cls(compression=compression, max_bytes=BATCH_BYTES, **kwargs)
        append = builder.append
        for ts, key, value in zip(timestamps, keys, values, strict=True):
            append(ts, key, value)
        data: bytes = builder.build()
        return data

    return encode


def _peer_encoder(client: str, compression: int, rs: RecordSet) -> Callable[[], bytes | bytearray]:
    module = load_aiokafka() if client == AIOKAFKA else load_kafka_python()
    builder_cls = module.DefaultRecordBatchBuilder
    timestamps, keys, values = rs.timestamps, rs.keys, rs.values
    offsets = list(range(len(rs)))  # the peers' append takes the offset delta

    def encode() -> bytes | bytearray:
        builder = builder_cls(2, compression, 0, -1, -1, -1, BATCH_BYTES)
        append = builder.append
        for offset, ts, key, value in zip(offsets, timestamps, keys, values, strict=True):
            append(offset, ts, key, value, NO_HEADERS)
        data: bytes | bytearray = builder.build()
        return data

    return encode


# -- decoders: each returns (records, key+value bytes) after touching every record --
def _pykaf_decoder(client: str) -> Callable[[bytes], tuple[int, int]]:
    decode_batches = load_pykaf(client).decode_batches

    def decode(data: bytes) -> tuple[int, int]:
        count = size = 0
        for batch in decode_batches(data):
            for record in batch.records:
                size += len(record.key) + len(record.value)
                count += 1
        return count, size

    return decode


def _peer_decoder(client: str) -> Callable[[bytes], tuple[int, int]]:
    if client == AIOKAFKA:
        load_aiokafka()
        from aiokafka.record.memory_records import MemoryRecords
    else:
        load_kafka_python()
        from kafka.record.memory_records import MemoryRecords

    def decode(data: bytes) -> tuple[int, int]:
        count = size = 0
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            if not batch.validate_crc():  # what both consumers do by default (check_crcs)
                raise ValueError("CRC mismatch")
            for record in batch:
                size += len(record.key) + len(record.value)
                count += 1
        return count, size

    return decode


def _pairs(client: str, data: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record in ``data``, read with ``client``'s decoder (untimed)."""
    if client in (PYKAF, PYKAF_PY):
        batches = load_pykaf(client).decode_batches(bytes(data))
        return [(r.key, r.value) for b in batches for r in b.records]
    if client == AIOKAFKA:
        from aiokafka.record.memory_records import MemoryRecords
    else:
        from kafka.record.memory_records import MemoryRecords
    out: list[tuple[bytes | None, bytes | None]] = []
    records = MemoryRecords(bytes(data))
    while (batch := records.next_batch()) is not None:
        out.extend((r.key, r.value) for r in batch)
    return out


def _independent_reader(client: str) -> str | None:
    """A decoder other than ``client``'s own, to cross-check its output (interop)."""
    if client != AIOKAFKA and aiokafka_info()["cython"]:
        return AIOKAFKA
    for other in (PYKAF, PYKAF_PY, KAFKA_PYTHON):
        if other != client:
            try:
                if other == KAFKA_PYTHON:
                    load_kafka_python()
                else:
                    load_pykaf(other)
            except pytest.skip.Exception:
                continue
            return other
    return None


@SMALL_BENCH
@pytest.mark.parametrize(("compression", "client", "level", "variant"), _encode_cases())
def test_encode(
    benchmark: Any, compression: str, client: str, level: int | None, variant: str | None
) -> None:
    code = COMPRESSIONS[compression]
    rs = small_records(SMALL)
    encode: Callable[[], bytes | bytearray]
    if client in (PYKAF, PYKAF_PY):
        encode = _pykaf_encoder(client, code, level, rs, variant)
    else:
        encode = _peer_encoder(client, code, rs)
    tag(
        benchmark,
        group=f"encode-{compression}",
        client=client,
        variant=variant,
        records=SMALL,
        params=_level_params(compression, level),
        compression=compression,
        level=level,
    )
    data = benchmark(encode)
    note_rate(benchmark, SMALL)

    check_v2_batch(data, count=SMALL, compression=code)
    expected = list(zip(rs.keys, rs.values, strict=True))
    assert _pairs(client, data) == expected, f"{client} does not read back its own batch"
    reader = _independent_reader(client)
    if reader is not None:
        assert _pairs(reader, data) == expected, f"{reader} misreads {client}'s batch"


@cache
def _decode_input(compression: str) -> tuple[bytes, str]:
    """The batch every decoder reads for a case, and who encoded it.

    pykaf's encoder (compiled, else pure Python) makes it: its output has the
    same layout as the Java client's (lz4 frames of 64 KB blocks, no content
    checksum). Should pykaf not import, aiokafka's encoder stands in.
    """
    rs = small_records(SMALL)
    code = COMPRESSIONS[compression]
    for client in (PYKAF, PYKAF_PY):
        try:
            return _pykaf_encoder(client, code, None, rs)(), client
        except pytest.skip.Exception:
            continue
    return bytes(_peer_encoder(AIOKAFKA, code, rs)()), AIOKAFKA


@SMALL_BENCH
@pytest.mark.parametrize("client", [PYKAF, AIOKAFKA, KAFKA_PYTHON, PYKAF_PY])
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_decode(benchmark: Any, compression: str, client: str) -> None:
    code = COMPRESSIONS[compression]
    rs = small_records(SMALL)
    decode = _pykaf_decoder(client) if client in (PYKAF, PYKAF_PY) else _peer_decoder(client)
    data, encoded_by = _decode_input(compression)
    check_v2_batch(data, count=SMALL, compression=code)
    tag(
        benchmark,
        group=f"decode-{compression}",
        client=client,
        records=SMALL,
        compression=compression,
        input_encoded_by=encoded_by,
        input_bytes=len(data),
    )
    result = benchmark(decode, data)
    note_rate(benchmark, SMALL)

    assert result == (SMALL, rs.payload_bytes), f"decoded {result}, expected {SMALL} records"
    assert _pairs(client, data) == list(zip(rs.keys, rs.values, strict=True))


# -- bulk ----------------------------------------------------------------------------
# Rounds of the bulk cases: a pykaf round takes ~0.1 s, aiokafka's ~0.4 s, the pure-Python
# twin's ~1.3 s (on 100,000 records). Many short rounds keep pykaf's median steady when
# the shared machine has a busy second (the 111 MB batch makes it memory-bound).
BULK_ROUNDS = {PYKAF: 15, AIOKAFKA: 7, PYKAF_PY: 3}
BULK_WARMUP = {PYKAF: 2, AIOKAFKA: 1, PYKAF_PY: 0}
BULK_RECORDS = {PYKAF: BULK, AIOKAFKA: BULK, PYKAF_PY: 100_000}


def _varint_size(value: int) -> int:
    """Bytes of Kafka's zigzag varint for a signed ``value``."""
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _bulk_batch_size(count: int, value_size: int) -> int:
    """Exact uncompressed size of ``count`` null-key records of ``value_size`` bytes.

    All share one timestamp (delta 0); only the offset delta's varint grows,
    so records are summed by ranges of equal varint width.
    """
    total = BATCH_HEADER_SIZE
    start = 0
    while start < count:
        width = _varint_size(start)
        stop = min(count, 1 << (7 * width - 1))  # first offset delta one byte wider
        # attributes, timestamp delta, offset delta, key length (-1), value length, value, headers
        body = 1 + 1 + width + 1 + _varint_size(value_size) + value_size + 1
        total += (stop - start) * (_varint_size(body) + body)
        start = stop
    return total


@pytest.mark.parametrize(
    ("client", "variant"),
    [
        pytest.param(PYKAF, "column", id="pykaf-column"),
        pytest.param(PYKAF, "list", id="pykaf-list"),
        pytest.param(AIOKAFKA, None, id="aiokafka-append"),
        pytest.param(PYKAF_PY, "column", id="pykaf-py-column"),
        pytest.param(PYKAF_PY, "list", id="pykaf-py-list"),
    ],
)
def test_bulk_encode(benchmark: Any, client: str, variant: str | None) -> None:
    bulk = bulk_values(BULK, 100)
    count = BULK_RECORDS[client]
    ts = BASE_TIMESTAMP
    run: Callable[[], tuple[int, bytes | bytearray]]
    if client == AIOKAFKA:
        builder_cls = load_aiokafka().DefaultRecordBatchBuilder
        values = bulk.values[:count]

        def run() -> tuple[int, list[bytes | bytearray]]:
            batches: list[bytes | bytearray] = []
            builder = builder_cls(2, 0, 0, -1, -1, -1, BULK_BATCH_BYTES)
            append = builder.append
            offset = 0
            for value in values:
                if append(offset, ts, None, value, NO_HEADERS) is None:  # full
                    batches.append(builder.build())
                    builder = builder_cls(2, 0, 0, -1, -1, -1, BULK_BATCH_BYTES)
                    append = builder.append
                    offset = 0
                    append(offset, ts, None, value, NO_HEADERS)
                offset += 1
            batches.append(builder.build())
            return len(values), batches

    else:
        codec = load_pykaf(client)
        from pykaf._columns import BinaryColumn

        source: Any
        if variant == "column":
            source = BinaryColumn(bulk.offsets, bulk.data, length=count)
        else:
            source = bulk.values[:count]
        builder_cls = codec.BatchBuilder

        def run() -> tuple[int, list[bytes | bytearray]]:
            batches: list[bytes | bytearray] = []
            i = 0
            while i < count:
                builder = builder_cls(max_bytes=BULK_BATCH_BYTES)
                i = builder.extend(source, start=i, timestamp=ts)
                batches.append(builder.build())
            return i, batches

    tag(benchmark, group="bulk-encode", client=client, records=count, variant=variant)
    added, batches = benchmark.pedantic(
        run, rounds=BULK_ROUNDS[client], iterations=1, warmup_rounds=BULK_WARMUP[client]
    )
    note_rate(benchmark, count)

    assert added == count, f"{added} records went into batches, expected {count}"
    counts = [int.from_bytes(b[57:61], "big") for b in batches]
    assert sum(counts) == count
    assert all(len(b) <= BULK_BATCH_BYTES for b in batches)
    check_v2_batch(batches[0], count=counts[0], compression=0)
    check_v2_batch(batches[-1], count=counts[-1], compression=0)
    assert len(batches[0]) == _bulk_batch_size(counts[0], bulk.size), "layout differs"
    first, last = batches[0], batches[-1]
    assert first[BATCH_HEADER_SIZE + 8 : BATCH_HEADER_SIZE + 108] == bulk.values[0]
    assert last[-101:-1] == bulk.values[count - 1]
