"""docs/design.md's diagrams are drawn from the code: a stale drawing fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "gen_design_diagrams", ROOT / "tools" / "gen_design_diagrams.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["design-layers.svg", "design-producer.svg"])
def test_committed_diagram_matches_the_code(name: str) -> None:
    drawn = {path.name: svg for path, svg in _tool().drawings().items()}
    committed = (ROOT / "docs" / "img" / name).read_text()
    assert committed == drawn[name], f"run: python tools/gen_design_diagrams.py ({name} is stale)"


def test_design_page_shows_both_diagrams() -> None:
    page = (ROOT / "docs" / "design.md").read_text()
    assert "img/design-layers.svg" in page
    assert "img/design-producer.svg" in page


def test_a_circle_is_refused() -> None:
    tool = _tool()

    class Graph:
        modules = {"pykaf._producer.a", "pykaf._producer.b"}

        def find_modules_directly_imported_by(self, m: str) -> set[str]:
            return {"pykaf._producer.b"} if m.endswith("a") else {"pykaf._producer.a"}

    with pytest.raises(SystemExit, match="import circle"):
        tool.draw_pipeline(Graph())
