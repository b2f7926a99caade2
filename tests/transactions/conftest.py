"""The brokers the transaction tests run on: Apache Kafka and pykaf's fake cluster.

Both return aborted-transaction lists in Fetch and hold the last stable
offset below open transactions (Tansu and the librdkafka mock do neither),
so read_committed can be checked record for record on each. A test reaches
what only one of them has through ``target.fake`` or ``target.kafka``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from trio.testing import MockClock
from txn_target import TxnTarget

from pykaf.testing import open_fake_cluster


@pytest.fixture(params=["kafka", "kafka-tv1", "fake", "fake-tv2"])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[TxnTarget]:
    """The session's one-node Kafka (transactions V2, Kafka 4.3.1's default, unless
    ``PYKAF_KAFKA_FEATURES`` says otherwise), one formatted on transactions V1, or a
    fresh fake cluster of three brokers, on transactions V1 or V2."""
    if request.param.startswith("kafka"):
        name = "kafka_cluster" if request.param == "kafka" else "kafka_cluster_tv1"
        kafka = request.getfixturevalue(name)
        yield TxnTarget("kafka", kafka.bootstrap, kafka=kafka)
        return
    version = 2 if request.param == "fake-tv2" else 1
    async with open_fake_cluster(3, transaction_version=version) as fake:
        yield TxnTarget("fake", fake.bootstrap, fake=fake)
        failed = list(fake.handler_errors)
    assert not failed, f"the fake cluster's request handlers raised: {failed!r}"


@pytest.fixture
def fake_clock(request: pytest.FixtureRequest) -> MockClock | None:
    """An autojumping MockClock for a test on the fake cluster, else None (the real clock).

    The fake runs in the test's own trio run, so its timers and the client's
    move on the same mock clock; Apache Kafka answers over sockets in real
    time, which a mock clock would jump past. A test takes this fixture as an
    argument (pytest-trio runs the test on a clock among its arguments).
    """
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and str(callspec.params.get("target")).startswith("fake"):
        return MockClock(autojump_threshold=0)
    return None
