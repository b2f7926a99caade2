"""A partition consumer: the records of one partition, in order, as you read them.

This is the reader's side; the fetcher's side is the partition's
:class:`~pykaf._consumer.fetch_cursor.FetchCursor` (the fetch position, the
watermarks, the leader epochs, paused or not), which the fetcher and the
consumer move and the reader only reads. The broker's fetcher task hands the
cursor each Fetch answer's record set as bytes (a
:class:`~pykaf._consumer.fetched.Fetched`), through a memory channel of
``partition_buffer`` answers. The reader decodes an answer one
piece (about ``max_partition_fetch_bytes``) at a time, applies the isolation
level (:mod:`pykaf._consumer.read_committed`) and hands out its records: a
list per piece, never one record per hop. While the channel is full the
fetcher leaves the partition out of its requests, so a slow reader holds back
only its own partition; while the consumer's ``fetch_buffer_bytes`` are held,
no partition is fetched.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, overload

import trio

from pykaf import errors
from pykaf._consumer.fetch_cursor import Configured, FetchCursor, Fetching
from pykaf._net.metrics import BatchEvent, report_batch
from pykaf.codec import (
    ColumnBatch,
    Record,
    RecordBatch,
    RecordCursor,
    decode_batches,
    decode_columns,
)
from pykaf.errors import ConsumerError

if TYPE_CHECKING:
    from pykaf._cluster.router import Route
    from pykaf._consumer.fetched import Fetched
    from pykaf._consumer.read_committed import FilterResult, TransactionFilter

_OFFSET = attrgetter("offset")


def lag_of(high_water_mark: int, position: int) -> int:
    """Records between ``position`` and the high watermark (0 when either is unknown, -1)."""
    if high_water_mark < 0 or position < 0:
        return 0
    return max(0, high_water_mark - position)


class PartitionConsumer(RecordCursor):
    """Reads one partition; get one from ``Consumer.consume_partition``.

    ``async for record in pc`` yields records one by one; ``await
    pc.next_batch()`` returns the next list of records as decoded (at most
    about ``max_partition_fetch_bytes`` of a fetch answer).

    Attributes:
        topic, partition: what it reads.
        cursor: its fetch state (:class:`~pykaf._consumer.fetch_cursor.FetchCursor`),
            which the fetcher and the consumer move; read here through the
            properties below.
        records_fetched: records decoded and handed to the reader so far.
    """

    def __init__(
        self,
        consumer: Configured,
        topic: str,
        partition: int,
        start: int,
        tx_filter: TransactionFilter,
        *,
        on_close: Callable[[PartitionConsumer], object] | None = None,
    ) -> None:
        self.consumer = consumer
        self._on_close = on_close
        self.topic = topic
        self.partition = partition
        self.records_fetched = 0
        #: the fetcher's side: where the partition is fetched from, and what came back
        self.cursor = FetchCursor(consumer, topic, partition, start, tx_filter, self)
        # The reader's side.
        self._answer: Fetched | None = None  # the answer being decoded, piece by piece
        self._local: list[Record] = []
        self._local_end = -1  # the offset after ``_local``'s piece
        self._next = 0
        self._position = -1  # the offset of the next record to hand out

    # -- the cursor's state, read ---------------------------------------------------

    @property
    def high_water_mark(self) -> int:
        """The partition's high watermark from the last fetch (-1 before one)."""
        return self.cursor.high_water_mark

    @property
    def last_stable_offset(self) -> int:
        """Its last stable offset from the last fetch (-1 before one)."""
        return self.cursor.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        """Its log start offset from the last fetch (-1 before one)."""
        return self.cursor.log_start_offset

    @property
    def bytes_fetched(self) -> int:
        """Record-set bytes fetched into the buffer so far."""
        return self.cursor.bytes_fetched

    @property
    def buffered_bytes(self) -> int:
        """Record-set bytes fetched and not yet read."""
        return self.cursor.buffered_bytes

    @property
    def paused(self) -> bool:
        """Whether fetching is paused (by :meth:`pause`, or after a fatal error)."""
        return self.cursor.paused

    @property
    def fetch_offset(self) -> int:
        """The next offset to fetch (-1 until the start is resolved)."""
        return self.cursor.fetch_offset

    @property
    def route(self) -> Route[FetchCursor]:
        """Where the partition is led (its leader epoch, a replica named by the leader)."""
        return self.cursor.route

    @property
    def fetcher(self) -> Fetching | None:
        """The broker fetcher the partition is attached to (None while detached)."""
        return self.cursor.fetcher

    # -- reading ----------------------------------------------------------------

    # ``async for`` and ``next_nowait()`` come from RecordCursor (the codec's):
    # the per-record path is an index and a list, nothing else (``position`` is
    # worked out from them when asked for); the compiled cursor hands a waiting
    # record out without a coroutine per record. When the list is read out, it
    # awaits this:
    async def _refill_next(self) -> Record:
        # (another __anext__ awaited first may have filled the list already)
        if not await self.decoded():
            raise StopAsyncIteration
        i = self._next
        self._next = i + 1
        return self._local[i]

    def take_decoded(self) -> list[Record]:
        """Every record fetched and not handed out yet, handed out now; [] if none (no wait).

        :meth:`next_nowait` for a whole list: a reader outside trio
        (``pykaf.aio``) keeps its own index into it and crosses into trio
        only to wait for a fetch. :attr:`position` moves past the list.
        """
        i = self._next
        local = self._local
        if i >= len(local):
            if not self._decode_buffered():
                return []
            i, local = 0, self._local
        self._next = len(local)
        return local[i:] if i else local

    async def decoded(self) -> bool:
        """Wait until decoded records wait to be handed out; hands none out itself.

        For a reader in another thread (``pykaf.sync``): the records are
        decoded here, in trio, and the reader takes them with
        :meth:`next_nowait` and :meth:`take_nowait` (which never decode),
        while this task leaves the list alone until the reader has read it
        out. :attr:`position` stays the one position of the partition.

        Returns:
            True once records wait; False when the partition consumer is closed.
        """
        return self._next < len(self._local) or await self._open_after(self._fill)

    async def fetched(self) -> bool:
        """Wait until records wait, decoded or not; decodes nothing (:meth:`take_decoded` does).

        For a reader outside trio (``pykaf.aio``): trio only waits for the
        fetch answer, and the reader decodes it a piece at a time as it reads
        (:meth:`take_decoded`), as a trio reader does. Decoding here instead
        would decode every waiting partition's next piece at once, in trio's
        step, before any of their readers comes to it: their records would all
        be held in memory together, where readers in one thread hold about one
        piece's at a time.

        Returns:
            True once an answer (or a decoded list) waits; False when the
            partition consumer is closed.
        """
        if self._answer is not None or self._next < len(self._local):
            return True
        return await self._open_after(self._receive_answer)

    @staticmethod
    async def _open_after(wait: Callable[[], Awaitable[object]]) -> bool:
        """``await wait()``; False if the partition consumer closed meanwhile, else True."""
        try:
            await wait()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return False
        return True

    def take_nowait(self, limit: int) -> list[Record]:
        """Up to ``limit`` of the records decoded and waiting, handed out now (no wait, no decode).

        :meth:`next_nowait` for a list: ``[]`` when none waits. A list read
        out whole is the caller's; :attr:`position` moves past what it holds.
        """
        i, local = self._next, self._local
        n = len(local)
        if limit < n - i:
            self._next = i + limit
            return local[i : i + limit]
        if i >= n:
            return []
        # Read out: the list leaves the cursor (the position first, so that it never goes back).
        self._position = self._local_end
        self._local = []
        self._next = 0
        return local[i:] if i else local

    @overload
    async def next_batch(self, *, columnar: Literal[False] = False) -> list[Record]: ...
    @overload
    async def next_batch(self, *, columnar: Literal[True]) -> ColumnBatch: ...
    @overload
    async def next_batch(self, *, columnar: bool) -> list[Record] | ColumnBatch: ...
    async def next_batch(self, *, columnar: bool = False) -> list[Record] | ColumnBatch:
        """The next records: one decoded piece of a fetch answer (what is left of it).

        With ``columnar=True`` the piece comes as a :class:`~pykaf.ColumnBatch`
        (decoded straight into columns, no ``Record`` per record) whose
        ``next_offset`` is the position after it. Records, control records and
        aborted transactions are handed out and skipped as on the row path,
        and the two may be mixed: records the per-record path left in a list
        come first, as columns.

        Raises:
            ClosedError: the partition consumer was closed.
        """
        if columnar:
            return await self._next_columns()
        if self._next >= len(self._local):
            try:
                await self._fill()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                raise errors.ClosedError(f"{self.topic}/{self.partition} is closed") from None
        out = self._local[self._next :] if self._next else self._local
        self._local, self._next = [], 0
        self._position = self._local_end
        return out

    async def _fill(self) -> None:
        while not self._decode_buffered():
            await self._receive_answer()

    def _decode_buffered(self) -> bool:
        """Decode the current answer's next pieces, until one has records; no wait.

        True when the local list holds records again; False when the current
        answer is read out and only a receive (a wait) can give more.
        """
        if self._local:
            self._position = self._local_end  # the previous list was read out
            self._local, self._next = [], 0
        while (answer := self._answer) is not None:
            records, end = self._decode_piece(answer)
            if records:
                self._local, self._next, self._local_end = records, 0, end
                return True
            if end >= 0:
                self._position = end
        return False

    async def _next_columns(self) -> ColumnBatch:
        local, i = self._local, self._next
        if local:
            self._local, self._next = [], 0
            self._position = self._local_end
            if i < len(local):  # what the per-record path left of its list
                return ColumnBatch.from_records(
                    local[i:],
                    topic=self.topic,
                    partition=self.partition,
                    next_offset=self._position,
                )
        while True:
            answer = self._answer
            if answer is None:
                try:
                    answer = await self._receive_answer()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    raise errors.ClosedError(f"{self.topic}/{self.partition} is closed") from None
            columns, end = self._decode_columns(answer)
            if end >= 0:
                self._position = end
            if columns is not None and len(columns):
                columns.next_offset = end
                return columns

    async def _receive_answer(self) -> Fetched:
        """Wait for the next fetch answer of the current generation; it becomes ``_answer``."""
        answer = await self.cursor.receive()
        self._answer = answer
        return answer

    def _decode_piece(self, answer: Fetched) -> tuple[list[Record], int]:
        """Decode and filter the next piece of ``answer``: its records and the offset after them.

        The offset is -1 when the piece was corrupt: the partition reported
        the error, dropped its buffer and paused at its position.
        """
        i = answer.piece
        data = self._next_piece(answer)
        if data is None:
            return [], answer.end
        try:
            batches = decode_batches(
                data,
                check_crc=self.consumer.config.check_crcs,
                topic=self.topic,
                partition=self.partition,
            )
        except errors.CorruptRecordError as exc:
            self._corrupt(exc)
            return [], -1
        lso = answer.last_stable_offset
        # The answer's aborted transactions join the filter once, with its first piece.
        result = self.cursor.filter.filter(
            batches, answer.aborted if i == 0 else (), lso, answer.start
        )
        self.records_fetched += len(result.records)
        source = answer.source
        if source is not None:
            source.aborted_records += result.skipped_aborted
            if source.batch_hook is not None:
                limit = lso if self.cursor.filter.read_committed and lso >= 0 else -1
                self._report_batches(source.node_id, source.batch_hook, batches, result, limit)
        return result.records, self._piece_end(answer, result.next_offset)

    def _next_piece(self, answer: Fetched) -> memoryview | None:
        """The bytes of ``answer``'s next piece, or None once it is read out (and released)."""
        if answer.exhausted:
            self._done_with(answer)
            return None
        i = answer.piece
        stop = answer.cuts[i]
        data = memoryview(answer.data)[answer.done : stop]
        answer.piece, answer.done = i + 1, stop
        return data

    def _decode_columns(self, answer: Fetched) -> tuple[ColumnBatch | None, int]:
        """:meth:`_decode_piece` into columns: the kept records and the offset after them."""
        first = answer.piece == 0
        data = self._next_piece(answer)
        if data is None:
            return None, answer.end
        lso = answer.last_stable_offset
        select = self.cursor.filter.selector(answer.aborted if first else (), lso, answer.start)
        try:
            columns, batches, kept, above = decode_columns(
                data,
                check_crc=self.consumer.config.check_crcs,
                topic=self.topic,
                partition=self.partition,
                select=select,
            )
        except errors.CorruptRecordError as exc:
            self._corrupt(exc)
            return None, -1
        self.records_fetched += len(columns)
        source = answer.source
        if source is not None:
            source.aborted_records += select.skipped_aborted
            if source.batch_hook is not None:
                limit = lso if self.cursor.filter.read_committed and lso >= 0 else -1
                for batch, count, later in zip(batches, kept, above, strict=True):
                    if 0 <= limit <= batch.base_offset:
                        break
                    self._report_batch(source.node_id, source.batch_hook, batch, count, later)
        return columns, self._piece_end(answer, select.next_offset)

    def _piece_end(self, answer: Fetched, next_offset: int) -> int:
        """The offset after the piece just decoded; the answer is released once read out."""
        if answer.exhausted:
            self._done_with(answer)
            return answer.end
        return max(answer.start, next_offset)

    def _done_with(self, answer: Fetched) -> None:
        self._answer = None
        self._release(answer)

    def _corrupt(self, error: errors.CorruptRecordError) -> None:
        """A corrupt piece: reported; the buffer is dropped, fetching paused at the position."""
        self.cursor.corrupt(error)

    def _release(self, answer: Fetched) -> None:
        """``answer`` was read or dropped: its bytes leave the budget."""
        self.cursor.released(answer)

    def _report_batches(
        self,
        node_id: int,
        hook: Callable[[BatchEvent], object],
        batches: Sequence[RecordBatch],
        result: FilterResult,
        limit: int,
    ) -> None:
        """A BatchEvent for each batch the filter went through, with what it handed out of it.

        Batches at or above ``limit`` (the last stable offset, read_committed)
        were not gone through: the next fetch brings them again. Of the others,
        each record was handed out (it is in the result), waits beyond the
        limit, or was dropped (before the fetch position, aborted, a marker).
        """
        handed = result.records
        for batch in batches:
            base = batch.base_offset
            if 0 <= limit <= base:
                break
            last = base + batch.last_offset_delta
            first = bisect_left(handed, base, key=_OFFSET)
            count = bisect_right(handed, last, lo=first, key=_OFFSET) - first
            records = batch.records
            later = 0
            if 0 <= limit <= last:
                later = len(records) - bisect_left(records, limit, key=_OFFSET)
            self._report_batch(node_id, hook, batch, count, later)

    def _report_batch(
        self,
        node_id: int,
        hook: Callable[[BatchEvent], object],
        batch: RecordBatch,
        count: int,
        later: int,
    ) -> None:
        """A batch's BatchEvent: ``count`` records handed out, ``later`` left for a later fetch."""
        event = BatchEvent(
            kind="fetch",
            topic=self.topic,
            partition=self.partition,
            node_id=node_id,
            records=count,
            bytes=batch.size,
            uncompressed_bytes=None,
            compression=batch.compression,
            base_offset=batch.base_offset,
            error=None,
            seconds=None,
            retries=0,
            dropped=batch.record_count - count - later,
        )
        report_batch(hook, event)

    def errors(self) -> trio.MemoryReceiveChannel[ConsumerError]:
        """Errors of this partition (offset out of range with no reset, oversized batches...)."""
        return self.cursor.errors

    @property
    def position(self) -> int:
        """The offset of the next record to be handed out (-1 before the start is known).

        It moves past control records and aborted transactions once the
        records before them have been read.
        """
        local, i = self._local, self._next
        if local and i:
            return local[i - 1].offset + 1 if i < len(local) else self._local_end
        return self._position

    @property
    def position_epoch(self) -> int:
        """The leader epoch of the record before :attr:`position` (-1 when unknown).

        Store it with the position: ``consume_partition(topic, partition,
        position, leader_epoch=position_epoch)`` resumes there and first
        checks that the log was not truncated below it meanwhile.
        """
        return self.epoch_at(self.position - 1)

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the fetched batch holding ``offset`` (-1 when unknown).

        Known for offsets fetched since the last seek (or for the offset before
        a start given with its epoch); the epoch of an offset past what was
        fetched is the last one seen, as Kafka's consumer assumes.
        """
        return self.cursor.epoch_at(offset)

    @property
    def lag(self) -> int:
        """High watermark minus position (0 when unknown)."""
        return lag_of(self.high_water_mark, self.position)

    # -- control ----------------------------------------------------------------

    def pause(self) -> None:
        """Stop fetching this partition (what is already buffered can still be read)."""
        self.cursor.pause()

    def resume(self) -> None:
        """Fetch this partition again."""
        self.cursor.resume()

    def seek(self, offset: int) -> None:
        """Continue from ``offset`` (an offset, ``OLDEST`` or ``NEWEST``); drops the buffer."""
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < -2:
            raise ValueError(f"not an offset: {offset!r}")
        self.cursor.seek(offset)

    async def aclose(self) -> None:
        """Stop consuming this partition; what it buffered is dropped."""
        if self._on_close is not None:
            self._on_close(self)
        self.cursor.close()  # detached (its partition task ends), the iteration ends
        self.discard_buffer()  # its bytes go back to the other partitions

    # -- what the cursor does to the reader ----------------------------------------

    def continue_at(self, offset: int) -> None:
        """Hand out records from ``offset`` on (the cursor restarts its fetches there)."""
        self._position = offset

    def discard_buffer(self) -> int:
        """Drop what was fetched but not read (a group revoking the partition); the position."""
        self._position = self.position
        self._local, self._next = [], 0
        if self._answer is not None:
            self._release(self._answer)
            self._answer = None
        self.cursor.drop_answers()
        return self._position

    def __repr__(self) -> str:
        return (
            f"<PartitionConsumer {self.topic}/{self.partition} fetch_offset={self.fetch_offset} "
            f"hwm={self.high_water_mark}>"
        )


__all__ = ["ConsumerError", "PartitionConsumer", "lag_of"]
