"""What both drop-in shims do to the pykaf options they translate."""

from __future__ import annotations

from typing import Any

from pykaf import ProducerConfig


def fit_largest_message(options: dict[str, Any]) -> None:
    """Widen ``batch_bytes`` and ``max_request_bytes`` to hold ``max_message_bytes``.

    Both other clients take one "largest message" setting; pykaf's batches and
    requests must hold such a message too, so a larger one raises their limits
    (``max_request_bytes`` only where the caller did not set it).
    """
    largest = options.get("max_message_bytes")
    if isinstance(largest, int):
        defaults = ProducerConfig()
        options["batch_bytes"] = max(defaults.batch_bytes, largest)
        options.setdefault("max_request_bytes", max(defaults.max_request_bytes, largest))
