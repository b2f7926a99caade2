"""Which codec is active, and both implementations exposing the whole interface."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pykaf
from pykaf import codec as public

ROOT = Path(pykaf.__file__).resolve().parent.parent
PYI = Path(pykaf.__file__).resolve().parent / "_codec.pyi"
NO_EXTENSIONS = os.environ.get("PYKAF_NO_EXTENSIONS") == "1"


def _run(env_value: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYKAF_NO_EXTENSIONS"}
    if env_value is not None:
        env["PYKAF_NO_EXTENSIONS"] = env_value
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    code = (
        "import pykaf.codec as c, pykaf._codec_py as p\n"
        "print(c.IMPLEMENTATION)\n"
        "print(c.BatchBuilder is p.BatchBuilder, c.decode_batches is p.decode_batches)\n"
        "b = c.BatchBuilder(); b.append(1, None, b'x')\n"
        "print(len(c.decode_batches(b.build())[0].records))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")


def test_switch_to_python() -> None:
    impl, same, records, _ = _run("1")
    assert impl == "python"
    assert same == "True True"
    assert records == "1"


def test_default_is_cython() -> None:
    if NO_EXTENSIONS:
        pytest.skip("PYKAF_NO_EXTENSIONS=1: the compiled codec is not expected")
    impl, same, records, _ = _run(None)
    assert impl == "cython"
    assert same == "False False"
    assert records == "1"
    # Any value other than "1" leaves the extension on.
    assert _run("0")[0] == "cython"


def test_in_process_selection() -> None:
    if NO_EXTENSIONS:
        assert public.IMPLEMENTATION == "python"
    else:
        assert public.IMPLEMENTATION == "cython"


def test_module_reports_itself(codec: ModuleType) -> None:
    want = "cython" if codec.__name__ == "pykaf._codec" else "python"
    assert want == codec.IMPLEMENTATION


def test_constants(codec: ModuleType) -> None:
    assert (
        codec.COMPRESSION_NONE,
        codec.COMPRESSION_GZIP,
        codec.COMPRESSION_SNAPPY,
        codec.COMPRESSION_LZ4,
        codec.COMPRESSION_ZSTD,
    ) == (0, 1, 2, 3, 4)
    assert (codec.TIMESTAMP_CREATE_TIME, codec.TIMESTAMP_LOG_APPEND_TIME) == (0, 1)
    assert (codec.CONTROL_ABORT, codec.CONTROL_COMMIT) == (0, 1)
    assert codec.RECORD_BATCH_OVERHEAD == 61
    assert codec.NO_PRODUCER_ID == -1


def _interface() -> dict[str, list[str]]:
    """Top-level names of the .pyi, with the members each class declares."""
    tree = ast.parse(PYI.read_text())
    names: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = []
        elif isinstance(node, ast.ClassDef):
            members = []
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    members.append(item.name)
            names[node.name] = members
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id not in {"Buffer", "Header", "Headers"}
        ):
            names[node.target.id] = []
    return names


def test_interface_complete(codec: ModuleType) -> None:
    interface = _interface()
    assert "BatchBuilder" in interface
    assert "decode_record_set" in interface
    for name, members in interface.items():
        assert hasattr(codec, name), f"{codec.__name__} lacks {name}"
        obj = getattr(codec, name)
        for member in members:
            assert hasattr(obj, member), f"{codec.__name__}.{name} lacks {member}"
        assert hasattr(public, name), f"pykaf.codec does not re-export {name}"


def test_builder_instance_attributes(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(compression=1, compression_level=3)
    for attr in (
        "compression", "compression_level", "max_bytes", "max_records", "timestamp_type",
        "record_count", "size", "base_timestamp", "max_timestamp",
    ):  # fmt: skip
        assert hasattr(builder, attr), attr
    ps = codec.ProduceSet(
        max_batch_bytes=4000, max_request_bytes=5000, flush_bytes=6, flush_records=7
    )
    assert (ps.max_request_bytes, ps.flush_bytes, ps.flush_records) == (5000, 6, 7)
