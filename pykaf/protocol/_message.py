"""Base classes of the generated message classes: construction, equality, encode, decode.

A message class carries its definition in ``SCHEMA`` (pykaf's compact format,
see :mod:`pykaf.protocol._schema`) and names its nested struct classes as class
attributes. The first use of a message or of one of its structs parses the
definition and binds every struct to its class (importing 70 messages parses
nothing); ``__init__``, the encoders and the decoders are compiled on first use
and cached per class (and per version).
"""

from __future__ import annotations

import re
import struct
from typing import Any, ClassVar, TypeVar

from pykaf.errors import UnsupportedVersionError
from pykaf.protocol import _codegen, _wire
from pykaf.protocol._decoders import build_decoder
from pykaf.protocol._encoders import build_encoder
from pykaf.protocol._errors import EncodeError, MalformedMessageError
from pykaf.protocol._schema import StructSpec, parse_fields
from pykaf.protocol._validate import explain

_M = TypeVar("_M", bound="Message")
_D = TypeVar("_D", bound="Data")

_RECORDS_TYPE = re.compile(r" records ")
# What reading past the end of the data or garbage in it raises inside a decoder.
_DECODE_ERRORS = (struct.error, IndexError, ValueError, TypeError, OverflowError, MemoryError)
# What a value of the wrong type or range raises inside an encoder.
_ENCODE_ERRORS = (struct.error, AttributeError, TypeError, ValueError, OverflowError)


class Struct:
    """Base of every protocol struct: keyword construction, ``==`` and ``repr``.

    Attributes:
        unknown_tags: tagged fields this version of pykaf does not know, by tag
            number, as raw bytes (None when there are none). They were read from
            the wire and are written back, in tag order, when the object is
            encoded in a flexible version.
    """

    __slots__ = ("unknown_tags",)

    unknown_tags: dict[int, bytes] | None
    _attrs: ClassVar[tuple[str, ...]] = ()
    _base: ClassVar[type[Struct]]
    _owner: ClassVar[type[Message]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The generated classes list their fields in wire order in __slots__.
        if "_base" not in cls.__dict__:  # (the read-only shared defaults set their own)
            cls._attrs = tuple(cls.__dict__.get("__slots__", ()))
            cls._base = cls

    def __init__(self, **fields: Any) -> None:
        # The first instance compiles the class's own __init__ and installs it.
        cls = type(self)
        init = _codegen.build_init(spec_of(cls))
        setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses a method assignment)
        init(self, **fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct) or other._base is not self._base:
            return NotImplemented
        for attr in self._attrs:
            if getattr(self, attr) != getattr(other, attr):
                return False
        return (self.unknown_tags or None) == (other.unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{a}={_short_repr(getattr(self, a))}" for a in self._attrs]
        if self.unknown_tags:
            parts.append(f"unknown_tags={self.unknown_tags!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _short_repr(value: Any) -> str:
    if isinstance(value, memoryview):
        return f"<{value.nbytes} bytes>"
    return repr(value)


class Message(Struct):
    """A top-level versioned structure: a request, a response or a data structure.

    Attributes:
        MIN_VERSION: the lowest version pykaf encodes and decodes.
        MAX_VERSION: the highest.
        FLEXIBLE_VERSION: the first flexible version (compact lengths, tagged
            fields), or None if no version is flexible.
    """

    __slots__ = ()

    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_VERSION: ClassVar[int | None]
    #: The highest version is still under development in Kafka (not yet stable).
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False
    SCHEMA: ClassVar[str]
    _encoders: ClassVar[dict[int, _codegen.Encoder]]
    _decoders: ClassVar[dict[int, _codegen.Decoder]]
    _view_decoders: ClassVar[dict[int, _codegen.Decoder]]
    _has_records: ClassVar[bool]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "SCHEMA" in cls.__dict__:
            # The definition is parsed on first use (see spec_of), not at import.
            cls._owner = cls
            for value in cls.__dict__.values():
                if isinstance(value, type) and issubclass(value, Struct):
                    value._owner = cls
            cls._encoders = {}
            cls._decoders = {}
            cls._view_decoders = {}
            cls._has_records = _RECORDS_TYPE.search(cls.SCHEMA) is not None

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """Whether ``version`` uses compact lengths and tagged fields."""
        return cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION

    def encode(self, version: int) -> bytes:
        """The message body in ``version`` (no size prefix, no header).

        Raises:
            UnsupportedVersionError: ``version`` is outside ``MIN_VERSION..MAX_VERSION``.
            FieldVersionError: a field set to a non-default value does not exist
                in ``version`` and Kafka does not mark it ignorable.
            EncodeError: a value has the wrong type or range, or is None where
                ``version`` does not allow null.
        """
        parts = self.encode_parts(version)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

    def encode_parts(self, version: int) -> list[bytes | bytearray | memoryview]:
        """:meth:`encode`'s body as parts to join (a large record set is one, not copied).

        For a caller that joins the body with more (a request's size and
        header): the body's bytes are then copied once.

        Raises:
            the errors of :meth:`encode`.
        """
        fn = self._encoders.get(version)
        if fn is None:
            fn = _compile_encoder(type(self), version)
        try:
            return fn(self)
        except _ENCODE_ERRORS as exc:
            raise EncodeError(explain(self, spec_of(type(self)), version, exc)) from exc

    @classmethod
    def decode(cls: type[_M], data: bytes | bytearray | memoryview, version: int) -> _M:
        """Decode a message body of ``version``; bytes after the message are ignored.

        ``records`` fields are memoryview slices of ``data`` (no copy).

        Raises:
            UnsupportedVersionError: ``version`` is outside ``MIN_VERSION..MAX_VERSION``.
            MalformedMessageError: ``data`` is truncated or not a valid message.
        """
        return cls.decode_from(data, version)[0]

    @classmethod
    def decode_from(
        cls: type[_M], data: bytes | bytearray | memoryview, version: int, offset: int = 0
    ) -> tuple[_M, int]:
        """Decode the message starting at ``offset``; return it and the offset after it."""
        if type(data) is bytes:
            fn = cls._decoders.get(version) or _compile_decoder(cls, version, False)
        elif cls._has_records and isinstance(data, memoryview):
            if data.format != "B" or data.ndim != 1:
                data = data.cast("B")
            fn = cls._view_decoders.get(version) or _compile_decoder(cls, version, True)
        else:
            data = bytes(data)
            fn = cls._decoders.get(version) or _compile_decoder(cls, version, False)
        try:
            return fn(data, offset)
        except MalformedMessageError as exc:
            raise MalformedMessageError(f"{cls.__name__} v{version}: {exc}") from None
        except _DECODE_ERRORS as exc:
            raise MalformedMessageError(
                f"{cls.__name__} v{version}: truncated or corrupt ({type(exc).__name__}: {exc})"
            ) from exc


class Request(Message):
    """A request: what a client sends (``API_KEY``, ``API_NAME`` name the API)."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]


class Response(Message):
    """A response: what a broker answers (``API_KEY``, ``API_NAME`` name the API)."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]


class Data(Message):
    """A versioned data structure that travels inside another message's bytes field.

    On the wire it is preceded by its version as an int16 (as the consumer
    group protocol's member metadata and assignments are).
    """

    __slots__ = ()

    def encode_versioned(self, version: int) -> bytes:
        """The int16 version followed by the structure in that version."""
        return _wire.INT16.pack(version) + self.encode(version)

    @classmethod
    def decode_versioned(cls: type[_D], data: bytes | bytearray | memoryview) -> tuple[_D, int]:
        """Read the int16 version and the structure; return it and the version read.

        A version newer than ``MAX_VERSION`` is read as ``MAX_VERSION`` (newer
        versions only append fields), as Kafka's own clients do.

        Raises:
            MalformedMessageError: too short, a negative version or a corrupt body.
        """
        if len(data) < 2:
            raise MalformedMessageError(f"{cls.__name__}: no version")
        (version,) = _wire.INT16.unpack_from(data, 0)
        if version < cls.MIN_VERSION:
            raise MalformedMessageError(f"{cls.__name__}: invalid version {version}")
        use = min(version, cls.MAX_VERSION)
        obj, _ = cls.decode_from(data, use, 2)
        return obj, version


def _check_version(cls: type[Message], version: int) -> None:
    if not (isinstance(version, int) and cls.MIN_VERSION <= version <= cls.MAX_VERSION):
        raise UnsupportedVersionError(
            f"{cls.__name__} has versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version!r}"
        )


def _compile_encoder(cls: type[Message], version: int) -> _codegen.Encoder:
    _check_version(cls, version)
    fn = build_encoder(spec_of(cls), version, cls.is_flexible(version))
    cls._encoders[version] = fn
    return fn


def _compile_decoder(cls: type[Message], version: int, view: bool) -> _codegen.Decoder:
    _check_version(cls, version)
    fn = build_decoder(spec_of(cls), version, cls.is_flexible(version), view)
    (cls._view_decoders if view else cls._decoders)[version] = fn
    return fn


def spec_of(cls: type[Struct]) -> StructSpec:
    """The parsed definition of a generated class (parsing its message's on first use)."""
    spec: StructSpec | None = cls.__dict__.get("_spec")
    if spec is None:
        _bind(cls._owner)
        spec = cls.__dict__["_spec"]
    return spec


def _bind(cls: type[Message]) -> None:
    """Parse ``cls.SCHEMA`` and bind every struct in it to its class."""
    spec = parse_fields(cls.SCHEMA, cls.__name__)
    bound: list[tuple[type[Struct], StructSpec]] = []
    for s in spec.walk():
        sub = cls if s is spec else getattr(cls, s.name, None)
        if not (isinstance(sub, type) and issubclass(sub, Struct)):
            raise TypeError(f"{cls.__name__}.{s.name} is not a Struct class")
        attrs = tuple(f.attr for f in s.fields)
        if set(sub._attrs) != set(attrs):
            raise TypeError(f"{sub.__name__}.__slots__ does not match its schema: {attrs}")
        s.cls = sub
        bound.append((sub, s))
    for sub, s in bound:
        sub._attrs = tuple(f.attr for f in s.fields)  # wire order, for repr
        sub._spec = s  # type: ignore[attr-defined]
