"""pykaf's trio API awaited from asyncio: a typed error that names what to use instead.

Without the check, asyncio code failed deep inside trio with
``AttributeError: 'RunContext' object has no attribute 'runner'``. Nothing
here reaches a broker: the check comes before any connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

import pykaf
from pykaf import errors, testing

NOWHERE = "127.0.0.1:1"  # nothing is ever connected to

OPENERS: list[tuple[str, Callable[[], AbstractAsyncContextManager[Any]]]] = [
    ("pykaf.open_client()", lambda: pykaf.open_client(NOWHERE)),
    ("pykaf.open_producer()", lambda: pykaf.open_producer(NOWHERE)),
    ("pykaf.open_consumer()", lambda: pykaf.open_consumer(NOWHERE)),
    ("pykaf.open_consumer_group()", lambda: pykaf.open_consumer_group(NOWHERE, "g", ["t"])),
    ("pykaf.open_share_consumer()", lambda: pykaf.open_share_consumer(NOWHERE, "g", ["t"])),
    ("pykaf.open_admin()", lambda: pykaf.open_admin(NOWHERE)),
    ("pykaf.testing.open_fake_cluster()", lambda: testing.open_fake_cluster(1)),
    ("pykaf.testing.open_kafka_cluster()", lambda: testing.open_kafka_cluster(1)),
]


@pytest.mark.parametrize(("name", "opener"), OPENERS, ids=[name for name, _ in OPENERS])
def test_an_opener_awaited_from_asyncio_names_pykaf_aio_and_pykaf_sync(
    name: str, opener: Callable[[], AbstractAsyncContextManager[Any]]
) -> None:
    async def main() -> None:
        async with opener():
            pytest.fail("opened outside trio")

    with pytest.raises(errors.WrongAsyncLibraryError) as info:
        asyncio.run(main())
    message = str(info.value)
    assert message.startswith(f"{name} runs on trio, but was called from asyncio")
    assert "pykaf.aio" in message and "pykaf.sync" in message
    # one class for every way of catching it
    assert isinstance(info.value, errors.PykafError) and isinstance(info.value, RuntimeError)


async def test_under_trio_the_check_lets_the_opener_run() -> None:
    """The same call under trio gets past the check: it fails connecting, as it should."""
    with pytest.raises(errors.KafkaConnectionError):
        async with pykaf.open_client(NOWHERE, connect_timeout=2.0, request_timeout=2.0):
            pytest.fail("connected to nothing")


@pytest.mark.parametrize(("name", "opener"), OPENERS[:6], ids=[name for name, _ in OPENERS[:6]])
def test_the_check_holds_beside_pykaf_aio(
    name: str, opener: Callable[[], AbstractAsyncContextManager[Any]], fake_cluster: Any
) -> None:
    """With pykaf.aio's trio run alive in the thread, asyncio code is still refused.

    The run is there (its token can be read from asyncio code on its thread),
    but the caller is no trio task.
    """
    import pykaf.aio

    async def main() -> None:
        async with pykaf.aio.open_client(fake_cluster.bootstrap), opener():
            pytest.fail("opened outside trio")

    with pytest.raises(errors.WrongAsyncLibraryError) as info:
        asyncio.run(main())
    assert str(info.value).startswith(f"{name} runs on trio, but was called from asyncio")
