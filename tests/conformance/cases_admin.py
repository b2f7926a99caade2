"""Conformance cases of the admin APIs: topics, configs, ACLs."""

from __future__ import annotations

from typing import Any

from conformance_harness import Answers, Target, Wire, case

import pykaf
from pykaf import protocol as P

TOPIC, BROKER = 2, 4  # config resource types
#: topic configs whose broker default the Kafka fixture sets (log.segment.bytes): not the fake's
FIXTURE_OVERRIDES = frozenset({"segment.bytes"})
SET, DELETE, APPEND = 0, 1, 2  # IncrementalAlterConfigs operations


def creatable(
    name: str, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None
) -> P.CreateTopicsRequest.CreatableTopic:
    """One topic of a CreateTopics request."""
    return P.CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[],
        configs=[
            P.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()
        ],
    )


def created(resp: P.CreateTopicsResponse) -> list[Any]:
    """Each topic's (name, error, partitions, replication factor)."""
    return [(t.name, t.error_code, t.num_partitions, t.replication_factor) for t in resp.topics]


@case()
async def case_create_delete_topics(t: Target, w: Wire, out: Answers) -> None:
    """CreateTopics and DeleteTopics error codes, validate_only, defaults."""
    await t.create_topic("create_delete_topics.exists")

    async def create(
        label: str, *topics: Any, validate_only: bool = False
    ) -> P.CreateTopicsResponse:
        req = P.CreateTopicsRequest(
            topics=list(topics), timeout_ms=30_000, validate_only=validate_only
        )
        resp = await w.send(req)
        out.add(label, created(resp))
        return resp

    await create("exists", creatable("create_delete_topics.exists"))
    await create("zero partitions", creatable("create_delete_topics.zero", 0))
    await create("negative partitions", creatable("create_delete_topics.neg", -5))
    await create("replication above the brokers", creatable("create_delete_topics.rf", 1, 3))
    await create("zero replication", creatable("create_delete_topics.rf0", 1, 0))
    await create("invalid name", creatable("create delete topics bad!"))
    await create("name too long", creatable("x" * 250))
    await create(
        "bad config value",
        creatable("create_delete_topics.badcfg", configs={"retention.ms": "soon"}),
    )
    await create(
        "unknown config",
        creatable("create_delete_topics.unknowncfg", configs={"no.such.config": "1"}),
    )
    await create(
        "bad enum config",
        creatable("create_delete_topics.badenum", configs={"cleanup.policy": "sometimes"}),
    )
    await create(
        "validate only",
        creatable("create_delete_topics.validate", 3, configs={"retention.ms": "1000"}),
        validate_only=True,
    )
    meta = await w.send(
        P.MetadataRequest(
            topics=[P.MetadataRequest.MetadataRequestTopic(name="create_delete_topics.validate")],
            allow_auto_topic_creation=False,
        )
    )
    out.add("after validate only", meta.topics[0].error_code)
    made = await create("defaults (-1)", creatable("create_delete_topics.defaults", -1, -1))
    out.add(
        "returned configs of a new topic",
        sorted(
            (c.name, c.value, c.read_only, c.config_source)
            for c in made.topics[0].configs
            if c.name not in FIXTURE_OVERRIDES
        ),
    )
    await create(
        "one good one bad",
        creatable("create_delete_topics.good", 2),
        creatable("create_delete_topics.zero2", 0),
    )
    await create(
        "twice in one request",
        creatable("create_delete_topics.twice"),
        creatable("create_delete_topics.twice"),
    )
    deleted = await w.send(
        P.DeleteTopicsRequest(
            topic_names=["create_delete_topics.good", "create_delete_topics.never"],
            timeout_ms=30_000,
        )
    )
    out.add("delete", sorted((r.name, r.error_code) for r in deleted.responses))


def describe_configs(
    resource_type: int, name: str, keys: list[str] | None
) -> P.DescribeConfigsRequest:
    """A DescribeConfigs of one resource, with synonyms."""
    return P.DescribeConfigsRequest(
        resources=[
            P.DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=True,
        include_documentation=False,
    )


def config_entries(resp: P.DescribeConfigsResponse) -> list[Any]:
    """Each result's error and its entries (name, value, read-only, source, synonyms)."""
    return [
        (
            r.error_code,
            sorted(
                (
                    c.name,
                    c.value,
                    c.read_only,
                    c.config_source,
                    c.is_sensitive,
                    c.config_type,
                    [(s.name, s.value, s.source) for s in c.synonyms],
                )
                for c in r.configs
            ),
        )
        for r in resp.results
    ]


def alter(
    resource_type: int,
    name: str,
    changes: list[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> Any:
    """An IncrementalAlterConfigs of one resource."""
    return P.IncrementalAlterConfigsRequest(
        resources=[
            P.IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    P.IncrementalAlterConfigsRequest.AlterableConfig(
                        name=k, config_operation=op, value=v
                    )
                    for k, op, v in changes
                ],
            )
        ],
        validate_only=validate_only,
    )


def altered(resp: Any) -> list[Any]:
    """Each resource's error code."""
    return [(r.resource_type, r.resource_name, r.error_code) for r in resp.responses]


async def settled(t: Target, w: Wire, topic: str, expect: dict[str, str]) -> list[Any]:
    """The topic's retention.ms and cleanup.policy once ``expect`` shows.

    Kafka's controller applies a change and its broker learns it a moment
    after IncrementalAlterConfigs answers; a client waits for it too.
    """
    resp = await t.wait_for(
        lambda: w.send(describe_configs(TOPIC, topic, ["retention.ms", "cleanup.policy"])),
        lambda r: all(
            any(c.name == k and c.value == v for c in r.results[0].configs)
            for k, v in expect.items()
        ),
    )
    return config_entries(resp)


TOPIC_KEYS = [
    "cleanup.policy",
    "retention.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "compression.type",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "retention.bytes",
]


@case()
async def case_configs(t: Target, w: Wire, out: Answers) -> None:
    """DescribeConfigs values, sources and synonyms; IncrementalAlterConfigs errors."""
    topic = await t.create_topic("configs", configs={"retention.ms": "123456"})
    keys = TOPIC_KEYS
    out.add("describe topic", config_entries(await w.send(describe_configs(TOPIC, topic, keys))))
    out.add(
        "describe unknown topic",
        [r[0] for r in config_entries(await w.send(describe_configs(TOPIC, "configs.none", keys)))],
    )
    out.add(
        "describe unknown key",
        config_entries(await w.send(describe_configs(TOPIC, topic, ["no.such.config"]))),
    )
    node = str(w.node_id)
    broker_keys = [
        "auto.create.topics.enable",
        "message.max.bytes",
        "log.cleanup.policy",
        "num.partitions",
        "log.retention.ms",
        "log.retention.hours",
    ]
    out.add(
        "describe broker", config_entries(await w.send(describe_configs(BROKER, node, broker_keys)))
    )
    out.add(
        "set",
        altered(
            await w.send(
                alter(
                    TOPIC,
                    topic,
                    [("retention.ms", SET, "1000"), ("cleanup.policy", SET, "compact")],
                )
            )
        ),
    )
    out.add("describe after set", await settled(t, w, topic, {"cleanup.policy": "compact"}))
    out.add(
        "append", altered(await w.send(alter(TOPIC, topic, [("cleanup.policy", APPEND, "delete")])))
    )
    out.add("delete", altered(await w.send(alter(TOPIC, topic, [("retention.ms", DELETE, None)]))))
    out.add(
        "describe after append and delete",
        await settled(
            t, w, topic, {"cleanup.policy": "compact,delete", "retention.ms": "604800000"}
        ),
    )
    out.add(
        "bad value", altered(await w.send(alter(TOPIC, topic, [("retention.ms", SET, "soon")])))
    )
    out.add(
        "unknown key", altered(await w.send(alter(TOPIC, topic, [("no.such.config", SET, "1")])))
    )
    out.add(
        "bad enum",
        altered(await w.send(alter(TOPIC, topic, [("cleanup.policy", SET, "sometimes")]))),
    )
    out.add(
        "a key twice",
        altered(
            await w.send(
                alter(TOPIC, topic, [("retention.ms", SET, "5"), ("retention.ms", SET, "6")])
            )
        ),
    )
    out.add(
        "validate only",
        altered(await w.send(alter(TOPIC, topic, [("max.message.bytes", SET, "2000")], True))),
    )
    out.add(
        "unknown topic",
        altered(await w.send(alter(TOPIC, "configs.none", [("retention.ms", SET, "5")]))),
    )
    out.add(
        "describe after the refused",
        config_entries(
            await w.send(describe_configs(TOPIC, topic, ["retention.ms", "max.message.bytes"]))
        ),
    )
    out.add(
        "broker bad value",
        altered(await w.send(alter(BROKER, node, [("log.retention.ms", SET, "soon")]))),
    )
    out.add(
        "broker read-only",
        altered(await w.send(alter(BROKER, node, [("log.dirs", SET, "/tmp/x")]))),
    )
    out.add(
        "broker cluster-wide validate",
        altered(await w.send(alter(BROKER, "", [("log.retention.ms", SET, "100000")], True))),
    )


ACL_TOPIC, ACL_GROUP, ACL_ANY = 2, 3, 1
LITERAL, PREFIXED, MATCH, ANY_PATTERN = 3, 4, 2, 1
READ, WRITE, ANY_OP, ALL = 3, 4, 1, 2
ALLOW, DENY, ANY_PERM = 3, 2, 1


def acl(
    resource_type: int, name: str, pattern: int, principal: str, op: int, perm: int, host: str = "*"
) -> Any:
    """One ACL creation."""
    return P.CreateAclsRequest.AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=perm,
    )


def acl_filter(
    resource_type: int,
    name: str | None,
    pattern: int,
    principal: str | None = None,
    op: int = ANY_OP,
    perm: int = ANY_PERM,
) -> dict[str, Any]:
    """The fields of a DescribeAcls request or DeleteAcls filter."""
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": None,
        "operation": op,
        "permission_type": perm,
    }


def bindings(resources: list[Any]) -> list[Any]:
    """DescribeAcls resources as sorted bindings."""
    return sorted(
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in resources
        for a in r.acls
    )


@case()
async def case_acls(t: Target, w: Wire, out: Answers) -> None:
    """CreateAcls, DescribeAcls and DeleteAcls answers and filter semantics."""
    creations = [
        acl(ACL_TOPIC, "acl_case.t", LITERAL, "User:alice", READ, ALLOW),
        acl(ACL_TOPIC, "acl_case.", PREFIXED, "User:alice", WRITE, ALLOW),
        acl(ACL_TOPIC, "acl_case.t", LITERAL, "User:bob", READ, DENY, "10.0.0.1"),
        acl(ACL_GROUP, "acl_case.g", LITERAL, "User:bob", READ, ALLOW),
        acl(ACL_TOPIC, "acl_case.t", LITERAL, "User:alice", READ, ALLOW),  # twice
    ]
    resp = await w.send(P.CreateAclsRequest(creations=creations))
    out.add("create", [r.error_code for r in resp.results])
    bad = [
        acl(ACL_ANY, "acl_case.x", LITERAL, "User:alice", READ, ALLOW),
        acl(ACL_TOPIC, "acl_case.x", MATCH, "User:alice", READ, ALLOW),
        acl(ACL_TOPIC, "acl_case.x", LITERAL, "User:alice", ANY_OP, ALLOW),
        acl(ACL_TOPIC, "acl_case.x", LITERAL, "User:alice", READ, ANY_PERM),
        acl(ACL_TOPIC, "acl_case.x", LITERAL, "alice", READ, ALLOW),
        acl(ACL_TOPIC, "", LITERAL, "User:alice", READ, ALLOW),
    ]
    resp = await w.send(P.CreateAclsRequest(creations=bad))
    out.add("create invalid", [r.error_code for r in resp.results])
    # without a filter-only value in the request, each binding is judged on its own
    each = [
        acl(ACL_TOPIC, "acl_case.y", LITERAL, "alice", READ, ALLOW),
        acl(ACL_TOPIC, "", LITERAL, "User:alice", READ, ALLOW),
        acl(4, "not-the-cluster", LITERAL, "User:alice", 7, ALLOW),
        acl(ACL_TOPIC, "acl_case.y", LITERAL, "User:alice", READ, ALLOW),
    ]
    resp = await w.send(P.CreateAclsRequest(creations=each))
    out.add("create, each judged", [r.error_code for r in resp.results])

    async def describe(label: str, **fields: Any) -> None:
        r = await w.send(P.DescribeAclsRequest(**fields))
        out.add(label, (r.error_code, bindings(r.resources)))

    async def matching_acl_case_t() -> list[Any]:
        r = await w.send(P.DescribeAclsRequest(**acl_filter(ACL_TOPIC, "acl_case.t", MATCH)))
        return bindings(r.resources)

    # Kafka answers CreateAcls and DeleteAcls once the controller took them;
    # its brokers' authorizers apply them a moment later (the fake at once):
    # wait for the bindings to show before comparing what is described.
    await t.wait_for(matching_acl_case_t, lambda found: len(found) == 3)

    await describe("literal name", **acl_filter(ACL_TOPIC, "acl_case.t", LITERAL))
    await describe("match name", **acl_filter(ACL_TOPIC, "acl_case.t", MATCH))
    await describe("prefixed name", **acl_filter(ACL_TOPIC, "acl_case.", PREFIXED))
    await describe("any pattern", **acl_filter(ACL_TOPIC, "acl_case.t", ANY_PATTERN))
    await describe("by principal", **acl_filter(ACL_TOPIC, "acl_case.t", MATCH, "User:bob"))
    await describe("by operation", **{**acl_filter(ACL_TOPIC, "acl_case.t", MATCH, op=WRITE)})
    await describe("nothing", **acl_filter(ACL_TOPIC, "acl_case.none", LITERAL))
    try:
        await describe("unknown resource type", **acl_filter(0, None, ANY_PATTERN))
    except pykaf.errors.KafkaConnectionError:
        out.add("unknown resource type", "connection closed")
    unknown_op = P.DeleteAclsRequest.DeleteAclsFilter(
        **acl_filter(ACL_TOPIC, "acl_case.none", LITERAL, op=0)
    )
    try:
        resp = await w.send(P.DeleteAclsRequest(filters=[unknown_op]))
        out.add("delete, unknown operation", [f.error_code for f in resp.filter_results])
    except pykaf.errors.KafkaConnectionError:
        out.add("delete, unknown operation", "connection closed")
    deleted = await w.send(
        P.DeleteAclsRequest(
            filters=[
                P.DeleteAclsRequest.DeleteAclsFilter(
                    **acl_filter(ACL_TOPIC, "acl_case.t", MATCH, "User:alice")
                ),
                P.DeleteAclsRequest.DeleteAclsFilter(
                    **acl_filter(ACL_TOPIC, "acl_case.none", LITERAL)
                ),
            ]
        )
    )
    out.add(
        "delete",
        [
            (
                f.error_code,
                sorted(
                    (
                        m.error_code,
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in f.matching_acls
                ),
            )
            for f in deleted.filter_results
        ],
    )
    await t.wait_for(
        matching_acl_case_t, lambda found: not any(b[3] == "User:alice" for b in found)
    )
    await describe("after delete", **acl_filter(ACL_TOPIC, "acl_case.t", MATCH))
    # (filters name this case's resources only: the Kafka cluster is the session's)
    rest = [
        acl_filter(ACL_TOPIC, "acl_case.t", MATCH, "User:bob"),
        acl_filter(ACL_GROUP, "acl_case.g", LITERAL),
        acl_filter(ACL_TOPIC, "acl_case.y", LITERAL),
    ]
    gone = await w.send(
        P.DeleteAclsRequest(filters=[P.DeleteAclsRequest.DeleteAclsFilter(**f) for f in rest])
    )
    out.add("delete the rest", [len(f.matching_acls) for f in gone.filter_results])
