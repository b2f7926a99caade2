"""kafka-python's serializer classes, for ``key_serializer``, ``value_deserializer``, ..."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

Headers = list[tuple[str, bytes]]


class Serializer(ABC):
    """Turns a key or value into bytes: ``serialize(topic, headers, data)``."""

    @abstractmethod
    def serialize(self, topic: str, headers: Headers, data: Any) -> bytes | None:
        """The bytes to send for ``data``."""

    def close(self) -> None:  # noqa: B027 - an optional hook, as in kafka-python
        """Release what the serializer holds (called on close; nothing by default)."""


class Deserializer(ABC):
    """Turns consumed bytes into a key or value: ``deserialize(topic, headers, data)``."""

    @abstractmethod
    def deserialize(self, topic: str, headers: Headers, data: bytes | None) -> Any:
        """The object for ``data``."""

    def close(self) -> None:  # noqa: B027 - an optional hook, as in kafka-python
        """Release what the deserializer holds (called on close; nothing by default)."""


class DefaultSerializer(Serializer, Deserializer):
    """Text in ``encoding`` (UTF-8 by default); bytes and None pass through unchanged."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, headers: Headers, data: Any) -> bytes | None:
        """``data`` encoded (bytes-like and None unchanged)."""
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        if not isinstance(data, str):
            raise TypeError(f"DefaultSerializer serializes str or bytes, not {type(data).__name__}")
        return data.encode(self.encoding)

    def deserialize(self, topic: str, headers: Headers, data: bytes | None) -> Any:
        """``data`` decoded to str (None unchanged)."""
        return None if data is None else data.decode(self.encoding)


class JsonSerializer(DefaultSerializer):
    """JSON text in ``encoding``; None passes through unchanged."""

    def serialize(self, topic: str, headers: Headers, data: Any) -> bytes | None:
        """``json.dumps(data)``, encoded."""
        return None if data is None else super().serialize(topic, headers, json.dumps(data))

    def deserialize(self, topic: str, headers: Headers, data: bytes | None) -> Any:
        """``json.loads`` of the decoded text."""
        return None if data is None else json.loads(data.decode(self.encoding))


__all__ = ["DefaultSerializer", "Deserializer", "JsonSerializer", "Serializer"]
