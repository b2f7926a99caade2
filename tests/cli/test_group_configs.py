"""``pykaf groups config`` and ``pykaf share consume --from`` (a new share group's start).

On Apache Kafka (4.3: group configs and share groups) and the fake cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_cli import Run, pykaf_command, unique

bc = pytest.importorskip("broker_clients", reason="needs confluent-kafka")

CLI_PAGE = Path(__file__).parents[2] / "docs" / "cli.md"
RESET = "share.auto.offset.reset"


@pytest.fixture(params=["kafka", "fake"])
def cli(request: pytest.FixtureRequest) -> tuple[Any, Run]:
    """A broker with group configs and share groups, and ``python -m pykaf ARGS`` against it."""
    broker = bc.broker_from(request, request.param)
    return broker, partial(pykaf_command, bootstrap=broker.bootstrap)


def _shown(run: Run, group: str) -> dict[str, Any]:
    return dict(json.loads(run("groups", "config", group, "--json").stdout))


def test_groups_config_shows_and_changes_a_groups_configs(cli: tuple[Any, Run]) -> None:
    _, run = cli
    group = unique("cli-cfg-g")
    # a group that does not exist yet has configs: the broker's
    table = run("groups", "config", group).stdout.splitlines()
    assert table[0].split() == ["config", "value", "source"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert rows[RESET][0] == "latest" and rows[RESET][1] != "group"
    altered = run(
        "groups", "config", group, "--set", f"{RESET}=earliest",
        "--set", "share.record.lock.duration.ms=15000",
    )  # fmt: skip
    assert altered.stdout.strip() == f"altered group {group} (2 configs)"
    shown = _shown(run, group)
    assert (shown[RESET]["value"], shown[RESET]["source"]) == ("earliest", "group")
    assert shown["share.record.lock.duration.ms"]["value"] == "15000"
    run("groups", "config", group, "--delete", "share.record.lock.duration.ms")
    shown = _shown(run, group)
    assert shown["share.record.lock.duration.ms"]["source"] != "group"
    assert shown[RESET]["value"] == "earliest"
    checked = run("groups", "config", group, "--set", f"{RESET}=latest", "--validate-only")
    assert checked.stdout.strip() == f"valid group {group} (1 config)"
    assert _shown(run, group)[RESET]["value"] == "earliest"
    bad = run("groups", "config", group, "--set", f"{RESET}=sideways", check=False)
    assert bad.returncode == 1 and "InvalidConfigurationError" in bad.stderr
    alone = run("groups", "config", group, "--validate-only", check=False)
    assert alone.returncode == 2 and "usage: pykaf groups config" in alone.stderr


def test_share_consume_from_the_beginning_reads_what_was_produced(cli: tuple[Any, Run]) -> None:
    broker, run = cli
    topic = unique("cli-share")
    broker.create(topic, 1)
    run("produce", topic, stdin="1\n2\n3\n")
    fast = ("-X", "fetch_max_wait=0.2")
    # without --from a new group starts at the end: nothing of what is there
    latest = run("share", "consume", topic, "-g", unique("cli-sg"), "-t", "2", *fast)
    assert latest.stdout == "" and "consumed 0 records" in latest.stderr
    group = unique("cli-sg")
    read = run("share", "consume", topic, "-g", group, "--from", "beginning", "-n", "3", *fast)
    assert read.stdout.split() == ["1", "2", "3"]
    assert read.stderr == "consumed 3 records\n"
    assert _shown(run, group)[RESET]["value"] == "earliest"
    # the group exists now: --from leaves its config as it is, and says so
    kept = run("share", "consume", topic, "-g", group, "--from", "end", "-t", "1", *fast)
    assert kept.stdout == "" and kept.stderr.splitlines()[0] == (
        f"pykaf: share group {group!r} exists: its {RESET} stays earliest (--from is for a "
        f"new group; pykaf groups config {group} --set {RESET}=latest changes it)"
    )
    assert _shown(run, group)[RESET]["value"] == "earliest"
    same = run("share", "consume", topic, "-g", group, "--from", "beginning", "-t", "1", *fast)
    assert same.stderr == "consumed 0 records\n"  # nothing to warn about
    # --from end on a new group: latest, set for the group
    ended = unique("cli-sg")
    run("share", "consume", topic, "-g", ended, "--from", "end", "-t", "1", *fast)
    assert _shown(run, ended)[RESET]["source"] == "group"


def _console_example(page: str, marker: str) -> list[tuple[str, list[str]]]:
    """The ```console block of ``page`` that holds ``marker``: each ``$`` command, its output."""
    (block,) = [b for b in re.findall(r"```console\n(.*?)```", page, re.DOTALL) if marker in b]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_the_share_example_of_the_cli_page_prints_records(kafka_broker: Any) -> None:
    """docs/cli.md's share example, as written (a topic and group of this run), on Kafka."""
    steps = _console_example(CLI_PAGE.read_text(), "pykaf share consume")
    names = {"jobs": unique("cli-jobs"), "workers": unique("cli-workers")}

    def ours(text: str) -> str:
        return re.sub(r"\b(jobs|workers)\b", lambda m: names[m.group(1)], text)

    env = {**os.environ, "PYKAF_BOOTSTRAP_SERVERS": kafka_broker.bootstrap}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    assert any("--from beginning" in command for command, _ in steps)
    for command, shown in steps:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", ours(command)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, (command, done.stdout)
        got = [line.split() for line in done.stdout.splitlines()]
        want = [ours(line).split() for line in shown]
        # the one figure that changes from run to run: produce's seconds
        for line in got:
            if line[:1] == ["produced"]:
                line[-2] = "0.05"
        assert got == want, (command, done.stdout)
