"""Options declared once (pykaf/_properties.py): one answer for one value, whichever client's name.

The Spark data source (Java's names), the confluent-kafka drop-in (librdkafka's)
and the kafka-python drop-in take many of the same properties; each value given
under any of a property's names ends as the same pykaf setting, or is refused by
all of them (issue 31).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf._properties import KINDS, PROPERTIES, Property, java_table, python_table
from pykaf.compat.confluent_kafka import _config as ck_config
from pykaf.compat.confluent_kafka._error import KafkaException
from pykaf.compat.kafka import _config as kp_config
from pykaf.compat.kafka.errors import KafkaConfigurationError
from pykaf.spark import _options as spark_options

#: Values as a conf or an option string gives them (Spark takes only these).
TEXTS = ["0", "1", "-1", "5000", " 7 ", "1.5", "x", "", "true", "FALSE", "all", "LZ4"]
TEXTS += ["plaintext", "earliest", "smallest", "read_committed", "https", "none", "classic"]
#: Values as a Python caller gives them (confluent-kafka's conf and kafka-python take these).
TYPED: list[Any] = [0, 1, -1, 5000, 2.5, True, False, float("inf")]

REFUSED = "refused"
CONFIGS = {"producer": pykaf.ProducerConfig, "consumer": pykaf.ConsumerConfig}


def _role(row: Property, *, java: bool = False) -> str:
    roles = row.java_roles if java and row.java_roles is not None else row.roles
    return "producer" if "producer" in roles else "consumer"


def _setting(row: Property, options: dict[str, Any]) -> Any:
    """What pykaf makes of ``options``: the row's option (and batch_records), or REFUSED.

    Idempotence is off unless the row is its: whether it is on by default is
    each library's own default (Java's, librdkafka's and kafka-python's differ),
    not a translation.
    """
    kind = pykaf.GroupConfig if "group" in row.roles else CONFIGS[_role(row)]
    fields = {f.name for f in dataclasses.fields(kind)}
    if kind is pykaf.ProducerConfig and row.option != "idempotence":
        options = {**options, "idempotence": False}
    try:
        config = kind(
            **{"bootstrap_servers": "h:1", **{k: v for k, v in options.items() if k in fields}}
        )
    except errors.ConfigError:
        return REFUSED
    value = getattr(config, row.option) if row.option in fields else options.get(row.option)
    return (value, getattr(config, "batch_records", None))


def _spark(row: Property, value: str) -> Any:
    assert row.java is not None
    translate = (
        spark_options.producer_config
        if _role(row, java=True) == "producer"
        else spark_options.consumer_config
    )
    try:
        options = translate({"kafka.bootstrap.servers": "h:1", f"kafka.{row.java}": value})
    except errors.ConfigError:
        return REFUSED
    return _setting(row, options)


def _confluent(row: Property, value: Any) -> Any:
    role = "consumer" if "group" in row.roles else _role(row)
    try:
        settings = ck_config.translate({"bootstrap.servers": "h:1", row.librdkafka[0]: value}, role)
    except KafkaException:
        return REFUSED
    options = dict(settings.options)
    if settings.group_id is not None:
        options["group_id"] = settings.group_id
    return _setting(row, options)


def _kafka_python(row: Property, value: Any) -> Any:
    assert row.python is not None
    every = (kp_config.CLIENT, kp_config.PRODUCER, kp_config.CONSUMER, kp_config.GROUP)
    tables = tuple(t for t in every if row.python in t and t[row.python][0] == row.option)
    try:
        options = kp_config.translate({row.python: value}, tables, frozenset(), "Kafka")
    except KafkaConfigurationError:
        return REFUSED
    return _setting(row, options)


def _shared() -> list[Property]:
    """The rows more than one client takes (by Java's, librdkafka's or kafka-python's name)."""
    return [
        row
        for row in PROPERTIES
        if row.option != "bootstrap_servers"  # required, and taken as it is
        and sum(bool(names) for names in (row.java, row.librdkafka, row.python)) >= 2
    ]


@pytest.mark.parametrize("row", _shared(), ids=lambda row: f"{row.option}-{row.kind.name}")
def test_one_value_one_answer_across_spark_and_the_drop_ins(row: Property) -> None:
    for value in TEXTS + TYPED:
        answers = {}
        if row.java is not None and isinstance(value, str):
            answers["spark"] = _spark(row, value)
        if row.librdkafka:
            answers["confluent"] = _confluent(row, value)
        if row.python is not None:
            answers["kafka-python"] = _kafka_python(row, value)
        if len(answers) >= 2:
            assert len({repr(a) for a in answers.values()}) == 1, (row.option, value, answers)


def test_what_the_tables_disagreed_on_before() -> None:
    """Negative times, batching off and the widened request limit (issue 31, item 5)."""
    base = {"kafka.bootstrap.servers": "h:1"}
    with pytest.raises(errors.ConfigError, match=r"kafka\.linger\.ms='-1' is not valid"):
        spark_options.producer_config({**base, "kafka.linger.ms": "-1"})
    with pytest.raises(KafkaException, match=r"linger\.ms=-1: must be a number of milliseconds"):
        ck_config.translate({"bootstrap.servers": "h:1", "linger.ms": -1}, "producer")
    with pytest.raises(KafkaConfigurationError, match="linger_ms must be"):
        kp_config.translate({"linger_ms": -1}, (kp_config.PRODUCER,), frozenset(), "KafkaProducer")
    # batch.size 0: batching off in Java and kafka-python; out of librdkafka's range (1..)
    assert spark_options.producer_config({**base, "kafka.batch.size": "0"})["batch_records"] == 1
    off = kp_config.translate({"batch_size": 0}, (kp_config.PRODUCER,), frozenset(), "K")
    assert off == {"batch_records": 1}
    with pytest.raises(KafkaException, match=r"batch\.size=0: must be a number of bytes >= 1"):
        ck_config.translate({"bootstrap.servers": "h:1", "batch.size": 0}, "producer")
    # the largest message raises the request limit only where it is lower
    kept = {"max_message_bytes": 2_000_000, "max_request_bytes": 8_000_000}
    kp = kp_config.translate(
        {"max_request_size": 2_000_000}, (kp_config.PRODUCER,), frozenset(), "K"
    )
    assert kp["max_request_bytes"] == kp["batch_bytes"] == 2_000_000
    from pykaf._properties import fit_largest_message

    fit_largest_message(kept)
    assert kept["max_request_bytes"] == 8_000_000 and kept["batch_bytes"] == 2_000_000


def test_every_row_names_a_pykaf_option() -> None:
    kinds = {
        "producer": pykaf.ProducerConfig,
        "consumer": pykaf.ConsumerConfig,
        "group": pykaf.GroupConfig,
        "admin": pykaf.ClientConfig,
    }
    sync_producer = inspect.signature(pykaf.sync.Producer).parameters
    for row in PROPERTIES:
        assert row.kind in KINDS.values()
        for role in row.roles:
            fields = {f.name for f in dataclasses.fields(kinds[role])}
            if row.option == "group_id":
                continue  # the group's name is an argument of its own
            assert row.option in fields or (role == "producer" and row.option in sync_producer), (
                row,
                role,
            )


def test_no_name_is_taken_twice_by_one_client() -> None:
    for role in ("producer", "consumer"):
        java = [
            row.java
            for row in PROPERTIES
            if row.java and role in (row.java_roles if row.java_roles is not None else row.roles)
        ]
        assert len(java) == len(set(java)) == len(java_table(role))
    librdkafka = [name for row in PROPERTIES for name in row.librdkafka]
    assert len(librdkafka) == len(set(librdkafka)) == len(ck_config.OPTIONS)
    for role in ("client", "producer", "consumer", "group", "admin"):
        rows = [r for r in PROPERTIES if r.python is not None]
        table = python_table(role)
        assert len(table) == len({r.python for r in rows if r.python in table})


def test_the_generated_tables_are_the_declarations() -> None:
    assert set(spark_options._PRODUCER) == set(java_table("producer"))
    assert set(spark_options._CONSUMER) == set(java_table("consumer"))
    for key, option in ck_config.OPTIONS.items():
        assert key in option.prop.librdkafka and option.target == option.prop.option
    for table in (kp_config.CLIENT, kp_config.PRODUCER, kp_config.CONSUMER, kp_config.GROUP):
        for name, (target, convert) in table.items():
            assert isinstance(convert, kp_config.Convert)
            assert (convert.prop.python, convert.prop.option) == (name, target)
