"""One request path: choose a broker, send, check the answer, retry on one policy and one clock.

Every coordinator, admin and cluster call that may be asked again goes
through :func:`call` (or :func:`request`, which also picks the version and
builds the request): the broker is chosen by a :class:`Target` (any broker, a
node, a partition's leader, a group's or a transactional id's coordinator;
a leader is the client's partition router's,
:meth:`~pykaf._cluster.router.PartitionRouter.leader`),
the answer is turned into the typed error of :mod:`pykaf.errors` by the
caller's ``check``, and a failure the caller retries waits the one backoff
(:mod:`pykaf._cluster.backoff`: ``retry_backoff`` doubling per attempt up to
``retry_backoff_max``, with jitter) and asks again until a deadline
(``request_timeout`` unless the caller gives its own). An answer saying the
broker was the wrong one (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost
connection to the coordinator, a retriable error from a leader) makes the next
attempt look the broker up again.

The clock is trio's (:func:`now`), so that ``trio.testing.MockClock`` drives
every backoff and deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio

from pykaf import errors
from pykaf._cluster.backoff import Backoff, Retries

if TYPE_CHECKING:
    from pykaf._cluster.metadata import BrokerInfo, Metadata
    from pykaf._cluster.router import PartitionRouter
    from pykaf._config import ClientConfig
    from pykaf._net.connection import BrokerConnection

log = logging.getLogger("pykaf.cluster")

R = TypeVar("R")

#: Answers meaning the coordinator is not (or no longer) the one asked.
COORDINATOR_MOVED: tuple[type[errors.KafkaError], ...] = (
    errors.NotCoordinatorError,
    errors.CoordinatorNotAvailableError,
)

_ANY, _NODE, _CONTROLLER, _LEADER, _GROUP, _TRANSACTION = range(6)
# FindCoordinator's key types (client.COORDINATOR_GROUP, COORDINATOR_TRANSACTION).
_KEY_TYPES = {_GROUP: 0, _TRANSACTION: 1}


class Client(Protocol):
    """What the request path needs of the cluster client (``pykaf._cluster.client.Client``)."""

    config: ClientConfig
    metadata: Metadata
    #: the partition router of one-shot leader lookups (``Client.leader`` uses it)
    router: PartitionRouter

    async def any_connection(self) -> BrokerConnection: ...
    async def broker_connection(self, node_id: int) -> BrokerConnection: ...
    async def connect_to(self, broker: BrokerInfo) -> BrokerConnection: ...
    async def controller(self) -> BrokerInfo: ...
    async def leader(self, topic: str, partition: int) -> BrokerInfo: ...
    async def coordinator(self, group: str) -> BrokerInfo: ...
    async def transaction_coordinator(self, transactional_id: str) -> BrokerInfo: ...
    def forget_coordinator(self, key_type: int, key: str) -> None: ...


def now() -> float:
    """The one clock of requests, backoffs and deadlines: trio's (a ``MockClock`` in tests)."""
    return trio.current_time()


class Deadline:
    """A point on :func:`now`'s clock, ``seconds`` from when it is made (never, for ``inf``)."""

    __slots__ = ("at",)

    def __init__(self, seconds: float) -> None:
        self.at = now() + seconds

    @property
    def passed(self) -> bool:
        """Whether the deadline is reached."""
        return now() >= self.at

    @property
    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - now())


async def backoff(client: Client, failures: int = 1, policy: Backoff | None = None) -> None:
    """Wait the one retry backoff after ``failures`` consecutive failures.

    ``policy`` is the role's own (:meth:`Backoff.of` its options) when they may
    differ from a shared client's; by default the client's.
    """
    await (Backoff.of(client.config) if policy is None else policy).wait(failures)


async def wait_until(holds: Callable[[], Awaitable[bool]], timeout: float, policy: Backoff) -> bool:
    """Ask ``holds`` until it answers True (True) or ``timeout`` seconds pass (False).

    The asks are the one backoff apart (``policy``); ``holds`` is asked at
    least once, and once more after the last wait.
    """
    deadline = Deadline(timeout)
    retries = Retries(policy)
    while True:
        if await holds():
            return True
        if deadline.passed:
            return False
        await retries.wait()


@dataclass(frozen=True, slots=True)
class Target:
    """The broker a request goes to; make one with the functions below it."""

    kind: int
    key: Any = None

    async def connection(self, client: Client) -> BrokerConnection:
        """A connection to the broker this target names now (looking it up if need be)."""
        if self.kind == _ANY:
            return await client.any_connection()
        if self.kind == _NODE:
            return await client.broker_connection(self.key)
        if self.kind == _CONTROLLER:
            return await client.connect_to(await client.controller())
        if self.kind == _LEADER:
            return await client.connect_to(await client.leader(*self.key))
        if self.kind == _GROUP:
            return await client.connect_to(await client.coordinator(self.key))
        return await client.connect_to(await client.transaction_coordinator(self.key))

    def forget(self, client: Client, failure: BaseException) -> None:
        """After ``failure``, make the next :meth:`connection` look the broker up again if it moved.

        A coordinator is looked up again after NOT_COORDINATOR,
        COORDINATOR_NOT_AVAILABLE or a connection failure; a leader after a
        retriable error or a connection failure.
        """
        lost = isinstance(failure, errors.KafkaConnectionError)
        if self.kind in _KEY_TYPES:
            if lost or isinstance(failure, COORDINATOR_MOVED):
                client.forget_coordinator(_KEY_TYPES[self.kind], self.key)
        elif self.kind == _LEADER and (
            lost or (isinstance(failure, errors.KafkaError) and failure.retriable)
        ):
            client.router.forget_leader(*self.key)


#: Any reachable broker.
ANY_BROKER = Target(_ANY)
#: The cluster's controller.
CONTROLLER = Target(_CONTROLLER)


def node(node_id: int) -> Target:
    """Broker ``node_id``."""
    return Target(_NODE, node_id)


def leader(topic: str, partition: int) -> Target:
    """The leader of ``topic``/``partition``."""
    return Target(_LEADER, (topic, partition))


def group_coordinator(group_id: str) -> Target:
    """The group coordinator of ``group_id``."""
    return Target(_GROUP, group_id)


def transaction_coordinator(transactional_id: str) -> Target:
    """The transaction coordinator of ``transactional_id``."""
    return Target(_TRANSACTION, transactional_id)


async def retry_later(
    client: Client,
    target: Target,
    failure: BaseException,
    policy: Backoff | None = None,
    failures: int = 1,
) -> None:
    """The pause between two attempts: :func:`backoff`, then forget a broker that moved."""
    await backoff(client, failures, policy)
    target.forget(client, failure)


def error_of(code: int, what: str, message: str | None = None) -> errors.KafkaError | None:
    """The typed error of a Kafka error ``code`` about ``what`` (None for no error)."""
    cls = errors.error_for_code(code)
    if cls is None:
        return None
    return cls(f"{what}: {message or cls.description}")


def _no_error(response: Any) -> errors.KafkaError | None:
    return None


async def call(
    client: Client,
    target: Target,
    exchange: Callable[[BrokerConnection], Awaitable[R]],
    *,
    what: str,
    check: Callable[[R], errors.KafkaError | None] = _no_error,
    retry_raised: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
    policy: Backoff | None = None,
    min_attempts: int = 1,
    max_attempts: int | None = None,
    refused: Callable[[errors.KafkaError], BaseException] | None = None,
    exhausted: Callable[[BaseException, R | None], R] | None = None,
    on_retry: Callable[[BaseException], None] | None = None,
) -> R:
    """Run ``exchange`` on ``target``'s connection until ``check`` finds no error; its result.

    Args:
        client: the cluster client whose config sets the backoff and deadline.
        target: the broker to ask.
        exchange: sends the request(s) on the connection and returns the answer.
        what: names the call in logs.
        check: the answer's error (None when it succeeded); those Kafka
            marks retriable are asked again. A caller that retries fewer
            returns only those.
        retry_raised: exceptions raised while choosing the broker or
            exchanging that are asked again too (default: none, they propagate).
        timeout: seconds after which a failure is no longer retried
            (default ``request_timeout``; ``math.inf`` for none).
        policy: the backoff between attempts (default: the client's).
        min_attempts: attempts made before the deadline counts.
        max_attempts: attempts after which a failure is no longer retried.
        refused: what to raise for an answered error that is not retried
            (default: that error).
        exhausted: given the last failure and the last answer (None if the
            last attempt raised), what to return or raise when the retries
            run out (default: raise the failure).
        on_retry: called with each failure that is retried.

    Raises:
        the answered error that is not retried, an exception not in
        ``retry_raised``, or the last failure when the retries run out.
    """
    deadline = Deadline(client.config.request_timeout if timeout is None else timeout)
    attempts = 0
    while True:
        attempts += 1
        answer: R | None = None
        try:
            conn = await target.connection(client)
            answer = await exchange(conn)
        except retry_raised as exc:
            failure: BaseException = exc
        else:
            error = check(answer)
            if error is None:
                return answer
            if not error.retriable:
                raise error if refused is None else refused(error)
            failure = error
        out_of_attempts = max_attempts is not None and attempts >= max_attempts
        if out_of_attempts or (attempts >= min_attempts and deadline.passed):
            if exhausted is None:
                raise failure
            return exhausted(failure, answer)
        if on_retry is not None:
            on_retry(failure)
        else:
            log.debug("%s: %s; retrying", what, failure)
        await retry_later(client, target, failure, policy, attempts)


def version_for(conn: BrokerConnection, api: Any, max_version: int | None = None) -> int:
    """The version of ``api`` (a request class) to send on ``conn``, at most ``max_version``."""
    version = conn.version_for(api.API_KEY)
    return version if max_version is None else min(version, max_version)


async def request(
    client: Client,
    target: Target,
    api: Any,
    build: Callable[[int], Any],
    *,
    max_version: int | None = None,
    **options: Any,
) -> Any:
    """:func:`call` with one request of ``api`` (a request class) built for the chosen version.

    ``build(version)`` makes the request; ``options`` are :func:`call`'s.
    """

    async def exchange(conn: BrokerConnection) -> Any:
        version = version_for(conn, api, max_version)
        return await conn.request(build(version), version)

    options.setdefault("what", api.__name__.removesuffix("Request"))
    return await call(client, target, exchange, **options)


__all__ = [
    "ANY_BROKER",
    "CONTROLLER",
    "COORDINATOR_MOVED",
    "Client",
    "Deadline",
    "Target",
    "backoff",
    "call",
    "error_of",
    "group_coordinator",
    "leader",
    "node",
    "now",
    "request",
    "retry_later",
    "transaction_coordinator",
    "version_for",
    "wait_until",
]
