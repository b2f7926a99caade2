"""docs/design.md shows the state tables as they are in the code."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path

import pytest

from pykaf._group import heartbeat_states
from pykaf._group import states as group_states
from pykaf._txn import states as txn_states

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def render(table: Mapping[enum.Enum, Mapping[enum.Enum, enum.Enum]], what: str) -> str:
    """A table as the design page writes it: one row per state, its moves in order."""
    lines = [f"| {what} | event → next {what} |", "|---|---|"]
    for state, moves in table.items():
        listed = ", ".join(f"`{e.name}` → `{to.name}`" for e, to in moves.items()) or "—"
        lines.append(f"| `{state.name}` | {listed} |")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("table", "what"),
    [
        (txn_states.TRANSITIONS, "status"),
        (group_states.TRANSITIONS, "state"),
        (heartbeat_states.TRANSITIONS, "state"),
    ],
    ids=["transaction", "group member", "consumer-protocol member"],
)
def test_the_design_page_shows_the_table(
    table: Mapping[enum.Enum, Mapping[enum.Enum, enum.Enum]], what: str
) -> None:
    block = render(table, what)
    assert block in DESIGN.read_text(), f"docs/design.md should show:\n{block}"
