"""The public surface: every exported name exists, is documented and is exported once."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_MODULES = [
    "pykaf",
    "pykaf.aio",
    "pykaf.aio.testing",
    "pykaf.codec",
    "pykaf.errors",
    "pykaf.sync",
    "pykaf.testing",
]


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_all_names_exist_and_are_unique(modname: str) -> None:
    mod = importlib.import_module(modname)
    names = mod.__all__
    assert len(names) == len(set(names)), "a name is exported twice"
    for name in names:
        assert hasattr(mod, name), f"{modname}.{name} is in __all__ but missing"


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_public_callables_have_docstrings(modname: str) -> None:
    mod = importlib.import_module(modname)
    assert mod.__doc__
    for name in mod.__all__:
        obj = getattr(mod, name)
        if callable(obj):
            assert obj.__doc__, f"{modname}.{name} has no docstring"


def test_codec_exports_match_both_implementations() -> None:
    from pykaf import _codec_py, codec

    for name in codec.__all__:
        if name in ("BinaryColumn", "ColumnBatch", "COMPRESSION_NAMES", "compression_code"):
            continue
        assert hasattr(_codec_py, name), name
    compiled = pytest.importorskip("pykaf._codec")
    for name in codec.__all__:
        if name in ("BinaryColumn", "ColumnBatch", "COMPRESSION_NAMES", "compression_code"):
            continue
        assert hasattr(compiled, name), name
