"""The fake cluster's transaction coordinator: producer ids, transactions, markers, timeouts.

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, answered as
Kafka's coordinator does, except that a commit or abort completes at once
(the markers are written before EndTxn answers, so CONCURRENT_TRANSACTIONS is
never needed). A transaction open longer than its timeout is aborted by the
coordinator with a bumped epoch (KIP-360), which fences the old producer. The
coordinator's state lives in ``txn_coordinator.py``.
"""

from __future__ import annotations

from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.txn_coordinator import TransactionCoordinator, TxnMetadata, TxnStatus

TRANSACTION = 1  # FindCoordinator key type
_FENCED = errors.ProducerFencedError.code
_NOT_COORDINATOR = errors.NotCoordinatorError.code
_BAD_STATE = errors.InvalidTxnStateError.code


def _check(
    ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int
) -> tuple[int, TxnMetadata | None]:
    """The checks AddPartitionsToTxn, AddOffsetsToTxn and EndTxn share."""
    if ctx.cluster.coordinator_for(TRANSACTION, transactional_id) != ctx.broker.node_id:
        return _NOT_COORDINATOR, None
    return ctx.cluster.transactions.check(transactional_id, producer_id, epoch)


def _fenced_code(code: int, version: int, since: int) -> int:
    """PRODUCER_FENCED (KIP-588) for clients at ``since``+, INVALID_PRODUCER_EPOCH before."""
    if code == _FENCED and version < since:
        return errors.InvalidProducerEpochError.code
    return code


def _init_transactional(ctx: RequestContext, req: P.InitProducerIdRequest) -> tuple[int, int, int]:
    coord: TransactionCoordinator = ctx.cluster.transactions
    tid = req.transactional_id
    assert tid is not None
    timeout = req.transaction_timeout_ms
    if timeout <= 0 or timeout > ctx.cluster.max_transaction_timeout_ms:
        return errors.InvalidTxnTimeoutError.code, -1, -1
    if ctx.cluster.coordinator_for(TRANSACTION, tid) != ctx.broker.node_id:
        return _NOT_COORDINATOR, -1, -1
    coord.expire()
    txn = coord.transactions.get(tid)
    if txn is None:
        txn = TxnMetadata(tid, coord.new_producer_id(), 0, timeout)
        coord.register(txn)
        return 0, txn.producer_id, txn.epoch
    if req.producer_id >= 0:
        # KIP-360: a producer asking to bump its own epoch (Kafka fences any other)
        if req.producer_id != txn.producer_id:
            return _FENCED, -1, -1
        if req.producer_epoch not in (txn.epoch, txn.last_epoch):
            return _FENCED, -1, -1
    if txn.status is TxnStatus.ONGOING:
        coord.fence_and_abort(txn)
    txn.timeout_ms = timeout
    txn.status = TxnStatus.EMPTY
    coord.bump_epoch(txn)
    return 0, txn.producer_id, txn.epoch


async def init_producer_id(ctx: RequestContext, req: P.InitProducerIdRequest, version: int) -> Any:
    """A new producer id (idempotent), or the transactional id's with its epoch bumped."""
    if req.transactional_id is None:
        code, pid, epoch = 0, ctx.cluster.transactions.new_producer_id(), 0
    else:
        code, pid, epoch = _init_transactional(ctx, req)
    return P.InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=_fenced_code(code, version, 4),
        producer_id=pid,
        producer_epoch=epoch,
    )


_TopicResult = P.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartResult = P.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


def _partition_results(
    topics: list[P.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
    code_of: Any,
) -> list[_TopicResult]:
    return [
        _TopicResult(
            name=t.name,
            results_by_partition=[
                _PartResult(partition_index=i, partition_error_code=code_of(t.name, i))
                for i in t.partitions
            ],
        )
        for t in topics
    ]


async def add_partitions_to_txn(
    ctx: RequestContext, req: P.AddPartitionsToTxnRequest, version: int
) -> Any:
    """Add partitions to the open transaction (starting it); all or none are added."""
    coord: TransactionCoordinator = ctx.cluster.transactions
    topics = req.v3_and_below_topics
    code, txn = _check(
        ctx,
        req.v3_and_below_transactional_id,
        req.v3_and_below_producer_id,
        req.v3_and_below_producer_epoch,
    )
    if code == 0:
        unknown = {
            (t.name, i)
            for t in topics
            for i in t.partitions
            if ctx.cluster.partition(t.name, i) is None
        }
        if unknown:
            results = _partition_results(
                topics,
                lambda n, i: (
                    errors.UnknownTopicOrPartitionError.code
                    if (n, i) in unknown
                    else errors.OperationNotAttemptedError.code
                ),
            )
            return P.AddPartitionsToTxnResponse(
                throttle_time_ms=0, results_by_topic_v3_and_below=results
            )
        assert txn is not None
        coord.begin(txn)
        txn.partitions.update((t.name, i) for t in topics for i in t.partitions)
    code = _fenced_code(code, version, 2)
    results = _partition_results(topics, lambda n, i: code)
    return P.AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)


def _add_partitions_error(req: P.AddPartitionsToTxnRequest, version: int, code: int) -> Any:
    results = _partition_results(req.v3_and_below_topics, lambda n, i: code)
    return P.AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)


async def add_offsets_to_txn(
    ctx: RequestContext, req: P.AddOffsetsToTxnRequest, version: int
) -> Any:
    """Record the group whose offsets the transaction will commit."""
    coord: TransactionCoordinator = ctx.cluster.transactions
    code, txn = _check(ctx, req.transactional_id, req.producer_id, req.producer_epoch)
    if txn is not None:
        coord.begin(txn)
        txn.groups.add(req.group_id)
    return P.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_code(code, version, 2))


async def end_txn(ctx: RequestContext, req: P.EndTxnRequest, version: int) -> Any:
    """Commit or abort: markers on every partition of the transaction, then the offsets.

    Transactions V2 (EndTxn v5 on a cluster at ``transaction.version`` 2): the
    epoch is bumped at every end and the answer carries the id and epoch to
    use next; a retried end (at the epoch before, after it completed) is
    answered the same.
    """
    coord: TransactionCoordinator = ctx.cluster.transactions
    v2 = version >= 5 and ctx.cluster.transaction_version >= 2
    done = TxnStatus.COMPLETE_COMMIT if req.committed else TxnStatus.COMPLETE_ABORT
    code, txn = _check(ctx, req.transactional_id, req.producer_id, req.producer_epoch)
    if v2 and code == _FENCED:
        retried = coord.transactions.get(req.transactional_id)
        if (
            retried is not None
            and retried.producer_id == req.producer_id
            and retried.last_epoch == req.producer_epoch
            and retried.status is done
        ):
            code, txn = 0, retried  # the answer to the end it retries
            return P.EndTxnResponse(
                throttle_time_ms=0,
                error_code=0,
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
            )
    if txn is not None:
        if txn.status is TxnStatus.ONGOING:
            coord.complete(txn, req.committed)
            if v2:
                coord.bump_epoch(txn)
        elif txn.status is not done:
            # nothing open, or it ended the other way (aborted by the coordinator)
            code = _BAD_STATE
    return P.EndTxnResponse(
        throttle_time_ms=0,
        error_code=_fenced_code(code, version, 2),
        producer_id=txn.producer_id if txn is not None else -1,
        producer_epoch=txn.epoch if txn is not None else -1,
    )


APIS = [
    Api(P.InitProducerIdRequest, P.InitProducerIdResponse, init_producer_id, 0, 4),
    Api(
        P.AddPartitionsToTxnRequest,
        P.AddPartitionsToTxnResponse,
        add_partitions_to_txn,
        0,
        3,
        error=_add_partitions_error,
    ),
    Api(P.AddOffsetsToTxnRequest, P.AddOffsetsToTxnResponse, add_offsets_to_txn, 0, 3),
    Api(P.EndTxnRequest, P.EndTxnResponse, end_txn, 0, 4),
]
