"""A FastAPI service on Kafka with ``pykaf.aio`` (see docs/asyncio.md).

The app's lifespan opens one producer and one consumer group member for the
app's life, on the server's own asyncio loop (no thread per call):

* ``POST /events`` sends the request body and answers with where it landed
  (an awaited ``send``: the acknowledgement);
* ``POST /events/bulk`` buffers each line of the body with ``send_nowait``
  (no await per record) and answers at once;
* a background task reads the topic as a member of a group and counts what
  it read, served by ``GET /stats``.

Leaving the lifespan cancels the reader and delivers what is buffered
before the server stops. Serve it with any ASGI server, e.g.
``KAFKA=localhost:9092 uvicorn fastapi_app:app``; or run this file, which
drives the lifespan and a few requests in-process (httpx's ASGI transport,
no server) against a fake cluster on loopback::

    python docs/examples/fastapi_app.py

``tests/aio/test_fastapi_example.py`` runs it on Apache Kafka, Tansu and the
fake cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import FastAPI, Request

import pykaf.aio


class Counter:
    """What the background reader has seen."""

    def __init__(self) -> None:
        self.records = 0
        self.last: bytes | None = None


async def read_forever(group: pykaf.aio.ConsumerGroup, counter: Counter) -> None:
    """Count the topic's records as a group member (offsets committed as it goes)."""
    async for record in group:
        counter.records += 1
        counter.last = record.value


def create_app(
    bootstrap: str, topic: str, group_id: str = "fastapi-example", **group_config: Any
) -> FastAPI:
    """The app: one producer and one group member, opened and closed by the lifespan.

    ``group_config``: options of the group member (``session_timeout``, ...).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            pykaf.aio.open_producer(bootstrap, linger=0.005) as producer,
            pykaf.aio.open_consumer_group(bootstrap, group_id, [topic], **group_config) as group,
        ):
            counter = Counter()
            reader = asyncio.create_task(read_forever(group, counter))
            app.state.producer, app.state.counter = producer, counter
            try:
                yield
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

    app = FastAPI(lifespan=lifespan)

    @app.post("/events")
    async def post_event(request: Request) -> dict[str, int]:
        producer: pykaf.aio.Producer = request.app.state.producer
        metadata = await producer.send(topic, await request.body())
        return {"partition": metadata.partition, "offset": metadata.offset}

    @app.post("/events/bulk")
    async def post_events(request: Request) -> dict[str, int]:
        producer: pykaf.aio.Producer = request.app.state.producer
        lines = (await request.body()).splitlines()
        for line in lines:
            producer.send_nowait(topic, line)
        return {"buffered": len(lines)}

    @app.get("/stats")
    async def stats(request: Request) -> dict[str, Any]:
        counter: Counter = request.app.state.counter
        last = None if counter.last is None else counter.last.decode()
        return {"read": counter.records, "last": last}

    return app


async def exercise(bootstrap: str, topic: str, **group_config: Any) -> dict[str, Any]:
    """Start the app, post one event and 100 in bulk, wait until the reader saw them all."""
    app = create_app(bootstrap, topic, **group_config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            one = (await http.post("/events", content=b"hello")).json()
            bulk = (
                await http.post("/events/bulk", content=b"\n".join(b"e%d" % i for i in range(100)))
            ).json()
            assert bulk == {"buffered": 100}
            for _ in range(600):
                seen = (await http.get("/stats")).json()
                if seen["read"] >= 101:
                    break
                await asyncio.sleep(0.05)
            return {"first": one, "stats": seen}


async def main() -> None:
    """Run the in-process exercise against $KAFKA, or a fake cluster of its own."""
    bootstrap = os.environ.get("KAFKA")
    if bootstrap is not None:
        print(await exercise(bootstrap, "events"))
        return
    from pykaf.aio.testing import open_fake_cluster

    async with open_fake_cluster() as cluster:
        cluster.create_topic("events", 3)
        print(await exercise(cluster.bootstrap, "events"))


app = create_app(os.environ.get("KAFKA", "localhost:9092"), "events")

if __name__ == "__main__":
    asyncio.run(main())
