"""confluent-kafka's ``KafkaError`` and ``KafkaException``, made from pykaf's errors."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from pykaf import errors

if TYPE_CHECKING:
    from pykaf.compat._options import UserNames

#: librdkafka's local (client-side) error codes used by the shim, and their names.
LOCAL_CODES: dict[str, int] = {
    "_BAD_MSG": -199,
    "_DESTROY": -197,
    "_FAIL": -196,
    "_TRANSPORT": -195,
    "_MSG_TIMED_OUT": -192,
    "_PARTITION_EOF": -191,
    "_UNKNOWN_PARTITION": -190,
    "_UNKNOWN_TOPIC": -188,
    "_ALL_BROKERS_DOWN": -187,
    "_INVALID_ARG": -186,
    "_TIMED_OUT": -185,
    "_QUEUE_FULL": -184,
    "_UNKNOWN_GROUP": -179,
    "_STATE": -172,
    "_NOT_IMPLEMENTED": -170,
    "_AUTHENTICATION": -169,
    "_NO_OFFSET": -168,
    "_FATAL": -150,
    "_PURGE_INFLIGHT": -151,
    "_PURGE_QUEUE": -152,
    "_NOT_CONFIGURED": -145,
    "_FENCED": -144,
}

#: Kafka error names that librdkafka spells differently (code -> librdkafka's name).
LIBRDKAFKA_NAMES: dict[int, str] = {
    -1: "UNKNOWN",
    2: "INVALID_MSG",
    3: "UNKNOWN_TOPIC_OR_PART",
    4: "INVALID_MSG_SIZE",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MSG_SIZE_TOO_LARGE",
    11: "STALE_CTRL_EPOCH",
    17: "TOPIC_EXCEPTION",
}

_NAMES = {code: name for name, code in LOCAL_CODES.items()}
_FATAL_CODES = {LOCAL_CODES["_FATAL"], LOCAL_CODES["_FENCED"]}


def _broker_names() -> dict[int, str]:
    names: dict[int, str] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, errors.KafkaError):
            code = value.code
            if value is not errors.KafkaError and isinstance(code, int):
                names.setdefault(code, value.name)
    names.update(LIBRDKAFKA_NAMES)
    return names


_BROKER_NAMES = _broker_names()
_RETRIABLE = {
    value.code
    for value in vars(errors).values()
    if isinstance(value, type)
    and issubclass(value, errors.KafkaError)
    and value is not errors.KafkaError
    and value.retriable
}


class KafkaError:
    """An error as confluent-kafka reports it: a librdkafka code, its name and a text.

    Local (client-side) codes are negative (``KafkaError._PARTITION_EOF``);
    broker codes are Kafka's own (``KafkaError.UNKNOWN_TOPIC_OR_PART``).

    Args:
        error: the code.
        reason: a human-readable text (default: the code's name).
        fatal: the client cannot be used any more.
        retriable: the operation may succeed if tried again (default: as
            Kafka marks the code).
        txn_requires_abort: the current transaction must be aborted.
    """

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool | None = None,
        txn_requires_abort: bool = False,
    ) -> None:
        if not isinstance(error, int) or isinstance(error, bool):
            raise TypeError(f"KafkaError code must be an int, not {error!r}")
        self._code = error
        self._name = _NAMES.get(error) or _BROKER_NAMES.get(error) or f"ERR_{error}"
        self._reason = reason if reason is not None else self._name
        self._fatal = fatal or error in _FATAL_CODES
        self._retriable = (error in _RETRIABLE) if retriable is None else retriable
        self._abort = txn_requires_abort

    def code(self) -> int:
        """The error code."""
        return self._code

    def name(self) -> str:
        """The code's librdkafka name, e.g. ``_PARTITION_EOF`` or ``UNKNOWN_TOPIC_OR_PART``."""
        return self._name

    def str(self) -> str:
        """The human-readable text."""
        return self._reason

    def fatal(self) -> bool:
        """True when the client that raised it cannot be used any more."""
        return self._fatal

    def retriable(self) -> bool:
        """True when trying the operation again may succeed."""
        return self._retriable

    def txn_requires_abort(self) -> bool:
        """True when the current transaction must be aborted."""
        return self._abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int) and not isinstance(other, bool):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return self._reason

    def __repr__(self) -> builtins.str:
        return f'KafkaError{{code={self._name},val={self._code},str="{self._reason}"}}'


for _name, _code in LOCAL_CODES.items():
    setattr(KafkaError, _name, _code)
for _code, _name in _BROKER_NAMES.items():
    if _name.isidentifier() and not hasattr(KafkaError, _name):
        setattr(KafkaError, _name, _code)


class KafkaException(Exception):
    """confluent-kafka's exception: ``args[0]`` is the :class:`KafkaError`.

    ``KafkaException(KafkaError(...))``, or ``KafkaException(code, reason)``.
    """

    def __init__(self, error: KafkaError | int, *args: Any, **kwargs: Any) -> None:
        if not isinstance(error, KafkaError):
            error = KafkaError(error, *args, **kwargs)
        super().__init__(error)

    def __str__(self) -> str:
        return str(self.args[0])


def from_pykaf(exc: BaseException, names: UserNames | None = None) -> KafkaError:
    """The :class:`KafkaError` a pykaf exception stands for (``args`` keep its text).

    A broker error keeps its code; a delivery failure takes its first
    partition's error; client-side failures take librdkafka's local codes.
    With ``names``, the text names the user's keys (``message.max.bytes``),
    not pykaf's options.
    """
    text = (str(exc) if names is None else names.text(exc)) or type(exc).__name__
    if isinstance(exc, errors.DeliveryError) and exc.failures:
        return from_pykaf(exc.failures[0][3], names)
    if isinstance(exc, errors.KafkaError):
        return KafkaError(exc.code, text, retriable=exc.retriable)
    if isinstance(exc, errors.PurgedError):
        return KafkaError(LOCAL_CODES["_PURGE_INFLIGHT" if exc.in_flight else "_PURGE_QUEUE"], text)
    if isinstance(exc, errors.KafkaTimeoutError):
        return KafkaError(LOCAL_CODES["_TIMED_OUT"], text)
    if isinstance(exc, errors.KafkaConnectionError):
        return KafkaError(LOCAL_CODES["_TRANSPORT"], text, retriable=True)
    if isinstance(exc, errors.BufferFullError):
        return KafkaError(LOCAL_CODES["_QUEUE_FULL"], text)
    if isinstance(exc, errors.ClosedError):
        return KafkaError(LOCAL_CODES["_DESTROY"], text)
    if isinstance(exc, errors.ConfigError | errors.EncodeError | ValueError | TypeError):
        return KafkaError(LOCAL_CODES["_INVALID_ARG"], text)
    return KafkaError(LOCAL_CODES["_FAIL"], text)


def raise_as_kafka(exc: BaseException) -> KafkaException:
    """A :class:`KafkaException` carrying ``exc``'s error, for ``raise ... from exc``."""
    return KafkaException(from_pykaf(exc))
