"""pykaf.compat.aiokafka: structs, partitioner and assignor names, and the options' translation."""

from __future__ import annotations

import dataclasses
import os

import pytest

from pykaf.compat.aiokafka import _config, assignors, partitioner, structs
from pykaf.compat.aiokafka.errors import KafkaConfigurationError

real_structs = pytest.importorskip("aiokafka.structs")
real_partitioner = pytest.importorskip("aiokafka.partitioner")


def test_structs_have_aiokafka_fields() -> None:
    for name in ("TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp", "RecordMetadata"):
        assert getattr(structs, name)._fields == getattr(real_structs, name)._fields, name
    ours = [f.name for f in dataclasses.fields(structs.ConsumerRecord)]
    theirs = [f.name for f in dataclasses.fields(real_structs.ConsumerRecord)]
    assert ours == theirs
    # A TopicPartition is a plain named tuple: equal to (and hashed as) aiokafka's.
    assert structs.TopicPartition("t", 1) == real_structs.TopicPartition("t", 1)
    assert {structs.TopicPartition("t", 1): 1}[real_structs.TopicPartition("t", 1)] == 1


def test_default_partitioner_places_keys_as_aiokafka() -> None:
    ours = partitioner.DefaultPartitioner()
    theirs = real_partitioner.DefaultPartitioner()
    parts = list(range(7))
    for i in range(200):
        key = os.urandom(i % 40)
        assert ours(key, parts, parts) == theirs(key, parts, parts)
    assert ours(None, parts, [3]) == 3
    assert partitioner.pykaf_partitioner(ours) == "murmur2"
    assert partitioner.pykaf_partitioner(partitioner.DefaultPartitioner) == "murmur2"


def test_a_callable_partitioner_is_called_with_aiokafkas_arguments() -> None:
    seen = []

    def last(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        seen.append((key, all_partitions, available))
        return all_partitions[-1]

    fn = partitioner.pykaf_partitioner(last)
    assert callable(fn)
    assert fn("t", b"k", 3, [0, 2]) == 2
    assert seen == [(b"k", [0, 1, 2], [0, 2])]
    with pytest.raises(TypeError):
        partitioner.pykaf_partitioner(42)


def test_assignor_classes_name_pykafs_assignors() -> None:
    strategy = (assignors.RoundRobinPartitionAssignor, assignors.RangePartitionAssignor())
    assert assignors.assignor_names(strategy) == ("roundrobin", "range")

    class Mine(assignors.AbstractPartitionAssignor):
        name = "mine"

    with pytest.raises(KafkaConfigurationError, match="pykaf runs its own assignors"):
        assignors.assignor_names((Mine,))


def test_options_translate_to_pykaf_names_and_units() -> None:
    options = _config.translate(
        {
            "client_id": "app",
            "request_timeout_ms": 1500,
            "linger_ms": 10,
            "compression_type": "zstd",
            "max_batch_size": 32768,
            "enable_idempotence": True,
            "api_version": "auto",
        },
        (_config.CLIENT, _config.PRODUCER),
        frozenset(),
        "AIOKafkaProducer",
    )
    assert options == {
        "client_id": "app",
        "request_timeout": 1.5,
        "linger": 0.01,
        "compression": "zstd",
        "flush_bytes": 32768,
        "idempotence": True,
    }


def test_unsupported_options_pass_at_aiokafkas_defaults_only() -> None:
    # What FastStream passes for every client: aiokafka's own defaults.
    defaults = {
        "connections_max_idle_ms": 540000,
        "sasl_kerberos_service_name": "kafka",
        "sasl_kerberos_domain_name": None,
        "sasl_mechanism": "PLAIN",
        "security_protocol": "PLAINTEXT",
    }
    options = _config.translate(defaults, (_config.CLIENT,), frozenset(), "AIOKafkaProducer")
    assert options == {"security_protocol": "PLAINTEXT"}
    with pytest.raises(KafkaConfigurationError, match="connections_max_idle_ms is not supported"):
        _config.translate(
            {"connections_max_idle_ms": 1000}, (_config.CLIENT,), frozenset(), "AIOKafkaProducer"
        )
    with pytest.raises(KafkaConfigurationError, match="sasl_mechanism='SCRAM-SHA-256' needs"):
        _config.translate(
            {"sasl_mechanism": "SCRAM-SHA-256"}, (_config.CLIENT,), frozenset(), "AIOKafkaProducer"
        )
    sasl = _config.translate(
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256"},
        (_config.CLIENT,),
        frozenset(),
        "AIOKafkaProducer",
    )
    assert sasl["sasl_mechanism"] == "SCRAM-SHA-256"


def test_bad_values_and_names_are_refused_by_name() -> None:
    with pytest.raises(KafkaConfigurationError, match="linger_ms"):
        _config.translate({"linger_ms": -1}, (_config.PRODUCER,), frozenset(), "AIOKafkaProducer")
    with pytest.raises(KafkaConfigurationError, match="compression_type"):
        _config.translate(
            {"compression_type": "brotli"}, (_config.PRODUCER,), frozenset(), "AIOKafkaProducer"
        )
    with pytest.raises(TypeError, match="unexpected keyword argument 'lingr_ms'"):
        _config.translate({"lingr_ms": 5}, (_config.PRODUCER,), frozenset(), "AIOKafkaProducer")
    with pytest.raises(KafkaConfigurationError, match="bootstrap_servers"):
        _config.servers("bootstrap_servers", 42)
    assert _config.servers("bootstrap_servers", "a,b:9093") == ["a:9092", "b:9093"]
