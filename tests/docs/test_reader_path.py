"""A new user's first hour: the docs run in the order a reader meets them, on ONE cluster.

``test_doc_examples`` runs each example on a cluster emptied for it, so it
cannot see an example that only works alone (a topic created again, records
of an earlier example read back, a first CLI command that needs a topic made
beforehand). This test plays the reader: every example of
``docs/quickstart.md``, then ``docs/sync.md``, then the commands of
``docs/cli.md`` a newcomer types first, then ``docs/spark.md``'s first
example, one after another against one cluster (Apache Kafka, and the fake
cluster the quickstart serves), and checks that each prints what its page
says it prints.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from md_examples import DOCS, Block, blocks_of, environment, run_program

from pykaf.testing import FakeClusterThread

TIMEOUT = 120.0  # seconds for one program or command
SPARK_TIMEOUT = 300.0

# What each example prints, as its page says: a check per ```python block, in page order.
Check = Callable[[list[str]], None]


def _values(lines: list[str]) -> list[bytes]:
    """The last field of each line, a printed bytes literal (``b'hi 0'``)."""
    out = []
    for line in lines:
        literal = line[line.index("b'") :] if "b'" in line else line[line.index('b"') :]
        out.append(ast.literal_eval(literal))
    return out


def _produced(lines: list[str]) -> None:
    assert len(lines) == 1 and re.fullmatch(r"written to partition \d at offset \d+", lines[0])


def _ten_of_this_run(lines: list[str]) -> None:
    # "it prints those ten, whatever earlier runs left in the partition"
    assert _values(lines) == [b"hi %d" % i for i in range(10)]
    offsets = [int(line.split()[0]) for line in lines]
    assert offsets == list(range(offsets[0], offsets[0] + 10))


def _thirty_visits(lines: list[str]) -> None:
    # "every visit the group has not read yet: the 30 it wrote"
    assert sorted(_values(lines)) == sorted(b"visit %d" % i for i in range(30))


def _lines_script(lines: list[str]) -> None:
    assert lines[0] == "100 lines acknowledged"
    assert lines[1:] == [f"{i} line {i}" for i in range(100)]


def _one_send(lines: list[str]) -> None:
    assert len(lines) == 1 and re.fullmatch(r"\d \d+", lines[0])


def _sent_without_failures(lines: list[str]) -> None:
    assert lines == ["1000 sent, 0 failed"]


def _produced_record_by_record(lines: list[str]) -> None:
    # flush() waited for all: nothing left, nothing undelivered, nothing failed
    assert lines == ["0 left, 0 undelivered, 0 failed"]


def _assigned_then_sought(lines: list[str]) -> None:
    # partition 0 from the oldest (100), 1 from offset 60 (40), 2 from now on (none);
    # then after seek(0, 50) and pause(1): partition 0 from 50.
    *records, last = lines
    by_partition = [int(line.split()[0]) for line in records]
    assert sorted(by_partition) == [0] * 100 + [1] * 40
    assert last == "50 records from offset 50"


def _crates_as_columns(lines: list[str]) -> None:
    # each batch: "crates P N records up to END", then its first value
    counts = {0: 0, 1: 0}
    for header, first in zip(lines[::2], lines[1::2], strict=True):
        topic, partition, n, *_, end = header.split()
        assert topic == "crates" and int(end) == counts[int(partition)] + int(n)
        assert first == f"first value: b'crate {counts[int(partition)]}'"
        counts[int(partition)] += int(n)
    assert counts == {0: 500, 1: 500}


def _billing(lines: list[str]) -> None:
    assert all(line.startswith("billing ") for line in lines)
    assert sorted(_values(lines)) == sorted(b"invoice %d" % i for i in range(30))


PAGES: dict[str, list[Check]] = {
    "quickstart.md": [_produced, _ten_of_this_run, _thirty_visits, _lines_script],
    "sync.md": [
        _one_send,
        _sent_without_failures,
        _produced_record_by_record,
        _assigned_then_sought,
        _crates_as_columns,
        _billing,
    ],
}


def _cli_produced(out: str, err: str) -> None:
    assert "produced 1,000 records to events" in err  # the topic made by sync.md


def _cli_ten(out: str, err: str) -> None:
    assert len(out.splitlines()) == 10


def _cli_topics(out: str, err: str) -> None:
    assert {"greetings", "visits", "events", "invoices"} <= set(out.split())


def _cli_described(out: str, err: str) -> None:
    assert len(out.splitlines()) == 4  # a header and the 3 partitions sync.md made


def _cli_groups(out: str, err: str) -> None:
    assert {"billing", "counters"} <= set(out.split())


def _cli_lag(out: str, err: str) -> None:
    *rows, total = out.splitlines()[1:]
    assert rows and {row.split()[0] for row in rows} == {"invoices"}
    assert total.split() == ["total", "lag", "0"]  # sync.md's group read all 30


# docs/cli.md's commands a newcomer types first, each checked against its
# (stdout, stderr). Each must appear on the page as written.
CLI: list[tuple[str, Callable[[str, str], None]]] = [
    ("seq 1000 | pykaf produce events", _cli_produced),
    ("pykaf consume events --from beginning -n 10", _cli_ten),
    ("pykaf topics list", _cli_topics),
    ("pykaf topics describe events", _cli_described),
    ("pykaf groups list", _cli_groups),
    ("pykaf groups lag billing", _cli_lag),
]


@pytest.fixture(params=["kafka", "fake"])
def cluster(request: pytest.FixtureRequest) -> Iterator[str]:
    """One cluster for the whole path: the session's Kafka emptied, or a fake one.

    The fake is served as the quickstart serves it (one broker).
    """
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_cluster")
        kafka.reset()
        yield kafka.bootstrap
        return
    with FakeClusterThread(1) as fake:  # python -m pykaf.testing --brokers 1
        yield fake.bootstrap
        errors = list(fake.cluster.handler_errors)
    assert not errors, f"the fake cluster's request handlers raised: {errors!r}"


def _stdout(output: str) -> list[str]:
    text = output.split("--- stdout ---\n", 1)[1].split("\n--- stderr ---", 1)[0]
    return [line for line in text.splitlines() if line.strip()]


def _run_block(block: Block, bootstrap: str, cwd: Path, *, spark: bool = False) -> list[str]:
    path = cwd / block.file_name()
    path.write_text(block.program(bootstrap))
    outcome = run_program(path, cwd, SPARK_TIMEOUT if spark else TIMEOUT, spark=spark)
    if outcome.failure:
        pytest.fail(
            f"docs/{block.id}, run after the examples before it on one cluster: "
            f"{outcome.failure}\n{outcome.output}",
            pytrace=False,
        )
    return _stdout(outcome.output)


def _page_blocks(page: str) -> list[Block]:
    blocks = blocks_of(page, (DOCS / page).read_text())
    assert all(b.mode != "skip" and not b.error for b in blocks), page
    return blocks


def _cli_commands() -> str:
    """The text of docs/cli.md's ```sh blocks."""
    return "\n".join(re.findall(r"```sh\n(.*?)```", (DOCS / "cli.md").read_text(), re.DOTALL))


def test_the_reader_path_names_every_example_it_checks() -> None:
    """A page gaining, losing or reordering an example must update the checks above."""
    for page, checks in PAGES.items():
        assert len(_page_blocks(page)) == len(checks), page
    shown = _cli_commands()
    for command, _check in CLI:
        assert re.search(rf"^{re.escape(command)}(\s|$)", shown, re.MULTILINE), command


@pytest.mark.slow
def test_the_docs_in_the_order_a_reader_runs_them(
    cluster: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cluster_kind = request.node.callspec.params["cluster"]
    for page, checks in PAGES.items():
        for block, check in zip(_page_blocks(page), checks, strict=True):
            lines = _run_block(block, cluster, tmp_path)
            try:
                check(lines)
            except AssertionError as exc:
                pytest.fail(f"docs/{block.id} printed what its page does not say: {exc}\n{lines}")

    env = environment()
    env["PYKAF_BOOTSTRAP_SERVERS"] = cluster
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    for command, check_command in CLI:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"docs/cli.md: `{command}` exited {done.returncode}:\n{done.stderr}")
        try:
            check_command(done.stdout, done.stderr)
        except AssertionError:
            pytest.fail(f"docs/cli.md: `{command}` printed\n{done.stdout}\n{done.stderr}")

    if cluster_kind == "fake":
        return  # Spark's first example runs on Kafka only: a JVM start is 20 s of the suite
    if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
        return  # the Spark page's example needs pykaf[spark] and Java
    spark_page = blocks_of("spark.md", (DOCS / "spark.md").read_text())
    reading = next(b for b in spark_page if b.uses_spark)
    lines = _run_block(reading, cluster, tmp_path, spark=True)
    assert "1000 records" in lines, lines
