"""ACLs on the fake cluster: DescribeAcls, CreateAcls and DeleteAcls.

The cluster keeps the bindings an authorizer would (StandardAuthorizer's
rules for what a binding may hold and how a filter matches) but does not
enforce them: every principal may still do everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pykaf import errors
from pykaf import protocol as P
from pykaf.testing._fake.api import Api, RequestContext
from pykaf.testing._fake.model import AclEntry, CloseConnection

# Kafka's codes (org.apache.kafka.common.resource / acl).
ANY = 1
MATCH = 2  # pattern type: what would apply to the named resource
LITERAL, PREFIXED = 3, 4
CLUSTER = 4
RESOURCE_TYPES = range(2, 8)  # topic, group, cluster, transactional id, token, user
OPERATIONS = range(2, 16)  # all .. two-phase commit
PATTERN_TYPES = range(1, 5)  # any, match, literal, prefixed
PERMISSIONS = (2, 3)  # deny, allow
WILDCARD = "*"
_INVALID = errors.InvalidRequestError.code
_UNKNOWN_SERVER = errors.UnknownServerError.code


@dataclass(frozen=True)
class AclFilterSpec:
    """A filter as DescribeAcls and DeleteAcls carry it (None or ANY matches anything)."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def problem(self) -> str | None:
        """Why this filter is invalid (an UNKNOWN code, MATCH without a name), or None."""
        for what, code, known in (
            ("resource type", self.resource_type, (ANY, *RESOURCE_TYPES)),
            ("pattern type", self.pattern_type, PATTERN_TYPES),
            ("operation", self.operation, (ANY, *OPERATIONS)),
            ("permission type", self.permission, (ANY, *PERMISSIONS)),
        ):
            if code not in known:  # Kafka reads an unknown code as UNKNOWN
                return f"the filter's {what} is unknown ({code})"
        return None

    def matches(self, acl: AclEntry) -> bool:
        """Whether ``acl`` falls under this filter."""
        if self.resource_type not in (ANY, acl.resource_type):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (ANY, acl.operation):
            return False
        if self.permission not in (ANY, acl.permission):
            return False
        if self.pattern_type == MATCH:
            if self.name is None:
                return True
            if acl.pattern_type == LITERAL:
                return acl.name in (self.name, WILDCARD)
            return self.name.startswith(acl.name)
        if self.pattern_type not in (ANY, acl.pattern_type):
            return False
        return self.name is None or self.name == acl.name


def _creation_problem(acl: AclEntry) -> str | None:
    if acl.resource_type not in RESOURCE_TYPES:
        return f"invalid resource type {acl.resource_type}"
    if acl.pattern_type not in (LITERAL, PREFIXED):
        return f"invalid pattern type {acl.pattern_type}: LITERAL or PREFIXED"
    if acl.operation not in OPERATIONS:
        return f"invalid operation {acl.operation}"
    if acl.permission not in PERMISSIONS:
        return f"invalid permission type {acl.permission}: ALLOW or DENY"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"invalid principal {acl.principal!r}: expected 'Type:name'"
    if not acl.name:
        return "the resource name must not be empty"
    if acl.resource_type == CLUSTER and acl.name != "kafka-cluster":
        return "the cluster resource is named 'kafka-cluster'"
    return None


def _filter(f: Any) -> AclFilterSpec:
    return AclFilterSpec(
        resource_type=f.resource_type_filter,
        name=f.resource_name_filter,
        pattern_type=getattr(f, "pattern_type_filter", LITERAL),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=f.operation,
        permission=f.permission_type,
    )


def _check_known(spec: AclFilterSpec) -> None:
    """An UNKNOWN (0) in a filter fails Kafka's request validation: it closes the connection."""
    if 0 in (spec.resource_type, spec.pattern_type, spec.operation, spec.permission):
        raise CloseConnection


# -- DescribeAcls ------------------------------------------------------------------

_DR = P.DescribeAclsResponse


async def describe_acls(ctx: RequestContext, req: P.DescribeAclsRequest, version: int) -> Any:
    """The bindings the filter matches, grouped by resource pattern."""
    spec = _filter(req)
    _check_known(spec)
    problem = spec.problem()
    if problem is not None:
        return _DR(throttle_time_ms=0, error_code=_INVALID, error_message=problem, resources=[])
    grouped: dict[tuple[int, str, int], list[AclEntry]] = {}
    for acl in ctx.cluster.acls:
        if spec.matches(acl):
            grouped.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(acl)
    return _DR(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=[
            _DR.DescribeAclsResource(
                resource_type=rtype,
                resource_name=name,
                pattern_type=pattern,
                acls=[
                    _DR.AclDescription(
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission,
                    )
                    for a in acls
                ],
            )
            for (rtype, name, pattern), acls in sorted(grouped.items())
        ],
    )


# -- CreateAcls --------------------------------------------------------------------

_CR = P.CreateAclsResponse


def _entry(c: Any) -> AclEntry:
    return AclEntry(
        resource_type=c.resource_type,
        name=c.resource_name,
        pattern_type=getattr(c, "resource_pattern_type", LITERAL),
        principal=c.principal,
        host=c.host,
        operation=c.operation,
        permission=c.permission_type,
    )


def _enum_problem(acl: AclEntry) -> bool:
    """A value a binding cannot hold (ANY, MATCH, UNKNOWN, an unknown code)."""
    return (
        acl.resource_type not in RESOURCE_TYPES
        or acl.pattern_type not in (LITERAL, PREFIXED)
        or acl.operation not in OPERATIONS
        or acl.permission not in PERMISSIONS
    )


def _invalid(message: str) -> Any:
    return _CR.AclCreationResult(error_code=_INVALID, error_message=message)


def _create_one(ctx: RequestContext, acl: AclEntry) -> Any:
    # Kafka 4.3 checks each binding and answers INVALID_REQUEST in these words
    if ":" not in acl.principal:
        return _invalid(
            f"Could not parse principal from `{acl.principal}` (no colon is "
            "present separating the principal type from the principal name)"
        )
    if not acl.name:
        return _invalid("Invalid empty resource name")
    if acl.resource_type == CLUSTER and acl.name != "kafka-cluster":
        return _invalid("The only valid name for the CLUSTER resource is kafka-cluster")
    problem = _creation_problem(acl)
    if problem is not None:
        return _invalid(problem)
    if acl not in ctx.cluster.acls:
        ctx.cluster.acls.append(acl)
    return _CR.AclCreationResult(error_code=0, error_message=None)


async def create_acls(ctx: RequestContext, req: P.CreateAclsRequest, version: int) -> Any:
    """Store each valid binding (one already stored is a success); one result per binding.

    As Kafka 4.3 does: a binding holding a filter-only value (ANY, MATCH) or an
    unknown code fails the whole request, every result UNKNOWN_SERVER_ERROR
    with no message and nothing stored; otherwise each binding is checked on
    its own and an invalid one is INVALID_REQUEST.
    """
    entries = [_entry(c) for c in req.creations]
    if any(_enum_problem(acl) for acl in entries):
        failed = _CR.AclCreationResult(error_code=_UNKNOWN_SERVER, error_message=None)
        return _CR(throttle_time_ms=0, results=[failed] * len(entries))
    return _CR(throttle_time_ms=0, results=[_create_one(ctx, acl) for acl in entries])


def _create_error(req: Any, version: int, code: int) -> Any:
    return _CR(
        throttle_time_ms=0,
        results=[_CR.AclCreationResult(error_code=code, error_message="injected")]
        * len(req.creations),
    )


# -- DeleteAcls --------------------------------------------------------------------

_XR = P.DeleteAclsResponse


def _delete_one(ctx: RequestContext, f: Any) -> tuple[Any, list[AclEntry]]:
    """One filter's result, and the bindings it matched (none for an invalid filter)."""
    spec = _filter(f)
    problem = spec.problem()
    if problem is not None:
        refused = _XR.DeleteAclsFilterResult(
            error_code=_INVALID, error_message=problem, matching_acls=[]
        )
        return refused, []
    gone = [a for a in ctx.cluster.acls if spec.matches(a)]
    result = _XR.DeleteAclsFilterResult(
        error_code=0,
        error_message=None,
        matching_acls=[
            _XR.DeleteAclsMatchingAcl(
                error_code=0,
                error_message=None,
                resource_type=a.resource_type,
                resource_name=a.name,
                pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission,
            )
            for a in gone
        ],
    )
    return result, gone


async def delete_acls(ctx: RequestContext, req: P.DeleteAclsRequest, version: int) -> Any:
    """Remove the bindings each filter matches and return them, one result per filter.

    As Kafka does, every filter is matched against the bindings as they were
    before the request: a binding two filters match is listed under both.
    """
    for f in req.filters:
        _check_known(_filter(f))
    answers = [_delete_one(ctx, f) for f in req.filters]
    matched = {a for _, gone in answers for a in gone}
    ctx.cluster.acls[:] = [a for a in ctx.cluster.acls if a not in matched]
    results = [result for result, _ in answers]
    return _XR(throttle_time_ms=0, filter_results=results)


def _delete_error(req: Any, version: int, code: int) -> Any:
    return _XR(
        throttle_time_ms=0,
        filter_results=[
            _XR.DeleteAclsFilterResult(error_code=code, error_message="injected", matching_acls=[])
            for _ in req.filters
        ],
    )


# Kafka 4.0 dropped the oldest versions (KIP-896); the fake speaks Kafka 4's ranges
APIS = [
    Api(P.DescribeAclsRequest, P.DescribeAclsResponse, describe_acls, 1, 3),
    Api(P.CreateAclsRequest, P.CreateAclsResponse, create_acls, 1, 3, error=_create_error),
    Api(P.DeleteAclsRequest, P.DeleteAclsResponse, delete_acls, 1, 3, error=_delete_error),
]
