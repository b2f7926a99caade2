"""The package version: the one place it is written.

pyproject.toml reads it (``[tool.setuptools.dynamic]``), ``pykaf.__version__``
re-exports it and ``pykaf --version`` prints it; CHANGELOG.md's newest entry
must name it (a test checks).
"""

__version__ = "0.1.0"
"""pykaf's version (PEP 440)."""
