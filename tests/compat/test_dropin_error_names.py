"""The drop-ins' errors name the option the user set, not pykaf's own name for it."""

from __future__ import annotations

import re
from typing import Any

import pytest

import pykaf
from pykaf.compat import confluent_kafka as ck
from pykaf.compat import kafka
from pykaf.compat._options import UserNames
from pykaf.compat.kafka import errors

pytestmark = pytest.mark.broker

T = 30.0

#: pykaf's names, which must not reach a user of the drop-ins.
PYKAF_NAMES = (
    "max_message_bytes",
    "batch_records",
    "buffer_bytes",
    "heartbeat_interval",
    "session_timeout",
    "group_protocol",
)


def _no_pykaf_name(text: str) -> None:
    for name in PYKAF_NAMES:  # as a whole word: session_timeout_ms is the user's
        assert not re.search(rf"\b{name}\b", text), text


@pytest.mark.parametrize(
    ("configs", "named"),
    [
        ({"max_request_size": 0}, "max_request_size=0"),
        ({"buffer_memory": 0}, "buffer_memory=0"),
    ],
)
def test_kafka_python_producer_errors_name_its_options(
    fake_cluster: Any, configs: dict[str, Any], named: str
) -> None:
    with pytest.raises(errors.KafkaConfigurationError) as info:
        kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap, **configs)
    assert named in str(info.value)
    _no_pykaf_name(str(info.value))


def test_kafka_python_record_too_large_names_max_request_size(fake_cluster: Any) -> None:
    fake_cluster.create_topic("big", 1)
    producer = kafka.KafkaProducer(bootstrap_servers=fake_cluster.bootstrap, max_request_size=100)
    try:
        with pytest.raises(errors.MessageSizeTooLargeError) as info:
            producer.send("big", b"x" * 500).get(T)
    finally:
        producer.close(T)
    assert "max_request_size (100)" in str(info.value)
    _no_pykaf_name(str(info.value))


def test_kafka_python_group_errors_name_its_options(fake_cluster: Any) -> None:
    with pytest.raises(errors.KafkaConfigurationError) as info:
        kafka.KafkaConsumer(
            "t",
            bootstrap_servers=fake_cluster.bootstrap,
            group_id="g",
            session_timeout_ms=100,
            heartbeat_interval_ms=200,
        )
    assert str(info.value).endswith("heartbeat_interval_ms=200: must be below session_timeout_ms")


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({"message.max.bytes": 0}, "message.max.bytes=0"),
        ({"batch.num.messages": "0"}, "batch.num.messages='0'"),
        ({"queue.buffering.max.kbytes": 0}, "queue.buffering.max.kbytes=0"),
    ],
)
def test_confluent_producer_errors_name_its_keys(
    fake_cluster: Any, conf: dict[str, Any], named: str
) -> None:
    with pytest.raises(ck.KafkaException) as info:
        ck.Producer({"bootstrap.servers": fake_cluster.bootstrap, **conf})
    text = info.value.args[0].str()
    assert text.startswith(named), text
    _no_pykaf_name(text)


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        (
            {"session.timeout.ms": 100, "heartbeat.interval.ms": 200},
            "heartbeat.interval.ms=200: must be below session.timeout.ms",
        ),
        (
            {"group.protocol": "consumer", "session.timeout.ms": 45000},
            "session.timeout.ms cannot be set with group.protocol='consumer'",
        ),
    ],
)
def test_confluent_consumer_errors_name_its_keys(
    fake_cluster: Any, conf: dict[str, Any], named: str
) -> None:
    c = ck.Consumer({"bootstrap.servers": fake_cluster.bootstrap, "group.id": "g", **conf})
    try:
        with pytest.raises(ck.KafkaException) as info:
            c.subscribe(["t"])
    finally:
        c.close()
    text = info.value.args[0].str()
    assert named in text, text
    _no_pykaf_name(text)


def test_user_names_show_values_in_the_users_units() -> None:
    """A default the user did not give is shown converted back (seconds to ms)."""
    names = UserNames({"linger": "linger.ms", "max_message_bytes": "message.max.bytes"}, {}, {})
    names = UserNames(names.names, {}, {"linger": 1000.0})
    error = pykaf.errors.ConfigError("linger=0.25: must be below something")
    error.option, error.value, error.reason = "linger", 0.25, "must not exceed max_message_bytes"
    assert names.text(error) == "linger.ms=250: must not exceed message.max.bytes"
    plain = pykaf.errors.RecordTooLargeError("a record exceeds max_message_bytes (5)")
    assert names.text(plain) == "a record exceeds message.max.bytes (5)"
    # a pykaf name inside a longer identifier is left alone
    assert names.text(pykaf.errors.ConfigError("max_message_bytes_x")) == "max_message_bytes_x"
