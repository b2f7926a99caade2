"""The exception tree: one class per Kafka error code, checked against Kafka's table."""

from __future__ import annotations

import csv
import pathlib

import pytest

from pykaf import errors

# Kafka's error table, kept with the tests (tests/data/kafka-specs/SOURCE.md).
SPECS = pathlib.Path(__file__).resolve().parent / "data" / "kafka-specs" / "errors.tsv"


def kafka_table() -> list[dict[str, str]]:
    with SPECS.open(newline="") as f:
        return [r for r in csv.DictReader(f, delimiter="\t") if r["code"] != "0"]


def test_every_kafka_code_has_its_own_class() -> None:
    rows = kafka_table()
    seen: set[type[errors.KafkaError]] = set()
    for row in rows:
        code = int(row["code"])
        cls = errors.error_for_code(code)
        assert cls is not None and cls is not errors.UnknownKafkaError, row["name"]
        assert cls.code == code
        assert cls.name == row["name"]
        assert cls.retriable == (row["retriable"] == "yes"), row["name"]
        assert issubclass(cls, errors.RetriableError) == cls.retriable
        assert cls not in seen
        seen.add(cls)
    assert len(seen) == len(rows)


def test_generated_module_is_current() -> None:
    """pykaf/errors.py is what tools/gen_errors.py makes from the table today."""
    import importlib.util
    import subprocess
    import sys

    rows = kafka_table()
    assert rows
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("gen_errors", root / "tools" / "gen_errors.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rendered = gen.render(gen.load(SPECS))
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "-"],
        input=rendered,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert formatted == (root / "pykaf" / "errors.py").read_text()


def test_code_zero_and_unknown_codes() -> None:
    assert errors.error_for_code(0) is None
    errors.raise_for_code(0)  # no error
    with pytest.raises(errors.UnknownKafkaError) as info:
        errors.raise_for_code(9999, "strange")
    assert info.value.code == 9999
    assert "strange" in str(info.value)


def test_raise_for_code_raises_the_specific_class() -> None:
    with pytest.raises(errors.NotLeaderOrFollowerError) as info:
        errors.raise_for_code(6)
    assert info.value.retriable
    assert isinstance(info.value, errors.RetriableError)
    assert isinstance(info.value, errors.KafkaError)
    assert str(info.value) == errors.NotLeaderOrFollowerError.description
    assert "not the current leader" in str(info.value)


def test_tree_shape() -> None:
    assert issubclass(errors.CorruptRecordError, errors.KafkaError)
    assert issubclass(errors.KafkaConnectionError, errors.RetriableError)
    assert issubclass(errors.KafkaTimeoutError, errors.KafkaConnectionError)
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.UnsupportedVersionError, errors.ProtocolError)
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, errors.PykafError), name
            assert obj.__doc__, name


def test_a_consumer_error_is_also_an_instance_of_its_errors_class() -> None:
    """``except TopicAuthorizationError`` catches a partition's ConsumerError (issue 35)."""
    cause = errors.TopicAuthorizationError("secured/0: Topic authorization failed.")
    error = errors.ConsumerError("secured", 0, cause)
    assert isinstance(error, errors.ConsumerError)
    assert isinstance(error, errors.TopicAuthorizationError)
    assert (error.topic, error.partition, error.error) == ("secured", 0, cause)
    kafka: errors.KafkaError = error  # (narrowed above to a subclass of both)
    assert (kafka.code, kafka.name, kafka.retriable) == (29, "TOPIC_AUTHORIZATION_FAILED", False)
    assert type(error).__name__ == "ConsumerError[TopicAuthorizationError]"
    with pytest.raises(errors.TopicAuthorizationError):
        raise error
    # a retriable cause makes a retriable ConsumerError, one class per cause's class
    corrupt = errors.ConsumerError("t", 1, errors.CorruptRecordError("t/1: bad crc"))
    assert isinstance(corrupt, errors.RetriableError) and corrupt.retriable
    assert type(errors.ConsumerError("u", 2, errors.CorruptRecordError())) is type(corrupt)
    # the cause's own attributes come along (LogTruncationError takes other arguments)
    truncated = errors.ConsumerError("t", 1, errors.LogTruncationError("t", 1, 9, 5, 2))
    assert isinstance(truncated, errors.LogTruncationError)
    assert (truncated.fetch_offset, truncated.divergent_offset) == (9, 5)
    unknown = errors.ConsumerError("t", 1, errors.UnknownKafkaError(4242))
    copied: errors.KafkaError = unknown  # type: ignore[assignment]
    assert isinstance(unknown, errors.UnknownKafkaError) and copied.code == 4242  # its own code
    # an error that is not pykaf's leaves a plain ConsumerError
    assert type(errors.ConsumerError("t", 1, ValueError("x"))) is errors.ConsumerError


def test_a_consumer_error_names_its_partition_once() -> None:
    said = errors.ConsumerError("secured", 0, errors.TopicAuthorizationError("secured/0: no"))
    assert str(said) == "secured/0: no"  # not "secured/0: secured/0: no"
    unsaid = errors.ConsumerError("secured", 0, errors.TopicAuthorizationError("no"))
    assert str(unsaid) == "secured/0: no"
    # another partition's name is not this one's
    other = errors.ConsumerError("secured", 1, errors.TopicAuthorizationError("secured/10: no"))
    assert str(other) == "secured/1: secured/10: no"


def test_a_consumer_error_survives_pickling_and_copying() -> None:
    import copy
    import pickle

    error = errors.ConsumerError("t", 3, errors.OffsetOutOfRangeError("t/3: offset 7"))
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is type(error)
        assert (again.topic, again.partition, str(again)) == ("t", 3, "t/3: offset 7")
        assert isinstance(again.error, errors.OffsetOutOfRangeError)
