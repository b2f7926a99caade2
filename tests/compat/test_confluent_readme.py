"""confluent-kafka's README usage, with only the import changed, runs on pykaf."""

from __future__ import annotations

from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker


def test_readme_admin_client_creates_topics(admin_broker: Any) -> None:
    from pykaf.compat.confluent_kafka.admin import AdminClient, NewTopic

    topic, other = bc.unique("readme"), bc.unique("readme")
    # README, "AdminClient"
    a = AdminClient({"bootstrap.servers": admin_broker.bootstrap})
    new_topics = [NewTopic(t, num_partitions=3, replication_factor=1) for t in [topic, other]]
    fs = a.create_topics(new_topics)
    created = []
    for name, f in fs.items():
        f.result()  # The result itself is None
        created.append(name)
    assert sorted(created) == sorted([topic, other])
    md = a.list_topics(topic)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2]
    again = a.create_topics([NewTopic(topic, 1, 1)])[topic]
    with pytest.raises(Exception) as info:
        again.result(10)
    assert info.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    a.close()


def test_readme_producer_and_consumer(compat_broker: Any) -> None:
    from pykaf.compat.confluent_kafka import Consumer, Producer

    topic = bc.unique("readme")
    compat_broker.create(topic, 3)

    # Producer with a delivery report (README, "Basic Producer example")
    p = Producer({"bootstrap.servers": compat_broker.bootstrap})
    delivered: list[tuple[str | None, int | None]] = []

    def delivery_report(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.topic(), msg.partition()))

    some_data_source = [f"data {i}" for i in range(30)]
    for data in some_data_source:
        p.poll(0)
        p.produce(topic, data.encode("utf-8"), callback=delivery_report)
    assert p.flush() == 0
    assert len(delivered) == 30 and {t for t, _ in delivered} == {topic}

    # Consumer (README, "Basic Consumer example")
    c = Consumer(
        {
            "bootstrap.servers": compat_broker.bootstrap,
            "group.id": bc.unique("mygroup"),
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    received = []
    while len(received) < 30:
        msg = c.poll(1.0)
        if msg is None:
            continue
        assert not msg.error(), msg.error()
        received.append(msg.value().decode("utf-8"))
    c.close()
    assert sorted(received) == sorted(some_data_source)
    p.close()
