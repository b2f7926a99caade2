"""Shared fixtures: both codec implementations, selected per test."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

# Broker fixtures (tansu, mock_cluster, tls_tansu, ...) as users get them.
pytest_plugins = ["pykaf.testing.fixtures"]

NO_EXTENSIONS = os.environ.get("PYKAF_NO_EXTENSIONS") == "1"


def load_codec(kind: str) -> ModuleType:
    """Import the compiled ("cython") or pure-Python ("python") codec.

    The compiled one must load unless PYKAF_NO_EXTENSIONS=1 says it was not
    built: a missing extension is a failure, never a silent fallback.
    """
    if kind == "python":
        return importlib.import_module("pykaf._codec_py")
    try:
        return importlib.import_module("pykaf._codec")
    except ImportError as exc:
        if NO_EXTENSIONS:
            pytest.skip("PYKAF_NO_EXTENSIONS=1: compiled codec not built")
        pytest.fail(f"compiled codec pykaf._codec did not load: {exc}")


@pytest.fixture(params=["cython", "python"])
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """The codec implementation under test; every codec test runs on both."""
    return load_codec(request.param)


@pytest.fixture
def both_codecs() -> tuple[ModuleType, ModuleType]:
    """(compiled, pure-Python): for tests that compare their outputs."""
    return load_codec("cython"), load_codec("python")
