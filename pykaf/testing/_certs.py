"""Throwaway TLS certificates for tests: a CA, a server and a client certificate.

Generated with ``trustme`` (https://pypi.org/project/trustme/), a small library
made for exactly this, and written as PEM files to a temporary directory so that
clients configured with paths (librdkafka's ``ssl.ca.location``) can use them.
"""

from __future__ import annotations

import importlib
import os
import shutil
import ssl
import tempfile
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any

__all__ = ["TLSCertificates"]

_DEFAULT_SERVER_IDENTITIES = ("localhost", "127.0.0.1", "::1")
_DEFAULT_CLIENT_IDENTITY = "pykaf-test-client"


def _import_trustme() -> Any:
    try:
        return importlib.import_module("trustme")
    except ImportError as exc:
        raise ModuleNotFoundError(
            "test certificates are made with the 'trustme' package, which is not "
            "installed: pip install trustme",
            name="trustme",
        ) from exc


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


class TLSCertificates:
    """A test CA with a server and a client certificate, as PEM files.

    Example:
        >>> with TLSCertificates() as certs:  # doctest: +SKIP
        ...     ctx = certs.client_context()  # trusts the test CA only

    The server certificate is valid for ``localhost``, ``127.0.0.1`` and
    ``::1`` (by default), the client certificate for ``pykaf-test-client``;
    both are signed by the CA and valid for tests' purposes only. The files
    live in a private temporary directory removed by :meth:`cleanup` (or when
    the object is garbage-collected, or at interpreter exit).

    Args:
        server_identities: host names and IP addresses the server certificate
            covers (its subject alternative names).
        client_identity: the identity of the client certificate.
        directory: where to write the files; a new temporary directory (removed
            by :meth:`cleanup`) when None. A given directory is left in place.

    Raises:
        ModuleNotFoundError: ``trustme`` is not installed.
    """

    def __init__(
        self,
        *,
        server_identities: Sequence[str] = _DEFAULT_SERVER_IDENTITIES,
        client_identity: str = _DEFAULT_CLIENT_IDENTITY,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        trustme = _import_trustme()
        ca = trustme.CA(organization_name="pykaf tests")
        server = ca.issue_cert(*server_identities, organization_name="pykaf tests")
        client = ca.issue_cert(client_identity, organization_name="pykaf tests")
        owned = directory is None
        self._directory = (
            tempfile.mkdtemp(prefix="pykaf-certs-") if directory is None else os.fspath(directory)
        )
        self._server_identities = tuple(server_identities)
        d = self._directory
        self._ca_file = _write(os.path.join(d, "ca.pem"), ca.cert_pem.bytes())
        self._server_cert_file = _write(
            os.path.join(d, "server.pem"), b"".join(b.bytes() for b in server.cert_chain_pems)
        )
        self._server_key_file = _write(
            os.path.join(d, "server.key"), server.private_key_pem.bytes()
        )
        self._client_cert_file = _write(
            os.path.join(d, "client.pem"), b"".join(b.bytes() for b in client.cert_chain_pems)
        )
        self._client_key_file = _write(
            os.path.join(d, "client.key"), client.private_key_pem.bytes()
        )
        self._finalizer: weakref.finalize[..., TLSCertificates] | None = None
        if owned:
            self._finalizer = weakref.finalize(self, shutil.rmtree, d, ignore_errors=True)
            self._finalizer.atexit = True

    # -- files -----------------------------------------------------------
    @property
    def directory(self) -> str:
        """The directory holding the PEM files."""
        return self._directory

    @property
    def ca_file(self) -> str:
        """The CA certificate (PEM): what a client must trust."""
        return self._ca_file

    @property
    def server_cert_file(self) -> str:
        """The server certificate chain (PEM)."""
        return self._server_cert_file

    @property
    def server_key_file(self) -> str:
        """The server's private key (PEM, unencrypted)."""
        return self._server_key_file

    @property
    def client_cert_file(self) -> str:
        """The client certificate chain (PEM), for mutual TLS."""
        return self._client_cert_file

    @property
    def client_key_file(self) -> str:
        """The client's private key (PEM, unencrypted)."""
        return self._client_key_file

    @property
    def server_identities(self) -> tuple[str, ...]:
        """The names and addresses the server certificate is valid for."""
        return self._server_identities

    # -- contexts --------------------------------------------------------
    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        """An SSL context for a server presenting the server certificate.

        Args:
            require_client_cert: demand a client certificate signed by the CA
                (mutual TLS).
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self._server_cert_file, self._server_key_file)
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=self._ca_file)
        return ctx

    def client_context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """An SSL context for a client that trusts the test CA (and nothing else).

        Hostnames are checked, so connect to one of :attr:`server_identities`.

        Args:
            client_cert: present the client certificate (for mutual TLS).
        """
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self._ca_file)
        if client_cert:
            ctx.load_cert_chain(self._client_cert_file, self._client_key_file)
        return ctx

    def confluent_config(self, *, client_cert: bool = False) -> dict[str, str]:
        """Properties for confluent-kafka (librdkafka): TLS with these certificates.

        Args:
            client_cert: also present the client certificate (for mutual TLS).
        """
        conf = {"security.protocol": "SSL", "ssl.ca.location": self._ca_file}
        if client_cert:
            conf["ssl.certificate.location"] = self._client_cert_file
            conf["ssl.key.location"] = self._client_key_file
        return conf

    # -- life cycle ------------------------------------------------------
    def cleanup(self) -> None:
        """Remove the temporary directory (if this object created it). Idempotent."""
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()

    def __enter__(self) -> TLSCertificates:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"<TLSCertificates {self._directory}>"
