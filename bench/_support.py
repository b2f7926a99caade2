"""Shared pieces of the benchmark harness: labels, data sets, peer loading, checks.

Every benchmark tags itself with :func:`tag` so ``bench/ratios.py`` can pair it
with the others of its group. The conventions, which new benchmarks (producer,
consumer, protocol) must follow too:

* ``benchmark.group`` names the *case* ("encode-lz4", "decode-none", ...);
  every client measured on that case uses the same group.
* ``extra_info["client"]`` is the client label: ``pykaf`` (the compiled codec,
  the headline), ``pykaf-py`` (its pure-Python twin), or a peer
  (``aiokafka``, ``kafka-python``, ...).
* ``extra_info["role"]`` is ``subject`` for pykaf's labels, ``peer`` otherwise.
* ``extra_info["variant"]`` (optional) tells apart several pykaf ways of doing
  the same case (``column`` / ``list`` in the bulk encode).
* ``extra_info["params"]`` (optional) holds settings that must be equal for two
  benchmarks to be compared, e.g. ``lz4-level=9``; a subject is paired only
  with peers whose params are equal to its own.
* ``extra_info["records"]`` is the number of records one call handles; ratios
  and records/s are computed per record, so cases may differ in size.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import itertools
import random
import re
import statistics
import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PYKAF = "pykaf"
PYKAF_PY = "pykaf-py"
AIOKAFKA = "aiokafka"
KAFKA_PYTHON = "kafka-python"
SUBJECTS = (PYKAF, PYKAF_PY)

SEED = 20240611
BASE_TIMESTAMP = 1_700_000_000_000
COMPRESSIONS = {"none": 0, "lz4": 3, "zstd": 4}

# The v2 batch header (61 bytes), as Kafka's protocol guide lays it out.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size


# -- labels -------------------------------------------------------------------
def tag(
    benchmark: Any,
    *,
    group: str,
    client: str,
    records: int,
    variant: str | None = None,
    params: str = "",
    **extra: Any,
) -> None:
    """Name a benchmark's case and client the way ``bench/ratios.py`` reads them."""
    benchmark.group = group
    info = benchmark.extra_info
    info["client"] = client
    info["role"] = "subject" if client in SUBJECTS else "peer"
    info["records"] = records
    info["params"] = params
    if variant is not None:
        info["variant"] = variant
    info.update(extra)


def note_rate(benchmark: Any, records: int) -> None:
    """Add records/s (from the median round) to ``extra_info`` once timing is done."""
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable: nothing was timed
        return
    median = stats.stats.median
    if median > 0:
        benchmark.extra_info["records_per_s"] = round(records / median)


# -- memory -----------------------------------------------------------------------
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def status_kb(field: str) -> int | None:
    """A field of /proc/self/status in kB (VmRSS, VmHWM), or None where there is none."""
    try:
        match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None
    return trim


def reset_peak_rss() -> int | None:
    """Reset the peak RSS to the current RSS (Linux >= 4.0); return the RSS in kB.

    Memory freed by earlier rounds but still resident (malloc keeps it) would
    be reused without raising the RSS, hiding what a round needs: collect the
    garbage and hand free memory back to the kernel (glibc's malloc_trim) first.
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return None
    return status_kb("VmRSS")


class CpuMeter:
    """The client's CPU seconds per round: every thread of this process, user and system.

    The brokers run in other processes, so this is what the client spent
    (librdkafka's threads, a trio or asyncio loop's thread, the caller's).
    ``note`` adds ``extra_info["cpu_s_per_M"]``: the median round's CPU
    seconds per million records, beside the throughput.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def run(self, work: Callable[[], object]) -> None:
        """Call ``work``, adding the CPU time it took to ``seconds``."""
        start = time.process_time()
        try:
            work()
        finally:
            self.seconds.append(time.process_time() - start)

    def note(self, benchmark: Any, records: int) -> None:
        """Write the median round's CPU seconds per million records to ``extra_info``."""
        if self.seconds and records:
            per_m = statistics.median(self.seconds) / records * 1_000_000
            benchmark.extra_info["cpu_s_per_M"] = round(per_m, 3)


def time_produce_rounds(
    benchmark: Any,
    broker: Any,
    make_round: Callable[[str, str, list[bytes]], Any],
    values: list[bytes],
    *,
    topic_prefix: str,
    partitions: int,
    rounds: int,
    label: str,
    memory: bool = False,
) -> None:
    """Time ``rounds`` producer rounds, each into a fresh topic, checking what arrived.

    Each round (``bench/test_producer.py``'s ``Round``) is made and started
    (producer open and warm: one record to each partition) before its timing,
    stopped after it. The topic's high watermarks must add up to ``values``
    plus the warm-up records, and the round must say every value was
    acknowledged; the topic is deleted after. ``label`` names the client in
    failure messages. With ``memory``, ``extra_info["peak_rss_growth_mb"]`` is
    the largest growth of the peak RSS over a round (reset once the producer is
    warm), as ``bench/test_producer.py`` records it.
    """
    records = len(values)
    ids = itertools.count()
    open_rounds: list[Any] = []
    acknowledged: list[int] = []
    growth_kb: list[int] = []
    start_rss: list[int | None] = []

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        topic = f"{topic_prefix}-{next(ids)}"
        broker.create_topic(topic, partitions)
        one = make_round(broker.bootstrap, topic, values)
        open_rounds.append(one)
        one.start()
        if memory:
            start_rss.append(reset_peak_rss())
        return (one,), {}

    def teardown(one: Any) -> None:
        if memory:
            peak, base = status_kb("VmHWM"), start_rss[-1]
            if peak is not None and base is not None:
                growth_kb.append(max(peak - base, 0))
        open_rounds.remove(one)
        acknowledged.append(one.stop())
        total = sum(broker.high_watermarks(one.topic).values())
        assert total == records + partitions, (
            f"{one.topic} holds {total} records; {records} + {partitions} warm-up were sent"
        )
        broker.delete_topic(one.topic)

    cpu = CpuMeter()

    def one_round(one: Any) -> None:
        cpu.run(one.run)

    benchmark.pedantic(one_round, setup=setup, teardown=teardown, rounds=rounds, iterations=1)
    while open_rounds:  # --benchmark-disable runs the target once, without teardown
        teardown(open_rounds[0])
    assert acknowledged == [records] * len(acknowledged) and acknowledged, (
        f"{label}: acknowledged {acknowledged} per round, expected {records}"
    )
    note_rate(benchmark, records)
    cpu.note(benchmark, records)
    if growth_kb:
        benchmark.extra_info["peak_rss_growth_mb"] = round(max(growth_kb) / 1024, 1)


def confluent_conf(bootstrap: str, linger_ms: int) -> dict[str, Any]:
    """confluent-kafka's producer settings in every comparison: acks=all, idempotent, a linger."""
    return {
        "bootstrap.servers": bootstrap,
        "linger.ms": linger_ms,
        "acks": "all",
        "enable.idempotence": True,
    }


def confluent_produce_all(producer: Any, topic: str, values: Any) -> int:
    """``produce()`` each value with confluent-kafka, serving the queue when it is full.

    Returns how many times the local queue was full (each one a ``poll(0)``
    and a retry). The caller flushes.
    """
    produce, poll = producer.produce, producer.poll
    full = 0
    for value in values:
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # the local queue is full: serve it and retry
                full += 1
                poll(0)
    return full


def confluent_produce_idiom(
    producer: Any, topic: str, values: Any, callback: Callable[[Any, Any], object] | None = None
) -> int:
    """confluent-kafka's documented loop: ``produce()`` then ``poll(0)`` per value.

    With ``callback``, each record is produced with it (``callback=``, as in
    confluent-kafka's README). On ``BufferError`` (the local queue is full)
    it serves the queue with ``poll(0.1)`` and tries again; returns how many
    times the queue was full. The caller flushes.
    """
    produce, poll = producer.produce, producer.poll
    full = 0
    if callback is None:
        for value in values:
            try:
                produce(topic, value)
            except BufferError:  # its queue (100,000 messages) is full
                full += _produce_when_room(producer, topic, value)
            poll(0)
        return full
    for value in values:
        try:
            produce(topic, value, callback=callback)
        except BufferError:
            full += _produce_when_room(producer, topic, value, callback)
        poll(0)
    return full


def _produce_when_room(
    producer: Any, topic: str, value: bytes, callback: Callable[[Any, Any], object] | None = None
) -> int:
    """Serve the queue (``poll(0.1)``) until ``value`` fits; return how many tries it took."""
    tries = 1
    while True:
        producer.poll(0.1)
        try:
            if callback is None:
                producer.produce(topic, value)
            else:
                producer.produce(topic, value, callback=callback)
        except BufferError:
            tries += 1
        else:
            return tries


# -- data ---------------------------------------------------------------------
_EVENTS = ("click", "view", "purchase", "login", "logout", "scroll", "search", "share")
_FILL = b"abcdefghijklmnopqrstuvwxyz0123456789"


def make_value(rng: random.Random, i: int, size: int) -> bytes:
    """One ``size``-byte, JSON-looking value: some structure, some random fields.

    Compressible the way real event payloads are (repeated field names), not
    all-random bytes (which no codec compresses) nor one repeated byte.
    """
    head = (
        f'{{"id":{i},"user":"u{rng.randrange(100_000):05d}",'
        f'"event":"{rng.choice(_EVENTS)}","amount":{rng.random() * 1000:.2f},"tag":"'
    ).encode()
    pad = size - len(head) - 2
    if pad < 0:
        raise ValueError(f"value size {size} is too small for the template")
    return head + bytes(rng.choices(_FILL, k=pad)) + b'"}'


@dataclass(frozen=True)
class RecordSet:
    """Records to encode: parallel lists of keys, values and timestamps."""

    keys: list[bytes | None]
    values: list[bytes]
    timestamps: list[int]

    def __len__(self) -> int:
        return len(self.values)

    @property
    def payload_bytes(self) -> int:
        """Sum of every key's and value's length (what a decoder hands back)."""
        return sum(len(k) for k in self.keys if k is not None) + sum(len(v) for v in self.values)


@cache
def small_records(count: int = 1000, value_size: int = 100) -> RecordSet:
    """``count`` records: 10-byte keys, ``value_size``-byte values, fixed seed."""
    rng = random.Random(SEED)
    keys: list[bytes | None] = [b"key-%06d" % i for i in range(count)]
    values = [make_value(rng, i, value_size) for i in range(count)]
    timestamps = [BASE_TIMESTAMP + i // 10 for i in range(count)]
    return RecordSet(keys, values, timestamps)


@dataclass(frozen=True)
class BulkValues:
    """``count`` values of ``size`` bytes, as one buffer and as a list of bytes."""

    data: bytes
    offsets: array[int]  # int32 Arrow-style offsets, count + 1 of them
    values: list[bytes]
    size: int

    def __len__(self) -> int:
        return len(self.values)


@cache
def bulk_values(count: int = 1_000_000, size: int = 100) -> BulkValues:
    """Fixed-seed values for the bulk encode (random bytes: no compression there)."""
    rng = random.Random(SEED)
    data = rng.randbytes(count * size)
    offsets = array("i", range(0, count * size + 1, size))
    values = [data[i : i + size] for i in range(0, count * size, size)]
    return BulkValues(data, offsets, values, size)


# -- clients --------------------------------------------------------------------
def load_pykaf(client: str) -> ModuleType:
    """The compiled codec for ``pykaf``, the pure-Python twin for ``pykaf-py``.

    A missing compiled codec skips its benchmarks with the import error as the
    reason (``ratios.py --check`` then reports those ratios as missing).
    """
    name = "pykaf._codec" if client == PYKAF else "pykaf._codec_py"
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        pytest.skip(f"{name} did not import ({exc}); build it with setup.py build_ext --inplace")
    expected = "cython" if client == PYKAF else "python"
    if getattr(module, "IMPLEMENTATION", None) != expected:
        pytest.fail(f"{name}.IMPLEMENTATION is {module.IMPLEMENTATION!r}, expected {expected!r}")
    return module


def load_aiokafka() -> ModuleType:
    """aiokafka's record module, insisting on its Cython classes.

    aiokafka silently falls back to pure Python when its extension does not
    load (or when AIOKAFKA_NO_EXTENSIONS is set); benchmarking that fallback
    would flatter pykaf, so it skips instead, saying why.
    """
    records: ModuleType = pytest.importorskip("aiokafka.record.default_records")
    info = aiokafka_info()
    if not info["cython"]:
        pytest.skip(f"aiokafka's C extension is not in use: {info['builder']}")
    return records


def load_kafka_python() -> ModuleType:
    """kafka-python's record module (pure Python; skips if not installed)."""
    pytest.importorskip("kafka")
    return importlib.import_module("kafka.record.default_records")


def _is_extension(module: ModuleType) -> bool:
    path = getattr(module, "__file__", "") or ""
    return path.endswith((".so", ".pyd"))


@cache
def aiokafka_info() -> dict[str, Any]:
    """Which aiokafka classes are in use and whether they come from its C extension."""
    try:
        import aiokafka
        from aiokafka.record import default_records, memory_records
    except ImportError as exc:
        return {"installed": False, "error": str(exc), "cython": False}
    builder = default_records.DefaultRecordBatchBuilder
    reader = memory_records.MemoryRecords
    mods = [importlib.import_module(c.__module__) for c in (builder, reader)]
    return {
        "installed": True,
        "version": aiokafka.__version__,
        "builder": f"{builder.__module__}.{builder.__qualname__}",
        "reader": f"{reader.__module__}.{reader.__qualname__}",
        "extension_files": [m.__file__ for m in mods],
        "cython": all(_is_extension(m) for m in mods),
    }


@cache
def kafka_python_info() -> dict[str, Any]:
    """kafka-python's version and whether its CRC32C comes from the C ``crc32c`` package."""
    try:
        import kafka
        from kafka.record import util
    except ImportError as exc:
        return {"installed": False, "error": str(exc)}
    crc = getattr(util, "_crc32c", None)
    return {
        "installed": True,
        "version": kafka.__version__,
        "records": "pure Python",
        "crc32c": getattr(crc, "__module__", "?"),
    }


@cache
def pykaf_info() -> dict[str, Any]:
    """Which pykaf codec modules import, from which files."""
    out: dict[str, Any] = {}
    for label, name in ((PYKAF, "pykaf._codec"), (PYKAF_PY, "pykaf._codec_py")):
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            out[label] = {"module": name, "error": str(exc)}
        else:
            out[label] = {
                "module": name,
                "implementation": getattr(module, "IMPLEMENTATION", "?"),
                "file": module.__file__,
            }
    return out


# -- checks -----------------------------------------------------------------------
def check_v2_batch(
    data: bytes | bytearray,
    *,
    count: int,
    compression: int,
    crc_function: Callable[[memoryview], int] | None = None,
) -> None:
    """Assert ``data`` is exactly one well-formed v2 batch of ``count`` records.

    Reads the header itself (no client's decoder involved): magic 2, the
    compression bits, the record count, the declared length and the CRC-32C.
    """
    assert len(data) >= BATCH_HEADER_SIZE, f"batch of {len(data)} bytes is shorter than a header"
    fields = BATCH_HEADER.unpack_from(data, 0)
    length, magic, crc, attributes, records = fields[1], fields[3], fields[4], fields[5], fields[12]
    assert magic == 2, f"magic {magic}, expected 2"
    assert attributes & 0x07 == compression, f"compression bits {attributes & 7} != {compression}"
    assert records == count, f"header says {records} records, expected {count}"
    assert length + 12 == len(data), f"declared length {length + 12} != {len(data)} bytes"
    if crc_function is None:
        import crc32c  # a pykaf dependency

        crc_function = crc32c.crc32c
    assert crc_function(memoryview(data)[21:]) == crc, "CRC-32C mismatch"
