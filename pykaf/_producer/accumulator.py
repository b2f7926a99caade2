"""The accumulator: records into their partition's open batch, within the buffer limits.

:class:`Accumulator` is the one place records enter batches: :meth:`~Accumulator.append`
for one record (``send_nowait``, ``send``, keyed ``send_batch`` columns and
parked records replayed) and :meth:`~Accumulator.append_columns` for columns
(``send_batch``), which the Cython builder encodes a range at a time. It
keeps the buffer accounting and its limits (``buffer_records``,
``buffer_bytes``), opens batches and seals them (full, lingered or flushed)
into their partition's send queue. Nothing here awaits a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from pykaf import errors
from pykaf._columns import BinaryColumn
from pykaf._producer.batch import ORDINAL_STEP, ProducerBatch
from pykaf._producer.config import ProducerConfig
from pykaf._producer.partitioner import (
    Murmur2Partitioner,
    Partitioner,
    partitioner_from_config,
    sticky_for_null_keys,
)
from pykaf._producer.records import BatchDelivery
from pykaf._producer.state import PartitionState, TopicState
from pykaf.codec import RECORD_BATCH_OVERHEAD, BatchBuilder, partition_order, record_size, take
from pykaf.errors import PartitionerError

if TYPE_CHECKING:
    from pykaf._txn.manager import TransactionManager

#: Per-record bytes counted against ``buffer_bytes`` besides key and value.
RECORD_OVERHEAD = 24
#: ``fail_alone(topic, partition, error, delivery, index, count)``: the
#: records ``index`` to ``index + count - 1`` of a ``send_batch`` call failed
#: before they reached a batch (the delivery stage's).
FailAlone = Callable[[str, int, BaseException, BatchDelivery, int, int], None]


class _Purged(Exception):
    """A purge ran while a ``send_batch`` call waited for space: the rest of it fails."""


class Accumulator:
    """Open batches per partition, and the producer's buffer.

    ``topics`` is the routing stage's table (read here, never written).
    ``buffered_records`` / ``buffered_bytes`` count every record accepted
    and not settled yet, parked ones included.
    """

    def __init__(
        self,
        config: ProducerConfig,
        topics: dict[str, TopicState],
        txn: TransactionManager | None,
    ) -> None:
        self._topics = topics
        self._fail_alone: FailAlone | None = None
        self._txn = txn
        self.partitioner: Partitioner = partitioner_from_config(config.partitioner)
        self._on_new_batch = getattr(self.partitioner, "on_new_batch", None)
        self._sticky_nulls = sticky_for_null_keys(self.partitioner)
        self._compression = config.compression_code
        self._level = config.compression_level
        self._batch_bytes = config.batch_bytes
        self._batch_records = config.batch_records
        # A batch is sealed once it holds flush_bytes (when set), never above batch_bytes.
        # A flush_bytes below a batch's header (kafka-python's batch_size 0: no
        # batching) still opens a builder: its first record then fills it.
        self._fill_bytes = max(
            min(config.flush_bytes or config.batch_bytes, config.batch_bytes),
            RECORD_BATCH_OVERHEAD + 1,
        )
        self._stamps = bool(config.on_acknowledgement)
        #: ``max_message_bytes``: no record may be larger.
        self.max_message = config.max_message_bytes
        #: The buffer limits: ``buffer_records`` and ``buffer_bytes``.
        self.max_records = config.buffer_records
        self.max_bytes = config.buffer_bytes
        self.buffered_bytes = 0
        self.buffered_records = 0
        #: No record is accepted any more (the producer is closing).
        self.closing = False
        #: No record is accepted now: a transactional producer outside a transaction.
        self.gated = txn is not None
        #: How many purges ran (``Producer.purge``): a ``send_batch`` call that
        #: waited for space through one fails the records it had not appended.
        self.purges = 0
        self._space = trio.lowlevel.ParkingLot()
        #: ``send_nowait``'s staged runs (``staging.Staging``), appended by
        #: ``drain_staged`` before anything else appends, so order holds.
        self.staged: list[Any] = []
        self.drain_staged: Callable[[], None] = _nothing
        #: An append sealed a full batch since the sinks last looked
        #: (``Sinks.pump``, which ``send_nowait`` calls at the end of its call).
        self.filled = False
        #: While positive, the sinks pump nothing (a staged drain replays
        #: records through ``send_nowait``): ``filled`` waits for the next call.
        self.pumps_held = 0

    @property
    def sticky_nulls(self) -> bool:
        """Whether the partitioner keeps null-key records on one partition per batch."""
        return self._sticky_nulls

    def connect(self, fail_alone: FailAlone) -> None:
        """Wire the delivery stage's ``fail_alone`` (built after this stage, which it uses)."""
        self._fail_alone = fail_alone

    # ------------------------------------------------------------------ the buffer

    def full(self) -> bool:
        """Whether the buffer holds ``buffer_records`` or ``buffer_bytes``.

        ``Producer.send_nowait`` makes the same test inline (one call less per record).
        """
        return self.buffered_records >= self.max_records or self.buffered_bytes >= self.max_bytes

    def refuse_full(self) -> NoReturn:
        """Raise ``BufferFullError``."""
        raise errors.BufferFullError(
            f"the producer buffers {self.buffered_records} records / "
            f"{self.buffered_bytes} bytes (limits {self.max_records} / {self.max_bytes})"
        )

    def refuse(self) -> NoReturn:
        """Raise why no record may be sent now (closed, or no open transaction)."""
        if self.closing or self._txn is None:
            raise errors.ClosedError("the producer is closed")
        self._txn.refuse_send()

    async def wait_for_space(self) -> None:
        """Wait until the buffer has room.

        Raises:
            ClosedError, TransactionStateError: as :meth:`refuse`.
        """
        while self.full():
            if self.closing or self.gated:
                self.refuse()
            await self._space.park()
        if self.closing or self.gated:
            self.refuse()

    async def wait_for_room(self, nbytes: int) -> None:
        """Wait until one more record of ``nbytes`` bytes fits in the buffer.

        Raises:
            ClosedError, TransactionStateError: as :meth:`refuse`.
        """
        while (
            self.buffered_records >= self.max_records
            or self.max_bytes - self.buffered_bytes < nbytes
        ):
            if self.closing or self.gated:
                self.refuse()
            await self._space.park()
        if self.closing or self.gated:
            self.refuse()

    async def wait_for_space_lenient(self) -> None:
        """Wait until the buffer has room or the producer closes; never raise."""
        while self.full() and not self.closing:
            await self._space.park()

    def reserve(self, records: int, nbytes: int) -> None:
        """Count records held outside any batch (parked for their topic)."""
        self.buffered_records += records
        self.buffered_bytes += nbytes

    def unreserve(self, records: int, nbytes: int) -> None:
        """Uncount parked records about to be appended (which counts them again)."""
        self.buffered_records -= records
        self.buffered_bytes -= nbytes

    def release(self, records: int, nbytes: int) -> None:
        """Settled or dropped records give their space back; wake who waits for it."""
        self.buffered_records -= records
        self.buffered_bytes -= nbytes
        if len(self._space):
            self._space.unpark_all()

    def close(self) -> None:
        """Accept no more records (the staged ones are appended first); wake who waits."""
        self.drain_staged()  # also gives back room reserved for records to come
        self.closing = True
        self._space.unpark_all()

    # ------------------------------------------------------------------ checks

    def check_partition(self, t: TopicState, partition: int) -> None:
        """Raise ``UnknownTopicOrPartitionError`` unless ``t`` has ``partition``."""
        if type(partition) is not int or not 0 <= partition < t.count:
            raise errors.UnknownTopicOrPartitionError(
                f"topic {t.name!r} has no partition {partition!r} (it has {t.count})"
            )

    def check_size(self, key: Any, value: Any, headers: Any) -> None:
        """Raise ``RecordTooLargeError`` for a record over ``max_message_bytes``."""
        size = record_size(0, 0, key, value, headers)
        if size > self.max_message:
            raise errors.RecordTooLargeError(
                f"a record of {size} bytes exceeds max_message_bytes ({self.max_message})"
            )

    # ------------------------------------------------------------------ appending

    def append(
        self,
        t: TopicState,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
    ) -> tuple[ProducerBatch, int]:
        """Partition one record and append it to its partition's open batch.

        Returns the batch and the record's offset delta in it.
        """
        if self.staged:  # send_nowait's staged records go first
            self.drain_staged()
        if partition is None:
            p = t.null_part if key is None else None
            if p is None:
                p = t.parts[self._choose(t, key)]
        elif type(partition) is int and 0 <= partition < t.count:
            p = t.parts[partition]
        else:
            self.check_partition(t, partition)
            raise AssertionError("unreachable")
        nbytes = (0 if value is None else len(value)) + (0 if key is None else len(key))
        if nbytes > self.max_message - RECORD_OVERHEAD or headers:  # headers count too
            self.check_size(key, value, headers)
        batch = p.open
        if batch is not None:
            builder = batch.builder
            assert builder is not None
            delta = builder.append(timestamp, key, value, headers)
            if delta < 0 and self._grow(
                p, builder, partition is None and key is None and t.count > 1
            ):
                delta = builder.append(timestamp, key, value, headers)
            if delta < 0:
                self.seal(p)
                self.filled = True
                batch = None
                if partition is None and key is None:
                    # KIP-480: the record that filled the sticky batch goes to the next one.
                    p = t.parts[self._choose(t, key)]
                    batch = p.open
                    if batch is not None:
                        delta = batch.builder.append(timestamp, key, value, headers)  # type: ignore[union-attr]
                        if delta < 0:
                            self.seal(p)
                            batch = None
        if batch is None:
            batch = self._open_batch(p)
            delta = self._append_first(batch, timestamp, key, value, headers)
        batch.count += 1
        if batch.count == 1 and p.broker is not None:
            p.broker.wake()  # its linger starts: the sender must know of it
        nbytes += RECORD_OVERHEAD
        batch.buffered += nbytes
        self.buffered_bytes += nbytes
        self.buffered_records += 1
        if batch.timestamps is not None:
            batch.timestamps.append(timestamp)
        return batch, delta

    async def append_columns(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        partition: int | None,
        now: int,
        delivery: BatchDelivery,
        purges: int | None = None,
    ) -> None:
        """Append ``send_batch``'s columns, waiting for buffer space as needed.

        ``purges`` is :attr:`purges` when the call began (now by default): if
        a purge has run since, the records not buffered yet fail with
        ``PurgedError`` through ``delivery``.

        Keyed records (without ``partition``) are grouped by the partition
        their key hashes to (stable: each partition's records keep their
        order; ``delivery.order`` maps the grouped positions back to the
        call's), then each group goes in ranges like unkeyed records; the
        others fill one partition's batch after another, a range of records
        per builder call.

        Raises only while none of the records is buffered. Once some are, an
        error (the producer closing while this waits for space) fails the
        rest through ``delivery`` instead, so that the caller knows exactly
        which records may still be delivered: those are never reported failed.
        """
        if self.staged:  # send_nowait's staged records go first
            self.drain_staged()
        # Records appended (or failed alone) so far; the purges seen.
        done = [0, self.purges if purges is None else purges]
        try:
            if keys is not None and partition is None:
                await self._append_keyed(t, values, keys, headers, timestamps, now, delivery, done)
            else:
                await self._append_ranges(
                    t, values, keys, headers, timestamps, partition, now, delivery, done
                )
        except _Purged:
            self._purged_rest(t, partition, delivery, done[0], len(values))
        except Exception as exc:
            start, n = done[0], len(values)
            if start == 0:
                raise
            assert self._fail_alone is not None
            part = -1 if partition is None else partition
            self._fail_alone(t.name, part, exc, delivery, start, n - start)

    async def _append_ranges(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        partition: int | None,
        now: int,
        delivery: BatchDelivery,
        done: list[int],
        start: int = 0,
        n: int | None = None,
    ) -> None:
        """Records ``start`` to ``n - 1`` of the columns (to their end by default)."""
        if n is None:
            n = len(values)
        while start < n:
            await self.wait_for_space()
            if self.purges != done[1]:
                raise _Purged
            start = self._append_step(
                t, values, keys, headers, timestamps, partition, now, delivery, done, start, n
            )

    def append_run_now(
        self,
        t: TopicState,
        values: list[bytes],
        keys: list[bytes] | None,
        timestamps: list[int] | None,
        partition: int | None,
        now: int,
        delivery: BatchDelivery,
        done: list[int],
    ) -> None:
        """Append a run of staged records at once, without waiting for space.

        The caller made sure of the space (``Staging`` stages no more than
        the buffer had room for) and of ``partition``. Keyed records without
        a partition are grouped by the partition their key goes to, as
        :meth:`append_columns` groups them. ``done[0]`` follows the records
        appended (or failed alone) so far, as in :meth:`append_columns`.
        """
        if keys is None or partition is not None:
            bounds = [0, len(values)]
            parts = [partition]
        else:
            values, keys, _, timestamps, bounds = self._group(
                t, values, keys, None, timestamps, delivery
            )
            parts = list(range(t.count))
        for i, part in enumerate(parts):
            start, stop = bounds[i], bounds[i + 1]
            while start < stop:
                start = self._append_step(
                    t, values, keys, None, timestamps, part, now, delivery, done, start, stop
                )

    def _append_step(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        partition: int | None,
        now: int,
        delivery: BatchDelivery,
        done: list[int],
        start: int,
        n: int,
    ) -> int:
        """Append records from ``start`` to one partition's open batch; return where it stopped."""
        part = partition
        if part is None:
            part = self.partitioner.partition(t.name, None, t.count, t.available)
        p = t.parts[part]
        batch = p.open or self._open_batch(p)
        room = self.max_records - self.buffered_records
        stop = min(n, start + max(1, room))
        builder = batch.builder
        assert builder is not None
        try:
            end = builder.extend(
                values,
                keys,
                timestamps,
                headers,
                start=start,
                stop=stop,
                timestamp=now if timestamps is None else None,
            )
        except errors.RecordTooLargeError as exc:
            if batch.count == 0 and builder.max_bytes < self._batch_bytes:
                batch.builder = self.builder(self._batch_bytes)
                return start
            # This one record cannot fit any batch: it fails alone, the rest go on.
            assert self._fail_alone is not None
            self._fail_alone(t.name, part, exc, delivery, start, 1)
            done[0] = start + 1
            return start + 1
        added = end - start
        if added:
            nbytes = builder.extended_bytes + RECORD_OVERHEAD * added
            batch.count += added
            if batch.count == added and p.broker is not None:
                p.broker.wake()
            batch.buffered += nbytes
            self.buffered_bytes += nbytes
            self.buffered_records += added
            batch.add_delivery(delivery, added, batch.count - added, start)
            if batch.timestamps is not None:  # on_acknowledgement sees these too
                batch.timestamps.extend(
                    [now] * added
                    if timestamps is None
                    else [int(ts) for ts in timestamps[start:end]]
                )
            done[0] = end
        if (end < stop or added == 0) and not self._grow(
            p, builder, partition is None and t.count > 1
        ):
            self.seal(p)
            self.filled = True
        return end

    async def _append_keyed(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        now: int,
        delivery: BatchDelivery,
        done: list[int],
    ) -> None:
        n = len(values)
        if (
            (
                (type(keys) in (list, tuple) and None not in keys)  # null keys: sticky, below
                or (type(keys) is BinaryColumn and keys.validity is None)
            )
            and type(values) in (list, tuple, BinaryColumn)
            and (headers is None or type(headers) in (list, tuple))
            and (timestamps is None or type(timestamps) in (list, tuple))
        ):
            values, keys, headers, timestamps, bounds = self._group(
                t, values, keys, headers, timestamps, delivery
            )
            for part in range(t.count):
                start, stop = bounds[part], bounds[part + 1]
                if start < stop:
                    await self._append_ranges(
                        t, values, keys, headers, timestamps, part, now, delivery, done, start, stop
                    )
            return
        choose = self.partitioner.partition
        name, count, available = t.name, t.count, t.available
        for i in range(n):
            if self.full() or self.closing or self.gated:
                await self.wait_for_space()  # exact limits; raises ClosedError
            if self.purges != done[1]:  # also one while send_batch waited for metadata
                raise _Purged
            key = keys[i]
            part = choose(name, key, count, available)
            try:
                batch, delta = self.append(
                    t,
                    part,
                    key,
                    values[i],
                    headers[i] if headers is not None else None,
                    now if timestamps is None else int(timestamps[i]),
                )
            except errors.RecordTooLargeError as exc:
                # As in the unkeyed path: this record fails alone, the rest go on.
                assert self._fail_alone is not None
                self._fail_alone(name, part, exc, delivery, i, 1)
            else:
                batch.add_delivery(delivery, 1, delta, i)
            done[0] = i + 1

    def _group(
        self,
        t: TopicState,
        values: Any,
        keys: Any,
        headers: Any,
        timestamps: Any,
        delivery: BatchDelivery,
    ) -> tuple[Any, Any, Any, Any, list[int]]:
        """Keyed columns grouped by partition; ``bounds[p]:bounds[p + 1]`` are ``p``'s.

        In Cython: a stable counting sort, murmur2 inline for the default
        partitioner (another is asked for each key, and checked), before
        anything is buffered. ``delivery.order`` maps the grouped positions
        back to the columns' own.
        """
        parts = None
        if type(self.partitioner) is not Murmur2Partitioner:
            parts = [self._choose(t, keys[i]) for i in range(len(keys))]  # asks and checks
        order, bounds = partition_order(keys, t.count, parts)
        delivery.order = order
        values, keys = take(values, order), take(keys, order)
        if headers is not None:
            headers = take(headers, order)
        if timestamps is not None:
            timestamps = take(timestamps, order)
        return values, keys, headers, timestamps, bounds

    def _purged_rest(
        self,
        t: TopicState,
        partition: int | None,
        delivery: BatchDelivery,
        start: int,
        stop: int,
    ) -> None:
        """A purge ran while a ``send_batch`` call waited: its records ``start:stop`` fail."""
        assert self._fail_alone is not None
        error = errors.PurgedError("purged from the producer before it was sent")
        part = -1 if partition is None else partition
        if self._txn is not None:
            self._txn.record_failed(error)  # they belonged to the transaction
        self._fail_alone(t.name, part, error, delivery, start, stop - start)

    def _choose(self, t: TopicState, key: bytes | None) -> int:
        """Ask the partitioner; remember a sticky partition for null keys."""
        part = self.partitioner.partition(t.name, key, t.count, t.available)
        if type(part) is not int or not 0 <= part < t.count:
            raise PartitionerError(
                f"the partitioner chose {part!r} for topic {t.name!r} with {t.count} partitions"
            )
        if key is None and self._sticky_nulls:
            t.null_part = t.parts[part]
        return part

    def _append_first(
        self,
        batch: ProducerBatch,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
    ) -> int:
        """Append to an empty batch, growing it to batch_bytes for one large record."""
        builder = batch.builder
        assert builder is not None
        try:
            return builder.append(timestamp, key, value, headers)
        except errors.RecordTooLargeError:
            if builder.max_bytes >= self._batch_bytes:
                raise
            batch.builder = self.builder(self._batch_bytes)
            return batch.builder.append(timestamp, key, value, headers)

    def _grow(self, p: PartitionState, builder: BatchBuilder, sticky: bool) -> bool:
        """Let a full open batch grow (up to ``batch_bytes``) while its partition is backed up.

        A batch is sealed at ``flush_bytes`` so that it goes out early; but when
        the partition already has a sealed batch waiting (its requests in flight
        are at the limit, five with idempotence), sealing another only queues
        it behind. Growing the open one instead sends the same records in fewer,
        larger requests once there is room, which is what holds back a single
        busy partition. Not for records the sticky partitioner places (they go
        to another partition's batch instead), nor when the batch is full of
        records rather than bytes. Returns whether the batch grew.
        """
        if (
            sticky
            or not p.queue
            or builder.max_bytes >= self._batch_bytes
            or builder.record_count >= builder.max_records
        ):
            return False
        builder.max_bytes = min(self._batch_bytes, 2 * builder.max_bytes)
        return True

    # ------------------------------------------------------------------ batches

    def builder(self, max_bytes: int) -> BatchBuilder:
        """A batch builder with the producer's compression, of at most ``max_bytes``."""
        return BatchBuilder(
            compression=self._compression,
            compression_level=self._level,
            max_bytes=max_bytes,
            max_records=self._batch_records,
        )

    def _open_batch(self, p: PartitionState) -> ProducerBatch:
        batch = ProducerBatch(
            p.topic,
            p.partition,
            self.builder(self._fill_bytes),
            trio.current_time(),
            p.take_ordinal(ORDINAL_STEP),
        )
        if self._stamps:
            batch.timestamps = []
        p.opened(batch)
        return batch

    def seal(self, p: PartitionState, *, wake: bool = True) -> None:
        """Move the partition's open batch to its send queue (full, lingered or flushed)."""
        batch = p.closed()
        if batch is None:
            return
        if batch.count == 0:
            return
        p.queue.append(batch)
        t = self._topics.get(p.topic)
        if t is not None and t.null_part is p:
            t.null_part = None
        if self._on_new_batch is not None:
            self._on_new_batch(p.topic, p.partition)
        if wake and p.broker is not None:
            p.broker.wake()


def _nothing() -> None:
    """No staging: nothing to drain."""


def column(values: Any) -> Any:
    """Arrow arrays become BinaryColumns; sequences and BinaryColumns pass through."""
    if isinstance(values, (BinaryColumn, list, tuple)):
        return values
    if hasattr(values, "buffers") and hasattr(values, "type"):
        return BinaryColumn.from_arrow(values)
    return values


__all__ = ["RECORD_OVERHEAD", "Accumulator", "column"]
