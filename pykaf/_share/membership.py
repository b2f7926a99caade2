"""A share group member's heartbeats (KIP-932): join, follow the broker's assignment, leave.

:class:`ShareMembership` sends ShareGroupHeartbeat to the group coordinator at
the interval it returns: epoch 0 with the subscribed topic names to join, the
member epoch afterwards, -1 to leave. The coordinator assigns partitions (by
topic id); several members may be assigned the same partition, since a share
group hands out records, not partitions. The member resolves the ids to names
from metadata and publishes the set as :attr:`ShareMembership.assignment`.
Unlike a consumer-protocol member it has nothing to revoke: records in flight
stay this member's to acknowledge until their acquisition locks expire.

FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID (or no answer for
``share_session_timeout``) mean the coordinator dropped the member: it joins
again with epoch 0 and the same member id.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import trio

from pykaf import errors
from pykaf import protocol as P
from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff, Retries
from pykaf._cluster.client import Client
from pykaf._share.config import ShareConsumerConfig

log = logging.getLogger("pykaf.share")

#: The member epoch that joins, and the one that leaves.
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
_FENCED = (errors.FencedMemberEpochError, errors.UnknownMemberIdError)
#: The interval used until the coordinator has said one.
_FIRST_INTERVAL = 0.5

TopicPartition = tuple[str, int]


class ShareMembership:
    """One member's heartbeats in share group ``group_id``; see the module's docstring."""

    def __init__(
        self, client: Client, config: ShareConsumerConfig, group_id: str, topics: Sequence[str]
    ) -> None:
        self.client = client
        self.config = config
        #: failed heartbeats in a row, and the backoff they earn
        self._retries = Retries(Backoff.of(config))
        self.group_id = group_id
        self.topics = list(topics)
        # Made by the member and kept for its life (KIP-1082): a random UUID, base64url.
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval = _FIRST_INTERVAL
        self.heartbeats = 0
        #: The partitions the coordinator assigned this member, by name.
        self.assignment: frozenset[TopicPartition] = frozenset()
        self._target: dict[uuid.UUID, list[int]] | None = None
        self._changed = trio.Event()
        self._now = trio.Event()
        self._closed = False
        self._failure: BaseException | None = None

    # -- what the consumer reads ---------------------------------------------------

    async def wait_assignment_change(self) -> None:
        """Return when the assignment changes (or the membership failed or closed)."""
        await self._changed.wait()

    def check(self) -> None:
        """Raise the error that ended the heartbeats, if one did."""
        if self._failure is not None:
            raise self._failure

    # -- the loop -----------------------------------------------------------------

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Heartbeat until :meth:`leave`; a fatal answer is kept for :meth:`check`."""
        task_status.started()
        try:
            await self._heartbeats()
        except errors.PykafError as exc:
            self._failure = exc
            self._announce()

    def _announce(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _request(self, epoch: int) -> Any:
        joining = epoch == JOIN_EPOCH
        return P.ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            subscribed_topic_names=list(self.topics) if joining else None,
        )

    async def _send(self, request: Any) -> Any:
        broker = await self.client.coordinator(self.group_id)
        conn = await self.client.connect_to(broker)
        version = conn.version_for(P.ShareGroupHeartbeatRequest.API_KEY)
        return await conn.request(request, version)

    async def _retry_later(self, exc: BaseException) -> None:
        target = rq.group_coordinator(self.group_id)
        await rq.retry_later(self.client, target, exc, self._retries.policy, self._retries.fail())

    async def _heartbeats(self) -> None:
        last_ok = trio.current_time()
        first = True
        while not self._closed:
            if not first:
                with trio.move_on_after(self.heartbeat_interval):
                    await self._now.wait()
                self._now = trio.Event()
            first = False
            if self._closed:
                return
            try:
                response = await self._send(self._request(self.member_epoch))
            except (errors.KafkaConnectionError, errors.RetriableError) as exc:
                if trio.current_time() - last_ok > self.config.share_session_timeout:
                    self._rejoin("no heartbeat answer for share_session_timeout")
                    last_ok = trio.current_time()
                await self._retry_later(exc)
                self._now.set()
                continue
            self.heartbeats += 1
            err = errors.error_for_code(response.error_code)
            if err is None:
                last_ok = trio.current_time()
                self._retries.reset()
                await self._answered(response)
                continue
            if issubclass(err, _FENCED):
                self._rejoin(err.name)
                self._now.set()
                continue
            if err.retriable:
                await self._retry_later(err(err.description))
                self._now.set()
                continue
            message = response.error_message or err.description
            raise err(f"ShareGroupHeartbeat {self.group_id!r}: {message}")

    def _rejoin(self, why: str) -> None:
        log.info(
            "share group %s: member %s dropped (%s); joining again",
            self.group_id,
            self.member_id,
            why,
        )
        self.member_epoch = JOIN_EPOCH
        self._target = None
        if self.assignment:
            self.assignment = frozenset()
            self._announce()

    async def _answered(self, response: Any) -> None:
        if self._closed:
            return
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval = response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            self._target = {
                tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions
            }
        if self._target is None:
            return
        names = await self._resolve(set(self._target))
        if names is None:
            self._now.set()  # not in the metadata yet: ask again soon
            return
        assigned = frozenset((names[t], p) for t, ps in self._target.items() for p in ps)
        if assigned != self.assignment:
            log.info("share group %s: assigned %s", self.group_id, sorted(assigned))
            self.assignment = assigned
            self._announce()

    async def _resolve(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str] | None:
        names = self.client.metadata.names_of(ids)
        if len(names) < len(ids):
            try:
                await self.client.refresh_metadata(*self.topics)
            except errors.PykafError as exc:
                log.info("share group %s: metadata: %s", self.group_id, exc)
            names = self.client.metadata.names_of(ids)
        if len(names) < len(ids):
            await self._retries.policy.wait()
            return None
        return names

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The id of ``topic`` from metadata (None when unknown)."""
        return self.client.metadata.topic_id(topic)

    # -- leaving --------------------------------------------------------------------

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (member epoch -1)."""
        if self._closed:
            return
        self._closed = True
        self._now.set()
        if self.member_epoch <= 0:
            return
        try:
            with trio.move_on_after(self.config.request_timeout):
                response = await self._send(self._request(LEAVE_EPOCH))
                err = errors.error_for_code(response.error_code)
                if err is not None:
                    log.info("share group %s: leaving: %s", self.group_id, err.name)
        except errors.PykafError as exc:
            log.info("share group %s: leave heartbeat failed: %s", self.group_id, exc)
        self.member_epoch = LEAVE_EPOCH
