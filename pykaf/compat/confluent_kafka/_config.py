"""librdkafka's configuration names (confluent-kafka's ``conf`` dict) as pykaf options.

One table, :data:`OPTIONS`, maps each key pykaf takes to a pykaf option and a
conversion; it is generated from the one declaration of every option
(:mod:`pykaf._properties`), which the Spark data source and the other drop-ins
share. ``docs/migrating.md`` lists it (a test checks the page against it). A
key not in the table is refused with a :class:`KafkaException` naming it, and
:data:`REFUSED` says why for the known ones: nothing is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pykaf._properties import (
    DEFAULT_PARTITIONER,
    FLAG,
    GROUP,
    PARTITIONERS,
    Property,
    fit_largest_message,
    librdkafka_table,
    names_for,
    scales,
)
from pykaf.compat._options import UserNames
from pykaf.compat.confluent_kafka._error import LOCAL_CODES, KafkaError, KafkaException

__all__ = [
    "DEFAULT_PARTITIONER",
    "OPTIONS",
    "PARTITIONERS",
    "REFUSED",
    "SHIM_KEYS",
    "Option",
    "translate",
]


@dataclass(frozen=True)
class Option:
    """How one librdkafka key becomes a pykaf option (a view of its :class:`Property`).

    Attributes:
        target: the pykaf option (of :class:`pykaf.ProducerConfig`,
            :class:`pykaf.ConsumerConfig`, :class:`pykaf.GroupConfig` or the
            client options).
        prop: its declaration (type, unit, range).
        roles: "producer", "consumer" or both.
        note: how the meaning differs, if it does.
    """

    target: str
    prop: Property
    roles: frozenset[str] = field(default=frozenset({"producer", "consumer"}))
    note: str = ""

    def convert(self, value: Any) -> Any:
        """From the conf value (str, int, float or bool) to pykaf's; ValueError if bad."""
        return self.prop.convert(value)


def _option(prop: Property) -> Option:
    roles = {"producer", "consumer"} & prop.roles | ({"consumer"} if prop.roles & GROUP else set())
    return Option(prop.option, prop, frozenset(roles), prop.note)


#: librdkafka key -> pykaf option: what the shim takes (generated from
#: pykaf/_properties.py, where each option is declared once).
OPTIONS: dict[str, Option] = {key: _option(prop) for key, prop in librdkafka_table().items()}

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
            if _checked(key, value, FLAG.parse, FLAG.expects):
                raise _invalid(
                    "enable.partition.eof=true is not supported: pykaf's consumers do not "
                    "report reaching the end of a partition"
                )
            continue
        if key == "enable.auto.offset.store" and role == "consumer":
            settings.auto_offset_store = _checked(key, value, FLAG.parse, FLAG.expects)
            continue
        option = OPTIONS.get(key)
        if option is None or not _fits(option, role):
            takes = sorted(k for k, o in OPTIONS.items() if _fits(o, role))
            raise _invalid(
                f"configuration property {key!r} is not supported by pykaf's {role}; "
                f"it takes {', '.join(takes)}"
            )
        converted = _checked(key, value, option.convert, option.prop.expects)
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
    return UserNames(
        names_for(conf, librdkafka_table()),
        dict(conf),
        scales(librdkafka_table().values()),
    )


def _fits(option: Option, role: str) -> bool:
    """Admin clients take the client options (those of both roles); the others their own."""
    if role == "admin":
        return option.roles == {"producer", "consumer"}
    return role in option.roles


def _checked(key: str, value: Any, convert: Callable[[Any], Any], expects: str) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError):
        raise _invalid(f"{key}={value!r}: must be {expects}") from None


def client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The client options among a producer's or consumer's (for its own admin client)."""
    shared = {o.target for o in OPTIONS.values() if o.roles == {"producer", "consumer"}}
    return {k: v for k, v in options.items() if k in shared}
