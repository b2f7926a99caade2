"""Broker workarounds live in one registry (pykaf.protocol.quirks), and each use names its entry."""

from __future__ import annotations

import re
from pathlib import Path

from pykaf.protocol import quirks

PKG = Path(__file__).parents[2] / "pykaf"
TAG = re.compile(r"quirk: ([a-z0-9-]+)")
#: Words that name a broker pykaf bends for.
BROKERS = re.compile(r"tansu|librdkafka's mock|mock cluster|mock broker|mockcluster", re.I)
#: Where those brokers are spoken of for another reason than a workaround:
#: launching them (pykaf.testing), the demo's embedded Tansu, and the registry.
NOT_WORKAROUNDS = ("testing/", "demo.py", "protocol/quirks.py")


def _library() -> dict[str, str]:
    return {
        p.relative_to(PKG).as_posix(): p.read_text()
        for p in sorted(PKG.rglob("*.py"))
        if not p.relative_to(PKG).as_posix().startswith(NOT_WORKAROUNDS)
    }


def test_every_tag_names_an_entry() -> None:
    unknown = {
        (path, name)
        for path, text in _library().items()
        for name in TAG.findall(text)
        if name not in quirks.QUIRKS
    }
    assert unknown == set()


def test_every_entry_is_used() -> None:
    used = {name for text in _library().values() for name in TAG.findall(text)}
    assert set(quirks.QUIRKS) - used == set()


def test_no_module_bends_for_a_broker_without_a_tag() -> None:
    untagged = [
        path for path, text in _library().items() if BROKERS.search(text) and not TAG.search(text)
    ]
    assert untagged == []


def test_every_entry_says_what_and_why() -> None:
    for name, quirk in quirks.QUIRKS.items():
        assert re.fullmatch(r"[a-z0-9-]+", name)
        assert quirk.broker and quirk.departure and quirk.workaround


def test_mock_is_recognised_by_its_cluster_id() -> None:
    assert quirks.is_librdkafka_mock("mockCluster1a2b")
    assert not quirks.is_librdkafka_mock("MkU3OEVBNTcwNTJENDM2Qk")
    assert not quirks.is_librdkafka_mock(None)


def test_the_design_page_lists_every_entry_as_it_is() -> None:
    """docs/design.md's quirk table is the registry, row for row."""
    page = (PKG.parent / "docs" / "design.md").read_text()
    head = "| quirk | broker | departure | workaround |\n|---|---|---|---|\n"
    assert head in page
    table = page[page.index(head) + len(head) :].split("\n\n", 1)[0]
    expected = "\n".join(
        f"| `{name}` | {q.broker} | {q.departure} | {q.workaround} |"
        for name, q in quirks.QUIRKS.items()
    )
    assert table == expected, "docs/design.md's quirk table is not pykaf.protocol.quirks.QUIRKS"
