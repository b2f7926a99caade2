"""The data plane of the fake cluster: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, admin.

Produce checks what a Kafka leader checks before appending (leadership, the
batch's framing and CRC-32C, the idempotent producer's epoch and sequence,
KIP-890's "is this partition in the producer's transaction"), then appends the
client's bytes. Fetch hands stored batch bytes back, holding read_committed
fetches below the last stable offset and listing the aborted transactions of
the range returned; it waits for ``min_bytes`` on a wakeup set by appends.
Fetch keeps KIP-227 fetch sessions (``fetch_sessions.py``).
Produce, Fetch, ListOffsets and OffsetForLeaderEpoch fence a
``current_leader_epoch`` other than the partition's (KIP-320); batches are
stamped with the leader epoch and OffsetForLeaderEpoch answers from each
partition's epoch history.
CreateTopics, DeleteTopics and CreatePartitions are the controller's;
DeleteRecords is the partition leader's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf.codec import decode_batches
from pykaf.errors import CorruptRecordError
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.configs import new_topic_configs, topic_value, validate_topic_configs
from pykaf.testing._fake.fetch_sessions import must_answer
from pykaf.testing._fake.log import PartitionLog, split_batches, stamp_log_append_time
from pykaf.testing._fake.model import Partition

_UNKNOWN = errors.UnknownTopicOrPartitionError.code
_NOT_LEADER = errors.NotLeaderOrFollowerError.code
_NOT_CONTROLLER = errors.NotControllerError.code
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
_LONG_MAX = 2**63 - 1
READ_COMMITTED = 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _lookup(
    ctx: RequestContext, topic: str, index: int, leader_epoch: int = -1
) -> tuple[int, Partition | None]:
    """The partition this broker leads, or the error code a leader would answer."""
    p = ctx.cluster.partition(topic, index)
    if p is None:
        return _UNKNOWN, None
    if p.leader != ctx.broker.node_id:
        return _NOT_LEADER, p
    if leader_epoch >= 0 and leader_epoch != p.leader_epoch:
        if leader_epoch > p.leader_epoch:
            return errors.UnknownLeaderEpochError.code, p
        return errors.FencedLeaderEpochError.code, p
    return 0, p


# -- Produce ------------------------------------------------------------------


def _timestamp_problem(ctx: RequestContext, topic: Any, header: Any, raw: bytes) -> str | None:
    """Why a CreateTime batch's records are out of the topic's timestamp bounds, or None.

    Kafka checks each record against ``message.timestamp.before.max.ms`` and
    ``message.timestamp.after.max.ms`` and refuses the batch at the first
    one out of range; the fake reads the records only when a bound is set.
    """
    before = int(topic_value(ctx.cluster, topic, "message.timestamp.before.max.ms"))
    after = int(topic_value(ctx.cluster, topic, "message.timestamp.after.max.ms"))
    if before >= _LONG_MAX and after >= _LONG_MAX:
        return None
    now = _now_ms()
    lo = now - before if before < _LONG_MAX else None
    hi = now + after if after < _LONG_MAX else None
    (decoded,) = decode_batches(raw)
    for record in decoded.records:
        if (lo is not None and record.timestamp < lo) or (hi is not None and record.timestamp > hi):
            return (
                f"Timestamp {record.timestamp} of message with offset {record.offset} is out "
                f"of range. The timestamp should be within [{lo}, {hi}]"
            )
    return None


def _produce_partition(
    ctx: RequestContext, topic: str, data: P.ProduceRequest.PartitionProduceData, version: int
) -> P.ProduceResponse.PartitionProduceResponse:
    out = P.ProduceResponse.PartitionProduceResponse(
        index=data.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1
    )
    code, p = _lookup(ctx, topic, data.index)
    if code:
        out.error_code = code
        if p is not None:
            out.current_leader = P.ProduceResponse.LeaderIdAndEpoch(
                leader_id=p.leader, leader_epoch=p.leader_epoch
            )
        return out
    assert p is not None
    log = p.log
    # Kafka answers the log start offset once the batch reached the log's own
    # checks (timestamps, producer state); -1 and no message for a batch refused
    # before (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD, a transactional
    # batch outside its transaction)
    try:
        batches = split_batches(data.records or b"")
    except CorruptRecordError:
        out.error_code = errors.CorruptRecordError.code
        return out
    if len(batches) != 1 or batches[0][0].control:
        # Kafka: v3+ carries exactly one batch per partition, and never a control batch
        out.error_code = errors.InvalidRecordError.code
        return out
    header, raw = batches[0]
    topic_obj = ctx.cluster.topics[topic]
    # the KIP-890 check runs before the log's own (Kafka verifies, then appends)
    if header.transactional:
        if version >= 12 and ctx.cluster.transaction_version >= 2:
            # transactions V2: the partition joins the transaction with this batch
            ctx.cluster.transactions.add_implicitly(
                header.producer_id, header.producer_epoch, partition=(topic, data.index)
            )
        code = ctx.cluster.transactions.verify_produce(
            header.producer_id, header.producer_epoch, topic, data.index
        )
        if code == errors.InvalidTxnStateError.code and version >= 11:
            code = errors.TransactionAbortableError.code  # KIP-890: Produce v11+
        if code:
            out.error_code = code
            return out
        log.note_verified(header)
    limit = int(topic_value(ctx.cluster, topic_obj, "max.message.bytes"))
    if len(raw) > limit:
        out.error_code = errors.RecordTooLargeError.code
        return out
    out.log_start_offset = log.log_start_offset
    log_append_time = (
        topic_value(ctx.cluster, topic_obj, "message.timestamp.type") == "LogAppendTime"
    )
    if not log_append_time and not header.control:
        problem = _timestamp_problem(ctx, topic_obj, header, raw)
        if problem is not None:
            out.error_code = errors.InvalidTimestampError.code
            out.error_message = problem
            out.record_errors = [
                P.ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=0, batch_index_error_message=problem
                )
            ]
            return out
    code, duplicate = log.check_producer(header)
    if code:
        out.error_code = code
        return out
    if duplicate is not None:
        out.base_offset, out.log_append_time_ms = duplicate
        return out
    if log_append_time:
        now = _now_ms()
        raw = stamp_log_append_time(header, raw, now)
        out.log_append_time_ms = now
    out.base_offset = log.append(header, raw)
    return out


async def produce(ctx: RequestContext, req: P.ProduceRequest, version: int) -> Any:
    """Append each partition's batch; acks=0 gets no response."""
    topics = []
    for td in req.topic_data:
        # Kafka creates topics on Metadata only, never on Produce
        parts = [_produce_partition(ctx, td.name, pd, version) for pd in td.partition_data]
        topics.append(
            P.ProduceResponse.TopicProduceResponse(name=td.name, partition_responses=parts)
        )
    if req.acks == 0:
        return None
    return P.ProduceResponse(responses=topics, throttle_time_ms=0)


def _produce_error(req: P.ProduceRequest, version: int, code: int) -> P.ProduceResponse:
    return P.ProduceResponse(
        responses=[
            P.ProduceResponse.TopicProduceResponse(
                name=td.name,
                partition_responses=[
                    P.ProduceResponse.PartitionProduceResponse(
                        index=pd.index, error_code=code, base_offset=-1
                    )
                    for pd in td.partition_data
                ],
            )
            for td in req.topic_data
        ],
        throttle_time_ms=0,
    )


# -- Fetch --------------------------------------------------------------------

_FetchPart = P.FetchResponse.PartitionData


def _fetch_partition(
    ctx: RequestContext,
    topic: str,
    fp: P.FetchRequest.FetchPartition,
    isolation: int,
    max_bytes: int,
    min_one: bool,
) -> tuple[_FetchPart, PartitionLog | None]:
    out = _FetchPart(
        partition_index=fp.partition,
        error_code=0,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )
    code, p = _lookup(ctx, topic, fp.partition, fp.current_leader_epoch)
    if code:
        out.error_code = code
        out.aborted_transactions = []  # what Kafka answers for a partition it does not serve
        if p is not None:
            out.current_leader = P.FetchResponse.LeaderIdAndEpoch(
                leader_id=p.leader, leader_epoch=p.leader_epoch
            )
        return out, None
    assert p is not None
    log = p.log
    lso = log.last_stable_offset
    offset = fp.fetch_offset
    if offset < log.log_start_offset or offset > log.high_watermark:
        # Kafka leaves the watermarks out (-1) of an OFFSET_OUT_OF_RANGE answer
        out.error_code = errors.OffsetOutOfRangeError.code
        return out, None
    out.high_watermark = log.high_watermark
    out.last_stable_offset = lso
    out.log_start_offset = log.log_start_offset
    committed = isolation == READ_COMMITTED
    records, last = log.read(offset, max_bytes, upto=lso if committed else None, min_one=min_one)
    out.records = records
    if committed:
        out.aborted_transactions = [
            P.FetchResponse.AbortedTransaction(
                producer_id=a.producer_id, first_offset=a.first_offset
            )
            for a in (log.aborted_between(offset, last) if records else ())
        ]
    return out, log


def _fetch_once(
    ctx: RequestContext, req: P.FetchRequest, reads: list[tuple[str, Any]]
) -> tuple[list[tuple[str, _FetchPart]], int, bool, list[PartitionLog]]:
    """One pass over ``reads`` ((topic, FetchPartition)): answers, bytes, any error, logs read."""
    remaining = req.max_bytes
    size = 0
    failed = False
    logs: list[PartitionLog] = []
    answers = []
    for topic, fp in reads:
        if remaining <= 0 and size:
            limit, min_one = 0, False
        else:
            limit, min_one = min(fp.partition_max_bytes, remaining), size == 0
        part, log = _fetch_partition(ctx, topic, fp, req.isolation_level, limit, min_one)
        n = len(part.records or b"")
        size += n
        remaining -= n
        failed = failed or part.error_code != 0
        if log is not None:
            logs.append(log)
        answers.append((topic, part))
    return answers, size, failed, logs


def _grouped(answers: list[tuple[str, _FetchPart]]) -> list[Any]:
    """Partition answers as topics: consecutive partitions of a topic share one entry."""
    topics: list[Any] = []
    for topic, part in answers:
        if not topics or topics[-1].topic != topic:
            topics.append(P.FetchResponse.FetchableTopicResponse(topic=topic, partitions=[]))
        topics[-1].partitions.append(part)
    return topics


async def fetch(ctx: RequestContext, req: P.FetchRequest, version: int) -> Any:
    """Read each partition; wait up to max_wait_ms for min_bytes (woken by appends).

    The request's session fields are applied first (KIP-227,
    ``fetch_sessions.py``): an incremental fetch reads every partition of its
    session and answers only those with news.
    """
    cache = ctx.cluster.fetch_sessions(ctx.broker.node_id)
    sc = cache.context(req, version)
    if sc.error:
        return P.FetchResponse(throttle_time_ms=0, error_code=sc.error, session_id=0, responses=[])
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    while True:
        answers, size, failed, logs = _fetch_once(ctx, req, sc.reads)
        if size >= req.min_bytes or failed or not logs or trio.current_time() >= deadline:
            break
        event = trio.Event()
        for log in logs:
            log.add_waiter(event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            for log in logs:
                log.remove_waiter(event)
    session_id = 0
    session = sc.session
    if session is not None:
        session_id = session.session_id
        kept = []
        for topic, part in answers:
            key = (topic, part.partition_index)
            cached = session.partitions[key]
            if must_answer(cached, part):
                kept.append((topic, part))
                del session.partitions[key]  # answered: to the end of the session's order
                session.partitions[key] = cached
        answers = kept
    elif sc.create:
        session_id = cache.create(sc.reads, [part for _, part in answers])
    return P.FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=session_id, responses=_grouped(answers)
    )


def _fetch_error(req: P.FetchRequest, version: int, code: int) -> P.FetchResponse:
    return P.FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            P.FetchResponse.FetchableTopicResponse(
                topic=ft.topic,
                partitions=[
                    _FetchPart(
                        partition_index=fp.partition,
                        error_code=code,
                        high_watermark=-1,
                        records=b"",
                    )
                    for fp in ft.partitions
                ],
            )
            for ft in req.topics
        ],
    )


# -- ListOffsets ----------------------------------------------------------------

_ListPart = P.ListOffsetsResponse.ListOffsetsPartitionResponse


def _list_partition(
    ctx: RequestContext, topic: str, lp: P.ListOffsetsRequest.ListOffsetsPartition, isolation: int
) -> _ListPart:
    out = _ListPart(
        partition_index=lp.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1
    )
    code, p = _lookup(ctx, topic, lp.partition_index, lp.current_leader_epoch)
    if code:
        out.error_code = code
        return out
    assert p is not None
    log = p.log
    out.leader_epoch = p.leader_epoch
    end = log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    ts = lp.timestamp
    found: tuple[int, int] | None
    if ts == LATEST:
        found = (end, -1)
    elif ts == EARLIEST:
        found = (log.log_start_offset, -1)
    elif ts == MAX_TIMESTAMP:
        found = log.max_timestamp()
    elif ts < 0:
        out.error_code = errors.InvalidRequestError.code
        return out
    else:
        found = log.offset_for_timestamp(ts)
    if found is not None and (found[0] < end or ts in (LATEST, EARLIEST)):
        out.offset, out.timestamp = found
    return out


async def list_offsets(ctx: RequestContext, req: P.ListOffsetsRequest, version: int) -> Any:
    """Latest (the LSO for read_committed), earliest, max timestamp, or by timestamp."""
    topics = [
        P.ListOffsetsResponse.ListOffsetsTopicResponse(
            name=t.name,
            partitions=[
                _list_partition(ctx, t.name, lp, req.isolation_level) for lp in t.partitions
            ],
        )
        for t in req.topics
    ]
    return P.ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _partition_errors(
    response: type[Any], topic: type[Any], part: type[Any], topics: list[Any], code: int
) -> Any:
    """A ListOffsets or DeleteRecords response with every partition failing with ``code``."""
    return response(
        throttle_time_ms=0,
        topics=[
            topic(
                name=t.name,
                partitions=[
                    part(partition_index=p.partition_index, error_code=code) for p in t.partitions
                ],
            )
            for t in topics
        ],
    )


def _list_offsets_error(req: P.ListOffsetsRequest, version: int, code: int) -> Any:
    cls = P.ListOffsetsResponse
    return _partition_errors(cls, cls.ListOffsetsTopicResponse, _ListPart, req.topics, code)


# -- OffsetForLeaderEpoch ---------------------------------------------------------

_EpochEnd = P.OffsetForLeaderEpochResponse.EpochEndOffset


def _epoch_end(
    ctx: RequestContext, topic: str, op: P.OffsetForLeaderEpochRequest.OffsetForLeaderPartition
) -> _EpochEnd:
    out = _EpochEnd(partition=op.partition, error_code=0, leader_epoch=-1, end_offset=-1)
    code, p = _lookup(ctx, topic, op.partition, op.current_leader_epoch)
    if code:
        out.error_code = code
        return out
    assert p is not None
    out.leader_epoch, out.end_offset = p.log.end_offset_for(op.leader_epoch)
    return out


async def offset_for_leader_epoch(
    ctx: RequestContext, req: P.OffsetForLeaderEpochRequest, version: int
) -> Any:
    """The end offset of each asked leader epoch, from the partition leader's epoch history.

    As Kafka: the current epoch ends at the log end offset, an older one where
    the next epoch starts; an unknown epoch gets (-1, -1); ``current_leader_epoch``
    (v2+) fences stale or too new callers.
    """
    R = P.OffsetForLeaderEpochResponse
    return R(
        throttle_time_ms=0,
        topics=[
            R.OffsetForLeaderTopicResult(
                topic=t.topic, partitions=[_epoch_end(ctx, t.topic, op) for op in t.partitions]
            )
            for t in req.topics
        ],
    )


def _offset_for_leader_epoch_error(
    req: P.OffsetForLeaderEpochRequest, version: int, code: int
) -> Any:
    R = P.OffsetForLeaderEpochResponse
    return R(
        throttle_time_ms=0,
        topics=[
            R.OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=[
                    _EpochEnd(
                        partition=op.partition, error_code=code, leader_epoch=-1, end_offset=-1
                    )
                    for op in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


# -- topic admin ----------------------------------------------------------------


def _topic_errors(
    response: type[Any], field: str, result: type[Any], names: list[str], code: int
) -> Any:
    """A topic admin response with every named topic failing with ``code``."""
    return response(throttle_time_ms=0, **{field: [result(name=n, error_code=code) for n in names]})


def _create_topics_error(req: P.CreateTopicsRequest, version: int, code: int) -> Any:
    names = [t.name for t in req.topics]
    cls = P.CreateTopicsResponse
    return _topic_errors(cls, "topics", cls.CreatableTopicResult, names, code)


def _delete_topics_error(req: P.DeleteTopicsRequest, version: int, code: int) -> Any:
    cls = P.DeleteTopicsResponse
    return _topic_errors(cls, "responses", cls.DeletableTopicResult, _delete_names(req), code)


def _create_partitions_error(req: P.CreatePartitionsRequest, version: int, code: int) -> Any:
    names = [t.name for t in req.topics]
    cls = P.CreatePartitionsResponse
    return _topic_errors(cls, "results", cls.CreatePartitionsTopicResult, names, code)


def valid_topic_name(name: str) -> bool:
    """Whether Kafka accepts ``name`` for a topic (legal characters, 1-249 long, not . or ..)."""
    return name not in (".", "..") and _TOPIC_NAME.fullmatch(name) is not None


def _create_check(ctx: RequestContext, t: P.CreateTopicsRequest.CreatableTopic) -> tuple[int, str]:
    cluster = ctx.cluster
    brokers = len(cluster.nodes)
    if not valid_topic_name(t.name):
        return errors.InvalidTopicError.code, f"invalid topic name {t.name!r}"
    if t.name in cluster.topics:
        return errors.TopicExistsError.code, f"topic {t.name!r} already exists"
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return errors.InvalidRequestError.code, "assignments with a partition count"
        for a in t.assignments:
            if not a.broker_ids or any(b not in cluster.nodes for b in a.broker_ids):
                return errors.InvalidReplicaAssignmentError.code, f"bad assignment {a.broker_ids}"
    else:
        if t.num_partitions == 0 or t.num_partitions < -1:
            return errors.InvalidPartitionsError.code, "partitions must be positive"
        if t.replication_factor == 0 or t.replication_factor < -1:
            return errors.InvalidReplicationFactorError.code, "replication must be positive"
        if t.replication_factor > brokers:
            return (
                errors.InvalidReplicationFactorError.code,
                f"replication factor {t.replication_factor} larger than {brokers} brokers",
            )
    problem = validate_topic_configs({c.name: c.value for c in t.configs})
    if problem is not None:
        return errors.InvalidConfigurationError.code, problem
    return 0, ""


def _create_topic(
    ctx: RequestContext, t: P.CreateTopicsRequest.CreatableTopic, validate_only: bool
) -> P.CreateTopicsResponse.CreatableTopicResult:
    out = P.CreateTopicsResponse.CreatableTopicResult(
        name=t.name, error_code=0, error_message=None, num_partitions=-1, replication_factor=-1
    )
    if ctx.broker.node_id != ctx.cluster.controller_id:
        out.error_code = _NOT_CONTROLLER
        return out
    out.error_code, message = _create_check(ctx, t)
    if out.error_code:
        out.error_message = message
        return out
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    if t.assignments:
        count, rf = len(t.assignments), len(t.assignments[0].broker_ids)
    else:
        count = ctx.cluster.default_partitions if t.num_partitions == -1 else t.num_partitions
        rf = 1 if t.replication_factor == -1 else t.replication_factor
    out.num_partitions, out.replication_factor = count, rf
    # every config of the new topic, with its source, as Kafka answers (v5+)
    out.configs = [
        P.CreateTopicsResponse.CreatableTopicConfigs(
            name=k, value=v, read_only=False, config_source=source, is_sensitive=False
        )
        for k, v, source, _kind in new_topic_configs(ctx.cluster, configs)
    ]
    if validate_only:
        return out
    topic = ctx.cluster.create_topic(t.name, count, rf, configs)
    for a in t.assignments:
        if 0 <= a.partition_index < count:
            part = topic.partitions[a.partition_index]
            part.leader, part.replicas = a.broker_ids[0], list(a.broker_ids)
    out.topic_id = topic.topic_id
    return out


async def create_topics(ctx: RequestContext, req: P.CreateTopicsRequest, version: int) -> Any:
    """Create topics on the controller (a name given twice is INVALID_REQUEST)."""
    names = [t.name for t in req.topics]
    results = []
    answered: set[str] = set()
    for t in req.topics:
        if names.count(t.name) > 1:
            if t.name in answered:
                continue  # Kafka answers a name given twice once
            answered.add(t.name)
            results.append(
                P.CreateTopicsResponse.CreatableTopicResult(
                    name=t.name,
                    error_code=errors.InvalidRequestError.code,
                    error_message="duplicate",
                )
            )
        else:
            results.append(_create_topic(ctx, t, req.validate_only))
    return P.CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _delete_names(req: P.DeleteTopicsRequest) -> list[str]:
    return [t.name or "" for t in req.topics] if req.topics else list(req.topic_names)


async def delete_topics(ctx: RequestContext, req: P.DeleteTopicsRequest, version: int) -> Any:
    """Delete topics by name on the controller."""
    cluster = ctx.cluster
    results = []
    for name in _delete_names(req):
        res = P.DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=0)
        if ctx.broker.node_id != cluster.controller_id:
            res.error_code = _NOT_CONTROLLER
        elif name not in cluster.topics:
            res.error_code = _UNKNOWN
        else:
            res.topic_id = cluster.topics[name].topic_id
            cluster.delete_topic(name)
        results.append(res)
    return P.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def _create_partitions_one(
    ctx: RequestContext, t: P.CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool
) -> tuple[int, str | None]:
    cluster = ctx.cluster
    if ctx.broker.node_id != cluster.controller_id:
        return _NOT_CONTROLLER, None
    topic = cluster.topics.get(t.name)
    if topic is None:
        return _UNKNOWN, None
    have = len(topic.partitions)
    if t.count <= have:
        return errors.InvalidPartitionsError.code, f"topic has {have} partitions already"
    bad = t.assignments is not None and (
        len(t.assignments) != t.count - have
        or any(
            not a.broker_ids or any(b not in cluster.nodes for b in a.broker_ids)
            for a in t.assignments
        )
    )
    if bad:
        return errors.InvalidReplicaAssignmentError.code, "bad assignments"
    if validate_only:
        return 0, None
    cluster.add_partitions(t.name, t.count)
    for i, a in enumerate(t.assignments or ()):
        part = topic.partitions[have + i]
        part.leader, part.replicas = a.broker_ids[0], list(a.broker_ids)
    return 0, None


async def create_partitions(
    ctx: RequestContext, req: P.CreatePartitionsRequest, version: int
) -> Any:
    """Grow topics to the asked count on the controller."""
    results = []
    for t in req.topics:
        code, message = _create_partitions_one(ctx, t, req.validate_only)
        results.append(
            P.CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=code, error_message=message
            )
        )
    return P.CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _delete_records_one(
    ctx: RequestContext, topic: str, dp: P.DeleteRecordsRequest.DeleteRecordsPartition
) -> P.DeleteRecordsResponse.DeleteRecordsPartitionResult:
    out = P.DeleteRecordsResponse.DeleteRecordsPartitionResult(
        partition_index=dp.partition_index, low_watermark=-1, error_code=0
    )
    code, p = _lookup(ctx, topic, dp.partition_index)
    if code:
        out.error_code = code
        return out
    assert p is not None
    offset = p.log.high_watermark if dp.offset == -1 else dp.offset
    if offset < 0 or offset > p.log.high_watermark:
        out.error_code = errors.OffsetOutOfRangeError.code
        return out
    p.log.delete_before(offset)
    out.low_watermark = p.log.log_start_offset
    return out


async def delete_records(ctx: RequestContext, req: P.DeleteRecordsRequest, version: int) -> Any:
    """Move each partition's log start up (on its leader); -1 means the high watermark."""
    return P.DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            P.DeleteRecordsResponse.DeleteRecordsTopicResult(
                name=t.name,
                partitions=[_delete_records_one(ctx, t.name, dp) for dp in t.partitions],
            )
            for t in req.topics
        ],
    )


def _delete_records_error(req: P.DeleteRecordsRequest, version: int, code: int) -> Any:
    cls = P.DeleteRecordsResponse
    return _partition_errors(
        cls, cls.DeleteRecordsTopicResult, cls.DeleteRecordsPartitionResult, req.topics, code
    )


def _api(
    req: type[Any], resp: type[Any], handler: Any, lo: int, hi: int, error: Callable[..., Any]
) -> Api:
    return Api(req, resp, handler, lo, hi, error=error)


# Kafka 4.0 dropped the oldest versions (KIP-896); the fake speaks Kafka 4's ranges
APIS = [
    _api(P.ProduceRequest, P.ProduceResponse, produce, 3, 11, _produce_error),
    _api(P.FetchRequest, P.FetchResponse, fetch, 4, 12, _fetch_error),
    _api(P.ListOffsetsRequest, P.ListOffsetsResponse, list_offsets, 1, 7, _list_offsets_error),
    _api(
        P.OffsetForLeaderEpochRequest,
        P.OffsetForLeaderEpochResponse,
        offset_for_leader_epoch,
        2,  # Kafka 4 answers v2-4 (KIP-896 removed v0-1)
        4,
        _offset_for_leader_epoch_error,
    ),
    _api(P.CreateTopicsRequest, P.CreateTopicsResponse, create_topics, 2, 7, _create_topics_error),
    _api(P.DeleteTopicsRequest, P.DeleteTopicsResponse, delete_topics, 1, 6, _delete_topics_error),
    _api(
        P.CreatePartitionsRequest,
        P.CreatePartitionsResponse,
        create_partitions,
        0,
        3,
        _create_partitions_error,
    ),
    _api(
        P.DeleteRecordsRequest, P.DeleteRecordsResponse, delete_records, 0, 2, _delete_records_error
    ),
]
