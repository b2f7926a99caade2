"""Draw docs/design.md's two diagrams from the code: the layers and the producer pipeline.

- ``docs/img/design-layers.svg``: the rows of the layers contract in
  ``.importlinter`` (the one ``make lint`` enforces), top to bottom, each
  package with its modules' count.
- ``docs/img/design-producer.svg``: the modules of ``pykaf/_producer`` and
  ``pykaf/_txn`` and who imports whom (type-only imports included), read
  with grimp, in rows by import depth: a module sits above everything it
  imports, and an arrow implied by a longer path is left out.

Run ``python tools/gen_design_diagrams.py`` after changing either;
``tests/docs/test_design_diagrams.py`` fails while a committed drawing is stale.
Plain SVG written here, so no graph tool is needed.
"""

from __future__ import annotations

import configparser
import sys
from html import escape
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LAYERS_SVG = ROOT / "docs" / "img" / "design-layers.svg"
PRODUCER_SVG = ROOT / "docs" / "img" / "design-producer.svg"
PIPELINE = ("pykaf._producer", "pykaf._txn")

_CHAR = 7.2  # px per character of 12px monospace
_FONT = 'font-family="monospace" font-size="12"'


def _box(x: float, y: float, w: float, h: float, label: str, fill: str) -> str:
    return (
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="4" '
        f'fill="{fill}" stroke="#555"/>'
        f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 4:.0f}" text-anchor="middle" {_FONT}>'
        f"{escape(label)}</text>"
    )


def _svg(width: float, height: float, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">\n'
        '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/>'
        "</marker></defs>\n" + "\n".join(body) + "\n</svg>\n"
    )


def layer_rows(config: Path = ROOT / ".importlinter") -> list[list[list[str]]]:
    """The layers contract's rows, top first; each a list of sibling groups of module tails."""
    parser = configparser.ConfigParser()
    parser.read(config)
    raw = parser["importlinter:contract:layers"]["layers"]
    rows = []
    for line in raw.strip().splitlines():
        sep = "|" if "|" in line else ":"
        rows.append([[part.strip()] for part in line.split(sep)])
    return rows


#: The name of the layer a contract row belongs to, by the row's first module.
ROW_NAMES = {
    "__main__": "entry",
    "cli": "L5 faces",
    "sync": "L5 faces",
    "_admin": "L4 roles",
    "_consumer": "L4 roles",
    "_cluster": "L3 cluster",
    "_net": "L2 network",
    "protocol": "L1 protocol",
    "codec": "L0 codec",
    "errors": "base",
}


def draw_layers(graph: grimp.ImportGraph) -> str:
    """The layers contract as stacked rows of package boxes, each row named."""
    rows = layer_rows()
    body: list[str] = []
    y, gap, h, pad = 10.0, 14.0, 30.0, 12.0
    width = 0.0
    for row in rows:
        name = ROW_NAMES.get(row[0][0], "")
        body.append(
            f'<text x="10" y="{y + h / 2 + 4:.0f}" {_FONT} fill="#555">{escape(name)}</text>'
        )
        x = 110.0
        for (tail,) in row:
            name = f"pykaf.{tail}"
            count = len([m for m in graph.modules if m == name or m.startswith(name + ".")])
            label = f"{tail} ({count})" if count > 1 else tail
            w = max(80.0, len(label) * _CHAR + 2 * pad)
            fill = "#e8f0fe" if count > 1 else "#f4f4f4"
            body.append(_box(x, y, w, h, label, fill))
            x += w + 10
        width = max(width, x)
        y += h + gap
    note = "each row imports only rows below it (make lint: lint-imports)"
    body.append(f'<text x="10" y="{y + 4:.0f}" {_FONT} fill="#555">{escape(note)}</text>')
    return _svg(max(width, len(note) * _CHAR + 20), y + 14, body)


def draw_pipeline(graph: grimp.ImportGraph) -> str:
    """The producer's and the transaction manager's modules in rows by import depth."""
    mods = sorted(
        m
        for m in graph.modules
        if any(m.startswith(p + ".") for p in PIPELINE)
        and not m.endswith(".__init__")
        and m not in PIPELINE
    )
    deps = {m: {d for d in graph.find_modules_directly_imported_by(m) if d in mods} for m in mods}
    depth: dict[str, int] = {}

    def level(m: str, seen: tuple[str, ...] = ()) -> int:
        if m in seen:
            raise SystemExit(f"import circle: {' -> '.join((*seen, m))}")
        if m not in depth:
            depth[m] = 1 + max((level(d, (*seen, m)) for d in deps[m]), default=-1)
        return depth[m]

    for m in mods:
        level(m)
    # Draw the transitive reduction: an import already implied by a path
    # through another drawn module is left out, so the stages' order shows.
    reach: dict[str, set[str]] = {}

    def below(m: str) -> set[str]:
        if m not in reach:
            reach[m] = set(deps[m]).union(*(below(d) for d in deps[m]))
        return reach[m]

    drawn = {m: {d for d in deps[m] if not any(d in below(o) for o in deps[m] - {d})} for m in mods}
    top = max(depth.values(), default=0)
    rows: list[list[str]] = [[] for _ in range(top + 1)]
    for m in mods:
        rows[top - depth[m]].append(m)
    h, vgap, hgap, pad = 28.0, 46.0, 14.0, 10.0
    place: dict[str, tuple[float, float, float]] = {}
    widths = []
    for r, row in enumerate(rows):
        x = 10.0
        for m in row:
            label = m.removeprefix("pykaf.")
            w = len(label) * _CHAR + 2 * pad
            place[m] = (x, 10 + r * (h + vgap), w)
            x += w + hgap
        widths.append(x)
    width = max(widths, default=100.0)
    body: list[str] = []
    for m in mods:
        x, y, w = place[m]
        for d in sorted(drawn[m]):
            dx, dy, dw = place[d]
            body.append(
                f'<line x1="{x + w / 2:.0f}" y1="{y + h:.0f}" x2="{dx + dw / 2:.0f}" y2="{dy:.0f}" '
                'stroke="#999" marker-end="url(#a)"/>'
            )
    for m in mods:
        x, y, w = place[m]
        fill = "#fdf0e0" if m.startswith("pykaf._txn") else "#e8f0fe"
        body.append(_box(x, y, w, h, m.removeprefix("pykaf."), fill))
    return _svg(width, 10 + len(rows) * (h + vgap), body)


def drawings() -> dict[Path, str]:
    """Each diagram's path and its SVG text, drawn from the code as it is."""
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("pykaf", include_external_packages=False, cache_dir=None)
    return {LAYERS_SVG: draw_layers(graph), PRODUCER_SVG: draw_pipeline(graph)}


def main() -> None:
    """Write both diagrams."""
    for path, svg in drawings().items():
        path.write_text(svg)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
