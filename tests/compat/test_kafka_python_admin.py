"""pykaf.compat.kafka.KafkaAdminClient on pykaf's fake cluster: topics and groups."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from pykaf.compat import kafka
from pykaf.compat.kafka import errors
from pykaf.compat.kafka.admin import KafkaAdminClient, NewTopic

T = 30.0
TP = kafka.TopicPartition


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_topics(fake_cluster: Any) -> None:
    a, b, c = unique("compat-a"), unique("compat-b"), unique("compat-c")
    with KafkaAdminClient(bootstrap_servers=fake_cluster.bootstrap, client_id="test") as admin:
        result = admin.create_topics(
            new_topics=[NewTopic(name=a, num_partitions=3, replication_factor=1)],
            validate_only=False,
        )
        assert result == {"topics": [{"name": a, "error_code": 0, "error_message": None}]}
        admin.create_topics({b: {"num_partitions": 2, "configs": {"cleanup.policy": "compact"}}})
        assert {a, b} <= set(admin.list_topics())
        described = admin.describe_topics([a, b])
        assert [d["name"] for d in described] == [a, b]
        assert [p["partition_index"] for p in described[0]["partitions"]] == [0, 1, 2]
        with pytest.raises(errors.TopicAlreadyExistsError) as info:
            admin.create_topics([NewTopic(a, 1, 1)])
        assert info.value.errno == 36
        partial = admin.create_topics([NewTopic(a, 1, 1), NewTopic(c, 1, 1)], raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in partial["topics"]] == [(a, 36), (c, 0)]
        assert admin.delete_topics([a, b, c])["topics"][0]["error_code"] == 0
        deadline = time.monotonic() + T
        while a in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a not in admin.list_topics()
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics([a])
        with pytest.raises(errors.KafkaConfigurationError, match="unknown keys"):
            admin.create_topics({a: {"partitions": 1}})
    with pytest.raises(errors.IllegalStateError):
        admin.list_topics()


def test_groups(fake_cluster: Any) -> None:
    topic, group = unique("compat-groups"), unique("g")
    fake_cluster.create_topic(topic, 2)
    with kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap) as producer:
        for p in range(2):
            producer.send(topic, b"v", partition=p)
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=fake_cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        client_id="member-client",
    )
    got = 0
    deadline = time.monotonic() + T
    while got < 2 and time.monotonic() < deadline:
        got += sum(len(v) for v in consumer.poll(timeout_ms=1000).values())
    consumer.commit()
    with KafkaAdminClient(bootstrap_servers=fake_cluster.bootstrap) as admin:
        assert (group, "consumer") in admin.list_consumer_groups()
        [info] = admin.describe_consumer_groups([group])
        assert (info.group, info.state, info.protocol_type) == (group, "Stable", "consumer")
        assert [m.client_id for m in info.members] == ["member-client"]
        assert info.members[0].member_assignment == {topic: [0, 1]}
        offsets = admin.list_consumer_group_offsets(group)
        assert offsets == {
            TP(topic, 0): kafka.OffsetAndMetadata(1, "", -1),
            TP(topic, 1): kafka.OffsetAndMetadata(1, "", -1),
        }
        assert admin.list_consumer_group_offsets(group, partitions=[TP(topic, 1)]) == {
            TP(topic, 1): kafka.OffsetAndMetadata(1, "", -1)
        }
        assert admin.delete_consumer_groups([group]) == [(group, errors.NonEmptyGroupError)]
        consumer.close()
        assert admin.delete_consumer_groups([group]) == [(group, errors.NoError)]
        assert group not in [g for g, _ in admin.list_consumer_groups()]
        with pytest.raises(errors.KafkaConfigurationError, match="not supported"):
            admin.list_consumer_groups(broker_ids=[1])


def test_bad_configuration(fake_cluster: Any) -> None:
    with pytest.raises(errors.KafkaConfigurationError, match="acks"):
        KafkaAdminClient(bootstrap_servers=fake_cluster.bootstrap, acks=1)
    with pytest.raises(errors.NoBrokersAvailable):
        KafkaAdminClient(bootstrap_servers="127.0.0.1:1", request_timeout_ms=2000)
