"""Topic, broker, group and client-metrics configs: DescribeConfigs and IncrementalAlterConfigs.

A topic's config resolves as Kafka's does: the topic's own value, else the
cluster-wide dynamic broker default of its synonym (set through the broker
resource named ``""``), else the built-in default. Broker configs are the
static ones every broker reports (read-only here) and the dynamic ones an
IncrementalAlterConfigs may set per broker or cluster-wide. Values are
checked by type before anything is stored; a resource's changes are applied
all together or not at all. Group configs (KIP-848, KIP-932) are kept per
group id, checked within the bounds pykaf's Kafka test cluster sets (a 1 s
floor for share locks and sessions, where Kafka's own is 15 s and 45 s).
Client-metrics subscriptions (KIP-714) are ``client_metrics.py``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, ClusterState, RequestContext
from pykaf.testing._fake.client_metrics import CLIENT_METRICS, SOURCE_SET
from pykaf.testing._fake.client_metrics import Refused as _Refused
from pykaf.testing._fake.model import (
    DEFAULT,
    DYNAMIC_GROUP,
    DYNAMIC_TOPIC,
    STATIC_BROKER,
    Topic,
)
from pykaf.testing._fake.share_partition import duration_ms

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's ConfigType codes (DescribeConfigs v3+).
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7

_INVALID_CONFIG = errors.InvalidConfigurationError.code
_INVALID_REQUEST = errors.InvalidRequestError.code
_LONG_MAX = str(2**63 - 1)


class ConfigValueError(ValueError):
    """A config value that does not parse as its type."""


_INTEGER = re.compile(r"-?[0-9]+")


def _check_int(value: str, lo: int, hi: int = 2**63 - 1) -> None:
    """An integer as Java parses one (no '_', no '+'), within ``lo`` and ``hi``."""
    if not _INTEGER.fullmatch(value.strip()):
        raise ConfigValueError(f"{value!r} is not an integer")
    n = int(value)
    if n < lo:
        raise ConfigValueError(f"{value} is below the minimum {lo}")
    if n > hi:
        raise ConfigValueError(f"{value} is above the maximum {hi}")


def _check_double(value: str) -> None:
    try:
        float(value)
    except ValueError:
        raise ConfigValueError(f"{value!r} is not a number") from None


def _check_bool(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ConfigValueError(f"{value!r} is not true or false")


def _one_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise ConfigValueError(f"{value!r} is not one of {', '.join(choices)}")

    return check


def _list_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        bad = [v for v in _split(value) if choices and v not in choices]
        if bad:
            raise ConfigValueError(f"{', '.join(bad)} not among {', '.join(choices)}")

    return check


@dataclass(frozen=True)
class ConfigDef:
    """One config the fake knows: its default, type, check and broker synonym."""

    name: str
    default: str
    kind: int
    check: Callable[[str], None]
    synonym: str | None = None  # the broker config a topic config defaults to
    dynamic: bool = True  # broker configs: may be altered at run time

    def validate(self, value: str) -> None:
        """Raise :class:`ConfigValueError` when ``value`` is not valid for this config."""
        self.check(value)


def _long(name: str, default: str, lo: int = -1, synonym: str | None = None) -> ConfigDef:
    return ConfigDef(name, default, _LONG, lambda v: _check_int(v, lo), synonym)


def _int(
    name: str, default: str, lo: int = 0, synonym: str | None = None, hi: int = 2**31 - 1
) -> ConfigDef:
    return ConfigDef(name, default, _INT, lambda v: _check_int(v, lo, hi), synonym)


_CODECS = ("uncompressed", "gzip", "snappy", "lz4", "zstd", "producer")

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        ConfigDef(
            "cleanup.policy",
            "delete",
            _LIST,
            _list_of("delete", "compact"),
            "log.cleanup.policy",
        ),
        ConfigDef("compression.type", "producer", _STRING, _one_of(*_CODECS), "compression.type"),
        _int("compression.gzip.level", "-1", -1, "compression.gzip.level", hi=9),
        _int("compression.lz4.level", "9", 1, "compression.lz4.level", hi=17),
        _int("compression.zstd.level", "3", -131072, "compression.zstd.level", hi=22),
        _long("delete.retention.ms", "86400000", 0),
        # Kafka 4.4: the topic may be a share group's dead-letter queue (off by default)
        ConfigDef("errors.deadletterqueue.group.enable", "false", _BOOLEAN, _check_bool),
        _long("file.delete.delay.ms", "60000", 0),
        _long("flush.messages", _LONG_MAX, 1),
        _long("flush.ms", _LONG_MAX, 0),
        ConfigDef("follower.replication.throttled.replicas", "", _LIST, _list_of()),
        _int("index.interval.bytes", "4096"),
        ConfigDef("leader.replication.throttled.replicas", "", _LIST, _list_of()),
        _long("local.retention.bytes", "-2", -2),
        _long("local.retention.ms", "-2", -2),
        _long("max.compaction.lag.ms", _LONG_MAX, 1),
        # Kafka 4.4: a cap on one record's decompressed size (the default: none)
        _int("max.decompressed.message.bytes", "2147483639", 0),
        _int("max.message.bytes", "1048588", 0, "message.max.bytes"),
        # Kafka 4's default: at most an hour ahead of the broker's clock
        _long("message.timestamp.after.max.ms", "3600000", 0, "log.message.timestamp.after.max.ms"),
        _long(
            "message.timestamp.before.max.ms", _LONG_MAX, 0, "log.message.timestamp.before.max.ms"
        ),
        ConfigDef(
            "message.timestamp.type",
            "CreateTime",
            _STRING,
            _one_of("CreateTime", "LogAppendTime"),
            "log.message.timestamp.type",
        ),
        ConfigDef("min.cleanable.dirty.ratio", "0.5", _DOUBLE, _check_double),
        _long("min.compaction.lag.ms", "0", 0),
        _int("min.insync.replicas", "1", 1, "min.insync.replicas"),
        ConfigDef("preallocate", "false", _BOOLEAN, _check_bool),
        ConfigDef("remote.log.copy.disable", "false", _BOOLEAN, _check_bool),
        ConfigDef("remote.log.delete.on.disable", "false", _BOOLEAN, _check_bool),
        # Kafka 4.4: when a segment may be copied to remote storage (-1: from local retention)
        _long("remote.copy.lag.bytes", "-1", -1),
        _long("remote.copy.lag.ms", "0", -1),
        ConfigDef("remote.storage.enable", "false", _BOOLEAN, _check_bool),
        _long("retention.bytes", "-1", -1, "log.retention.bytes"),
        _long("retention.ms", "604800000", -1, "log.retention.ms"),
        _int("segment.bytes", "1073741824", 14, "log.segment.bytes"),
        _int("segment.index.bytes", "10485760", 4),
        _long("segment.jitter.ms", "0", 0),
        _long("segment.ms", "604800000", 1, "log.roll.ms"),
        ConfigDef("unclean.leader.election.enable", "false", _BOOLEAN, _check_bool),
    ]
}


def _check_reset(value: str) -> None:
    if value in ("earliest", "latest"):
        return
    if value.startswith("by_duration:") and duration_ms(value.removeprefix("by_duration:")):
        return
    raise ConfigValueError(
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must "
        "be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


#: Group configs Kafka 4.3 takes (KIP-848, KIP-932), with the fake's defaults and bounds.
GROUP_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _int("consumer.session.timeout.ms", "10000", 1000, hi=60000),
        _int("consumer.heartbeat.interval.ms", "1000", 500, hi=15000),
        _int("consumer.assignment.interval.ms", "1000", 0),
        ConfigDef("share.auto.offset.reset", "latest", _STRING, _check_reset),
        _int("share.record.lock.duration.ms", "30000", 1000, hi=60000),
        _int("share.delivery.count.limit", "5", 2, hi=10),
        _int("share.session.timeout.ms", "10000", 1000, hi=60000),
        _int("share.heartbeat.interval.ms", "1000", 500, hi=15000),
        _int("share.assignment.interval.ms", "1000", 0),
        ConfigDef(
            "share.isolation.level",
            "read_uncommitted",
            _STRING,
            _one_of("read_uncommitted", "read_committed"),
        ),
        ConfigDef("share.renew.acknowledge.enable", "true", _BOOLEAN, _check_bool),
        _int("share.partition.max.record.locks", "2000", 100, hi=10000),
    ]
}


def group_value(cluster: ClusterState, group_id: str, name: str) -> str:
    """A group config's value in force: the group's own, else the fake's default."""
    return cluster.configs.groups.get(group_id, {}).get(name, GROUP_CONFIGS[name].default)


def _broker_configs(cluster: ClusterState) -> dict[str, ConfigDef]:
    """The broker configs: dynamic ones (topic defaults, limits) and static read-only ones."""
    dynamic = [
        ConfigDef("log.cleanup.policy", "delete", _LIST, _list_of("delete", "compact")),
        ConfigDef("compression.type", "producer", _STRING, _one_of(*_CODECS)),
        _int("compression.gzip.level", "-1", -1, hi=9),
        _int("compression.lz4.level", "9", 1, hi=17),
        _int("compression.zstd.level", "3", -131072, hi=22),
        _int("log.cleaner.threads", "1", 0),
        ConfigDef(
            "log.message.timestamp.type",
            "CreateTime",
            _STRING,
            _one_of("CreateTime", "LogAppendTime"),
        ),
        _long("log.message.timestamp.after.max.ms", "3600000", 0),
        _long("log.message.timestamp.before.max.ms", _LONG_MAX, 0),
        _long("log.retention.bytes", "-1"),
        # unset in Kafka: retention.ms then follows log.retention.hours (168)
        ConfigDef("log.retention.ms", "", _LONG, lambda v: _check_int(v, -1)),
        _long("log.roll.ms", "604800000", 1),
        _int("log.segment.bytes", "1073741824", 14),
        _int("message.max.bytes", "1048588"),
        _int("min.insync.replicas", "1", 1),
    ]
    static = [
        ConfigDef("auto.create.topics.enable", str(cluster.auto_create_topics).lower(), _BOOLEAN,
                  _check_bool, dynamic=False),
        ConfigDef("log.retention.hours", "168", _INT, lambda v: _check_int(v, 1), dynamic=False),
        ConfigDef("num.partitions", str(cluster.default_partitions), _INT,
                  lambda v: _check_int(v, 1), dynamic=False),
        ConfigDef("transaction.max.timeout.ms", str(cluster.max_transaction_timeout_ms), _INT,
                  lambda v: _check_int(v, 1), dynamic=False),
    ]  # fmt: skip
    return {c.name: c for c in [*dynamic, *static]}


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def validate_topic_configs(configs: dict[str, str | None]) -> str | None:
    """Why ``configs`` (as CreateTopics gives them) are invalid, or None when they are valid."""
    for name, value in configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is None:
            return f"unknown topic config {name!r}"
        if value is None:
            continue
        try:
            spec.validate(value)
        except ConfigValueError as exc:
            return f"invalid value for {name}: {exc}"
    return None


def topic_value(cluster: ClusterState, topic: Topic, name: str) -> str:
    """A topic config's value in force: the topic's, else the cluster-wide broker default's."""
    spec = TOPIC_CONFIGS[name]
    chain = _topic_chain(cluster, topic, spec)
    return chain[0][1] if chain else spec.default


def _topic_chain(
    cluster: ClusterState, topic: Topic, spec: ConfigDef
) -> list[tuple[str, str, int]]:
    """Where a topic config's value may come from, first in force: (name, value, source).

    The topic's own value, then its broker synonym's (Kafka lists only a
    config that has one): the cluster-wide dynamic default and the built-in
    default. Empty for a config with no synonym that the topic does not set.
    """
    chain: list[tuple[str, str, int]] = []
    if spec.name in topic.configs:
        chain.append((spec.name, topic.configs[spec.name], DYNAMIC_TOPIC))
    if spec.synonym is not None:
        chain += cluster.configs.levels(None, spec.synonym)
        if spec.synonym not in _UNSET_BY_DEFAULT:
            chain.append((spec.synonym, spec.default, DEFAULT))
    return chain


#: broker configs Kafka leaves unset (null) by default, so a topic lists no synonym for them
_UNSET_BY_DEFAULT = frozenset({"log.retention.ms"})

#: Kafka's own defaults of the static configs the fake takes as options
_KAFKA_STATIC_DEFAULTS = {
    "auto.create.topics.enable": "true",
    "log.retention.hours": "168",
    "num.partitions": "1",
    "transaction.max.timeout.ms": "900000",
}


def new_topic_configs(
    cluster: ClusterState, configs: dict[str, str]
) -> list[tuple[str, str, int, int]]:
    """Each config of a topic made with ``configs``: (name, value, source, type).

    What CreateTopics answers for a new topic.
    """
    out = []
    for spec in TOPIC_CONFIGS.values():
        if spec.name in configs:
            out.append((spec.name, configs[spec.name], DYNAMIC_TOPIC, spec.kind))
            continue
        levels = cluster.configs.levels(None, spec.synonym) if spec.synonym else []
        value, source = (levels[0][1], levels[0][2]) if levels else (spec.default, DEFAULT)
        out.append((spec.name, value, source, spec.kind))
    return out


# -- DescribeConfigs ---------------------------------------------------------------

_DR = P.DescribeConfigsResponse


def _entry(
    name: str,
    value: str | None,
    source: int,
    kind: int,
    read_only: bool,
    synonyms: list[tuple[str, str, int]],
) -> Any:
    return _DR.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        is_default=source == DEFAULT,
        config_source=source,
        is_sensitive=False,
        synonyms=[_DR.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in synonyms],
        config_type=kind,
        documentation=None,
    )


def _topic_entries(cluster: ClusterState, name: str, synonyms: bool) -> list[Any]:
    topic = cluster.topics[name]
    out = []
    for spec in TOPIC_CONFIGS.values():
        chain = _topic_chain(cluster, topic, spec)
        value, source = chain[0][1:] if chain else (spec.default, DEFAULT)
        out.append(_entry(spec.name, value, source, spec.kind, False, chain if synonyms else []))
    return out


def _broker_entries(cluster: ClusterState, node_id: int | None, synonyms: bool) -> list[Any]:
    out = []
    for spec in _broker_configs(cluster).values():
        chain = cluster.configs.levels(node_id, spec.name) if spec.dynamic else []
        if node_id is None:
            if not chain:
                continue  # the cluster-default resource lists only what was set,
            # ... with only its own level as synonyms
        elif spec.dynamic:
            if spec.name not in _UNSET_BY_DEFAULT:
                chain.append((spec.name, spec.default, DEFAULT))
        else:
            # a static config the fake took as an option: Kafka's default, or the broker's own
            same = _KAFKA_STATIC_DEFAULTS.get(spec.name) == spec.default
            chain.append((spec.name, spec.default, DEFAULT if same else STATIC_BROKER))
        out.append(
            _entry(
                spec.name,
                chain[0][1] if chain else None,
                chain[0][2] if chain else DEFAULT,
                spec.kind,
                not spec.dynamic,
                chain if synonyms else [],
            )
        )
    if node_id is not None:
        out.append(_entry("broker.id", str(node_id), STATIC_BROKER, _INT, True, []))
    return sorted(out, key=lambda e: e.name)


def _client_metrics_entries(cluster: ClusterState, name: str, synonyms: bool) -> list[Any]:
    """A client-metrics subscription's configs (KIP-714); an unknown name's are the defaults."""
    out = []
    for key, value, source, kind in cluster.telemetry.describe(name):
        own = [(key, value, source)] if synonyms and source == SOURCE_SET else []
        entry = _entry(key, value, source, kind, False, own)
        entry.is_default = False  # Kafka 4.3 marks none of them default
        out.append(entry)
    return out


def _broker_target(ctx: RequestContext, name: str) -> tuple[int | None, str | None]:
    """The broker id a broker resource names (None: cluster-wide), or why it is refused."""
    if name == "":
        return None, None
    try:
        node_id = int(name)
    except ValueError:
        return None, f"broker resource name {name!r} is not a broker id"
    if node_id != ctx.broker.node_id:
        return None, f"unexpected broker id: this is {ctx.broker.node_id}, asked about {node_id}"
    return node_id, None


def _describe_one(ctx: RequestContext, res: Any, synonyms: bool) -> Any:
    out = _DR.DescribeConfigsResult(
        error_code=0,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=[],
    )
    cluster = ctx.cluster
    if res.resource_type == TOPIC:
        if res.resource_name not in cluster.topics:
            out.error_code = errors.UnknownTopicOrPartitionError.code
            out.error_message = f"topic {res.resource_name!r} does not exist"
            return out
        entries = _topic_entries(cluster, res.resource_name, synonyms)
    elif res.resource_type == BROKER:
        node_id, why = _broker_target(ctx, res.resource_name)
        if why is not None:
            out.error_code, out.error_message = _INVALID_REQUEST, why
            return out
        entries = _broker_entries(cluster, node_id, synonyms)
    elif res.resource_type == CLIENT_METRICS:
        if not res.resource_name:
            out.error_code = _INVALID_REQUEST
            out.error_message = "Client metrics subscription name must not be empty"
            return out
        entries = _client_metrics_entries(cluster, res.resource_name, synonyms)
        out.error_message = ""  # Kafka 4.3 answers an empty message, not null, here
    elif res.resource_type == GROUP:
        own = cluster.configs.groups.get(res.resource_name, {})
        entries = [
            _entry(
                spec.name,
                own.get(spec.name, spec.default),
                DYNAMIC_GROUP if spec.name in own else DEFAULT,
                spec.kind,
                False,
                [],
            )
            for spec in GROUP_CONFIGS.values()
        ]
    else:
        out.error_code = _INVALID_REQUEST
        out.error_message = f"resource type {res.resource_type} is not supported"
        return out
    keys = res.configuration_keys
    out.configs = entries if keys is None else [e for e in entries if e.name in keys]
    return out


async def describe_configs(ctx: RequestContext, req: P.DescribeConfigsRequest, version: int) -> Any:
    """Each resource's configs with their sources (synonyms on request)."""
    synonyms = bool(getattr(req, "include_synonyms", False))
    return _DR(
        throttle_time_ms=0,
        results=[_describe_one(ctx, r, synonyms) for r in req.resources],
    )


def _describe_configs_error(req: Any, version: int, code: int) -> Any:
    return _DR(
        throttle_time_ms=0,
        results=[
            _DR.DescribeConfigsResult(
                error_code=code,
                error_message="injected",
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[],
            )
            for r in req.resources
        ],
    )


# -- IncrementalAlterConfigs -------------------------------------------------------

_AR = P.IncrementalAlterConfigsResponse


def _apply(
    current: dict[str, str], defs: dict[str, ConfigDef], changes: Sequence[Any], broker: bool
) -> None:
    """Apply ``changes`` to ``current`` in place, or raise :class:`_Refused` leaving it alone."""
    names = [c.name for c in changes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _Refused(_INVALID_REQUEST, f"configs given more than once: {', '.join(dup)}")
    result = dict(current)
    # Kafka checks a broker's values on that broker and answers INVALID_REQUEST
    # for anything wrong with them; a topic's bad value is INVALID_CONFIG.
    bad_value = _INVALID_REQUEST if broker else _INVALID_CONFIG
    for c in changes:
        spec = defs.get(c.name)
        if spec is None and c.config_operation == DELETE and not broker:
            continue  # Kafka: deleting what cannot be set changes nothing
        if spec is None:
            if defs is GROUP_CONFIGS:
                raise _Refused(bad_value, f"Unknown group config name: {c.name}")
            raise _Refused(bad_value, f"unknown config {c.name!r}")
        if not spec.dynamic:
            raise _Refused(_INVALID_REQUEST, f"{c.name} cannot be updated dynamically")
        op = c.config_operation
        if op == DELETE:
            result.pop(c.name, None)
            continue
        if op not in (SET, APPEND, SUBTRACT):
            raise _Refused(_INVALID_REQUEST, f"unknown config operation {op}")
        if c.value is None:
            raise _Refused(_INVALID_REQUEST, f"a null value for {c.name}")
        if op == SET:
            value = c.value
        elif spec.kind != _LIST:
            verb = "APPEND" if op == APPEND else "SUBTRACT"  # Kafka 4.3's words
            raise _Refused(
                _INVALID_CONFIG, f"Can't {verb} to key {c.name} because its type is not LIST."
            )
        else:
            items = _split(result.get(c.name, spec.default))
            given = _split(c.value)
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            value = ",".join(items)
        try:
            spec.validate(value)
        except ConfigValueError as exc:
            raise _Refused(bad_value, f"invalid value for {c.name}: {exc}") from None
        result[c.name] = value
    current.clear()
    current.update(result)


def _alter_one(ctx: RequestContext, res: Any, validate_only: bool) -> Any:
    out = _AR.AlterConfigsResourceResponse(
        error_code=0,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
    )
    cluster = ctx.cluster
    try:
        if res.resource_type == TOPIC:
            topic = cluster.topics.get(res.resource_name)
            if topic is None:
                raise _Refused(
                    errors.UnknownTopicOrPartitionError.code,
                    f"topic {res.resource_name!r} does not exist",
                )
            target, defs = topic.configs, TOPIC_CONFIGS
        elif res.resource_type == BROKER:
            node_id, why = _broker_target(ctx, res.resource_name)
            if why is not None:
                raise _Refused(_INVALID_REQUEST, why)
            target = cluster.configs.broker.setdefault(node_id, {})
            defs = _broker_configs(cluster)
        elif res.resource_type == CLIENT_METRICS:
            cluster.telemetry.alter(res.resource_name, res.configs, validate_only)
            return out
        elif res.resource_type == GROUP:
            if not res.resource_name:
                raise _Refused(_INVALID_REQUEST, "Group name can't be empty.")
            target = cluster.configs.groups.setdefault(res.resource_name, {})
            defs = GROUP_CONFIGS
        else:
            raise _Refused(_INVALID_REQUEST, f"resource type {res.resource_type} is not supported")
        copy = dict(target) if validate_only else target
        _apply(copy, defs, res.configs, broker=res.resource_type == BROKER)
    except _Refused as exc:
        out.error_code, out.error_message = exc.code, str(exc)
    return out


async def incremental_alter_configs(
    ctx: RequestContext, req: P.IncrementalAlterConfigsRequest, version: int
) -> Any:
    """Set, delete, append to or subtract from configs; each resource all or nothing."""
    return _AR(
        throttle_time_ms=0,
        responses=[_alter_one(ctx, r, req.validate_only) for r in req.resources],
    )


def _alter_error(req: Any, version: int, code: int) -> Any:
    return _AR(
        throttle_time_ms=0,
        responses=[
            _AR.AlterConfigsResourceResponse(
                error_code=code,
                error_message="injected",
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ],
    )


# Kafka 4.0 dropped the oldest versions (KIP-896); the fake speaks Kafka 4's ranges
APIS = [
    Api(
        P.DescribeConfigsRequest,
        P.DescribeConfigsResponse,
        describe_configs,
        1,
        4,
        error=_describe_configs_error,
    ),
    Api(
        P.IncrementalAlterConfigsRequest,
        P.IncrementalAlterConfigsResponse,
        incremental_alter_configs,
        0,
        1,
        error=_alter_error,
    ),
]
