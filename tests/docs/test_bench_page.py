"""docs/benchmarks.md's tables and charts are what tools/bench_page.py writes from the run files.

A table older than, or different from, its committed run file fails here:
the page is regenerated from bench/baseline.json and bench/runs/*.json and
compared, and each chart's bars are compared with its table's ratios.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tool_loader import load

ROOT = Path(__file__).resolve().parents[2]


GEN = load("bench_page", ROOT / "tools" / "bench_page.py")


def copy_inputs(tmp_path: Path) -> Path:
    """A tree with the committed run files and the page, to change without touching the checkout."""
    for source in GEN.sources():
        target = tmp_path / source
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / source, target)
    return tmp_path


def test_the_page_is_what_its_run_files_give() -> None:
    page = GEN.PAGE.read_text()
    assert GEN.render_page(page) == page, (
        "docs/benchmarks.md is not current with bench/baseline.json and bench/runs/*.json: "
        "run python tools/bench_page.py (make bench-page) and commit the page and its charts"
    )


def test_every_table_has_its_place_and_rows() -> None:
    page = GEN.PAGE.read_text()
    for table in GEN.TABLES:
        assert f"<!-- bench-table: {table.name} -->" in page
        assert GEN.table_rows(table), f"table {table.name} shows nothing"
    assert GEN.unaccounted() == []


def test_a_changed_run_file_changes_its_table(tmp_path: Path) -> None:
    root = copy_inputs(tmp_path)
    page = GEN.PAGE.read_text()
    path = root / GEN.BASELINE
    data = json.loads(path.read_text())
    key = "encode-none | pykaf | aiokafka"
    assert key in data["ratios"]
    data["ratios"][key] = 123.456
    path.write_text(json.dumps(data))
    new = GEN.render_page(page, root)
    assert new != page
    assert "| `encode-none` | `pykaf` | `aiokafka` | 5.14M | 2.54M | **123.46x** |" in new
    # The same numbers with other sources still change the page (its SHA-256).
    run = root / GEN.SPARK_RUN
    spark = json.loads(run.read_text())
    spark["sources"].append("another run")
    run.write_text(json.dumps(spark))
    assert GEN.digest(GEN.SPARK_RUN, root) != GEN.digest(GEN.SPARK_RUN)
    assert f"sha256 `{GEN.digest(GEN.SPARK_RUN, root)}`" in GEN.render_page(page, root)


def test_a_ratio_no_table_shows_is_an_error(tmp_path: Path) -> None:
    root = copy_inputs(tmp_path)
    run = root / "bench" / "runs" / "new.json"
    entry = {"ratio": 2.0, "subject_records_per_s": 2, "peer_records_per_s": 1}
    run.write_text(json.dumps({"sources": ["x"], "ratios": {"brand-new | pykaf | peer": entry}}))
    assert GEN.unaccounted(root) == ["bench/runs/new.json: brand-new | pykaf | peer"]
    with pytest.raises(GEN.PageError, match="brand-new"):
        GEN.render_page(GEN.PAGE.read_text(), root)


def test_a_page_without_a_table_marker_is_refused() -> None:
    page = GEN.PAGE.read_text().replace("<!-- bench-table: codec -->\n", "", 1)
    with pytest.raises(GEN.PageError, match="codec"):
        GEN.render_page(page)


def bar_labels(svg: Path) -> list[str]:
    """The labels of a chart's bars, in the order its SVG holds them (tools/plot_bench.py)."""
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    bars = [e for e in root.iter() if e.get("id", "").startswith("ratio-bar-")]
    texts = ["".join(e.itertext()) for e in root.iter(f"{ns}text")]
    labels = [t for t in texts if re.fullmatch(r"\S+: \S+ vs \S+", t)]
    assert len(bars) == len(labels), f"{svg.name}: {len(bars)} bars, {len(labels)} labels"
    return labels


def test_each_chart_shows_its_tables_ratios() -> None:
    img = ROOT / "docs" / "img"
    page = GEN.PAGE.read_text()
    for table in GEN.TABLES:
        svg = img / f"bench-{table.name}.svg"
        assert svg.exists(), f"{svg.name} is missing: run python tools/bench_page.py"
        expected = [f"{r.group}: {r.subject} vs {r.peer}" for r in GEN.table_rows(table)]
        assert bar_labels(svg) == expected, f"{svg.name} does not show table {table.name}"
        assert f"](img/{svg.name})" in page
    charts = {p.name for p in img.glob("bench-*.svg")}
    assert charts == {f"bench-{t.name}.svg" for t in GEN.TABLES}, "a chart with no table"


def test_a_cpu_table_shows_the_cpu_ratios(tmp_path: Path) -> None:
    root = copy_inputs(tmp_path)
    run = root / "bench" / "runs" / "cpu.json"
    ratios = {
        "case | pykaf[a] | peer": {"ratio": 2.0, "subject_records_per_s": 2000, "cpu_ratio": 1.5},
        "case | pykaf[b] | peer": {"ratio": 0.5, "subject_records_per_s": 500, "cpu_ratio": None},
    }
    run.write_text(json.dumps({"sources": ["x"], "ratios": ratios}))
    table = GEN.Table("t", "T", "bench/runs/cpu.json", ("case | * | *",), cpu=True)
    lines = GEN.render_table(table, root).splitlines()
    assert lines[0].endswith("| pykaf ÷ peer | peer ÷ pykaf CPU |")
    assert lines[2] == "| `case` | `pykaf[a]` | `peer` | 2k |  | **2.00x** | **1.50x** |"
    assert lines[3] == "| `case` | `pykaf[b]` | `peer` | 500 |  | 0.5x |  |"
    plain = GEN.render_table(GEN.Table("t", "T", "bench/runs/cpu.json", ("case | * | *",)), root)
    assert "CPU" not in plain
    ratios["case | pykaf[b] | peer"]["cpu_ratio"] = -1
    run.write_text(json.dumps({"sources": ["x"], "ratios": ratios}))
    with pytest.raises(GEN.PageError, match="CPU ratio"):
        GEN.rows_of(GEN.load("bench/runs/cpu.json", root), "bench/runs/cpu.json")
