"""``AIOKafkaConsumer``: aiokafka's consumer on ``pykaf.aio``'s consumer and consumer group.

``start()`` opens a ``pykaf.aio`` client, consumer and admin client (one
connection pool). With ``group_id``, ``subscribe`` joins the group through
:func:`pykaf.aio.open_consumer_group`, whose handler reads each claimed
partition; ``assign`` (and ``subscribe`` without a group) reads partitions
with :meth:`pykaf.aio.Consumer.consume_partition`, and commits a group's
offsets through the admin client. Records wait in :mod:`._fetch` until
``getmany``/``getone``/``async for`` hand them out; every record handed out
of a group's partition is marked, so commits (``commit()``, or every
``auto_commit_interval_ms``) cover exactly what was handed out, as in aiokafka.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from pykaf import NEWEST, OLDEST, aio
from pykaf import errors as pykaf_errors
from pykaf.codec import Record
from pykaf.compat._lifetime import Held
from pykaf.compat.aiokafka import _config
from pykaf.compat.aiokafka._fetch import Part, Records
from pykaf.compat.aiokafka.abc import ConsumerRebalanceListener
from pykaf.compat.aiokafka.assignors import RoundRobinPartitionAssignor, assignor_names
from pykaf.compat.aiokafka.errors import (
    ConsumerStoppedError,
    IllegalOperation,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaConnectionError,
    NoOffsetForPartitionError,
    from_pykaf,
)
from pykaf.compat.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

log = logging.getLogger(__name__)

_RESETS = {"earliest": OLDEST, "latest": NEWEST}


async def _call(listener: Any, method: str, partitions: set[TopicPartition]) -> None:
    """Call a listener's method, awaiting it if it is a coroutine (aiokafka takes both kinds).

    An exception it raises is logged and the rebalance goes on, as in aiokafka.
    """
    try:
        result = getattr(listener, method)(partitions)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("User provided listener %s failed on %s", listener, method)


class _SubscriptionView:
    """``consumer._subscription``: aiokafka's private state that some frameworks read."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer

    @property
    def topics(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._consumer.subscription()


class _CoordinatorView:
    """``consumer._coordinator``: aiokafka's private coordinator, for its ``member_id``."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer

    @property
    def member_id(self) -> str:
        """The member id in the current generation ("" outside one)."""
        state = self._consumer._session
        return "" if state is None else state.session.member_id


async def _close(part: Part) -> None:
    """Stop a partition consumer's pump, then close it."""
    if part.task is not None:
        part.task.cancel()
        await asyncio.gather(part.task, return_exceptions=True)
    if part.reader is not None:
        await part.reader.aclose()


class _Session:
    """What the group handler shares with the consumer: one generation's session."""

    def __init__(self, session: aio.GroupSession) -> None:
        self.session = session
        self.revoking: asyncio.Task[None] | None = None


class AIOKafkaConsumer:
    """aiokafka's ``AIOKafkaConsumer`` on pykaf: ``AIOKafkaConsumer(*topics, **configs)``.

    Takes aiokafka's arguments (``bootstrap_servers``, ``group_id``,
    ``auto_offset_reset``, ``enable_auto_commit``, ``isolation_level``,
    ``key_deserializer``, ...; see ``docs/migrating.md``), with aiokafka's
    defaults (``auto_offset_reset="latest"``, ``isolation_level="read_uncommitted"``,
    the round-robin assignor).

    Raises:
        KafkaConfigurationError: an unsupported or invalid option.
        TypeError: an unknown keyword argument.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | list[str] = "localhost",
        group_id: str | None = None,
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        max_poll_records: int | None = None,
        partition_assignment_strategy: Any = (RoundRobinPartitionAssignor,),
        **configs: Any,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(auto_offset_reset)
        if max_poll_records is not None and (
            not isinstance(max_poll_records, int) or max_poll_records < 1
        ):
            raise ValueError("`max_poll_records` should be positive Integer")
        for name, fn in (
            ("key_deserializer", key_deserializer),
            ("value_deserializer", value_deserializer),
        ):
            if fn is not None and not callable(fn):
                raise KafkaConfigurationError(f"{name} must be callable, not {fn!r}")
        self._servers = _config.servers("bootstrap_servers", bootstrap_servers)
        self._group_id = group_id
        if group_id is None:
            for name in set(_config.GROUP) & set(configs):
                if configs[name] is not None and name != "max_poll_interval_ms":
                    raise KafkaConfigurationError(f"AIOKafkaConsumer: {name} needs a group_id")
        options = _config.translate(
            configs,
            (_config.CLIENT, _config.CONSUMER, _config.GROUP),
            frozenset(),
            "AIOKafkaConsumer",
        )
        options.setdefault("isolation_level", "read_uncommitted")
        # aiokafka's metadata requests let the broker create a subscribed topic.
        options["allow_auto_create_topics"] = True
        options["auto_offset_reset"] = auto_offset_reset
        self._isolation = options["isolation_level"]
        group_names = {option for option, _ in _config.GROUP.values()}
        self._group_options = {k: options.pop(k) for k in list(options) if k in group_names}
        self._group_options["auto_commit"] = bool(enable_auto_commit)
        self._group_options["auto_commit_interval"] = _config.seconds(
            "auto_commit_interval_ms", auto_commit_interval_ms
        )
        self._group_options["assignors"] = assignor_names(partition_assignment_strategy)
        self._options = options
        self._reset = auto_offset_reset
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._max_records = max_poll_records or 2**31
        self._topics = list(topics)
        self._held: Held[tuple[aio.Client, aio.Consumer, aio.Admin]] | None = None
        self._group_held: Held[aio.ConsumerGroup] | None = None
        self._group_task: asyncio.Task[None] | None = None
        self._listener: ConsumerRebalanceListener | None = None
        self._wanted_topics: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._manual: set[TopicPartition] = set()
        self._records = Records(self._fail)
        self._session: _Session | None = None
        self._assigning: asyncio.Task[None] | None = None
        self._closed = False
        self._stopping = False
        self._failure: BaseException | None = None
        # Assigned partitions (no group session) of a group_id with auto commit are
        # committed every auto_commit_interval_ms while reading, and on stop, as in aiokafka.
        self._committed_at = 0.0
        self._last_commit: dict[TopicPartition, int] = {}
        # aiokafka's private attributes that frameworks read (FastStream's log lines).
        self._subscription = _SubscriptionView(self)
        self._coordinator = _CoordinatorView(self)

    # -- lifetime -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster; subscribe to the topics given to the constructor.

        Raises:
            KafkaConnectionError: no bootstrap server could be reached.
        """
        if self._held is not None:
            raise IllegalStateError("AIOKafkaConsumer is already started")
        if self._closed:
            raise ConsumerStoppedError()
        held: Held[tuple[aio.Client, aio.Consumer, aio.Admin]] = Held()
        try:
            await held.open(self._open_all)
        except pykaf_errors.KafkaConnectionError as exc:
            raise KafkaConnectionError(f"Unable to bootstrap from {self._servers}: {exc}") from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc) from exc
        if self._topics:
            self.subscribe(self._topics)  # recorded only: the consumer is not held yet
        self._held = held
        if self._wanted_topics and self._group_id is None:
            # Assigned before start() returns, as aiokafka: a seek may follow at once.
            dropped = self._set_parts(await self._all_partitions())
            self._assigning = asyncio.get_running_loop().create_task(self._open_readers(dropped))
        elif self._wanted_topics or self._pattern is not None:
            self._restart_group()
        elif self._manual:
            self._restart_manual()

    @asynccontextmanager
    async def _open_all(self) -> AsyncIterator[tuple[aio.Client, aio.Consumer, aio.Admin]]:
        async with (
            aio.open_client(self._servers, **self._client_options()) as client,
            aio.open_consumer(client, **self._options) as consumer,
            aio.open_admin(client) as admin,
        ):
            yield client, consumer, admin

    def _client_options(self) -> dict[str, Any]:
        client_names = {option for option, _ in _config.CLIENT.values()}
        client_names |= {"sasl_mechanism", "allow_auto_create_topics"}
        return {k: v for k, v in self._options.items() if k in client_names}

    async def stop(self) -> None:
        """Leave the group (committing what was handed out, with auto commit) and close."""
        if self._closed:
            return
        if self._held is not None and self._held.alive:
            await self._auto_commit_assigned(force=True)
        self._closed = True
        self._stopping = True
        self._records.arrived.set()  # wakes getmany, which then raises ConsumerStoppedError
        await self._stop_group()
        await self._stop_manual()
        held, self._held = self._held, None
        if held is not None:
            try:
                await held.close()
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, ConsumerStoppedError) from exc

    async def __aenter__(self) -> AIOKafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _parts(self) -> tuple[aio.Client, aio.Consumer, aio.Admin]:
        if self._closed:
            raise ConsumerStoppedError()
        held = self._held
        if held is None or held.value is None:
            raise IllegalStateError("AIOKafkaConsumer is not started: await start() first")
        if held.error is not None:
            raise from_pykaf(held.error, ConsumerStoppedError) from held.error
        return held.value

    def _fail(self, error: BaseException) -> None:
        """Keep ``error`` for the next read to raise (the first one kept wins); wake the reads."""
        if self._failure is None:
            self._failure = error
        self._records.arrived.set()

    async def _pump(self, part: Part) -> None:
        """A partition consumer's pump: an error that ends it is raised by the next read."""
        try:
            await self._records.pump(part)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(exc)

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is not None:
            self._failure = None
            raise from_pykaf(failure, ConsumerStoppedError) from failure

    # -- subscription -----------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Consume ``topics`` (or every topic matching ``pattern``), replacing the subscription.

        With ``group_id`` the group assigns the partitions (``listener`` hears
        of each change); without, every partition of the topics is read.

        Raises:
            IllegalStateError: partitions were assigned with :meth:`assign`.
            ValueError: both or neither of ``topics`` and ``pattern``.
            TypeError: ``listener`` is not a ``ConsumerRebalanceListener``.
        """
        if self._closed:
            raise ConsumerStoppedError()
        if isinstance(topics, str):
            topics = [topics]
        names = set(topics)
        if bool(names) == (pattern is not None):
            raise ValueError("Subscription needs either topics or pattern, not both")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError("listener should be an instance of ConsumerRebalanceListener")
        if self._manual:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        if pattern is not None and self._group_id is None:
            raise ValueError("Pattern subscription requires a group_id")
        self._wanted_topics = names
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._listener = listener
        self._topics = []
        if self._held is not None:
            self._restart_group()

    def subscription(self) -> frozenset[str]:
        """The subscribed topics (those matching the pattern once the group assigned them)."""
        if self._pattern is not None:
            return frozenset(tp.topic for tp in self._records.parts)
        return frozenset(self._wanted_topics)

    def unsubscribe(self) -> None:
        """Stop consuming every topic and partition (a group member leaves its group)."""
        if self._closed:
            raise ConsumerStoppedError()
        self._wanted_topics = set()
        self._pattern = None
        self._manual = set()
        if self._held is not None:
            self._restart_group()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, with no group rebalancing; replaces the assignment.

        Each starts at the group's committed offset (with ``group_id``), else
        where ``auto_offset_reset`` says.

        Raises:
            IllegalStateError: the consumer is subscribed to topics.
        """
        if self._closed:
            raise ConsumerStoppedError()
        if self._wanted_topics or self._pattern is not None:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        wanted = {TopicPartition(tp[0], tp[1]) for tp in partitions}
        for tp in wanted:
            if not isinstance(tp.topic, str) or not isinstance(tp.partition, int):
                raise TypeError(f"not a TopicPartition: {tp!r}")
        self._manual = wanted
        if self._held is not None:
            self._restart_manual()

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions consumed now (a group member: those the group gave it)."""
        return frozenset(self._records.parts)

    def _restart_group(self) -> None:
        """Start (or restart) what the subscription asks for, in the background."""
        previous = self._group_task
        self._group_task = asyncio.get_running_loop().create_task(self._run_subscription(previous))

    async def _run_subscription(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await self._stop_group(previous)
        await self._stop_manual()
        if not self._wanted_topics and self._pattern is None:
            return
        if self._group_id is None:
            await self._open_readers(self._set_parts(await self._all_partitions()))
            return
        await self._run_group()

    async def _all_partitions(self) -> set[TopicPartition]:
        """Every partition of the subscribed topics (a subscription without a group)."""
        client = self._parts()[0]
        wanted = set()
        for topic in self._wanted_topics:
            for partition in await client.partitions(topic):
                wanted.add(TopicPartition(topic, partition))
        return wanted

    async def _run_group(self) -> None:
        client, _consumer, admin = self._parts()
        topics = sorted(self._wanted_topics)
        pattern = self._pattern
        while pattern is not None and not topics:
            # Matched here, against the topics there are now (pykaf's classic group takes
            # names; the broker matches patterns only for group_protocol="consumer").
            topics = sorted(t for t in await admin.list_topics() if pattern.match(t))
            if not topics:
                await asyncio.sleep(1.0)
        held: Held[aio.ConsumerGroup] = Held()
        self._group_held = held
        group_id = self._group_id
        assert group_id is not None
        try:
            group = await held.open(
                lambda: aio.open_consumer_group(
                    client, group_id, topics, **self._options, **self._group_options
                )
            )
            await group.consume(_Handler(self))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failure = exc
            self._records.arrived.set()

    async def _stop_group(self, task: asyncio.Task[None] | None = None) -> None:
        task = task or self._group_task
        held, self._group_held = self._group_held, None
        if held is not None:
            try:
                await held.close()
            except pykaf_errors.PykafError as exc:
                self._failure = exc
        if task is not None:
            if task is self._group_task:
                self._group_task = None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _restart_manual(self) -> None:
        """Read ``self._manual``: the assignment changes now, the readers follow in a task."""
        previous = self._assigning
        dropped = self._set_parts(set(self._manual))

        async def run() -> None:
            if previous is not None:
                previous.cancel()
                await asyncio.gather(previous, return_exceptions=True)
            await self._open_readers(dropped)

        self._assigning = asyncio.get_running_loop().create_task(run())

    def _set_parts(self, wanted: set[TopicPartition]) -> list[Part]:
        """Make the assigned partitions ``wanted``; return the entries of those dropped."""
        dropped = [self._records.drop(tp) for tp in set(self._records.parts) - wanted]
        for tp in wanted:
            self._records.add(tp)
        return [part for part in dropped if part is not None]

    async def _open_readers(self, dropped: list[Part]) -> None:
        """Close the dropped partitions' readers; open one for each partition without."""
        _client, consumer, admin = self._parts()
        for old in dropped:
            await _close(old)
        new = [tp for tp, part in self._records.parts.items() if part.reader is None]
        if not new:
            return
        committed: dict[TopicPartition, int] = {}
        if self._group_id is not None:
            found = await admin.list_group_offsets(self._group_id, [(t, p) for t, p in new])
            committed = {
                TopicPartition(t, p): om.offset for (t, p), om in found.items() if om.offset >= 0
            }
        for tp in new:
            part = self._records.parts.get(tp)
            if part is None:
                continue
            start = part.seek_to if part.seek_to is not None else committed.get(tp)
            if start is None:
                if self._reset == "none":
                    self._failure = NoOffsetForPartitionError(
                        f"{tp.topic}/{tp.partition}: no committed offset and "
                        "auto_offset_reset='none'"
                    )
                    self._records.arrived.set()
                    continue
                start = _RESETS[self._reset]
            part.seek_to = None
            part.reader = await consumer.consume_partition(tp.topic, tp.partition, start)
            if part.paused:
                part.reader.pause()
            part.task = asyncio.get_running_loop().create_task(self._pump(part))

    async def _stop_manual(self) -> None:
        task, self._assigning = self._assigning, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for tp in list(self._records.parts):
            part = self._records.parts[tp]
            if part.task is not None:  # a partition consumer's (a claim's goes with its group)
                self._records.drop(tp)
                await _close(part)

    # -- reading ----------------------------------------------------------------------

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records fetched for these partitions (none named: all), waiting up to ``timeout_ms``.

        Returns ``{}`` when none came in time.

        Raises:
            ConsumerStoppedError: the consumer is stopped.
            IllegalStateError: a partition named is not assigned.
        """
        self._parts()
        for tp in partitions:
            if TopicPartition(tp[0], tp[1]) not in self._records.parts:
                raise IllegalStateError(f"No current assignment for partition {tp}")
        limit = max_records or self._max_records
        await self._auto_commit_assigned()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        arrived = self._records.arrived
        while True:
            self._raise_failure()
            if self._closed:
                raise ConsumerStoppedError()
            taken = self._records.take(partitions, limit)
            if taken:
                return {tp: self._handed_out(tp, records) for tp, records in taken.items()}
            remaining = deadline - loop.time()
            if remaining <= 0:
                return {}
            await arrived.wait(remaining)

    def _handed_out(
        self, tp: TopicPartition, records: list[Record]
    ) -> list[ConsumerRecord[Any, Any]]:
        session = self._session
        part = self._records.parts.get(tp)
        if session is not None and part is not None:
            # The position, not the last offset + 1: it is past a transaction's
            # marker after the last record, as aiokafka's commits are.
            position = max(part.position(), records[-1].offset + 1)
            session.session.mark_offset(tp.topic, tp.partition, position)
        return [self._record(tp, record) for record in records]

    def _record(self, tp: TopicPartition, record: Record) -> ConsumerRecord[Any, Any]:
        key, value = record.key, record.value
        return ConsumerRecord(
            tp.topic,
            tp.partition,
            record.offset,
            record.timestamp,
            record.timestamp_type,
            key if self._key_deserializer is None else self._key_deserializer(key),
            value if self._value_deserializer is None else self._value_deserializer(value),
            None,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            tuple((name, data or b"") for name, data in record.headers),
        )

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[Any, Any]:
        """The next record of these partitions (none named: any), waiting as long as it takes.

        Raises:
            ConsumerStoppedError: the consumer is stopped.
        """
        while True:
            taken = await self.getmany(*partitions, timeout_ms=60_000, max_records=1)
            for records in taken.values():
                return records[0]

    def __aiter__(self) -> AIOKafkaConsumer:
        if self._closed:
            raise ConsumerStoppedError()
        return self

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    # -- positions --------------------------------------------------------------------

    def _part(self, tp: TopicPartition) -> Any:
        part = self._records.parts.get(TopicPartition(tp[0], tp[1]))
        if part is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return part

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Hand out ``partition``'s records from ``offset`` on.

        Raises:
            ValueError: a negative offset.
            IllegalStateError: the partition is not assigned.
        """
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError("Offset must be a positive integer")
        self._seek([partition], offset)

    def _seek(self, partitions: Iterable[TopicPartition], offset: int) -> None:
        for tp in partitions:
            part = self._part(tp)
            part.seek(offset)
            session = self._session
            if session is not None and offset >= 0:
                session.session.reset_offset(part.tp.topic, part.tp.partition, offset)

    async def _assigned(self) -> list[TopicPartition]:
        """The assigned partitions; a subscription waits for its first assignment, as aiokafka."""
        subscribed = bool(self._wanted_topics) or self._pattern is not None
        while subscribed and not self._records.parts:
            self._parts()
            self._raise_failure()
            await self._records.arrived.wait(0.1)
        return list(self._records.parts)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Continue these partitions (none named: all assigned) from their oldest record."""
        self._seek(partitions or await self._assigned(), OLDEST)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Continue these partitions (none named: all assigned) from their end."""
        self._seek(partitions or await self._assigned(), NEWEST)

    async def seek_to_committed(self, *partitions: TopicPartition) -> dict[TopicPartition, int]:
        """Continue these partitions (none: all) from the group's committed offsets."""
        targets = list(partitions) or await self._assigned()
        out = {}
        for tp in targets:
            offset = await self.committed(tp)
            if offset is not None:
                self.seek(tp, offset)
                out[TopicPartition(tp[0], tp[1])] = offset
        return out

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be handed out for ``partition``.

        Raises:
            IllegalStateError: the partition is not assigned.
            KafkaTimeoutError: not known within ``request_timeout_ms``.
        """
        self._parts()
        part = self._part(partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.get("request_timeout", 40.0)
        while True:
            position: int = part.position()
            if position >= 0:
                return position
            if loop.time() >= deadline:
                raise from_pykaf(pykaf_errors.KafkaTimeoutError(f"position of {partition}"))
            await asyncio.sleep(0.01)
            part = self._part(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the last fetch; None before one."""
        part = self._part(partition)
        hwm = -1 if part.reader is None else part.reader.high_water_mark
        return None if hwm < 0 else hwm

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """When the partition's last fetch answer came (ms since the epoch); None before one."""
        polled_at: int | None = self._part(partition).polled_at
        return polled_at

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The partition's last stable offset from the last fetch; None before one."""
        part = self._part(partition)
        lso = getattr(part.reader, "last_stable_offset", -1) if part.reader is not None else -1
        return None if lso < 0 else lso

    def pause(self, *partitions: TopicPartition) -> None:
        """Hand out no records of these partitions until :meth:`resume`."""
        for tp in partitions:
            part = self._part(tp)
            part.paused = True
            if part.reader is not None and hasattr(part.reader, "pause"):
                part.reader.pause()

    def resume(self, *partitions: TopicPartition) -> None:
        """Hand out records of paused partitions again."""
        for tp in partitions:
            part = self._part(tp)
            part.paused = False
            if part.reader is not None and hasattr(part.reader, "resume"):
                part.reader.resume()
        self._records.arrived.set()

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused with :meth:`pause`."""
        return frozenset(tp for tp, part in self._records.parts.items() if part.paused)

    # -- commits ----------------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
    ) -> None:
        """Commit offsets: by default those after every record handed out so far.

        Raises:
            IllegalOperation: no ``group_id``.
            IllegalStateError: a partition named is not assigned.
            CommitFailedError: the coordinator refused.
        """
        if self._group_id is None:
            raise IllegalOperation("Requires group_id")
        _client, _consumer, admin = self._parts()
        plain: dict[TopicPartition, tuple[int, str]] = {}
        if offsets is None:
            for tp, part in self._records.parts.items():
                position = part.position()
                if position >= 0:
                    plain[tp] = (position, "")
        else:
            for tp, value in offsets.items():
                offset, metadata = (value, "") if isinstance(value, int) else (value[0], value[1])
                if not isinstance(offset, int) or offset < 0:
                    raise ValueError(f"bad offset for {tp}: {value!r}")
                plain[TopicPartition(tp[0], tp[1])] = (offset, metadata or "")
        session = self._session
        try:
            if session is not None:
                for tp, (offset, metadata) in plain.items():
                    self._part(tp)
                    session.session.reset_offset(tp.topic, tp.partition, offset, metadata or None)
                await session.session.commit()
            elif plain:
                await admin.alter_group_offsets(
                    self._group_id,
                    {(tp.topic, tp.partition): offset for tp, (offset, _) in plain.items()},
                )
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ConsumerStoppedError) from exc

    async def _auto_commit_assigned(self, force: bool = False) -> None:
        """Commit assigned partitions' positions (interval due, or ``force``), with auto commit."""
        if (
            self._session is not None
            or self._group_id is None
            or not self._group_options["auto_commit"]
            or not self._manual
        ):
            return
        now = asyncio.get_running_loop().time()
        if not force and now - self._committed_at < self._group_options["auto_commit_interval"]:
            return
        self._committed_at = now
        changed = {}
        for tp, part in self._records.parts.items():
            position = part.position() if part.reader is not None else -1
            if position >= 0 and self._last_commit.get(tp) != position:
                changed[tp] = position
        if changed:
            await self.commit(changed)
            self._last_commit.update(changed)

    async def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset of ``partition`` (None: none committed).

        Raises:
            IllegalOperation: no ``group_id``.
        """
        if self._group_id is None:
            raise IllegalOperation("Requires group_id")
        _client, _consumer, admin = self._parts()
        tp = (partition[0], partition[1])
        try:
            found = await admin.list_group_offsets(self._group_id, [tp])
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ConsumerStoppedError) from exc
        om = found.get(tp)
        return None if om is None or om.offset < 0 else int(om.offset)

    # -- offsets and metadata ---------------------------------------------------------

    async def _list_offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        _client, _consumer, admin = self._parts()
        try:
            found = await admin.list_offsets(
                {(tp[0], tp[1]): spec for tp, spec in specs.items()},
                isolation_level=self._isolation,
            )
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, ConsumerStoppedError) from exc
        return {TopicPartition(t, p): offset for (t, p), offset in found.items()}

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Each partition's oldest offset."""
        return await self._list_offsets(dict.fromkeys(partitions, OLDEST))

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end offset (the last stable offset under read_committed)."""
        return await self._list_offsets(dict.fromkeys(partitions, NEWEST))

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp (ms), with that record's timestamp.

        The timestamp is read from the record itself (one fetch per partition
        found). None for a partition with no record that late.

        Raises:
            ValueError: a negative timestamp.
        """
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise ValueError(
                    f"The target time for partition {tp} is {ts}. "
                    "The target time cannot be negative."
                )
        found = await self._list_offsets(timestamps)
        out: dict[TopicPartition, OffsetAndTimestamp | None] = dict.fromkeys(found)
        wanted = {tp: offset for tp, offset in found.items() if offset >= 0}
        if not wanted:
            return out
        client = self._parts()[0]
        # A consumer of its own: the partitions may be assigned to this one.
        async with aio.open_consumer(client, isolation_level=self._isolation) as reader:
            for tp, offset in wanted.items():
                pc = await reader.consume_partition(tp.topic, tp.partition, offset)
                record = await pc.__anext__()
                out[tp] = OffsetAndTimestamp(record.offset, record.timestamp)
        return out

    async def topics(self) -> set[str]:
        """The names of the cluster's topics."""
        _client, _consumer, admin = self._parts()
        return set(await admin.list_topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partitions of ``topic`` that this consumer has seen (None: none).

        aiokafka answers from its metadata cache; this answers from the
        partitions assigned, and :meth:`topics` / the admin client for the rest.
        """
        found = {tp.partition for tp in self._records.parts if tp.topic == topic}
        return found or None

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "started" if self._held else "not started"
        return f"<pykaf.compat.aiokafka.AIOKafkaConsumer group_id={self._group_id!r} {state}>"


class _Handler:
    """The group handler: each claim pumps its partition into the consumer's records."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer

    async def setup(self, session: aio.GroupSession) -> None:
        consumer = self._consumer
        consumer._session = _Session(session)
        assigned = {
            TopicPartition(topic, partition)
            for topic, partitions in session.claims.items()
            for partition in partitions
        }
        for tp in assigned:
            consumer._records.add(tp)
        listener = consumer._listener
        if listener is not None:
            await _call(listener, "on_partitions_assigned", set(assigned))

    async def consume_claim(self, session: aio.GroupSession, claim: aio.Claim) -> None:
        consumer = self._consumer
        tp = TopicPartition(claim.topic, claim.partition)
        part = consumer._records.add(tp)
        part.reader = claim
        try:
            await consumer._records.pump(part, lambda: claim.revoked)
        finally:
            part.reader = None
        await self._revoke_once()

    async def _revoke_once(self) -> None:
        """Call the listener's ``on_partitions_revoked`` once per generation, marks still live.

        Every claim of the generation ends together (eager rebalancing); the
        first to end starts the call and each waits for it, so the group
        commits and forgets the marks only after the listener (which may
        commit) has run. Not called when the consumer stops, as aiokafka.
        """
        consumer = self._consumer
        state = consumer._session
        listener = consumer._listener
        if state is None or listener is None or consumer._stopping:
            return
        if state.revoking is None:
            revoked = set(consumer._records.parts)
            state.revoking = asyncio.get_running_loop().create_task(
                _call(listener, "on_partitions_revoked", revoked)
            )
        await asyncio.shield(state.revoking)

    async def cleanup(self, session: aio.GroupSession) -> None:
        consumer = self._consumer
        for tp in list(consumer._records.parts):
            consumer._records.drop(tp)
        consumer._session = None


__all__ = ["AIOKafkaConsumer"]
