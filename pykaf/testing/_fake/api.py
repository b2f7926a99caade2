"""What a request handler of the fake cluster gets and returns, and the registry.

A handler module exposes ``APIS``: a list of :class:`Api`, one per Kafka API
it answers. A handler is ``async def handle(ctx, request, version)`` returning
the response object (or None for a request that gets no response, a Produce
with acks=0). ``error`` builds the response carrying an injected error code
without running the handler (so an injected error has no side effect); when
it is None, the response class is built empty with ``error_code`` set.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pykaf.protocol import RequestHeader, Response

if TYPE_CHECKING:
    from pykaf.testing._fake.cluster import FakeCluster
    from pykaf.testing._fake.model import BrokerNode


class CloseConnection(Exception):
    """Raised by a handler (or the server) to drop the client's connection, as Kafka does."""


@dataclass
class Session:
    """One client connection's state on a broker.

    Attributes:
        principal: "User:<name>" once SASL succeeded, "User:ANONYMOUS" without SASL.
        authenticated: True when the connection may send any request.
        mechanism: the SASL mechanism the handshake chose.
        sasl: the server side of that mechanism while it is running.
        raw_sasl: True after a SaslHandshake v0: the next frame is a bare token.
    """

    peer: str
    principal: str = "User:ANONYMOUS"
    authenticated: bool = True
    mechanism: str | None = None
    sasl: Any = None
    raw_sasl: bool = False
    closed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RequestContext:
    """Everything a handler may look at: the cluster, the broker, the session, the header."""

    cluster: FakeCluster
    broker: BrokerNode
    session: Session
    header: RequestHeader


Handler = Callable[[RequestContext, Any, int], Awaitable["Response | None"]]
ErrorBuilder = Callable[[Any, int, int], Response]


@dataclass(frozen=True)
class Api:
    """One API the fake cluster answers, and the versions it advertises."""

    request: type[Any]
    response: type[Response]
    handler: Handler
    min_version: int
    max_version: int
    error: ErrorBuilder | None = None
    #: answered before SASL authentication (ApiVersions, SaslHandshake, SaslAuthenticate)
    before_auth: bool = False
