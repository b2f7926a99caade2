"""docs/examples/fastapi_app.py, run on Apache Kafka, Tansu and the fake cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from doc_examples import load_example

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

pytestmark = pytest.mark.broker


def test_the_lifespan_serves_requests_and_closes(aio_broker: Any) -> None:
    example = load_example("fastapi_app.py")
    topic = bc.unique("fastapi")
    aio_broker.create(topic, 3)
    group = {"session_timeout": 6.0, "heartbeat_interval": 0.2}  # a quick first join on Tansu
    result = asyncio.run(example.exercise(aio_broker.bootstrap, topic, **group))
    assert result["first"]["offset"] >= 0 and 0 <= result["first"]["partition"] < 3
    assert result["stats"]["read"] == 101  # the awaited event and the 100 sent in bulk


def test_the_module_runs_as_a_program() -> None:
    example = load_example("fastapi_app.py")
    asyncio.run(example.main())  # its own fake cluster, in the loop's own trio run
