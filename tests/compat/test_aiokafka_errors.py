"""pykaf.compat.aiokafka.errors: aiokafka's names, codes and flags; pykaf errors mapped to them."""

from __future__ import annotations

import inspect

import pytest

from pykaf import errors as pykaf_errors
from pykaf.compat.aiokafka import errors

real = pytest.importorskip("aiokafka.errors")


def _classes(module: object) -> dict[str, type]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException)
    }


def test_every_name_of_aiokafka_errors_is_here_with_its_code() -> None:
    ours = _classes(errors)
    theirs = _classes(real)
    missing = sorted(set(theirs) - set(ours))
    assert missing == []
    for name, cls in theirs.items():
        mine = ours[name]
        assert getattr(mine, "errno", None) == getattr(cls, "errno", None), name
        # The same place in the tree: aiokafka's bases by name (Exception stays Exception).
        theirs_bases = {c.__name__ for c in cls.__mro__} - {"object"}
        ours_bases = {c.__name__ for c in mine.__mro__} - {"object", "Generic"}
        assert theirs_bases <= ours_bases, name
    assert errors.KafkaError.__mro__[1] is RuntimeError
    assert not issubclass(errors.ConsumerStoppedError, errors.KafkaError)
    assert errors.CoordinatorNotAvailableError is errors.GroupCoordinatorNotAvailableError
    assert errors.InvalidMessageError is errors.CorruptRecordException


def test_for_code_and_kafka_errors_as_aiokafka() -> None:
    for code in (-1, 0, 3, 6, 36, 45, 68, 79):
        assert errors.for_code(code).__name__ == real.for_code(code).__name__
        assert errors.kafka_errors[code].__name__ == real.kafka_errors[code].__name__
    assert errors.for_code(123456) is errors.UnknownError
    assert errors.for_code(6).retriable and errors.for_code(6).invalid_metadata
    assert str(errors.TopicAlreadyExistsError("x")) == "[Error 36] TopicAlreadyExistsError: x"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (pykaf_errors.TopicExistsError("t"), errors.TopicAlreadyExistsError),
        (pykaf_errors.NotLeaderOrFollowerError("p"), errors.NotLeaderForPartitionError),
        (pykaf_errors.OutOfOrderSequenceError("s"), errors.OutOfOrderSequenceNumber),
        (pykaf_errors.ProducerFencedError("f"), errors.ProducerFenced),
        (pykaf_errors.InvalidProducerEpochError("e"), errors.InvalidProducerEpoch),
        (
            pykaf_errors.CommitError({("t", 0): pykaf_errors.IllegalGenerationError("g")}),
            errors.CommitFailedError,
        ),
        (pykaf_errors.ConfigError("bad"), errors.KafkaConfigurationError),
        (pykaf_errors.KafkaTimeoutError("slow"), errors.KafkaTimeoutError),
        (pykaf_errors.BufferFullError("full"), errors.KafkaTimeoutError),
        (pykaf_errors.KafkaConnectionError("down"), errors.KafkaConnectionError),
        (pykaf_errors.ClosedError("closed"), errors.IllegalStateError),
        (pykaf_errors.LogTruncationError("t", 0, 10, 5), errors.OffsetOutOfRangeError),
        (pykaf_errors.TransactionAbortedError("a"), errors.KafkaError),
    ],
)
def test_pykaf_errors_become_aiokafka_classes(error: Exception, expected: type) -> None:
    out = errors.from_pykaf(error)
    assert type(out) is expected


def test_closed_error_takes_the_callers_class() -> None:
    closed = pykaf_errors.ClosedError("gone")
    assert type(errors.from_pykaf(closed, errors.ProducerClosed)) is errors.ProducerClosed
    stopped = errors.from_pykaf(closed, errors.ConsumerStoppedError)
    assert type(stopped) is errors.ConsumerStoppedError


def test_a_delivery_error_becomes_its_first_cause() -> None:
    cause = pykaf_errors.RecordTooLargeError("too big")
    out = errors.from_pykaf(pykaf_errors.DeliveryError("1 failed", [("t", 0, 1, cause)]))
    assert type(out) is errors.MessageSizeTooLargeError
    assert out.__cause__ is cause


def test_a_code_aiokafka_has_no_class_for_keeps_its_errno() -> None:
    out = errors.from_pykaf(pykaf_errors.FencedMemberEpochError("epoch"))
    assert type(out) is errors.BrokerResponseError
    assert out.errno == pykaf_errors.FencedMemberEpochError.code


def test_other_errors_pass_through() -> None:
    error = ValueError("mine")
    assert errors.from_pykaf(error) is error
