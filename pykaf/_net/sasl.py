"""SASL authentication of a fresh broker connection (SaslHandshake + SaslAuthenticate).

The mechanisms are sans-I/O state machines in :mod:`pykaf.protocol.sasl`; this
module only carries their bytes in Kafka requests. When the broker sets a
session lifetime (KIP-368), :func:`authenticate` returns when it ends: the
connection records it and the pool replaces the connection with a freshly
authenticated one before then. It knows a connection only as a
:class:`Requester`, so it imports nothing of :mod:`pykaf._net.connection`.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

from pykaf import protocol as P
from pykaf._config import ClientConfig
from pykaf.errors import UnsupportedVersionError
from pykaf.protocol.connection import BrokerVersions
from pykaf.protocol.sasl import SaslAuthenticator, create_mechanism


class Requester(Protocol):
    """What authentication needs of a connection: its API versions and requests."""

    @property
    def versions(self) -> BrokerVersions:
        """The versions the broker answered ApiVersions with."""
        ...

    async def request(self, request: Any) -> Any:
        """Send ``request`` at the negotiated version and return the answer."""
        ...


SASL_HANDSHAKE = P.SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE = P.SaslAuthenticateRequest.API_KEY


async def authenticate(conn: Requester, config: ClientConfig) -> float | None:
    """Run the configured SASL mechanism on ``conn``.

    Returns:
        when the session ends (``trio.current_time()`` seconds) if the broker set a
        lifetime (KIP-368), else None.

    Raises:
        UnsupportedSaslMechanismError: the broker does not enable the mechanism.
        SaslAuthenticationError: the broker refused the credentials.
        UnsupportedVersionError: the broker predates SaslAuthenticate (Kafka < 1.0).
    """
    assert config.sasl_mechanism is not None
    auth = SaslAuthenticator(
        create_mechanism(
            config.sasl_mechanism,
            username=config.sasl_username,
            password=config.sasl_password,
            token_provider=config.sasl_oauth_token_provider,
        )
    )
    versions = conn.versions
    if not versions.supports(SASL_HANDSHAKE, 1) or not versions.supports(SASL_AUTHENTICATE):
        raise UnsupportedVersionError(
            f"{conn}: SASL needs SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 or newer)"
        )
    resp = await conn.request(P.SaslHandshakeRequest(mechanism=auth.mechanism_name))
    auth.handshake_response(resp.error_code, list(resp.mechanisms or []))
    while (data := auth.next_auth_bytes()) is not None:
        r = await conn.request(P.SaslAuthenticateRequest(auth_bytes=data))
        auth.auth_response(
            r.error_code,
            r.error_message,
            bytes(r.auth_bytes or b""),
            getattr(r, "session_lifetime_ms", 0),
        )
    return auth.reauth_deadline(trio.current_time())
