"""The package version (kept in step with pyproject.toml)."""

__version__ = "0.1.0.dev0"
"""pykaf's version (PEP 440)."""
