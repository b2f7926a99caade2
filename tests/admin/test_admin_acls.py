"""ACLs through the admin client, on pykaf's fake cluster and (where named) Apache Kafka.

Tansu and the mock cannot run these: Tansu 0.6 answers CreateAcls with a
truncated body and DescribeAcls with nothing; librdkafka's mock cluster has no
ACL APIs.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pykaf
from pykaf import errors
from pykaf import protocol as P
from pykaf._admin import acls
from pykaf.testing import FakeCluster, open_fake_cluster

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

Op, Perm, Res, Pat = (
    pykaf.AclOperation,
    pykaf.AclPermission,
    pykaf.ResourceType,
    pykaf.PatternType,
)

ALICE_READS_ORDERS = pykaf.AclBinding(Res.TOPIC, "orders", "User:alice", Op.READ)
GROUP_READ = pykaf.AclBinding(Res.GROUP, "billing", "User:alice", Op.READ)
TWO_PHASE = pykaf.AclBinding(Res.TOPIC, "tx", "User:tx", Op.TWO_PHASE_COMMIT)


async def test_acls_are_created_described_and_deleted(kafka_or_fake: Any) -> None:
    """Create, describe by every filter field, delete: on Kafka's authorizer and the fake.

    Kafka's ACLs are the session's: the bindings here have principals and
    names of this test's own, and every answer is compared on those only
    (what the broker's filter matched among them).
    """
    u = unique("acl")
    alice, bob, ops = f"User:alice-{u}", f"User:bob-{u}", f"User:ops-{u}"
    orders, other = f"orders-{u}", f"other-{u}"
    reads = pykaf.AclBinding(Res.TOPIC, orders, alice, Op.READ)
    writes_prefix = pykaf.AclBinding(Res.TOPIC, "ord", alice, Op.WRITE, pattern_type=Pat.PREFIXED)
    bob_denied = pykaf.AclBinding(Res.TOPIC, "*", bob, Op.ALL, Perm.DENY, host="10.0.0.1")
    group_read = pykaf.AclBinding(Res.GROUP, f"billing-{u}", alice, Op.READ)
    cluster = pykaf.AclBinding(Res.CLUSTER, "kafka-cluster", ops, Op.ALTER_CONFIGS)
    every = [reads, writes_prefix, bob_denied, group_read, cluster]
    mine = {alice, bob, ops}

    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:

        async def by(acl_filter: pykaf.AclFilter | None = None) -> set[pykaf.AclBinding]:
            found = (
                await admin.describe_acls(acl_filter) if acl_filter else await admin.describe_acls()
            )
            return {b for b in found if b.principal in mine}

        async def settled(expected: set[pykaf.AclBinding]) -> None:
            # Kafka's broker applies new bindings a moment after answering
            with trio.fail_after(20):
                while await by() != expected:
                    await trio.sleep(0.05)

        assert await by() == set()
        await admin.create_acls(every)
        await admin.create_acls([reads])  # again: kept once
        await settled(set(every))
        found = await admin.describe_acls()
        assert sum(b == reads for b in found) == 1

        f = pykaf.AclFilter
        assert await by(f(principal=alice)) == {reads, writes_prefix, group_read}
        assert await by(f(resource_type=Res.GROUP)) == {group_read}
        assert await by(f(permission=Perm.DENY)) == {bob_denied}
        assert await by(f(host="10.0.0.1")) == {bob_denied}
        assert await by(f(operation=Op.ALTER_CONFIGS)) == {cluster}
        assert await by(f(pattern_type=Pat.PREFIXED)) == {writes_prefix}
        # LITERAL orders: only the binding named exactly so
        assert await by(f(name=orders, pattern_type=Pat.LITERAL)) == {reads}
        # MATCH orders: everything that applies to that topic
        assert await by(f(resource_type=Res.TOPIC, name=orders, pattern_type=Pat.MATCH)) == {
            reads,
            writes_prefix,
            bob_denied,
        }
        assert await by(f(name=other, pattern_type=Pat.MATCH)) == {bob_denied}

        gone = await admin.delete_acls([f(principal=alice, resource_type=Res.TOPIC)])
        assert set(gone) == {reads, writes_prefix}
        await settled({bob_denied, group_read, cluster})
        # one binding's own filter removes exactly it; a filter matching nothing removes nothing
        assert await admin.delete_acls([cluster.to_filter(), f(principal=f"User:nobody-{u}")]) == [
            cluster
        ]
        await settled({bob_denied, group_read})
        deleted = await admin.delete_acls([f(principal=bob), f(principal=alice)])
        assert sorted(deleted, key=repr) == sorted([bob_denied, group_read], key=repr)
        await settled(set())


async def test_bindings_the_broker_refuses_are_named(
    kafka_or_fake: Any, request: pytest.FixtureRequest
) -> None:
    # Kafka's ACLs are the session's: names of this test's own
    ops, topic = f"User:{unique('ops')}", unique("acl-t")
    bad_principal = pykaf.AclBinding(Res.TOPIC, topic, "alice", Op.READ)
    bad_cluster = pykaf.AclBinding(Res.CLUSTER, "my-cluster", ops, Op.ALTER)
    good = pykaf.AclBinding(Res.TOPIC, topic, ops, Op.READ)
    async with pykaf.open_admin(kafka_or_fake.bootstrap) as admin:
        # Kafka 4.3's broker cannot parse a principal without a type: INVALID_REQUEST
        with pytest.raises(errors.InvalidRequestError, match="Could not parse principal"):
            await admin.create_acls([bad_principal])
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.create_acls([bad_principal, good, bad_cluster])
        assert set(failed.value.failures) == {bad_principal, bad_cluster}
        assert isinstance(failed.value.failures[bad_principal], errors.InvalidRequestError)
        # and a cluster resource not named kafka-cluster, in its words
        assert "The only valid name for the CLUSTER resource is kafka-cluster" in str(
            failed.value.failures[bad_cluster]
        )
        assert isinstance(failed.value.failures[bad_cluster], errors.InvalidRequestError)
        mine = pykaf.AclFilter(principal=ops)
        with trio.fail_after(20):  # Kafka's broker learns of new ACLs a moment later
            while await admin.describe_acls(mine) != [good]:
                await trio.sleep(0.05)
        assert await admin.delete_acls([mine]) == [good]
    if kafka_or_fake.name != "fake":
        return
    # injected errors: only the fake can answer these on demand
    fake_cluster = request.getfixturevalue("fake_cluster")
    async with pykaf.open_admin(fake_cluster.bootstrap) as admin:
        await admin.create_acls([ALICE_READS_ORDERS])
        await trio.to_thread.run_sync(
            fake_cluster.push_request_errors, P.DescribeAclsRequest.API_KEY, 54
        )
        with pytest.raises(errors.SecurityDisabledError):
            await admin.describe_acls()
        await trio.to_thread.run_sync(
            fake_cluster.push_request_errors, P.DeleteAclsRequest.API_KEY, 31
        )
        with pytest.raises(errors.ClusterAuthorizationError):
            await admin.delete_acls([pykaf.AclFilter()])
        assert await admin.describe_acls() == [ALICE_READS_ORDERS]


def test_bindings_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="ANY"):
        pykaf.AclBinding(Res.ANY, "t", "User:a", Op.READ)
    with pytest.raises(ValueError, match="LITERAL or PREFIXED"):
        pykaf.AclBinding(Res.TOPIC, "t", "User:a", Op.READ, pattern_type=Pat.MATCH)
    with pytest.raises(ValueError, match="operation"):
        pykaf.AclBinding(Res.TOPIC, "t", "User:a", Op.ANY)
    with pytest.raises(ValueError, match="ALLOW or DENY"):
        pykaf.AclBinding(Res.TOPIC, "t", "User:a", Op.READ, Perm.ANY)
    with pytest.raises(ValueError, match="principal"):
        pykaf.AclBinding(Res.TOPIC, "t", "", Op.READ)


async def test_invalid_filters_are_refused_by_the_broker() -> None:
    """Raw requests with UNKNOWN (0) codes, which the typed API cannot build."""
    async with open_fake_cluster(1) as cluster, pykaf.open_client(cluster.bootstrap) as client:
        assert isinstance(cluster, FakeCluster)
        request = P.DescribeAclsRequest(
            resource_type_filter=0,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        # Kafka's request validation refuses an UNKNOWN code by closing the
        # connection, and so does the fake (tests/conformance checks both)
        with pytest.raises(errors.KafkaConnectionError):
            await client.request(1, request)
        D = P.DeleteAclsRequest
        with pytest.raises(errors.KafkaConnectionError):
            await client.request(
                1,
                D(
                    filters=[
                        D.DeleteAclsFilter(
                            resource_type_filter=1,
                            resource_name_filter=None,
                            pattern_type_filter=1,
                            principal_filter=None,
                            host_filter=None,
                            operation=0,
                            permission_type=1,
                        )
                    ]
                ),
            )


def test_the_sync_admin_manages_acls(fake_cluster: Any) -> None:
    import pykaf.sync

    with pykaf.sync.Admin(fake_cluster.bootstrap) as admin:
        admin.create_acls([GROUP_READ])
        assert admin.describe_acls(pykaf.AclFilter(resource_type=Res.GROUP)) == [GROUP_READ]
        assert admin.delete_acls([GROUP_READ.to_filter()]) == [GROUP_READ]
        admin.create_topic("synced", 1)
        admin.alter_topic_configs({"synced": {"retention.ms": "5000"}})
        configs = admin.describe_topic_configs(["synced"], keys=["retention.ms"])
        assert configs["synced"]["retention.ms"].value == "5000"
        admin.alter_broker_configs({None: {"log.cleaner.threads": "3"}}, validate_only=True)
        threads = admin.describe_broker_configs([1], keys=["log.cleaner.threads"])
        assert threads[1]["log.cleaner.threads"].value == "1"


def test_enum_fields_take_codes_and_names() -> None:
    by_name = pykaf.AclBinding("topic", "t", "User:a", "read", "deny", pattern_type="prefixed")
    by_code = pykaf.AclBinding(2, "t", "User:a", 3, 2, pattern_type=4)
    assert by_name == by_code
    assert by_name.resource_type is Res.TOPIC and by_name.permission is Perm.DENY
    assert pykaf.AclFilter(operation="describe-configs").operation is Op.DESCRIBE_CONFIGS
    with pytest.raises(ValueError, match="operation 'juggle' is not one of"):
        pykaf.AclBinding(Res.TOPIC, "t", "User:a", "juggle")
    with pytest.raises(ValueError, match="resource_type 99"):
        pykaf.AclFilter(resource_type=99)
    with pytest.raises(ValueError, match="one or more"):
        pykaf.ConfigChange.append()


async def test_overlapping_delete_filters_each_list_the_binding(fake_cluster: Any) -> None:
    """Kafka matches every filter of a DeleteAcls against the bindings as they were."""
    async with pykaf.open_admin(fake_cluster.bootstrap) as admin:
        await admin.create_acls([ALICE_READS_ORDERS, GROUP_READ, TWO_PHASE])
        request = acls.delete_request(
            [pykaf.AclFilter(principal="User:alice"), pykaf.AclFilter(resource_type=Res.TOPIC)]
        )
        response = await admin.client.request(1, request)
        listed = [[m.resource_name for m in r.matching_acls] for r in response.filter_results]
        assert listed == [["orders", "billing"], ["orders", "tx"]]
        assert await admin.describe_acls() == []


async def test_answers_the_typed_api_cannot_build(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binding the broker could not delete is an error, not a silent omission; a code
    this pykaf does not know comes back as a bare int instead of failing the call."""
    R = P.DeleteAclsResponse

    def matching(code: int, operation: int) -> Any:
        return R.DeleteAclsMatchingAcl(
            error_code=code,
            error_message="no" if code else None,
            resource_type=2,
            resource_name="t",
            pattern_type=3,
            principal="User:a",
            host="*",
            operation=operation,
            permission_type=3,
        )

    answer = R(
        throttle_time_ms=0,
        filter_results=[
            R.DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[matching(0, 3), matching(31, 4), matching(0, 99)],
            )
        ],
    )

    async def crafted(request: Any) -> Any:
        return answer

    async with pykaf.open_admin(fake_cluster.bootstrap) as admin:
        monkeypatch.setattr(admin, "_to_any", crafted)
        with pytest.raises(pykaf.AdminError) as failed:
            await admin.delete_acls([pykaf.AclFilter()])
        ((binding, error),) = failed.value.failures.items()
        assert binding.operation is Op.WRITE
        assert isinstance(error, errors.ClusterAuthorizationError)
        gone, refused = acls.deleted(answer.filter_results[0])
        assert [b.operation for b in gone] == [Op.READ, 99]
        assert "99" in str(gone[1]) and len(refused) == 1
