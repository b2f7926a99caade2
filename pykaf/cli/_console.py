"""``pykaf produce`` and ``pykaf consume``: the console producer and consumer."""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import sys
import time
from collections.abc import Iterator
from typing import IO, Any, BinaryIO

from pykaf._cluster.client import NEWEST, OLDEST
from pykaf.cli._common import (
    CliError,
    DataError,
    add_connection,
    add_producer_options,
    client_settings,
    pairs,
    partitions_arg,
    plural,
    producer_options,
    settings,
)

#: Seconds between looks at the positions with -e.
END_CHECK = 0.2
#: Lines gathered before they go to the producer's bulk path as one batch.
CHUNK = 10_000
#: What ``consume`` fetches per partition unless -X says otherwise: a quarter
#: of the library's 1 MiB. The command prints record by record, so larger
#: fetches only wait in memory: 2,000,000 records of 100 B on 3 partitions
#: peaked at 210 MB RSS with 1 MiB and 88 MB with this, as fast within noise.
CONSUME_PARTITION_FETCH_BYTES = 262_144


def add_produce(sub: Any) -> None:
    """The ``produce`` subcommand's arguments."""
    p = sub.add_parser(
        "produce",
        help="send lines from stdin (or a file) to a topic",
        description="Each line becomes one record (without its line ending).",
    )
    add_connection(p)
    p.add_argument("topic")
    p.add_argument("-f", "--file", type=argparse.FileType("rb"), help="read this file, not stdin")
    p.add_argument(
        "-K", "--key-separator", metavar="SEP", help="split each line once at SEP: key SEP value"
    )
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="leave out a line without the -K separator, with a warning on stderr "
        "(default: stop there, exit 1)",
    )
    p.add_argument(
        "-H", "--header", action="append", default=[], metavar="NAME=VALUE", help="repeatable"
    )
    p.add_argument("-p", "--partition", type=int, help="every record to this partition")
    add_producer_options(p)
    p.set_defaults(run=run_produce)


class _Lines:
    """The records of ``stream``'s lines: ``(key, value)``, split at ``separator`` if given.

    A line without the separator ends the iteration with a :class:`DataError`
    naming its number, or, with ``skip_bad`` set, is left out with a warning on
    stderr (and counted in :attr:`skipped`).
    """

    def __init__(
        self, stream: BinaryIO, separator: bytes | None, *, source: str, skip_bad: bool
    ) -> None:
        self.stream = stream
        self.separator = separator
        self.source = source
        self.skip_bad = skip_bad
        self.skipped = 0

    def __iter__(self) -> Iterator[tuple[bytes | None, bytes]]:
        separator = self.separator
        for number, line in enumerate(self.stream, 1):
            line = line.rstrip(b"\r\n")
            if separator is None:
                yield None, line
                continue
            key, sep, value = line.partition(separator)
            if sep:
                yield key, value
                continue
            where = f"{self.source} line {number}"
            missing = f"no key separator {separator.decode()!r}"
            if not self.skip_bad:
                raise DataError(
                    f"{where} has {missing}: {line[:60]!r} (--skip-bad-lines leaves such lines out)"
                )
            self.skipped += 1
            print(f"pykaf: skipped {where} ({missing}): {line[:60]!r}", file=sys.stderr)


def run_produce(args: argparse.Namespace) -> int:
    """Send every line; report the count on stderr; exit 1 if any record failed.

    A line without the ``-K`` separator stops the command (exit 1, the lines
    before it sent) unless ``--skip-bad-lines`` leaves it out.
    """
    import pykaf.sync

    headers = [(k, v.encode()) for k, v in pairs(args.header, "--header").items()]
    separator = args.key_separator.encode() if args.key_separator is not None else None
    if separator == b"":
        raise CliError("-K takes a separator of at least one character")
    if args.skip_bad_lines and separator is None:
        raise CliError("--skip-bad-lines skips lines without the -K separator: give -K")
    lines = _Lines(
        args.file or sys.stdin.buffer,
        separator,
        source=args.file.name if args.file else "stdin",
        skip_bad=args.skip_bad_lines,
    )
    options = producer_options(args)
    started = time.monotonic()
    sent = 0
    with pykaf.sync.Producer(args.bootstrap_servers, **options) as producer:
        keys: list[bytes | None] = []
        values: list[bytes] = []

        def flush_chunk() -> int:
            if not values:
                return 0
            count = producer.send_many(
                args.topic,
                values,
                keys=keys if separator is not None else None,
                headers=[headers] * len(values) if headers else None,
                partition=args.partition,
            )
            keys.clear()
            values.clear()
            return count

        bad: DataError | None = None
        try:
            for key, value in lines:
                keys.append(key)
                values.append(value)
                if len(values) >= CHUNK:
                    sent += flush_chunk()
        except DataError as exc:
            bad = exc  # the lines before it are sent (and counted), then it is reported
        sent += flush_chunk()
    seconds = time.monotonic() - started
    skipped = f" ({plural(lines.skipped, 'bad line')} skipped)" if lines.skipped else ""
    print(
        f"produced {plural(sent, 'record')} to {args.topic} in {seconds:.2f} s{skipped}",
        file=sys.stderr,
    )
    if bad is not None:
        raise bad
    return 0


def add_consume(sub: Any) -> None:
    """The ``consume`` subcommand's arguments."""
    c = sub.add_parser(
        "consume",
        help="print a topic's records",
        description="Print a topic's records (all partitions, --partitions, or as a group member).",
    )
    add_connection(c)
    c.add_argument("topic")
    c.add_argument("-p", "--partitions", type=partitions_arg, help="e.g. 0,2 (default: all)")
    start = c.add_mutually_exclusive_group()
    start.add_argument(
        "--from",
        dest="start",
        default="end",
        metavar="beginning|end|OFFSET",
        help="where to start (default: end; with --group: when nothing is committed)",
    )
    start.add_argument(
        "--from-time",
        metavar="TIME",
        help="start at the first record at or after TIME (ms since the epoch, or ISO 8601)",
    )
    c.add_argument("-g", "--group", help="consume as a member of this group (commits offsets)")
    c.add_argument("-n", "--max-messages", type=int, help="stop after this many records")
    c.add_argument(
        "-t", "--timeout", type=float, help="stop when no record came for this many seconds"
    )
    c.add_argument(
        "-e",
        "--exit-at-end",
        action="store_true",
        help="stop once every partition was read to its end as it was at the start (kcat -e)",
    )
    c.add_argument(
        "--format",
        choices=["value", "json"],
        default="value",
        help="value: each value on a line; json: one JSON object per record",
    )
    c.add_argument("--isolation-level", choices=["read_committed", "read_uncommitted"])
    c.set_defaults(run=run_consume)


def _start(args: argparse.Namespace) -> int:
    if args.from_time is not None:
        return _time_ms(args.from_time)
    if args.start == "beginning":
        return OLDEST
    if args.start == "end":
        return NEWEST
    try:
        offset = int(args.start)
    except ValueError:
        raise CliError(f"--from must be beginning, end or an offset, not {args.start!r}") from None
    if offset < 0:
        raise CliError("--from takes an offset >= 0")
    return offset


def _time_ms(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--from-time must be ms since the epoch or ISO 8601, not {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def _text(data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {"text": None}
    try:
        return {"text": data.decode()}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def write_record(out: IO[bytes], record: Any, fmt: str) -> None:
    """Write ``record`` to ``out``: its value on a line, or one JSON object (``fmt``)."""
    if fmt == "value":
        out.write((record.value or b"") + b"\n")
        return
    key, value = _text(record.key), _text(record.value)
    doc = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key.get("text"),
        "value": value.get("text"),
        "headers": [[k, _text(v).get("text")] for k, v in record.headers],
    }
    delivery_count = getattr(record, "delivery_count", None)  # a share group's record
    if delivery_count is not None:
        doc["delivery_count"] = delivery_count
    if "base64" in key:
        doc["key_base64"] = key["base64"]
    if "base64" in value:
        doc["value_base64"] = value["base64"]
    out.write(json.dumps(doc).encode() + b"\n")


def run_consume(args: argparse.Namespace) -> int:
    """Print records until --max-messages, --timeout idle seconds, or Ctrl-C."""
    import pykaf.sync

    options = settings(args)
    if args.isolation_level:
        options["isolation_level"] = args.isolation_level
    options.setdefault("max_partition_fetch_bytes", CONSUME_PARTITION_FETCH_BYTES)
    start = _start(args)
    out = sys.stdout.buffer
    count = 0
    limit = args.max_messages
    ends: dict[tuple[str, int], int] = {}
    if args.group is not None:
        if args.from_time is not None or start >= 0:
            raise CliError("with --group, --from is beginning or end (where nothing is committed)")
        if args.exit_at_end:
            raise CliError("-e reads assigned partitions: use it without --group")
        options.setdefault("auto_offset_reset", "earliest" if start == OLDEST else "latest")
        reader: Any = pykaf.sync.ConsumerGroup(
            args.bootstrap_servers, args.group, [args.topic], **options
        )
    else:
        level = options.get("isolation_level", "read_committed")
        assignment = _assignment(args, start, level)
        if args.exit_at_end:
            ends = _ends(args, [p for _, p, _ in assignment], level)
        reader = pykaf.sync.Consumer(args.bootstrap_servers, **options)
        reader.assign(assignment)
    interrupted = False

    def at_end() -> bool:
        return all(reader.position(t, p) >= end for (t, p), end in ends.items())

    # With -e, poll wakes up often to look at the positions (transaction
    # markers move them with no record to show); -t still ends an idle wait.
    wait = min(args.timeout or END_CHECK, END_CHECK) if ends else args.timeout
    idle_since = time.monotonic()
    try:
        while limit is None or count < limit:
            if ends and at_end():
                break
            record = reader.poll(timeout=wait)
            if record is None:
                idle = time.monotonic() - idle_since
                if ends and (args.timeout is None or idle < args.timeout):
                    continue
                break
            idle_since = time.monotonic()
            write_record(out, record, args.format)
            count += 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            out.flush()  # (BrokenPipeError when the reader of stdout went away)
        finally:
            reader.close()
    print(f"consumed {plural(count, 'record')}", file=sys.stderr)
    return 130 if interrupted else 0


def _ends(
    args: argparse.Namespace, partitions: list[int], level: str
) -> dict[tuple[str, int], int]:
    """Each partition's end now (its last stable offset with read_committed): where -e stops."""
    import pykaf.sync

    with pykaf.sync.Admin(args.bootstrap_servers, **client_settings(args)) as admin:
        return admin.list_offsets(
            {(args.topic, p): NEWEST for p in partitions}, isolation_level=level
        )


def _assignment(args: argparse.Namespace, start: int, level: str) -> list[tuple[str, int, int]]:
    """Where each partition starts: ``start`` as it is, or looked up by one admin client.

    ``NEWEST`` and times (``--from-time``) are looked up here: the admin
    client's ``NEWEST`` is checked against a Fetch (right on Tansu, whose
    ListOffsets(latest) lands inside the last batch: quirk: tansu-latest-offset);
    a time with no record
    that late starts at the end.
    """
    import pykaf.sync

    topic = args.topic
    look_up = args.from_time is not None or start == NEWEST
    if args.partitions and not look_up:
        return [(topic, p, start) for p in args.partitions]
    with pykaf.sync.Admin(args.bootstrap_servers, **client_settings(args)) as admin:
        parts = args.partitions or [p.partition for p in admin.describe_topic(topic).partitions]
        if not look_up:
            return [(topic, p, start) for p in parts]
        ends = admin.list_offsets({(topic, p): NEWEST for p in parts}, isolation_level=level)
        found = ends
        if args.from_time is not None:
            found = admin.list_offsets({(topic, p): start for p in parts})
    return [
        (topic, p, found[(topic, p)] if found[(topic, p)] >= 0 else ends[(topic, p)]) for p in parts
    ]
