"""SASL client mechanisms (PLAIN, SCRAM, OAUTHBEARER) and the handshake driver."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import unicodedata
from dataclasses import dataclass, field

import pytest

from pykaf.errors import (
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    UnknownServerError,
    UnsupportedSaslMechanismError,
)
from pykaf.protocol.sasl import (
    MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    OAuthBearerMechanism,
    OAuthBearerToken,
    PlainMechanism,
    SaslAuthenticator,
    SaslMechanism,
    ScramMechanism,
    create_mechanism,
    unsecured_jwt,
)

# -- RFC test vectors ----------------------------------------------------------

# RFC 5802 section 5 (SCRAM-SHA-1), user "user", password "pencil".
RFC5802_NONCE = "fyko+d2lbbFgONRv9qkxdawL"
RFC5802_CLIENT_FIRST = b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
RFC5802_SERVER_FIRST = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
RFC5802_CLIENT_FINAL = (
    b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
)
RFC5802_SERVER_FINAL = b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="

# RFC 7677 section 3 (SCRAM-SHA-256), user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_mechanism(**kw: object) -> ScramMechanism:
    return ScramMechanism("user", "pencil", hash_name="sha256", client_nonce=RFC7677_NONCE, **kw)  # type: ignore[arg-type]


def at_server_final(**kw: object) -> ScramMechanism:
    """A SHA-256 mechanism that has sent its client-final (RFC 7677 vector)."""
    mech = rfc7677_mechanism(**kw)
    mech.initial_response()
    assert mech.process(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    return mech


# -- an independent SCRAM server, written from RFC 5802 section 3 ------------


@dataclass
class ScramServer:
    """Plays the server side with hashlib/hmac only, to check the client's proof."""

    hash_name: str
    password: bytes
    salt: bytes = b"pykaf-test-salt!"
    iterations: int = 4096
    server_nonce_suffix: str = "S3rv3rN0nc3"
    client_first_bare: bytes = b""
    server_first: bytes = b""
    seen: list[bytes] = field(default_factory=list)

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, getattr(hashlib, self.hash_name)).digest()

    def first(self, client_first: bytes) -> bytes:
        assert client_first.startswith(b"n,,")
        self.client_first_bare = client_first[3:]
        attrs = dict(a.split(b"=", 1) for a in self.client_first_bare.split(b","))
        nonce = attrs[b"r"] + self.server_nonce_suffix.encode()
        salt = base64.b64encode(self.salt)
        self.server_first = b"r=%s,s=%s,i=%d" % (nonce, salt, self.iterations)
        return self.server_first

    def final(self, client_final: bytes) -> bytes:
        without_proof, _, proof_attr = client_final.rpartition(b",")
        assert without_proof.startswith(b"c=biws,r=")
        assert proof_attr.startswith(b"p=")
        proof = base64.b64decode(proof_attr[2:])
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password, self.salt, self.iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        auth_message = self.client_first_bare + b"," + self.server_first + b"," + without_proof
        signature = self._hmac(stored_key, auth_message)
        recovered_key = bytes(x ^ y for x, y in zip(proof, signature, strict=True))
        if hashlib.new(self.hash_name, recovered_key).digest() != stored_key:
            raise AssertionError("client proof does not verify")
        server_key = self._hmac(salted, b"Server Key")
        return b"v=" + base64.b64encode(self._hmac(server_key, auth_message))


def run_scram(mech: ScramMechanism, server: ScramServer) -> None:
    server_first = server.first(mech.initial_response())
    server_final = server.final(mech.process(server_first) or b"")
    assert mech.process(server_final) is None
    assert mech.complete


# -- PLAIN ---------------------------------------------------------------------


def test_plain_message_without_authzid() -> None:
    mech = PlainMechanism("alice", "s3cret")
    assert mech.name == "PLAIN"
    assert not mech.complete
    assert mech.initial_response() == b"\x00alice\x00s3cret"
    assert mech.complete


def test_plain_message_with_authzid() -> None:
    mech = PlainMechanism("alice", "s3cret", authzid="admin")
    assert mech.initial_response() == b"admin\x00alice\x00s3cret"


def test_plain_sends_non_ascii_as_unnormalized_utf8() -> None:
    user = "jose\u0301"  # decomposed: NFC would turn it into "jos\u00e9"
    password = "\u2168pw"  # ROMAN NUMERAL NINE: SASLprep/NFKC would map it to "IX"
    message = PlainMechanism(user, password).initial_response()
    assert message == b"\x00" + user.encode() + b"\x00" + password.encode()
    assert unicodedata.normalize("NFKC", password).encode() not in message


def test_plain_accepts_empty_final_and_refuses_a_challenge() -> None:
    mech = PlainMechanism("alice", "pw")
    mech.initial_response()
    assert mech.process(b"") is None
    assert mech.complete
    other = PlainMechanism("alice", "pw")
    other.initial_response()
    with pytest.raises(SaslAuthenticationError, match="unexpected 3-byte"):
        other.process(b"why")
    assert not other.complete


def test_plain_wrong_state() -> None:
    mech = PlainMechanism("alice", "pw")
    with pytest.raises(IllegalSaslStateError):
        mech.process(b"")
    mech.initial_response()
    with pytest.raises(IllegalSaslStateError):
        mech.initial_response()


@pytest.mark.parametrize(
    ("username", "password", "authzid"),
    [
        ("al\x00ice", "pw", None),
        ("alice", "p\x00w", None),
        ("alice", "pw", "ad\x00min"),
        ("", "pw", None),
        ("alice", "\udc80", None),
        ("\ud800", "pw", None),
    ],
)
def test_plain_rejects_unsendable_credentials(
    username: str, password: str, authzid: str | None
) -> None:
    with pytest.raises(ConfigError):
        PlainMechanism(username, password, authzid=authzid)


# -- SCRAM: RFC vectors ------------------------------------------------------------


def test_scram_sha1_rfc5802_vector() -> None:
    mech = ScramMechanism("user", "pencil", hash_name="sha1", client_nonce=RFC5802_NONCE)
    assert mech.name == "SCRAM-SHA-1"
    assert mech.initial_response() == RFC5802_CLIENT_FIRST
    assert mech.process(RFC5802_SERVER_FIRST) == RFC5802_CLIENT_FINAL
    assert not mech.complete
    assert mech.process(RFC5802_SERVER_FINAL) is None
    assert mech.complete


def test_scram_sha256_rfc7677_vector() -> None:
    mech = rfc7677_mechanism()
    assert mech.name == "SCRAM-SHA-256"
    assert mech.client_nonce == RFC7677_NONCE
    assert mech.initial_response() == RFC7677_CLIENT_FIRST
    assert mech.process(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not mech.complete
    assert mech.process(RFC7677_SERVER_FINAL) is None
    assert mech.complete


def test_scram_sha512_against_independent_computation() -> None:
    nonce = "Kafka512ClientNonce"
    password = "pencil-512"
    salt = b"\x01\x02salty\xff"
    server_nonce = nonce + "ServerPart"
    server_first = b"r=%s,s=%s,i=4096" % (server_nonce.encode(), base64.b64encode(salt))

    def mac(key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, hashlib.sha512).digest()

    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 4096)
    client_key = mac(salted, b"Client Key")
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = b"c=biws,r=" + server_nonce.encode()
    auth_message = b"n=user,r=" + nonce.encode() + b"," + server_first + b"," + without_proof
    client_signature = mac(stored_key, auth_message)
    expected_proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
    expected_server_sig = mac(mac(salted, b"Server Key"), auth_message)
    assert len(expected_proof) == 64

    mech = ScramMechanism("user", password, hash_name="sha512", client_nonce=nonce)
    assert mech.name == "SCRAM-SHA-512"
    assert mech.initial_response() == b"n,,n=user,r=" + nonce.encode()
    assert mech.process(server_first) == without_proof + b",p=" + base64.b64encode(expected_proof)
    assert mech.process(b"v=" + base64.b64encode(expected_server_sig)) is None
    assert mech.complete


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_scram_against_independent_server(hash_name: str) -> None:
    mech = ScramMechanism("kafka-user", "a long password", hash_name=hash_name)
    run_scram(mech, ScramServer(hash_name, b"a long password"))


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_scram_wrong_password_is_caught_by_the_server(hash_name: str) -> None:
    mech = ScramMechanism("kafka-user", "wrong", hash_name=hash_name)
    with pytest.raises(AssertionError, match="does not verify"):
        run_scram(mech, ScramServer(hash_name, b"right"))


def test_scram_escapes_username() -> None:
    mech = ScramMechanism("a=b,c", "pw", client_nonce="abc")
    assert mech.initial_response() == b"n,,n=a=3Db=2Cc,r=abc"


def test_scram_token_auth_extension_in_client_first_and_auth_message() -> None:
    mech = ScramMechanism("token-id", "token-hmac", token_auth=True, client_nonce="xyz")
    server = ScramServer("sha256", b"token-hmac")
    client_first = mech.initial_response()
    assert client_first == b"n,,n=token-id,r=xyz,tokenauth=true"
    # The server's check uses the bare message with the extension: it must verify.
    server_final = server.final(mech.process(server.first(client_first)) or b"")
    assert mech.process(server_final) is None
    assert mech.complete


def test_scram_password_is_not_saslprepped() -> None:
    password = "\u2168\u00a0pw"  # SASLprep maps U+00A0 to a space and NFKC maps U+2168 to "IX"
    mech = ScramMechanism("user", password, hash_name="sha256")
    run_scram(mech, ScramServer("sha256", password.encode("utf-8")))
    normalized = unicodedata.normalize("NFKC", password).replace("\u00a0", " ")
    assert normalized != password
    prepped = ScramMechanism("user", password, hash_name="sha256")
    with pytest.raises(AssertionError, match="does not verify"):
        run_scram(prepped, ScramServer("sha256", normalized.encode("utf-8")))


def test_scram_non_ascii_username_sent_as_utf8() -> None:
    mech = ScramMechanism("j\u00fcrgen", "pw", client_nonce="n")
    assert mech.initial_response() == "n,,n=j\u00fcrgen,r=n".encode()


def test_scram_default_nonce_is_random_and_printable() -> None:
    first = ScramMechanism("user", "pw")
    second = ScramMechanism("user", "pw")
    assert first.client_nonce != second.client_nonce
    assert len(first.client_nonce) >= 24
    assert all(0x21 <= ord(ch) <= 0x7E and ch != "," for ch in first.client_nonce)
    assert first.initial_response() == f"n,,n=user,r={first.client_nonce}".encode()


# -- SCRAM: failures -----------------------------------------------------------------


def test_scram_tampered_server_signature() -> None:
    mech = at_server_final()
    sig = bytearray(base64.b64decode(RFC7677_SERVER_FINAL[2:]))
    sig[0] ^= 1
    with pytest.raises(SaslAuthenticationError, match="server signature mismatch"):
        mech.process(b"v=" + base64.b64encode(bytes(sig)))
    assert not mech.complete
    with pytest.raises(IllegalSaslStateError):
        mech.process(RFC7677_SERVER_FINAL)


def test_scram_truncated_server_signature() -> None:
    mech = at_server_final()
    with pytest.raises(SaslAuthenticationError, match="mismatch"):
        mech.process(b"v=" + base64.b64encode(base64.b64decode(RFC7677_SERVER_FINAL[2:])[:-1]))


def test_scram_server_final_error_attribute() -> None:
    mech = at_server_final()
    with pytest.raises(SaslAuthenticationError, match="server error: other-error"):
        mech.process(b"e=other-error")
    assert not mech.complete


@pytest.mark.parametrize(
    "server_final", [b"", b"x=1", b"v=!!not-base64!!", b"vv", b"\xff\xfe", b"r=abc"]
)
def test_scram_malformed_server_final(server_final: bytes) -> None:
    mech = at_server_final()
    with pytest.raises(SaslAuthenticationError, match="server-final"):
        mech.process(server_final)
    assert not mech.complete


@pytest.mark.parametrize(
    "server_nonce",
    [
        "someoneElsesNonce%hvYDpWUa2Ra",  # does not start with the client nonce
        "rOprNGfwEbeRWgbNEkq",  # a prefix of the client nonce
        RFC7677_NONCE,  # the client nonce alone: no server part
    ],
)
def test_scram_bad_server_nonce(server_nonce: str) -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        mech.process(b"r=%s,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" % server_nonce.encode())


def test_scram_iteration_count_minimum() -> None:
    assert SCRAM_MIN_ITERATIONS == 4096
    mech = rfc7677_mechanism()
    mech.initial_response()
    low = RFC7677_SERVER_FIRST.replace(b"i=4096", b"i=4095")
    with pytest.raises(SaslAuthenticationError, match="4095 iterations, below the minimum 4096"):
        mech.process(low)


def test_scram_iteration_count_maximum() -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError, match="above the maximum"):
        mech.process(RFC7677_SERVER_FIRST.replace(b"i=4096", b"i=1000001"))


def test_scram_configurable_iteration_bounds() -> None:
    strict = rfc7677_mechanism(min_iterations=8192)
    strict.initial_response()
    with pytest.raises(SaslAuthenticationError, match="below the minimum 8192"):
        strict.process(RFC7677_SERVER_FIRST)
    capped = rfc7677_mechanism(max_iterations=4096)
    capped.initial_response()
    assert capped.process(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL


@pytest.mark.parametrize(
    "server_first",
    [
        b"",
        b"garbage",
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOxyz,i=4096",  # wrong order
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==",  # no i=
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=abc",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-4096",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=\xef\xbc\x94096",  # fullwidth 4
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=***,i=4096",  # salt not base64
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=,i=4096",  # empty salt
        b"r=rOprNGfwEbeRWgbNEkqO\x7f,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # unprintable nonce
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,",  # trailing comma
        b"\xff\xfe",  # not UTF-8
    ],
)
def test_scram_malformed_server_first(server_first: bytes) -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError, match="server-first"):
        mech.process(server_first)
    assert not mech.complete


def test_scram_server_first_extensions_are_ignored() -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    # Extensions after i= are not part of the RFC vector, so the proof changes;
    # what matters is that the message is accepted and a proof produced.
    reply = mech.process(RFC7677_SERVER_FIRST + b",x=ext")
    assert reply is not None
    assert reply.startswith(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=")
    assert reply != RFC7677_CLIENT_FINAL


def test_scram_server_first_error_attribute() -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError, match="server error: unknown-user"):
        mech.process(b"e=unknown-user")


def test_scram_server_first_mandatory_extension() -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError, match="mandatory extension"):
        mech.process(b"m=whatever," + RFC7677_SERVER_FIRST)


def test_scram_wrong_state() -> None:
    mech = rfc7677_mechanism()
    with pytest.raises(IllegalSaslStateError, match="process"):
        mech.process(RFC7677_SERVER_FIRST)
    mech.initial_response()
    with pytest.raises(IllegalSaslStateError, match="initial_response"):
        mech.initial_response()
    mech.process(RFC7677_SERVER_FIRST)
    mech.process(RFC7677_SERVER_FINAL)
    assert mech.complete
    with pytest.raises(IllegalSaslStateError):
        mech.process(RFC7677_SERVER_FINAL)
    assert mech.complete


def test_scram_failure_is_final() -> None:
    mech = rfc7677_mechanism()
    mech.initial_response()
    with pytest.raises(SaslAuthenticationError):
        mech.process(b"garbage")
    with pytest.raises(IllegalSaslStateError):
        mech.process(RFC7677_SERVER_FIRST)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hash_name": "md5"},
        {"hash_name": "sha1", "client_nonce": "has,comma"},
        {"client_nonce": ""},
        {"client_nonce": "sp ace"},
        {"min_iterations": 0},
        {"min_iterations": 5000, "max_iterations": 4096},
    ],
)
def test_scram_rejects_bad_options(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ScramMechanism("user", "pw", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("username", "password"), [("", "pw"), ("u\x00", "pw"), ("u", "\udcff")])
def test_scram_rejects_bad_credentials(username: str, password: str) -> None:
    with pytest.raises(ConfigError):
        ScramMechanism(username, password)


# -- OAUTHBEARER ---------------------------------------------------------------------


def test_oauthbearer_string_token() -> None:
    mech = OAuthBearerMechanism(lambda: "abc.def.ghi")
    assert mech.name == "OAUTHBEARER"
    assert mech.initial_response() == b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"
    assert not mech.complete
    assert mech.process(b"") is None
    assert mech.complete
    assert mech.server_error is None
    assert mech.failure_detail is None


def test_oauthbearer_token_object_with_extensions() -> None:
    token = OAuthBearerToken("tok", {"traceId": "123", "logicalCluster": "lkc-1"})
    mech = OAuthBearerMechanism(lambda: token)
    assert mech.initial_response() == (
        b"n,,\x01auth=Bearer tok\x01traceId=123\x01logicalCluster=lkc-1\x01\x01"
    )


def test_oauthbearer_duck_typed_token_object() -> None:
    class Token:
        value = "duck"

    assert OAuthBearerMechanism(Token).initial_response() == b"n,,\x01auth=Bearer duck\x01\x01"


def test_oauthbearer_config_extensions_merge_with_token_ones() -> None:
    token = OAuthBearerToken("tok", {"b": "from token"})
    mech = OAuthBearerMechanism(lambda: token, extensions={"a": "1", "b": "from config"})
    assert mech.initial_response() == b"n,,\x01auth=Bearer tok\x01a=1\x01b=from token\x01\x01"


def test_oauthbearer_authzid() -> None:
    mech = OAuthBearerMechanism(lambda: "tok", authzid="alice")
    assert mech.initial_response() == b"n,a=alice,\x01auth=Bearer tok\x01\x01"


def test_oauthbearer_calls_provider_once_per_authentication() -> None:
    calls: list[int] = []

    def provider() -> str:
        calls.append(1)
        return f"token{len(calls)}"

    first = OAuthBearerMechanism(provider)
    assert calls == []  # not at construction
    assert b"Bearer token1\x01" in first.initial_response()
    second = OAuthBearerMechanism(provider)
    assert b"Bearer token2\x01" in second.initial_response()
    assert len(calls) == 2


@pytest.mark.parametrize(
    "extensions",
    [
        {"auth": "x"},
        {"1abc": "x"},
        {"a_b": "x"},
        {"": "x"},
        {"k": ""},
        {"k": "bad\x01value"},
        {"k": "caf\u00e9"},
    ],
)
def test_oauthbearer_invalid_extensions(extensions: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        OAuthBearerMechanism(lambda: "tok", extensions=extensions)
    mech = OAuthBearerMechanism(lambda: OAuthBearerToken("tok", extensions))
    with pytest.raises(SaslAuthenticationError, match="invalid extension"):
        mech.initial_response()
    with pytest.raises(IllegalSaslStateError):
        mech.initial_response()


def test_oauthbearer_extension_value_allows_space_tab_crlf() -> None:
    mech = OAuthBearerMechanism(lambda: "tok", extensions={"k": "a b\tc\r\nd"})
    assert b"\x01k=a b\tc\r\nd\x01\x01" in mech.initial_response()


@pytest.mark.parametrize("value", ["", "has space", "ctl\x01", "tok=en", "\u00e9t\u00e9", "a\n"])
def test_oauthbearer_invalid_token_value(value: str) -> None:
    mech = OAuthBearerMechanism(lambda: value)
    with pytest.raises(SaslAuthenticationError, match="bearer token"):
        mech.initial_response()


def test_oauthbearer_provider_returning_garbage() -> None:
    mech = OAuthBearerMechanism(lambda: 42)  # type: ignore[arg-type, return-value]
    with pytest.raises(SaslAuthenticationError, match="int"):
        mech.initial_response()


def test_oauthbearer_provider_failure() -> None:
    def provider() -> str:
        raise RuntimeError("idp down")

    mech = OAuthBearerMechanism(provider)
    with pytest.raises(SaslAuthenticationError, match="idp down") as info:
        mech.initial_response()
    assert isinstance(info.value.__context__, RuntimeError)


def test_oauthbearer_server_error_challenge() -> None:
    mech = OAuthBearerMechanism(lambda: "tok")
    mech.initial_response()
    error = {"status": "invalid_token", "scope": "kafka"}
    assert mech.process(json.dumps(error).encode()) == b"\x01"
    assert not mech.complete
    assert mech.server_error == error
    assert mech.failure_detail == "server status: invalid_token, scope: kafka"
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        mech.process(b"")
    assert not mech.complete


def test_oauthbearer_non_json_server_error() -> None:
    mech = OAuthBearerMechanism(lambda: "tok")
    mech.initial_response()
    assert mech.process(b"not json") == b"\x01"
    assert mech.server_error == {"raw": "not json"}
    assert mech.failure_detail == "server error: 'not json'"


def test_oauthbearer_wrong_state() -> None:
    mech = OAuthBearerMechanism(lambda: "tok")
    with pytest.raises(IllegalSaslStateError):
        mech.process(b"")
    mech.initial_response()
    mech.process(b"")
    with pytest.raises(IllegalSaslStateError):
        mech.process(b"")


def test_oauthbearer_provider_must_be_callable() -> None:
    with pytest.raises(ConfigError):
        OAuthBearerMechanism("not callable")  # type: ignore[arg-type]


def _b64url_decode(part: str) -> bytes:
    assert "=" not in part
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_unsecured_jwt() -> None:
    jwt = unsecured_jwt("alice", lifetime_s=600, scope=["read", "write"], now=1_700_000_000.7)
    header, payload, signature = jwt.split(".")
    assert signature == ""
    assert json.loads(_b64url_decode(header)) == {"alg": "none"}
    assert json.loads(_b64url_decode(payload)) == {
        "iat": 1_700_000_000,
        "exp": 1_700_000_600,
        "sub": "alice",
        "scope": ["read", "write"],
    }
    mech = OAuthBearerMechanism(lambda: jwt)
    assert mech.initial_response() == b"n,,\x01auth=Bearer " + jwt.encode() + b"\x01\x01"


def test_unsecured_jwt_defaults() -> None:
    jwt = unsecured_jwt("svc-\u00e9", scope="one")
    claims = json.loads(_b64url_decode(jwt.split(".")[1]))
    assert claims["sub"] == "svc-\u00e9"
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["scope"] == ["one"]
    assert "scope" not in json.loads(_b64url_decode(unsecured_jwt("x").split(".")[1]))


@pytest.mark.parametrize(("principal", "lifetime"), [("", 60), ("alice", 0), ("alice", -1)])
def test_unsecured_jwt_rejects_bad_input(principal: str, lifetime: float) -> None:
    with pytest.raises(ConfigError):
        unsecured_jwt(principal, lifetime_s=lifetime)


# -- the factory -----------------------------------------------------------------------


def test_create_mechanism_builds_each_mechanism() -> None:
    plain = create_mechanism("PLAIN", username="u", password="p")
    assert isinstance(plain, PlainMechanism)
    assert plain.initial_response() == b"\x00u\x00p"
    sha256 = create_mechanism("scram-sha-256", username="u", password="p")
    assert isinstance(sha256, ScramMechanism)
    assert sha256.name == "SCRAM-SHA-256"
    sha512 = create_mechanism(" SCRAM-SHA-512 ", username="u", password="p")
    assert sha512.name == "SCRAM-SHA-512"
    run_scram(sha512, ScramServer("sha512", b"p"))  # type: ignore[arg-type]
    oauth = create_mechanism("OAUTHBEARER", token_provider=lambda: "t", extensions={"k": "v"})
    assert isinstance(oauth, OAuthBearerMechanism)
    assert oauth.initial_response() == b"n,,\x01auth=Bearer t\x01k=v\x01\x01"
    assert {m.name for m in (plain, sha256, sha512, oauth)} == set(MECHANISMS)
    for mech in (plain, sha256, sha512, oauth):
        assert isinstance(mech, SaslMechanism)


def test_create_mechanism_delegation_token() -> None:
    mech = create_mechanism("SCRAM-SHA-512", username="tid", password="hmac", token_auth=True)
    assert mech.initial_response().endswith(b",tokenauth=true")


def test_create_mechanism_plain_authzid() -> None:
    mech = create_mechanism("PLAIN", username="u", password="p", authzid="z")
    assert mech.initial_response() == b"z\x00u\x00p"


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("GSSAPI", {"username": "u", "password": "p"}, "unsupported SASL mechanism"),
        ("SCRAM-SHA-1", {"username": "u", "password": "p"}, "unsupported SASL mechanism"),
        ("PLAIN", {"password": "p"}, "needs a username"),
        ("PLAIN", {"username": "", "password": "p"}, "needs a username"),
        ("PLAIN", {"username": "u"}, "needs a password"),
        ("SCRAM-SHA-256", {"username": "u"}, "needs a password"),
        ("SCRAM-SHA-512", {"password": "p"}, "needs a username"),
        ("OAUTHBEARER", {}, "token_provider"),
        ("OAUTHBEARER", {"token_provider": lambda: "t", "username": "u"}, "username"),
        ("OAUTHBEARER", {"token_provider": lambda: "t", "token_auth": True}, "token_auth"),
        ("PLAIN", {"username": "u", "password": "p", "token_provider": str}, "token_provider"),
        ("PLAIN", {"username": "u", "password": "p", "token_auth": True}, "token_auth"),
        ("SCRAM-SHA-256", {"username": "u", "password": "p", "authzid": "z"}, "authzid"),
        ("SCRAM-SHA-256", {"username": "u", "password": "p", "extensions": {"a": "b"}}, "ext"),
        ("OAUTHBEARER", {"token_provider": lambda: "t", "extensions": {"auth": "x"}}, "auth"),
    ],
)
def test_create_mechanism_config_errors(name: str, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        create_mechanism(name, **kwargs)  # type: ignore[arg-type]


def test_create_mechanism_rejects_non_string_name() -> None:
    with pytest.raises(ConfigError):
        create_mechanism(None)  # type: ignore[arg-type]


# -- the SaslHandshake / SaslAuthenticate driver -----------------------------------------


def test_authenticator_scram_rfc7677_exchange() -> None:
    auth = SaslAuthenticator(rfc7677_mechanism())
    assert auth.mechanism_name == "SCRAM-SHA-256"
    auth.handshake_response(0, ["PLAIN", "SCRAM-SHA-256"])
    assert auth.next_auth_bytes() == RFC7677_CLIENT_FIRST
    auth.auth_response(0, None, RFC7677_SERVER_FIRST, 0)
    assert not auth.done
    assert auth.next_auth_bytes() == RFC7677_CLIENT_FINAL
    auth.auth_response(0, None, RFC7677_SERVER_FINAL, 3_600_000)
    assert auth.done
    assert auth.mechanism.complete
    assert auth.next_auth_bytes() is None
    assert auth.session_lifetime_ms == 3_600_000


def test_authenticator_plain_single_round() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "p"))
    auth.handshake_response(0, ["PLAIN"])
    assert auth.next_auth_bytes() == b"\x00u\x00p"
    assert not auth.done  # complete for the mechanism, but the broker has not answered
    auth.auth_response(0, None, b"", 0)
    assert auth.done
    assert auth.next_auth_bytes() is None


def test_authenticator_oauthbearer_exchange() -> None:
    auth = SaslAuthenticator(OAuthBearerMechanism(lambda: unsecured_jwt("alice")))
    auth.handshake_response(0, ["OAUTHBEARER"])
    assert (auth.next_auth_bytes() or b"").startswith(b"n,,\x01auth=Bearer ey")
    auth.auth_response(0, None, b"", 1000)
    assert auth.done


def test_authenticator_oauthbearer_server_error_flow() -> None:
    auth = SaslAuthenticator(OAuthBearerMechanism(lambda: "expired"))
    auth.handshake_response(0, ["OAUTHBEARER"])
    auth.next_auth_bytes()
    auth.auth_response(0, None, b'{"status":"invalid_token"}', 0)
    assert auth.next_auth_bytes() == b"\x01"
    with pytest.raises(SaslAuthenticationError) as info:
        auth.auth_response(58, "Authentication failed due to invalid credentials", b"", 0)
    message = str(info.value)
    assert "Authentication failed due to invalid credentials" in message
    assert "invalid_token" in message
    assert not auth.done


def test_authenticator_unsupported_mechanism_lists_broker_offer() -> None:
    auth = SaslAuthenticator(create_mechanism("SCRAM-SHA-512", username="u", password="p"))
    with pytest.raises(UnsupportedSaslMechanismError, match="offers: PLAIN, SCRAM-SHA-256") as info:
        auth.handshake_response(33, ["PLAIN", "SCRAM-SHA-256"])
    assert "SCRAM-SHA-512" in str(info.value)
    with pytest.raises(IllegalSaslStateError):
        auth.next_auth_bytes()


def test_authenticator_unsupported_mechanism_empty_offer() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "p"))
    with pytest.raises(UnsupportedSaslMechanismError, match="offers: none"):
        auth.handshake_response(33, [])


def test_authenticator_handshake_other_error() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "p"))
    with pytest.raises(UnknownServerError):
        auth.handshake_response(-1, [])
    assert not auth.done


def test_authenticator_broker_refuses() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "wrong"))
    auth.handshake_response(0, ["PLAIN"])
    auth.next_auth_bytes()
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        auth.auth_response(58, "Invalid username or password", b"", 0)
    assert not auth.done
    with pytest.raises(IllegalSaslStateError):
        auth.next_auth_bytes()


def test_authenticator_broker_refuses_without_message() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "wrong"))
    auth.handshake_response(0, ["PLAIN"])
    auth.next_auth_bytes()
    with pytest.raises(SaslAuthenticationError, match="PLAIN: SASL authentication failed"):
        auth.auth_response(58, None, b"", 0)


def test_authenticator_other_auth_error_code() -> None:
    auth = SaslAuthenticator(PlainMechanism("u", "p"))
    auth.handshake_response(0, ["PLAIN"])
    auth.next_auth_bytes()
    with pytest.raises(IllegalSaslStateError, match="bad state"):
        auth.auth_response(34, "bad state", b"", 0)
    assert not auth.done


def test_authenticator_mechanism_failure_propagates() -> None:
    auth = SaslAuthenticator(rfc7677_mechanism())
    auth.handshake_response(0, ["SCRAM-SHA-256"])
    auth.next_auth_bytes()
    auth.auth_response(0, None, RFC7677_SERVER_FIRST, 0)
    auth.next_auth_bytes()
    with pytest.raises(SaslAuthenticationError, match="mismatch"):
        auth.auth_response(0, None, b"v=" + base64.b64encode(b"\x00" * 32), 0)
    assert not auth.done
    with pytest.raises(IllegalSaslStateError):
        auth.next_auth_bytes()


def test_authenticator_initial_response_failure() -> None:
    def provider() -> str:
        raise OSError("no token")

    auth = SaslAuthenticator(OAuthBearerMechanism(provider))
    auth.handshake_response(0, ["OAUTHBEARER"])
    with pytest.raises(SaslAuthenticationError, match="no token"):
        auth.next_auth_bytes()
    with pytest.raises(IllegalSaslStateError):
        auth.next_auth_bytes()


class StallingMechanism:
    """Never completes and has nothing to say after the first message."""

    name = "STALL"
    complete = False

    def initial_response(self) -> bytes:
        return b"hello"

    def process(self, challenge: bytes) -> bytes | None:
        return None


def test_authenticator_mechanism_that_stalls() -> None:
    auth = SaslAuthenticator(StallingMechanism())
    auth.handshake_response(0, ["STALL"])
    assert auth.next_auth_bytes() == b"hello"
    with pytest.raises(SaslAuthenticationError, match="stopped before completing"):
        auth.auth_response(0, None, b"", 0)
    assert not auth.done


def test_authenticator_call_order() -> None:
    auth = SaslAuthenticator(rfc7677_mechanism())
    with pytest.raises(IllegalSaslStateError):
        auth.next_auth_bytes()
    with pytest.raises(IllegalSaslStateError):
        auth.auth_response(0, None, b"", 0)
    with pytest.raises(IllegalSaslStateError):
        auth.reauth_deadline(0.0)
    auth.handshake_response(0, ["SCRAM-SHA-256"])
    with pytest.raises(IllegalSaslStateError):
        auth.handshake_response(0, ["SCRAM-SHA-256"])
    with pytest.raises(IllegalSaslStateError):
        auth.auth_response(0, None, RFC7677_SERVER_FIRST, 0)
    auth.next_auth_bytes()
    with pytest.raises(IllegalSaslStateError, match="waiting for the SaslAuthenticate"):
        auth.next_auth_bytes()
    auth.auth_response(0, None, RFC7677_SERVER_FIRST, 0)
    with pytest.raises(IllegalSaslStateError):
        auth.auth_response(0, None, RFC7677_SERVER_FINAL, 0)


class FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def plain_done(lifetime_ms: int, rng: random.Random | None = None) -> SaslAuthenticator:
    auth = SaslAuthenticator(PlainMechanism("u", "p"), rng=rng)
    auth.handshake_response(0, ["PLAIN"])
    auth.next_auth_bytes()
    auth.auth_response(0, None, b"", lifetime_ms)
    assert auth.done
    return auth


def test_reauth_deadline_without_lifetime() -> None:
    assert plain_done(0).reauth_deadline(100.0) is None
    negative = plain_done(-5)
    assert negative.session_lifetime_ms == 0
    assert negative.reauth_deadline(100.0) is None


@pytest.mark.parametrize(("jitter", "expected"), [(0.0, 108.5), (0.5, 109.0), (1.0, 109.5)])
def test_reauth_deadline_window(jitter: float, expected: float) -> None:
    auth = plain_done(10_000, FixedRandom(jitter))
    assert auth.reauth_deadline(100.0) == pytest.approx(expected)


def test_reauth_deadline_is_stable_and_jittered() -> None:
    deadlines = set()
    for seed in range(20):
        auth = plain_done(10_000, random.Random(seed))
        first = auth.reauth_deadline(50.0)
        assert first == auth.reauth_deadline(50.0)
        assert first is not None
        assert 58.5 <= first <= 59.5
        deadlines.add(first)
    assert len(deadlines) > 1


def test_session_lifetime_comes_from_the_last_response() -> None:
    auth = SaslAuthenticator(rfc7677_mechanism(), rng=FixedRandom(0.0))
    auth.handshake_response(0, ["SCRAM-SHA-256"])
    auth.next_auth_bytes()
    auth.auth_response(0, None, RFC7677_SERVER_FIRST, 999)
    auth.next_auth_bytes()
    auth.auth_response(0, None, RFC7677_SERVER_FINAL, 2000)
    assert auth.session_lifetime_ms == 2000
    assert auth.reauth_deadline(0.0) == pytest.approx(1.7)
