"""Authorization on Apache Kafka: ACLs missing give each role its typed error.

The ``kafka_cluster`` fixture enforces ACLs (StandardAuthorizer) for every
principal but ``ANONYMOUS`` (its PLAINTEXT listener) and ``admin``. Users
``alice`` and ``bob`` log in with SASL PLAIN on ``sasl_bootstrap``; the tests
grant them ACLs over PLAINTEXT, on names no other test uses, and check what
they may do before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.testing import KafkaCluster
from pykaf.testing.fixtures import KAFKA_USERS

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker

FAST = {"heartbeat_interval": 0.2, "session_timeout": 6.0, "rebalance_timeout": 4.0}


def login(user: str) -> dict[str, Any]:
    """Options logging ``user`` in with SASL PLAIN."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": user,
        "sasl_password": KAFKA_USERS[user],
        "request_timeout": 10.0,
    }


async def grant(kafka: KafkaCluster, bindings: Sequence[pykaf.AclBinding]) -> None:
    """Create ``bindings`` (as ANONYMOUS, a super user) and wait until the broker has them.

    Kafka's controller answers CreateAcls once it committed them; the broker's
    authorizer learns of them from the metadata log a little later.
    """
    async with pykaf.open_admin(kafka.bootstrap) as admin:
        await admin.create_acls(bindings)
        with trio.fail_after(20):
            while not set(bindings) <= set(await admin.describe_acls()):
                await trio.sleep(0.05)


def acl(kind: pykaf.ResourceType, name: str, user: str, op: pykaf.AclOperation) -> Any:
    return pykaf.AclBinding(kind, name, f"User:{user}", op)


TOPIC, GROUP, CLUSTER = (
    pykaf.ResourceType.TOPIC,
    pykaf.ResourceType.GROUP,
    pykaf.ResourceType.CLUSTER,
)
READ, WRITE, DESCRIBE = (
    pykaf.AclOperation.READ,
    pykaf.AclOperation.WRITE,
    pykaf.AclOperation.DESCRIBE,
)


async def produce(bootstrap: str, topic: str, count: int, **options: Any) -> None:
    async with pykaf.open_producer(bootstrap, **options) as producer:
        for i in range(count):
            await producer.send(topic, b"v%d" % i, partition=0)


async def test_a_consumer_without_read_gets_topic_authorization_failed(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = unique("authz-cons")
    kafka_cluster.create_topic(topic, 1)
    await produce(kafka_cluster.bootstrap, topic, 5)
    async with pykaf.open_consumer(kafka_cluster.sasl_bootstrap, **login("bob")) as consumer:
        with pytest.raises(errors.TopicAuthorizationError):
            await consumer.consume_partition(topic, 0, pykaf.OLDEST)
    # DESCRIBE alone lets bob see the topic, not read it
    await grant(kafka_cluster, [acl(TOPIC, topic, "bob", DESCRIBE)])
    async with pykaf.open_consumer(kafka_cluster.sasl_bootstrap, **login("bob")) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        with trio.fail_after(20):  # Fetch is refused: the partition reports it and stops
            failure = await pc.errors().receive()
        assert isinstance(failure.error, errors.TopicAuthorizationError)
    await grant(kafka_cluster, [acl(TOPIC, topic, "bob", READ)])
    async with pykaf.open_consumer(kafka_cluster.sasl_bootstrap, **login("bob")) as consumer:
        pc = await consumer.consume_partition(topic, 0, pykaf.OLDEST)
        values: list[bytes] = []
        with trio.fail_after(20):
            while len(values) < 5:
                values += [r.value for r in await pc.next_batch()]
    assert values == [b"v%d" % i for i in range(5)]


async def test_a_sync_consumer_raises_topic_authorization_failed_as_its_class(
    kafka_cluster: KafkaCluster,
) -> None:
    """pykaf.sync.Consumer: ``except TopicAuthorizationError`` catches the refused Fetch."""
    topic = unique("authz-sync")
    kafka_cluster.create_topic(topic, 1)
    await produce(kafka_cluster.bootstrap, topic, 2)
    await grant(kafka_cluster, [acl(TOPIC, topic, "bob", DESCRIBE)])  # not READ

    def consume() -> BaseException:
        with pykaf.sync.Consumer(kafka_cluster.sasl_bootstrap, **login("bob")) as consumer:
            consumer.assign([(topic, 0, pykaf.OLDEST)])
            for _ in range(40):
                try:
                    consumer.consume(10, timeout=0.5)
                except errors.TopicAuthorizationError as exc:
                    return exc
        pytest.fail("consume() never raised TopicAuthorizationError")

    failure = await trio.to_thread.run_sync(consume)
    assert isinstance(failure, pykaf.ConsumerError)
    assert (failure.topic, failure.partition) == (topic, 0)
    assert isinstance(failure.error, errors.TopicAuthorizationError)
    assert str(failure) == f"{topic}/0: Topic authorization failed."  # named once


async def test_a_share_consumer_without_describe_is_refused_at_open(
    kafka_cluster: KafkaCluster,
) -> None:
    """The topic check of open_share_consumer raises the broker's typed refusal."""
    topic, group = unique("authz-share"), unique("authz-sg")
    kafka_cluster.create_topic(topic, 1)
    with pytest.raises(errors.TopicAuthorizationError), trio.fail_after(30):
        async with pykaf.open_share_consumer(
            kafka_cluster.sasl_bootstrap, group, [topic], **login("bob")
        ):
            pytest.fail("opened without DESCRIBE on the topic")


async def test_a_topic_hidden_from_the_full_list_is_still_named_unauthorized(
    kafka_cluster: KafkaCluster,
) -> None:
    """An all-topics Metadata leaves out what bob may not describe; by name it says why."""
    topic, missing = unique("authz-hidden"), unique("authz-never-made")
    kafka_cluster.create_topic(topic, 1)
    async with pykaf.open_client(kafka_cluster.sasl_bootstrap, **login("bob")) as client:
        assert topic not in await client.topics()
        with pytest.raises(errors.TopicAuthorizationError):
            await client.partitions(topic)
        # Kafka answers an unauthorized principal about a topic that does not
        # exist the same way: it must not learn which topics exist
        with pytest.raises(errors.TopicAuthorizationError):
            await client.partitions(missing)
    async with pykaf.open_client(kafka_cluster.bootstrap) as client:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await client.partitions(missing)


async def test_a_producer_without_write_is_refused(kafka_cluster: KafkaCluster) -> None:
    topic = unique("authz-prod")
    kafka_cluster.create_topic(topic, 1)
    await grant(kafka_cluster, [acl(TOPIC, topic, "bob", DESCRIBE)])
    plain = {**login("bob"), "idempotence": False, "acks": 1}
    with pytest.raises(errors.TopicAuthorizationError):
        await produce(kafka_cluster.sasl_bootstrap, topic, 1, **plain)
    # an idempotent producer needs IDEMPOTENT_WRITE on the cluster, which
    # Kafka grants to whoever may WRITE some topic: bob may write none (alice
    # may, once tests/transactions has run on this session's cluster; so bob)
    with pytest.raises(errors.ClusterAuthorizationError):
        await produce(kafka_cluster.sasl_bootstrap, topic, 1, **login("bob"))
    await grant(kafka_cluster, [acl(TOPIC, topic, "bob", WRITE)])
    await produce(kafka_cluster.sasl_bootstrap, topic, 3, **plain)
    await produce(kafka_cluster.sasl_bootstrap, topic, 3, **login("bob"))
    async with pykaf.open_admin(kafka_cluster.bootstrap) as admin:
        assert await admin.list_offsets({(topic, 0): pykaf.NEWEST}) == {(topic, 0): 6}


class Collect:
    """A group handler keeping every value."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    async def setup(self, session: Any) -> None:
        pass

    async def consume_claim(self, session: Any, claim: Any) -> None:
        async for record in claim:
            self.values.append(record.value)
            session.mark_message(record)

    async def cleanup(self, session: Any) -> None:
        pass


async def test_a_group_without_read_gets_group_authorization_failed(
    kafka_cluster: KafkaCluster,
) -> None:
    topic, group = unique("authz-group"), unique("authz-g")
    kafka_cluster.create_topic(topic, 1)
    await produce(kafka_cluster.bootstrap, topic, 4)
    await grant(kafka_cluster, [acl(TOPIC, topic, "alice", READ)])
    async with pykaf.open_consumer_group(
        kafka_cluster.sasl_bootstrap, group, [topic], **login("alice"), **FAST
    ) as member:
        with pytest.raises(errors.GroupAuthorizationError), trio.fail_after(30):
            await member.consume(Collect())
    await grant(kafka_cluster, [acl(GROUP, group, "alice", READ)])
    handler = Collect()
    async with (
        pykaf.open_consumer_group(
            kafka_cluster.sasl_bootstrap, group, [topic], **login("alice"), **FAST
        ) as member,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(member.consume, handler)
        with trio.fail_after(30):
            while len(handler.values) < 4:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert handler.values == [b"v%d" % i for i in range(4)]


async def test_admin_calls_without_acls_get_their_typed_errors(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = unique("authz-admin")
    kafka_cluster.create_topic(topic, 1)
    async with pykaf.open_admin(kafka_cluster.sasl_bootstrap, **login("bob")) as admin:
        assert topic not in await admin.list_topics()
        with pytest.raises(errors.TopicAuthorizationError):
            await admin.describe_topic(topic)
        with pytest.raises(errors.TopicAuthorizationError):
            await admin.create_topic(unique("authz-new"), 1)
        with pytest.raises(errors.TopicAuthorizationError):
            await admin.delete_topic(topic)
        with pytest.raises(errors.TopicAuthorizationError):
            await admin.describe_topic_configs([topic])
        with pytest.raises(errors.ClusterAuthorizationError):
            await admin.describe_broker_configs()
        with pytest.raises(errors.ClusterAuthorizationError):
            await admin.describe_acls()
        with pytest.raises(errors.ClusterAuthorizationError):
            await admin.create_acls([acl(TOPIC, topic, "bob", READ)])
        with pytest.raises(errors.GroupAuthorizationError):
            await admin.list_group_offsets(unique("authz-g"))
    # the admin user (a super user) may do all of it
    async with pykaf.open_admin(kafka_cluster.sasl_bootstrap, **login("admin")) as admin:
        assert topic in await admin.list_topics()
        await admin.describe_broker_configs()
        await admin.delete_topic(topic)
