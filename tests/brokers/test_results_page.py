"""docs/compatibility.md is what tools/gen_compat_docs.py draws from the committed results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from pykaf.testing import KAFKA_RELEASES

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "brokers" / "results.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_compat", ROOT / "tools" / "gen_compat_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_drawn_from_the_committed_results() -> None:
    page = (ROOT / "docs" / "compatibility.md").read_text()
    expected = _generator().render(json.loads(RESULTS.read_text()))
    assert page == expected, "run: python tools/gen_compat_docs.py"


def test_the_results_cover_every_release_and_every_row() -> None:
    releases = json.loads(RESULTS.read_text())["releases"]
    assert list(releases) == list(KAFKA_RELEASES)
    rows = [set(r["rows"]) for r in releases.values()]
    assert all(r == rows[-1] for r in rows), "a release lacks rows the others have"
    assert all(
        not v.startswith(("failed", "skipped"))
        for r in releases.values()
        for v in r["rows"].values()
    )


def test_refusals_become_numbered_notes() -> None:
    results = {
        "releases": {
            "3.9.1": {"rows": {"KIP-848 | Groups": "refused: needs 4.0", "KIP-98 | Tx": "passed"}},
            "4.0.2": {"rows": {"KIP-848 | Groups": "passed", "KIP-98 | Tx": "failed"}},
        }
    }
    page = _generator().render(results)
    assert "| KIP | Feature | 3.9.1 | 4.0.2 |" in page
    assert "| Groups | no (1) | yes |" in page
    assert "| Tx | yes | failed |" in page
    assert "1. needs 4.0" in page
    # rows by KIP number: 98 before 848
    assert page.index("| Tx |") < page.index("| Groups |")
