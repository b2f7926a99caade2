"""kafka-python's configuration names, translated to pykaf's options.

Each supported name maps to one pykaf option (milliseconds become seconds);
a name that is not supported raises :class:`KafkaConfigurationError` naming
it, with the reason, so nothing is silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pykaf.compat._options import UserNames, fit_largest_message
from pykaf.compat.kafka.errors import KafkaConfigurationError

Converter = Callable[[str, Any], Any]


def same(name: str, value: Any) -> Any:
    """The value unchanged."""
    return value


def seconds(name: str, value: Any) -> float:
    """Milliseconds (kafka-python) to seconds (pykaf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise KafkaConfigurationError(
            f"{name} must be a number of milliseconds >= 0, not {value!r}"
        )
    return value / 1000.0


def batch_size(name: str, value: Any) -> int:
    """kafka-python's ``batch_size``: 0 turns batching off, so a batch is sent at its first byte.

    (pykaf's ``flush_bytes`` 0 means the opposite, "only on linger".)
    """
    return max(count(name, value), 1)


def count(name: str, value: Any) -> int:
    """An int; ``float('inf')`` (kafka-python's "no limit") becomes 2**31 - 1."""
    if value == float("inf"):
        return 2_147_483_647
    if isinstance(value, bool) or not isinstance(value, int):
        raise KafkaConfigurationError(f"{name} must be an int, not {value!r}")
    return value


def acks(name: str, value: Any) -> int | str:
    """0, 1, -1 or 'all'."""
    if value in ("all", -1, "-1"):
        return "all"
    if value in (0, 1, "0", "1") and not isinstance(value, bool):
        return int(value)
    raise KafkaConfigurationError(f"acks must be 0, 1, -1 or 'all', not {value!r}")


def compression(name: str, value: Any) -> str:
    """None or a codec name."""
    if value is None:
        return "none"
    if value in ("gzip", "snappy", "lz4", "zstd"):
        return str(value)
    raise KafkaConfigurationError(
        f"compression_type must be None, 'gzip', 'snappy', 'lz4' or 'zstd', not {value!r}"
    )


def isolation(name: str, value: Any) -> str:
    """``"read_committed"``, ``"read_uncommitted"``, or ``IsolationLevel`` (1, 0)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return ("read_uncommitted", "read_committed")[value]
    if value in ("read_committed", "read_uncommitted"):
        return str(value)
    raise KafkaConfigurationError(
        f"isolation_level must be 'read_committed' or 'read_uncommitted', not {value!r}"
    )


#: Options of every client: kafka-python name -> (pykaf option, converter).
CLIENT: dict[str, tuple[str, Converter]] = {
    "client_id": ("client_id", same),
    "request_timeout_ms": ("request_timeout", seconds),
    "metadata_max_age_ms": ("metadata_max_age", seconds),
    "retry_backoff_ms": ("retry_backoff", seconds),
    "reconnect_backoff_ms": ("reconnect_backoff", seconds),
    "reconnect_backoff_max_ms": ("reconnect_backoff_max", seconds),
    "receive_message_max_bytes": ("max_response_bytes", count),
    "allow_auto_create_topics": ("allow_auto_create_topics", same),
    "security_protocol": ("security_protocol", same),
    "ssl_context": ("ssl_context", same),
    "ssl_cafile": ("ssl_cafile", same),
    "ssl_certfile": ("ssl_certfile", same),
    "ssl_keyfile": ("ssl_keyfile", same),
    "ssl_password": ("ssl_password", same),
    "ssl_check_hostname": ("ssl_check_hostname", same),
    "sasl_mechanism": ("sasl_mechanism", same),
    "sasl_plain_username": ("sasl_username", same),
    "sasl_plain_password": ("sasl_password", same),
}

#: Producer options besides the client's (the serializers are the shim's own).
PRODUCER: dict[str, tuple[str, Converter]] = {
    "acks": ("acks", acks),
    "compression_type": ("compression", compression),
    "linger_ms": ("linger", seconds),
    "batch_size": ("flush_bytes", batch_size),
    "retries": ("retries", count),
    "max_in_flight_requests_per_connection": ("max_in_flight", count),
    "enable_idempotence": ("idempotence", same),
    "transactional_id": ("transactional_id", same),
    "transaction_timeout_ms": ("transaction_timeout", seconds),
    "delivery_timeout_ms": ("delivery_timeout", seconds),
    "max_request_size": ("max_message_bytes", count),
    "buffer_memory": ("buffer_bytes", count),
    "max_block_ms": ("produce_block_timeout", seconds),
}

#: Consumer options besides the client's (group ones apply with ``group_id`` only).
CONSUMER: dict[str, tuple[str, Converter]] = {
    "auto_offset_reset": ("auto_offset_reset", same),
    "isolation_level": ("isolation_level", isolation),
    "fetch_min_bytes": ("fetch_min_bytes", count),
    "fetch_max_wait_ms": ("fetch_max_wait", seconds),
    "fetch_max_bytes": ("fetch_max_bytes", count),
    "max_partition_fetch_bytes": ("max_partition_fetch_bytes", count),
    "check_crcs": ("check_crcs", same),
    "client_rack": ("client_rack", same),
    "enable_incremental_fetch_sessions": ("fetch_sessions", same),
    "max_in_flight_requests_per_connection": ("max_in_flight_per_connection", count),
}

GROUP: dict[str, tuple[str, Converter]] = {
    "enable_auto_commit": ("auto_commit", same),
    "auto_commit_interval_ms": ("auto_commit_interval", seconds),
    "session_timeout_ms": ("session_timeout", seconds),
    "heartbeat_interval_ms": ("heartbeat_interval", seconds),
    "max_poll_interval_ms": ("rebalance_timeout", seconds),
    "group_instance_id": ("group_instance_id", same),
}

ADMIN: dict[str, tuple[str, Converter]] = {
    "max_in_flight_requests_per_connection": ("max_in_flight_per_connection", count),
}

#: kafka-python options pykaf does not offer, and why.
UNSUPPORTED: dict[str, str] = {
    "api_version": "pykaf negotiates each API's version with the broker",
    "api_version_auto_timeout_ms": "pykaf negotiates each API's version with the broker",
    "partitioner": "kafka-python's partitioner interface differs; pykaf's default is the same "
    "murmur2 partitioner (use pykaf.sync.Producer's partitioner option for others)",
    "partition_assignment_strategy": "kafka-python's assignor classes do not apply; use "
    "pykaf.sync.ConsumerGroup's assignors option",
    "sasl_kerberos_service_name": "GSSAPI (Kerberos) is not implemented by pykaf",
    "sasl_kerberos_domain_name": "GSSAPI (Kerberos) is not implemented by pykaf",
    "sasl_kerberos_name": "GSSAPI (Kerberos) is not implemented by pykaf",
    "sasl_oauth_token_provider": "kafka-python's token provider interface differs; use "
    "pykaf's sasl_oauth_token_provider through pykaf.sync",
    "ssl_crlfile": "not offered: build an ssl.SSLContext with the CRL and pass ssl_context",
    "ssl_ciphers": "not offered: build an ssl.SSLContext and pass ssl_context",
    "socket_options": "pykaf's trio sockets take no raw socket options",
    "send_buffer_bytes": "pykaf's trio sockets take no raw socket options",
    "receive_buffer_bytes": "pykaf's trio sockets take no raw socket options",
    "selector": "pykaf runs on trio, not a selector loop",
    "kafka_client": "pykaf has its own cluster client",
    "metric_reporters": "kafka-python's metrics registry is not emulated (see pykaf statistics())",
    "metrics_enabled": "kafka-python's metrics registry is not emulated (see pykaf statistics())",
    "metrics_num_samples": "kafka-python's metrics registry is not emulated",
    "metrics_sample_window_ms": "kafka-python's metrics registry is not emulated",
    "metric_group_prefix": "kafka-python's metrics registry is not emulated",
    "connections_max_idle_ms": "pykaf keeps broker connections for the client's lifetime",
    "client_dns_lookup": "pykaf resolves each bootstrap address with the system resolver",
    "bootstrap_timeout_ms": "pykaf's connect_timeout and retries bound the bootstrap",
    "proxy_url": "connecting through a proxy is not implemented by pykaf",
    "socks5_proxy": "connecting through a proxy is not implemented by pykaf",
    "default_offset_commit_callback": "commit_async is not supported (commits are synchronous)",
    "exclude_internal_topics": "pattern subscriptions never match internal topics in pykaf",
    "consumer_timeout_ms": "a consumer option",
}


def translate(
    configs: Mapping[str, Any],
    tables: tuple[Mapping[str, tuple[str, Converter]], ...],
    own: frozenset[str],
    kind: str,
) -> dict[str, Any]:
    """Translate kafka-python ``configs`` to pykaf options.

    None stands for the option's default, and is accepted for an unsupported
    option too (it then asks for nothing); any other value of an unsupported
    option, and any unknown name, raises.

    Args:
        configs: the keyword arguments the user passed.
        tables: the mappings that apply, searched in order.
        own: names the caller handles itself (skipped here).
        kind: the class name, for error messages.

    Raises:
        KafkaConfigurationError: an unknown or unsupported name, or a bad value.
    """
    options: dict[str, Any] = {}
    for name, value in configs.items():
        if name in own:
            continue
        if value is None and name in UNSUPPORTED:
            continue  # None is "not used" for each of these (api_version: negotiate)
        for table in tables:
            if name in table:
                option, convert = table[name]
                if value is not None:
                    options[option] = convert(name, value)
                break
        else:
            reason = UNSUPPORTED.get(name)
            if reason is not None:
                raise KafkaConfigurationError(f"{kind}: {name} is not supported: {reason}")
            raise KafkaConfigurationError(f"{kind}: unknown configuration {name!r}")
    fit_largest_message(options)
    return options


def servers(value: Any) -> list[str]:
    """``bootstrap_servers``: a string or a list of ``host[:port]`` (port 9092 by default)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise KafkaConfigurationError(
            f"bootstrap_servers must be a string or a list, not {value!r}"
        )
    out = []
    for entry in items:
        if not isinstance(entry, str):
            raise KafkaConfigurationError(f"bootstrap_servers: bad address {entry!r}")
        out.extend(_addresses(entry))
    return out


def _addresses(entry: str) -> list[str]:
    out = []
    for item in entry.split(","):
        if not item.strip():
            raise KafkaConfigurationError(f"bootstrap_servers: bad address {item!r}")
        item = item.strip()
        out.append(item if ":" in item.rsplit("]", 1)[-1] else f"{item}:9092")
    return out


def user_names(
    configs: Mapping[str, Any], tables: tuple[Mapping[str, tuple[str, Converter]], ...]
) -> UserNames:
    """How errors name pykaf's options to this user: by the kafka-python names given.

    Where several kafka-python names map to one pykaf option, the one the
    user gave is named; milliseconds are shown as milliseconds.
    """
    names: dict[str, str] = {"bootstrap_servers": "bootstrap_servers"}
    scales: dict[str, float] = {}
    for table in tables:
        for name, (option, convert) in table.items():
            if option not in names or (name in configs and names[option] not in configs):
                names[option] = name
            if convert is seconds:
                scales[option] = 1000.0
    return UserNames(names, dict(configs), scales)
