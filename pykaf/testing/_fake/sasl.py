"""The server side of SASL PLAIN and SCRAM-SHA-256/512 (RFC 4616, RFC 5802, RFC 7677).

Written from the RFCs with hashlib and hmac, apart from pykaf's client
mechanisms, so a test of the client against it checks two implementations
against each other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets

from pykaf import errors
from pykaf.testing._fake.model import CloseConnection, Session

log = logging.getLogger("pykaf.testing.fake")

SCRAM_ITERATIONS = 4096
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslFailure(Exception):
    """Authentication failed; the message is what the client is told."""


class _Plain:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("malformed PLAIN message")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("PLAIN message is not UTF-8") from None
        if authzid and authzid != user:
            raise SaslFailure("PLAIN authorization id differs from the user")
        known = self.users.get(user)
        if known is None or not hmac.compare_digest(known.encode(), password.encode()):
            raise SaslFailure("Invalid username or password")
        self.user = user
        return b"", True


class _Scram:
    def __init__(self, users: dict[str, str], mechanism: str) -> None:
        self.users = users
        self.hash = _SCRAM_HASHES[mechanism]
        self.user: str | None = None
        self._stage = 0
        self._nonce = ""
        self._first_bare = ""
        self._server_first = ""
        self._salted = b""

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash, data).digest()

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def step(self, token: bytes) -> tuple[bytes, bool]:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslFailure("SCRAM message is not UTF-8") from None
        if self._stage == 0:
            return self._client_first(text), False
        if self._stage == 1:
            return self._client_final(text), True
        raise SaslFailure("SCRAM exchange already complete")

    @staticmethod
    def _attrs(text: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in text.split(","):
            if len(part) < 2 or part[1] != "=":
                raise SaslFailure(f"malformed SCRAM attribute {part!r}")
            out[part[0]] = part[2:]
        return out

    def _client_first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",")
        authz, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise SaslFailure(
                "malformed SCRAM client-first message (channel binding is not offered)"
            )
        attrs = self._attrs(bare)
        if "n" not in attrs or "r" not in attrs:
            raise SaslFailure("SCRAM client-first message lacks a user or a nonce")
        user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        if authz and authz[2:] != user:
            raise SaslFailure("SCRAM authorization id differs from the user")
        password = self.users.get(user)
        if password is None:
            raise SaslFailure(
                "Authentication failed during authentication due to invalid credentials"
            )
        salt = hashlib.sha256(b"pykaf-fake:" + user.encode()).digest()[:16]
        self._salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), salt, SCRAM_ITERATIONS)
        self.user = user
        self._nonce = attrs["r"] + secrets.token_urlsafe(18)
        self._first_bare = bare
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(salt).decode()},i={SCRAM_ITERATIONS}"
        )
        self._stage = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise SaslFailure("SCRAM client-final message has no proof")
        attrs = self._attrs(without_proof)
        if attrs.get("r") != self._nonce:
            raise SaslFailure("SCRAM nonce mismatch")
        binding = attrs.get("c", "")
        if binding not in ("biws", "eSws") and not base64.b64decode(binding).startswith(
            (b"n,", b"y,")
        ):  # "biws" and "eSws" are base64 of "n,," and "y,,"
            raise SaslFailure("SCRAM channel binding mismatch")
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        client_key_stored = self._h(self._hmac(self._salted, b"Client Key"))
        signature = self._hmac(client_key_stored, auth_message)
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise SaslFailure("SCRAM proof is not base64") from None
        if len(proof) != len(signature):
            raise SaslFailure(
                "Authentication failed during authentication due to invalid credentials"
            )
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._h(client_key), client_key_stored):
            raise SaslFailure(
                "Authentication failed during authentication due to invalid credentials"
            )
        server_key = self._hmac(self._salted, b"Server Key")
        self._stage = 2
        return b"v=" + base64.b64encode(self._hmac(server_key, auth_message))


class SaslServer:
    """The cluster's SASL users and mechanisms; drives each connection's exchange."""

    def __init__(self, users: dict[str, str] | None, mechanisms: tuple[str, ...]) -> None:
        bad = [m for m in mechanisms if m != "PLAIN" and m not in _SCRAM_HASHES]
        if bad:
            raise ValueError(
                f"unsupported SASL mechanisms {bad} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            )
        self.users = users
        self.mechanisms = mechanisms

    def add_user(self, name: str, password: str) -> None:
        """Add or change a user (this turns SASL on if it was off)."""
        if self.users is None:
            self.users = {}
        self.users[name] = password

    def handshake(self, session: Session, mechanism: str) -> int:
        """Choose ``mechanism`` for the session; return the error code for SaslHandshake."""
        if self.users is None:
            return errors.IllegalSaslStateError.code
        if session.authenticated or session.mechanism is not None:
            return errors.IllegalSaslStateError.code
        if mechanism not in self.mechanisms:
            return errors.UnsupportedSaslMechanismError.code
        session.mechanism = mechanism
        session.sasl = _Plain(self.users) if mechanism == "PLAIN" else _Scram(self.users, mechanism)
        return 0

    def authenticate(self, session: Session, token: bytes) -> tuple[bytes, bool]:
        """One SaslAuthenticate step: (server token, done).

        Raises:
            SaslFailure: the credentials are wrong or the exchange is malformed.
        """
        mech = session.sasl
        if mech is None:
            raise SaslFailure("SaslAuthenticate before SaslHandshake")
        try:
            reply, done = mech.step(token)
        except SaslFailure:
            session.sasl = None
            raise
        if done:
            session.authenticated = True
            session.principal = f"User:{mech.user}"
            session.sasl = None
            log.debug("%s authenticated as %s (%s)", session.peer, mech.user, session.mechanism)
        return reply, done

    async def raw_token(self, session: Session, token: bytes) -> bytes:
        """A bare token after SaslHandshake v0; a failure closes the connection."""
        try:
            reply, done = self.authenticate(session, token)
        except SaslFailure as exc:
            log.debug("%s: SASL failed: %s", session.peer, exc)
            raise CloseConnection from None
        if done:
            session.raw_sasl = False
        return reply
