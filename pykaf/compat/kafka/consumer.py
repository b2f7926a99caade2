"""``KafkaConsumer``: kafka-python's consumer on :class:`pykaf.sync.Consumer` / ``ConsumerGroup``.

With ``group_id``, :meth:`KafkaConsumer.subscribe` joins the group through
:class:`pykaf.sync.ConsumerGroup` (rebalances, commits); :meth:`assign`
reads chosen partitions through :class:`pykaf.sync.Consumer` and commits
the group's offsets through the admin client. Without ``group_id``,
``subscribe`` reads every partition of the topics, with no commits, as
kafka-python does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pykaf import NEWEST, OLDEST, GroupMetadata, GroupStatistics
from pykaf import errors as pykaf_errors
from pykaf._config import ClientConfig
from pykaf.codec import Record
from pykaf.compat.kafka import _config
from pykaf.compat.kafka._shared import AdminLink, serializer_function
from pykaf.compat.kafka.errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    NoOffsetForPartitionError,
    UnknownTopicOrPartitionError,
    from_pykaf,
)
from pykaf.compat.kafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from pykaf.sync import Consumer as SyncConsumer
from pykaf.sync import ConsumerGroup as SyncGroup

_RESETS = {"earliest": OLDEST, "smallest": OLDEST, "latest": NEWEST, "largest": NEWEST}


def _headers_size(headers: list[tuple[str, bytes | None]]) -> int:
    if not headers:
        return -1
    return sum(
        len(name.encode()) + (len(value) if value is not None else 0) for name, value in headers
    )


class KafkaConsumer:
    """kafka-python's ``KafkaConsumer`` on pykaf: ``KafkaConsumer(*topics, **configs)``.

    Takes kafka-python's configuration names (``bootstrap_servers``,
    ``group_id``, ``auto_offset_reset``, ``enable_auto_commit``,
    ``value_deserializer``, ``consumer_timeout_ms``, ...; see
    ``docs/migrating.md``); a name pykaf does not support raises
    :class:`KafkaConfigurationError` naming it. kafka-python's defaults are
    kept where they differ from pykaf's: ``auto_offset_reset="latest"``,
    ``isolation_level="read_uncommitted"``.

    Iterating yields :class:`ConsumerRecord` and stops after
    ``consumer_timeout_ms`` without a record (default: never).

    Raises:
        KafkaConfigurationError: an unknown, unsupported or invalid option.
        NoBrokersAvailable: no bootstrap server could be reached.
    """

    def __init__(self, *topics: str, **configs: Any) -> None:
        self._key_deserializer = serializer_function(
            "key_deserializer", configs.get("key_deserializer"), "deserialize"
        )
        self._value_deserializer = serializer_function(
            "value_deserializer", configs.get("value_deserializer"), "deserialize"
        )
        self._servers = _config.servers(configs.get("bootstrap_servers", "localhost:9092"))
        self._group_id: str | None = configs.get("group_id")
        timeout = configs.get("consumer_timeout_ms", float("inf"))
        self._iter_timeout = (
            None if timeout == float("inf") else _config.seconds("consumer_timeout_ms", timeout)
        )
        self._max_records = _config.count("max_poll_records", configs.get("max_poll_records", 500))
        if self._max_records < 1:
            raise KafkaConfigurationError(f"max_poll_records must be >= 1, not {self._max_records}")
        own = frozenset(
            {
                "bootstrap_servers",
                "group_id",
                "key_deserializer",
                "value_deserializer",
                "consumer_timeout_ms",
                "max_poll_records",
            }
        )
        group_names = frozenset(_config.GROUP)
        self._names = _config.user_names(configs, (_config.CLIENT, _config.CONSUMER, _config.GROUP))
        if self._group_id is None:
            for name in group_names & set(configs):
                if name not in ("enable_auto_commit", "auto_commit_interval_ms"):
                    raise KafkaConfigurationError(f"KafkaConsumer: {name} needs a group_id")
        self._client_options = _config.translate(
            configs,
            (_config.CLIENT,),
            own | frozenset(_config.CONSUMER) | group_names,
            "KafkaConsumer",
        )
        self._options = _config.translate(
            configs, (_config.CLIENT, _config.CONSUMER), own | group_names, "KafkaConsumer"
        )
        self._options.setdefault("isolation_level", "read_uncommitted")
        # kafka-python's default: metadata requests let the broker create the topics read
        self._options.setdefault("allow_auto_create_topics", True)
        reset = self._options.get("auto_offset_reset", "latest")
        if reset not in (*_RESETS, "none"):
            raise KafkaConfigurationError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', not {reset!r}"
            )
        self._options["auto_offset_reset"] = {"smallest": "earliest", "largest": "latest"}.get(
            reset, reset
        )
        self._group_options = _config.translate(
            {k: v for k, v in configs.items() if k in group_names},
            (_config.GROUP,),
            frozenset(),
            "KafkaConsumer",
        )
        self._admin = AdminLink(self._servers, self._client_options, "KafkaConsumer", self._names)
        self._admin.get()  # connects now: an unreachable cluster is NoBrokersAvailable here
        self._reader: SyncConsumer | SyncGroup | None = None
        self._subscription: set[str] = set()
        self._assigned: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._closed = False
        # Assigned partitions (no group rebalancing) are committed here with
        # group_id and enable_auto_commit, as kafka-python does: every
        # auto_commit_interval_ms while polling, and on close.
        self._commit_every = float(self._group_options.get("auto_commit_interval", 5.0))
        self._committed_at = time.monotonic()
        self._last_commit: dict[tuple[str, int], int] = {}
        if topics:
            self.subscribe(list(topics))

    # -- subscription and assignment ------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("KafkaConsumer is closed")

    def _replace(self, reader: SyncConsumer | SyncGroup | None) -> None:
        old, self._reader = self._reader, reader
        self._paused.clear()
        if old is not None:
            old.close()

    def _new(self, make: Callable[[], SyncConsumer | SyncGroup]) -> SyncConsumer | SyncGroup:
        try:
            return make()
        except pykaf_errors.KafkaConnectionError as exc:
            raise NoBrokersAvailable(str(exc)) from exc
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Consume these topics (or those matching ``pattern`` now): replaces the subscription.

        With ``group_id`` the group assigns the partitions; without, every
        partition is read. A ``pattern`` is matched against the topics that
        exist when this is called (topics made later are not added).

        Raises:
            IllegalStateError: partitions are assigned manually (``assign``).
            KafkaConfigurationError: both or neither of ``topics`` and ``pattern``;
                a ``listener`` (rebalance listeners are not supported).
        """
        self._check_open()
        if listener is not None:
            raise KafkaConfigurationError(
                "subscribe(listener=...) is not supported: pykaf's group commits on revoke itself"
            )
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        if bool(names) == (pattern is not None):
            raise KafkaConfigurationError("subscribe needs topics or a pattern, not both")
        if self._assigned and self._reader is not None and not self._subscription:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        if pattern is not None:
            regex = re.compile(pattern)
            names = sorted(t for t in self._admin.call("list_topics") if regex.fullmatch(t))
            if not names:
                raise KafkaConfigurationError(f"no topic matches {pattern!r}")
        if self._group_id is None and self._reset_start() is None:
            raise NoOffsetForPartitionError(
                f"{', '.join(names)}: no committed offset (no group_id) "
                "and auto_offset_reset='none'"
            )
        self._subscription = set(names)
        if self._group_id is not None:
            group_id = self._group_id
            options = {**self._options, **self._group_options}
            self._replace(None)
            self._replace(self._new(lambda: SyncGroup(self._servers, group_id, names, **options)))
            return
        descriptions = self._admin.call("describe_topics", names)
        start = self._reset_start()
        assert start is not None  # refused above
        wanted = [
            (name, p.partition, start) for name in names for p in descriptions[name].partitions
        ]
        self._start_consumer(wanted)
        self._assigned = {TopicPartition(t, p) for t, p, _ in wanted}

    def _reset_start(self) -> int | None:
        """Where a partition with no committed offset starts; None for reset 'none'."""
        reset = self._options["auto_offset_reset"]
        return None if reset == "none" else _RESETS[reset]

    def _start_consumer(self, wanted: list[tuple[str, int, int]]) -> None:
        reader = self._reader
        if not isinstance(reader, SyncConsumer):
            options = self._options
            reader = self._new(lambda: SyncConsumer(self._servers, **options))
            assert isinstance(reader, SyncConsumer)
            self._replace(reader)
        try:
            reader.assign(wanted)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc

    def subscription(self) -> set[str] | None:
        """The subscribed topics; None when not subscribed."""
        return set(self._subscription) if self._subscription else None

    def unsubscribe(self) -> None:
        """Stop consuming every topic and partition (a group member leaves its group)."""
        self._check_open()
        self._subscription = set()
        self._assigned = set()
        self._replace(None)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group rebalancing); replaces the assignment.

        Each starts at the group's committed offset (with ``group_id``), else
        where ``auto_offset_reset`` says.

        Raises:
            IllegalStateError: the consumer is subscribed to topics.
        """
        self._check_open()
        if self._subscription:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        wanted = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        if not wanted:
            self.unsubscribe()
            return
        committed: dict[TopicPartition, int] = {}
        if self._group_id is not None:
            found = self._admin.call(
                "list_group_offsets", self._group_id, [(t, p) for t, p in wanted]
            )
            committed = {
                TopicPartition(t, p): om.offset for (t, p), om in found.items() if om.offset >= 0
            }
        start = self._reset_start()
        if start is None:
            missing = [tp for tp in wanted if tp not in committed]
            if missing:
                raise NoOffsetForPartitionError(
                    f"{missing[0].topic}/{missing[0].partition}: no committed offset "
                    "and auto_offset_reset='none'"
                )
        self._start_consumer(
            [(tp.topic, tp.partition, committed.get(tp, start or NEWEST)) for tp in wanted]
        )
        self._assigned = set(wanted)

    def assignment(self) -> set[TopicPartition]:
        """The partitions consumed now (a group member: those the group gave it)."""
        self._check_open()
        reader = self._reader
        if isinstance(reader, SyncGroup):
            return {TopicPartition(t, p) for t, parts in reader.assignment().items() for p in parts}
        return set(self._assigned) if reader is not None else set()

    def _consumer_for(self, what: str) -> SyncConsumer:
        reader = self._reader
        if isinstance(reader, SyncGroup):
            raise IllegalStateError(
                f"{what} is not supported on a group subscription by pykaf's consumer group; "
                "use assign() for partitions you position yourself"
            )
        if reader is None:
            raise IllegalStateError("No partitions are assigned")
        return reader

    def _check_assigned(self, partition: TopicPartition) -> None:
        if TopicPartition(partition[0], partition[1]) not in self._assigned:
            raise IllegalStateError(f"Partition is not assigned: {partition}")

    # -- reading --------------------------------------------------------------------

    def _record(self, record: Record) -> ConsumerRecord:
        key, value, headers = record.key, record.value, list(record.headers)
        topic = record.topic
        assert topic is not None  # consumed records always name theirs
        return ConsumerRecord(
            topic,
            record.partition,
            -1,
            record.offset,
            record.timestamp,
            record.timestamp_type,
            key if self._key_deserializer is None else self._key_deserializer(topic, headers, key),
            value
            if self._value_deserializer is None
            else self._value_deserializer(topic, headers, value),
            headers,
            None,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            _headers_size(headers),
        )

    def _active(self) -> SyncConsumer | SyncGroup:
        self._check_open()
        if self._reader is None:
            raise IllegalStateError("You must subscribe to topics or assign partitions first")
        return self._reader

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched, up to ``max_records`` (default ``max_poll_records``), by partition.

        Waits up to ``timeout_ms`` for a first record; ``{}`` when none came.

        Raises:
            IllegalStateError: neither subscribed nor assigned.
            KafkaConfigurationError: ``update_offsets=False`` (not supported).
        """
        if not update_offsets:
            raise KafkaConfigurationError("poll(update_offsets=False) is not supported")
        reader = self._active()
        limit = self._max_records if max_records is None else max_records
        self._auto_commit_assigned()
        try:
            records = reader.consume(limit, timeout=_config.seconds("timeout_ms", timeout_ms))
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in records:
            tp = TopicPartition(record.topic or "", record.partition)
            bucket = out.get(tp)
            if bucket is None:
                bucket = out[tp] = []
            bucket.append(self._record(record))
        return out

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        reader = self._active()
        self._auto_commit_assigned()
        try:
            record = reader.poll(self._iter_timeout)
        except pykaf_errors.PykafError as exc:
            # The consumer closed ends the iteration; a partition's error that
            # is a ClosedError too (a ConsumerError for one) is raised as any other.
            if isinstance(exc, pykaf_errors.ClosedError) and not isinstance(
                exc, pykaf_errors.ConsumerError
            ):
                raise StopIteration from None
            raise from_pykaf(exc, self._names) from exc
        if record is None:
            raise StopIteration
        return self._record(record)

    # -- positions ------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Continue ``partition`` from ``offset`` (assigned partitions only).

        Raises:
            IllegalStateError: the partitions were assigned by a group.
            ValueError: a negative offset, or the partition is not assigned.
        """
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, not {offset!r}")
        self._seek([partition], offset, "seek")

    def _seek(self, partitions: Iterable[TopicPartition], offset: int, what: str) -> None:
        consumer = self._consumer_for(what)
        targets = list(partitions) or list(self._assigned)
        if not targets:
            raise ValueError("No partitions are currently assigned")
        for tp in targets:
            if TopicPartition(tp[0], tp[1]) not in self._assigned:
                raise ValueError(f"Unassigned partition: {tp}")
        for tp in targets:
            try:
                consumer.seek(tp[0], tp[1], offset)
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, self._names) from exc

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Continue these partitions (none: all assigned) from their oldest record."""
        self._seek(partitions, OLDEST, "seek_to_beginning")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Continue these partitions (none: all assigned) from their end."""
        self._seek(partitions, NEWEST, "seek_to_end")

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record to be handed out for ``partition``.

        Waits for the partition's start offset to be looked up, at most
        ``timeout_ms`` (default: ``request_timeout_ms``).

        Raises:
            IllegalStateError: the partition is not assigned.
            KafkaTimeoutError: the position was not known in time.
        """
        self._check_open()
        reader = self._active()
        tp = TopicPartition(partition[0], partition[1])
        if isinstance(reader, SyncGroup):
            for stats in reader.statistics().partitions:
                if (stats.topic, stats.partition) == tp:
                    return stats.position
            raise IllegalStateError(f"Partition is not assigned: {partition}")
        self._check_assigned(tp)
        if timeout_ms is None:
            wait = self._options.get("request_timeout", ClientConfig.request_timeout)
        else:
            wait = timeout_ms / 1000
        deadline = time.monotonic() + wait
        while True:
            position = reader.position(tp.topic, tp.partition)
            if position >= 0:
                return position
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"position of {tp.topic}/{tp.partition} not known after {wait:g} s"
                )
            time.sleep(0.01)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the last fetch; None before one.

        Raises:
            IllegalStateError: the partition is not assigned.
        """
        reader = self._active()
        tp = TopicPartition(partition[0], partition[1])
        for stats in reader.statistics().partitions:
            if (stats.topic, stats.partition) == tp:
                return stats.high_water_mark if stats.high_water_mark >= 0 else None
        raise IllegalStateError(f"Partition is not assigned: {partition}")

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop handing out records of these partitions until :meth:`resume`."""
        consumer = self._consumer_for("pause")
        for tp in partitions:
            self._check_assigned(tp)
            consumer.pause(tp[0], tp[1])
            self._paused.add(TopicPartition(tp[0], tp[1]))

    def resume(self, *partitions: TopicPartition) -> None:
        """Hand out records of paused partitions again."""
        consumer = self._consumer_for("resume")
        for tp in partitions:
            self._check_assigned(tp)
            consumer.resume(tp[0], tp[1])
            self._paused.discard(TopicPartition(tp[0], tp[1]))

    def paused(self) -> set[TopicPartition]:
        """The partitions paused with :meth:`pause`."""
        return set(self._paused)

    # -- commits --------------------------------------------------------------------

    def _require_group(self) -> str:
        if self._group_id is None:
            raise IllegalStateError("Requires group_id")
        return self._group_id

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit offsets: by default those of every record handed out so far.

        Raises:
            IllegalStateError: no ``group_id``; explicit ``offsets`` on a group
                subscription (pykaf's group commits what was handed out).
            CommitFailedError: the coordinator refused.
        """
        group_id = self._require_group()
        reader = self._active()
        if isinstance(reader, SyncGroup):
            if offsets is not None:
                raise IllegalStateError(
                    "commit(offsets=...) is not supported on a group subscription: pykaf's "
                    "group commits every record handed out (call commit() without offsets)"
                )
            try:
                reader.commit()
            except pykaf_errors.PykafError as exc:
                raise from_pykaf(exc, self._names) from exc
            return
        if offsets is None:
            plain: dict[tuple[str, int], int] = {}
            for tp in self._assigned:
                position = reader.position(tp.topic, tp.partition)
                if position >= 0:
                    plain[(tp.topic, tp.partition)] = position
        else:
            plain = {
                (tp[0], tp[1]): om.offset if isinstance(om, OffsetAndMetadata) else int(om)
                for tp, om in offsets.items()
            }
        if plain:
            self._admin.call("alter_group_offsets", group_id, plain)

    def _auto_commit_assigned(self, force: bool = False) -> None:
        """Commit assigned partitions' positions (interval due, or ``force``), with auto commit."""
        reader = self._reader
        if (
            not isinstance(reader, SyncConsumer)
            or self._group_id is None
            or not self._group_options.get("auto_commit", True)
        ):
            return
        now = time.monotonic()
        if not force and now - self._committed_at < self._commit_every:
            return
        self._committed_at = now
        changed = {}
        for tp in self._assigned:
            position = reader.position(tp.topic, tp.partition)
            if position >= 0 and self._last_commit.get((tp.topic, tp.partition)) != position:
                changed[(tp.topic, tp.partition)] = position
        if changed:
            self._admin.call("alter_group_offsets", self._group_id, changed)
            self._last_commit.update(changed)

    def committed(
        self, partition: TopicPartition, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset of ``partition`` (None: none committed).

        Raises:
            IllegalStateError: no ``group_id``.
        """
        group_id = self._require_group()
        self._check_open()
        tp = (partition[0], partition[1])
        found = self._admin.call("list_group_offsets", group_id, [tp])
        om = found.get(tp)
        if om is None or om.offset < 0:
            return None
        if metadata:
            return OffsetAndMetadata(om.offset, om.metadata or "", -1)
        return int(om.offset)

    def group_metadata(self) -> GroupMetadata:
        """The group member, for ``KafkaProducer.send_offsets_to_transaction``.

        Raises:
            IllegalStateError: not a group subscription.
        """
        reader = self._active()
        if not isinstance(reader, SyncGroup):
            raise IllegalStateError("group_metadata() needs a group subscription")
        return reader.group_metadata()

    # -- offsets and metadata -------------------------------------------------------

    def _offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._check_open()
        found = self._admin.call(
            "list_offsets",
            {(tp[0], tp[1]): spec for tp, spec in specs.items()},
            isolation_level=self._options["isolation_level"],
        )
        return {TopicPartition(t, p): offset for (t, p), offset in found.items()}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's oldest offset."""
        return self._offsets(dict.fromkeys(partitions, OLDEST))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end offset (the last stable offset under read_committed)."""
        return self._offsets(dict.fromkeys(partitions, NEWEST))

    def offsets_for_times(
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
                raise ValueError(f"The target time for partition {tp} is {ts!r}; it must be >= 0")
        found = self._offsets(timestamps)
        out: dict[TopicPartition, OffsetAndTimestamp | None] = dict.fromkeys(found)
        wanted = [(tp.topic, tp.partition, offset) for tp, offset in found.items() if offset >= 0]
        if wanted:
            options = {**self._client_options, "isolation_level": self._options["isolation_level"]}
            with SyncConsumer(self._servers, **options) as reader:
                reader.assign(wanted)
                missing = {(t, p) for t, p, _ in wanted}
                deadline = time.monotonic() + 30.0
                while missing and time.monotonic() < deadline:
                    for record in reader.consume(len(missing) * 10, timeout=1.0):
                        key = (record.topic, record.partition)
                        if key in missing:
                            missing.discard(key)
                            out[TopicPartition(*key)] = OffsetAndTimestamp(
                                record.offset, record.timestamp, -1
                            )
                            reader.pause(*key)
                if missing:
                    raise KafkaConfigurationError(
                        f"could not read the records found for {sorted(missing)}"
                    )
        return out

    def topics(self) -> set[str]:
        """The names of the cluster's topics."""
        return set(self._admin.call("list_topics"))

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The topic's partition numbers; None for an unknown topic."""
        try:
            description = self._admin.call("describe_topic", topic)
        except UnknownTopicOrPartitionError:
            return None
        return {p.partition for p in description.partitions}

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        """A few of Java's consumer metrics, from pykaf's statistics (``raw`` is ignored).

        ``consumer-fetch-manager-metrics``: ``records-lag-max``; for a group
        member also ``consumer-coordinator-metrics``: ``commit-total``,
        ``rebalance-total``.
        """
        reader = self._active()
        stats = reader.statistics()
        lags = [p.lag for p in stats.partitions]
        out = {"consumer-fetch-manager-metrics": {"records-lag-max": float(max(lags, default=0))}}
        if isinstance(stats, GroupStatistics):
            out["consumer-coordinator-metrics"] = {
                "commit-total": float(stats.commits),
                "rebalance-total": float(stats.rebalances),
            }
        return out

    # -- lifetime -------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Close (a group member commits what was handed out when auto commit is on, then leaves).

        Raises:
            KafkaConfigurationError: ``autocommit=False`` with ``enable_auto_commit``
                on (pykaf's group commits on close then).
        """
        if self._closed:
            return
        if (
            not autocommit
            and self._group_options.get("auto_commit", True)
            and isinstance(self._reader, SyncGroup)
        ):
            raise KafkaConfigurationError(
                "close(autocommit=False) is not supported with enable_auto_commit: pykaf's group "
                "commits on close; make the consumer with enable_auto_commit=False instead"
            )
        if autocommit:
            self._auto_commit_assigned(force=True)
        self._closed = True
        reader, self._reader = self._reader, None
        try:
            if reader is not None:
                reader.close(None if timeout_ms is None else timeout_ms / 1000)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self._names) from exc
        finally:
            self._admin.close()

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<pykaf.compat.kafka.KafkaConsumer group_id={self._group_id!r} closed={self._closed}>"
        )


__all__ = ["KafkaConsumer"]
