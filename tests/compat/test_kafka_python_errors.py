"""pykaf.compat.kafka.errors: kafka-python's names, codes and flags; pykaf errors mapped to them."""

from __future__ import annotations

import inspect

import pytest

from pykaf import errors as pykaf_errors
from pykaf.compat.kafka import errors

real = pytest.importorskip("kafka.errors")


def _broker_classes(module: object) -> dict[str, type]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and isinstance(getattr(cls, "errno", None), int)
    }


def test_codes_names_and_retriable_match_kafka_python() -> None:
    ours = _broker_classes(errors)
    theirs = _broker_classes(real)
    shared = set(ours) & set(theirs)
    assert len(shared) >= 120
    for name in sorted(shared):
        assert ours[name].errno == theirs[name].errno, name
    # The names users catch most, all present with kafka-python's codes.
    for name, code in [
        ("UnknownTopicOrPartitionError", 3),
        ("NotLeaderForPartitionError", 6),
        ("RequestTimedOutError", 7),
        ("MessageSizeTooLargeError", 10),
        ("TopicAlreadyExistsError", 36),
        ("NonEmptyGroupError", 68),
        ("GroupIdNotFoundError", 69),
        ("ProducerFencedError", 90),
    ]:
        assert ours[name].errno == code == theirs[name].errno
        assert ours[name].retriable == theirs[name].retriable, name


def test_client_side_names_exist_with_kafka_python_bases() -> None:
    for name in [
        "KafkaError",
        "KafkaTimeoutError",
        "KafkaConfigurationError",
        "IllegalStateError",
        "CommitFailedError",
        "KafkaConnectionError",
        "NoOffsetForPartitionError",
        "BrokerResponseError",
        "AuthorizationError",
    ]:
        ours = getattr(errors, name)
        theirs = getattr(real, name)
        assert ours.retriable == theirs.retriable, name
        ours_bases = {c.__name__ for c in ours.__mro__}
        theirs_bases = {c.__name__ for c in theirs.__mro__} - {"object"}
        assert theirs_bases <= ours_bases | {"Exception", "BaseException"}, name
    assert issubclass(errors.NoBrokersAvailable, errors.KafkaError)
    assert issubclass(errors.TopicAuthorizationFailedError, errors.AuthorizationError)
    assert issubclass(errors.UnknownTopicOrPartitionError, errors.InvalidMetadataError)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (pykaf_errors.TopicExistsError("t"), errors.TopicAlreadyExistsError),
        (pykaf_errors.UnknownTopicOrPartitionError(), errors.UnknownTopicOrPartitionError),
        (pykaf_errors.RecordTooLargeError(), errors.MessageSizeTooLargeError),
        (pykaf_errors.KafkaTimeoutError("slow"), errors.KafkaTimeoutError),
        (pykaf_errors.BufferFullError("full"), errors.KafkaTimeoutError),
        (pykaf_errors.KafkaConnectionError("down"), errors.KafkaConnectionError),
        (pykaf_errors.ConfigError("bad"), errors.KafkaConfigurationError),
        (pykaf_errors.ClosedError("closed"), errors.IllegalStateError),
        (pykaf_errors.TransactionStateError("no txn"), errors.IllegalStateError),
        (
            pykaf_errors.CommitError({("t", 0): pykaf_errors.IllegalGenerationError()}),
            errors.CommitFailedError,
        ),
        (pykaf_errors.TransactionAbortedError("aborted"), errors.TransactionAbortedError),
        (pykaf_errors.ProtocolError("bad bytes"), errors.KafkaProtocolError),
        (
            pykaf_errors.ConsumerError("t", 0, pykaf_errors.OffsetOutOfRangeError()),
            errors.OffsetOutOfRangeError,
        ),
        (
            pykaf_errors.AdminError("create_topics", {"t": pykaf_errors.TopicExistsError()}),
            errors.TopicAlreadyExistsError,
        ),
        (
            pykaf_errors.DeliveryError(
                "lost", [("t", 0, 3, pykaf_errors.NotEnoughReplicasError())]
            ),
            errors.NotEnoughReplicasError,
        ),
        (pykaf_errors.DataLossError("gone"), errors.KafkaError),
    ],
)
def test_from_pykaf(error: BaseException, expected: type) -> None:
    translated = errors.from_pykaf(error)
    assert type(translated) is expected
    assert str(error) in str(translated) or isinstance(
        error, (pykaf_errors.ConsumerError, pykaf_errors.AdminError, pykaf_errors.DeliveryError)
    )


def test_unknown_code_and_foreign_errors() -> None:
    translated = errors.from_pykaf(pykaf_errors.UnknownKafkaError(4242))
    assert isinstance(translated, errors.BrokerResponseError)
    assert translated.errno == 4242
    value_error = ValueError("x")
    assert errors.from_pykaf(value_error) is value_error
    assert str(errors.TopicAlreadyExistsError("t")) == "[Error 36] TopicAlreadyExistsError: t"
    assert str(errors.KafkaTimeoutError("slow")) == "KafkaTimeoutError: slow"


def test_serializers_behave_as_kafka_python_s() -> None:
    from pykaf.compat import kafka

    real = pytest.importorskip("kafka")
    cases = [
        (kafka.DefaultSerializer(), real.DefaultSerializer(), ["text", "ünï", None, b"raw"]),
        (kafka.JsonSerializer(), real.JsonSerializer(), [{"a": [1, 2]}, "s", None, 3]),
    ]
    for ours, theirs, values in cases:
        for data in values:
            encoded = ours.serialize("t", [], data)
            assert encoded == theirs.serialize("t", [], data)
            assert ours.deserialize("t", [], encoded) == theirs.deserialize("t", [], encoded)
    with pytest.raises(TypeError, match="str or bytes"):
        kafka.DefaultSerializer().serialize("t", [], 5)
    assert kafka.IsolationLevel.READ_COMMITTED == real.IsolationLevel.READ_COMMITTED == 1
