"""pykaf: a high-throughput Kafka client for Python on trio, with a Cython codec.

This module only re-exports the public names; the code lives in private modules.
"""

from pykaf import codec, errors
from pykaf._version import __version__

__all__ = ["__version__", "codec", "errors"]
