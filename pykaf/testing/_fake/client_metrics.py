"""Client-metrics subscriptions (KIP-714): the ``CLIENT_METRICS`` config resources.

A subscription is a named config resource (type 16) with ``metrics`` (name
prefixes; ``*`` for all), ``interval.ms`` (100 to 3600000, 300000 by default)
and ``match`` (``attribute=regex`` pairs a client must all fully match: its
``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address`` or
``client_source_port``). IncrementalAlterConfigs sets them, all or nothing,
with Kafka 4.3's checks and error codes; deleting every config removes the
subscription; DescribeConfigs lists the three configs with their sources.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pykaf import errors

CLIENT_METRICS = 16
#: IncrementalAlterConfigs' operations
_SET, _DELETE = 0, 1
#: Kafka's ConfigSource of a client-metrics config that is set, and of a default
SOURCE_SET, SOURCE_DEFAULT = 7, 5
#: Kafka's ConfigType codes
_INT, _LIST = 3, 7

DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
#: the configs, with their defaults and types, in DescribeConfigs' order
CONFIGS = {
    "interval.ms": (str(DEFAULT_INTERVAL_MS), _INT),
    "match": ("", _LIST),
    "metrics": ("", _LIST),
}
MATCH_ATTRIBUTES = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)
ALL_METRICS = "*"

_INVALID_REQUEST = errors.InvalidRequestError.code
_INVALID_CONFIG = errors.InvalidConfigurationError.code


class Refused(Exception):
    """A client-metrics change Kafka refuses: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Subscription:
    """One parsed subscription."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Whether a client with these attributes is subscribed (no patterns: every client)."""
        for name, pattern in self.match:
            value = attributes.get(name)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def _split(value: str) -> list[str]:
    """A LIST config's items (Kafka splits on commas and trims; "" is no item)."""
    return [] if not value.strip() else [v.strip() for v in value.split(",")]


def _patterns(value: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for item in _split(value):
        parts = item.split("=")
        while parts and not parts[-1]:
            parts.pop()  # as Java's String.split drops trailing empty strings
        name = parts[0].strip() if parts else ""
        if len(parts) != 2 or name not in MATCH_ATTRIBUTES:
            raise Refused(_INVALID_CONFIG, f"Illegal client matching pattern: {item}")
        try:
            out.append((name, re.compile(parts[1].strip())))
        except re.error:
            raise Refused(_INVALID_CONFIG, f"Illegal client matching pattern: {item}") from None
    return tuple(out)


def _interval(value: str) -> int:
    text = value.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**31) <= int(text) < 2**31:
        raise Refused(
            _INVALID_CONFIG,
            f"Invalid value {value} for configuration interval.ms: Not a number of type INT",
        )
    ms = int(text)
    if not MIN_INTERVAL_MS <= ms <= MAX_INTERVAL_MS:
        raise Refused(
            _INVALID_REQUEST,
            f"Invalid value {ms} for interval.ms, interval must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
        )
    return ms


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """A subscription from its configs, checked as Kafka checks them.

    Raises:
        Refused: INVALID_REQUEST (an unknown config, an interval out of
            range) or INVALID_CONFIG (a value that does not parse, a bad
            match pattern).
    """
    for key in configs:
        if key not in CONFIGS:
            raise Refused(_INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval = _interval(configs["interval.ms"]) if "interval.ms" in configs else None
    return Subscription(
        name,
        frozenset(_split(configs.get("metrics", ""))),
        DEFAULT_INTERVAL_MS if interval is None else interval,
        _patterns(configs.get("match", "")),
    )


def apply(current: Mapping[str, str], name: str, changes: Sequence[Any]) -> dict[str, str]:
    """The configs after IncrementalAlterConfigs' ``changes`` (``current`` is left alone).

    Raises:
        Refused: the change as a whole is refused, with Kafka 4.3's code.
    """
    if not name:
        raise Refused(_INVALID_REQUEST, "Subscription name can't be empty")
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise Refused(_INVALID_REQUEST, "Error due to duplicate config keys")
    result = dict(current)
    for c in changes:
        if c.config_operation == _DELETE:
            result.pop(c.name, None)
        elif c.config_operation == _SET:
            if c.value is None:
                raise Refused(_INVALID_REQUEST, f"Null value not supported for : {c.name}")
            # Kafka stores a list as its items joined by commas
            lists = CONFIGS.get(c.name, ("", _INT))[1] == _LIST
            result[c.name] = ",".join(_split(c.value)) if lists else c.value
        else:  # APPEND, SUBTRACT: Kafka 4.3 knows no list type for these configs
            verb = {2: "APPEND", 3: "SUBTRACT"}.get(c.config_operation)
            if verb is None:
                raise Refused(_INVALID_REQUEST, f"Unknown config operation {c.config_operation}")
            raise Refused(
                _INVALID_CONFIG, f"Can't {verb} to key {c.name} because its type is not LIST."
            )
    parse(name, result)
    return result


def describe(
    configs: Mapping[str, str] | None,
) -> list[tuple[str, str, int, int]]:
    """Each config of a subscription (any name: unknown ones show the defaults).

    Returns (name, value, source, type) in name order.
    """
    own = configs or {}
    return [
        (key, own[key], SOURCE_SET, kind) if key in own else (key, default, SOURCE_DEFAULT, kind)
        for key, (default, kind) in CONFIGS.items()
    ]
