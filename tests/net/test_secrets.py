"""No password reaches a repr, a log line (DEBUG included) or an exception."""

from __future__ import annotations

import logging
import traceback

import pytest

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf._config import MASK, ClientConfig
from pykaf._consumer.config import ConsumerConfig
from pykaf._producer.config import ProducerConfig
from pykaf.testing import KafkaCluster
from pykaf.testing.fixtures import KAFKA_USERS

PASSWORD = KAFKA_USERS["admin"]  # the right one: it must not leak either
WRONG = "wrong-Pa55word-x7Q"  # a refused one
KEY_PASSWORD = "key-Pa55-9Zq"


@pytest.mark.parametrize("config_class", [ClientConfig, ProducerConfig, ConsumerConfig])
def test_reprs_mask_the_passwords(config_class: type[ClientConfig]) -> None:
    config = config_class.from_kwargs(
        bootstrap_servers="localhost:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="admin",
        sasl_password=PASSWORD,
        ssl_password=KEY_PASSWORD,
    )
    for text in (repr(config), str(config), f"{config}", repr([config])):
        assert PASSWORD not in text and KEY_PASSWORD not in text
        assert f"sasl_password={MASK!r}" in text and f"ssl_password={MASK!r}" in text
    assert config.sasl_password == PASSWORD  # masked when shown, not changed
    assert "sasl_password=None" in repr(config_class.from_kwargs(bootstrap_servers="h:1"))


def _texts(records: list[logging.LogRecord], failures: list[BaseException]) -> list[str]:
    out = [r.getMessage() for r in records]
    out += [repr(r.args) for r in records]
    for exc in failures:
        out.append("".join(traceback.format_exception(exc)))
        out.append(repr(exc))
    return out


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_no_password_in_debug_logs_or_errors(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture, mechanism: str
) -> None:
    topic = f"secrets-{mechanism.lower()}"
    kafka_cluster.create_topic(topic, 1)
    options = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": "admin",
    }
    failures: list[BaseException] = []
    shown: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="pykaf"):
        with pykaf.sync.Producer(
            kafka_cluster.sasl_bootstrap, sasl_password=PASSWORD, **options
        ) as producer:
            producer.send(topic, b"v", partition=0)
            shown += [repr(producer), repr(producer.statistics())]
        with pykaf.sync.Admin(kafka_cluster.sasl_bootstrap, sasl_password=PASSWORD, **options) as a:
            shown.append(repr(a))
        with pytest.raises(errors.SaslAuthenticationError) as refused:
            pykaf.sync.Producer(kafka_cluster.sasl_bootstrap, sasl_password=WRONG, **options)
        failures.append(refused.value)
        with pytest.raises(errors.ConfigError) as bad:  # a bad option beside a password
            pykaf.sync.Producer(
                kafka_cluster.sasl_bootstrap, sasl_password=WRONG, acks="most", **options
            )
        failures.append(bad.value)
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # DEBUG was on
    for text in _texts(caplog.records, failures) + shown:
        assert PASSWORD not in text, text
        assert WRONG not in text, text
