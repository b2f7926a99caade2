"""librdkafka's config keys as pykaf options: every key of the table, and what is refused."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import pykaf
from pykaf.compat.confluent_kafka import KafkaError, KafkaException
from pykaf.compat.confluent_kafka._config import OPTIONS, REFUSED, SHIM_KEYS, translate

DOC = Path(__file__).parents[2] / "docs" / "migrating.md"
B = {"bootstrap.servers": "h:1"}


def _refused(conf: dict[str, Any], role: str) -> str:
    with pytest.raises(KafkaException) as info:
        translate(conf, role)
    error = info.value.args[0]
    assert isinstance(error, KafkaError)
    assert error.code() == KafkaError._INVALID_ARG
    return error.str()


def test_the_keys_scripts_use_most() -> None:
    producer = translate(
        {
            **B,
            "client.id": "me",
            "linger.ms": 20,
            "batch.size": "65536",
            "compression.type": "LZ4",
            "acks": -1,
            "enable.idempotence": True,
            "transactional.id": "tx",
            "message.max.bytes": 50000,
            "retries": 3,
            "request.timeout.ms": 30000,
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "scram-sha-256",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca.pem",
            "queue.buffering.max.kbytes": 1024,
        },
        "producer",
    )
    assert producer.bootstrap == "h:1"
    assert producer.options == {
        "client_id": "me",
        "linger": 0.02,
        "flush_bytes": 65536,
        "batch_bytes": 1_048_576,
        "max_request_bytes": 1_048_576,
        "compression": "lz4",
        "acks": "all",
        "idempotence": True,
        "transactional_id": "tx",
        "max_message_bytes": 50000,
        "retries": 3,
        "request_timeout": 30.0,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": "u",
        "sasl_password": "p",
        "ssl_cafile": "/ca.pem",
        "buffer_bytes": 1024 * 1024,
    }
    pykaf.ProducerConfig(bootstrap_servers="h:1", **producer.options)  # pykaf takes them all
    consumer = translate(
        {
            **B,
            "group.id": "g",
            "enable.auto.commit": "false",
            "auto.commit.interval.ms": 1000,
            "auto.offset.reset": "smallest",
            "isolation.level": "read_uncommitted",
            "session.timeout.ms": 10000,
            "max.poll.interval.ms": 60000,
            "queued.max.messages.kbytes": 8192,
            "client.rack": "use1-az2",
        },
        "consumer",
    )
    assert consumer.group_id == "g"
    assert consumer.options == {
        "auto_commit": False,
        "auto_commit_interval": 1.0,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_uncommitted",
        "session_timeout": 10.0,
        "rebalance_timeout": 60.0,
        "fetch_buffer_bytes": 8 * 1024 * 1024,
        "client_rack": "use1-az2",
    }
    pykaf.GroupConfig(bootstrap_servers="h:1", **consumer.options)


@pytest.mark.parametrize(
    ("word", "reset"),
    [
        ("smallest", "earliest"),
        ("beginning", "earliest"),
        ("largest", "latest"),
        ("end", "latest"),
        ("latest", "latest"),
        ("error", "none"),
    ],
)
def test_auto_offset_reset_words(word: str, reset: str) -> None:
    assert translate({**B, "auto.offset.reset": word}, "consumer").options == {
        "auto_offset_reset": reset
    }


def test_every_table_target_is_a_pykaf_option() -> None:
    names = {
        f
        for config in (pykaf.ProducerConfig, pykaf.GroupConfig)
        for f in config.__dataclass_fields__
    }
    assert {o.target for o in OPTIONS.values()} - {"group_id"} <= names


def test_an_unknown_key_is_refused_by_name_with_the_keys_taken() -> None:
    text = _refused({**B, "fetch.error.backoff.ms": 5}, "consumer")
    assert "'fetch.error.backoff.ms'" in text and "group.id" in text


def test_a_key_of_the_other_role_is_refused() -> None:
    assert "'group.id'" in _refused({**B, "group.id": "g"}, "producer")
    assert "'linger.ms'" in _refused({**B, "linger.ms": 5}, "consumer")
    assert "'linger.ms'" in _refused({**B, "linger.ms": 5}, "admin")


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_refused_keys_say_why(key: str) -> None:
    text = _refused({**B, key: "x"}, "producer")
    assert key in text and REFUSED[key] in text


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("linger.ms", "soon"),
        ("enable.idempotence", "yes"),
        ("linger.ms", -1),
        ("acks", "some"),
        ("auto.offset.reset", "oldest"),
        ("client.id", None),
        ("ssl.endpoint.identification.algorithm", "dns"),
        ("retries", True),
    ],
)
def test_bad_values_are_refused(key: str, value: Any) -> None:
    role = "consumer" if key == "auto.offset.reset" else "producer"
    assert key in _refused({**B, key: value}, role)


def test_shim_keys() -> None:
    def report(err: Any, msg: Any) -> None:
        pass

    assert translate({**B, "on_delivery": report}, "producer").on_delivery is report
    assert translate({**B, "error_cb": report}, "consumer").error_cb is report
    assert "callable" in _refused({**B, "error_cb": "log"}, "producer")
    assert "futures" in _refused({**B, "error_cb": report}, "admin")
    assert "callable" in _refused({**B, "on_delivery": 5}, "producer")
    assert translate({**B, "enable.partition.eof": False}, "consumer").options == {}
    assert "enable.partition.eof" in _refused({**B, "enable.partition.eof": True}, "consumer")
    stored = translate({**B, "enable.auto.offset.store": True}, "consumer")
    assert (stored.options, stored.auto_offset_store) == ({}, True)
    manual = translate({**B, "enable.auto.offset.store": "false"}, "consumer")
    assert (manual.options, manual.auto_offset_store) == ({}, False)
    assert translate(B, "consumer").auto_offset_store
    assert "enable.auto.offset.store" in _refused(
        {**B, "enable.auto.offset.store": "maybe"}, "consumer"
    )


def test_message_max_bytes_raises_the_batch_size() -> None:
    options = translate({**B, "message.max.bytes": 3_000_000}, "producer").options
    assert options == {
        "max_message_bytes": 3_000_000,
        "batch_bytes": 3_000_000,
        "max_request_bytes": 3_000_000,
    }
    pykaf.ProducerConfig(bootstrap_servers="h:1", **options)


def test_bootstrap_is_required_and_conf_must_be_a_dict() -> None:
    assert "bootstrap.servers" in _refused({"client.id": "x"}, "producer")
    with pytest.raises(TypeError):
        translate([("bootstrap.servers", "h:1")], "producer")  # type: ignore[arg-type]


def _doc_section() -> str:
    text = DOC.read_text()
    start = text.index("## From confluent-kafka")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_the_migration_page_lists_the_table() -> None:
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| `([a-z_]+)` \|", _doc_section(), re.M))
    table = {k: o.target for k, o in OPTIONS.items()}
    assert rows == {**table, **{k: "shim" for k in SHIM_KEYS}}


def test_the_migration_page_lists_the_refused_keys() -> None:
    section = _doc_section()
    for key in REFUSED:
        assert f"`{key}`" in section
