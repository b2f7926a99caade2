"""The ``pykaf`` data source's options, named as Spark's Kafka connector names them.

``kafka.*`` options become pykaf client, producer or consumer settings (an
option pykaf does not take is refused by name, not ignored); the others
(``subscribe``, ``startingOffsets``, ...) say what to read. Everything here
is plain data, checked once when the query is planned, so a task never
meets a bad option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pykaf import errors
from pykaf._properties import FLAG, Property, batching_off, fit_largest_message, java_table

#: Offsets in a ``startingOffsets`` / ``endingOffsets`` JSON: Spark's codes.
EARLIEST = -2
LATEST = -1


def _bool(value: str) -> bool:
    return bool(FLAG.parse(value))


# kafka.* -> its property (Java's names and meanings), generated from the one
# declaration of every option (pykaf/_properties.py).
_PRODUCER = java_table("producer")
_CONSUMER = java_table("consumer")

#: kafka.* settings taken and not needed, and why (docs/spark.md lists them).
_NO_OP_CLIENT = {
    "receive.buffer.bytes": "the operating system sizes the socket buffers (Java's -1)",
    "send.buffer.bytes": "the operating system sizes the socket buffers (Java's -1)",
    "connections.max.idle.ms": "a task's connections last as long as the task",
}
_NO_OP_CONSUMER = {
    **_NO_OP_CLIENT,
    "group.id": "the read assigns its partitions and commits nothing: no group is joined",
    "session.timeout.ms": "no consumer group is joined",
    "heartbeat.interval.ms": "no consumer group is joined",
    "max.poll.interval.ms": "no consumer group is joined",
}
_NO_OP_PRODUCER = dict(_NO_OP_CLIENT)

#: kafka.* settings refused, and why (with pykaf's equivalent where there is one).
_REFUSED_CONSUMER = {
    "key.deserializer": "keys are read as bytes (binary columns); cast them in the query "
    "(Spark's Kafka source refuses it too)",
    "value.deserializer": "values are read as bytes (binary columns); cast them in the query "
    "(Spark's Kafka source refuses it too)",
    "auto.offset.reset": "set startingOffsets to earliest or latest instead (Spark's Kafka "
    "source refuses it too)",
    "enable.auto.commit": "no offsets are committed: a stream's position is in Spark's "
    "checkpoint (Spark's Kafka source refuses it too)",
    "max.poll.records": "there is no poll loop: a task reads whole Fetch answers (bound them "
    "with kafka.max.partition.fetch.bytes, or the rows per task with maxRecordsPerPartition)",
}
_REFUSED_PRODUCER = {
    "key.serializer": "keys are written as the key column's bytes (string or binary); cast "
    "the column (Spark's Kafka sink refuses it too)",
    "value.serializer": "values are written as the value column's bytes (string or binary); "
    "cast the column (Spark's Kafka sink refuses it too)",
}

_JAAS = re.compile(
    r"\s*org\.apache\.kafka\.common\.security\.(plain\.PlainLoginModule|"
    r"scram\.ScramLoginModule)\s+required\s+(.*?);?\s*$",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas(value: str) -> dict[str, str]:
    """``sasl.jaas.config`` of Kafka's PLAIN or SCRAM login module: the user name and password.

    PlainLoginModule implies the PLAIN mechanism; ScramLoginModule needs
    ``kafka.sasl.mechanism`` (SCRAM-SHA-256 or SCRAM-SHA-512), as in Java.

    Raises:
        ConfigError: another login module (named, with why), or no username/password.
    """
    found = _JAAS.match(value)
    if found is None:
        module = value.strip().split(None, 1)[0] if value.strip() else "(empty)"
        raise errors.ConfigError(
            f"option kafka.sasl.jaas.config: login module {module} is not supported: pykaf "
            "takes PlainLoginModule and ScramLoginModule (a username and a password); "
            "OAUTHBEARER needs a token provider in Python (pykaf's sasl_oauth_token_provider), "
            "and Kerberos (GSSAPI) is not supported"
        )
    fields: dict[str, str] = {}
    rest = found.group(2)
    while rest.strip():
        option = _JAAS_OPTION.match(rest)
        if option is None:
            raise errors.ConfigError(
                f"option kafka.sasl.jaas.config: cannot read {rest.strip()!r} "
                '(options are name="value")'
            )
        fields[option.group(1)] = re.sub(r"\\(.)", r"\1", option.group(2))
        rest = rest[option.end() :]
    if "username" not in fields or "password" not in fields:
        raise errors.ConfigError(
            "option kafka.sasl.jaas.config: the login module needs username=... password=..."
        )
    config = {"sasl_username": fields["username"], "sasl_password": fields["password"]}
    if found.group(1).startswith("plain"):
        config["sasl_mechanism"] = "PLAIN"  # kafka.sasl.mechanism, when given, says the same
    return config


def _stores(settings: Mapping[str, str]) -> dict[str, Any]:
    """Java's ``ssl.truststore.*`` / ``ssl.keystore.*`` and hostname checking, as pykaf's.

    A PEM store is a file pykaf reads as it is; JKS and PKCS12 stores are refused
    naming the PEM options to use instead.

    Raises:
        ConfigError: a JKS or PKCS12 store, or a PEM store with a password.
    """
    config: dict[str, Any] = {}
    for store, target, instead in (
        ("truststore", "ssl_cafile", "kafka.ssl.ca.location (a PEM file of the CA certificates)"),
        (
            "keystore",
            "ssl_certfile",
            "kafka.ssl.certificate.location and kafka.ssl.key.location (PEM files)",
        ),
    ):
        location = settings.get(f"ssl.{store}.location")
        kind = settings.get(f"ssl.{store}.type", "JKS").strip().upper()
        if location is None and f"ssl.{store}.password" not in settings:
            continue
        if kind != "PEM":
            raise errors.ConfigError(
                f"option kafka.ssl.{store}.location: a {kind} {store} cannot be read by pykaf; "
                f"convert it to PEM (keytool, openssl) and give {instead}, or "
                f"kafka.ssl.{store}.type=PEM"
            )
        if f"ssl.{store}.password" in settings and store == "truststore":
            raise errors.ConfigError(
                "option kafka.ssl.truststore.password: a PEM truststore has no password"
            )
        if location is not None:
            config[target] = location
        if store == "keystore" and f"ssl.{store}.password" in settings:
            config["ssl_password"] = settings[f"ssl.{store}.password"]
    return config


_STORE_KEYS = {
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
}


def _kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without the prefix, lower-cased (Java's names are)."""
    return {
        name[len("kafka.") :].lower(): value
        for name, value in options.items()
        if name.lower().startswith("kafka.")
    }


def _kafka_options(
    options: Mapping[str, str],
    table: Mapping[str, Property],
    no_op: Mapping[str, str],
    refused: Mapping[str, str],
) -> dict[str, Any]:
    """Pykaf options from the ``kafka.*`` options, by ``table``.

    ``no_op`` settings are taken and not used; ``refused`` ones are refused with
    their reason. Java's ``sasl.jaas.config`` and SSL stores are translated here.
    """
    config: dict[str, Any] = {}
    settings = _kafka_settings(options)
    unknown = []
    for key, value in settings.items():
        name = f"kafka.{key}"
        if key in refused:
            raise errors.ConfigError(f"option {name} is not supported: {refused[key]}")
        if key == "sasl.jaas.config":
            login = _jaas(value)
            if "sasl.mechanism" not in settings and "sasl_mechanism" not in login:
                raise errors.ConfigError(
                    "option kafka.sasl.jaas.config: ScramLoginModule needs kafka.sasl.mechanism "
                    "(SCRAM-SHA-256 or SCRAM-SHA-512)"
                )
            config.update({k: v for k, v in login.items() if k not in config})
        elif key in table:
            row = table[key]
            try:
                config[row.option] = row.convert(value)
            except ValueError:
                raise errors.ConfigError(
                    f"option {name}={value!r} is not valid: must be {row.expects}"
                ) from None
        elif key not in no_op and key not in _STORE_KEYS:
            unknown.append(name)
    if unknown:
        known = ", ".join(f"kafka.{k}" for k in table)
        raise errors.ConfigError(f"unsupported option(s) {', '.join(unknown)}; pykaf takes {known}")
    config.update(_stores(settings))
    if "bootstrap_servers" not in config:
        raise errors.ConfigError("the option kafka.bootstrap.servers is required")
    return config


def producer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """Pykaf producer options from the data source's ``kafka.*`` options (Java's names).

    As Kafka's Java producer, idempotence is on unless ``acks`` is not
    "all", ``retries`` is 0 or ``max.in.flight.requests.per.connection`` is
    over 5, when it is turned off, unless ``enable.idempotence=true`` asks
    for it (then the conflict is refused).

    Raises:
        ConfigError: ``kafka.bootstrap.servers`` is missing, or a ``kafka.*``
            option is one pykaf does not take (named, with why or with those it
            does), or the options conflict.
    """
    from pykaf._producer.config import ProducerConfig

    config = _kafka_options(options, _PRODUCER, _NO_OP_PRODUCER, _REFUSED_PRODUCER)
    batching_off(config)  # Java's batch.size 0
    fit_largest_message(config)  # Java's max.request.size caps a record and a request
    if "idempotence" not in config and (
        config.get("acks", "all") != "all"
        or config.get("retries") == 0
        or config.get("max_in_flight", 5) > 5
    ):
        config["idempotence"] = False  # what Java does when idempotence is not set
    try:
        ProducerConfig(**config)  # every option checked here, on the driver
    except errors.ConfigError as exc:
        raise errors.ConfigError(
            f"kafka.* options: {exc} (kafka.enable.idempotence=true needs kafka.acks=all, "
            "kafka.retries > 0 and at most 5 kafka.max.in.flight.requests.per.connection, "
            "as in Kafka's Java producer)"
            if config.get("idempotence")
            else f"kafka.* options: {exc}"
        ) from None
    return config


def consumer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """Pykaf consumer options from the ``kafka.*`` options; read_uncommitted unless set.

    read_uncommitted is the default of Spark's Kafka source and of Kafka's
    consumers (pykaf's own consumer defaults to read_committed): a job ported
    from ``format("kafka")`` reads the same rows, aborted transactional
    records included; ``kafka.isolation.level=read_committed`` leaves them out.

    Raises:
        ConfigError: as :func:`producer_config`, or an invalid consumer option.
    """
    from pykaf._consumer.config import ConsumerConfig

    config = _kafka_options(options, _CONSUMER, _NO_OP_CONSUMER, _REFUSED_CONSUMER)
    config.setdefault("isolation_level", "read_uncommitted")
    try:
        ConsumerConfig(**config)  # every option checked here, on the driver
    except errors.ConfigError as exc:
        raise errors.ConfigError(f"kafka.* options: {exc}") from None
    return config


# -- which options there are --------------------------------------------------------

#: The options of Spark's Kafka connector other than ``kafka.*`` (each taken by
#: pykaf, or accepted as a no-op: see docs/spark.md, "Porting from Spark's Kafka
#: connector"), and Spark's own ``checkpointLocation`` of a streaming write.
SPARK_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "topic",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "includeHeaders",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
    "checkpointLocation",
)
_KNOWN = {name.lower(): name for name in SPARK_OPTIONS}


def check_option_names(options: Mapping[str, str]) -> None:
    """Refuse options that are neither Spark's Kafka connector's nor ``kafka.*`` settings.

    Names are compared without case (PySpark hands options over lower-cased).

    Raises:
        ConfigError: naming each unknown option, with the options there are.
    """
    unknown = [
        name
        for name in options
        if not name.lower().startswith("kafka.") and name.lower() not in _KNOWN
    ]
    if unknown:
        raise errors.ConfigError(
            f"unknown option(s) {', '.join(sorted(unknown))}: neither an option of Spark's Kafka "
            f"connector nor a kafka.* setting (the options: {', '.join(SPARK_OPTIONS)})"
        )


def _no_ending_options(options: Mapping[str, str]) -> None:
    given = [
        name
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
        if options.get(name) is not None
    ]
    if given:
        raise errors.ConfigError(
            f"option(s) {', '.join(given)} are not valid in streaming queries (a stream has "
            "no end), as in Spark's Kafka source"
        )


# -- what to read -----------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """Which topics or partitions to read: exactly one of Spark's three ways.

    Attributes:
        topics: ``subscribe``: these topics, every partition.
        pattern: ``subscribePattern``: every topic whose whole name matches.
        assign: ``assign``: exactly these partitions of these topics.
    """

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is read (for ``subscribe`` and ``subscribePattern``)."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


def _json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        raise errors.ConfigError(f"option {name} is not valid JSON: {value!r}") from None


def subscription(options: Mapping[str, str]) -> Subscription:
    """The ``subscribe`` / ``subscribePattern`` / ``assign`` option (exactly one).

    Raises:
        ConfigError: none or several of them, or one that is malformed.
    """
    given = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise errors.ConfigError(
            "give exactly one of the options subscribe, subscribePattern, assign"
            + (f" (given: {', '.join(given)})" if given else "")
        )
    name = given[0]
    value = options[name]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise errors.ConfigError("option subscribe names no topic")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise errors.ConfigError(f"option subscribePattern: {exc}") from None
        return Subscription(pattern=value)
    parsed = _json(name, value)
    if not isinstance(parsed, dict) or not parsed:
        raise errors.ConfigError(f'option assign must look like {{"topic":[0,1]}}, not {value!r}')
    pairs = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts):
            raise errors.ConfigError(f"option assign: {topic!r} needs a list of partitions")
        pairs += [(topic, p) for p in parts]
    return Subscription(assign=tuple(sorted(set(pairs))))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class TimestampSpec:
    """Offsets by time: where each partition has its first record at or after a time.

    Attributes:
        option: the option it came from (for error messages).
        at: ``startingTimestamp`` / ``endingTimestamp``: one time (ms since
            the epoch) for every partition read.
        partitions: ``...OffsetsByTimestamp``: a time per partition (the
            partitions it leaves out take the default offsets).
    """

    option: str
    at: int | None = None
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)


#: An offsets option: "earliest", "latest", offsets per topic and partition,
#: or offsets by time.
OffsetSpec = int | dict[tuple[str, int], int] | TimestampSpec


def offset_spec(
    options: Mapping[str, str], name: str, default: int, *, allowed: set[int]
) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``: EARLIEST, LATEST, or a JSON of offsets.

    A JSON (``{"topic":{"0":23,"1":-2}}``) gives an offset per partition,
    where -2 means earliest and -1 latest; ``allowed`` says which of those
    two codes (and words) the option may use.

    Raises:
        ConfigError: a malformed value, or one the option does not allow.
    """
    value = options.get(name)
    if value is None:
        return default
    words = {"earliest": EARLIEST, "latest": LATEST}
    word = value.strip().lower()
    if word in words:
        if words[word] not in allowed:
            raise errors.ConfigError(f"option {name} cannot be {word!r} here")
        return words[word]

    def check(part: str, offset: object) -> int:
        if _is_int(offset) and (offset >= 0 or offset in allowed):  # type: ignore[operator]
            return offset  # type: ignore[return-value]
        raise errors.ConfigError(f"option {name}: {part} has offset {offset!r}")

    return _per_partition(name, value, "offset", check)


def _per_partition(
    name: str, value: str, what: str, check: Callable[[str, object], int]
) -> dict[tuple[str, int], int]:
    """A ``{"topic":{"0":n}}`` option: ``check(topic/partition, n)`` gives each number."""
    parsed = _json(name, value)
    if not isinstance(parsed, dict):
        raise errors.ConfigError(f'option {name} must look like {{"topic":{{"0":{what}}}}}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise errors.ConfigError(f"option {name}: {topic!r} needs {{partition: {what}}}")
        for part, number in parts.items():
            try:
                index = int(part)
            except ValueError:
                raise errors.ConfigError(f"option {name}: {part!r} is not a partition") from None
            out[(topic, index)] = check(f"{topic}/{part}", number)
    return out


def _timestamp(name: str, value: object) -> int:
    """A time in milliseconds since the epoch: an integer >= 0, or its decimal string."""
    number: object = value
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
        return number
    raise errors.ConfigError(
        f"option {name}: {value!r} is not a timestamp (milliseconds since the epoch)"
    )


def offsets_option(
    options: Mapping[str, str], which: str, default: int, *, allowed: set[int]
) -> OffsetSpec:
    """Where a read starts (``which`` "starting") or ends ("ending"), as Spark takes it.

    ``{which}Timestamp`` (one time for every partition) takes precedence over
    ``{which}OffsetsByTimestamp`` (``{"topic":{"0":1700000000000}}``), which
    takes precedence over ``{which}Offsets`` (:func:`offset_spec`).

    Raises:
        ConfigError: a malformed value.
    """
    name = f"{which}Timestamp"
    if options.get(name) is not None:
        return TimestampSpec(name, at=_timestamp(name, options[name]))
    name = f"{which}OffsetsByTimestamp"
    if options.get(name) is not None:
        times = _per_partition(name, options[name], "time", lambda _, t: _timestamp(name, t))
        return TimestampSpec(name, partitions=times)
    return offset_spec(options, f"{which}Offsets", default, allowed=allowed)


def choice(options: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """An option that is one of ``allowed`` (case-insensitive); the first by default.

    Raises:
        ConfigError: it is given and is none of them.
    """
    value = options.get(name)
    if value is None:
        return allowed[0]
    if value.strip().lower() not in allowed:
        raise errors.ConfigError(f"option {name} must be {' or '.join(allowed)}, not {value!r}")
    return value.strip().lower()


def positive_int(options: Mapping[str, str], name: str) -> int | None:
    """An optional option that must be an integer >= 1.

    Raises:
        ConfigError: it is given and is not such an integer.
    """
    value = options.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise errors.ConfigError(f"option {name} must be an integer >= 1, not {value!r}")
    return number


def flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false option.

    Raises:
        ConfigError: it is given and is neither.
    """
    value = options.get(name)
    if value is None:
        return default
    try:
        return _bool(value)
    except ValueError:
        raise errors.ConfigError(f"option {name} must be true or false, not {value!r}") from None


def _duration(options: Mapping[str, str], name: str, default: float) -> float:
    """A Spark time string (``"15m"``, ``"30s"``, ``"500ms"``; a bare number is ms), in seconds.

    Raises:
        ConfigError: it is given and is not such a string.
    """
    value = options.get(name)
    if value is None:
        return default
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if found is None or found.group(2) not in {"", *units}:
        raise errors.ConfigError(
            f"option {name} must be a duration such as 15m, 30s or 500ms, not {value!r}"
        )
    return int(found.group(1)) * units.get(found.group(2), 1e-3)


def _non_negative_int(options: Mapping[str, str], name: str) -> None:
    """Check an option that must be an integer >= 0 (one pykaf takes but does not need)."""
    value = options.get(name)
    if value is not None and not value.strip().isdigit():
        raise errors.ConfigError(f"option {name} must be an integer >= 0, not {value!r}")


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read (batch or streaming) takes from the options, checked.

    Attributes:
        config: the consumer's options (:func:`consumer_config`).
        subscription: what to read.
        starting: ``startingTimestamp``, ``startingOffsetsByTimestamp`` or
            ``startingOffsets`` (the first given, in that order).
        ending: ``endingTimestamp``, ``endingOffsetsByTimestamp`` or
            ``endingOffsets`` (batch reads only; LATEST for streams).
        no_match_latest: ``startingOffsetsByTimestampStrategy`` is "latest": a
            partition with no record at or after its starting time starts at
            its latest offset (otherwise the read fails).
        max_per_trigger: ``maxOffsetsPerTrigger`` (streams only).
        min_per_trigger: ``minOffsetsPerTrigger`` (streams only): a
            micro-batch waits until that many offsets are waiting ...
        max_trigger_delay: ... or ``maxTriggerDelay`` seconds (15 minutes by
            default) passed since the last micro-batch.
        min_partitions, max_records: ``minPartitions``, ``maxRecordsPerPartition``.
        include_headers: ``includeHeaders``.
        fail_on_data_loss: ``failOnDataLoss``.
        poll_timeout: ``kafkaConsumer.pollTimeoutMs``, in seconds: how long a
            task waits without progress before it fails (120 s by default).
    """

    config: dict[str, Any]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    no_match_latest: bool
    max_per_trigger: int | None
    min_per_trigger: int | None
    max_trigger_delay: float
    min_partitions: int | None
    max_records: int | None
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout: float


def read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """The read options, as Spark's Kafka source takes them.

    Batch reads start at the earliest offsets and end at the latest (and may
    not start at "latest"); streams start at the latest and take no ending
    option. Offsets by time are looked up when the query is planned
    (:func:`pykaf.spark._read.resolve`). ``streaming`` None checks what holds
    for either (the data source's ``schema()``, which does not know which).
    ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs`` and
    ``groupIdPrefix`` are checked and otherwise not used (pykaf's client
    retries ListOffsets itself; it reads without a consumer group).

    Raises:
        ConfigError: an option is unknown, missing, malformed or not allowed here.
    """
    check_option_names(options)
    if streaming:
        _no_ending_options(options)
        starting = offsets_option(options, "starting", LATEST, allowed={EARLIEST, LATEST})
        ending: OffsetSpec = LATEST
    else:
        allowed = {EARLIEST} if streaming is False else {EARLIEST, LATEST}
        starting = offsets_option(options, "starting", EARLIEST, allowed=allowed)
        ending = offsets_option(options, "ending", LATEST, allowed={LATEST})
    strategy = choice(options, "startingOffsetsByTimestampStrategy", ("error", "latest"))
    _non_negative_int(options, "fetchOffset.numRetries")
    _non_negative_int(options, "fetchOffset.retryIntervalMs")
    return ReadOptions(
        config=consumer_config(options),
        subscription=subscription(options),
        starting=starting,
        ending=ending,
        no_match_latest=strategy == "latest",
        max_per_trigger=positive_int(options, "maxOffsetsPerTrigger"),
        min_per_trigger=positive_int(options, "minOffsetsPerTrigger"),
        max_trigger_delay=_duration(options, "maxTriggerDelay", 15 * 60.0),
        min_partitions=positive_int(options, "minPartitions"),
        max_records=positive_int(options, "maxRecordsPerPartition"),
        include_headers=flag(options, "includeHeaders", False),
        fail_on_data_loss=flag(options, "failOnDataLoss", True),
        poll_timeout=(positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000) / 1000,
    )
