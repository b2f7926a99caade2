"""The public surface: every exported name exists, is documented and is exported once."""

from __future__ import annotations

import importlib
import inspect

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


def test_the_sync_and_asyncio_admin_clients_forward_every_admin_call() -> None:
    """``pykaf.sync.Admin`` and ``pykaf.aio.Admin`` each have every call of ``pykaf.Admin``."""
    import pykaf
    import pykaf.aio
    import pykaf.sync

    calls = {
        name
        for name, value in vars(pykaf.Admin).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(value)
    }
    assert len(calls) > 30
    for facade in (pykaf.sync.Admin, pykaf.aio.Admin):
        assert sorted(calls - set(vars(facade))) == [], facade
        for name in calls:
            assert getattr(facade, name).__doc__ == getattr(pykaf.Admin, name).__doc__
