"""``pykaf.sync.ConsumerGroup(auto_mark=False)`` and ``mark``: only marked offsets are committed."""

from __future__ import annotations

import time
from typing import Any

import pytest

import pykaf.sync
from pykaf import errors
from pykaf.testing import FakeClusterThread

T = 30.0
GROUP: dict[str, Any] = {
    "fetch_max_wait": 0.05,
    "heartbeat_interval": 0.2,
    "session_timeout": 6.0,
    "rebalance_timeout": 4.0,
    "auto_commit_interval": 0.2,
}


def _poll_n(group: pykaf.sync.ConsumerGroup, n: int) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + T
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records"
        record = group.poll(timeout=0.5)
        if record is not None:
            out.append(record)
    return out


def _committed(fake: FakeClusterThread, group_id: str) -> int:
    with pykaf.sync.Admin(fake.bootstrap) as admin:
        found = admin.list_group_offsets(group_id, [("t", 0)])
    meta = found.get(("t", 0))
    return -1 if meta is None else meta.offset


@pytest.fixture
def fake() -> Any:
    with FakeClusterThread(1) as cluster:
        cluster.create_topic("t", 1)
        with pykaf.sync.Producer(cluster.bootstrap, linger=0.002) as producer:
            producer.send_many("t", [b"%d" % i for i in range(10)], partition=0)
        yield cluster


def test_without_auto_mark_commits_carry_only_the_marked_offsets(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(
        fake.bootstrap, "manual", ["t"], auto_mark=False, auto_commit=False, **GROUP
    ) as group:
        assert [r.offset for r in _poll_n(group, 6)] == list(range(6))
        group.mark("t", 0, 3)
        group.mark("t", 0, 2)  # marks only move forward
        group.commit(timeout=T)
        assert _committed(fake, "manual") == 3
        with pytest.raises(errors.ConfigError):
            group.mark("t", 1, 1)  # not assigned: the topic has one partition
    # Closing commits the mark, not what was handed out.
    assert _committed(fake, "manual") == 3


def test_without_auto_mark_auto_commit_commits_the_marks(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(fake.bootstrap, "auto", ["t"], auto_mark=False, **GROUP) as group:
        _poll_n(group, 8)
        group.poll(timeout=0.3)  # asking for more marks nothing without auto_mark
        group.mark("t", 0, 5)
        deadline = time.monotonic() + T
        while _committed(fake, "auto") != 5:  # the next auto-commit takes it
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert _committed(fake, "auto") == 5


def test_with_auto_mark_what_was_handed_out_is_committed(fake: Any) -> None:
    with pykaf.sync.ConsumerGroup(fake.bootstrap, "default", ["t"], **GROUP) as group:
        _poll_n(group, 4)
        group.commit(timeout=T)
        assert _committed(fake, "default") == 4
