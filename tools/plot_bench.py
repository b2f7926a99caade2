"""Plot pykaf's speed relative to its peers (the ratios of bench/ratios.py) as SVG bar charts.

Run: python tools/plot_bench.py [RATIOS.json ...] [--out docs/img]
(default input: bench/baseline.json, then bench/results/ratios.json when it exists).

Each input is a baseline (``{"ratios": {key: ratio}}``, bench/baseline.json) or
a run's ratios (``{"ratios": {key: {"ratio": ..., ...}}}``, what
``bench/ratios.py`` writes to bench/results/ratios.json). Keys are
``group | pykaf label | peer``. A later file's ratio replaces an earlier one's
for the same key. One horizontal bar chart per area (codec, protocol, producer,
consumer, transactions, spark) that has ratios: one bar per ratio, on a log
scale, with a line at 1.0 (parity; right of it pykaf is faster). The files are
``bench-<area>.svg``, written reproducibly (no date, fixed ids) so that an
unchanged result gives an unchanged file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUTS = [ROOT / "bench" / "baseline.json", ROOT / "bench" / "results" / "ratios.json"]
DEFAULT_OUT = ROOT / "docs" / "img"

# Areas, in page order: (name, title, group name prefixes).
AREAS = [
    ("codec", "Record codec", ("encode-", "decode-", "bulk-encode")),
    ("protocol", "Protocol messages", ("metadata-", "fetch-")),
    ("producer", "Producer", ("produce-",)),
    ("consumer", "Consumer", ("consume-",)),
    ("transactions", "Transactions", ("txn-", "idem-")),
    ("spark", "Spark", ("spark-",)),
]
OTHER = ("other", "Other cases", ())
FASTER, SLOWER = "#2b8a3e", "#d9480f"  # bar colours: pykaf faster / slower


@dataclass(frozen=True)
class Point:
    """One ratio: how many times faster a pykaf label was than a peer on a case."""

    group: str
    subject: str
    peer: str
    ratio: float
    source: str

    @property
    def label(self) -> str:
        """The bar's label."""
        return f"{self.group}: {self.subject} vs {self.peer}"


class InputError(Exception):
    """A ratios file that cannot be read."""


def read_points(path: Path) -> list[Point]:
    """The ratios of a baseline or a run's ratios.json."""
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: {exc}") from None
    ratios = data.get("ratios") if isinstance(data, dict) else None
    if not isinstance(ratios, dict):
        raise InputError(f"{path}: no 'ratios' object; is it bench/ratios.py output?")
    points = []
    for key, value in ratios.items():
        parts = [p.strip() for p in key.split("|")]
        if len(parts) != 3:
            raise InputError(f"{path}: {key!r} is not 'group | pykaf label | peer'")
        ratio = value.get("ratio") if isinstance(value, dict) else value
        if not isinstance(ratio, (int, float)) or not ratio > 0 or math.isinf(ratio):
            raise InputError(f"{path}: {key!r} has no positive ratio ({ratio!r})")
        points.append(Point(parts[0], parts[1], parts[2], float(ratio), shown_path(path)))
    return points


def shown_path(path: Path) -> str:
    """A path as the charts name it: relative to the checkout when inside it."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def merge(inputs: list[Path]) -> list[Point]:
    """The ratios of all inputs; a later file's ratio wins for the same key."""
    by_key: dict[tuple[str, str, str], Point] = {}
    for path in inputs:
        for point in read_points(path):
            by_key[(point.group, point.subject, point.peer)] = point
    return list(by_key.values())


def area_of(group: str) -> tuple[str, str, tuple[str, ...]]:
    """The area a benchmark group belongs to."""
    for area in AREAS:
        if group.startswith(area[2]):
            return area
    return OTHER


def by_area(points: list[Point]) -> dict[str, list[Point]]:
    """Ratios per area name, in the areas' order, keeping the inputs' order within one."""
    out: dict[str, list[Point]] = {name: [] for name, _title, _prefixes in [*AREAS, OTHER]}
    for point in points:
        out[area_of(point.group)[0]].append(point)
    return {name: pts for name, pts in out.items() if pts}


def fmt_ratio(value: float) -> str:
    """``2.02x``, ``0.0287x``."""
    return f"{value:.2f}x" if value >= 1 else f"{value:.3g}x"


def plot_area(name: str, points: list[Point], out: Path, title: str | None = None) -> Path:
    """Write one area's chart (``bench-<name>.svg``, titled ``title`` or the area's); its path."""
    if title is None:
        title = next((t for n, t, _p in [*AREAS, OTHER] if n == name), name)
    plt.rcParams["svg.hashsalt"] = "pykaf-bench"  # stable element ids
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller and searchable
    height = 1.2 + 0.32 * len(points)
    fig, ax = plt.subplots(figsize=(9, height))
    ys = list(range(len(points)))[::-1]  # first ratio at the top
    ratios = [p.ratio for p in points]
    # Bars grow from parity: right when pykaf is faster, left when slower.
    bars = ax.barh(
        ys,
        [r - 1.0 for r in ratios],
        left=1.0,
        color=[FASTER if r >= 1 else SLOWER for r in ratios],
        height=0.7,
    )
    for i, (bar, point) in enumerate(zip(bars, points, strict=True)):
        bar.set_gid(f"ratio-bar-{i}")
        faster = point.ratio >= 1
        ax.annotate(
            fmt_ratio(point.ratio),
            (point.ratio, bar.get_y() + bar.get_height() / 2),
            xytext=(3 if faster else -3, 0),
            textcoords="offset points",
            ha="left" if faster else "right",
            va="center",
            fontsize=7,
        )
    ax.set_xscale("log")
    low, high = min([*ratios, 1.0]), max([*ratios, 1.0])
    ax.set_xlim(low / 2.5, high * 2.5)
    ax.axvline(1.0, color="black", linewidth=1, gid="parity-line")
    ax.set_yticks(ys, [p.label for p in points], fontsize=7)
    ax.set_ylim(-0.7, len(points) - 0.3)
    ax.set_xlabel("peer time / pykaf time per record (log scale; > 1: pykaf is faster)")
    sources = ", ".join(sorted({p.source for p in points}))
    ax.set_title(f"{title}: pykaf vs peers ({sources})", fontsize=10)
    ax.grid(axis="x", which="major", linewidth=0.3)
    fig.tight_layout()
    path = out / f"bench-{name}.svg"
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "inputs", nargs="*", type=Path, help="ratios files (default: the baseline, then the run's)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder ({DEFAULT_OUT})")
    args = parser.parse_args(argv)
    inputs = args.inputs or [p for p in DEFAULT_INPUTS if p.exists()]
    try:
        points = merge(inputs)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not points:
        print("error: no ratios to plot", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name, area_points in by_area(points).items():
        path = plot_area(name, area_points, args.out)
        print(f"wrote {path} ({len(area_points)} ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
