"""A group's offsets: what was marked, what is committed, OffsetFetch and OffsetCommit.

Marking is cheap and local (a dict entry per partition); a commit sends every
partition whose mark moved since the last commit, in one OffsetCommit to the
group coordinator. A mark never moves backwards (a lower offset is ignored),
so committed offsets only grow; ``reset`` is the one deliberate exception.

Each mark carries the leader epoch of the record before the marked offset
(KIP-320) when it is known; OffsetCommit sends it and OffsetFetch brings it
back, so a member resuming from a committed offset can check that the log was
not truncated below it meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf.errors import CommitError
from pykaf.protocol import versions

if TYPE_CHECKING:
    from pykaf._cluster.client import Client
    from pykaf._net.connection import BrokerConnection

log = logging.getLogger("pykaf.group")


TopicPartition = tuple[str, int]


class OffsetManager:
    """Marked and committed offsets of one group member."""

    def __init__(
        self,
        client: Client,
        group_id: str,
        group_instance_id: str | None,
        *,
        commit_cap: versions.VersionCap | None = versions.OFFSET_COMMIT,
    ) -> None:
        self.client = client
        # OffsetCommit's cap; None (the newest both sides speak, v9 with pykaf's
        # specs) for a consumer-protocol (KIP-848) member, which Kafka refuses below v9
        self.commit_cap = commit_cap
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        # (offset, metadata, leader epoch or -1) by partition
        self._marked: dict[TopicPartition, tuple[int, str | None, int]] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._committed_epochs: dict[TopicPartition, int] = {}
        self._dirty: set[TopicPartition] = set()
        self.commits = 0
        self.commit_errors = 0

    # -- marks --------------------------------------------------------------------

    def mark(
        self,
        topic: str,
        partition: int,
        offset: int,
        metadata: str | None = None,
        leader_epoch: int = -1,
    ) -> None:
        """Mark ``offset`` (the next offset to consume) for commit; lower marks are ignored.

        ``leader_epoch`` is the leader epoch of the record before ``offset``
        (-1 when unknown), committed with it.
        """
        tp = (topic, partition)
        current = self._marked.get(tp)
        if current is not None and offset <= current[0]:
            return
        self._marked[tp] = (offset, metadata, leader_epoch)
        self._dirty.add(tp)

    def reset(
        self,
        topic: str,
        partition: int,
        offset: int,
        metadata: str | None = None,
        leader_epoch: int = -1,
    ) -> None:
        """Set the mark to ``offset`` even if it is lower (the next commit moves it back)."""
        tp = (topic, partition)
        self._marked[tp] = (offset, metadata, leader_epoch)
        self._committed.pop(tp, None)
        self._dirty.add(tp)

    def marked(self, topic: str, partition: int) -> int:
        """The marked offset of a partition, -1 if none."""
        entry = self._marked.get((topic, partition))
        return -1 if entry is None else entry[0]

    def committed(self, topic: str, partition: int) -> int:
        """The last offset committed (or fetched as committed) for a partition, -1 if none."""
        return self._committed.get((topic, partition), -1)

    def committed_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch committed with the partition's offset, -1 if none or unknown."""
        return self._committed_epochs.get((topic, partition), -1)

    def forget(self, partitions: list[TopicPartition]) -> None:
        """Drop what this member knows of partitions it no longer owns."""
        for tp in partitions:
            self._marked.pop(tp, None)
            self._committed.pop(tp, None)
            self._committed_epochs.pop(tp, None)
            self._dirty.discard(tp)

    @property
    def pending(self) -> int:
        """Partitions with a mark not yet committed."""
        return len(self._dirty)

    # -- the coordinator ------------------------------------------------------------

    async def fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (-1 where none is committed).

        Raises:
            KafkaError: the broker's error (retriable ones are retried a few times).
        """
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        F = P.OffsetFetchRequest

        def build(version: int) -> Any:
            request = F(
                group_id=self.group_id,
                topics=[
                    F.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ],
            )
            if version >= 7:
                # Wait out pending transactional commits (KIP-447).
                request.require_stable = True
            return request

        def check(response: Any) -> errors.KafkaError | None:
            failure = errors.error_for_code(getattr(response, "error_code", 0) or 0)
            for rt in response.topics:
                for rp in rt.partitions:
                    failure = errors.error_for_code(rp.error_code) or failure
            if failure is None:
                return None
            return failure(f"OffsetFetch for group {self.group_id!r}: {failure.description}")

        def retrying(failure: BaseException) -> None:
            log.info("OffsetFetch for group %s: %s; retrying", self.group_id, failure)

        # Retriable errors are retried until request_timeout (and at least five
        # times): UNSTABLE_OFFSET_COMMIT lasts as long as the transaction
        # holding the offsets stays open. A lost connection looks the
        # coordinator up again.
        response = await rq.request(
            self.client,
            rq.group_coordinator(self.group_id),
            F,
            build,
            max_version=versions.OFFSET_FETCH.max_version,
            what=f"OffsetFetch for group {self.group_id!r}",
            check=check,
            retry_raised=(errors.KafkaConnectionError,),
            min_attempts=5,
            on_retry=retrying,
        )
        out: dict[TopicPartition, int] = {}
        for rt in response.topics:
            for rp in rt.partitions:
                tp = (rt.name, rp.partition_index)
                out[tp] = rp.committed_offset
                if rp.committed_offset >= 0:
                    self._committed[tp] = rp.committed_offset
                    # v5+: the leader epoch committed with the offset (-1 if none)
                    epoch = getattr(rp, "committed_leader_epoch", -1)
                    self._committed_epochs[tp] = -1 if epoch is None else epoch
        return {tp: out.get(tp, -1) for tp in partitions}

    async def commit(
        self,
        generation: int,
        member_id: str,
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> int:
        """Commit every mark that moved since the last commit; returns how many partitions.

        With ``offsets``, commit exactly those (the next offset to consume per
        partition) and nothing else; the marks stay as they are, and one that
        differs from what was committed goes with the next commit.

        Raises:
            CommitError: the broker refused some partitions (they stay marked).
            KafkaError: the request as a whole failed.
        """
        if offsets is None:
            dirty = [tp for tp in self._dirty if tp in self._marked]
            entries = {tp: self._marked[tp] for tp in dirty}
        else:
            entries = {tp: self._given(tp, offset) for tp, offset in offsets.items()}
        if not entries:
            return 0
        by_topic: dict[str, list[tuple[int, int, str | None, int]]] = {}
        for (topic, partition), (offset, metadata, epoch) in entries.items():
            by_topic.setdefault(topic, []).append((partition, offset, metadata, epoch))
        C = P.OffsetCommitRequest
        conn = await self._coordinator_connection()
        cap = self.commit_cap
        version = conn.version_for(C.API_KEY) if cap is None else cap.pick(conn)
        request = C(
            group_id=self.group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=self.group_instance_id,
            topics=[
                C.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        C.OffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_metadata=m,
                            committed_leader_epoch=e,  # v6+
                        )
                        for p, o, m, e in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
        )
        response = await conn.request(request, version)
        failures: dict[TopicPartition, errors.KafkaError] = {}
        done = 0
        for rt in response.topics:
            for rp in rt.partitions:
                tp = (rt.name, rp.partition_index)
                err = errors.error_for_code(rp.error_code)
                if err is not None:
                    failures[tp] = err(f"OffsetCommit {tp[0]}/{tp[1]}: {err.description}")
                    continue
                if tp in entries and self._marked.get(tp) == entries[tp]:
                    self._dirty.discard(tp)  # not re-marked while the commit was in flight
                if tp in entries:
                    self._committed[tp] = entries[tp][0]
                    self._committed_epochs[tp] = entries[tp][2]
                    marked = self._marked.get(tp)
                    if offsets is not None and marked is not None and marked != entries[tp]:
                        self._dirty.add(tp)  # the mark goes with the next commit
                done += 1
        self.commits += 1
        if failures:
            self.commit_errors += 1
            first = next(iter(failures.values()))
            if isinstance(first, (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError)):
                await self.client.refresh_coordinator(self.group_id)
            raise CommitError(failures)
        return done

    def _given(self, tp: TopicPartition, offset: int) -> tuple[int, str | None, int]:
        """An offset given to commit, with the mark's leader epoch when it is the marked one."""
        marked = self._marked.get(tp)
        if marked is not None and marked[0] == offset:
            return marked
        return (offset, None, -1)

    async def _coordinator_connection(self) -> BrokerConnection:
        broker = await self.client.coordinator(self.group_id)
        return await self.client.connect_to(broker)
