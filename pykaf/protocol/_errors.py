"""The errors the protocol layer adds to :mod:`pykaf.errors`, defined there.

Split as h11 splits them: :class:`MalformedMessageError` when bytes from a peer
are not a valid message (the peer broke the protocol), :class:`EncodeError` and
:class:`FieldVersionError` when the caller asked to encode something the chosen
version cannot carry. Re-exported here for the protocol modules (and code that
imported them from here).
"""

from __future__ import annotations

from pykaf.errors import EncodeError, FieldVersionError, MalformedMessageError

__all__ = ["EncodeError", "FieldVersionError", "MalformedMessageError"]
