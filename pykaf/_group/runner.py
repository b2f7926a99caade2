"""The I/O of a group member's state machine: requests to the coordinator, and the backoff.

A member's machine (:mod:`pykaf._group.classic`,
:mod:`pykaf._group.consumer_machine`) decides what to send and when to wait;
:class:`MemberRunner` is the one place that sends a machine's request to the
group's coordinator (through :mod:`pykaf._cluster.request`: the coordinator
target, its lookup, and forgetting a coordinator that moved) and waits the
one backoff of :mod:`pykaf._cluster.backoff`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pykaf._cluster import request as rq
from pykaf._cluster.backoff import Backoff

if TYPE_CHECKING:
    from pykaf._net.connection import BrokerConnection


class Request(Protocol):
    """A machine's send action: a request's fields, built for the coordinator's version."""

    @property
    def timeout(self) -> float | None: ...

    def version(self, conn: BrokerConnection) -> int:
        """The version to send on ``conn``."""
        ...

    def build(self, version: int) -> Any:
        """The request for ``version``."""
        ...


class MemberRunner:
    """Sends a group member's requests to its coordinator and waits its backoffs."""

    def __init__(self, client: rq.Client, group_id: str, policy: Backoff) -> None:
        self.client = client
        self.target = rq.group_coordinator(group_id)
        self.policy = policy

    async def send(self, action: Request) -> Any:
        """Send ``action``'s request to the coordinator; its answer.

        Raises:
            KafkaConnectionError, RetriableError: no answer (or no coordinator);
                the machine decides what follows.
        """
        conn = await self.target.connection(self.client)
        version = action.version(conn)
        request = action.build(version)
        if action.timeout is None:
            return await conn.request(request, version)
        return await conn.request(request, version, timeout=action.timeout)

    async def back_off(self, failure: BaseException, failures: int) -> None:
        """Wait the backoff after ``failures`` failures in a row; forget a moved coordinator."""
        await rq.retry_later(self.client, self.target, failure, self.policy, failures)


__all__ = ["MemberRunner", "Request"]
