"""The API reference (docs/reference/) covers every public name, each with a docstring.

The pages are ``::: module`` directives that mkdocstrings renders from the
source (options in mkdocs.yml). A module's public names are its ``__all__``,
or, without one, the names griffe (mkdocstrings' loader) counts as public: those
defined in it, not imported. The checks:

- every public module of pykaf has a page, or a reason here not to;
- every public name of a documented module is an entry (an HTML anchor
  ``module.name``) of the site mkdocs builds, and has a docstring as the
  reference shows it (griffe's, so constants need an attribute docstring).
"""

from __future__ import annotations
import __future__

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tool_loader import load

import pykaf

pytest.importorskip("griffe")  # mkdocstrings' loader: with the docs extra
import griffe

pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$", re.MULTILINE)
# A directive's options block saying the module is read by importing it.
INSPECTED = re.compile(r"\A\s+options:\s*\n(?:\s{4,}\S.*\n)*?\s{4,}force_inspection:\s*true")

# Public modules with no page of their own, and why.
NOT_IN_REFERENCE = {
    "pykaf.cli": "the `pykaf` command, documented as a command on docs/cli.md",
    "pykaf.demo": "`make demo`'s program, not an API",
    "pykaf.compat": "a namespace for the drop-ins; no names of its own",
    "pykaf.protocol": "the sans-I/O wire layer pykaf's clients are built on (docs/design.md)",
    "pykaf.protocol.connection": "part of the wire layer",
    "pykaf.protocol.consumer_protocol": "part of the wire layer",
    "pykaf.protocol.quirks": "part of the wire layer",
    "pykaf.protocol.sasl": "part of the wire layer",
    "pykaf.protocol.versions": "part of the wire layer",
    **{
        f"pykaf.aio.{part}": "pykaf.aio's implementation: its classes and openers are "
        "re-exported by pykaf.aio, whose page documents them"
        for part in ("admin", "client", "consumer", "group", "producer", "share")
    },
}
# Submodules whose every public name is re-exported by a documented package
# (the layout mirrors kafka-python's: `from kafka.producer import ...`).
COVERED_BY = {
    "pykaf.compat.kafka.consumer": "pykaf.compat.kafka",
    "pykaf.compat.kafka.producer": "pykaf.compat.kafka",
    "pykaf.compat.kafka.serializer": "pykaf.compat.kafka",
    "pykaf.compat.aiokafka.consumer": "pykaf.compat.aiokafka",
}


def documented_modules() -> tuple[dict[str, str], set[str]]:
    """Module -> the page (relative to docs/) whose ``::: module`` renders it.

    Also the modules whose directive has ``force_inspection: true``
    (mkdocstrings then reads the imported module, not its source).
    """
    out: dict[str, str] = {}
    inspected = set()
    for page in sorted(REFERENCE.glob("*.md")):
        text = page.read_text()
        for match in DIRECTIVE.finditer(text):
            out[match.group(1)] = page.relative_to(ROOT / "docs").as_posix()
            if INSPECTED.match(text[match.end() :]):
                inspected.add(match.group(1))
    return out, inspected


def public_modules() -> list[str]:
    """pykaf and its modules with no private part in their names."""
    names = ["pykaf"]
    for info in pkgutil.walk_packages(pykaf.__path__, "pykaf."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


PACKAGE = griffe.load("pykaf", search_paths=[str(ROOT)], allow_inspection=False)


def griffe_module(name: str) -> griffe.Object | griffe.Alias:
    """The module as the reference reads it: from the source, or imported when inspected."""
    if name in INSPECTED_MODULES:
        return griffe.inspect(name)
    return PACKAGE if name == "pykaf" else PACKAGE[name.removeprefix("pykaf.")]


def public_names(name: str) -> list[str]:
    """The module's ``__all__``, or griffe's public members without one."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return list(exported)
    return [
        member.name
        for member in griffe_module(name).members.values()
        if not (member.is_alias or member.is_module or member.name.startswith("_"))
        and member.is_public
        # `from __future__ import annotations`, which inspection sees as a name
        and getattr(module, member.name) is not __future__.annotations
    ]


DOCUMENTED, INSPECTED_MODULES = documented_modules()


def test_the_reference_pages_are_found() -> None:
    # Guards the parsing itself: no directive found would check nothing.
    assert {"pykaf", "pykaf.sync", "pykaf.codec", "pykaf.errors"} <= set(DOCUMENTED)
    for module in DOCUMENTED:
        importlib.import_module(module)  # a typo in a directive is no module
    assert {"pykaf.compat.kafka.errors", "pykaf.compat.aiokafka.errors"} == INSPECTED_MODULES


def test_every_public_module_has_a_page_or_a_reason() -> None:
    modules = public_modules()
    missing = [
        m
        for m in modules
        if m not in DOCUMENTED and m not in NOT_IN_REFERENCE and m not in COVERED_BY
    ]
    assert missing == [], (
        f"public modules with no page in docs/reference/: {missing}; add a page with "
        "'::: module' (see docs/reference/index.md) and its line in mkdocs.yml's nav"
    )
    stale = sorted((set(NOT_IN_REFERENCE) | set(COVERED_BY)) - set(modules))
    assert stale == [], f"listed here but gone from pykaf: {stale}"


@pytest.mark.parametrize("module", sorted(COVERED_BY))
def test_covered_submodules_are_re_exported(module: str) -> None:
    parent = importlib.import_module(COVERED_BY[module])
    sub = importlib.import_module(module)
    for name in public_names(module):
        assert name in parent.__all__, f"{module}.{name} is not in {parent.__name__}.__all__"
        assert getattr(parent, name) is getattr(sub, name)


def is_module(module: str, name: str) -> bool:
    """Whether ``module.name`` is a submodule (it then needs its own page, not an entry)."""
    return f"{module}.{name}" in sys.modules and inspect.ismodule(
        getattr(importlib.import_module(module), name)
    )


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_exported_submodules_have_their_own_page(module: str) -> None:
    for name in public_names(module):
        if is_module(module, name):
            full = f"{module}.{name}"
            assert full in DOCUMENTED or full in COVERED_BY, f"{full} has no reference page"


def missing_docstrings(module: str) -> list[str]:
    owner = griffe_module(module)
    missing = []
    for name in public_names(module):
        if is_module(module, name):
            continue
        try:
            docstring = owner[name].docstring
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError) as exc:
            missing.append(f"{name} (griffe cannot resolve it: {exc!r})")
            continue
        if docstring is None or not docstring.value.strip():
            missing.append(name)
    return missing


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_public_name_has_a_docstring(module: str) -> None:
    missing = missing_docstrings(module)
    assert missing == [], (
        f"public names of {module} with no docstring in the reference: {missing} "
        '(a constant takes an attribute docstring: a """string""" on the line after it)'
    )


def test_a_name_without_a_docstring_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "refprobe"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A probe."""\n\n__all__ = ["DOCUMENTED", "BARE", "f"]\n\n'
        'DOCUMENTED = 1\n"""One."""\nBARE = 2\n\n\ndef f() -> None:\n    pass\n'
    )
    probe = griffe.load("refprobe", search_paths=[str(tmp_path)], allow_inspection=False)
    bare = [n for n in ("DOCUMENTED", "BARE", "f") if probe[n].docstring is None]
    assert bare == ["BARE", "f"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once by mkdocs (warnings are errors, as `make docs`)."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def anchors(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_public_name_has_a_reference_entry(module: str, site: Path) -> None:
    page = site / DOCUMENTED[module].removesuffix(".md") / "index.html"
    found = anchors(page)
    assert module in found, f"{DOCUMENTED[module]} does not render {module}"
    missing = [
        name
        for name in public_names(module)
        if f"{module}.{name}" not in found and not is_module(module, name)
    ]
    assert missing == [], (
        f"public names of {module} with no entry on {DOCUMENTED[module]}: {missing}"
    )


def test_the_rst_roles_become_optional_cross_references() -> None:
    rst = load("griffe_rst", ROOT / "tools" / "griffe_rst.py")
    text = (
        "Use :class:`pykaf.Producer` or :meth:`~pykaf.Producer.send()`, see :mod:`pykaf.sync`::\n"
        "\n"
        "    code()\n"
        "::\n"
        "Done: ``literal``."
    )
    assert rst.convert(text) == (
        'Use <autoref identifier="pykaf.Producer" optional><code>pykaf.Producer</code></autoref>'
        ' or <autoref identifier="pykaf.Producer.send" optional><code>send</code></autoref>,'
        ' see <autoref identifier="pykaf.sync" optional><code>pykaf.sync</code></autoref>:\n'
        "\n"
        "    code()\n"
        "Done: ``literal``."
    )
