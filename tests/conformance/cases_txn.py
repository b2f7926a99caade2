"""Conformance cases of idempotence and transactions (raw requests; v1 transactions, and v2)."""

from __future__ import annotations

from typing import Any

import trio
from conformance_harness import Answers, Differs, Target, Wire, case, norm
from conformance_util import LATEST, batch, fetch, list_offsets, now_ms, one_partition, produce

from pykaf import protocol as P

#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
RETRIABLE = frozenset({14, 15, 16, 51})


async def _retrying(w: Wire, request: Any, code_of: Any, version: int | None = None) -> Any:
    """Send ``request`` again while the answer is a retriable coordinator error.

    Kafka's coordinator answers CONCURRENT_TRANSACTIONS while markers of the
    last transaction are still being written (EndTxn returns before they
    are), and the coordinator errors while its internal topic is made and
    loaded; the fake writes markers before EndTxn answers and has no
    internal topics. Either way a client retries, and so does the case.
    """
    for _ in range(400):
        resp = await w.send(request, version)
        if code_of(resp) not in RETRIABLE:
            return resp
        await trio.sleep(0.05)
    raise AssertionError(f"{request!r} answered a retriable error for 20 s")


async def find_coordinator(w: Wire, key: str, key_type: int) -> None:
    """FindCoordinator until it names one (Kafka makes its internal topic on the first)."""
    req = P.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    await _retrying(
        w, req, lambda r: r.coordinators[0].error_code if r.coordinators else r.error_code
    )


async def init_pid(w: Wire, tid: str | None = None, pid: int = -1, epoch: int = -1) -> Any:
    """InitProducerId (its coordinator found first; retried over retriable errors)."""
    if tid is not None:
        await find_coordinator(w, tid, 1)
    req = P.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=60_000, producer_id=pid, producer_epoch=epoch
    )
    return await _retrying(w, req, lambda r: r.error_code)


def add_partitions(tid: str, pid: int, epoch: int, topic: str, parts: list[int]) -> Any:
    """AddPartitionsToTxn (v3: one transaction, the client's form)."""
    return P.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            P.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=parts)
        ],
    )


def end_txn(tid: str, pid: int, epoch: int, commit: bool) -> P.EndTxnRequest:
    """EndTxn."""
    return P.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )


def txn_offset_commit(
    tid: str, group: str, pid: int, epoch: int, topic: str, offset: int
) -> P.TxnOffsetCommitRequest:
    """TxnOffsetCommit of ``offset`` for partition 0 of ``topic`` (no member: generation -1)."""
    T = P.TxnOffsetCommitRequest
    return T(
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            T.TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    T.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )


def _txn_offset_codes(code: int) -> dict[str, Any]:
    """The normalised TxnOffsetCommit answer for partition 0 of the case's topic."""
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "transaction_errors",
                "partitions": [{"partition_index": 0, "error_code": code}],
            }
        ],
    }


def apt_codes(resp: Any) -> list[tuple[str, int, int]]:
    """The per-partition codes of an AddPartitionsToTxn answer."""
    return [
        (t.name, p.partition_index, p.partition_error_code)
        for t in resp.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]


@case()
async def case_idempotent_sequences(t: Target, w: Wire, out: Answers) -> None:
    """Duplicates, sequence gaps, fenced epochs and unknown producer ids on one partition."""
    topic = await t.create_topic("idempotent_sequences")
    init = await init_pid(w)
    out.add("init", norm(init))
    pid, epoch = init.producer_id, init.producer_epoch

    t0 = now_ms() - 60_000

    async def send(label: str, values: list[bytes], seq: int, e: int = epoch, p: int = pid) -> None:
        # each batch's timestamps follow from its first sequence: a retry has the same ones
        resp = one_partition(
            await w.send(produce(topic, batch(values, ts=t0 + 10 * seq, pid=p, epoch=e, seq=seq)))
        )
        answer = norm(resp, drop=frozenset({"log_append_time_ms"}))
        appended = resp.log_append_time_ms
        answer["log_append_time - t0"] = appended - t0 if appended >= 0 else appended
        out.add(label, answer)

    await send("first, sequence 0", [b"a", b"b"], 0)
    await send("next, sequence 2", [b"c"], 2)
    await send("duplicate of the last", [b"c"], 2)
    await send("duplicate of the first", [b"a", b"b"], 0)
    await send("a gap", [b"x"], 5)
    await send("sequence 3", [b"d"], 3)
    await send("an older epoch", [b"y"], 4, e=epoch - 1 if epoch > 0 else -2)
    await send("a newer epoch at sequence 4", [b"z"], 4, e=epoch + 1)
    await send("a newer epoch at sequence 0", [b"z"], 0, e=epoch + 1)
    await send("the old epoch again", [b"e"], 4)
    await send("an unknown producer id at sequence 7", [b"q"], 7, p=pid + 1_000_000)
    await send("an unknown producer id at sequence 0", [b"q"], 0, p=pid + 1_000_001)
    hw = one_partition(await w.send(list_offsets(topic, LATEST)))
    out.add("end offset", hw.offset)


@case()
async def case_transaction_fetch(t: Target, w: Wire, out: Answers) -> None:
    """The LSO and aborted-transaction lists with open, committed and aborted transactions."""
    topic = await t.create_topic("transaction_fetch")
    tids = ["transaction_fetch.a", "transaction_fetch.b"]
    (pa, ea), (pb, eb) = [
        (r.producer_id, r.producer_epoch) for r in [await init_pid(w, tid) for tid in tids]
    ]
    await w.send(produce(topic, batch([b"plain"])))
    # a: commits; b: aborts; then a opens another and leaves it open
    for tid, pid, epoch, values in [(tids[0], pa, ea, [b"a1", b"a2"]), (tids[1], pb, eb, [b"b1"])]:
        out.add(
            f"add partitions {tid}",
            apt_codes(await w.send(add_partitions(tid, pid, epoch, topic, [0]))),
        )
        resp = await w.send(
            produce(
                topic, batch(values, pid=pid, epoch=epoch, seq=0, txn=True), transactional_id=tid
            )
        )
        out.add(f"produce {tid}", norm(one_partition(resp)))
    fetched = one_partition(await w.send(fetch(topic, 0, isolation=1)))
    out.add("read_committed with two open", norm(fetched))
    out.add("read_uncommitted with two open", norm(one_partition(await w.send(fetch(topic, 0)))))
    lo = one_partition(await w.send(list_offsets(topic, LATEST, isolation=1)))
    out.add("latest read_committed with two open", (lo.error_code, lo.offset))
    end_a = await _retrying(w, end_txn(tids[0], pa, ea, True), lambda r: r.error_code)
    out.add("commit a", norm(end_a))
    # Kafka writes a's marker after EndTxn answers: wait for it (offset 4), so
    # that b's marker lands after it (offset 5) however loaded the broker is
    await t.wait_for(
        lambda: w.send(fetch(topic, 0)),
        lambda r: one_partition(r).high_watermark == 5,
    )
    end_b = await _retrying(w, end_txn(tids[1], pb, eb, False), lambda r: r.error_code)
    out.add("abort b", norm(end_b))
    # Kafka writes the markers after EndTxn answers: wait for both
    await t.wait_for(
        lambda: w.send(fetch(topic, 0, isolation=1)),
        lambda r: one_partition(r).last_stable_offset == 6,
    )
    out.add(
        "read_committed after both", norm(one_partition(await w.send(fetch(topic, 0, isolation=1))))
    )
    out.add(
        "read_committed from 3", norm(one_partition(await w.send(fetch(topic, 3, isolation=1))))
    )
    await _retrying(w, add_partitions(tids[0], pa, ea, topic, [0]), lambda r: apt_codes(r)[0][2])
    resp = await w.send(
        produce(topic, batch([b"a3"], pid=pa, epoch=ea, seq=2, txn=True), transactional_id=tids[0])
    )
    out.add("produce a again", norm(one_partition(resp)))
    out.add(
        "read_committed with a open again",
        norm(one_partition(await w.send(fetch(topic, 0, isolation=1)))),
    )
    lo = one_partition(await w.send(list_offsets(topic, LATEST, isolation=1)))
    out.add("latest read_committed with a open", (lo.error_code, lo.offset))
    lo = one_partition(await w.send(list_offsets(topic, LATEST)))
    out.add("latest read_uncommitted with a open", (lo.error_code, lo.offset))
    await _retrying(w, end_txn(tids[0], pa, ea, False), lambda r: r.error_code)


@case(
    differs={
        "txn offset commit, group not added": Differs(
            fake=_txn_offset_codes(48),
            kafka=_txn_offset_codes(0),
            why="the fake refuses (INVALID_TXN_STATE) a TxnOffsetCommit for a group not added "
            "with AddOffsetsToTxn at every version; Kafka does only for transactions v2 clients "
            "and otherwise keeps the offsets pending under the producer id",
        )
    }
)
async def case_transaction_errors(t: Target, w: Wire, out: Answers) -> None:
    """EndTxn with nothing added, bad epochs, unknown ids, produce outside the transaction."""
    topic = await t.create_topic("transaction_errors")
    tid = "transaction_errors.t"
    init = await init_pid(w, tid)
    out.add("init", norm(init))
    pid, epoch = init.producer_id, init.producer_epoch
    out.add("end (commit) with nothing added", norm(await w.send(end_txn(tid, pid, epoch, True))))
    out.add("end (abort) with nothing added", norm(await w.send(end_txn(tid, pid, epoch, False))))
    out.add(
        "add partitions, older epoch",
        apt_codes(await w.send(add_partitions(tid, pid, epoch - 1, topic, [0]))),
    )
    out.add(
        "add partitions, newer epoch",
        apt_codes(await w.send(add_partitions(tid, pid, epoch + 1, topic, [0]))),
    )
    out.add(
        "add partitions, wrong producer id",
        apt_codes(await w.send(add_partitions(tid, pid + 1_000_000, epoch, topic, [0]))),
    )
    out.add(
        "add partitions, unknown transactional id",
        apt_codes(
            await w.send(add_partitions("transaction_errors.nobody", pid, epoch, topic, [0]))
        ),
    )
    out.add(
        "add partitions, unknown partition",
        apt_codes(
            await w.send(
                P.AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[
                        P.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                            name=topic, partitions=[0, 9]
                        ),
                    ],
                )
            )
        ),
    )
    resp = await w.send(
        produce(topic, batch([b"x"], pid=pid, epoch=epoch, seq=0, txn=True), transactional_id=tid)
    )
    out.add("transactional produce before adding the partition", norm(one_partition(resp)))
    out.add("add partitions", apt_codes(await w.send(add_partitions(tid, pid, epoch, topic, [0]))))
    out.add(
        "add offsets",
        norm(
            await w.send(
                P.AddOffsetsToTxnRequest(
                    transactional_id=tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    group_id="transaction_errors.g",
                )
            )
        ),
    )
    commit = txn_offset_commit(tid, "transaction_errors.g", pid, epoch, topic, 5)
    await find_coordinator(w, "transaction_errors.g", 0)
    first = await _retrying(w, commit, lambda r: r.topics[0].partitions[0].error_code)
    out.add("txn offset commit", norm(first))
    commit.group_id = "transaction_errors.other"
    await find_coordinator(w, "transaction_errors.other", 0)
    out.add("txn offset commit, group not added", norm(await w.send(commit)))
    commit.group_id = "transaction_errors.g"
    commit.producer_epoch = epoch - 1
    out.add("txn offset commit, older epoch", norm(await w.send(commit)))
    out.add("end with an older epoch", norm(await w.send(end_txn(tid, pid, epoch - 1, True))))
    out.add(
        "end with a wrong producer id",
        norm(await w.send(end_txn(tid, pid + 1_000_000, epoch, True))),
    )
    # a second InitProducerId fences the first producer (and aborts its transaction)
    again = await init_pid(w, tid)
    out.add(
        "init again", (again.error_code, again.producer_id == pid, again.producer_epoch - epoch)
    )
    out.add("end with the fenced epoch", norm(await w.send(end_txn(tid, pid, epoch, True))))
    resp = await w.send(
        produce(
            topic, batch([b"late"], pid=pid, epoch=epoch, seq=1, txn=True), transactional_id=tid
        )
    )
    out.add("produce with the fenced epoch", norm(one_partition(resp)))
    out.add(
        "init with a wrong producer id",
        norm(await init_pid(w, tid, pid + 1_000_000, again.producer_epoch)),
    )
    out.add("init with an old epoch", norm(await init_pid(w, tid, pid, epoch)))


@case()
async def case_transaction_first_sequences(t: Target, w: Wire, out: Answers) -> None:
    """KIP-890: a new producer's transactional batch may not start above a refused first one."""
    topic = await t.create_topic(
        "transaction_first_sequences", configs={"max.message.bytes": "1000"}
    )
    tid = "transaction_first_sequences.t"
    init = await init_pid(w, tid)
    pid, epoch = init.producer_id, init.producer_epoch
    out.add("add partitions", apt_codes(await w.send(add_partitions(tid, pid, epoch, topic, [0]))))

    async def send(label: str, values: list[bytes], seq: int) -> None:
        records = batch(values, pid=pid, epoch=epoch, seq=seq, txn=True)
        resp = await w.send(produce(topic, records, transactional_id=tid))
        out.add(label, norm(one_partition(resp)))

    await send("too large at sequence 0", [b"x" * 2000], 0)
    await send("sequence 1 behind it", [b"y"], 1)
    await send("sequence 0 again, small", [b"a"], 0)
    await send("sequence 1 again", [b"y"], 1)
    await send("a gap", [b"z"], 5)
    end = await _retrying(w, end_txn(tid, pid, epoch, True), lambda r: r.error_code)
    out.add("commit", end.error_code)


def _end_v5(resp: Any, epoch: int) -> dict[str, Any]:
    """An EndTxn v5 answer: its code, and the epoch it gives relative to ``epoch``."""
    return {
        "error_code": resp.error_code,
        "producer id": norm(resp)["producer_id"],
        "epoch - before": resp.producer_epoch - epoch if resp.producer_epoch >= 0 else None,
    }


@case()
async def case_transactions_v2(t: Target, w: Wire, out: Answers) -> None:
    """KIP-890 part 2 (``transaction.version`` 2, Kafka 4.x's default): Produce v12 and
    TxnOffsetCommit v5 add to the transaction, EndTxn v5 bumps the epoch at every end."""
    versions = w.client.newest_features()
    level = versions.feature_level("transaction.version") if versions is not None else 0
    out.add("transaction.version", level)
    if level < 2:  # a run on V1 clusters (PYKAF_KAFKA_FEATURES): nothing more to compare
        return
    topic = await t.create_topic("transactions_v2")
    tid, group = "transactions_v2.t", "transactions_v2.g"
    init = await init_pid(w, tid)
    pid, epoch = init.producer_id, init.producer_epoch

    async def send(label: str, e: int, seq: int, version: int) -> None:
        resp = await w.send(
            produce(
                topic, batch([b"v2"], pid=pid, epoch=e, seq=seq, txn=True), transactional_id=tid
            ),
            version,
        )
        out.add(label, norm(one_partition(resp)))

    await send("produce v11, partition not added", epoch, 0, 11)
    await send("produce v12 adds the partition", epoch, 0, 12)
    end = await _retrying(w, end_txn(tid, pid, epoch, True), lambda r: r.error_code, 5)
    out.add("commit (EndTxn v5)", _end_v5(end, epoch))
    again = await _retrying(w, end_txn(tid, pid, epoch, True), lambda r: r.error_code, 5)
    out.add("the commit retried at the epoch before", _end_v5(again, epoch))
    await send("produce v12 at the epoch before", epoch, 1, 12)
    await t.wait_for(
        lambda: w.send(fetch(topic, 0, isolation=1)),
        lambda r: one_partition(r).last_stable_offset == 2,
    )
    fetched = one_partition(await w.send(fetch(topic, 0, isolation=1)))
    out.add("read_committed after the commit", norm(fetched))
    await find_coordinator(w, group, 0)
    commit = txn_offset_commit(tid, group, pid, epoch + 1, topic, 1)
    resp = await _retrying(
        w, commit, lambda r: r.topics[0].partitions[0].error_code if r.topics else 0, 5
    )
    out.add("txn offset commit v5 adds the group", norm(resp))
    end = await _retrying(w, end_txn(tid, pid, epoch + 1, False), lambda r: r.error_code, 5)
    out.add("abort (EndTxn v5)", _end_v5(end, epoch))
