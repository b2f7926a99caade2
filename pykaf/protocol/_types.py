"""Type aliases the generated message classes use in their annotations."""

from __future__ import annotations

from typing import TypeAlias

#: A ``records`` field: record batches as built by :mod:`pykaf.codec` (encoded
#: as they are); decoding yields a ``memoryview`` into the response.
Records: TypeAlias = "bytes | bytearray | memoryview"
