"""librdkafka's configuration names (confluent-kafka's ``conf`` dict) as pykaf options.

One table, :data:`OPTIONS`, maps each key pykaf takes to a pykaf option and a
conversion; ``docs/migrating.md`` lists it (a test checks the page against
it). A key not in the table is refused with a :class:`KafkaException` naming
it, and :data:`REFUSED` says why for the known ones: nothing is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pykaf._producer.partitioner import (
    Crc32Partitioner,
    Fnv1aPartitioner,
    Murmur2Partitioner,
    RandomPartitioner,
)
from pykaf.compat._options import UserNames, fit_largest_message
from pykaf.compat.confluent_kafka._error import LOCAL_CODES, KafkaError, KafkaException


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(value)
    return str(value).strip()


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = _text(value).lower()
    if word not in ("true", "false"):
        raise ValueError(value)
    return word == "true"


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    return int(_text(value))


def _ms(value: Any) -> float:
    number = _int(value)
    if number < 0:
        raise ValueError(value)
    return number / 1000


def _kbytes(value: Any) -> int:
    return _int(value) * 1024


def _acks(value: Any) -> int | str:
    word = _text(value).lower()
    return "all" if word in ("all", "-1") else int(word)


def _reset(value: Any) -> str:
    word = _text(value).lower()
    for target, words in (
        ("earliest", ("smallest", "earliest", "beginning")),
        ("latest", ("largest", "latest", "end")),
        ("none", ("error",)),
    ):
        if word in words:
            return target
    raise ValueError(value)


def _upper(value: Any) -> str:
    return _text(value).upper()


def _lower(value: Any) -> str:
    return _text(value).lower()


def _hostname_check(value: Any) -> bool:
    word = _text(value).lower()
    if word not in ("https", "none"):
        raise ValueError(value)
    return word == "https"


#: librdkafka's partitioners, as pykaf's. The ``*_random`` ones send null
#: keys to a sticky partition (librdkafka's sticky.partitioning.linger.ms);
#: the plain ones hash a null key as empty data, as librdkafka does.
PARTITIONERS: dict[str, Callable[[], Any]] = {
    "random": RandomPartitioner,
    "consistent": lambda: Crc32Partitioner(hash_null_keys=True),
    "consistent_random": Crc32Partitioner,
    "murmur2": lambda: Murmur2Partitioner(hash_null_keys=True),
    "murmur2_random": Murmur2Partitioner,
    "fnv1a": lambda: Fnv1aPartitioner(hash_null_keys=True),
    "fnv1a_random": Fnv1aPartitioner,
}

#: librdkafka's default partitioner, the confluent shim's too.
DEFAULT_PARTITIONER = "consistent_random"


def _partitioner(value: Any) -> Any:
    word = _text(value)
    if word not in PARTITIONERS:
        raise ValueError(value)
    return PARTITIONERS[word]()


def _group_protocol(value: Any) -> str:
    word = _lower(value)
    if word not in ("classic", "consumer"):
        raise ValueError(value)
    return word


@dataclass(frozen=True)
class Option:
    """How one librdkafka key becomes a pykaf option.

    Attributes:
        target: the pykaf option (of :class:`pykaf.ProducerConfig`,
            :class:`pykaf.ConsumerConfig`, :class:`pykaf.GroupConfig` or the
            client options).
        convert: from the conf value (str, int, float or bool) to pykaf's.
        roles: "producer", "consumer" or both.
        note: how the meaning differs, if it does.
    """

    target: str
    convert: Callable[[Any], Any]
    roles: frozenset[str] = field(default=frozenset({"producer", "consumer"}))
    note: str = ""


_P = frozenset({"producer"})
_C = frozenset({"consumer"})

#: librdkafka key -> pykaf option: what the shim takes.
OPTIONS: dict[str, Option] = {
    "bootstrap.servers": Option("bootstrap_servers", _text),
    "metadata.broker.list": Option("bootstrap_servers", _text),
    "client.id": Option("client_id", _text),
    "request.timeout.ms": Option("request_timeout", _ms),
    "socket.timeout.ms": Option("request_timeout", _ms),
    "socket.connection.setup.timeout.ms": Option("connect_timeout", _ms),
    "retry.backoff.ms": Option("retry_backoff", _ms),
    "reconnect.backoff.ms": Option("reconnect_backoff", _ms),
    "reconnect.backoff.max.ms": Option("reconnect_backoff_max", _ms),
    "metadata.max.age.ms": Option("metadata_max_age", _ms),
    "metadata.recovery.strategy": Option("metadata_recovery_strategy", _lower),
    "metadata.recovery.rebootstrap.trigger.ms": Option(
        "metadata_recovery_rebootstrap_trigger", _ms
    ),
    "allow.auto.create.topics": Option("allow_auto_create_topics", _bool),
    "enable.metrics.push": Option("enable_metrics_push", _bool),
    "security.protocol": Option("security_protocol", _upper),
    "sasl.mechanism": Option("sasl_mechanism", _upper),
    "sasl.mechanisms": Option("sasl_mechanism", _upper),
    "sasl.username": Option("sasl_username", _text),
    "sasl.password": Option("sasl_password", _text),
    "ssl.ca.location": Option("ssl_cafile", _text),
    "ssl.certificate.location": Option("ssl_certfile", _text),
    "ssl.key.location": Option("ssl_keyfile", _text),
    "ssl.key.password": Option("ssl_password", _text),
    "ssl.endpoint.identification.algorithm": Option("ssl_check_hostname", _hostname_check),
    # producer
    "acks": Option("acks", _acks, _P),
    "request.required.acks": Option("acks", _acks, _P),
    "linger.ms": Option("linger", _ms, _P),
    "queue.buffering.max.ms": Option("linger", _ms, _P),
    "batch.size": Option(
        "flush_bytes",
        _int,
        _P,
        "a batch goes once it holds this many bytes; a larger message goes alone, as in librdkafka",
    ),
    "batch.num.messages": Option("batch_records", _int, _P),
    "message.max.bytes": Option(
        "max_message_bytes",
        _int,
        _P,
        "1,000,000 unless given, as librdkafka's; batch_bytes is raised to it",
    ),
    "compression.type": Option("compression", _lower, _P),
    "compression.codec": Option("compression", _lower, _P),
    "compression.level": Option("compression_level", _int, _P),
    "enable.idempotence": Option("idempotence", _bool, _P),
    "transactional.id": Option("transactional_id", _text, _P),
    "transaction.timeout.ms": Option("transaction_timeout", _ms, _P),
    "message.timeout.ms": Option("delivery_timeout", _ms, _P),
    "delivery.timeout.ms": Option("delivery_timeout", _ms, _P),
    "retries": Option("retries", _int, _P),
    "message.send.max.retries": Option("retries", _int, _P),
    "retry.backoff.max.ms": Option("retry_backoff_max", _ms),
    "max.in.flight.requests.per.connection": Option("max_in_flight", _int, _P),
    "max.in.flight": Option("max_in_flight", _int, _P),
    "queue.buffering.max.messages": Option("buffer_records", _int, _P),
    "queue.buffering.max.kbytes": Option(
        "buffer_bytes", _kbytes, _P, "KiB, as librdkafka counts it"
    ),
    "partitioner": Option(
        "partitioner",
        _partitioner,
        _P,
        "consistent_random (CRC-32, librdkafka's default) unless given; also random, "
        "consistent, murmur2, murmur2_random, fnv1a, fnv1a_random, as librdkafka's",
    ),
    # consumer
    "group.id": Option("group_id", _text, _C),
    "group.instance.id": Option("group_instance_id", _text, _C),
    "group.protocol": Option(
        "group_protocol", _group_protocol, _C, "classic or consumer (KIP-848, Kafka 4.0+)"
    ),
    "group.remote.assignor": Option("group_remote_assignor", _text, _C),
    "enable.auto.commit": Option("auto_commit", _bool, _C),
    "auto.commit.interval.ms": Option("auto_commit_interval", _ms, _C),
    "auto.offset.reset": Option(
        "auto_offset_reset",
        _reset,
        _C,
        "smallest/beginning: earliest; largest/end: latest; error: none",
    ),
    "session.timeout.ms": Option("session_timeout", _ms, _C),
    "heartbeat.interval.ms": Option("heartbeat_interval", _ms, _C),
    "max.poll.interval.ms": Option(
        "rebalance_timeout", _ms, _C, "the rebalance timeout, as in librdkafka"
    ),
    "isolation.level": Option("isolation_level", _lower, _C),
    "fetch.min.bytes": Option("fetch_min_bytes", _int, _C),
    "fetch.wait.max.ms": Option("fetch_max_wait", _ms, _C),
    "fetch.max.bytes": Option("fetch_max_bytes", _int, _C),
    "max.partition.fetch.bytes": Option("max_partition_fetch_bytes", _int, _C),
    "check.crcs": Option("check_crcs", _bool, _C),
    "client.rack": Option("client_rack", _text, _C),
    "queued.max.messages.kbytes": Option(
        "fetch_buffer_bytes", _kbytes, _C, "KiB, as librdkafka counts it"
    ),
}

#: Keys taken by the shim itself (not pykaf options), and what they do.
SHIM_KEYS: dict[str, str] = {
    "on_delivery": "the producer's default delivery callback, called as (err, msg)",
    "error_cb": "called with a KafkaError instead of raising: by the producer's flush for "
    "records without a delivery callback that failed, by the consumer's poll and consume for "
    "a client error (not a partition's); not taken by the admin client",
    "enable.partition.eof": "false only (the default): no _PARTITION_EOF events",
    "enable.auto.offset.store": "true (the default): what poll hands out is stored for the "
    "next commit; false: only store_offsets stores (pykaf.sync.ConsumerGroup's auto_mark=False "
    "and mark; a group member's stored offsets only move forward)",
}

#: Known keys refused, and why.
REFUSED: dict[str, str] = {
    "stats_cb": "pykaf has no statistics JSON; use the statistics() of pykaf.sync's clients",
    "statistics.interval.ms": "no stats_cb (see stats_cb)",
    "throttle_cb": "pykaf does not report throttle events",
    "oauth_cb": "use pykaf's sasl_oauth_token_provider (pykaf.sync directly)",
    "logger": "pykaf logs through the standard logging module (logger 'pykaf')",
    "log_level": "pykaf logs through the standard logging module (logger 'pykaf')",
    "debug": "pykaf logs through the standard logging module (logger 'pykaf')",
    "partition.assignment.strategy": "give pykaf's assignors through pykaf.sync.ConsumerGroup",
    "ssl.keystore.location": "PKCS#12 keystores are not read; give ssl.certificate.location "
    "and ssl.key.location (PEM)",
    "sasl.kerberos.service.name": "Kerberos (GSSAPI) is not supported",
    "sasl.oauthbearer.config": "use pykaf's sasl_oauth_token_provider",
    "on_commit": "commits are synchronous and raise on failure",
}


@dataclass
class Settings:
    """A checked conf dict: pykaf's options, and what the shim keeps itself.

    Attributes:
        bootstrap: ``bootstrap.servers``.
        options: pykaf options (``group_id`` apart).
        group_id: ``group.id``, if given.
        on_delivery: the default delivery callback, if given.
        error_cb: called with a KafkaError for errors not raised (see SHIM_KEYS).
        auto_offset_store: ``enable.auto.offset.store``: what poll hands out is
            stored for the next commit (else only ``store_offsets`` stores).
        names: how errors name pykaf's options: by the keys of this conf.
    """

    bootstrap: str
    options: dict[str, Any]
    group_id: str | None = None
    on_delivery: Callable[..., Any] | None = None
    error_cb: Callable[[Any], Any] | None = None
    auto_offset_store: bool = True
    names: UserNames = field(default_factory=lambda: UserNames({}))


def _invalid(message: str) -> KafkaException:
    return KafkaException(KafkaError(LOCAL_CODES["_INVALID_ARG"], message))


def translate(conf: Mapping[str, Any], role: str) -> Settings:
    """The pykaf options of a ``conf`` dict for a ``role`` ("producer", "consumer", "admin").

    Raises:
        KafkaException: ``_INVALID_ARG``: a key pykaf does not take (named, with
            why, or with the keys it takes), a bad value, or no
            ``bootstrap.servers``.
    """
    if not isinstance(conf, Mapping):
        raise TypeError(f"expected a configuration dict, not {type(conf).__name__}")
    options: dict[str, Any] = {}
    settings = Settings(bootstrap="", options=options)
    for key, value in conf.items():
        if key in REFUSED:
            raise _invalid(f"configuration property {key!r} is not supported: {REFUSED[key]}")
        if key == "on_delivery" and role == "producer":
            if not callable(value):
                raise _invalid("configuration property 'on_delivery' must be callable")
            settings.on_delivery = value
            continue
        if key == "error_cb" and role == "admin":
            raise _invalid(
                "configuration property 'error_cb' is not supported by the admin client: "
                "each call's errors come through its futures"
            )
        if key == "error_cb":
            if not callable(value):
                raise _invalid("configuration property 'error_cb' must be callable")
            settings.error_cb = value
            continue
        if key == "enable.partition.eof" and role == "consumer":
            if _checked(key, value, _bool):
                raise _invalid(
                    "enable.partition.eof=true is not supported: pykaf's consumers do not "
                    "report reaching the end of a partition"
                )
            continue
        if key == "enable.auto.offset.store" and role == "consumer":
            settings.auto_offset_store = _checked(key, value, _bool)
            continue
        option = OPTIONS.get(key)
        if option is None or not _fits(option, role):
            takes = sorted(k for k, o in OPTIONS.items() if _fits(o, role))
            raise _invalid(
                f"configuration property {key!r} is not supported by pykaf's {role}; "
                f"it takes {', '.join(takes)}"
            )
        converted = _checked(key, value, option.convert)
        if option.target == "bootstrap_servers":
            settings.bootstrap = converted
        elif option.target == "group_id":
            settings.group_id = converted
        else:
            options[option.target] = converted
    if not settings.bootstrap:
        raise _invalid("configuration property 'bootstrap.servers' is required")
    fit_largest_message(options)
    settings.names = user_names(conf)
    return settings


def user_names(conf: Mapping[str, Any]) -> UserNames:
    """How errors name pykaf's options to this user: by the librdkafka keys in ``conf``.

    Where several keys map to one option, the one ``conf`` has is named (else
    the first in :data:`OPTIONS`); times are shown in ms, sizes in KiB where
    librdkafka counts them so.
    """
    names: dict[str, str] = {}
    scales: dict[str, float] = {}
    for key, option in OPTIONS.items():
        target = option.target
        if target not in names or (key in conf and names[target] not in conf):
            names[target] = key
        if option.convert is _ms:
            scales[target] = 1000.0
        elif option.convert is _kbytes:
            scales[target] = 1 / 1024
    return UserNames(names, dict(conf), scales)


def _fits(option: Option, role: str) -> bool:
    """Admin clients take the client options (those of both roles); the others their own."""
    if role == "admin":
        return option.roles == {"producer", "consumer"}
    return role in option.roles


def _checked(key: str, value: Any, convert: Callable[[Any], Any]) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError):
        raise _invalid(f"configuration property {key!r}: invalid value {value!r}") from None


def client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The client options among a producer's or consumer's (for its own admin client)."""
    shared = {o.target for o in OPTIONS.values() if o.roles == {"producer", "consumer"}}
    return {k: v for k, v in options.items() if k in shared}
