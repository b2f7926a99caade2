"""The pykaf.testing fixtures, for the tests of pykaf.testing itself.

A project enables them with ``pytest_plugins = ["pykaf.testing.fixtures"]`` in
its top-level conftest; this folder imports them instead, which a non-root
conftest may do.
"""

from pykaf.testing.fixtures import (  # noqa: F401
    mock_cluster,
    tansu,
    tansu_fresh,
    tls_certs,
    tls_mock_cluster,
    tls_tansu,
)
