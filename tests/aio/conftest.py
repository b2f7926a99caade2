"""Fixtures of the asyncio tests: the brokers, and asyncio loops of three kinds.

Asyncio's own loop, uvloop's, and one without ``add_reader`` (as asyncio's
proactor loop on Windows: ``aio_loops.NoWatchLoop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from aio_loops import NoWatchLoop

#: A test body: a coroutine function run by :func:`run`.
Main = Callable[[], Coroutine[Any, Any, Any]]


@pytest.fixture(params=["kafka", "tansu", "fake"])
def aio_broker(request: pytest.FixtureRequest) -> Any:
    """The session's Apache Kafka and Tansu, then a fresh fake cluster, as a ``Broker``."""
    broker_clients = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
    return broker_clients.broker_from(request, request.param)


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function: asyncio's own loop, uvloop's (skipped when it is missing), or
    a :class:`NoWatchLoop` ("no-add-reader")."""
    if kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.new_event_loop  # type: ignore[no-any-return]
    if kind == "no-add-reader":
        return NoWatchLoop
    return asyncio.new_event_loop


@pytest.fixture(params=["asyncio", "uvloop", "no-add-reader"])
def run(request: pytest.FixtureRequest) -> Callable[[Main], Any]:
    """Runs a coroutine function to its end in a new loop: asyncio's, uvloop's, then one
    without ``add_reader`` (:class:`NoWatchLoop`: trio reads the connections)."""
    factory = loop_factory(request.param)

    def run_main(main: Main) -> Any:
        loop = factory()
        try:
            return loop.run_until_complete(main())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    return run_main
