"""What the shim's producer, consumer and admin client share: serializers, an admin link."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pykaf import errors as pykaf_errors
from pykaf.compat._options import UserNames
from pykaf.compat.kafka.errors import (
    IllegalStateError,
    KafkaConfigurationError,
    NoBrokersAvailable,
    from_pykaf,
)
from pykaf.sync import Admin as SyncAdmin


def serializer_function(
    name: str, serializer: Any, method_name: str = "serialize"
) -> Callable[[str, Any, Any], Any] | None:
    """A ``(topic, headers, data)`` function for a kafka-python (de)serializer option.

    kafka-python takes a plain callable of the data, or an object with
    ``serialize(topic, headers, data)`` (``method_name``: ``deserialize`` for
    consumers).

    Raises:
        KafkaConfigurationError: neither.
    """
    if serializer is None:
        return None
    method = getattr(serializer, method_name, None)
    if callable(method):
        return lambda topic, headers, data: method(topic, headers, data)
    if callable(serializer):
        return lambda topic, headers, data: serializer(data)
    raise KafkaConfigurationError(f"{name} must be callable, not {serializer!r}")


def open_admin(
    servers: list[str], options: dict[str, Any], names: UserNames | None = None
) -> SyncAdmin:
    """A :class:`pykaf.sync.Admin`, its errors as kafka-python's.

    Raises:
        NoBrokersAvailable: no bootstrap server could be reached.
        KafkaConfigurationError: a bad option.
    """
    try:
        return SyncAdmin(servers, **options)
    except pykaf_errors.KafkaConnectionError as exc:
        raise NoBrokersAvailable(str(exc)) from exc
    except pykaf_errors.PykafError as exc:
        raise from_pykaf(exc, names) from exc


class AdminLink:
    """An admin client made on first use (metadata, offsets) and closed with its owner."""

    def __init__(
        self,
        servers: list[str],
        options: dict[str, Any],
        owner: str,
        names: UserNames | None = None,
    ) -> None:
        self.servers = servers
        self.options = options
        self.owner = owner
        self.names = names
        self.closed = False
        self.admin: SyncAdmin | None = None
        self.lock = threading.Lock()

    def get(self) -> SyncAdmin:
        """The admin client.

        Raises:
            IllegalStateError: the owner is closed.
        """
        with self.lock:
            if self.closed:
                raise IllegalStateError(f"{self.owner} already closed!")
            if self.admin is None:
                self.admin = open_admin(self.servers, self.options, self.names)
            return self.admin

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call an admin method, raising kafka-python's errors."""
        admin = self.get()
        try:
            return getattr(admin, method)(*args, **kwargs)
        except pykaf_errors.PykafError as exc:
            raise from_pykaf(exc, self.names) from exc

    def close(self) -> None:
        """Close the admin client, if one was made."""
        with self.lock:
            self.closed = True
            admin, self.admin = self.admin, None
        if admin is not None:
            admin.close()
