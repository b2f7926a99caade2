"""AdminClient on confluent-kafka and on pykaf's drop-in, side by side on the same broker."""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker


def _admin(ck: ModuleType) -> ModuleType:
    return importlib.import_module(ck.__name__ + ".admin")


def _conf(ck: ModuleType, broker: Any, **extra: Any) -> dict[str, Any]:
    conf = {"bootstrap.servers": broker.bootstrap, **extra}
    if ck.__name__ == "confluent_kafka":
        conf["log_level"] = 0
    return conf


def _done(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(30) for key, future in futures.items()}


def test_topics_partitions_and_configs(ck: ModuleType, admin_broker: Any) -> None:
    adm = _admin(ck)
    client = adm.AdminClient(_conf(ck, admin_broker))
    topic = bc.unique("admin-parity")
    new = adm.NewTopic(
        topic, num_partitions=2, replication_factor=1, config={"retention.ms": "86400000"}
    )
    assert _done(client.create_topics([new])) == {topic: None}
    with pytest.raises(ck.KafkaException) as info:
        client.create_topics([adm.NewTopic(topic, 1, 1)])[topic].result(30)
    assert info.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS

    resource = adm.ConfigResource(adm.ResourceType.TOPIC, topic)
    (configs,) = _done(client.describe_configs([resource])).values()
    entry = configs["retention.ms"]
    # confluent-kafka gives the source as an int here, the shim as the enum: either converts
    assert (entry.name, entry.value, adm.ConfigSource(entry.source).name) == (
        "retention.ms",
        "86400000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["cleanup.policy"].is_default is (configs["cleanup.policy"].value == "delete")

    change = adm.ConfigResource(adm.ResourceType.TOPIC, topic)
    change.add_incremental_config(
        adm.ConfigEntry("retention.ms", "3600000", incremental_operation=adm.AlterConfigOpType.SET)
    )
    assert list(_done(client.incremental_alter_configs([change])).values()) == [None]
    deadline = time.monotonic() + 30
    while True:  # Kafka's brokers apply a config change a moment after they accept it
        (configs,) = _done(client.describe_configs([resource])).values()
        if configs["retention.ms"].value == "3600000" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert configs["retention.ms"].value == "3600000"

    assert _done(client.create_partitions([adm.NewPartitions(topic, 4)])) == {topic: None}
    deadline = time.monotonic() + 30
    while len(client.list_topics(topic, timeout=10).topics[topic].partitions) != 4:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    md = client.list_topics(topic, timeout=10)
    assert md.topics[topic].error is None
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3]
    assert all(p.leader in md.brokers for p in md.topics[topic].partitions.values())

    assert _done(client.delete_topics([topic])) == {topic: None}
    missing = bc.unique("missing")
    with pytest.raises(ck.KafkaException) as info:
        client.delete_topics([missing])[missing].result(30)
    assert info.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_consumer_groups(ck: ModuleType, admin_broker: Any) -> None:
    adm = _admin(ck)
    client = adm.AdminClient(_conf(ck, admin_broker))
    topic, group = bc.unique("admin-parity"), bc.unique("admin-group")
    admin_broker.create(topic, 2)
    p = ck.Producer(_conf(ck, admin_broker))
    p.produce(topic, b"x", partition=0)
    assert p.flush(30) == 0
    c = ck.Consumer(_conf(ck, admin_broker, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while c.poll(0.5) is None:
        assert time.monotonic() < deadline
    described = client.describe_consumer_groups([group])[group].result(30)
    assert (described.group_id, described.state) == (group, ck.ConsumerGroupState.STABLE)
    assert not described.is_simple_consumer_group
    (member,) = described.members
    assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == [
        (topic, 0),
        (topic, 1),
    ]
    c.close()
    listed = client.list_consumer_groups().result(30)
    states = {g.group_id: g.state for g in listed.valid}
    assert states[group] == ck.ConsumerGroupState.EMPTY
    assert _done(client.delete_consumer_groups([group])) == {group: None}
    listed = client.list_consumer_groups(states={ck.ConsumerGroupState.EMPTY}).result(30)
    assert group not in {g.group_id for g in listed.valid}
