"""Loading the runnable examples of ``docs/examples/`` in the tests that run them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def load_example(filename: str) -> ModuleType:
    """Import ``docs/examples/<filename>`` as a module (the examples are not a package)."""
    path = EXAMPLES / filename
    spec = importlib.util.spec_from_file_location(f"docs_example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
