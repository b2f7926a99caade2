"""kafka-python's configuration names, translated to pykaf's options.

Each supported name maps to one pykaf option (milliseconds become seconds) by
the tables generated from the one declaration of every option
(:mod:`pykaf._properties`), with the converter of its type; a name that is not
supported raises :class:`KafkaConfigurationError` naming it, with the reason,
so nothing is silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pykaf._properties import (
    INTEGER,
    MILLISECONDS,
    OBJECT,
    Kind,
    Property,
    batching_off,
    fit_largest_message,
    python_table,
)
from pykaf.compat._options import UserNames
from pykaf.compat.kafka.errors import KafkaConfigurationError

Converter = Callable[[str, Any], Any]


@dataclass(frozen=True)
class Convert:
    """A property's converter, raising :class:`KafkaConfigurationError` naming the option."""

    prop: Property

    def __call__(self, name: str, value: Any) -> Any:
        """``value`` of the option ``name`` as pykaf takes it.

        Raises:
            KafkaConfigurationError: a value of another type, or out of range.
        """
        try:
            return self.prop.convert(value)
        except ValueError:
            raise KafkaConfigurationError(
                f"{name} must be {self.prop.expects}, not {value!r}"
            ) from None


def converter(prop: Property) -> Converter:
    """``prop``'s converter (see :class:`Convert`)."""
    return Convert(prop)


def _typed(kind: Kind) -> Converter:
    return converter(Property("", kind))


#: The value unchanged.
same = _typed(OBJECT)
#: Milliseconds (kafka-python) to seconds (pykaf).
seconds = _typed(MILLISECONDS)
#: An int; ``float('inf')`` (kafka-python's "no limit") becomes 2**31 - 1.
count = _typed(INTEGER)


def _table(role: str) -> dict[str, tuple[str, Converter]]:
    """kafka-python name -> (pykaf option, converter), generated from pykaf/_properties.py."""
    return {name: (prop.option, converter(prop)) for name, prop in python_table(role).items()}


#: Options of every client: kafka-python name -> (pykaf option, converter).
CLIENT: dict[str, tuple[str, Converter]] = _table("client")

#: Producer options besides the client's (the serializers are the shim's own).
PRODUCER: dict[str, tuple[str, Converter]] = _table("producer")

#: Consumer options besides the client's (group ones apply with ``group_id`` only).
CONSUMER: dict[str, tuple[str, Converter]] = _table("consumer")

GROUP: dict[str, tuple[str, Converter]] = _table("group")

ADMIN: dict[str, tuple[str, Converter]] = _table("admin")


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
    batching_off(options)  # kafka-python's batch_size 0
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
            if isinstance(convert, Convert) and convert.prop.kind.scale != 1:
                scales[option] = convert.prop.kind.scale
    return UserNames(names, dict(configs), scales)
