"""Quiet by default: what the user asked for is logged at DEBUG, and nothing reaches stderr.

``scenario()`` does what an application does on purpose and pykaf used to
report as WARNINGs: a transaction aborted with open batches, a purge of
buffered and of in-flight records (with the epoch reset it causes), a purge
inside a transaction, and closes with records still buffered (an exception
leaving the producer's block, a transaction open at close); ``sync_scenario()``
does the same through ``pykaf.sync.Producer``. Run in a fresh
interpreter that configures no logging, it must print nothing on stderr;
run under ``caplog``, it must log nothing at WARNING or above.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeCluster, FakeClusterThread, open_fake_cluster

#: Records linger (5 s) unless flushed: batches stay open.
HELD: dict[str, Any] = {"linger": 5.0}


async def _in_flight(producer: pykaf.Producer) -> None:
    with trio.fail_after(5):
        while producer.statistics().in_flight == 0:
            await trio.sleep(0.005)


async def _open_batches(producer: pykaf.Producer, values: list[bytes], partitions: int) -> None:
    """``values`` in open batches (not parked for metadata, not in a staged run)."""
    await producer.send("t", b"warm-up", partition=0)  # the topic's partitions known
    for i, value in enumerate(values):
        producer.send_nowait("t", value, partition=i % partitions)
    producer.statistics()  # moves the staged runs into their batches


async def _abort_with_open_batches(cluster: FakeCluster) -> None:
    async with pykaf.open_producer(
        cluster.bootstrap, transactional_id="quiet-abort", **HELD
    ) as producer:
        producer.begin_transaction()
        await _open_batches(producer, [b"%d" % i for i in range(50)], 2)
        await producer.abort_transaction()


async def _purges(cluster: FakeCluster) -> None:
    async with pykaf.open_producer(cluster.bootstrap, idempotence=True, **HELD) as producer:
        await _open_batches(producer, [b"%d" % i for i in range(10)], 1)
        assert producer.purge() == 10  # buffered
    async with pykaf.open_producer(cluster.bootstrap, idempotence=True) as producer:
        cluster.set_rtt(1, 300)  # written, answered 0.3 s later
        producer.send_nowait("t", b"in flight", partition=0)
        await _in_flight(producer)
        assert producer.purge(in_queue=False) == 1  # in flight: the epoch is reset
        cluster.set_rtt(1, 0)
        await producer.send("t", b"after", partition=0)
        assert producer.statistics().epoch_bumps == 1
    async with pykaf.open_producer(
        cluster.bootstrap, transactional_id="quiet-purge", **HELD
    ) as producer:
        producer.begin_transaction()
        await _open_batches(producer, [b"x"], 1)
        assert producer.purge() == 1  # the transaction must abort now
        with pytest.raises(errors.TransactionAbortableError):
            await producer.commit_transaction()
        await producer.abort_transaction()


async def _closes(cluster: FakeCluster) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        async with pykaf.open_producer(cluster.bootstrap, **HELD) as producer:
            await _open_batches(producer, [b"never sent"], 1)
            raise KeyboardInterrupt  # leaves the block: closed without delivering
    async with pykaf.open_producer(
        cluster.bootstrap, transactional_id="quiet-close", **HELD
    ) as producer:
        producer.begin_transaction()
        await _open_batches(producer, [b"aborted on close"], 2)
    # closing never commits: the open transaction and its batch were aborted


async def scenario() -> None:
    """Abort, purges and closes on a one-broker fake cluster."""
    async with open_fake_cluster(1) as cluster:
        cluster.create_topic("t", 2)
        await _abort_with_open_batches(cluster)
        await _purges(cluster)
        await _closes(cluster)


def sync_scenario() -> None:
    """The same through pykaf.sync.Producer, on a fake cluster served from a thread."""
    with FakeClusterThread(1) as cluster:
        cluster.create_topic("t", 2)
        with pykaf.sync.Producer(cluster.bootstrap, transactional_id="s", **HELD) as producer:
            producer.begin_transaction()
            producer.send("t", b"warm-up", partition=0)
            for i in range(50):
                producer.produce("t", b"%d" % i, partition=i % 2)
            producer.abort_transaction()
            producer.begin_transaction()
            producer.produce("t", b"aborted on close", partition=1)
        with pykaf.sync.Producer(cluster.bootstrap, **HELD) as producer:
            producer.send("t", b"warm-up", partition=0)
            for i in range(20):
                producer.produce("t", b"%d" % i, partition=0)
            assert producer.purge() == 20
        with (
            contextlib.suppress(KeyboardInterrupt),
            pykaf.sync.Producer(cluster.bootstrap, **HELD) as producer,
        ):
            producer.send("t", b"warm-up", partition=0)
            producer.produce("t", b"never sent", partition=0)
            raise KeyboardInterrupt  # closed without delivering


def test_no_warning_is_logged_for_what_the_user_asked_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="pykaf"):
        trio.run(scenario)
        sync_scenario()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [f"{r.name} {r.levelname} {r.getMessage()}" for r in loud]
    said = [r.getMessage() for r in caplog.records if r.name == "pykaf.producer"]
    # the same events are still there for whoever looks at DEBUG
    assert any("failed: the transaction was aborted" in m for m in said), said
    assert any("failed: purged from the producer before it was sent" in m for m in said), said
    assert any("failed: purged while its Produce request was in flight" in m for m in said)
    assert any("resetting the idempotent producer's epoch after: purged" in m for m in said)
    assert any("must abort: purged" in m for m in said), said
    assert any("failed: the producer closed before the record was delivered" in m for m in said)


def test_nothing_reaches_stderr_without_logging_configured() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, __file__],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert done.stderr == ""


def test_the_package_logger_has_a_null_handler() -> None:
    handlers = logging.getLogger("pykaf").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


if __name__ == "__main__":  # the subprocess of test_nothing_reaches_stderr...
    trio.run(scenario)
    sync_scenario()
    print("done")
