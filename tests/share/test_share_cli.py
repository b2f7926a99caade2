"""``pykaf share``: consume as a share group member; list, describe, offsets, delete (Kafka)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import trio

import pykaf

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")
unique = bc.unique

pytestmark = pytest.mark.broker


def run(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": bootstrap}
    done = subprocess.run(
        [sys.executable, "-m", "pykaf", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"pykaf {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done


async def prepare(bootstrap: str, topic: str, group_id: str) -> None:
    async with pykaf.open_admin(bootstrap) as admin:
        await admin.alter_group_configs({group_id: {"share.auto.offset.reset": "earliest"}})
    async with pykaf.open_producer(bootstrap) as producer:
        await producer.send_batch(topic, [b"one", b"two", b"three"], partition=0)


def test_share_consume_release_then_accept(kafka_broker: Any) -> None:
    broker = kafka_broker
    topic, group_id = unique("share-cli"), unique("sg")
    broker.create(topic, 1)
    trio.run(prepare, broker.bootstrap, topic, group_id)
    fast = ["-X", "fetch_max_wait=0.2"]
    released = run(
        broker.bootstrap, "share", "consume", topic, "-g", group_id, "-n", "3", "--release", *fast
    )
    assert released.stdout.split() == ["one", "two", "three"]
    assert "consumed 3 records" in released.stderr
    again = run(
        broker.bootstrap,
        "share",
        "consume",
        topic,
        "-g",
        group_id,
        "-t",
        "5",
        "--format",
        "json",
        *fast,
    )
    docs = [json.loads(line) for line in again.stdout.splitlines()]
    # released: delivered again
    assert [(d["value"], d["delivery_count"]) for d in docs] == [
        ("one", 2),
        ("two", 2),
        ("three", 2),
    ]
    nothing = run(broker.bootstrap, "share", "consume", topic, "-g", group_id, "-t", "2", *fast)
    assert nothing.stdout == ""  # accepted by the run before
    assert group_id in run(broker.bootstrap, "share", "list").stdout.split()
    described = json.loads(run(broker.bootstrap, "share", "describe", group_id, "--json").stdout)
    assert described["group_protocol"] == "share" and described["members"] == []
    # `groups describe` knows a share group too
    general = run(broker.bootstrap, "groups", "describe", group_id).stdout.splitlines()
    assert general[0] == f"group {group_id}: Empty (share simple)", general
    table = run(broker.bootstrap, "share", "offsets", group_id).stdout.splitlines()
    assert table[0].split() == ["topic", "partition", "start", "offset", "lag"]
    assert table[1].split()[:2] == [topic, "0"]
    assert (
        run(broker.bootstrap, "share", "delete", group_id).stdout.strip() == f"deleted {group_id}"
    )
    assert group_id not in run(broker.bootstrap, "share", "list").stdout.split()
    missing = run(broker.bootstrap, "share", "describe", group_id, check=False)
    assert missing.returncode == 1 and "GroupIdNotFoundError" in missing.stderr
