"""Find the ```python blocks of the Markdown pages in docs/ and run them as programs.

The convention (also in docs/testing.md, "Docs examples"):

- A fenced block whose info string is ``python`` is a complete program. Its
  test replaces every ``localhost:9092`` in it with the bootstrap address of a
  broker started for that block alone, runs it with this interpreter in a
  temporary directory, and fails if it exits non-zero or runs past a timeout.
- The broker is Apache Kafka (the session's one-node cluster, emptied of
  topics, groups and ACLs before each block) unless the previous non-blank
  line before the fence is ``<!-- doc-example: fake -->`` (pykaf's in-memory
  fake cluster, 3 brokers, of the block's own) or ``<!-- doc-example: tansu -->``
  (a Tansu broker of the block's own).
- ``<!-- doc-example: skip REASON -->`` on that line means the block is not
  run; the reason is required.
- A block that imports ``pyspark`` or ``pykaf.spark`` runs with the other
  such blocks in one Python process, one after another (the JVM starts once),
  in tests marked ``spark`` and ``slow``.
- Fragments that are not programs take another fence language (``text``,
  ``sh``, ``pycon``); those are never run.
- A malformed or unknown directive, a directive not right before a
  ```python fence, and an indented ```python fence (MkDocs shows none inside
  a list item) are errors.

Markdown is parsed with markdown-it-py (CommonMark) rather than matched with
patterns. A program is written to a file padded with blank lines so that the
line numbers of a traceback are the page's own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PLACEHOLDER = "localhost:9092"
MODES = ("kafka", "tansu", "fake", "skip")
DIRECTIVE = re.compile(r"^<!--\s*doc-example:(?P<body>.*?)-->$")
MENTION = "doc-example"
USES_SPARK = re.compile(r"^\s*(?:from|import)\s+(?:pyspark|pykaf\.spark)\b", re.MULTILINE)
OUTPUT_TAIL = 6000  # characters of a failed program's output quoted in the failure


@dataclasses.dataclass(frozen=True)
class Block:
    """One ```python block of a page and how its test runs it.

    Attributes:
        page: the page's path relative to docs/ (``"sync.md"``).
        line: the 1-based line of the opening fence.
        code: the block's text.
        mode: ``"kafka"``, ``"tansu"``, ``"fake"`` or ``"skip"``.
        reason: why a skipped block is skipped.
        error: what is wrong with the block's directive (the test fails with it).
    """

    page: str
    line: int
    code: str
    mode: str = "kafka"
    reason: str = ""
    error: str = ""

    @property
    def id(self) -> str:
        """The test id: ``page:line``."""
        return f"{self.page}:{self.line}"

    @property
    def uses_spark(self) -> bool:
        """Whether the program imports pyspark (it then runs with the other Spark blocks)."""
        return bool(USES_SPARK.search(self.code))

    def program(self, bootstrap: str) -> str:
        """The program to run: the placeholder replaced, padded to keep the page's line numbers."""
        return "\n" * self.line + self.code.replace(PLACEHOLDER, bootstrap)

    def file_name(self) -> str:
        """A file name that says where the program comes from."""
        stem = re.sub(r"\W", "_", self.page.removesuffix(".md"))
        return f"{stem}_md_line_{self.line}.py"


def parse_directive(comment: str) -> tuple[str, str, str]:
    """``(mode, reason, error)`` for an HTML comment that mentions ``doc-example``.

    A comment that is not a well-formed directive comes back as an error, so
    a typo cannot silently turn a directive off.
    """
    text = comment.strip()
    match = DIRECTIVE.match(text)
    if match is None:
        return "kafka", "", f"malformed directive {text!r}: write <!-- doc-example: MODE -->"
    words = match.group("body").split(maxsplit=1)
    mode = words[0] if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if mode in ("fake", "tansu") and not rest:
        return mode, "", ""
    if mode == "skip":
        if not rest:
            return "skip", "", f"{text!r}: a skipped example needs a reason"
        return "skip", rest, ""
    return (
        "kafka",
        "",
        f"unknown directive {text!r}: the modes are 'fake', 'tansu' and 'skip REASON'",
    )


@dataclasses.dataclass(frozen=True)
class _Page:
    """A page's ```python fences and its directive comments, by line (0-based)."""

    fences: list[tuple[int, str]]  # (line of the opening fence, code)
    directives: dict[int, str]  # last line of a directive comment -> the comment
    lines: list[str]

    def line_before(self, index: int) -> int:
        """The previous non-blank line before line ``index`` (-1 if none)."""
        for i in range(index - 1, -1, -1):
            if self.lines[i].strip():
                return i
        return -1


def _parse(text: str) -> _Page:
    tokens = MarkdownIt("commonmark").parse(text)
    fences = []
    directives = {}
    for token in tokens:
        if token.map is None:
            continue
        if token.type == "fence" and token.info.split()[:1] == ["python"]:
            fences.append((token.map[0], token.content))
        elif token.type == "html_block" and MENTION in token.content:
            directives[token.map[1] - 1] = token.content
    return _Page(fences, directives, text.splitlines())


def blocks_of(page: str, text: str) -> list[Block]:
    """The ```python blocks of one page with their directives.

    A block's directive is an HTML comment on the previous non-blank line
    before its fence (Markdown HTML blocks: a comment in a fence, or inline
    in a paragraph, is no directive).
    """
    parsed = _parse(text)
    out = []
    for index, code in parsed.fences:
        comment = parsed.directives.get(parsed.line_before(index))
        mode, reason, error = parse_directive(comment) if comment else ("kafka", "", "")
        if parsed.lines[index][:1].isspace():
            # Python-Markdown (MkDocs) sees no fence in a list item: the site
            # would show the program as a paragraph.
            error = "an indented fence (in a list?) is not code on the site: start it at column 0"
        out.append(Block(page, index + 1, code, mode, reason, error))
    return out


def stray_directives(page: str, text: str) -> list[str]:
    """Directive comments that do not stand right before a ```python fence (a mistake)."""
    parsed = _parse(text)
    attached = {parsed.line_before(index) for index, _code in parsed.fences}
    return [
        f"{page}:{line + 1}: {comment.strip()!r} is not right before a ```python fence"
        for line, comment in sorted(parsed.directives.items())
        if line not in attached
    ]


def pages(docs: Path = DOCS) -> list[Path]:
    """Every Markdown page of docs/, sorted."""
    return sorted(docs.rglob("*.md"))


def collect(docs: Path = DOCS) -> list[Block]:
    """Every ```python block of every page."""
    out = []
    for path in pages(docs):
        out.extend(blocks_of(path.relative_to(docs).as_posix(), path.read_text()))
    return out


def readme_blocks(readme: Path = README) -> list[Block]:
    """The ```python blocks of README.md, named ``../README.md`` (relative to docs/)."""
    return blocks_of("../README.md", readme.read_text())


def environment(*, spark: bool = False) -> dict[str, str]:
    """The programs' environment: the checkout importable; for Spark, this interpreter's workers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if spark:
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        # The quick-start JVM flags local_spark_session uses, for any SparkSession.
        env["JAVA_TOOL_OPTIONS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    return env


def _tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "...\n" + text[-OUTPUT_TAIL:]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a program ended: ``failure`` is empty when it succeeded."""

    failure: str
    output: str


def _run_python(args: list[str], cwd: Path, timeout: float, spark: bool) -> tuple[int | None, str]:
    """Run ``python ARGS``: its exit status (None when it timed out) and its output's tails."""
    try:
        proc = subprocess.run(
            [sys.executable, *args],
            cwd=cwd,
            env=environment(spark=spark),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return None, _tail(_decode(exc.stdout) + _decode(exc.stderr))
    return proc.returncode, (
        f"--- stdout ---\n{_tail(proc.stdout)}\n--- stderr ---\n{_tail(proc.stderr)}"
    )


def run_program(path: Path, cwd: Path, timeout: float, *, spark: bool = False) -> Outcome:
    """Run one program file; a non-zero exit or a timeout is a failure."""
    status, output = _run_python([str(path)], cwd, timeout, spark)
    if status is None:
        return Outcome(f"{path.name} did not finish within {timeout} s", output)
    if status != 0:
        return Outcome(f"{path.name} exited with status {status}", output)
    return Outcome("", output)


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


# Runs programs one after another in this one process (``python -c RUNNER
# RESULTS.json FILE...``), writing each one's traceback (or null) to RESULTS.json
# as it goes, so a hang still tells which programs finished.
RUNNER = """
import json, runpy, sys, traceback
results_path, files = sys.argv[1], sys.argv[2:]
results = {}
for path in files:
    print(f"=== {path}", flush=True)
    try:
        runpy.run_path(path, run_name="__main__")
        results[path] = None
    except SystemExit as exc:
        results[path] = None if exc.code in (None, 0) else f"SystemExit({exc.code!r})"
    except BaseException:
        results[path] = traceback.format_exc()
    with open(results_path, "w") as f:
        json.dump(results, f)
"""


def run_in_one_process(
    paths: Iterable[Path], cwd: Path, timeout: float, *, spark: bool = False
) -> dict[Path, Outcome]:
    """Run programs in turn in one child process; the outcome of each."""
    paths = list(paths)
    results_path = cwd / "results.json"
    args = ["-c", RUNNER, str(results_path), *map(str, paths)]
    status, output = _run_python(args, cwd, timeout, spark)
    if status is None:
        ended = f"the process running them did not finish within {timeout} s"
    else:
        ended = f"the process running them exited with status {status}"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    outcomes = {}
    for path in paths:
        if str(path) not in results:
            outcomes[path] = Outcome(f"{path.name} did not finish: {ended}", output)
        elif results[str(path)] is not None:
            outcomes[path] = Outcome(f"{path.name} failed:\n{results[str(path)]}", output)
        else:
            outcomes[path] = Outcome("", output)
    return outcomes
