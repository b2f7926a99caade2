"""Fixtures of the sync facade's producer tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pykaf.sync

T = 30.0  # closing what a test left open never hangs the run


@pytest.fixture
def producer_factory() -> Iterator[Any]:
    """Makes sync producers and closes whatever the test left open."""
    made: list[pykaf.sync.Producer] = []

    def make(bootstrap: str, **config: Any) -> pykaf.sync.Producer:
        config.setdefault("linger", 0.002)
        producer = pykaf.sync.Producer(bootstrap, **config)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        if not producer.closed:
            producer.close(timeout=T)
