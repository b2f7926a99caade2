"""The one retry backoff: its formula, and that no loop in the library waits any other way."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
import trio
import trio.testing

import pykaf
from pykaf._cluster.backoff import JITTER, Backoff, Retries, delay
from pykaf._config import ClientConfig
from pykaf._producer.config import ProducerConfig

PACKAGE = Path(pykaf.__file__).resolve().parent

#: Every trio.sleep in the library that is not a retry's wait, with why.
#: A new one fails the test below: wait through pykaf._cluster.backoff, or add
#: it here with its reason.
TIMERS = {
    ("_cluster/backoff.py", "wait"): "the policy itself",
    ("_cluster/pool.py", "get"): "the reconnect wait, computed by backoff.delay",
    ("_cluster/client.py", "_refresh_loop"): "metadata_max_age, a timer",
    ("_cluster/telemetry.py", "_loop"): "the broker's push interval (KIP-714), a timer",
    ("_group/group.py", "_note_initial_offset"): "polls a claim's first position, bounded",
    ("_group/classic_member.py", "_heartbeat_loop"): "heartbeat_interval, a timer",
    ("_group/classic_member.py", "_watch_partitions"): "partition_watch_interval, a timer",
    ("_group/group.py", "_auto_commit_loop"): "auto_commit_interval, a timer",
    ("_output.py", "run"): "the progress line's interval, a timer",
    ("_sync/consumer.py", "sync_marks"): "half the auto_commit_interval, a timer",
}

#: Modules that may read retry_backoff / retry_backoff_max: the option tables and the policy.
OPTION_READERS = {"_config.py", "_producer/config.py", "_cluster/backoff.py"}


def _library_modules() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if "testing" not in p.relative_to(PACKAGE).parts
        and "compat" not in p.relative_to(PACKAGE).parts
        and p.relative_to(PACKAGE).parts[0] != "spark"
    ]


def _sleeps(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    """(enclosing function, call) for every ``trio.sleep(x)`` but ``trio.sleep(0)``."""
    found: list[tuple[str, ast.Call]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = func
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "sleep"
                and isinstance(child.func.value, ast.Name)
                and child.func.value.id == "trio"
                and not (
                    child.args
                    and isinstance(child.args[0], ast.Constant)
                    and child.args[0].value == 0
                )
            ):
                found.append((name, child))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_no_sleep_but_the_policy_and_known_timers() -> None:
    seen: set[tuple[str, str]] = set()
    stray: list[str] = []
    for path in _library_modules():
        rel = path.relative_to(PACKAGE).as_posix()
        for func, call in _sleeps(ast.parse(path.read_text())):
            seen.add((rel, func))
            if (rel, func) not in TIMERS:
                stray.append(f"{rel}:{call.lineno} in {func}: {ast.unparse(call)}")
    assert not stray, "wait through pykaf._cluster.backoff (or list a timer in TIMERS):\n" + (
        "\n".join(stray)
    )
    assert set(TIMERS) <= seen, f"TIMERS lists sleeps that are gone: {set(TIMERS) - seen}"


def test_retry_backoff_is_read_only_by_the_policy() -> None:
    readers: list[str] = []
    for path in _library_modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in OPTION_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in {
                "retry_backoff",
                "retry_backoff_max",
            }:
                readers.append(f"{rel}:{node.lineno}: .{node.attr}")
    assert not readers, "a hand-written backoff; use Backoff.of(config):\n" + "\n".join(readers)


def test_the_formula() -> None:
    assert delay(0, 0.1, 1.0) == 0.0
    assert delay(-1, 0.1, 1.0) == 0.0
    assert delay(3, 0.0, 1.0) == 0.0
    assert delay(1, 0.1, 1.0, jitter=0) == pytest.approx(0.1)
    assert delay(2, 0.1, 1.0, jitter=0) == pytest.approx(0.2)
    assert delay(4, 0.1, 1.0, jitter=0) == pytest.approx(0.8)
    assert delay(5, 0.1, 1.0, jitter=0) == pytest.approx(1.0)
    assert delay(10_000, 0.1, 1.0, jitter=0) == pytest.approx(1.0)
    waits = [delay(3, 0.1, 1.0) for _ in range(2000)]
    assert min(waits) >= 0.4 * (1 - JITTER) and max(waits) <= 0.4 * (1 + JITTER)
    assert len(set(waits)) > 1000, "jitter: clients that failed together retry apart"


def test_policy_of_a_role_options() -> None:
    policy = Backoff.of(ProducerConfig(retry_backoff=0.05, retry_backoff_max=0.4))
    assert (policy.base, policy.cap) == (0.05, 0.4)
    # A cap below the base never shortens the first wait.
    policy = Backoff.of(ClientConfig(retry_backoff=2.0, retry_backoff_max=1.0))
    assert (policy.base, policy.cap) == (2.0, 2.0)


def test_every_client_role_has_the_cap() -> None:
    for cls in (pykaf.ConsumerConfig, pykaf.GroupConfig, pykaf.ProducerConfig, ClientConfig):
        assert cls().retry_backoff_max == 1.0
    with pytest.raises(pykaf.errors.ConfigError, match="retry_backoff_max"):
        ClientConfig(retry_backoff_max=0)


async def test_retries_double_and_reset(autojump_clock: trio.testing.MockClock) -> None:
    retries = Retries(Backoff(0.1, 1.0))
    waited: list[float] = []
    for _ in range(6):
        start = trio.current_time()
        await retries.wait()
        waited.append(trio.current_time() - start)
    expected = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    for got, want in zip(waited, expected, strict=True):
        assert want * (1 - JITTER) - 1e-9 <= got <= want * (1 + JITTER) + 1e-9
    retries.reset()
    start = trio.current_time()
    await retries.wait()
    assert trio.current_time() - start <= 0.1 * (1 + JITTER) + 1e-9


async def test_wait_until(autojump_clock: trio.testing.MockClock) -> None:
    from pykaf._cluster.request import wait_until

    asked: list[float] = []

    async def third_time() -> bool:
        asked.append(trio.current_time())
        return len(asked) == 3

    assert await wait_until(third_time, 60, Backoff(1.0, 8.0))
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert 1.0 * (1 - JITTER) <= gaps[0] <= 1.0 * (1 + JITTER)
    assert 2.0 * (1 - JITTER) <= gaps[1] <= 2.0 * (1 + JITTER)

    asked.clear()

    async def never() -> bool:
        asked.append(trio.current_time())
        return False

    start = trio.current_time()
    assert not await wait_until(never, 10, Backoff(1.0, 2.0))
    assert 10 <= asked[-1] - start <= 10 + 2.0 * (1 + JITTER)
    assert not await wait_until(never, 0, Backoff(1.0, 2.0))  # asked once all the same
