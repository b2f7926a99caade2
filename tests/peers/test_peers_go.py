"""pykaf beside the Go clients sarama (IBM/sarama 1.61.1) and franz-go (1.22.3), on Kafka.

The Go program of ``tests/peers/go`` prints one JSON event a line (keys,
values and header values in base64). For each library:

- it produces, idempotently, what pykaf reads exactly, and pykaf's
  partitioner that matches the library's default (fnv1a for sarama, murmur2
  for franz-go) puts every key where it did;
- it produces transactions, committed and aborted in turns: pykaf's
  read_committed consumer reads only the committed ones, read_uncommitted all;
- it reads what pykaf writes, in batches compressed with each codec and with
  headers (a null header value and a null key too), and, read_committed, only
  the committed ones of two pykaf producers' interleaved transactions;
- it shares a classic consumer group with a pykaf member, with the range
  assignor and with cooperative-sticky (incremental rebalances): disjoint
  assignments covering the topic, every record read once, and it resumes at
  pykaf's commits when pykaf leaves.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio
from peer_support import (
    JsonProcess,
    Recorder,
    Row,
    b64,
    open_json_process,
    read_all,
    run_json,
    unique,
    write_interleaved_transactions,
)

import pykaf
from pykaf.testing import KafkaCluster

pytestmark = pytest.mark.broker

LIBRARIES = ["sarama", "franz"]
#: pykaf's partitioner that makes the library's default partitioner's choices.
DEFAULT_PARTITIONER = {"sarama": "fnv1a", "franz": "murmur2"}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Sent = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]  # key, value, headers


def rows_of(events: list[dict[str, Any]], kind: str = "record", start: int = 0) -> list[Row]:
    """The records of the Go peer's ``kind`` events, sorted by partition and offset."""
    return sorted(
        (e["partition"], e["offset"], b64(e["key"]), b64(e["value"]))
        for e in events[start:]
        if e["event"] == kind
    )


def peer_command(
    go_peer: Path, library: str, command: str, bootstrap: str, *args: str
) -> list[str]:
    return [str(go_peer), library, command, "--brokers", bootstrap, *args]


@pytest.mark.parametrize("library", LIBRARIES)
async def test_idempotent_producer_to_pykaf(
    kafka_cluster: KafkaCluster, go_peer: Path, library: str
) -> None:
    topic = unique(f"{library}-idem")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 3)
    events = await run_json(
        library,
        peer_command(
            go_peer, library, "produce", kafka_cluster.bootstrap,
            *("--topic", topic, "--count", "300", "--keys", "9", "--prefix", "v-"),
            "--idempotent",
        ),
    )  # fmt: skip
    sent = rows_of(events, "sent")
    assert len(sent) == 300
    assert sorted(v or b"" for _, _, _, v in sent) == sorted(b"v-%d" % i for i in range(300))
    assert len({p for p, _, _, _ in sent}) > 1  # 9 keys over 3 partitions: a real check
    rows = await read_all(kafka_cluster.bootstrap, topic, 3)
    assert rows == sent
    for p in range(3):  # in the order sent, with no gap
        values = [int((v or b"")[2:]) for part, _, _, v in rows if part == p]
        assert values == sorted(values)
        assert [o for part, o, _, _ in rows if part == p] == list(range(len(values)))

    where = {k: p for p, _, k, _ in sent}
    async with pykaf.open_producer(
        kafka_cluster.bootstrap, partitioner=DEFAULT_PARTITIONER[library]
    ) as producer:
        for key, partition in sorted(where.items(), key=lambda kv: kv[0] or b""):
            md = await producer.send(topic, b"pykaf", key=key)
            assert md.partition == partition, key


@pytest.mark.parametrize("library", LIBRARIES)
async def test_transactional_producer_to_pykaf(
    kafka_cluster: KafkaCluster, go_peer: Path, library: str
) -> None:
    topic = unique(f"{library}-txn")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 2)
    plan = "commit:20,abort:15,commit:10,abort:5,abort:7,commit:12"
    events = await run_json(
        library,
        peer_command(
            go_peer, library, "produce", kafka_cluster.bootstrap,
            *("--topic", topic, "--keys", "5", "--prefix", "t-"),
            *("--transactional-id", unique(f"{library}-txn"), "--txns", plan),
        ),
    )  # fmt: skip
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == 69
    committed = rows_of([e for e in sent if e["committed"]], "sent")
    aborted = rows_of([e for e in sent if not e["committed"]], "sent")
    assert len(committed) == 42 and len(aborted) == 27
    assert await read_all(kafka_cluster.bootstrap, topic, 2) == committed
    everything = await read_all(
        kafka_cluster.bootstrap, topic, 2, isolation_level="read_uncommitted"
    )
    assert everything == sorted(committed + aborted)


@pytest.mark.parametrize("library", LIBRARIES)
async def test_reads_what_pykaf_writes(
    kafka_cluster: KafkaCluster, go_peer: Path, library: str
) -> None:
    topic = unique(f"{library}-read")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 2)
    expected: list[Sent] = []
    for codec in CODECS:
        async with pykaf.open_producer(
            kafka_cluster.bootstrap, compression=codec, linger=0.05
        ) as producer:
            for i in range(60):
                key = None if i % 10 == 0 else b"%s-k%d" % (codec.encode(), i % 7)
                value = b"%s-%d-" % (codec.encode(), i) + b"x" * (i * 13 % 200)
                headers: list[tuple[str, bytes | None]] = [
                    ("codec", codec.encode()),
                    ("i", b"%d" % i),
                ]
                if i % 4 == 0:
                    headers.append(("null", None))
                producer.send_nowait(topic, value, key=key, headers=headers, partition=i % 2)
                expected.append((key, value, headers))
            await producer.flush()

    got: list[Sent] = []
    events = await run_json(
        library,
        peer_command(
            go_peer, library, "consume", kafka_cluster.bootstrap,
            *("--topic", topic, "--partitions", "2", "--count", str(len(expected))),
        ),
    )  # fmt: skip
    records = [e for e in events if e["event"] == "record"]
    for e in records:
        headers_ = [(h["key"], b64(h["value"])) for h in e.get("headers") or []]
        got.append((b64(e["key"]), b64(e["value"]), headers_))
    assert len(records) == len(expected)
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    # and in pykaf's order within each partition (offsets as pykaf reads them)
    rows = await read_all(kafka_cluster.bootstrap, topic, 2)
    assert sorted((e["partition"], e["offset"], b64(e["value"])) for e in records) == [
        (p, o, v) for p, o, _, v in rows
    ]


@pytest.mark.parametrize("library", LIBRARIES)
async def test_reads_pykaf_transactions_read_committed(
    kafka_cluster: KafkaCluster, go_peer: Path, library: str
) -> None:
    topic = unique(f"{library}-rc")
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, 2)
    committed, aborted = await write_interleaved_transactions(
        kafka_cluster.bootstrap, topic, compression="lz4"
    )
    assert len(committed) == len(aborted) == 60
    events = await run_json(
        library,
        peer_command(
            go_peer, library, "consume", kafka_cluster.bootstrap,
            *("--topic", topic, "--partitions", "2", "--count", str(len(committed))),
            "--read-committed",
        ),
    )  # fmt: skip
    rows = rows_of(events)
    assert sorted((k, v) for _, _, k, v in rows) == sorted(committed)
    assert rows == await read_all(kafka_cluster.bootstrap, topic, 2)  # and at the same offsets


def go_assignment(member: JsonProcess) -> set[int] | None:
    """The Go member's current assignment (None once revoked, until assigned again)."""
    current: set[int] | None = None
    for e in member.events:
        if e["event"] == "assigned":
            added = {p for ps in (e.get("partitions") or {}).values() for p in ps}
            current = (current or set()) | added
        elif e["event"] == "revoked":
            gone = {p for ps in (e.get("partitions") or {}).values() for p in ps}
            current = (current or set()) - gone or None
    return current


# The first member leads the group: its assignor computes the assignment.
# (range with pykaf leading is left out for time: pykaf's range is Java's,
# checked by tests/group/test_assignors.py.)
@pytest.mark.parametrize(
    ("assignor", "first"),
    [("range", "peer"), ("cooperative-sticky", "peer"), ("cooperative-sticky", "pykaf")],
)
@pytest.mark.parametrize("library", LIBRARIES)
async def test_group_shared_with_pykaf(
    kafka_cluster: KafkaCluster, go_peer: Path, library: str, assignor: str, first: str
) -> None:
    topic, group = unique(f"{library}-group"), unique(f"{library}-group")
    partitions = 4
    everything = set(range(partitions))
    await trio.to_thread.run_sync(kafka_cluster.create_topic, topic, partitions)
    cmd = peer_command(
        go_peer, library, "group", kafka_cluster.bootstrap,
        *("--topic", topic, "--group", group, "--assignor", assignor, "--timeout", "150s"),
    )  # fmt: skip
    recorder = Recorder()
    async with AsyncExitStack() as stack:

        async def start_pykaf() -> pykaf.ConsumerGroup:
            member = await stack.enter_async_context(
                pykaf.open_consumer_group(
                    kafka_cluster.bootstrap,
                    group,
                    [topic],
                    assignors=[assignor],
                    session_timeout=10,
                    heartbeat_interval=0.5,
                    auto_commit_interval=0.5,
                )
            )
            nursery = await stack.enter_async_context(trio.open_nursery())
            nursery.start_soon(member.consume, recorder)
            return member

        if first == "pykaf":
            member = await start_pykaf()
            await recorder.wait_for(
                lambda: recorder.assignments and recorder.assignments[-1] == everything,
                "assignment of all",
            )
            go = await stack.enter_async_context(open_json_process(library, cmd))
        else:
            go = await stack.enter_async_context(open_json_process(library, cmd))
            await go.wait_for(lambda: go_assignment(go) == everything, "assignment of all")
            member = await start_pykaf()

        def shared() -> bool:
            mine = recorder.assignments[-1] if recorder.assignments else set()
            theirs = go_assignment(go)
            return bool(mine) and bool(theirs) and mine | (theirs or set()) == everything

        await go.wait_for(shared, "shared assignment")
        mine, theirs = recorder.assignments[-1], go_assignment(go)
        assert theirs is not None
        assert not mine & theirs and len(mine) == len(theirs) == 2, (mine, theirs)

        written: list[Row] = []
        async with pykaf.open_producer(kafka_cluster.bootstrap) as producer:
            for i in range(200):
                key, value = b"k%d" % (i % 17), b"v%d" % i
                md = await producer.send(topic, value, key=key)
                written.append((md.partition, md.offset, key, value))
        assert {row[0] for row in written} == everything
        await go.wait_for(
            lambda: len(rows_of(go.events)) + len(recorder.rows) >= len(written),
            "all records read",
        )
        assert sorted(rows_of(go.events) + recorder.rows) == sorted(written)
        assert {row[0] for row in recorder.rows} <= mine
        assert {row[0] for row in rows_of(go.events)} <= theirs
        seen = len(go.events)
        await member.aclose()  # commits, leaves: the Go member takes every partition

        await go.wait_for(lambda: go_assignment(go) == everything, "reassignment of all")
        more: list[Row] = []
        async with pykaf.open_producer(kafka_cluster.bootstrap) as producer:
            for i in range(200, 240):
                key, value = b"k%d" % (i % 17), b"v%d" % i
                md = await producer.send(topic, value, key=key)
                more.append((md.partition, md.offset, key, value))
        await go.wait_for(
            lambda: len(rows_of(go.events, start=seen)) >= len(more), "the records after the leave"
        )
        # It resumed the partitions pykaf had at pykaf's commits: nothing read twice.
        assert rows_of(go.events, start=seen) == sorted(more)
        await go.close_stdin()  # it commits and leaves
        await go.wait_exit(30)
    async with pykaf.open_admin(kafka_cluster.bootstrap) as admin:
        committed = await admin.list_group_offsets(group)
    ends: dict[tuple[str, int], int] = {}
    for p, o, _, _ in written + more:
        ends[(topic, p)] = max(ends.get((topic, p), 0), o + 1)
    assert {tp: om.offset for tp, om in committed.items()} == ends
