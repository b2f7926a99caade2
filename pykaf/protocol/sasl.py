"""SASL client mechanisms for Kafka, with no I/O: bytes in, bytes out.

Every mechanism follows one small interface, :class:`SaslMechanism`: the
connection sends :meth:`~SaslMechanism.initial_response`, feeds each server
challenge to :meth:`~SaslMechanism.process` and sends what it returns, until
:attr:`~SaslMechanism.complete` is true. A mechanism object serves exactly one
authentication; make a new one (:func:`create_mechanism` is cheap) for every
connection and every KIP-368 re-authentication.

Mechanisms:

* :class:`PlainMechanism`: ``PLAIN`` (RFC 4616).
* :class:`ScramMechanism`: ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802,
  RFC 7677), optionally with Kafka's delegation-token extension
  (``tokenauth=true``). ``SCRAM-SHA-1`` is accepted by the class (the RFC 5802
  test vectors use it) but not by :func:`create_mechanism`: Kafka does not
  offer it.
* :class:`OAuthBearerMechanism`: ``OAUTHBEARER`` (RFC 7628, KIP-255, KIP-342).

:class:`SaslAuthenticator` runs a mechanism over Kafka's SaslHandshake and
SaslAuthenticate exchange without knowing the request classes: the
connection layer copies fields in and out.

Choices that differ between implementations:

* **No SASLprep.** User names and passwords are sent (PLAIN) or hashed (SCRAM)
  as their UTF-8 bytes, unnormalized, as Kafka's Java client does. Kafka
  brokers derive their stored SCRAM keys from the raw UTF-8 password, so
  applying SASLprep (RFC 4013) would make any password that normalization
  changes fail against Kafka. Non-ASCII text is therefore accepted everywhere,
  identically for PLAIN and SCRAM; strings that cannot be encoded as UTF-8
  (lone surrogates) and NUL characters are rejected with
  :class:`~pykaf.errors.ConfigError`.
* **SCRAM iteration counts** below 4096 (Kafka's minimum for both SCRAM
  mechanisms, also the RFC 7677 floor) are refused, as the Java client does.
  Counts above 1,000,000 are refused too, so a hostile server cannot make the
  client spin on PBKDF2 (Kafka itself caps stored credentials at 16384).
* **The server nonce** must extend the client nonce by at least one
  character; an echo of the client nonce alone is refused.

PBKDF2 with Kafka's iteration counts takes milliseconds; a caller worried
about a large count may run :meth:`ScramMechanism.process` in a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
import random
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, Protocol, runtime_checkable

from pykaf.errors import (
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
    raise_for_code,
)

__all__ = [
    "MECHANISMS",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "PlainMechanism",
    "SaslAuthenticator",
    "SaslMechanism",
    "ScramMechanism",
    "SupportsTokenValue",
    "TokenProvider",
    "create_mechanism",
    "unsecured_jwt",
]

#: The mechanisms :func:`create_mechanism` builds, by their SaslHandshake name.
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: Fewest PBKDF2 iterations a SCRAM server may ask for (Kafka's minimum).
SCRAM_MIN_ITERATIONS: Final = 4096

#: Most PBKDF2 iterations a SCRAM server may ask for before the client refuses.
SCRAM_MAX_ITERATIONS: Final = 1_000_000

_SASL_AUTHENTICATION_FAILED: Final = 58
_UNSUPPORTED_SASL_MECHANISM: Final = 33

#: KIP-368: re-authenticate after 85% to 95% of the session lifetime, so that
#: latency and clock drift are covered and many connections do not all
#: re-authenticate at the same instant.
_REAUTH_WINDOW: Final = (0.85, 0.95)


@runtime_checkable
class SaslMechanism(Protocol):
    """A client SASL mechanism as a state machine: challenges in, responses out."""

    @property
    def name(self) -> str:
        """The mechanism's name as sent in SaslHandshake, e.g. ``SCRAM-SHA-256``."""
        ...

    @property
    def complete(self) -> bool:
        """Whether authentication succeeded from the client's point of view."""
        ...

    def initial_response(self) -> bytes:
        """The first client message; may be called once, before :meth:`process`."""
        ...

    def process(self, challenge: bytes) -> bytes | None:
        """Consume a server message; return the next client message, or None.

        Raises:
            SaslAuthenticationError: the server's message is malformed, fails
                verification or reports an error.
            IllegalSaslStateError: called before :meth:`initial_response`,
                after completion or after a failure.
        """
        ...


class _State(enum.Enum):
    INITIAL = "initial"
    SENT_FIRST = "sent client-first"
    SENT_FINAL = "sent client-final"
    SENT_ERROR_ACK = "acknowledged a server error"
    COMPLETE = "complete"
    FAILED = "failed"


def _utf8(value: str, what: str) -> bytes:
    """Encode a credential as UTF-8, rejecting what cannot be sent."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise ConfigError(f"{what} must not contain NUL characters")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(f"{what} is not encodable as UTF-8: {exc.reason}") from None


def _saslname(value: str, what: str) -> str:
    """RFC 5802 saslname: ``=`` becomes ``=3D`` and ``,`` becomes ``=2C``."""
    _utf8(value, what)
    if not value:
        raise ConfigError(f"{what} must not be empty")
    return value.replace("=", "=3D").replace(",", "=2C")


class _BaseMechanism:
    """State bookkeeping shared by the mechanisms."""

    name: str = ""

    def __init__(self) -> None:
        self._state = _State.INITIAL

    @property
    def complete(self) -> bool:
        """Whether authentication succeeded from the client's point of view."""
        return self._state is _State.COMPLETE

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self._state.value}>"

    def _wrong_state(self, call: str) -> NoReturn:
        raise IllegalSaslStateError(f"{self.name}: {call} is not valid: {self._state.value}")

    def _fail(self, message: str) -> NoReturn:
        self._state = _State.FAILED
        raise SaslAuthenticationError(f"{self.name}: {message}")

    def initial_response(self) -> bytes:
        """The first client message; may be called once, before :meth:`process`."""
        if self._state is not _State.INITIAL:
            self._wrong_state("initial_response()")
        try:
            out = self._initial()
        except BaseException:
            self._state = _State.FAILED
            raise
        return out

    def process(self, challenge: bytes) -> bytes | None:
        """Consume a server message; return the next client message, or None.

        Raises:
            SaslAuthenticationError: the server's message is malformed, fails
                verification or reports an error.
            IllegalSaslStateError: called before :meth:`initial_response`,
                after completion or after a failure.
        """
        if self._state in (_State.INITIAL, _State.COMPLETE, _State.FAILED):
            self._wrong_state("process()")
        try:
            return self._step(bytes(challenge))
        except BaseException:
            self._state = _State.FAILED
            raise

    def _initial(self) -> bytes:
        raise NotImplementedError

    def _step(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


# -- PLAIN -------------------------------------------------------------------


class PlainMechanism(_BaseMechanism):
    """``PLAIN`` (RFC 4616): ``authzid NUL username NUL password`` in one message.

    The client has nothing to verify, so it is complete as soon as the message
    is produced; the broker's verdict arrives as the SaslAuthenticate error
    code. Use PLAIN only over TLS.
    """

    name = "PLAIN"

    def __init__(self, username: str, password: str, *, authzid: str | None = None) -> None:
        super().__init__()
        self._message = b"\x00".join(
            [
                b"" if authzid is None else _utf8(authzid, "authzid"),
                _utf8(username, "username"),
                _utf8(password, "password"),
            ]
        )
        if not username:
            raise ConfigError("username must not be empty")

    def _initial(self) -> bytes:
        message, self._message = self._message, b""
        self._state = _State.COMPLETE
        return message

    def process(self, challenge: bytes) -> bytes | None:
        """Accept the broker's empty final message; PLAIN has no further steps.

        Raises:
            IllegalSaslStateError: called before :meth:`initial_response`.
            SaslAuthenticationError: the server sent a non-empty challenge.
        """
        if self._state is not _State.COMPLETE:
            self._wrong_state("process()")
        if challenge:
            self._fail(f"unexpected {len(challenge)}-byte server challenge")
        return None


# -- SCRAM -------------------------------------------------------------------

_SCRAM_HASHES: Final = {"sha1": "SCRAM-SHA-1", "sha256": "SCRAM-SHA-256", "sha512": "SCRAM-SHA-512"}
_GS2_HEADER: Final = b"n,,"
_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_ATTRIBUTE = re.compile(r"([A-Za-z]+)=(.*)", re.DOTALL)
_DIGITS = re.compile(r"[0-9]{1,10}")


def _parse_attributes(message: bytes, what: str) -> list[tuple[str, str]]:
    """Split ``a=x,b=y`` into pairs; raise ValueError when malformed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not valid UTF-8") from None
    pairs = []
    for part in text.split(","):
        m = _ATTRIBUTE.fullmatch(part)
        if m is None:
            raise ValueError(f"{what} has a malformed attribute {part[:40]!r}")
        pairs.append((m.group(1), m.group(2)))
    return pairs


def _b64decode(value: str) -> bytes:
    return base64.b64decode(value.encode("ascii"), validate=True)


class ScramMechanism(_BaseMechanism):
    """``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802, RFC 7677) without channel binding.

    Args:
        username: the SCRAM user, or the token id for delegation tokens.
        password: the password, or the token's HMAC for delegation tokens.
        hash_name: ``"sha256"``, ``"sha512"`` (or ``"sha1"``, not used by Kafka).
        token_auth: send Kafka's ``tokenauth=true`` extension to authenticate
            with a delegation token.
        client_nonce: the client nonce; random by default (``secrets``). Set it
            only in tests: reusing a nonce weakens the exchange.
        min_iterations: refuse a server asking for fewer PBKDF2 iterations.
        max_iterations: refuse a server asking for more PBKDF2 iterations.

    Raises:
        ConfigError: a credential or option is invalid.
    """

    def __init__(
        self,
        username: str,
        password: str,
        *,
        hash_name: str = "sha256",
        token_auth: bool = False,
        client_nonce: str | None = None,
        min_iterations: int = SCRAM_MIN_ITERATIONS,
        max_iterations: int = SCRAM_MAX_ITERATIONS,
    ) -> None:
        super().__init__()
        if hash_name not in _SCRAM_HASHES:
            raise ConfigError(
                f"SCRAM hash must be one of {', '.join(_SCRAM_HASHES)}, not {hash_name!r}"
            )
        self.name = _SCRAM_HASHES[hash_name]
        self._hash = hash_name
        self._user = _saslname(username, "username")
        self._password = _utf8(password, "password")
        if client_nonce is None:
            client_nonce = secrets.token_urlsafe(24)
        elif not _PRINTABLE_NONCE.fullmatch(client_nonce):
            raise ConfigError("client_nonce must be printable ASCII without ','")
        self._nonce = client_nonce
        if not 1 <= min_iterations <= max_iterations:
            raise ConfigError("need 1 <= min_iterations <= max_iterations")
        self._min_iterations = min_iterations
        self._max_iterations = max_iterations
        extensions = ",tokenauth=true" if token_auth else ""
        self._client_first_bare = f"n={self._user},r={self._nonce}{extensions}".encode()
        self._server_signature = b""

    @property
    def client_nonce(self) -> str:
        """The client nonce sent in client-first."""
        return self._nonce

    def _initial(self) -> bytes:
        self._state = _State.SENT_FIRST
        return _GS2_HEADER + self._client_first_bare

    def _step(self, challenge: bytes) -> bytes | None:
        if self._state is _State.SENT_FIRST:
            return self._client_final(challenge)
        if self._state is _State.SENT_FINAL:
            self._verify_server_final(challenge)
            return None
        self._wrong_state("process()")

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _client_final(self, server_first: bytes) -> bytes:
        try:
            attrs = _parse_attributes(server_first, "server-first message")
        except ValueError as exc:
            self._fail(str(exc))
        if attrs[0][0] == "e":
            self._fail(f"server error: {attrs[0][1]}")
        if attrs[0][0] == "m":
            self._fail("server requires an unsupported mandatory extension (m=)")
        if [key for key, _ in attrs[:3]] != ["r", "s", "i"]:
            self._fail("malformed server-first message: expected r=, s=, i=")
        nonce, salt_b64, iterations_text = (value for _, value in attrs[:3])
        if not _PRINTABLE_NONCE.fullmatch(nonce):
            self._fail("malformed server-first message: nonce is not printable ASCII")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            self._fail("server nonce does not extend the client nonce")
        try:
            salt = _b64decode(salt_b64)
        except (ValueError, binascii.Error):
            self._fail("malformed server-first message: salt is not base64")
        if not salt:
            self._fail("malformed server-first message: empty salt")
        if not _DIGITS.fullmatch(iterations_text):
            self._fail(f"malformed server-first message: iteration count {iterations_text!r}")
        iterations = int(iterations_text)
        if iterations < self._min_iterations:
            self._fail(
                f"server asked for {iterations} iterations, below the minimum "
                f"{self._min_iterations}"
            )
        if iterations > self._max_iterations:
            self._fail(
                f"server asked for {iterations} iterations, above the maximum "
                f"{self._max_iterations}"
            )

        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        self._password = b""
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        channel_binding = base64.b64encode(_GS2_HEADER)
        without_proof = b"c=" + channel_binding + b",r=" + nonce.encode("ascii")
        auth_message = b",".join([self._client_first_bare, server_first, without_proof])
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        self._state = _State.SENT_FINAL
        return without_proof + b",p=" + base64.b64encode(proof)

    def _verify_server_final(self, server_final: bytes) -> None:
        try:
            attrs = _parse_attributes(server_final, "server-final message")
        except ValueError as exc:
            self._fail(str(exc))
        key, value = attrs[0]
        if key == "e":
            self._fail(f"server error: {value}")
        if key != "v":
            self._fail("malformed server-final message: expected v= or e=")
        try:
            signature = _b64decode(value)
        except (ValueError, binascii.Error):
            self._fail("malformed server-final message: signature is not base64")
        if not hmac.compare_digest(signature, self._server_signature):
            self._fail("server signature mismatch: the server does not know the credentials")
        self._server_signature = b""
        self._state = _State.COMPLETE


# -- OAUTHBEARER -------------------------------------------------------------

_KVSEP: Final = b"\x01"
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class SupportsTokenValue(Protocol):
    """A token object: its compact form in ``value``.

    An ``extensions`` mapping (``str`` to ``str``) on the object, when present,
    is sent too (KIP-342).
    """

    @property
    def value(self) -> str:
        """The token itself, e.g. a compact JWT."""
        ...


@dataclass(frozen=True)
class OAuthBearerToken:
    """An OAUTHBEARER token and the SASL extensions sent with it.

    Attributes:
        value: the token, e.g. a compact JWT.
        extensions: KIP-342 SASL extensions, sent as ``key=value`` pairs.
    """

    value: str
    extensions: Mapping[str, str] = field(default_factory=dict)


#: Returns the token to authenticate with: a string or a token object. It is
#: called for every authentication, so it may refresh an expiring token.
TokenProvider = Callable[[], "str | SupportsTokenValue"]


def _check_extensions(extensions: Mapping[str, str]) -> None:
    """Validate KIP-342 extension names and values; raise ConfigError."""
    for key, value in extensions.items():
        if not isinstance(key, str) or not _EXTENSION_KEY.fullmatch(key):
            raise ConfigError(f"SASL extension name {key!r} must be ASCII letters only")
        if key == "auth":
            raise ConfigError("SASL extension name 'auth' is reserved")
        if not isinstance(value, str) or not _EXTENSION_VALUE.fullmatch(value):
            raise ConfigError(
                f"SASL extension {key!r} has an invalid value: printable ASCII, space, "
                "tab, CR or LF, at least one character"
            )


class OAuthBearerMechanism(_BaseMechanism):
    """``OAUTHBEARER`` (RFC 7628) as Kafka uses it (KIP-255, KIP-342).

    The client sends ``n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]...^A``.
    A successful broker answers with an empty message. A broker rejecting the
    token answers with a JSON error (e.g. ``{"status":"invalid_token"}``); the
    client acknowledges it with a single ``^A`` as RFC 7628 requires, keeps the
    error in :attr:`server_error`, and the exchange ends in
    :class:`~pykaf.errors.SaslAuthenticationError` carrying the status.

    Args:
        token_provider: called once, by :meth:`initial_response`, for the token.
        extensions: SASL extensions sent with every token; a token object's
            own extensions override them key by key.
        authzid: authorization identity; Kafka requires it to equal the
            token's principal when given.

    Raises:
        ConfigError: the provider is not callable or an extension is invalid.
    """

    name = "OAUTHBEARER"

    def __init__(
        self,
        token_provider: TokenProvider,
        *,
        extensions: Mapping[str, str] | None = None,
        authzid: str | None = None,
    ) -> None:
        super().__init__()
        if not callable(token_provider):
            raise ConfigError("OAUTHBEARER token_provider must be callable")
        self._provider = token_provider
        self._extensions = dict(extensions or {})
        _check_extensions(self._extensions)
        self._authzid = "" if authzid is None else _saslname(authzid, "authzid")
        self._server_error: dict[str, Any] | None = None

    @property
    def server_error(self) -> dict[str, Any] | None:
        """The broker's JSON error (parsed), if it rejected the token."""
        return self._server_error

    @property
    def failure_detail(self) -> str | None:
        """The broker's error in words, if it rejected the token; else None."""
        err = self._server_error
        if err is None:
            return None
        if "raw" in err and "status" not in err:
            return f"server error: {err['raw']!r}"
        detail = f"server status: {err.get('status')}"
        for extra in ("scope", "openid-configuration"):
            if extra in err:
                detail += f", {extra}: {err[extra]}"
        return detail

    def _token(self) -> tuple[str, dict[str, str]]:
        try:
            token = self._provider()
        except Exception as exc:
            self._fail(f"token provider failed: {exc!r}")
        if isinstance(token, str):
            value: object = token
            token_extensions: object = None
        else:
            value = getattr(token, "value", None)
            token_extensions = getattr(token, "extensions", None)
        if not isinstance(value, str):
            self._fail(
                "token provider must return a string or an object with a string "
                f".value, not {type(token).__name__}"
            )
        if not _B64TOKEN.fullmatch(value):
            self._fail("token is not a valid bearer token (RFC 6750 b64token)")
        extensions = dict(self._extensions)
        if token_extensions is not None:
            if not isinstance(token_extensions, Mapping):
                self._fail("token extensions must be a mapping of str to str")
            try:
                _check_extensions(token_extensions)
            except ConfigError as exc:
                self._fail(f"token provider returned an invalid extension: {exc}")
            extensions.update(token_extensions)
        return value, extensions

    def _initial(self) -> bytes:
        token, extensions = self._token()
        gs2 = f"n,a={self._authzid}," if self._authzid else "n,,"
        parts = [gs2.encode(), b"auth=Bearer " + token.encode("ascii")]
        parts.extend(f"{key}={value}".encode("ascii") for key, value in extensions.items())
        self._state = _State.SENT_FIRST
        return _KVSEP.join(parts) + _KVSEP + _KVSEP

    def _step(self, challenge: bytes) -> bytes | None:
        if self._state is _State.SENT_FIRST:
            if not challenge:
                self._state = _State.COMPLETE
                return None
            self._server_error = self._parse_error(challenge)
            self._state = _State.SENT_ERROR_ACK
            return _KVSEP
        # The server answered the error acknowledgement with more than a failure.
        detail = self.failure_detail
        self._fail(f"authentication failed ({detail})")

    @staticmethod
    def _parse_error(challenge: bytes) -> dict[str, Any]:
        text = challenge.decode("utf-8", "replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            return {"raw": text}
        if not isinstance(parsed, dict):
            return {"raw": text}
        return parsed


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsecured_jwt(
    principal: str,
    lifetime_s: float = 3600,
    scope: str | Sequence[str] | None = None,
    *,
    now: float | None = None,
) -> str:
    """An unsigned JWT (``{"alg":"none"}``) as Kafka's unsecured login callback makes.

    For tests and development brokers configured with Kafka's unsecured
    OAUTHBEARER validator; never for production.

    Args:
        principal: the ``sub`` claim, which Kafka takes as the principal name.
        lifetime_s: seconds until the ``exp`` claim.
        scope: the ``scope`` claim, one scope or several (sent as a list).
        now: the ``iat`` time in seconds since the epoch; defaults to now.

    Raises:
        ConfigError: the principal is empty or the lifetime not positive.
    """
    if not isinstance(principal, str) or not principal:
        raise ConfigError("unsecured_jwt: principal must be a non-empty string")
    if not lifetime_s > 0:
        raise ConfigError("unsecured_jwt: lifetime_s must be positive")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iat": issued,
        "exp": issued + int(lifetime_s),
        "sub": principal,
    }
    if scope is not None:
        claims["scope"] = [scope] if isinstance(scope, str) else list(scope)
    header = _b64url(b'{"alg":"none"}')
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode("utf-8"))
    return f"{header}.{payload}."


# -- factory -----------------------------------------------------------------


def create_mechanism(
    name: str,
    *,
    username: str | None = None,
    password: str | None = None,
    authzid: str | None = None,
    token_provider: TokenProvider | None = None,
    extensions: Mapping[str, str] | None = None,
    token_auth: bool = False,
) -> SaslMechanism:
    """Build a fresh mechanism for one authentication from configuration.

    Args:
        name: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``
            (case-insensitive).
        username: PLAIN and SCRAM user name (SCRAM with ``token_auth``: the
            delegation token id).
        password: PLAIN and SCRAM password (with ``token_auth``: the token HMAC).
        authzid: PLAIN and OAUTHBEARER authorization identity.
        token_provider: OAUTHBEARER token callback.
        extensions: OAUTHBEARER SASL extensions (KIP-342).
        token_auth: SCRAM with a delegation token (``tokenauth=true``).

    Raises:
        ConfigError: unknown mechanism, a missing credential, or an option
            that does not apply to the mechanism.
    """
    if not isinstance(name, str):
        raise ConfigError(f"SASL mechanism must be a string, not {type(name).__name__}")
    mech = name.strip().upper()
    if mech not in MECHANISMS:
        raise ConfigError(
            f"unsupported SASL mechanism {name!r}; use one of {', '.join(MECHANISMS)}"
        )

    def refuse(option: str, value: object) -> None:
        if value:  # None, False, "" and {} are "not set"
            raise ConfigError(f"{option} does not apply to SASL mechanism {mech}")

    if mech == "OAUTHBEARER":
        refuse("username", username)
        refuse("password", password)
        refuse("token_auth", token_auth)
        if token_provider is None:
            raise ConfigError("OAUTHBEARER needs a token_provider")
        return OAuthBearerMechanism(token_provider, extensions=extensions, authzid=authzid)

    refuse("token_provider", token_provider)
    refuse("extensions", extensions)
    if username is None or username == "":
        raise ConfigError(f"{mech} needs a username")
    if password is None:
        raise ConfigError(f"{mech} needs a password")
    if mech == "PLAIN":
        refuse("token_auth", token_auth)
        return PlainMechanism(username, password, authzid=authzid)
    refuse("authzid", authzid)
    hash_name = "sha256" if mech == "SCRAM-SHA-256" else "sha512"
    return ScramMechanism(username, password, hash_name=hash_name, token_auth=token_auth)


# -- the SaslHandshake / SaslAuthenticate driver ----------------------------


class _Phase(enum.Enum):
    HANDSHAKE = "waiting for the SaslHandshake response"
    SEND = "ready to send SaslAuthenticate"
    WAIT = "waiting for the SaslAuthenticate response"
    DONE = "authenticated"
    FAILED = "failed"


class SaslAuthenticator:
    """Runs one mechanism over Kafka's SaslHandshake and SaslAuthenticate exchange.

    It knows nothing of request classes or sockets; the connection layer does::

        auth = SaslAuthenticator(create_mechanism(...))
        # send SaslHandshake(mechanism=auth.mechanism_name), then:
        auth.handshake_response(resp.error_code, resp.mechanisms)
        while (data := auth.next_auth_bytes()) is not None:
            # send SaslAuthenticate(auth_bytes=data), then:
            auth.auth_response(r.error_code, r.error_message, r.auth_bytes,
                               r.session_lifetime_ms)
        deadline = auth.reauth_deadline(trio.current_time())

    With SaslHandshake v0 (no SaslAuthenticate), the same calls work with the
    raw tokens: pass error code 0 and a session lifetime of 0.

    For a KIP-368 re-authentication, build a new authenticator with a new
    mechanism of the same name.

    Args:
        mechanism: a fresh mechanism; it is used for this authentication only.
        rng: source of the re-authentication jitter (tests pass a seeded one).
    """

    def __init__(self, mechanism: SaslMechanism, *, rng: random.Random | None = None) -> None:
        self._mechanism = mechanism
        self._rng = rng if rng is not None else random.Random()
        self._phase = _Phase.HANDSHAKE
        self._started = False
        self._pending: bytes | None = None
        self._session_lifetime_ms = 0
        self._reauth_factor = 0.0

    def __repr__(self) -> str:
        return f"<SaslAuthenticator {self.mechanism_name} {self._phase.value}>"

    @property
    def mechanism(self) -> SaslMechanism:
        """The mechanism being run."""
        return self._mechanism

    @property
    def mechanism_name(self) -> str:
        """The name to send in the SaslHandshake request."""
        return self._mechanism.name

    @property
    def done(self) -> bool:
        """Whether authentication succeeded."""
        return self._phase is _Phase.DONE

    @property
    def session_lifetime_ms(self) -> int:
        """The broker's session lifetime (KIP-368); 0 means no re-authentication."""
        return self._session_lifetime_ms

    def _expect(self, phase: _Phase, call: str) -> None:
        if self._phase is not phase:
            raise IllegalSaslStateError(
                f"SASL {self.mechanism_name}: {call} is not valid: {self._phase.value}"
            )

    def handshake_response(self, error_code: int, enabled_mechanisms: Sequence[str]) -> None:
        """Feed the SaslHandshake response.

        Raises:
            UnsupportedSaslMechanismError: the broker does not enable this
                mechanism; the message lists the ones it does.
            KafkaError: another error code from the broker.
            IllegalSaslStateError: the handshake was already answered.
        """
        self._expect(_Phase.HANDSHAKE, "handshake_response()")
        if error_code == 0:
            self._phase = _Phase.SEND
            return
        self._phase = _Phase.FAILED
        if error_code == _UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(enabled_mechanisms) if enabled_mechanisms else "none"
            raise UnsupportedSaslMechanismError(
                f"the broker does not enable SASL mechanism {self.mechanism_name}; "
                f"it offers: {offered}"
            )
        raise_for_code(error_code, f"SaslHandshake for {self.mechanism_name} failed")

    def next_auth_bytes(self) -> bytes | None:
        """The auth bytes of the next SaslAuthenticate request, or None when done.

        Raises:
            IllegalSaslStateError: the handshake is not answered yet, a request
                is still awaiting its response, or authentication failed.
            SaslAuthenticationError: the mechanism failed to build its message.
        """
        if self._phase is _Phase.DONE:
            return None
        self._expect(_Phase.SEND, "next_auth_bytes()")
        if not self._started:
            self._started = True
            try:
                data = self._mechanism.initial_response()
            except BaseException:
                self._phase = _Phase.FAILED
                raise
        else:
            assert self._pending is not None
            data, self._pending = self._pending, None
        self._phase = _Phase.WAIT
        return data

    def auth_response(
        self,
        error_code: int,
        error_message: str | None,
        auth_bytes: bytes,
        session_lifetime_ms: int = 0,
    ) -> None:
        """Feed a SaslAuthenticate response.

        Raises:
            SaslAuthenticationError: the broker refused (code 58, with its
                message) or the mechanism rejected the broker's message.
            KafkaError: another error code from the broker.
            IllegalSaslStateError: no SaslAuthenticate request is outstanding.
        """
        self._expect(_Phase.WAIT, "auth_response()")
        if error_code != 0:
            self._phase = _Phase.FAILED
            if error_code == _SASL_AUTHENTICATION_FAILED:
                message = error_message or "SASL authentication failed"
                detail = getattr(self._mechanism, "failure_detail", None)
                if isinstance(detail, str) and detail:
                    message = f"{message} ({detail})"
                raise SaslAuthenticationError(f"{self.mechanism_name}: {message}")
            raise_for_code(error_code, error_message)
        self._session_lifetime_ms = max(0, int(session_lifetime_ms))
        if not self._mechanism.complete:
            try:
                reply = self._mechanism.process(bytes(auth_bytes))
            except BaseException:
                self._phase = _Phase.FAILED
                raise
            if reply is not None:
                self._pending = reply
                self._phase = _Phase.SEND
                return
            if not self._mechanism.complete:
                self._phase = _Phase.FAILED
                raise SaslAuthenticationError(
                    f"{self.mechanism_name}: the mechanism stopped before completing"
                )
        # A mechanism complete before this response (PLAIN) has nothing to
        # check in the broker's final bytes, as in Kafka's Java client.
        self._phase = _Phase.DONE
        low, high = _REAUTH_WINDOW
        self._reauth_factor = low + (high - low) * self._rng.random()

    def reauth_deadline(self, now: float) -> float | None:
        """When to re-authenticate (KIP-368), or None if the broker set no lifetime.

        Args:
            now: the monotonic time, in seconds, at which authentication
                completed, normally the current time right after :attr:`done`
                became true (e.g. ``trio.current_time()``).

        Returns:
            ``now`` plus 85% to 95% (fixed per authenticator, random to spread
            re-authentications) of the session lifetime, in seconds.

        Raises:
            IllegalSaslStateError: authentication has not succeeded.
        """
        self._expect(_Phase.DONE, "reauth_deadline()")
        if self._session_lifetime_ms <= 0:
            return None
        return now + self._session_lifetime_ms / 1000.0 * self._reauth_factor
