"""tools/plot_bench.py draws one bar per ratio, per area, as valid SVG."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest
from tool_loader import load

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "bench" / "baseline.json"


def load_plotter() -> ModuleType:
    return load("plot_bench", ROOT / "tools" / "plot_bench.py")


def bars_and_texts(svg: Path) -> tuple[list[str], str]:
    """The ids of the ratio bars of a chart, and all its text."""
    root = ET.parse(svg).getroot()  # raises on malformed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    ids = [e.get("id", "") for e in root.iter() if e.get("id", "").startswith("ratio-bar-")]
    text = " ".join("".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text"))
    return ids, text


def test_plots_of_the_committed_baseline(tmp_path: Path) -> None:
    plotter = load_plotter()
    ratios = json.loads(BASELINE.read_text())["ratios"]
    expected: dict[str, list[str]] = {}
    for key in ratios:
        group, subject, peer = (p.strip() for p in key.split("|"))
        expected.setdefault(plotter.area_of(group)[0], []).append(f"{group}: {subject} vs {peer}")
    assert {"codec", "protocol"} <= set(expected)

    assert plotter.main([str(BASELINE), "--out", str(tmp_path)]) == 0
    charts = sorted(p.name for p in tmp_path.iterdir())
    assert charts == sorted(f"bench-{area}.svg" for area in expected)
    bars = 0
    for area, labels in expected.items():
        ids, text = bars_and_texts(tmp_path / f"bench-{area}.svg")
        assert len(ids) == len(labels) == len(set(ids))  # one bar per ratio
        for label in labels:
            assert label in text
        bars += len(ids)
    assert bars == len(ratios) > 0


def test_a_later_run_replaces_and_adds_ratios(tmp_path: Path) -> None:
    run = tmp_path / "ratios.json"
    entry = {"group": "g", "subject": "pykaf", "peer": "p", "params": "", "ratio": 0.5}
    run.write_text(
        json.dumps(
            {
                "ratios": {
                    "encode-none | pykaf | aiokafka": {**entry, "ratio": 123.0},
                    "produce-1M-tansu | pykaf[batch] | confluent-kafka": entry,
                    "produce-1M-mock | pykaf[batch] | confluent-kafka": {**entry, "ratio": 2.5},
                    "something-new | pykaf | peer": entry,
                }
            }
        )
    )
    # The baseline's codec ratios only: the run's producer ratios are then all
    # the producer chart shows (the real baseline has producer ratios too).
    base = json.loads(BASELINE.read_text())
    base["ratios"] = {
        k: v for k, v in base["ratios"].items() if k.startswith(("encode-", "decode-"))
    }
    codec_baseline = tmp_path / "baseline.json"
    codec_baseline.write_text(json.dumps(base))
    out = tmp_path / "img"
    plotter = load_plotter()
    assert plotter.main([str(codec_baseline), str(run), "--out", str(out)]) == 0
    ids, text = bars_and_texts(out / "bench-producer.svg")
    assert len(ids) == 2
    assert "produce-1M-mock: pykaf[batch] vs confluent-kafka" in text
    assert "2.50x" in text and "0.5x" in text
    _ids, codec_text = bars_and_texts(out / "bench-codec.svg")
    assert "123.00x" in codec_text  # the run's ratio replaced the baseline's
    assert len(bars_and_texts(out / "bench-other.svg")[0]) == 1


def test_unusable_input_is_refused(tmp_path: Path) -> None:
    plotter = load_plotter()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ratios": {"no pipes here": 1.0}}))
    assert plotter.main([str(bad), "--out", str(tmp_path)]) == 2
    bad.write_text(json.dumps({"ratios": {"a | b | c": 0}}))
    assert plotter.main([str(bad), "--out", str(tmp_path)]) == 2
    bad.write_text("not json")
    assert plotter.main([str(bad), "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.glob("*.svg"))


def test_benchmarks_page_embeds_the_committed_plots() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    for name in ("codec", "protocol"):
        assert f"](img/bench-{name}.svg)" in page
    for svg in (ROOT / "docs" / "img").glob("bench-*.svg"):
        assert f"](img/{svg.name})" in page, f"{svg.name} is not shown on docs/benchmarks.md"
        ids, _text = bars_and_texts(svg)
        assert ids
