"""Build script: compiles the Cython codec ``pykaf._codec``.

Metadata lives in pyproject.toml; this file only declares the extension.
Setting ``PYKAF_NO_EXTENSIONS=1`` at build time skips the compile (the package
then runs on its pure-Python twin, ``pykaf._codec_py``).
"""

import os
import sys

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("PYKAF_NO_EXTENSIONS") != "1":
    from Cython.Build import cythonize

    ext_modules = cythonize(
        [
            Extension(
                "pykaf._codec",
                ["pykaf/_codec.pyx"],
                # MSVC spells it /O2 (and warns of an unknown -O3).
                extra_compile_args=["/O2"] if sys.platform == "win32" else ["-O3"],
            )
        ],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    )

setup(ext_modules=ext_modules)
