"""A griffe extension for the API reference: pykaf's reST roles as Markdown that links.

pykaf's docstrings are Google style with Sphinx's roles in the prose
(``:class:`pykaf.Producer```, ``:meth:`~pykaf.Producer.send```) and ``::``
before a literal block. mkdocstrings renders docstrings as Markdown, which
would show both as written. This extension, named in mkdocs.yml, rewrites
each docstring as griffe loads it:

- a role becomes an optional cross-reference: a link to the reference entry
  when the target has one (its full name, such as ``pykaf.Producer.send``),
  inline code otherwise; ``~`` shows the last part only, as in Sphinx;
- a line ending in ``::`` ends in ``:`` (the indented block after it is
  Markdown's code block already), and a line that is only ``::`` goes.

The docstrings themselves stay as they are (``help()`` and Sphinx read them).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`<>]+)`")


def role_to_markdown(match: re.Match[str]) -> str:
    """One role as an optional autorefs cross-reference (mkdocs-autorefs' ``<autoref>``)."""
    short, target = match.group(1) == "~", match.group(2).strip()
    target = target.removesuffix("()")
    title = target.rsplit(".", 1)[-1] if short else target
    return (
        f'<autoref identifier="{html.escape(target, quote=True)}" optional>'
        f"<code>{html.escape(title)}</code></autoref>"
    )


def convert(text: str) -> str:
    """A docstring's reST roles and literal-block markers as Markdown."""
    lines = []
    for line in ROLE.sub(role_to_markdown, text).split("\n"):
        if line.strip() == "::":
            continue
        if line.endswith("::"):
            line = line[:-1]
        lines.append(line)
    return "\n".join(lines)


class RstRoles(griffe.Extension):
    """Rewrite every docstring griffe loads (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called by griffe for each object it loads, before any docstring is parsed."""
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
