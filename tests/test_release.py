"""The release's paperwork: one version everywhere, a changelog entry for it, the licence."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import pykaf

ROOT = Path(__file__).resolve().parent.parent


def pyproject() -> Any:
    """pyproject.toml, parsed (tomllib is Python 3.11's: skipped on 3.10)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def changelog_versions(text: str) -> list[str]:
    """The versions of CHANGELOG.md's release headings (``## [X.Y.Z] - date``), newest first."""
    return re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", text, flags=re.M)


def test_changelog_names_the_package_version_first() -> None:
    versions = changelog_versions((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert versions, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' heading"
    assert versions[0] == pykaf.__version__


def test_changelog_headings_parse() -> None:
    text = "## [Unreleased]\n\n## [0.2.0] - 2027-01-05\n### Added\n## [0.1.0] - 2026-12-02\n"
    assert changelog_versions(text) == ["0.2.0", "0.1.0"]
    assert changelog_versions("## [0.1.0]\n## 0.1.0 - 2026-12-02\n") == []


def test_the_version_is_written_once() -> None:
    project = pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "pykaf._version.__version__"}


def test_licence_files_are_declared_and_present() -> None:
    project = pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE", "NOTICE"]
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    # NOTICE names each vendored file set, and each exists
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    for path in ("tests/data/kafka-specs/errors.tsv", "tests/data/kafka-specs/README.md"):
        assert path in notice and (ROOT / path).is_file()


def test_cibuildwheel_builds_every_python_from_requires_python() -> None:
    project = pyproject()
    lowest = re.fullmatch(r">=3\.(\d+)", project["project"]["requires-python"])
    assert lowest, project["project"]["requires-python"]
    cibw = project["tool"]["cibuildwheel"]
    built = {int(m) for m in re.findall(r"cp3(\d+)-\*", cibw["build"])}
    assert min(built) == int(lowest[1])
    assert built == set(range(min(built), max(built) + 1))  # no version skipped
    for platform in ("linux", "macos", "windows"):
        assert cibw[platform]["archs"], platform
    script = re.search(r"\{project\}/(\S+\.py)", cibw["test-command"])
    assert script and (ROOT / script[1]).is_file()
