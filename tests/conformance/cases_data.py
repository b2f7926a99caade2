"""Conformance cases of the data plane: Produce, Fetch, ListOffsets, DeleteRecords, Metadata."""

from __future__ import annotations

from typing import Any

from conformance_harness import Answers, Target, Wire, case, norm
from conformance_util import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    batch,
    fetch,
    list_offsets,
    now_ms,
    one_partition,
    produce,
)

from pykaf import codec
from pykaf import protocol as P

UNKNOWN_TOPIC_OR_PARTITION = 3


def _listed(
    part: P.ListOffsetsResponse.ListOffsetsPartitionResponse, t0: int
) -> tuple[int, int, int]:
    """(error, offset, timestamp relative to ``t0`` or -1) of a ListOffsets partition."""
    ts = part.timestamp - t0 if part.timestamp >= 0 else part.timestamp
    return part.error_code, part.offset, ts


@case()
async def case_produce_fetch_list_offsets(t: Target, w: Wire, out: Answers) -> None:
    """Base offsets, the high watermark, ListOffsets earliest/latest/max/by timestamp."""
    topic = await t.create_topic("produce_fetch_list_offsets")
    t0 = now_ms() - 60_000
    batches = [
        batch([b"a", b"b", b"c"], timestamps=[t0, t0 + 1, t0 + 2]),
        batch([b"d", b"e"], timestamps=[t0 + 10, t0 + 5]),
        batch([b"f"], timestamps=[t0 + 7]),
    ]
    for i, b in enumerate(batches):
        out.add(f"produce {i}", norm(one_partition(await w.send(produce(topic, b)))))
    for label, ts in [
        ("earliest", EARLIEST),
        ("latest", LATEST),
        ("max timestamp", MAX_TIMESTAMP),
        ("by timestamp t0+1", t0 + 1),
        ("by timestamp t0+6", t0 + 6),
        ("by timestamp t0+8", t0 + 8),
        ("by timestamp past the end", t0 + 11),
    ]:
        part = one_partition(await w.send(list_offsets(topic, ts)))
        out.add(f"list offsets {label}", _listed(part, t0))
    out.add("fetch from 0", norm(one_partition(await w.send(fetch(topic, 0)))))
    out.add("fetch from 4", norm(one_partition(await w.send(fetch(topic, 4)))))
    out.add("fetch at the end", norm(one_partition(await w.send(fetch(topic, 6)))))
    out.add("fetch past the end", norm(one_partition(await w.send(fetch(topic, 7)))))
    out.add("fetch before the start", norm(one_partition(await w.send(fetch(topic, -5)))))


def _delete_records(topic: str, offset: int, partition: int = 0) -> P.DeleteRecordsRequest:
    return P.DeleteRecordsRequest(
        topics=[
            P.DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic,
                partitions=[
                    P.DeleteRecordsRequest.DeleteRecordsPartition(
                        partition_index=partition, offset=offset
                    )
                ],
            )
        ],
        timeout_ms=10_000,
    )


@case()
async def case_delete_records(t: Target, w: Wire, out: Answers) -> None:
    """DeleteRecords moves the log start; what Fetch, ListOffsets and Produce then say."""
    topic = await t.create_topic("delete_records")
    for values in ([b"a", b"b", b"c"], [b"d", b"e"]):
        await w.send(produce(topic, batch(values)))
    out.add("delete to 2", norm(one_partition(await w.send(_delete_records(topic, 2)))))
    earliest = one_partition(await w.send(list_offsets(topic, EARLIEST)))
    out.add("earliest after delete", (earliest.error_code, earliest.offset))
    out.add("fetch below the start", norm(one_partition(await w.send(fetch(topic, 1)))))
    out.add("fetch at the start", norm(one_partition(await w.send(fetch(topic, 2)))))
    out.add(
        "produce after delete", norm(one_partition(await w.send(produce(topic, batch([b"f"])))))
    )
    out.add("delete past the end", norm(one_partition(await w.send(_delete_records(topic, 100)))))
    out.add("delete to the end (-1)", norm(one_partition(await w.send(_delete_records(topic, -1)))))
    out.add("delete backwards", norm(one_partition(await w.send(_delete_records(topic, 1)))))
    out.add(
        "delete unknown partition", norm(one_partition(await w.send(_delete_records(topic, 0, 3))))
    )
    latest = one_partition(await w.send(list_offsets(topic, LATEST)))
    earliest = one_partition(await w.send(list_offsets(topic, EARLIEST)))
    out.add("after deleting all", (earliest.offset, latest.offset))
    out.add("fetch an empty log", norm(one_partition(await w.send(fetch(topic, 6)))))


@case()
async def case_produce_errors(t: Target, w: Wire, out: Answers) -> None:
    """MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, unknown topics and partitions, bad framing."""
    small = await t.create_topic("produce_errors.small", configs={"max.message.bytes": "1000"})
    topic = await t.create_topic("produce_errors")
    big = batch([b"x" * 2000])
    out.add("over max.message.bytes", norm(one_partition(await w.send(produce(small, big)))))
    ok = batch([b"y" * 100])
    out.add("under max.message.bytes", norm(one_partition(await w.send(produce(small, ok)))))
    corrupt = bytearray(batch([b"hello"]))
    corrupt[-1] ^= 0xFF  # the CRC covers the records: this fails it
    out.add("bad crc", norm(one_partition(await w.send(produce(topic, bytes(corrupt))))))
    two = batch([b"1"]) + batch([b"2"])
    out.add("two batches", norm(one_partition(await w.send(produce(topic, two)))))
    out.add("unknown partition", norm(one_partition(await w.send(produce(topic, ok, 7)))))
    resp = await w.send(produce("produce_errors.nobody-made-this", ok))
    out.add("unknown topic", norm(one_partition(resp)))
    meta = await w.send(
        P.MetadataRequest(
            topics=[P.MetadataRequest.MetadataRequestTopic(name="produce_errors.nobody-made-this")],
            allow_auto_topic_creation=False,
        )
    )
    out.add("unknown topic after produce", meta.topics[0].error_code)
    out.add("fetch unknown partition", norm(one_partition(await w.send(fetch(topic, 0, 7)))))
    lo = one_partition(await w.send(list_offsets(topic, LATEST, 7)))
    out.add("list offsets unknown partition", (lo.error_code, lo.offset))
    lo = one_partition(await w.send(list_offsets("produce_errors.nobody", LATEST)))
    out.add("list offsets unknown topic", (lo.error_code, lo.offset))
    await t.create_topic("produce_errors.idle")
    out.add(
        "max timestamp of an empty log",
        _listed(one_partition(await w.send(list_offsets("produce_errors.idle", MAX_TIMESTAMP))), 0),
    )
    out.add(
        "latest of an empty log",
        _listed(one_partition(await w.send(list_offsets("produce_errors.idle", LATEST))), 0),
    )


@case()
async def case_produce_timestamps(t: Target, w: Wire, out: Answers) -> None:
    """message.timestamp.before/after.max.ms (INVALID_TIMESTAMP) and LogAppendTime."""
    now = now_ms()
    strict = await t.create_topic(
        "produce_timestamps.strict",
        configs={
            "message.timestamp.before.max.ms": "3600000",
            "message.timestamp.after.max.ms": "3600000",
        },
    )
    out.add(
        "two days old",
        norm(one_partition(await w.send(produce(strict, batch([b"x"], ts=now - 2 * 86_400_000))))),
    )
    out.add(
        "two days ahead",
        norm(one_partition(await w.send(produce(strict, batch([b"x"], ts=now + 2 * 86_400_000))))),
    )
    out.add("now", norm(one_partition(await w.send(produce(strict, batch([b"x"], ts=now))))))
    append = await t.create_topic(
        "produce_timestamps.append",
        configs={
            "message.timestamp.type": "LogAppendTime",
            "message.timestamp.before.max.ms": "3600000",
        },
    )
    resp = one_partition(await w.send(produce(append, batch([b"x"], ts=now - 2 * 86_400_000))))
    out.add("log append time, old timestamp", norm(resp))
    fetched = one_partition(await w.send(fetch(append, 0)))
    from pykaf import codec

    (b,) = codec.decode_batches(bytes(fetched.records))
    out.add(
        "log append time batch",
        (
            b.timestamp_type,
            b.max_timestamp == resp.log_append_time_ms,
            b.records[0].timestamp == resp.log_append_time_ms,
        ),
    )


@case()
async def case_metadata_unknown_topics(t: Target, w: Wire, out: Answers) -> None:
    """Metadata for unknown topics, with and without auto-creation; invalid names."""

    def req(name: str, auto: bool) -> P.MetadataRequest:
        return P.MetadataRequest(
            topics=[P.MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=auto,
        )

    no = await w.send(req("metadata_unknown.no", False))
    out.add("unknown, no auto-creation", norm(no.topics))
    again = await w.send(req("metadata_unknown.no", False))
    out.add("still unknown", [tp.error_code for tp in again.topics])
    yes = await w.send(req("metadata_unknown.yes", True))
    out.add("unknown, auto-creation", norm(yes.topics, drop=frozenset({"partitions"})))
    # Kafka answers LEADER_NOT_AVAILABLE while the new topic's leader is elected
    done = await t.wait_for(
        lambda: w.send(req("metadata_unknown.yes", False)),
        lambda r: (
            r.topics[0].error_code == 0 and all(p.leader_id >= 0 for p in r.topics[0].partitions)
        ),
    )
    out.add("auto-created", norm(done.topics))
    bad = await w.send(req("metadata unknown bad name!", True))
    out.add("invalid name, auto-creation", norm(bad.topics))


def _epoch_ends(topic: str, asks: list[tuple[int, int]], partition: int = 0) -> Any:
    """An OffsetForLeaderEpoch (as a consumer) of (current leader epoch, epoch) pairs."""
    R = P.OffsetForLeaderEpochRequest
    return R(
        replica_id=-1,
        topics=[
            R.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    R.OffsetForLeaderPartition(
                        partition=partition, current_leader_epoch=current, leader_epoch=epoch
                    )
                    for current, epoch in asks
                ],
            )
        ],
    )


def _ends(resp: Any) -> list[tuple[int, int, int]]:
    """(error, leader epoch, end offset) of each partition of an OffsetForLeaderEpoch answer."""
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in resp.topics for p in t.partitions]


@case()
async def case_offset_for_leader_epoch(t: Target, w: Wire, out: Answers) -> None:
    """Leader epochs on a new partition (epoch 0): batches stamped with it, OffsetForLeaderEpoch
    answering the log end for it and -1 for epochs it does not know, current_leader_epoch
    fencing in OffsetForLeaderEpoch and Fetch."""
    topic = await t.create_topic("offset_for_leader_epoch")
    out.add("empty log, epoch 0", _ends(await w.send(_epoch_ends(topic, [(-1, 0)]))))
    for i, values in enumerate([[b"a", b"b"], [b"c"]]):
        out.add(f"produce {i}", norm(one_partition(await w.send(produce(topic, batch(values))))))
    data = one_partition(await w.send(fetch(topic, 0))).records
    out.add(
        "fetched batches' leader epochs",
        [b.partition_leader_epoch for b in codec.decode_batches(bytes(data or b""))],
    )
    out.add(
        "epochs 0, -1, 1 and 7 (no current epoch)",
        _ends(await w.send(_epoch_ends(topic, [(-1, 0), (-1, -1), (-1, 1), (-1, 7)]))),
    )
    out.add("current epoch 0", _ends(await w.send(_epoch_ends(topic, [(0, 0)]))))
    out.add("current epoch 5 (newer)", _ends(await w.send(_epoch_ends(topic, [(5, 0)]))))
    out.add("no such partition", _ends(await w.send(_epoch_ends(topic, [(-1, 0)], partition=9))))
    for label, current in [("0", 0), ("5 (newer)", 5)]:
        req = fetch(topic, 0)
        req.topics[0].partitions[0].current_leader_epoch = current
        part = one_partition(await w.send(req))
        out.add(f"fetch with current epoch {label}", (part.error_code, part.high_watermark))
