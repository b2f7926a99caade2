"""Every option other Kafka clients name, declared once: the names, the type, the unit, the range.

Each :class:`Property` row says which pykaf option (a field of
:class:`~pykaf.ProducerConfig`, :class:`~pykaf.ConsumerConfig`,
:class:`~pykaf.GroupConfig` or the client options) one property of the Java
client, librdkafka or kafka-python sets, what type its value has (a
:class:`Kind`: one converter per type, the unit included) and the least value
it takes. The tables of the Spark data source (``kafka.*`` options: Java's
names), of the confluent-kafka drop-in (librdkafka's names) and of the
kafka-python and aiokafka drop-ins are generated from :data:`PROPERTIES`, so one
value gets one answer whichever client's name it comes under.

Where two clients give one name different meanings (``batch.size``: Java's
and kafka-python's 0 turns batching off, librdkafka's starts at 1), they are
two rows. Adding an option: one row here, the pykaf field in its config class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pykaf._producer.config import ProducerConfig
from pykaf._producer.partitioner import (
    Crc32Partitioner,
    Fnv1aPartitioner,
    Murmur2Partitioner,
    RandomPartitioner,
)

#: The roles of a row: which pykaf clients take the option. A group option
#: belongs to consumers that join a group (librdkafka's consumer takes them).
PRODUCER = frozenset({"producer"})
CONSUMER = frozenset({"consumer"})
GROUP = frozenset({"group"})
ADMIN = frozenset({"admin"})
#: Options of every client (the cluster client's).
CLIENT = PRODUCER | CONSUMER | ADMIN


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(value)
    return str(value).strip()


def _words(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        word = _text(value).lower()
        if word not in allowed:
            raise ValueError(value)
        return word

    return parse


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return _words("true", "false")(value) == "true"


def _number(value: Any) -> int | float:
    """An int, a float (a Python caller's) or the decimal text of an integer (a conf's)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        if math.isnan(value):
            raise ValueError(value)
        return value
    return int(_text(value))


def _integer(value: Any) -> int:
    number = _number(value)
    if number == math.inf:
        return 2_147_483_647  # kafka-python's float("inf"): no limit
    if not isinstance(number, int):
        raise ValueError(value)
    return number


def _acks(value: Any) -> int | str:
    word = _text(value).lower()
    if word in ("all", "-1"):
        return "all"
    if word in ("0", "1"):
        return int(word)
    raise ValueError(value)


def _codec(value: Any) -> str:
    if value is None:
        return "none"  # kafka-python's and aiokafka's "no compression"
    return _words("none", "gzip", "snappy", "lz4", "zstd")(value)


def _isolation(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return ("read_uncommitted", "read_committed")[value]  # kafka-python's IsolationLevel
    return _words("read_committed", "read_uncommitted")(value)


def _reset(value: Any) -> str:
    word = _text(value).lower()
    for target, words in (
        ("earliest", ("earliest", "smallest", "beginning")),
        ("latest", ("latest", "largest", "end")),
        ("none", ("none", "error")),
    ):
        if word in words:
            return target
    raise ValueError(value)


def _endpoint_check(value: Any) -> bool:
    # Java's "" and librdkafka's "none" turn the check off; "https" turns it on.
    return _words("https", "none", "")(value) == "https"


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

#: librdkafka's default partitioner (CRC-32, null keys sticky).
DEFAULT_PARTITIONER = "consistent_random"


def _partitioner(value: Any) -> Any:
    word = _text(value)
    if word not in PARTITIONERS:
        raise ValueError(value)
    return PARTITIONERS[word]()


@dataclass(frozen=True)
class Kind:
    """A type of option value: how it is read, in what unit, and how errors say what it takes.

    Attributes:
        name: the type's name (in the generated docs and tests).
        parse: from the value as a user gives it (the text of a Spark or
            librdkafka conf, or a Python value) to its number or value in the
            user's unit; raises ValueError (or TypeError) on a bad one.
        expects: what a good value is, for error messages ("must be ...").
        scale: the user's unit per pykaf's (1000 for milliseconds given for
            seconds, 1/1024 for KiB given for bytes; 1 otherwise).
        numeric: ``parse`` gives a number (then a row's ``minimum`` applies).
    """

    name: str
    parse: Callable[[Any], Any]
    expects: str
    scale: float = 1.0
    numeric: bool = False

    def pykaf(self, parsed: Any) -> Any:
        """The parsed value in pykaf's unit."""
        if self.scale == 1:
            return parsed
        if self.scale < 1:
            return int(parsed * round(1 / self.scale))
        return parsed / self.scale


TEXT = Kind("text", _text, "a string")
LOWER = Kind("lower-case word", lambda v: _text(v).lower(), "a string")
UPPER = Kind("upper-case word", lambda v: _text(v).upper(), "a string")
FLAG = Kind("flag", _flag, "true or false")
INTEGER = Kind("integer", _integer, "an integer", numeric=True)
BYTES = Kind("bytes", _integer, "a number of bytes", numeric=True)
KIBIBYTES = Kind("KiB", _integer, "a number of KiB", scale=1 / 1024, numeric=True)
MILLISECONDS = Kind("ms", _number, "a number of milliseconds", scale=1000.0, numeric=True)
ACKS = Kind("acks", _acks, "0, 1, -1 or 'all'")
CODEC = Kind("codec", _codec, "None, 'none', 'gzip', 'snappy', 'lz4' or 'zstd'")
ISOLATION = Kind("isolation", _isolation, "'read_committed' or 'read_uncommitted'")
RESET = Kind(
    "offset reset",
    _reset,
    "earliest (or smallest, beginning), latest (or largest, end) or none (or error)",
)
ENDPOINT_CHECK = Kind("endpoint identification", _endpoint_check, "https, none or empty")
GROUP_PROTOCOL = Kind("group protocol", _words("classic", "consumer"), "classic or consumer")
PARTITIONER = Kind("partitioner", _partitioner, f"one of {', '.join(PARTITIONERS)}")
#: A Python object passed as it is (kafka-python's ssl_context).
OBJECT = Kind("object", lambda value: value, "an object")

#: Every kind, by name (one converter each).
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        TEXT,
        LOWER,
        UPPER,
        FLAG,
        INTEGER,
        BYTES,
        KIBIBYTES,
        MILLISECONDS,
        ACKS,
        CODEC,
        ISOLATION,
        RESET,
        ENDPOINT_CHECK,
        GROUP_PROTOCOL,
        PARTITIONER,
        OBJECT,
    )
}


@dataclass(frozen=True)
class Property:
    """One option as other clients name it.

    Attributes:
        option: the pykaf option it sets.
        kind: its type and unit.
        roles: which pykaf clients take it (:data:`CLIENT`, :data:`PRODUCER`,
            :data:`CONSUMER`, :data:`GROUP`, :data:`ADMIN`).
        java: Java's name, where the Spark data source takes it as ``kafka.<java>``.
        java_roles: the roles Spark takes it for, where Java's client differs
            from ``roles`` (None: ``roles``).
        librdkafka: librdkafka's names (confluent-kafka's conf keys), the first
            its own, the others its aliases.
        python: kafka-python's keyword (and aiokafka's, where it takes it).
        minimum: the least number a numeric kind takes, in the user's unit.
        note: how the meaning differs from pykaf's option, if it does.
    """

    option: str
    kind: Kind
    roles: frozenset[str] = CLIENT
    java: str | None = None
    java_roles: frozenset[str] | None = None
    librdkafka: tuple[str, ...] = ()
    python: str | None = None
    minimum: int | None = 0
    note: str = ""

    @property
    def expects(self) -> str:
        """What a good value is, for error messages."""
        if self.kind.numeric and self.minimum is not None:
            return f"{self.kind.expects} >= {self.minimum}"
        return self.kind.expects

    def convert(self, value: Any) -> Any:
        """``value`` as pykaf's option takes it.

        Raises:
            ValueError: a value of another type, or below :attr:`minimum`.
        """
        try:
            parsed = self.kind.parse(value)
        except TypeError:
            raise ValueError(value) from None
        if self.kind.numeric and self.minimum is not None and parsed < self.minimum:
            raise ValueError(value)
        return self.kind.pykaf(parsed)


_P, _C, _G = PRODUCER, CONSUMER, GROUP

#: Every property, once.
PROPERTIES: tuple[Property, ...] = (
    # -- the client's ----------------------------------------------------------------
    Property(
        "bootstrap_servers",
        TEXT,
        java="bootstrap.servers",
        librdkafka=("bootstrap.servers", "metadata.broker.list"),
    ),
    Property("client_id", TEXT, java="client.id", librdkafka=("client.id",), python="client_id"),
    Property(
        "request_timeout",
        MILLISECONDS,
        java="request.timeout.ms",
        librdkafka=("request.timeout.ms", "socket.timeout.ms"),
        python="request_timeout_ms",
    ),
    Property("connect_timeout", MILLISECONDS, librdkafka=("socket.connection.setup.timeout.ms",)),
    Property(
        "retry_backoff",
        MILLISECONDS,
        java="retry.backoff.ms",
        librdkafka=("retry.backoff.ms",),
        python="retry_backoff_ms",
    ),
    Property(
        "retry_backoff_max",
        MILLISECONDS,
        java="retry.backoff.max.ms",
        librdkafka=("retry.backoff.max.ms",),
    ),
    Property(
        "reconnect_backoff",
        MILLISECONDS,
        java="reconnect.backoff.ms",
        librdkafka=("reconnect.backoff.ms",),
        python="reconnect_backoff_ms",
    ),
    Property(
        "reconnect_backoff_max",
        MILLISECONDS,
        java="reconnect.backoff.max.ms",
        librdkafka=("reconnect.backoff.max.ms",),
        python="reconnect_backoff_max_ms",
    ),
    Property(
        "metadata_max_age",
        MILLISECONDS,
        java="metadata.max.age.ms",
        librdkafka=("metadata.max.age.ms",),
        python="metadata_max_age_ms",
    ),
    Property(
        "metadata_recovery_strategy",
        LOWER,
        java="metadata.recovery.strategy",
        librdkafka=("metadata.recovery.strategy",),
    ),
    Property(
        "metadata_recovery_rebootstrap_trigger",
        MILLISECONDS,
        java="metadata.recovery.rebootstrap.trigger.ms",
        librdkafka=("metadata.recovery.rebootstrap.trigger.ms",),
    ),
    Property("max_response_bytes", BYTES, python="receive_message_max_bytes"),
    Property(
        "allow_auto_create_topics",
        FLAG,
        java="allow.auto.create.topics",
        java_roles=_C,  # a Java consumer's setting (Java's producer has none)
        librdkafka=("allow.auto.create.topics",),
        python="allow_auto_create_topics",
    ),
    Property("enable_metrics_push", FLAG, librdkafka=("enable.metrics.push",)),
    Property(
        "security_protocol",
        UPPER,
        java="security.protocol",
        librdkafka=("security.protocol",),
        python="security_protocol",
    ),
    Property(
        "sasl_mechanism",
        UPPER,
        java="sasl.mechanism",
        librdkafka=("sasl.mechanism", "sasl.mechanisms"),
        python="sasl_mechanism",
    ),
    # Spark takes librdkafka's sasl.username and sasl.password besides Java's sasl.jaas.config.
    Property(
        "sasl_username",
        TEXT,
        java="sasl.username",
        librdkafka=("sasl.username",),
        python="sasl_plain_username",
    ),
    Property(
        "sasl_password",
        TEXT,
        java="sasl.password",
        librdkafka=("sasl.password",),
        python="sasl_plain_password",
    ),
    Property("ssl_context", OBJECT, python="ssl_context"),
    Property(
        "ssl_cafile",
        TEXT,
        java="ssl.ca.location",
        librdkafka=("ssl.ca.location",),
        python="ssl_cafile",
    ),
    Property(
        "ssl_certfile",
        TEXT,
        java="ssl.certificate.location",
        librdkafka=("ssl.certificate.location",),
        python="ssl_certfile",
    ),
    Property(
        "ssl_keyfile",
        TEXT,
        java="ssl.key.location",
        librdkafka=("ssl.key.location",),
        python="ssl_keyfile",
    ),
    Property(
        "ssl_password",
        TEXT,
        java="ssl.key.password",
        librdkafka=("ssl.key.password",),
        python="ssl_password",
    ),
    Property(
        "ssl_check_hostname",
        ENDPOINT_CHECK,
        java="ssl.endpoint.identification.algorithm",
        librdkafka=("ssl.endpoint.identification.algorithm",),
    ),
    Property("ssl_check_hostname", FLAG, python="ssl_check_hostname"),
    # -- the producer's -------------------------------------------------------------
    Property(
        "acks", ACKS, _P, java="acks", librdkafka=("acks", "request.required.acks"), python="acks"
    ),
    Property(
        "linger",
        MILLISECONDS,
        _P,
        java="linger.ms",
        librdkafka=("linger.ms", "queue.buffering.max.ms"),
        python="linger_ms",
    ),
    Property(
        "flush_bytes",
        BYTES,
        _P,
        java="batch.size",
        python="batch_size",
        note="a batch goes once it holds this many bytes (a larger record goes alone); "
        "0 turns batching off (one record per batch), as in Java",
    ),
    Property(
        "flush_bytes",
        BYTES,
        _P,
        librdkafka=("batch.size",),
        minimum=1,
        note="a batch goes once it holds this many bytes; a larger message goes alone, "
        "as in librdkafka",
    ),
    Property("batch_records", INTEGER, _P, librdkafka=("batch.num.messages",), minimum=1),
    Property(
        "max_message_bytes",
        BYTES,
        _P,
        java="max.request.size",
        librdkafka=("message.max.bytes",),
        python="max_request_size",
        note="1,000,000 unless given, as librdkafka's; batch_bytes is raised to it",
    ),
    Property(
        "compression",
        CODEC,
        _P,
        java="compression.type",
        librdkafka=("compression.type", "compression.codec"),
        python="compression_type",
    ),
    Property("compression_level", INTEGER, _P, librdkafka=("compression.level",), minimum=-1),
    Property(
        "idempotence",
        FLAG,
        _P,
        java="enable.idempotence",
        librdkafka=("enable.idempotence",),
        python="enable_idempotence",
    ),
    Property(
        "transactional_id",
        TEXT,
        _P,
        librdkafka=("transactional.id",),
        python="transactional_id",
    ),
    Property(
        "transaction_timeout",
        MILLISECONDS,
        _P,
        librdkafka=("transaction.timeout.ms",),
        python="transaction_timeout_ms",
    ),
    Property(
        "delivery_timeout",
        MILLISECONDS,
        _P,
        java="delivery.timeout.ms",
        librdkafka=("message.timeout.ms", "delivery.timeout.ms"),
        python="delivery_timeout_ms",
    ),
    Property(
        "retries",
        INTEGER,
        _P,
        java="retries",
        librdkafka=("retries", "message.send.max.retries"),
        python="retries",
    ),
    Property(
        "max_in_flight",
        INTEGER,
        _P,
        java="max.in.flight.requests.per.connection",
        librdkafka=("max.in.flight.requests.per.connection", "max.in.flight"),
        python="max_in_flight_requests_per_connection",
    ),
    Property("buffer_records", INTEGER, _P, librdkafka=("queue.buffering.max.messages",)),
    Property("buffer_bytes", BYTES, _P, java="buffer.memory", python="buffer_memory"),
    Property(
        "buffer_bytes",
        KIBIBYTES,
        _P,
        librdkafka=("queue.buffering.max.kbytes",),
        note="KiB, as librdkafka counts it",
    ),
    Property(
        "partitioner",
        PARTITIONER,
        _P,
        librdkafka=("partitioner",),
        note="consistent_random (CRC-32, librdkafka's default) unless given; also random, "
        "consistent, murmur2, murmur2_random, fnv1a, fnv1a_random, as librdkafka's",
    ),
    Property("produce_block_timeout", MILLISECONDS, _P, python="max_block_ms"),
    # -- the consumer's -------------------------------------------------------------
    Property(
        "max_in_flight_per_connection",
        INTEGER,
        _C | ADMIN,
        java="max.in.flight.requests.per.connection",
        java_roles=_C,
        python="max_in_flight_requests_per_connection",
    ),
    Property(
        "isolation_level",
        ISOLATION,
        _C,
        java="isolation.level",
        librdkafka=("isolation.level",),
        python="isolation_level",
    ),
    Property(
        "fetch_min_bytes",
        BYTES,
        _C,
        java="fetch.min.bytes",
        librdkafka=("fetch.min.bytes",),
        python="fetch_min_bytes",
    ),
    Property(
        "fetch_max_wait",
        MILLISECONDS,
        _C,
        java="fetch.max.wait.ms",
        librdkafka=("fetch.wait.max.ms",),
        python="fetch_max_wait_ms",
    ),
    Property(
        "fetch_max_bytes",
        BYTES,
        _C,
        java="fetch.max.bytes",
        librdkafka=("fetch.max.bytes",),
        python="fetch_max_bytes",
    ),
    Property(
        "max_partition_fetch_bytes",
        BYTES,
        _C,
        java="max.partition.fetch.bytes",
        librdkafka=("max.partition.fetch.bytes",),
        python="max_partition_fetch_bytes",
    ),
    Property(
        "check_crcs",
        FLAG,
        _C,
        java="check.crcs",
        librdkafka=("check.crcs",),
        python="check_crcs",
    ),
    Property(
        "client_rack",
        TEXT,
        _C,
        java="client.rack",
        librdkafka=("client.rack",),
        python="client_rack",
    ),
    Property("fetch_sessions", FLAG, _C, python="enable_incremental_fetch_sessions"),
    Property(
        "fetch_buffer_bytes",
        KIBIBYTES,
        _C,
        librdkafka=("queued.max.messages.kbytes",),
        note="KiB, as librdkafka counts it",
    ),
    Property(
        "auto_offset_reset",
        RESET,
        _C,
        librdkafka=("auto.offset.reset",),
        python="auto_offset_reset",
        note="smallest/beginning: earliest; largest/end: latest; error: none",
    ),
    # -- a group member's -------------------------------------------------------------
    Property("group_id", TEXT, _G, librdkafka=("group.id",)),
    Property(
        "group_instance_id",
        TEXT,
        _G,
        librdkafka=("group.instance.id",),
        python="group_instance_id",
    ),
    Property(
        "group_protocol",
        GROUP_PROTOCOL,
        _G,
        librdkafka=("group.protocol",),
        note="classic or consumer (KIP-848, Kafka 4.0+)",
    ),
    Property("group_remote_assignor", TEXT, _G, librdkafka=("group.remote.assignor",)),
    Property(
        "auto_commit",
        FLAG,
        _G,
        librdkafka=("enable.auto.commit",),
        python="enable_auto_commit",
    ),
    Property(
        "auto_commit_interval",
        MILLISECONDS,
        _G,
        librdkafka=("auto.commit.interval.ms",),
        python="auto_commit_interval_ms",
    ),
    Property(
        "session_timeout",
        MILLISECONDS,
        _G,
        librdkafka=("session.timeout.ms",),
        python="session_timeout_ms",
    ),
    Property(
        "heartbeat_interval",
        MILLISECONDS,
        _G,
        librdkafka=("heartbeat.interval.ms",),
        python="heartbeat_interval_ms",
    ),
    Property(
        "rebalance_timeout",
        MILLISECONDS,
        _G,
        librdkafka=("max.poll.interval.ms",),
        python="max_poll_interval_ms",
        note="the rebalance timeout, as in librdkafka",
    ),
)


# -- the generated tables -------------------------------------------------------------


def java_table(role: str) -> dict[str, Property]:
    """Java's name -> its property, for a Spark ``role`` ("producer" or "consumer")."""
    return {
        p.java: p
        for p in PROPERTIES
        if p.java is not None and role in (p.java_roles if p.java_roles is not None else p.roles)
    }


def librdkafka_table() -> dict[str, Property]:
    """Librdkafka's name (aliases included) -> its property."""
    return {name: p for p in PROPERTIES for name in p.librdkafka}


def python_table(role: str) -> dict[str, Property]:
    """kafka-python's keyword -> its property, for one ``role``.

    ``role`` "client": the options of every client; "producer", "consumer",
    "group" or "admin": that role's besides the client's.
    """
    return {
        p.python: p
        for p in PROPERTIES
        if p.python is not None
        and (p.roles == CLIENT if role == "client" else role in p.roles and p.roles != CLIENT)
    }


# -- what every translation does last ---------------------------------------------------


def fit_largest_message(options: dict[str, Any]) -> None:
    """Raise ``batch_bytes`` and ``max_request_bytes`` to hold ``max_message_bytes``.

    Java's ``max.request.size``, librdkafka's ``message.max.bytes`` and
    kafka-python's ``max_request_size`` cap one record and one request alike;
    pykaf's batches and requests must hold such a record, so each limit is
    raised to it where it is lower (a limit already larger is kept, whoever
    set it).
    """
    largest = options.get("max_message_bytes")
    if isinstance(largest, int) and not isinstance(largest, bool):
        defaults = ProducerConfig()
        for name in ("batch_bytes", "max_request_bytes"):
            options[name] = max(options.get(name, getattr(defaults, name)), largest)


def batching_off(options: dict[str, Any]) -> None:
    """Java's and kafka-python's ``batch.size`` 0: one record per batch (``batch_records=1``).

    (pykaf's own ``flush_bytes`` 0 means the opposite, "only on linger".)
    """
    if options.get("flush_bytes") == 0:
        del options["flush_bytes"]
        options["batch_records"] = 1


def scales(rows: Iterable[Property]) -> dict[str, float]:
    """Pykaf option -> the factor from pykaf's unit to the user's, for error messages."""
    return {p.option: p.kind.scale for p in rows if p.kind.scale != 1}


def names_for(given: Mapping[str, Any], table: Mapping[str, Property]) -> dict[str, str]:
    """Pykaf option -> the user's name for it: the one ``given`` has, else the table's first."""
    names: dict[str, str] = {}
    for name, row in table.items():
        if row.option not in names or (name in given and names[row.option] not in given):
            names[row.option] = name
    return names
