"""docs/errors.md is what tools/gen_errors_docs.py makes from the exception classes today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pykaf import errors

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_errors_docs", ROOT / "tools" / "gen_errors_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_errors_page_is_current() -> None:
    page = (ROOT / "docs" / "errors.md").read_text()
    assert page == load_generator().render(), (
        "docs/errors.md is stale: run python tools/gen_errors_docs.py"
    )


def test_errors_page_lists_every_code_and_class() -> None:
    page = (ROOT / "docs" / "errors.md").read_text()
    coded = [
        obj
        for name in errors.__all__
        if isinstance(obj := getattr(errors, name), type)
        and issubclass(obj, errors.KafkaError)
        and "code" in vars(obj)
        and obj is not errors.KafkaError
    ]
    assert len(coded) > 100
    for cls in coded:
        retriable = "yes" if cls.retriable else "no"
        assert f"| {cls.code} | `{cls.name}` | `{cls.__name__}` | {retriable} |" in page
    tree = page.split("```text\n", 1)[1].split("```", 1)[0]
    in_tree = {line.split("── ")[-1].split("  (")[0] for line in tree.splitlines()}
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.PykafError):
            assert name in in_tree
