"""README.md: its feature table, its commands and its status say what the checkout has.

The examples themselves run in test_doc_examples.py (``../README.md:LINE``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from md_examples import readme_blocks, stray_directives

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TABLE = re.compile(r"<!-- feature-table -->\n(.*?)\n<!-- /feature-table -->", re.S)
LINK = re.compile(r"\[[^\]]+\]\(([^)#\s]+)(?:#([^)\s]+))?\)")
CODE = re.compile(r"`([^`]+)`")
PEERS = {"confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka", "kafka-python": "kafka"}
# Rows where pykaf has no such feature today (no page, no API to point at).
NOT_YET = {"Schema Registry serializers", "Releases and wheels"}


def feature_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The feature table's header and rows, cells stripped."""
    match = TABLE.search(text)
    assert match is not None, "README.md has no <!-- feature-table --> ... block"
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    header, rule, *rows = cells
    assert all(set(c) <= set("-:") for c in rule)
    return header, rows


def resolve(dotted: str) -> Any:
    """The object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs' toc extension makes it."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(), re.M)}


HEADER, ROWS = feature_rows(README.read_text())


def test_the_table_compares_the_four_clients() -> None:
    assert ["", "pykaf", *PEERS] == HEADER
    assert len(ROWS) >= 10
    assert all(len(row) == len(HEADER) for row in ROWS)
    assert {row[0] for row in ROWS} >= NOT_YET


@pytest.mark.parametrize("row", ROWS, ids=[row[0] for row in ROWS])
def test_each_pykaf_feature_links_its_page_and_names_its_api(row: list[str]) -> None:
    feature, cell = row[0], row[1]
    if feature in NOT_YET:
        assert cell.startswith(("no", "none")), f"{feature}: pykaf has it now? update NOT_YET"
        return
    links = LINK.findall(cell)
    assert links, f"{feature}: the pykaf cell links no docs page"
    for target, anchor in links:
        page = ROOT / target
        assert target.startswith("docs/") and page.is_file(), f"{feature}: {target} is missing"
        if anchor:
            assert anchor in anchors(page), f"{feature}: {target} has no heading #{anchor}"
    names = [c for c in CODE.findall(cell) if c.startswith("pykaf")]
    assert names, f"{feature}: the pykaf cell names no pykaf API"
    for name in names:
        resolve(name)  # raises if the API is gone


@pytest.mark.parametrize("peer", list(PEERS))
def test_modules_named_for_a_peer_exist_in_it(peer: str) -> None:
    package = PEERS[peer]
    column = HEADER.index(peer)
    names = [
        name for row in ROWS for name in CODE.findall(row[column]) if name.split(".")[0] == package
    ]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{peer} is not installed")
    for name in names:
        resolve(name)


def test_resolve_finds_attributes_and_refuses_unknown_names() -> None:
    assert isinstance(resolve("pykaf.sync"), ModuleType)
    assert resolve("pykaf.Producer.send_batch") is not None
    with pytest.raises(AttributeError):
        resolve("pykaf.NoSuchThing")
    with pytest.raises(ImportError):
        resolve("no_such_package_here.x")


def test_asyncio_status_is_current() -> None:
    text = README.read_text()
    says_in_progress = "`pykaf.aio` is in progress" in text
    has_aio = importlib.util.find_spec("pykaf.aio") is not None
    assert says_in_progress != has_aio, (
        "README.md says pykaf.aio is in progress, but it is here: update who should pick it "
        "and the status"
        if has_aio
        else "README.md must say that pykaf.aio is in progress while it is not in pykaf"
    )


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))


def test_the_commands_it_names_are_make_targets() -> None:
    text = README.read_text()
    named = set(re.findall(r"`?make ([a-z][\w-]*)", text))
    assert {"demo", "test"} <= named
    assert named <= make_targets(), f"not in the Makefile: {sorted(named - make_targets())}"


def test_its_examples_are_found_and_well_formed() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 5  # trio, sync, Spark and the two drop-ins
    assert sum(b.uses_spark for b in blocks) == 1
    assert all(not b.error and b.mode != "skip" for b in blocks)
    assert stray_directives("README.md", README.read_text()) == []
