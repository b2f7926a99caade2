"""aiokafka's constructor arguments, translated to pykaf's options.

Each supported name maps to one pykaf option (milliseconds become seconds),
checked with the kafka-python shim's converters (the two clients share these
names and units). An option pykaf does not offer is accepted at aiokafka's
own default value (FastStream and other wrappers pass every argument
explicitly), and at None; any other value raises
:class:`~pykaf.compat.aiokafka.errors.KafkaConfigurationError` naming the
option and why. An unknown name is a ``TypeError``, as for any Python call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pykaf.compat.aiokafka.errors import KafkaConfigurationError
from pykaf.compat.kafka import _config as _kafka_python
from pykaf.compat.kafka.errors import KafkaConfigurationError as _KafkaPythonConfigError

Converter = Callable[[str, Any], Any]

#: What stands for "not given" where aiokafka has a sentinel (``acks``).
MISSING: Any = object()


def _checked(convert: Converter) -> Converter:
    """A kafka-python shim converter raising this shim's configuration error."""

    def run(name: str, value: Any) -> Any:
        try:
            return convert(name, value)
        except _KafkaPythonConfigError as exc:
            raise KafkaConfigurationError(*exc.args) from None

    return run


same = _kafka_python.same
seconds = _checked(_kafka_python.seconds)
count = _checked(_kafka_python.count)
servers = _checked(lambda name, value: _kafka_python.servers(value))


def _shared(
    table: Mapping[str, tuple[str, Converter]], *names: str
) -> dict[str, tuple[str, Converter]]:
    """The rows ``names`` of one of the kafka-python shim's tables (the clients share them)."""
    return {name: (table[name][0], _checked(table[name][1])) for name in names}


#: Options of every client: aiokafka name -> (pykaf option, converter).
CLIENT: dict[str, tuple[str, Converter]] = _shared(
    _kafka_python.CLIENT,
    "client_id",
    "request_timeout_ms",
    "metadata_max_age_ms",
    "retry_backoff_ms",
    "security_protocol",
    "ssl_context",
    "sasl_plain_username",
    "sasl_plain_password",
)

#: Producer options besides the client's (serializers, partitioner and acks are the shim's).
PRODUCER: dict[str, tuple[str, Converter]] = {
    **_shared(
        _kafka_python.PRODUCER,
        "compression_type",
        "linger_ms",
        "max_request_size",
        "transactional_id",
        "transaction_timeout_ms",
        "enable_idempotence",
    ),
    # A batch is sent once this full (a larger record still goes, in a batch of its own).
    "max_batch_size": ("flush_bytes", count),
}

#: Consumer options besides the client's (group ones apply with ``group_id`` only).
CONSUMER: dict[str, tuple[str, Converter]] = _shared(
    _kafka_python.CONSUMER,
    "fetch_max_wait_ms",
    "fetch_max_bytes",
    "fetch_min_bytes",
    "max_partition_fetch_bytes",
    "check_crcs",
    "isolation_level",
    "client_rack",
)

GROUP: dict[str, tuple[str, Converter]] = {
    **_shared(
        _kafka_python.GROUP,
        "group_instance_id",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "max_poll_interval_ms",
    ),
    "rebalance_timeout_ms": ("rebalance_timeout", seconds),
}

#: aiokafka options pykaf does not offer: (aiokafka's default, why). The default
#: (or None) is accepted and asks for nothing; another value raises.
UNSUPPORTED: dict[str, tuple[Any, str]] = {
    "connections_max_idle_ms": (540000, "pykaf keeps broker connections for the client's lifetime"),
    "sasl_kerberos_service_name": ("kafka", "GSSAPI (Kerberos) is not implemented by pykaf"),
    "sasl_kerberos_domain_name": (None, "GSSAPI (Kerberos) is not implemented by pykaf"),
    "sasl_oauth_token_provider": (
        None,
        "aiokafka's AbstractTokenProvider differs from pykaf's; pass pykaf's "
        "sasl_oauth_token_provider to pykaf.aio instead",
    ),
    "exclude_internal_topics": (
        True,
        "pattern subscriptions never match internal topics in pykaf",
    ),
}

#: Accepted and ignored: they change nothing in aiokafka either, or have no pykaf meaning.
IGNORED: frozenset[str] = frozenset(
    {
        # A deprecated no-op in aiokafka >= 0.13 (pykaf negotiates each API's version).
        "api_version",
        # Deprecated in aiokafka (the running loop is used).
        "loop",
        # aiokafka's background fetcher's wake-up interval: pykaf's fetchers wake on data.
        "consumer_timeout_ms",
    }
)


def translate(
    configs: Mapping[str, Any],
    tables: tuple[Mapping[str, tuple[str, Converter]], ...],
    own: frozenset[str],
    kind: str,
) -> dict[str, Any]:
    """Translate aiokafka keyword arguments to pykaf options.

    Args:
        configs: the keyword arguments the user passed.
        tables: the mappings that apply, searched in order.
        own: names the caller handles itself (skipped here).
        kind: the class name, for error messages.

    Raises:
        KafkaConfigurationError: an unsupported option at a value other than
            aiokafka's default, or a bad value.
        ValueError: a ``security_protocol`` aiokafka does not know, or SSL
            without an ``ssl_context`` (aiokafka's own checks).
        TypeError: an unknown name.
    """
    known: dict[str, Any] = {}
    for name, value in configs.items():
        if name in own or name in IGNORED or name == "sasl_mechanism":
            continue
        if any(name in table for table in tables):
            known[name] = value
        elif name not in UNSUPPORTED:
            raise TypeError(f"{kind}() got an unexpected keyword argument {name!r}")
        elif value is not None and value != UNSUPPORTED[name][0]:
            reason = UNSUPPORTED[name][1]
            raise KafkaConfigurationError(f"{kind}: {name} is not supported: {reason}")
    # Every name left is in the tables, whose converters raise this shim's errors.
    options = _kafka_python.translate(known, tables, frozenset(), kind)
    # aiokafka checks these in every client's constructor, with a ValueError.
    protocol = configs.get("security_protocol", "PLAINTEXT")
    if protocol not in ("SSL", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError("`security_protocol` should be SSL or PLAINTEXT")
    if protocol in ("SSL", "SASL_SSL") and configs.get("ssl_context") is None:
        raise ValueError("`ssl_context` is mandatory if security_protocol=='SSL'")
    mechanism = configs.get("sasl_mechanism")
    if "SASL" in str(options.get("security_protocol", "")).upper():
        options["sasl_mechanism"] = mechanism or "PLAIN"
    elif mechanism not in (None, "PLAIN"):
        raise KafkaConfigurationError(
            f"{kind}: sasl_mechanism={mechanism!r} needs security_protocol "
            "'SASL_PLAINTEXT' or 'SASL_SSL'"
        )
    return options
