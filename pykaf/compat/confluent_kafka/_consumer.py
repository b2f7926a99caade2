"""confluent-kafka's ``Consumer``, on pykaf.sync's ``ConsumerGroup`` and ``Consumer``.

``subscribe`` makes a group member (``pykaf.sync.ConsumerGroup``); ``assign``
reads the partitions given without joining (``pykaf.sync.Consumer``), and
commits for ``group.id`` through the admin API, as librdkafka commits for a
consumer that assigned its partitions itself.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.codec import Record
from pykaf.compat.confluent_kafka._config import client_options, translate
from pykaf.compat.confluent_kafka._error import (
    LOCAL_CODES,
    KafkaError,
    KafkaException,
    from_pykaf,
)
from pykaf.compat.confluent_kafka._producer import _seconds
from pykaf.compat.confluent_kafka._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Message,
    TopicPartition,
)
from pykaf.compat.confluent_kafka.admin import ClusterMetadata, cluster_metadata

RebalanceCallback = Callable[[Any, list[TopicPartition]], object]

#: The options only a group member takes (refused by pykaf.sync.Consumer).
_GROUP_ONLY = {f.name for f in dataclasses.fields(pykaf.GroupConfig)} - {
    f.name for f in dataclasses.fields(pykaf.ConsumerConfig)
}


def _fail(code: str, text: str) -> KafkaException:
    return KafkaException(KafkaError(LOCAL_CODES[code], text))


def _message(record: Record) -> Message:
    headers = record.headers
    kind = TIMESTAMP_LOG_APPEND_TIME if record.timestamp_type == 1 else TIMESTAMP_CREATE_TIME
    return Message(
        record.topic,
        record.partition,
        record.offset,
        record.key,
        record.value,
        list(headers) if headers else None,
        None,
        (kind, record.timestamp),
    )


def _partitions(partitions: object, what: str) -> list[TopicPartition]:
    if not isinstance(partitions, list | tuple) or not all(
        isinstance(tp, TopicPartition) for tp in partitions
    ):
        raise TypeError(f"{what} takes a list of TopicPartition")
    return list(partitions)


class Consumer:
    """confluent-kafka's ``Consumer(conf)``.

    Args:
        conf: librdkafka's keys (``docs/migrating.md`` lists those taken);
            ``auto.offset.reset`` is "latest" unless given, as in librdkafka.

    Raises:
        KafkaException: an unsupported key or bad value (``_INVALID_ARG``).
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        settings = translate(conf, "consumer")
        self._names = settings.names
        self._bootstrap = settings.bootstrap
        self._group_id = settings.group_id
        self._options = dict(settings.options)
        self._options.setdefault("auto_offset_reset", "latest")
        self._group: pykaf.sync.ConsumerGroup | None = None
        self._reader: pykaf.sync.Consumer | None = None
        self._admin: pykaf.sync.Admin | None = None
        self._handed: dict[tuple[str, int], int] = {}
        # enable.auto.offset.store: what poll hands out is stored (``_handed``);
        # false: only store_offsets stores (``_stored``).
        self._auto_store = settings.auto_offset_store
        self._stored: dict[tuple[str, int], int] = {}
        self._error_cb = settings.error_cb
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._known: set[tuple[str, int]] = set()
        self._closed = False
        # Assigned partitions (no group member) are committed here, as librdkafka
        # does for group.id with enable.auto.commit: on an interval and on close.
        self._auto_commit = bool(self._options.get("auto_commit", True)) and (
            self._group_id is not None
        )
        self._commit_every = float(self._options.get("auto_commit_interval", 5.0))
        self._committed_at = time.monotonic()
        self._last_commit: dict[tuple[str, int], int] = {}

    # -- helpers ---------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _admin_client(self) -> pykaf.sync.Admin:
        if self._admin is None:
            try:
                self._admin = pykaf.sync.Admin(self._bootstrap, **client_options(self._options))
            except errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc, self._names)) from exc
        return self._admin

    def _need_group_id(self) -> str:
        if self._group_id is None:
            raise _fail("_UNKNOWN_GROUP", "group.id is not configured")
        return self._group_id

    def _assign_only(self, call: str) -> pykaf.sync.Consumer:
        """The assign-mode reader, for the calls a group member cannot make."""
        if self._group is not None:
            raise _fail(
                "_NOT_IMPLEMENTED",
                f"{call}: pykaf's group members (subscribe) do not take it; use assign()",
            )
        if self._reader is None:
            raise _fail("_STATE", f"{call}: no partitions are assigned")
        return self._reader

    def _store(self) -> dict[tuple[str, int], int]:
        """The stored offsets: handed out, or (auto offset store off) given to store_offsets."""
        return self._handed if self._auto_store else self._stored

    def _auto_commit_assigned(self, force: bool = False) -> None:
        """Commit the stored offsets of assigned partitions, once per interval (or now)."""
        if not self._auto_commit or self._reader is None or self._group_id is None:
            return
        if not force and time.monotonic() - self._committed_at < self._commit_every:
            return
        self._committed_at = time.monotonic()
        changed = {tp: o for tp, o in self._store().items() if self._last_commit.get(tp) != o}
        if not changed:
            return
        try:
            self._admin_client().alter_group_offsets(self._group_id, changed)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._last_commit.update(changed)

    # -- subscribing -----------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics`` (a new subscription replaces the old one).

        ``on_assign(consumer, partitions)`` and ``on_revoke(consumer,
        partitions)`` are called from :meth:`poll` / :meth:`consume` once the
        assignment has changed: notifications after the fact (offsets set on
        the partitions are not used).

        Raises:
            KafkaException: no ``group.id`` (``_UNKNOWN_GROUP``); ``on_lost``
                (``_NOT_IMPLEMENTED``: a lost partition cannot be told from a
                revoked one); partitions assigned with :meth:`assign` (``_STATE``).
        """
        self._check_open()
        if on_lost is not None:
            raise _fail(
                "_NOT_IMPLEMENTED",
                "subscribe(on_lost=...) is not supported: pykaf reports lost partitions "
                "through on_revoke",
            )
        if not isinstance(topics, list | tuple) or not all(isinstance(t, str) for t in topics):
            raise TypeError("subscribe takes a list of topic names")
        if any(t.startswith("^") for t in topics):
            raise _fail("_NOT_IMPLEMENTED", "regex subscriptions (^...) are not supported")
        group_id = self._need_group_id()
        if self._reader is not None:
            raise _fail("_STATE", "partitions are assigned: call unassign() first")
        self.unsubscribe()
        try:
            self._group = pykaf.sync.ConsumerGroup(
                self._bootstrap,
                group_id,
                list(topics),
                auto_mark=self._auto_store,
                **self._options,
            )
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._on_assign, self._on_revoke = on_assign, on_revoke

    def unsubscribe(self) -> None:
        """Leave the group (committing what was handed out, with auto commit on)."""
        self._check_open()
        if self._group is not None:
            if self._on_revoke is not None:
                self._changed(set())  # before the group commits and leaves, as librdkafka
            group, self._group = self._group, None
            group.close()
            self._known = set()
            self._handed.clear()
            self._stored.clear()

    def _changed(self, now: set[tuple[str, int]]) -> None:
        gone, new = self._known - now, now - self._known
        self._known = now
        if gone and self._on_revoke is not None:
            self._on_revoke(self, [TopicPartition(t, p) for t, p in sorted(gone)])
        if new and self._on_assign is not None:
            self._on_assign(self, [TopicPartition(t, p) for t, p in sorted(new)])

    def _watch(self) -> None:
        if self._group is not None and (self._on_assign or self._on_revoke):
            assigned = self._group.assignment()
            self._changed({(t, p) for t, ps in assigned.items() for p in ps})

    # -- assigning -------------------------------------------------------------

    def _start(self, tp: TopicPartition) -> tuple[str, int] | tuple[str, int, int]:
        offset = tp.offset
        if offset == OFFSET_BEGINNING:
            return (tp.topic, tp.partition, pykaf.OLDEST)
        if offset == OFFSET_END:
            return (tp.topic, tp.partition, pykaf.NEWEST)
        if offset >= 0:
            return (tp.topic, tp.partition, offset)
        if offset not in (OFFSET_STORED, OFFSET_INVALID):
            raise _fail("_INVALID_ARG", f"assign: {tp} has an invalid offset")
        if self._group_id is not None:
            committed = self._committed([(tp.topic, tp.partition)]).get((tp.topic, tp.partition))
            if committed is not None:
                return (tp.topic, tp.partition, committed)
        reset = self._options["auto_offset_reset"]
        if reset == "none":
            raise _fail("_NO_OFFSET", f"assign: no committed offset for {tp.topic}/{tp.partition}")
        return (tp.topic, tp.partition, pykaf.OLDEST if reset == "earliest" else pykaf.NEWEST)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read exactly ``partitions`` (no group): offsets as given, else committed, else reset.

        Raises:
            KafkaException: subscribed (``_STATE``), or a bad offset.
        """
        self._check_open()
        parts = _partitions(partitions, "assign")
        if self._group is not None:
            raise _fail("_STATE", "subscribed: call unsubscribe() before assign()")
        starts = [self._start(tp) for tp in parts]
        try:
            if self._reader is None:
                options = {k: v for k, v in self._options.items() if k not in _GROUP_ONLY}
                self._reader = pykaf.sync.Consumer(self._bootstrap, **options)
            self._reader.assign(starts)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._known = {(tp.topic, tp.partition) for tp in parts}

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment (the others keep their positions)."""
        parts = _partitions(partitions, "incremental_assign")
        if self._reader is None:
            self.assign(parts)
            return
        self._check_open()
        added = [self._start(tp) for tp in parts]
        current: list[Any] = sorted(self._known)  # listed without an offset: kept where they are
        try:
            self._reader.assign(current + added)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._known |= {(tp.topic, tp.partition) for tp in parts}

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Stop reading ``partitions``."""
        self._check_open()
        gone = {(tp.topic, tp.partition) for tp in _partitions(partitions, "incremental_unassign")}
        reader = self._assign_only("incremental_unassign")
        self._known -= gone
        reader.assign(sorted(self._known))

    def unassign(self) -> None:
        """Stop reading every assigned partition."""
        self._check_open()
        if self._reader is not None:
            self._reader.unassign()
        self._known = set()

    def assignment(self) -> list[TopicPartition]:
        """The partitions assigned now."""
        self._check_open()
        if self._group is not None:
            assigned = self._group.assignment()
            return [TopicPartition(t, p) for t in sorted(assigned) for p in assigned[t]]
        return [TopicPartition(t, p) for t, p in sorted(self._known)]

    # -- reading ---------------------------------------------------------------

    def _client_error(self, exc: errors.PykafError) -> None:
        """A client error met by poll/consume: to ``error_cb`` if the conf has one, else raised."""
        if self._error_cb is None:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        self._error_cb(from_pykaf(exc, self._names))

    def _source(self) -> pykaf.sync.ConsumerGroup | pykaf.sync.Consumer | None:
        return self._group if self._group is not None else self._reader

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message (or error event), or None after ``timeout`` s (-1/None: no limit).

        Raises:
            KafkaException: a client error (a fatal group error, ...), unless
                the conf has ``error_cb``, which is then called with it.
        """
        self._check_open()
        self._watch()
        self._auto_commit_assigned()
        source = self._source()
        if source is None:
            if timeout is not None and timeout >= 0:
                time.sleep(timeout)
                return None
            raise _fail("_STATE", "poll() with no limit on a consumer with no partitions")
        try:
            record = source.poll(_seconds(timeout))
        except errors.ConsumerError as exc:
            return Message(exc.topic, exc.partition, None, error=from_pykaf(exc.error))
        except errors.KafkaTimeoutError:
            return None
        except errors.PykafError as exc:
            self._client_error(exc)
            return None
        self._watch()  # on_assign before the first message of a new partition
        if record is None:
            return None
        self._handed[(str(record.topic), record.partition)] = record.offset + 1
        return _message(record)

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` messages; waits up to ``timeout`` s for the first.

        Raises:
            ValueError: ``num_messages`` outside 0..1000000.
        """
        self._check_open()
        if not isinstance(num_messages, int) or not 0 <= num_messages <= 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        self._watch()
        self._auto_commit_assigned()
        source = self._source()
        if source is None:
            if timeout is not None and timeout >= 0:
                time.sleep(timeout)
                return []
            raise _fail("_STATE", "consume() with no limit on a consumer with no partitions")
        try:
            records = source.consume(num_messages, _seconds(timeout)) if num_messages else []
        except errors.ConsumerError as exc:
            return [Message(exc.topic, exc.partition, None, error=from_pykaf(exc.error))]
        except errors.PykafError as exc:
            self._client_error(exc)
            return []
        self._watch()
        for record in records:
            self._handed[(str(record.topic), record.partition)] = record.offset + 1
        return [_message(r) for r in records]

    # -- offsets -----------------------------------------------------------------

    def _committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        try:
            # As librdkafka: read_committed (its default) waits out offsets a
            # transaction holds, instead of answering the ones before it.
            stable = self._options.get("isolation_level", "read_committed") == "read_committed"
            found = self._admin_client().list_group_offsets(
                self._need_group_id(), partitions, require_stable=stable
            )
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        return {tp: meta.offset for tp, meta in found.items() if meta.offset >= 0}

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit ``message``'s offset + 1, ``offsets``, or what was handed out.

        The commit is made before the call returns either way; with
        ``asynchronous=False`` the committed partitions are returned. As in
        confluent-kafka, ``message`` and ``offsets`` commit exactly their
        partitions, at those offsets; ``commit()`` commits every partition's
        stored offset (what ``poll`` handed out, or what ``store_offsets``
        stored).

        Raises:
            KafkaException: nothing to commit (``_NO_OFFSET``), no group.id
                (``_UNKNOWN_GROUP``), a negative offset (``_INVALID_ARG``), or
                the coordinator's error.
        """
        self._check_open()
        if message is not None and offsets is not None:
            raise ValueError("commit takes message or offsets, not both")
        if message is not None:
            if message.error() is not None or message.offset() is None:
                raise _fail("_INVALID_ARG", "commit: the message is an error event")
            key = (str(message.topic()), int(message.partition() or 0))
            wanted = {key: int(message.offset() or 0) + 1}
        elif offsets is not None:
            wanted = {(tp.topic, tp.partition): tp.offset for tp in _partitions(offsets, "commit")}
        elif self._auto_store:
            wanted = dict(self._handed)
        else:  # the offsets stored and not committed yet
            wanted = {tp: o for tp, o in self._stored.items() if self._last_commit.get(tp) != o}
        if not wanted:
            raise _fail("_NO_OFFSET", "commit: no offsets to commit")
        group_id = self._need_group_id()
        explicit = message is not None or offsets is not None
        for (topic, partition), offset in wanted.items():
            if offset < 0:
                raise _fail("_INVALID_ARG", f"commit: {topic}/{partition} offset {offset}")
        try:
            if self._group is not None and explicit:
                # As librdkafka: exactly these partitions, at these offsets; the
                # others' handed-out (or stored) offsets wait for the next commit.
                self._group.commit(offsets=wanted)
                self._last_commit.update(wanted)
            elif self._group is not None:
                self._group.commit()  # what was handed out (or stored), every partition
                self._last_commit.update(wanted)
            else:
                self._admin_client().alter_group_offsets(group_id, dict(wanted))
                self._last_commit.update(wanted)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        if asynchronous:
            return None
        return [TopicPartition(t, p, o) for (t, p), o in sorted(wanted.items())]

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        """Store ``message``'s offset + 1, or ``offsets``, for the next commit.

        Needs ``enable.auto.offset.store=false``: the next auto commit (with
        ``enable.auto.commit``), :meth:`commit` without arguments and
        :meth:`close` commit what was stored, and nothing else. For a group
        member (:meth:`subscribe`) a stored offset only moves forward (a
        lower one is ignored: pykaf's group marks); with :meth:`assign` it is
        stored as given.

        Raises:
            KafkaException: ``_INVALID_ARG`` with ``enable.auto.offset.store``
                true (as librdkafka), for an error event or a negative offset;
                ``_STATE`` for a partition not assigned (``_UNKNOWN_PARTITION``
                when its topic is not read at all).
            ValueError: neither ``message`` nor ``offsets``, or both.
        """
        self._check_open()
        if (message is None) == (offsets is None):
            raise ValueError("store_offsets takes either message or offsets")
        if self._auto_store:
            raise _fail(
                "_INVALID_ARG",
                "store_offsets needs enable.auto.offset.store=false: with true, what poll "
                "hands out is stored",
            )
        if message is not None:
            if message.error() is not None or message.offset() is None:
                raise _fail("_INVALID_ARG", "store_offsets: the message is an error event")
            tp = (str(message.topic()), int(message.partition() or 0))
            wanted = {tp: int(message.offset() or 0) + 1}
        else:
            parts = _partitions(offsets, "store_offsets")
            wanted = {(tp.topic, tp.partition): tp.offset for tp in parts}
        for (topic, partition), offset in wanted.items():
            if offset < 0:
                raise _fail("_INVALID_ARG", f"store_offsets: {topic}/{partition} offset {offset}")
            if self._group is None and (topic, partition) not in self._known:
                raise self._not_assigned(topic, partition)
        if self._group is None:
            self._stored.update(wanted)
            return
        for (topic, partition), offset in wanted.items():
            try:
                self._group.mark(topic, partition, offset)
            except errors.ConfigError as exc:
                raise self._not_assigned(topic, partition) from exc
            except errors.PykafError as exc:
                raise KafkaException(from_pykaf(exc, self._names)) from exc
            tp = (topic, partition)
            self._stored[tp] = max(offset, self._stored.get(tp, -1))

    def _not_assigned(self, topic: str, partition: int) -> KafkaException:
        """store_offsets' error for a partition not assigned, as librdkafka's.

        ``_STATE`` for a partition of a topic read now, else ``_UNKNOWN_PARTITION``.
        """
        topics = {t for t, _ in self._known}
        if self._group is not None:
            topics = set(self._group.assignment())
        code = "_STATE" if topic in topics else "_UNKNOWN_PARTITION"
        return _fail(code, f"store_offsets: {topic}/{partition} is not assigned")

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets of ``partitions`` (``OFFSET_INVALID``: none)."""
        self._check_open()
        parts = _partitions(partitions, "committed")
        found = self._committed([(tp.topic, tp.partition) for tp in parts])
        return [
            TopicPartition(
                tp.topic, tp.partition, found.get((tp.topic, tp.partition), OFFSET_INVALID)
            )
            for tp in parts
        ]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The next offset to be handed out per partition (``OFFSET_INVALID``: not known yet)."""
        self._check_open()
        out = []
        for tp in _partitions(partitions, "position"):
            offset = self._handed.get((tp.topic, tp.partition), OFFSET_INVALID)
            if self._reader is not None and (tp.topic, tp.partition) in self._known:
                try:
                    offset = self._reader.position(tp.topic, tp.partition)
                except errors.PykafError:
                    offset = OFFSET_INVALID
            known = offset if offset >= 0 else OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, known))
        return out

    def seek(self, partition: TopicPartition) -> None:
        """Hand out ``partition.offset`` next (assigned partitions only)."""
        self._check_open()
        reader = self._assign_only("seek")
        start = self._start(partition)
        if len(start) != 3:
            raise _fail("_INVALID_ARG", f"seek: {partition} has no offset")
        try:
            reader.seek(partition.topic, partition.partition, start[2])
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` (assigned partitions only)."""
        self._check_open()
        reader = self._assign_only("pause")
        for tp in _partitions(partitions, "pause"):
            reader.pause(tp.topic, tp.partition)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Hand out records of paused ``partitions`` again."""
        self._check_open()
        reader = self._assign_only("resume")
        for tp in _partitions(partitions, "resume"):
            reader.resume(tp.topic, tp.partition)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """``(low, high)``: the partition's first offset and the one after its last.

        Raises:
            KafkaException: ``cached=True`` (``_NOT_IMPLEMENTED``: pykaf does
                not keep the fetch's watermarks for this call), or the broker's error.
        """
        self._check_open()
        if cached:
            raise _fail("_NOT_IMPLEMENTED", "get_watermark_offsets(cached=True) is not supported")
        tp = (partition.topic, partition.partition)
        try:
            admin = self._admin_client()
            low = admin.list_offsets({tp: pykaf.OLDEST})[tp]
            high = admin.list_offsets({tp: pykaf.NEWEST})[tp]
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        return (low, high)

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """Per partition, the first offset at or after ``offset`` (a time in ms); -1: none."""
        self._check_open()
        parts = _partitions(partitions, "offsets_for_times")
        specs = {(tp.topic, tp.partition): tp.offset for tp in parts}
        try:
            found = self._admin_client().list_offsets(specs)
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        return [
            TopicPartition(tp.topic, tp.partition, found[(tp.topic, tp.partition)]) for tp in parts
        ]

    def consumer_group_metadata(self) -> Any:
        """The member's group metadata, for ``Producer.send_offsets_to_transaction``."""
        self._check_open()
        if self._group is None:
            return self._need_group_id()
        return self._group.group_metadata()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (or only ``topic``)."""
        self._check_open()
        return cluster_metadata(self._admin_client(), topic)

    def close(self) -> None:
        """Leave the group (committing, with auto commit on) and release everything.

        Assigned partitions' handed-out offsets are committed first when
        ``group.id`` is set and ``enable.auto.commit`` is on, as librdkafka does.
        """
        if self._closed:
            return
        try:
            if self._group is not None:
                if self._on_revoke is not None:
                    self._changed(set())
                self._group.close()
            if self._reader is not None:
                try:
                    self._auto_commit_assigned(force=True)
                finally:
                    self._reader.close()
        except errors.PykafError as exc:
            raise KafkaException(from_pykaf(exc, self._names)) from exc
        finally:
            self._closed = True
            if self._admin is not None:
                self._admin.close()
