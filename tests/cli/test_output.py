"""Tables and progress of the ``pykaf`` command and the demo: rich on a terminal, else plain."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
import trio

from pykaf._output import (
    OUTPUT_ENV,
    Progress,
    fixed_columns,
    plain_table,
    print_table,
    rich_console,
)
from pykaf.cli import main

pytest.importorskip("rich")

ESC = "\x1b"
HEADERS = ["topic", "partition", "leader"]
ROWS = [("orders", 0, 1), ("orders", 10, 2)]
PLAIN = ["topic   partition  leader", "orders  0          1", "orders  10         2"]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _auto_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from automatic detection, whatever the environment says."""
    monkeypatch.delenv(OUTPUT_ENV, raising=False)


@pytest.fixture
def without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import rich`` (and its modules) fail, as when the cli extra is not installed."""
    for name in [n for n in sys.modules if n == "rich" or n.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "rich", None)


def test_plain_table_lines() -> None:
    assert plain_table(HEADERS, ROWS) == PLAIN
    assert plain_table(["a", "b"], []) == ["a  b"]


def test_fixed_columns() -> None:
    rows = [["name", "n"], ["a", "1,000"], ["longer name", "2"]]
    assert fixed_columns(rows, (-6, 4)) == ["name      n", "a      1,000", "longer name    2"]


def test_a_table_with_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed widths: the plain lines are fixed_columns'; rich aligns each column as they say."""
    rows = [["a", "1,000"], ["b", "2"]]
    out = io.StringIO()
    print_table(["name", "n"], rows, stream=out, widths=(-6, 6))
    assert out.getvalue().splitlines() == fixed_columns([["name", "n"], *rows], (-6, 6))
    drawn = Terminal()
    print_table(["name", "n"], rows, stream=drawn, widths=(-6, 6))
    lines = [line for line in _strip(drawn.getvalue()).splitlines() if line.strip()]
    assert ESC in drawn.getvalue()
    assert lines[2].rstrip().endswith("1,000") and lines[3].rstrip().endswith("    2")


def test_a_table_to_a_pipe_is_plain() -> None:
    out = io.StringIO()
    print_table(HEADERS, ROWS, stream=out)
    assert out.getvalue().splitlines() == PLAIN


def test_a_table_on_a_terminal_is_drawn_by_rich() -> None:
    out = Terminal()
    print_table(HEADERS, ROWS, stream=out)
    text = out.getvalue()
    assert ESC in text  # the bold header
    lines = [line for line in _strip(text).splitlines() if line.strip()]
    assert lines[0].split() == HEADERS
    assert [line.split() for line in lines[2:]] == [["orders", "0", "1"], ["orders", "10", "2"]]
    # numbers are right-aligned: the one-digit partition ends where the two-digit one does
    assert lines[2].index("0 ") + 1 == lines[3].index("10 ") + 2


def test_a_rich_table_wider_than_the_terminal_is_not_cut_or_folded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    headers = [f"column number {i}" for i in range(6)]
    row = [f"value-{i}-{'x' * 10}" for i in range(6)]
    out = Terminal()
    print_table(headers, [row], stream=out)
    lines = [line for line in _strip(out.getvalue()).splitlines() if line.strip()]
    assert len(lines) == 3  # header, rule, the row: one line each
    assert all(h in lines[0] for h in headers) and lines[2].split() == row


def test_text_showing_numbers_is_right_aligned() -> None:
    out = Terminal()
    print_table(["n", "lag"], [("1,000", "-"), ("2", "12")], stream=out)
    lines = [line.rstrip() for line in _strip(out.getvalue()).splitlines() if line.strip()]
    assert lines[2].endswith("1,000     -") and lines[3].endswith("    2    12")


def test_no_rich_on_a_terminal_is_plain(without_rich: None) -> None:
    assert rich_console(Terminal()) is None
    out = Terminal()
    print_table(HEADERS, ROWS, stream=out)
    assert out.getvalue().splitlines() == PLAIN


def test_the_environment_forces_either(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OUTPUT_ENV, "plain")
    out = Terminal()
    print_table(HEADERS, ROWS, stream=out)
    assert out.getvalue().splitlines() == PLAIN
    monkeypatch.setenv(OUTPUT_ENV, "rich")
    piped = io.StringIO()
    print_table(HEADERS, ROWS, stream=piped)
    assert ESC in piped.getvalue()


def test_rich_detection_ignores_force_color(monkeypatch: pytest.MonkeyPatch) -> None:
    """FORCE_COLOR, TTY_COMPATIBLE (rich's own switches) put no escape codes into a pipe."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    out = io.StringIO()
    print_table(HEADERS, ROWS, stream=out)
    assert out.getvalue().splitlines() == PLAIN


def _phase(progress: Progress) -> str:
    done = 0
    progress.begin("phase", 1000, lambda: done)
    progress.show()
    done = 400
    progress.show()
    done = 1000
    progress.show(final=True)
    assert isinstance(progress.stream, io.StringIO)
    return progress.stream.getvalue()


def test_progress_on_a_terminal_is_a_rich_bar() -> None:
    progress = Progress(Terminal(), 100)
    assert progress.console is not None
    text = _phase(progress)
    assert ESC in text
    plain = _strip(text)
    assert "phase" in plain and "rec/s" in plain and "MB/s" in plain
    assert "ETA" in plain  # while running
    last = plain.rstrip("\n").splitlines()[-1]
    assert "100.0%" in last and "1,000/1,000" in last and last.rstrip().endswith(" s")


def test_progress_without_rich_on_a_terminal_is_one_line_redrawn(without_rich: None) -> None:
    progress = Progress(Terminal(), 100)
    assert progress.console is None
    text = _phase(progress)
    assert ESC not in text
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "100.0%" in text.split("\r")[-1]


def test_progress_to_a_pipe() -> None:
    """Whole lines (the demo), or nothing when asked for nothing (``pykaf perf``)."""
    lines = _phase(Progress(io.StringIO(), 100)).splitlines()
    assert len(lines) == 3 and "\r" not in "".join(lines) and ESC not in "".join(lines)
    assert "40.0%" in lines[1] and "100.0%" in lines[2]
    assert _phase(Progress(io.StringIO(), 100, piped_interval=None)) == ""


def test_progress_counts_value_bytes_when_told() -> None:
    progress = Progress(io.StringIO())
    done = 0
    progress.begin("consume", 10, lambda: done, value_bytes=lambda: done * 250_000)
    done = 10
    assert progress.render(final=True).split("rec/s")[1].split()[0] != "0.0"


async def test_progress_run_redraws_until_cancelled() -> None:
    out = Terminal()
    progress = Progress(out, 100)
    progress.begin("phase", 10, lambda: 5)
    with trio.move_on_after(0.35):
        await progress.run()
    progress.end()
    assert _strip(out.getvalue()).count("5/10") >= 2
    quiet = Progress(io.StringIO(), piped_interval=None)
    with trio.fail_after(1):
        await quiet.run()  # nothing to draw: returns at once


def test_cli_tables_rich_when_forced_and_plain_without_rich(
    fake_cluster: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cluster.create_topic("output-table", 2)
    args = ["topics", "describe", "output-table", "-b", fake_cluster.bootstrap]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert ESC not in plain
    assert plain.splitlines()[0] == "topic         partition  leader  replicas  isr"
    monkeypatch.setenv(OUTPUT_ENV, "rich")
    assert main(args) == 0
    drawn = capsys.readouterr().out
    assert ESC in drawn
    assert [line.split()[:2] for line in _strip(drawn).splitlines()[2:4]] == [
        ["output-table", "0"],
        ["output-table", "1"],
    ]
    for name in [n for n in sys.modules if n == "rich" or n.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    assert main(args) == 0  # forced, but rich is absent
    assert capsys.readouterr().out == plain


def _strip(text: str) -> str:
    """``text`` without ANSI escape sequences and carriage returns."""
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")
