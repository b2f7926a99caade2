"""Configuration: every option with its default, meaning and validation, in one place.

Options are dataclass fields whose metadata carries the documentation, so the
configuration reference in ``docs/`` is generated from these definitions and
cannot drift. A config is validated once, when it is built; a bad value is a
:class:`~pykaf.errors.ConfigError` naming the option. Durations are seconds.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pykaf.errors import ConfigError

T = TypeVar("T", bound="BaseConfig")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: metadata_recovery_strategy values: go back to bootstrap_servers, or never.
METADATA_RECOVERY_STRATEGIES = ("rebootstrap", "none")


#: What a secret option's value shows as in ``repr()`` (and so in logs and tracebacks).
MASK = "***"


def opt(default: Any, doc: str, **kw: Any) -> Any:
    """Declare an option: its default and one line on what it means.

    ``secret=True`` marks a value (a password) that ``repr()`` shows as
    :data:`MASK`, so that a logged or printed configuration never leaks it.
    """
    if callable(default) and not isinstance(default, type):
        return field(default_factory=default, metadata={"doc": doc, **kw})
    return field(default=default, metadata={"doc": doc, **kw})


@dataclass(frozen=True)
class BaseConfig:
    """Common machinery: build from keyword arguments, reject unknown names."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Set before @dataclass runs on the subclass, which then keeps it
        # instead of writing a repr that would show the secrets.
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = BaseConfig.__repr__  # type: ignore[method-assign]

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("secret") and value is not None:
                shown.append(f"{f.name}={MASK!r}")
            else:
                shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    @classmethod
    def from_kwargs(cls: type[T], **kwargs: Any) -> T:
        """Build and validate a config; unknown option names are a ConfigError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, names, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(f"unknown option(s) for {cls.__name__}: {', '.join(hints)}")
        try:
            return cls(**kwargs)
        except TypeError as exc:  # e.g. a missing required option
            raise ConfigError(str(exc)) from None

    def replace(self: T, **changes: Any) -> T:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def options(cls) -> list[tuple[str, Any, str]]:
        """(name, default, doc) of every option, for the configuration reference."""
        out = []
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = None
            out.append((f.name, default, f.metadata.get("doc", "")))
        return out


def check(cond: bool, name: str, value: Any, what: str) -> None:
    """Raise ConfigError(``name``) unless ``cond``."""
    if not cond:
        raise ConfigError(f"{name}={value!r}: {what}")


def positive(name: str, value: Any, *, allow_zero: bool = False) -> None:
    """Check a positive number (or non-negative with ``allow_zero``)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    check(is_number, name, value, f"must be a number, not {type(value).__name__}")
    ok = value >= 0 if allow_zero else value > 0
    check(ok, name, value, "must be >= 0" if allow_zero else "must be > 0")


def parse_bootstrap(servers: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """Turn "host:port,host2:port2" (or a list) into [(host, port), ...].

    Raises:
        ConfigError: not host:port strings (a confluent-kafka style dict of
            options, for one, which pykaf takes as keywords instead).
    """
    if isinstance(servers, dict):
        raise ConfigError(
            f"bootstrap_servers={servers!r}: a dict of options; pykaf takes the servers,"
            " then options as keywords with pykaf's names (docs/configuration.md),"
            " e.g. Producer('host:9092', client_id='app')"
        )
    if not isinstance(servers, (str, list, tuple)) or not all(
        isinstance(item, str) for item in ([servers] if isinstance(servers, str) else servers)
    ):
        raise ConfigError(
            f"bootstrap_servers={servers!r}: must be 'host:port,host:port' or a list of"
            " 'host:port' strings"
        )
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        for prefix in ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://"):
            if item.upper().startswith(prefix):
                item = item[len(prefix) :]
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap server {raw!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ConfigError("bootstrap_servers is empty")
    return out


def bootstrap_argument(servers: Any) -> str | list[str]:
    """A ``bootstrap_servers`` argument as the option takes it (a string, or a list).

    The sync classes take any sequence of ``host:port``; a dict (a
    confluent-kafka style configuration) is refused here, with a hint,
    rather than read as a list of its keys.

    Raises:
        ConfigError: not ``host:port`` strings.
    """
    value = servers
    if not isinstance(servers, (str, dict)) and isinstance(servers, Iterable):
        value = list(servers)
    parse_bootstrap(value)
    return value  # type: ignore[no-any-return]


TokenProvider = Callable[[], Any]


@dataclass(frozen=True)
class ClientConfig(BaseConfig):
    """Options of the cluster client; producer, consumer and admin accept them too."""

    bootstrap_servers: str | list[str] = opt(
        "localhost:9092", "Brokers to bootstrap from: 'host:port,host:port' or a list."
    )
    client_id: str = opt("pykaf", "Sent with every request; shows up in broker logs and quotas.")
    request_timeout: float = opt(
        30.0, "Seconds to wait for a response before the connection is dropped."
    )
    connect_timeout: float = opt(
        10.0,
        "Seconds to open a TCP (and TLS) connection and agree on API versions; until a "
        "broker first answers, also how long an unreachable cluster is retried.",
    )
    max_in_flight_per_connection: int = opt(
        5, "Requests pipelined on one broker connection before a sender waits."
    )
    metadata_max_age: float = opt(
        300.0, "Seconds after which metadata is refreshed even if nothing asked for it."
    )
    metadata_full: bool = opt(
        True, "Refresh metadata for all topics (True) or only the ones in use (False)."
    )
    allow_auto_create_topics: bool = opt(
        False, "Ask the broker to create unknown topics when metadata is requested for them."
    )
    retry_backoff: float = opt(
        0.1,
        "Seconds to wait before the first retry of a failed request or attach; the wait "
        "doubles per consecutive failure up to retry_backoff_max, with 20% jitter (KIP-580).",
    )
    retry_backoff_max: float = opt(
        1.0, "Upper bound, seconds, of the exponential backoff between retries."
    )
    reconnect_backoff: float = opt(
        0.05, "Initial seconds to wait before reconnecting to a broker (doubles per failure)."
    )
    reconnect_backoff_max: float = opt(1.0, "Upper bound of the reconnect backoff, seconds.")
    metadata_recovery_strategy: str = opt(
        "rebootstrap",
        "What the client does when none of the brokers it learned from metadata answers "
        "(KIP-899/KIP-1102): 'rebootstrap' forgets them and starts again from "
        "bootstrap_servers; 'none' keeps trying the known brokers only.",
    )
    metadata_recovery_rebootstrap_trigger: float = opt(
        300.0,
        "With metadata_recovery_strategy='rebootstrap': seconds of failing metadata "
        "refreshes after which the client rebootstraps even if some known broker still "
        "accepts connections (one that hangs, for example).",
    )
    max_response_bytes: int = opt(
        512 * 1024 * 1024, "Largest response frame accepted from a broker, in bytes."
    )
    security_protocol: str = opt(
        "", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; empty: derived from the TLS/SASL options."
    )
    ssl_context: ssl.SSLContext | None = opt(None, "A ready ssl.SSLContext; enables TLS.")
    ssl_cafile: str | None = opt(None, "CA bundle to verify brokers with; enables TLS.")
    ssl_certfile: str | None = opt(None, "Client certificate (PEM) for mutual TLS.")
    ssl_keyfile: str | None = opt(None, "Private key (PEM) of the client certificate.")
    ssl_password: str | None = opt(None, "Password of the private key, if encrypted.", secret=True)
    ssl_check_hostname: bool = opt(True, "Verify the broker's certificate matches its host name.")
    sasl_mechanism: str | None = opt(
        None, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; enables SASL."
    )
    sasl_username: str | None = opt(None, "SASL user name (PLAIN and SCRAM).")
    sasl_password: str | None = opt(None, "SASL password (PLAIN and SCRAM).", secret=True)
    sasl_oauth_token_provider: TokenProvider | None = opt(
        None, "OAUTHBEARER: a callable returning a token string or an object with .value."
    )
    on_request: Callable[[Any], object] | None = opt(
        None,
        "Called with a pykaf.RequestEvent after every request (API, broker, seconds, bytes, "
        "error): a hook for metrics libraries. It runs in the connection's reader task: keep "
        "it quick.",
    )
    on_batch: Callable[[Any], object] | None = opt(
        None,
        "Called with a pykaf.BatchEvent for every record batch a producer settles "
        "(acknowledged or failed for good) or a consumer hands out (topic, partition, broker, "
        "records, bytes, compression, offset, error, seconds, retries): a hook for metrics "
        "libraries. It runs in the producer's or consumer's tasks: keep it quick.",
    )
    enable_metrics_push: bool = opt(
        True,
        "Push this client's metrics to the cluster when a broker has a client-metrics "
        "subscription that matches it (KIP-714: GetTelemetrySubscriptions, then PushTelemetry "
        "every push interval); False: never ask or push.",
    )

    def __post_init__(self) -> None:
        parse_bootstrap(self.bootstrap_servers)
        check(
            isinstance(self.client_id, str) and len(self.client_id) < 32768,
            "client_id",
            self.client_id,
            "must be a string",
        )
        for name in (
            "request_timeout",
            "connect_timeout",
            "metadata_max_age",
            "reconnect_backoff_max",
            "metadata_recovery_rebootstrap_trigger",
        ):
            positive(name, getattr(self, name))
        positive("retry_backoff", self.retry_backoff, allow_zero=True)
        positive("retry_backoff_max", self.retry_backoff_max)
        positive("reconnect_backoff", self.reconnect_backoff, allow_zero=True)
        check(
            self.on_request is None or callable(self.on_request),
            "on_request",
            self.on_request,
            "must be callable (or None)",
        )
        check(
            self.on_batch is None or callable(self.on_batch),
            "on_batch",
            self.on_batch,
            "must be callable (or None)",
        )
        check(
            isinstance(self.max_in_flight_per_connection, int)
            and self.max_in_flight_per_connection >= 1,
            "max_in_flight_per_connection",
            self.max_in_flight_per_connection,
            "must be an integer >= 1",
        )
        check(
            isinstance(self.max_response_bytes, int) and self.max_response_bytes >= 1024,
            "max_response_bytes",
            self.max_response_bytes,
            "must be an integer >= 1024",
        )
        check(
            self.metadata_recovery_strategy in METADATA_RECOVERY_STRATEGIES,
            "metadata_recovery_strategy",
            self.metadata_recovery_strategy,
            f"must be one of {', '.join(METADATA_RECOVERY_STRATEGIES)}",
        )
        proto = self.security_protocol.upper()
        check(
            proto == "" or proto in SECURITY_PROTOCOLS,
            "security_protocol",
            self.security_protocol,
            f"must be one of {', '.join(SECURITY_PROTOCOLS)}",
        )
        if self.sasl_mechanism is not None:
            mech = self.sasl_mechanism.upper()
            check(
                mech in SASL_MECHANISMS,
                "sasl_mechanism",
                self.sasl_mechanism,
                f"must be one of {', '.join(SASL_MECHANISMS)}",
            )
            if mech == "OAUTHBEARER":
                check(
                    callable(self.sasl_oauth_token_provider),
                    "sasl_oauth_token_provider",
                    self.sasl_oauth_token_provider,
                    "OAUTHBEARER needs a token provider callable",
                )
            else:
                check(
                    bool(self.sasl_username) and self.sasl_password is not None,
                    "sasl_username",
                    self.sasl_username,
                    f"{mech} needs sasl_username and sasl_password",
                )
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            check(
                self.sasl_mechanism is not None,
                "sasl_mechanism",
                None,
                f"security_protocol {proto} needs a SASL mechanism",
            )
        if proto in ("PLAINTEXT", "SASL_PLAINTEXT"):
            check(
                self.ssl_context is None and self.ssl_cafile is None,
                "security_protocol",
                self.security_protocol,
                "TLS options were given but the protocol has no TLS",
            )

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        """The bootstrap servers as (host, port) pairs."""
        return parse_bootstrap(self.bootstrap_servers)

    @property
    def use_tls(self) -> bool:
        """Whether connections are wrapped in TLS."""
        proto = self.security_protocol.upper()
        if proto:
            return proto in ("SSL", "SASL_SSL")
        return self.ssl_context is not None or self.ssl_cafile is not None

    @property
    def use_sasl(self) -> bool:
        """Whether connections authenticate with SASL."""
        return self.sasl_mechanism is not None

    def build_ssl_context(self) -> ssl.SSLContext | None:
        """The SSL context to wrap connections in (None without TLS)."""
        if not self.use_tls:
            return None
        if self.ssl_context is not None:
            return self.ssl_context
        try:
            ctx = ssl.create_default_context(cafile=self.ssl_cafile)
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS files: {exc}") from exc
        ctx.check_hostname = self.ssl_check_hostname
        return ctx
