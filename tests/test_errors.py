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
