"""The transactional producer's calls to the coordinators, driving its status.

One :class:`TransactionManager` per producer with a ``transactional_id``. It
owns the transaction's status (:class:`TxnStatus`, sarama's TxnStatus), which
changes only by the table of :mod:`pykaf._txn.states`, talks
to the transaction coordinator (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn)
and to the group coordinator (TxnOffsetCommit), and tells the producer when
records may be sent: only while a transaction is open.

Partitions join a transaction lazily. A broker's sender skips a partition
whose ``txn_added`` is not the current transaction's serial and asks the
manager to add it; one task (:meth:`TransactionManager.run_adder`) sends the
partitions asked for meanwhile in one AddPartitionsToTxn, then marks them
added and wakes their senders. Nothing of this runs per record.

Transactions V2 (KIP-890 part 2): when the cluster's finalized
``transaction.version`` is 2 or more (ApiVersions, KIP-584) and the brokers
speak the versions it needs, a transaction is run the V2 way, decided when it
begins. No AddPartitionsToTxn (a partition joins at once: Produce v12 adds it
on the broker), no AddOffsetsToTxn (TxnOffsetCommit v5 adds the group), and
EndTxn v5, whose answer carries the producer id and epoch for the next
transaction: the coordinator bumps the epoch at every transaction's end,
which fences a late write of the transaction before. Otherwise (V1 brokers,
brokers that report no features, the fake cluster) the V1 calls above, with
Produce v11, TxnOffsetCommit v4 and EndTxn v4 at most.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff
from pykaf._cluster.group_metadata import GroupMetadata
from pykaf._txn.host import TxnHost, TxnPartition
from pykaf._txn.states import INITIAL, TxnEvent, TxnStatus, allowed, transition
from pykaf.errors import TransactionAbortedError, TransactionStateError
from pykaf.protocol import versions

if TYPE_CHECKING:
    from pykaf._net.connection import BrokerConnection

log = logging.getLogger("pykaf.producer")

_ADD_PARTITIONS_TO_TXN = P.AddPartitionsToTxnRequest.API_KEY
_ADD_OFFSETS_TO_TXN = P.AddOffsetsToTxnRequest.API_KEY
_END_TXN = P.EndTxnRequest.API_KEY
_TXN_OFFSET_COMMIT = P.TxnOffsetCommitRequest.API_KEY
_PRODUCE = P.ProduceRequest.API_KEY
#: The lowest versions transactions V2 are spoken with (KIP-890 part 2).
_V2_VERSIONS = {_PRODUCE: 12, _END_TXN: 5, _TXN_OFFSET_COMMIT: 5}

#: Errors after which the producer can only be closed.
_FATAL: tuple[type[errors.KafkaError], ...] = (
    errors.ProducerFencedError,
    errors.InvalidProducerEpochError,
    errors.TransactionalIdAuthorizationError,
    errors.TransactionCoordinatorFencedError,
    errors.InvalidTxnStateError,
    errors.UnsupportedVersionError,
)
#: Errors meaning "another producer took over the transactional id".
_FENCED: tuple[type[errors.KafkaError], ...] = (
    errors.ProducerFencedError,
    errors.InvalidProducerEpochError,
    errors.TransactionCoordinatorFencedError,
)

TopicPartition = tuple[str, int]


#: ``send_offsets_to_transaction``'s offsets: ``{(topic, partition): offset}``
#: (or ``offset, metadata`` pairs as values), or objects with ``topic``,
#: ``partition`` and ``offset`` (and optionally ``metadata``) attributes.
#: Each offset is the next one to consume, as in any commit.
Offsets = Mapping[TopicPartition, "int | tuple[int, str | None]"] | Iterable[Any]


def offsets_by_topic(offsets: Offsets) -> dict[str, dict[int, tuple[int, str | None]]]:
    """Normalise ``send_offsets_to_transaction``'s offsets: topic -> partition -> (offset, meta)."""
    out: dict[str, dict[int, tuple[int, str | None]]] = {}
    items: Iterable[tuple[Any, Any]]
    if isinstance(offsets, Mapping):
        items = offsets.items()
    else:
        entries: Iterable[Any] = offsets
        items = (
            ((o.topic, o.partition), (o.offset, getattr(o, "metadata", None))) for o in entries
        )
    for (topic, partition), value in items:
        offset, metadata = value if isinstance(value, tuple) else (value, None)
        if not isinstance(topic, str) or type(partition) is not int or type(offset) is not int:
            raise TypeError(f"bad offset entry ({topic!r}, {partition!r}) -> {value!r}")
        if offset < 0:
            raise ValueError(f"offset {offset} for {topic}/{partition} is negative")
        out.setdefault(topic, {})[partition] = (offset, metadata)
    return out


def group_metadata_of(group: Any) -> GroupMetadata:
    """A GroupMetadata from itself, a group session (``group_metadata()``) or a group id."""
    if isinstance(group, GroupMetadata):
        return group
    if isinstance(group, str):
        return GroupMetadata(group)
    getter = getattr(group, "group_metadata", None)
    if callable(getter):
        gm = getter()
        if isinstance(gm, GroupMetadata):
            return gm
    raise TypeError(f"expected GroupMetadata, a group session or a group id, not {group!r}")


def _first_error(codes: Iterable[int]) -> type[errors.KafkaError] | None:
    """The error to act on among per-partition codes: a final one before a retriable one."""
    codes = list(codes)  # read twice below
    found: type[errors.KafkaError] | None = None
    for code in codes:
        err = errors.error_for_code(code)
        if err is None or err is errors.OperationNotAttemptedError:
            continue
        if not err.retriable:
            return err
        found = found or err
    if found is None and any(code for code in codes):
        return errors.OperationNotAttemptedError
    return found


class TransactionManager:
    """The transaction state of one producer and its requests to the coordinators."""

    def __init__(self, producer: TxnHost, transactional_id: str) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.status = INITIAL
        #: Number of the current (or next) transaction; a partition is in the
        #: transaction when its ``txn_added`` equals it.
        self.serial = 1
        self.error: BaseException | None = None  # why abortable, or the fatal error
        #: A sequence number was spent on a record that will never be written:
        #: the epoch must be bumped before the next transaction.
        self.needs_bump = False
        self.started = False  # the coordinator may know of the transaction
        #: An add (partitions or offsets) succeeded: the coordinator knows it.
        self.confirmed = False
        self.transactions = 0  # ended (committed or aborted), for statistics
        #: The open (or next) transaction uses transactions V2 (KIP-890 part 2).
        self.v2 = False
        self._lock = trio.Lock()
        self._to_add: dict[TxnPartition, None] = {}
        self._add_wake = trio.Event()
        self._add_idle = trio.Event()
        self._add_idle.set()

    # ------------------------------------------------------------------ state

    def _set(self, event: TxnEvent) -> None:
        """The one place the status changes: by the table (``pykaf._txn.states``)."""
        status = self.status = transition(self.status, event)
        self.producer.allow_sends(status is TxnStatus.IN_TRANSACTION)

    def initialized(self) -> None:
        """InitProducerId succeeded: transactions may begin."""
        if allowed(self.status, TxnEvent.INITIALIZED):
            self._set(TxnEvent.INITIALIZED)

    def fatal(self, error: BaseException) -> BaseException:
        """Enter FATAL_ERROR; return the error every later call raises."""
        if allowed(self.status, TxnEvent.FATAL):
            if isinstance(error, _FENCED) and not isinstance(error, errors.ProducerFencedError):
                fenced = errors.ProducerFencedError(
                    f"fenced ({type(error).__name__}: {error}): another producer with "
                    f"transactional_id {self.transactional_id!r} took over"
                )
                fenced.__cause__ = error
                error = fenced
            log.error("transactional producer %r: fatal error: %s", self.transactional_id, error)
            self.error = error
            self._set(TxnEvent.FATAL)
        assert self.error is not None
        return self.error

    def abortable(self, error: BaseException) -> None:
        """Something of the open transaction failed: it can only be aborted now."""
        if isinstance(error, _FATAL):
            self.fatal(error)
        elif allowed(self.status, TxnEvent.FAIL):
            log.warning("transaction of %r must abort: %s", self.transactional_id, error)
            self.error = error
            self._set(TxnEvent.FAIL)

    def record_failed(self, error: BaseException) -> None:
        """A batch failed (called by the producer)."""
        if self.status is not TxnStatus.ABORTING:
            self.abortable(error)

    def sequence_gap(self, error: BaseException) -> None:
        """A sequence number was lost; instead of an idempotent epoch bump: abort, then bump."""
        self.needs_bump = True
        self.record_failed(error)

    def _raise_fatal(self) -> None:
        if self.status is TxnStatus.FATAL_ERROR:
            assert self.error is not None
            raise _again(self.error)

    def _abortable_error(self) -> errors.TransactionAbortableError:
        exc = errors.TransactionAbortableError(
            f"the transaction must be aborted: {type(self.error).__name__}: {self.error}"
        )
        exc.__cause__ = self.error
        return exc

    def _raise_after_flush(self) -> None:
        """The flush made the transaction fail (a record failed, or fenced)."""
        if self.status in (TxnStatus.ABORTABLE_ERROR, TxnStatus.FATAL_ERROR):
            # The failure is told by commit's error: flush() and aclose() keep quiet.
            self.producer.forget_failures()
        self._raise_fatal()
        if self.status is TxnStatus.ABORTABLE_ERROR:
            raise self._abortable_error()

    def refuse_send(self) -> NoReturn:
        """Raise why a record cannot be sent now."""
        self._raise_fatal()
        if self.status is TxnStatus.ABORTABLE_ERROR:
            raise self._abortable_error()
        raise TransactionStateError(
            f"records can only be sent inside a transaction (the producer is "
            f"{self.status.value}): call begin_transaction() first"
        )

    def _check_open(self, what: str) -> None:
        self._raise_fatal()
        if self.status is TxnStatus.ABORTABLE_ERROR:
            raise self._abortable_error()
        if self.status is not TxnStatus.IN_TRANSACTION:
            raise TransactionStateError(f"{what} needs an open transaction ({self.status.value})")

    def begin(self) -> None:
        """READY -> IN_TRANSACTION; the transaction uses V2 when the cluster has it."""
        self._raise_fatal()
        if self.status is TxnStatus.ABORTABLE_ERROR:
            raise self._abortable_error()
        self._set(TxnEvent.BEGIN)
        self.error = None
        self.started = self.confirmed = False
        v2 = self._cluster_has_v2()
        if v2 != self.v2:
            log.info(
                "transactional producer %r: transactions V%d",
                self.transactional_id,
                2 if v2 else 1,
            )
        self.v2 = v2

    def _cluster_has_v2(self) -> bool:
        """Whether the cluster's ``transaction.version`` is 2+ and the brokers speak V2's calls."""
        versions = self.producer.client.newest_features()
        return (
            versions is not None
            and versions.feature_level("transaction.version") >= 2
            and all(versions.supports(key, v) for key, v in _V2_VERSIONS.items())
        )

    @property
    def transaction_version(self) -> int:
        """1 or 2: the protocol of the open (or last) transaction (KIP-890 part 2)."""
        return 2 if self.v2 else 1

    def _finish(self) -> None:
        self._set(TxnEvent.END)
        self.serial += 1
        self.started = self.confirmed = False
        self.error = None
        self.transactions += 1

    # ------------------------------------------------------------------ commit and abort

    async def commit(self) -> None:
        """Flush, then EndTxn(commit). See ``Producer.commit_transaction``."""
        async with self._lock:
            if self.status is TxnStatus.IN_TRANSACTION:
                await self.producer.drain_input()  # input() messages belong to it too
            self._raise_fatal()
            if self.status is TxnStatus.ABORTABLE_ERROR:
                raise self._abortable_error()
            self._set(TxnEvent.COMMIT)
            await self.producer.flush_transaction()
            self._raise_after_flush()
            await self._wait_adder()
            if self.started:
                try:
                    await self._end(commit=True)
                except errors.KafkaTimeoutError:
                    raise  # still COMMITTING: commit_transaction() may be called again
                except errors.PykafError as exc:
                    if not isinstance(exc, _FATAL):
                        self.abortable(exc)
                    raise
            self._finish()

    async def abort(self) -> None:
        """Drop what is unsent, wait for what is in flight, EndTxn(abort)."""
        async with self._lock:
            self._raise_fatal()
            self._set(TxnEvent.ABORT)
            self._to_add.clear()
            aborted = TransactionAbortedError("the transaction was aborted")
            if await self.producer.drop_transaction(aborted):
                self.needs_bump = True
            await self._wait_adder()
            bumped = False
            if self.started:
                # Only adds that failed: the coordinator may never have begun
                # the transaction, and then answers INVALID_TXN_STATE.
                bumped = await self._end(commit=False, nothing_begun_ok=not self.confirmed)
            if self.needs_bump and not bumped:  # V2's EndTxn bumped it already
                await self.producer.new_epoch()
            self.needs_bump = False
            self._finish()

    async def abort_on_close(self) -> None:
        """Abort an open transaction while the producer closes (best effort)."""
        if allowed(self.status, TxnEvent.ABORT):
            with trio.move_on_after(self.producer.config.request_timeout):
                try:
                    await self.abort()
                except errors.PykafError as exc:
                    log.warning("could not abort the transaction on close: %s", exc)

    async def _end(self, *, commit: bool, nothing_begun_ok: bool = False) -> bool:
        """EndTxn; whether it gave the producer a new epoch (V2: EndTxn v5)."""
        resp = await self._txn_request(
            _END_TXN,
            P.EndTxnRequest,
            "EndTxn(commit)" if commit else "EndTxn(abort)",
            max_version=None if self.v2 else versions.END_TXN.max_version,
            tolerate=(errors.InvalidTxnStateError,) if nothing_begun_ok else (),
            committed=commit,
        )
        # v5 answers with the id and epoch for the next transaction (-1 below
        # v5, and when a tolerated error answered).
        if resp.error_code == 0 and resp.producer_id >= 0 and resp.producer_epoch >= 0:
            self.producer.adopt_epoch(resp.producer_id, resp.producer_epoch)
            return True
        return False

    async def _txn_request(
        self,
        api_key: int,
        request: Any,
        what: str,
        *,
        max_version: int | None = None,
        tolerate: tuple[type[errors.KafkaError], ...] = (),
        **fields: Any,
    ) -> Any:
        """A request to the transaction coordinator naming this producer, answered by one code.

        Error codes of ``tolerate`` count as success. Returns the response.
        """
        pr = self.producer

        def check(resp: Any) -> type[errors.KafkaError] | None:
            err = errors.error_for_code(resp.error_code)
            return None if err is not None and issubclass(err, tolerate) else err

        return await self._call(
            api_key,
            lambda v: request(
                transactional_id=self.transactional_id,
                producer_id=pr.producer_id,
                producer_epoch=pr.producer_epoch,
                **fields,
            ),
            check,
            what,
            max_version=max_version,
        )

    # ------------------------------------------------------------------ offsets

    async def send_offsets(self, offsets: Offsets, group: Any) -> None:
        """AddOffsetsToTxn (V1 only), then TxnOffsetCommit.

        See ``Producer.send_offsets_to_transaction``.
        """
        gm = group_metadata_of(group)
        by_topic = offsets_by_topic(offsets)
        async with self._lock:
            self._check_open("send_offsets_to_transaction")
            if not by_topic:
                return
            self.started = True
            try:
                if not self.v2:  # V2: TxnOffsetCommit v5 adds the group itself
                    await self._txn_request(
                        _ADD_OFFSETS_TO_TXN,
                        P.AddOffsetsToTxnRequest,
                        "AddOffsetsToTxn",
                        group_id=gm.group_id,
                    )
                    self.confirmed = True
                await self._txn_offset_commit(gm, by_topic)
                self.confirmed = True
            except errors.KafkaTimeoutError:
                raise  # nothing changed for good: the call may be made again
            except errors.PykafError as exc:
                self.abortable(exc)
                raise

    async def _txn_offset_commit(
        self, gm: GroupMetadata, by_topic: dict[str, dict[int, tuple[int, str | None]]]
    ) -> None:
        pr = self.producer

        def build(version: int) -> Any:
            return P.TxnOffsetCommitRequest(
                transactional_id=self.transactional_id,
                group_id=gm.group_id,
                producer_id=pr.producer_id,
                producer_epoch=pr.producer_epoch,
                generation_id=gm.generation_id,
                member_id=gm.member_id,
                group_instance_id=gm.group_instance_id,
                topics=[
                    P.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            P.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                partition_index=partition,
                                committed_offset=offset,
                                committed_metadata=metadata,
                            )
                            for partition, (offset, metadata) in parts.items()
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
            )

        def check(resp: Any) -> type[errors.KafkaError] | None:
            return _first_error(p.error_code for t in resp.topics for p in t.partitions)

        await self._call(
            _TXN_OFFSET_COMMIT,
            build,
            check,
            "TxnOffsetCommit",
            group=gm.group_id,
            max_version=None if self.v2 else versions.TXN_OFFSET_COMMIT_V1.max_version,
        )

    # ------------------------------------------------------------------ partitions

    def need(self, part: TxnPartition) -> bool:
        """The sender has a batch for ``part``, which is not in the transaction yet.

        Returns whether ``part`` is in the transaction now: with V2 it joins
        at once (its Produce adds it on the broker); with V1 it waits for
        AddPartitionsToTxn (:meth:`run_adder` wakes its sender).
        """
        if self.status in (TxnStatus.IN_TRANSACTION, TxnStatus.COMMITTING):
            if self.v2:
                part.txn_added = self.serial
                self.started = True
                return True
            if part not in self._to_add:
                self._to_add[part] = None
                self._add_wake.set()
        elif self.status is not TxnStatus.ABORTING:  # abort drops them itself
            if self.status is TxnStatus.FATAL_ERROR:
                assert self.error is not None
                error: BaseException = self.error
            else:
                error = self._abortable_error()
            if self.producer.drop_unsent(part, error):
                self.needs_bump = True
        return False

    async def _wait_adder(self) -> None:
        while self._to_add or not self._add_idle.is_set():
            if self._to_add and self._add_idle.is_set():
                self._add_wake.set()
            await self._add_idle.wait()
            await trio.sleep(0)

    async def run_adder(self) -> None:
        """The task that adds partitions to the transaction, many per request."""
        while True:
            await self._add_wake.wait()
            self._add_wake = trio.Event()
            if not self._to_add:
                continue
            parts = list(self._to_add)
            serial = self.serial
            self._add_idle = trio.Event()
            try:
                self.started = True
                await self._add_partitions(parts)
            except errors.PykafError as exc:
                for part in parts:
                    self._to_add.pop(part, None)
                self.abortable(exc)
                for part in parts:
                    if self.producer.drop_unsent(part, exc):
                        self.needs_bump = True
            else:
                self.confirmed = True
                for part in parts:
                    self._to_add.pop(part, None)
                    part.txn_added = serial
                    if part.broker is not None:
                        part.broker.wake()
            finally:
                self._add_idle.set()

    async def _add_partitions(self, parts: list[TxnPartition]) -> None:
        pr = self.producer
        by_topic: dict[str, list[int]] = {}
        for part in parts:
            by_topic.setdefault(part.topic, []).append(part.partition)
        topics = [
            P.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ]

        def build(version: int) -> Any:
            return P.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=pr.producer_id,
                v3_and_below_producer_epoch=pr.producer_epoch,
                v3_and_below_topics=topics,
            )

        def check(resp: Any) -> type[errors.KafkaError] | None:
            return _first_error(
                p.partition_error_code
                for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition
            )

        log.debug("adding %d partitions to the transaction", len(parts))
        await self._call(
            _ADD_PARTITIONS_TO_TXN,
            build,
            check,
            "AddPartitionsToTxn",
            max_version=versions.ADD_PARTITIONS_TO_TXN.max_version,
        )

    # ------------------------------------------------------------------ requests

    async def _call(
        self,
        api_key: int,
        build: Callable[[int], Any],
        check: Callable[[Any], type[errors.KafkaError] | None],
        what: str,
        *,
        group: str | None = None,
        max_version: int | None = None,
    ) -> Any:
        """One coordinator request, retried on retriable errors until request_timeout.

        Raises:
            KafkaTimeoutError: still failing with retriable errors at the deadline.
            the broker's error otherwise (fatal ones put the producer in FATAL_ERROR).
        """
        cfg = self.producer.config
        if group is None:
            target = rq.transaction_coordinator(self.transactional_id)
        else:
            target = rq.group_coordinator(group)

        async def exchange(conn: BrokerConnection) -> Any:
            version = conn.version_for(api_key)
            if max_version is not None:
                version = min(version, max_version)
            return await conn.request(build(version), version)

        def checked(resp: Any) -> errors.KafkaError | None:
            err = check(resp)
            return None if err is None else err(f"{what}: {err.description}")

        def refused(exc: errors.KafkaError) -> BaseException:
            return _again(self.fatal(exc)) if isinstance(exc, _FATAL) else exc

        def exhausted(last: BaseException, resp: Any) -> Any:
            raise errors.KafkaTimeoutError(f"{what} did not succeed in time: {last}")

        # A retriable answer or failure (a lost connection, a coordinator not
        # found yet) is asked again; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
        # and lost connections look the coordinator up again.
        return await rq.call(
            self.producer.client,
            target,
            exchange,
            what=what,
            check=checked,
            retry_raised=(errors.RetriableError,),
            timeout=cfg.request_timeout,
            policy=Backoff.of(cfg),
            refused=refused,
            exhausted=exhausted,
        )


def _again(error: BaseException) -> BaseException:
    """A fresh exception like ``error`` to raise again (keeps tracebacks from piling up)."""
    try:
        fresh = type(error)(str(error))
    except Exception:
        return error
    fresh.__cause__ = error.__cause__ or error
    return fresh


__all__ = [
    "GroupMetadata",
    "Offsets",
    "TransactionAbortedError",
    "TransactionManager",
    "TransactionStateError",
    "TxnStatus",
    "group_metadata_of",
    "offsets_by_topic",
]
