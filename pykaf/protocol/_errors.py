"""The errors the protocol layer adds to :mod:`pykaf.errors`.

Split as h11 splits them: :class:`MalformedMessageError` when bytes from a peer
are not a valid message (the peer broke the protocol), :class:`EncodeError` and
:class:`FieldVersionError` when the caller asked to encode something the chosen
version cannot carry.
"""

from __future__ import annotations

from pykaf.errors import ProtocolError, PykafError, UnsupportedVersionError


class MalformedMessageError(ProtocolError):
    """Bytes that should hold a Kafka message do not: truncated, corrupt or inconsistent."""


class EncodeError(PykafError, ValueError):
    """A message cannot be encoded as it stands.

    A value has the wrong type or is out of range, or a field holds None where
    the chosen version does not allow null. The message names the field.
    """


class FieldVersionError(UnsupportedVersionError):
    """A field set to a non-default value does not exist in the version being encoded.

    Kafka drops such fields silently only when its spec marks them ignorable;
    for the others, sending the message would change its meaning.

    Attributes:
        message_name: the class holding the field (``MetadataRequest``, ``FetchPartition``).
        field: the field's Python name.
        version: the version being encoded.
    """

    def __init__(self, message_name: str, field: str, version: int) -> None:
        self.message_name = message_name
        self.field = field
        self.version = version
        super().__init__(
            f"{message_name}.{field} is set but does not exist in version {version} "
            "(leave it at its default or pick a version that has it)"
        )
