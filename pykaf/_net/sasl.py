"""SASL authentication of a fresh broker connection (SaslHandshake + SaslAuthenticate).

The mechanisms are sans-I/O state machines in :mod:`pykaf.protocol.sasl`; this
module only carries their bytes in Kafka requests. When the broker sets a
session lifetime (KIP-368), the connection records when it expires and the
pool replaces it with a freshly authenticated one before then.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pykaf import protocol as P
from pykaf._config import ClientConfig
from pykaf.errors import UnsupportedVersionError
from pykaf.protocol.sasl import SaslAuthenticator, create_mechanism

if TYPE_CHECKING:
    from pykaf._net.connection import BrokerConnection

SASL_HANDSHAKE = P.SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE = P.SaslAuthenticateRequest.API_KEY


async def authenticate(conn: BrokerConnection, config: ClientConfig) -> None:
    """Run the configured SASL mechanism on ``conn``.

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
    deadline = auth.reauth_deadline(time.monotonic())
    conn.expires_at = deadline
