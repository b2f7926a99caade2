"""The compat tests' brokers and the two modules they run the same code on."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")


@pytest.fixture(params=["fake", "mock", "kafka"])
def compat_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, a librdkafka mock cluster, then the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["fake", "kafka"])
def admin_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, then Apache Kafka (the librdkafka mock has no controller)."""
    return bc.broker_from(request, request.param)


@pytest.fixture(params=["confluent_kafka", "pykaf.compat.confluent_kafka"])
def ck(request: pytest.FixtureRequest) -> ModuleType:
    """The real confluent-kafka package, then pykaf's drop-in: the same test runs on both."""
    return importlib.import_module(request.param)


@pytest.fixture(params=["confluent_kafka.admin", "pykaf.compat.confluent_kafka.admin"])
def ck_admin(request: pytest.FixtureRequest) -> ModuleType:
    """confluent-kafka's admin module, then pykaf's."""
    return importlib.import_module(request.param)


def _shim_classes() -> list[type]:
    from pykaf.compat import confluent_kafka, kafka
    from pykaf.compat.confluent_kafka import admin

    return [
        confluent_kafka.Producer,
        confluent_kafka.Consumer,
        admin.AdminClient,
        kafka.KafkaProducer,
        kafka.KafkaConsumer,
        kafka.KafkaAdminClient,
    ]


@pytest.fixture(autouse=True)
def _close_the_shims_a_test_left_open(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every shim client a test made (confluent-kafka code never closes its producers).

    Left open, a shim's sync producer outlives its test's fake cluster and keeps
    reconnecting to it in the portal's loop, which later tests' log checks see.
    """
    made: list[Any] = []
    for cls in _shim_classes():

        def init(self: Any, *args: Any, __init: Any = cls.__init__, **kwargs: Any) -> None:
            __init(self, *args, **kwargs)
            made.append(self)

        monkeypatch.setattr(cls, "__init__", init)
    yield
    for client in reversed(made):
        close = client.close
        try:
            if "timeout" in close.__code__.co_varnames:
                close(timeout=5)
            else:
                close()
        except Exception as exc:  # a client the test broke on purpose: say so, go on
            warnings.warn(f"closing {client!r} after the test: {exc!r}", stacklevel=1)
