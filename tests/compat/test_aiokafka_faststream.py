"""A FastStream Kafka app (publisher and subscribers) running on pykaf through the aiokafka shim.

FastStream imports ``aiokafka`` itself, so the app calls
``pykaf.compat.aiokafka.install()`` first; it runs in a process of its own,
since the other tests import the real aiokafka.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faststream")
bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

APP = """
import asyncio
import sys

from pykaf.compat import aiokafka as shim

shim.install()  # before FastStream imports aiokafka

import aiokafka
from faststream.kafka import KafkaBroker

assert aiokafka is shim
bootstrap, topic_in, topic_out, group = sys.argv[1:5]
broker = KafkaBroker(bootstrap)
results = asyncio.Queue()


@broker.subscriber(topic_in, group_id=group, auto_offset_reset="earliest")
@broker.publisher(topic_out)
async def shout(text: str) -> str:
    return text.upper()


@broker.subscriber(topic_out, group_id=group + "-out", auto_offset_reset="earliest")
async def collect(text: str) -> None:
    await results.put(text)


async def main() -> None:
    async with broker:
        await broker.start()
        for word in ("hello", "pykaf"):
            await broker.publish(word, topic_in)
        got = [await asyncio.wait_for(results.get(), 60) for _ in range(2)]
    print("RESULT", sorted(got))


asyncio.run(main())
"""


@pytest.fixture(params=["fake", "tansu", "kafka"])
def any_broker(request: pytest.FixtureRequest) -> Any:
    """A fresh fake cluster, the session's Tansu, then the session's Apache Kafka."""
    return bc.broker_from(request, request.param)


def test_a_faststream_app_runs_on_pykaf(any_broker: Any, tmp_path: Path) -> None:
    topic_in, topic_out = bc.unique("fs-in"), bc.unique("fs-out")
    any_broker.create(topic_in, 1)
    any_broker.create(topic_out, 1)
    app = tmp_path / "app.py"
    app.write_text(APP)
    run = subprocess.run(
        [sys.executable, str(app), any_broker.bootstrap, topic_in, topic_out, bc.unique("fs")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "RESULT ['HELLO', 'PYKAF']" in run.stdout
    assert "Traceback" not in run.stderr
