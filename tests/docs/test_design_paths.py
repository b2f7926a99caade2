"""docs/design.md names only files that exist: a moved or deleted module fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_file_the_design_page_names_exists() -> None:
    page = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"`((?:pykaf|tools|tests|bench)/[\w/.-]+\.(?:py|pyx|pyi))`", page))
    assert named, "the page names no file: the pattern is wrong"
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
