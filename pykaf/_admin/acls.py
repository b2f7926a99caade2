"""ACL bindings and filters, and their translation to and from DescribeAcls, CreateAcls, DeleteAcls.

The enums carry Kafka's wire codes, so a binding goes on the wire as it is.
A binding is checked when it is made: it must name one resource pattern
(LITERAL or PREFIXED), one operation and ALLOW or DENY; ``ANY`` and ``MATCH``
belong to filters only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from pykaf import protocol as P


class ResourceType(IntEnum):
    """What an ACL is about (Kafka's ``ResourceType``)."""

    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """How an ACL's resource name matches (Kafka's ``PatternType``).

    ``LITERAL``: that name exactly (``"*"``: every resource of the type);
    ``PREFIXED``: every name starting with it. In filters, ``ANY`` matches
    either, and ``MATCH`` finds every binding that applies to the named
    resource: its literal, the ``"*"`` wildcard and the prefixes of its name.
    """

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """What an ACL allows or denies (Kafka's ``AclOperation``)."""

    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermission(IntEnum):
    """Whether an ACL allows or denies (Kafka's ``AclPermissionType``)."""

    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls: type[IntEnum], code: int) -> Any:
    """``cls(code)``, or the bare int for a code this pykaf does not know (a newer broker)."""
    try:
        return cls(code)
    except ValueError:
        return code


@dataclass(frozen=True)
class AclBinding:
    """One ACL: ``principal`` may (or may not) do ``operation`` on a resource from ``host``.

    Attributes:
        resource_type: a topic, group, the cluster, a transactional id, ...
        name: the resource's name (``"*"`` for all; ``"kafka-cluster"`` for
            the cluster), or a prefix with ``PatternType.PREFIXED``.
        principal: ``"User:alice"`` (``"User:*"`` for every user).
        operation: what is allowed or denied.
        permission: ``ALLOW`` (the default) or ``DENY``.
        host: the client address it applies to (``"*"``: any).
        pattern_type: ``LITERAL`` (the default) or ``PREFIXED``.

    The enum fields also take their codes or names (``"topic"``, ``"read"``).

    Raises:
        ValueError: a filter-only value (``ANY``, ``MATCH``), an empty field,
            or a code or name the enum does not have.
    """

    resource_type: ResourceType
    name: str
    principal: str
    operation: AclOperation
    permission: AclPermission = AclPermission.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        _coerce(self)
        if self.resource_type == ResourceType.ANY:
            raise ValueError("a binding names one resource type, not ANY")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(
                f"a binding's pattern type is LITERAL or PREFIXED, not {self.pattern_type!r}"
            )
        if self.operation == AclOperation.ANY:
            raise ValueError("a binding names one operation, not ANY")
        if self.permission == AclPermission.ANY:
            raise ValueError("a binding's permission is ALLOW or DENY, not ANY")
        for what in ("name", "principal", "host"):
            if not getattr(self, what):
                raise ValueError(f"a binding's {what} must not be empty")

    def __str__(self) -> str:
        return (
            f"{code_name(self.permission)} {self.principal} {code_name(self.operation)} on "
            f"{code_name(self.resource_type)} {self.name!r} ({code_name(self.pattern_type)}) "
            f"from {self.host}"
        )

    def to_filter(self) -> AclFilter:
        """The filter that matches exactly this binding."""
        return AclFilter(
            resource_type=self.resource_type,
            name=self.name,
            pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission=self.permission,
        )


@dataclass(frozen=True)
class AclFilter:
    """Which ACL bindings to describe or delete; the defaults match every binding.

    Attributes:
        resource_type: ``ANY`` or one type.
        name: a resource name, or None for any.
        pattern_type: ``ANY``, ``MATCH`` (what applies to ``name``), ``LITERAL`` or ``PREFIXED``.
        principal, host: one value, or None for any.
        operation, permission: ``ANY`` or one value.
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def __post_init__(self) -> None:
        _coerce(self)

    def __str__(self) -> str:
        parts = [
            f"{what}={code_name(value)}"
            for what, value in (
                ("resource_type", self.resource_type),
                ("name", self.name),
                ("pattern_type", self.pattern_type),
                ("principal", self.principal),
                ("host", self.host),
                ("operation", self.operation),
                ("permission", self.permission),
            )
            if value is not None and value != 1  # 1 is ANY in every enum
        ]
        return f"AclFilter({', '.join(parts) or 'everything'})"


_ENUMS: dict[str, type[IntEnum]] = {
    "resource_type": ResourceType,
    "pattern_type": PatternType,
    "operation": AclOperation,
    "permission": AclPermission,
}


def _coerce(obj: AclBinding | AclFilter) -> None:
    """Turn codes and names given for the enum fields into the enums (frozen: set in place)."""
    for field_name, enum in _ENUMS.items():
        value = getattr(obj, field_name)
        if isinstance(value, enum):
            continue
        try:
            if isinstance(value, str):
                member = enum[value.upper().replace("-", "_")]
            else:
                member = enum(value)
        except (KeyError, ValueError, TypeError):
            known = ", ".join(m.name for m in enum)
            raise ValueError(f"{field_name} {value!r} is not one of {known}") from None
        object.__setattr__(obj, field_name, member)


def code_name(value: object) -> str:
    """An enum member's name, or the value itself as text (a code this pykaf does not know)."""
    return value.name if isinstance(value, IntEnum) else str(value)


def create_request(bindings: Sequence[AclBinding]) -> P.CreateAclsRequest:
    """The CreateAcls request for ``bindings``, in order."""
    R = P.CreateAclsRequest
    return R(
        creations=[
            R.AclCreation(
                resource_type=int(b.resource_type),
                resource_name=b.name,
                resource_pattern_type=int(b.pattern_type),
                principal=b.principal,
                host=b.host,
                operation=int(b.operation),
                permission_type=int(b.permission),
            )
            for b in bindings
        ]
    )


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    """A filter's fields as DescribeAcls and DeleteAcls both name them."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


def describe_request(f: AclFilter) -> P.DescribeAclsRequest:
    """The DescribeAcls request for ``f``."""
    return P.DescribeAclsRequest(**_filter_fields(f))


def delete_request(filters: Sequence[AclFilter]) -> P.DeleteAclsRequest:
    """The DeleteAcls request for ``filters``, in order."""
    R = P.DeleteAclsRequest
    return R(filters=[R.DeleteAclsFilter(**_filter_fields(f)) for f in filters])


def _binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A binding as the broker described it, taken as it is.

    What a broker stores is not re-checked here; a code this pykaf does not
    know stays a bare int.
    """
    binding = object.__new__(AclBinding)
    for field_name, value in (
        ("resource_type", _enum(ResourceType, resource_type)),
        ("name", name),
        ("principal", principal),
        ("operation", _enum(AclOperation, operation)),
        ("permission", _enum(AclPermission, permission)),
        ("host", host),
        ("pattern_type", _enum(PatternType, pattern_type)),
    ):
        object.__setattr__(binding, field_name, value)
    return binding


def described(response: Any) -> list[AclBinding]:
    """The bindings of a DescribeAcls response (its error checked by the caller)."""
    return [
        _binding(
            r.resource_type,
            r.resource_name,
            getattr(r, "pattern_type", PatternType.LITERAL),
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    ]


def deleted(result: Any) -> tuple[list[AclBinding], list[tuple[AclBinding, int, str | None]]]:
    """One DeleteAcls filter result: the bindings removed, and those refused.

    A refused binding comes with the broker's error code and message.
    """
    gone, failed = [], []
    for m in result.matching_acls:
        binding = _binding(
            m.resource_type,
            m.resource_name,
            getattr(m, "pattern_type", PatternType.LITERAL),
            m.principal,
            m.host,
            m.operation,
            m.permission_type,
        )
        if m.error_code:
            failed.append((binding, m.error_code, m.error_message))
        else:
            gone.append(binding)
    return gone, failed
