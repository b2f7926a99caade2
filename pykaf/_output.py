"""Terminal output for the ``pykaf`` command and the demo: tables and live progress.

One place decides between two kinds of output:

- **rich**, when the stream is a terminal and the ``rich`` package is
  installed (the ``cli`` extra, ``pip install pykaf[cli]``): tables drawn by
  ``rich.table.Table``, and a live progress bar with rate and ETA;
- **plain** otherwise (a pipe, a file, or no ``rich``): tables as columns
  of text two spaces apart, left-aligned, without trailing blanks; progress
  as a line redrawn in place on a terminal, or as whole lines now and then.
  No ANSI escape code is ever written in plain mode.

``PYKAF_OUTPUT`` overrides the choice: ``plain`` always writes plain output,
``rich`` writes rich output even to a pipe (when ``rich`` is installed), and
``auto`` (or unset) decides by the stream. pykaf decides this itself rather
than leaving it to rich's own detection, so that ``FORCE_COLOR`` and its kin
never put escape codes into the output scripts read.

It sits below both ``pykaf.cli`` and ``pykaf.demo`` and imports nothing of
pykaf, so the two share it without importing each other (the CLI runs the
demo; the demo never imports the CLI).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import trio

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

OUTPUT_ENV = "PYKAF_OUTPUT"
"""The environment variable that forces ``plain`` or ``rich`` output (else ``auto``)."""


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def rich_console(stream: TextIO | None = None, *, tty: bool | None = None) -> Console | None:
    """A rich ``Console`` on ``stream`` (default stdout) if rich output is wanted, else None.

    Rich output is wanted when ``rich`` can be imported and either
    ``PYKAF_OUTPUT=rich`` or the stream is a terminal (``tty``, when given,
    says whether it is) and ``PYKAF_OUTPUT`` is not ``plain``.
    """
    stream = sys.stdout if stream is None else stream
    mode = os.environ.get(OUTPUT_ENV, "auto").strip().lower()
    if mode == "plain":
        return None
    if mode != "rich" and not (_is_terminal(stream) if tty is None else tty):
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    # Not a terminal (PYKAF_OUTPUT=rich into a pipe): no width to fit, so a wide one.
    width = None if _is_terminal(stream) else 200
    return Console(file=stream, force_terminal=True, highlight=False, soft_wrap=False, width=width)


# -- tables ------------------------------------------------------------------------


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The lines of a plain table: columns two spaces apart, left-aligned, no trailing blanks."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


def fixed_columns(rows: Sequence[Sequence[Any]], widths: Sequence[int]) -> list[str]:
    """Rows of cells in columns of fixed widths, one space apart.

    A negative width left-aligns its column, a positive one right-aligns it;
    a longer cell widens its own row only.
    """
    return [
        " ".join(
            str(c).ljust(-w) if w < 0 else str(c).rjust(w) for c, w in zip(row, widths, strict=True)
        )
        for row in rows
    ]


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    stream: TextIO | None = None,
    widths: Sequence[int] | None = None,
) -> None:
    """A table on ``stream`` (default stdout): rich on a terminal, else plain text.

    Plain text is :func:`plain_table`, or :func:`fixed_columns` when
    ``widths`` are given. In a rich table a column is right-aligned when its
    width is positive, or (without ``widths``) when every cell is a number or
    text showing one (``1,000``; ``-`` for none).
    """
    stream = sys.stdout if stream is None else stream
    console = rich_console(stream)
    if console is None:
        lines = (
            plain_table(headers, rows)
            if widths is None
            else fixed_columns([headers, *rows], widths)
        )
        for line in lines:
            print(line, file=stream)
        return
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", show_edge=False, pad_edge=False)
    for i, header in enumerate(headers):
        if widths is not None:
            right = widths[i] > 0
        else:
            right = bool(rows) and all(_numeric(row[i]) for row in rows)
        table.add_column(str(header), justify="right" if right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(str(c) for c in row))
    # At its natural width: a terminal too narrow wraps the lines, as it does plain
    # ones, rather than rich folding cells or cutting them off.
    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    console.width = max(natural, console.width)  # the console is this call's own
    console.print(table, crop=False)


_NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+")


def _numeric(cell: Any) -> bool:
    """A number, or text showing one (``1,000``, ``2.5``), or ``-`` (none): right-aligned."""
    if isinstance(cell, bool):
        return False
    if isinstance(cell, int | float):
        return True
    return isinstance(cell, str) and (cell == "-" or _NUMBER.fullmatch(cell) is not None)


# -- progress ----------------------------------------------------------------------


class Progress:
    """Live progress of counted work on ``stream``, one phase at a time.

    The work moves a count (``begin`` takes a function returning it);
    :meth:`run` (a task) redraws until cancelled and :meth:`show` draws now.
    What it looks like:

    - a terminal with ``rich``: a rich progress bar with percentage, counts,
      records/s, MB/s and the ETA (the elapsed time once done);
    - a terminal without ``rich`` (or ``PYKAF_OUTPUT=plain``): the same
      figures as one line of text redrawn in place;
    - not a terminal: that line as a whole line every ``piped_interval``
      seconds and once at the end of each phase, or nothing at all when
      ``piped_interval`` is None.

    The rate shown while running is that of the last two seconds; the final
    one is the phase's average. MB are 10^6 bytes of values: ``size`` bytes a
    record, unless ``begin`` is given a function counting them.
    """

    def __init__(
        self,
        stream: TextIO,
        size: int = 0,
        *,
        tty: bool | None = None,
        piped_interval: float | None = 2.0,
    ) -> None:
        self.stream = stream
        self.size = size
        self.console = rich_console(stream, tty=tty)
        # PYKAF_OUTPUT=rich draws the live display whatever the stream.
        terminal = _is_terminal(stream) if tty is None else tty
        self.tty = terminal or self.console is not None
        self.quiet = not self.tty and piped_interval is None
        self.interval = 0.1 if self.tty else (piped_interval or 0.0)
        self.label = ""
        self.total = 0
        self.count: Callable[[], int] = lambda: 0
        self.value_bytes: Callable[[], int] | None = None
        self.started = 0.0
        self._samples: deque[tuple[float, int]] = deque()
        self._width = 0
        self._rich: RichProgress | None = None
        self._task: TaskID | None = None

    def begin(
        self,
        label: str,
        total: int,
        count: Callable[[], int],
        *,
        value_bytes: Callable[[], int] | None = None,
    ) -> None:
        """Start a phase of ``total`` records; ``count()`` says how many are done.

        ``value_bytes()``, if given, says how many bytes of values are done
        (else the count times ``size``).
        """
        self.end()
        self.label, self.total, self.count, self.value_bytes = label, total, count, value_bytes
        self.started = time.perf_counter()
        self._samples.clear()
        self._samples.append((self.started, 0))

    def figures(self, *, final: bool = False) -> dict[str, Any]:
        """What the display shows now: done, fraction, rate, MB/s and the ETA or elapsed time."""
        now = time.perf_counter()
        done = min(self.count(), self.total)
        elapsed = max(now - self.started, 1e-9)
        if final:
            rate = done / elapsed
        else:
            self._samples.append((now, done))
            while len(self._samples) > 2 and now - self._samples[0][0] > 2.0:
                self._samples.popleft()
            t0, c0 = self._samples[0]
            rate = (done - c0) / (now - t0) if now > t0 else 0.0
        if self.value_bytes is None:
            mb_per_s = rate * self.size / 1e6
        else:
            # Bytes per record so far, at the rate now.
            per_record = self.value_bytes() / done if done else 0.0
            mb_per_s = rate * per_record / 1e6
        if final:
            tail = f"{elapsed:.2f} s"
        elif rate > 0:
            tail = f"ETA {duration((self.total - done) / rate)}"
        else:
            tail = "ETA --"
        return {
            "done": done,
            "fraction": done / self.total if self.total else 1.0,
            "rate": rate,
            "mb_per_s": mb_per_s,
            "tail": tail,
        }

    def render(self, *, final: bool = False) -> str:
        """The plain progress line for now."""
        f = self.figures(final=final)
        width = 24
        fill = int(f["fraction"] * width)
        bar = "#" * fill + "-" * (width - fill)
        return (
            f"{self.label:<12} [{bar}] {f['fraction'] * 100:5.1f}% {f['done']:>11,}/{self.total:,}"
            f"  {f['rate']:>11,.0f} rec/s {f['mb_per_s']:7.1f} MB/s  {f['tail']}"
        )

    def show(self, *, final: bool = False) -> None:
        """Draw the display now; ``final`` ends the phase (its last figures stay shown)."""
        if self.quiet:
            return
        if self.console is not None:
            self._show_rich(final=final)
        else:
            self._show_plain(final=final)
        if final:
            self.end()

    def _show_plain(self, *, final: bool) -> None:
        line = self.render(final=final)
        if self.tty:
            cols = shutil.get_terminal_size((120, 24)).columns - 1
            line = line[:cols]
            pad = " " * max(0, self._width - len(line))
            self._width = 0 if final else len(line)
            self.stream.write("\r" + line + pad + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _show_rich(self, *, final: bool) -> None:
        if self._rich is None:
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("{task.description:<12}"),
                BarColumn(bar_width=24),
                TextColumn("{task.percentage:>5.1f}%"),
                TextColumn("{task.fields[counts]}", justify="right"),
                TextColumn("{task.fields[rate]}", justify="right"),
                TextColumn("{task.fields[tail]}"),
                console=self.console,
                auto_refresh=False,  # redrawn by run(): no thread of rich's own
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._rich.start()
            self._task = self._rich.add_task(
                self.label, total=self.total or 1, counts="", rate="", tail=""
            )
        assert self._task is not None
        f = self.figures(final=final)
        self._rich.update(
            self._task,
            completed=f["done"] if self.total else 1,
            counts=f"{f['done']:,}/{self.total:,}",
            rate=f"{f['rate']:,.0f} rec/s {f['mb_per_s']:.1f} MB/s",
            tail=f["tail"],
        )
        self._rich.refresh()

    def end(self) -> None:
        """Leave the display as it is (a rich bar stops, a redrawn line gets its newline)."""
        if self._rich is not None:
            self._rich.stop()
            self._rich = self._task = None
        elif self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    async def run(self) -> None:
        """Redraw every ``interval`` until cancelled (returns at once if nothing is shown)."""
        if self.quiet:
            return
        while True:
            await trio.sleep(self.interval)
            self.show()


def duration(seconds: float) -> str:
    """``12.3s``, or ``4m05s`` from a minute on."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"
