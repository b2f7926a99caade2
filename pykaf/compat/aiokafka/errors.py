"""aiokafka's exception names (``aiokafka.errors``), raised by :mod:`pykaf.compat.aiokafka`.

Code written against aiokafka catches what it always caught::

    from pykaf.compat.aiokafka.errors import KafkaTimeoutError, TopicAlreadyExistsError

The tree is aiokafka's: :class:`KafkaError` (a ``RuntimeError``) with the
client-side classes below it, and :class:`BrokerResponseError` with one class
per Kafka error code up to 79, named as aiokafka names them (code 45 is
``OutOfOrderSequenceNumber``, 6 ``NotLeaderForPartitionError``). ``errno`` is
the code, ``message`` Kafka's symbolic name, ``description`` Kafka's text and
``retriable`` as Kafka marks the code. :func:`for_code` and ``kafka_errors``
are aiokafka's lookups. ``ConsumerStoppedError`` and ``IllegalOperation``
derive from ``Exception`` only, as in aiokafka.

A pykaf error becomes the class an aiokafka user would catch
(:func:`from_pykaf`); the pykaf error stays reachable as ``__cause__``.
"""

from __future__ import annotations

from typing import Any

from pykaf import errors as _pe
from pykaf.compat.kafka import errors as _kafka_python


class KafkaError(RuntimeError):
    """Base class of every error the shim raises (besides the two ``Exception`` ones)."""

    retriable: bool = False
    invalid_metadata: bool = False

    def __str__(self) -> str:
        if not self.args:
            return type(self).__name__
        return f"{type(self).__name__}: {super().__str__()}"


class IllegalStateError(KafkaError):
    """The call is not allowed in the client's state."""


class IllegalArgumentError(KafkaError):
    """An argument is not valid for the call."""


class NoBrokersAvailable(KafkaError):
    """No bootstrap server could be reached."""

    retriable = True
    invalid_metadata = True


class NodeNotReadyError(KafkaError):
    """A broker connection is not ready (not raised by pykaf; kept for ``except``)."""

    retriable = True


class KafkaProtocolError(KafkaError):
    """A broker broke the wire protocol."""

    retriable = True


class CorrelationIdError(KafkaProtocolError):
    """An answer's correlation id matched no request."""

    retriable = True


class Cancelled(KafkaError):
    """The operation was cancelled."""

    retriable = True


class TooManyInFlightRequests(KafkaError):
    """Too many requests in flight (not raised by pykaf; kept for ``except``)."""

    retriable = True


class StaleMetadata(KafkaError):
    """The client's view of the cluster is stale."""

    retriable = True
    invalid_metadata = True


class MetadataEmptyBrokerList(KafkaError):
    """A metadata answer listed no brokers."""

    retriable = True


class UnrecognizedBrokerVersion(KafkaError):
    """The broker's version is unknown (pykaf negotiates each API; not raised)."""


class IncompatibleBrokerVersion(KafkaError):
    """The broker lacks an API the call needs."""


class CommitFailedError(KafkaError):
    """A group commit failed (for instance after a rebalance)."""


class AuthenticationMethodNotSupported(KafkaError):
    """The SASL mechanism is not supported."""


class AuthenticationFailedError(KafkaError):
    """SASL authentication failed."""


class KafkaUnavailableError(KafkaError):
    """No broker answered."""


class KafkaTimeoutError(KafkaError):
    """A call did not finish within its timeout."""


class KafkaConnectionError(KafkaError):
    """A socket or TLS failure talking to a broker."""

    retriable = True
    invalid_metadata = True


class UnsupportedCodecError(KafkaError):
    """A compression codec is not available."""


class KafkaConfigurationError(KafkaError):
    """A configuration option is unknown, unsupported or invalid (the message names it)."""


class QuotaViolationError(KafkaError):
    """A quota was exceeded."""


class ConsumerStoppedError(Exception):
    """A ``get*`` call on a consumer that is stopped (or stopping)."""


class IllegalOperation(Exception):
    """The call is not available with this configuration (a commit with no ``group_id``)."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset="none"`` for a partition."""


class RecordTooLargeError(KafkaError):
    """A record is larger than a batch may be."""


class ProducerClosed(KafkaError):
    """The producer is stopped."""


class ProducerFenced(KafkaError):
    """Another producer took the ``transactional_id`` over (or the transaction timed out)."""

    def __init__(
        self,
        msg: str = (
            "There is a newer producer using the same transactional_id or "
            "transaction timeout occurred (check that processing time is "
            "below transaction_timeout_ms)"
        ),
    ) -> None:
        super().__init__(msg)


class BrokerResponseError(KafkaError):
    """A Kafka error code in a broker's answer: ``errno``, ``message``, ``description``."""

    errno: int
    message: str
    description: str = ""

    def __str__(self) -> str:
        return f"[Error {getattr(self, 'errno', None)}] {super().__str__()}"


class NoError(BrokerResponseError):
    """Kafka code 0: no error."""

    errno = 0
    message = "NO_ERROR"
    description = "No error--it worked!"


#: Kafka error code -> aiokafka's class of that code (aiokafka's own name for it).
kafka_errors: dict[int, type[BrokerResponseError]] = {0: NoError}

# The codes aiokafka's client itself treats as "refresh metadata".
_METADATA_CODES = frozenset({3, 5, 6, 56})


def _code(code: int, name: str) -> type[BrokerResponseError]:
    """The aiokafka class ``name`` of Kafka error ``code``, with pykaf's facts about the code."""
    source = _pe.error_for_code(code)
    assert source is not None and source.code == code, code
    namespace: dict[str, Any] = {
        "errno": code,
        "message": source.name,
        "description": source.description,
        "retriable": source.retriable,
        "invalid_metadata": code in _METADATA_CODES,
        "__doc__": f"Kafka error {code}, {source.name}: {source.description}",
        "__module__": __name__,
    }
    cls: type[BrokerResponseError] = type(name, (BrokerResponseError,), namespace)
    kafka_errors[code] = cls
    return cls


UnknownError = _code(-1, "UnknownError")
OffsetOutOfRangeError = _code(1, "OffsetOutOfRangeError")
CorruptRecordException = _code(2, "CorruptRecordException")
InvalidMessageError = CorruptRecordException
UnknownTopicOrPartitionError = _code(3, "UnknownTopicOrPartitionError")
InvalidFetchRequestError = _code(4, "InvalidFetchRequestError")
LeaderNotAvailableError = _code(5, "LeaderNotAvailableError")
NotLeaderForPartitionError = _code(6, "NotLeaderForPartitionError")
RequestTimedOutError = _code(7, "RequestTimedOutError")
BrokerNotAvailableError = _code(8, "BrokerNotAvailableError")
ReplicaNotAvailableError = _code(9, "ReplicaNotAvailableError")
MessageSizeTooLargeError = _code(10, "MessageSizeTooLargeError")
StaleControllerEpochError = _code(11, "StaleControllerEpochError")
OffsetMetadataTooLargeError = _code(12, "OffsetMetadataTooLargeError")
StaleLeaderEpochCodeError = _code(13, "StaleLeaderEpochCodeError")
GroupLoadInProgressError = _code(14, "GroupLoadInProgressError")
CoordinatorLoadInProgressError = GroupLoadInProgressError
GroupCoordinatorNotAvailableError = _code(15, "GroupCoordinatorNotAvailableError")
CoordinatorNotAvailableError = GroupCoordinatorNotAvailableError
NotCoordinatorForGroupError = _code(16, "NotCoordinatorForGroupError")
NotCoordinatorError = NotCoordinatorForGroupError
InvalidTopicError = _code(17, "InvalidTopicError")
RecordListTooLargeError = _code(18, "RecordListTooLargeError")
NotEnoughReplicasError = _code(19, "NotEnoughReplicasError")
NotEnoughReplicasAfterAppendError = _code(20, "NotEnoughReplicasAfterAppendError")
InvalidRequiredAcksError = _code(21, "InvalidRequiredAcksError")
IllegalGenerationError = _code(22, "IllegalGenerationError")
InconsistentGroupProtocolError = _code(23, "InconsistentGroupProtocolError")
InvalidGroupIdError = _code(24, "InvalidGroupIdError")
UnknownMemberIdError = _code(25, "UnknownMemberIdError")
InvalidSessionTimeoutError = _code(26, "InvalidSessionTimeoutError")
RebalanceInProgressError = _code(27, "RebalanceInProgressError")
InvalidCommitOffsetSizeError = _code(28, "InvalidCommitOffsetSizeError")
TopicAuthorizationFailedError = _code(29, "TopicAuthorizationFailedError")
GroupAuthorizationFailedError = _code(30, "GroupAuthorizationFailedError")
ClusterAuthorizationFailedError = _code(31, "ClusterAuthorizationFailedError")
InvalidTimestampError = _code(32, "InvalidTimestampError")
UnsupportedSaslMechanismError = _code(33, "UnsupportedSaslMechanismError")
IllegalSaslStateError = _code(34, "IllegalSaslStateError")
UnsupportedVersionError = _code(35, "UnsupportedVersionError")
TopicAlreadyExistsError = _code(36, "TopicAlreadyExistsError")
InvalidPartitionsError = _code(37, "InvalidPartitionsError")
InvalidReplicationFactorError = _code(38, "InvalidReplicationFactorError")
InvalidReplicationAssignmentError = _code(39, "InvalidReplicationAssignmentError")
InvalidConfigurationError = _code(40, "InvalidConfigurationError")
NotControllerError = _code(41, "NotControllerError")
InvalidRequestError = _code(42, "InvalidRequestError")
UnsupportedForMessageFormatError = _code(43, "UnsupportedForMessageFormatError")
PolicyViolationError = _code(44, "PolicyViolationError")
OutOfOrderSequenceNumber = _code(45, "OutOfOrderSequenceNumber")
DuplicateSequenceNumber = _code(46, "DuplicateSequenceNumber")
InvalidProducerEpoch = _code(47, "InvalidProducerEpoch")
InvalidTxnState = _code(48, "InvalidTxnState")
InvalidProducerIdMapping = _code(49, "InvalidProducerIdMapping")
InvalidTransactionTimeout = _code(50, "InvalidTransactionTimeout")
ConcurrentTransactions = _code(51, "ConcurrentTransactions")
TransactionCoordinatorFenced = _code(52, "TransactionCoordinatorFenced")
TransactionalIdAuthorizationFailed = _code(53, "TransactionalIdAuthorizationFailed")
SecurityDisabled = _code(54, "SecurityDisabled")
OperationNotAttempted = _code(55, "OperationNotAttempted")
KafkaStorageError = _code(56, "KafkaStorageError")
LogDirNotFound = _code(57, "LogDirNotFound")
SaslAuthenticationFailed = _code(58, "SaslAuthenticationFailed")
UnknownProducerId = _code(59, "UnknownProducerId")
ReassignmentInProgress = _code(60, "ReassignmentInProgress")
DelegationTokenAuthDisabled = _code(61, "DelegationTokenAuthDisabled")
DelegationTokenNotFound = _code(62, "DelegationTokenNotFound")
DelegationTokenOwnerMismatch = _code(63, "DelegationTokenOwnerMismatch")
DelegationTokenRequestNotAllowed = _code(64, "DelegationTokenRequestNotAllowed")
DelegationTokenAuthorizationFailed = _code(65, "DelegationTokenAuthorizationFailed")
DelegationTokenExpired = _code(66, "DelegationTokenExpired")
InvalidPrincipalType = _code(67, "InvalidPrincipalType")
NonEmptyGroup = _code(68, "NonEmptyGroup")
GroupIdNotFound = _code(69, "GroupIdNotFound")
FetchSessionIdNotFound = _code(70, "FetchSessionIdNotFound")
InvalidFetchSessionEpoch = _code(71, "InvalidFetchSessionEpoch")
ListenerNotFound = _code(72, "ListenerNotFound")
MemberIdRequired = _code(79, "MemberIdRequired")


def for_code(error_code: int) -> type[BrokerResponseError]:
    """The aiokafka class of a Kafka error code (``UnknownError`` for one it has no class for)."""
    return kafka_errors.get(error_code, UnknownError)


def from_pykaf(
    error: BaseException, closed: type[BaseException] = IllegalStateError
) -> BaseException:
    """The aiokafka exception a user would catch for ``error`` (a pykaf error).

    The pykaf error is first read as kafka-python's shim reads it (the same
    unwrapping of delivery, admin and consumer errors), then given aiokafka's
    class: by code for a Kafka error (a code aiokafka has no class for gives
    a :class:`BrokerResponseError` with that ``errno``), by name otherwise.
    ``closed`` is the class for pykaf's ``ClosedError`` (``ProducerClosed``
    from a producer, ``ConsumerStoppedError`` from a consumer). Errors that
    are not pykaf's come back unchanged. Raise the result ``from error``.
    """
    if not isinstance(error, _pe.PykafError):
        return error
    if isinstance(error, _pe.ClosedError):
        return closed(str(error))
    if isinstance(error, _pe.ProducerFencedError):
        return ProducerFenced()
    if isinstance(error, _pe.LogTruncationError):
        return OffsetOutOfRangeError(str(error))
    read = _kafka_python.from_pykaf(error)
    cause = read.__cause__ if read.__cause__ is not None else error
    if isinstance(read, _kafka_python.BrokerResponseError):
        cls = kafka_errors.get(read.errno)
        if cls is None:
            out: BaseException = BrokerResponseError(*read.args)
            out.errno = read.errno  # type: ignore[attr-defined]
            out.message = getattr(cause, "name", "UNKNOWN")  # type: ignore[attr-defined]
        else:
            out = cls(*read.args)
    elif isinstance(read, _kafka_python.KafkaError):
        cls_by_name = globals().get(type(read).__name__)
        if isinstance(cls_by_name, type) and issubclass(cls_by_name, KafkaError):
            out = cls_by_name(*read.args)
        else:
            out = KafkaError(*read.args)
    else:
        return read
    if cause is not error:
        out.__cause__ = cause
    return out


__all__ = [
    "AuthenticationFailedError",
    "AuthenticationMethodNotSupported",
    "BrokerNotAvailableError",
    "BrokerResponseError",
    "Cancelled",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "ConcurrentTransactions",
    "ConsumerStoppedError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorrelationIdError",
    "CorruptRecordException",
    "DelegationTokenAuthDisabled",
    "DelegationTokenAuthorizationFailed",
    "DelegationTokenExpired",
    "DelegationTokenNotFound",
    "DelegationTokenOwnerMismatch",
    "DelegationTokenRequestNotAllowed",
    "DuplicateSequenceNumber",
    "FetchSessionIdNotFound",
    "GroupAuthorizationFailedError",
    "GroupCoordinatorNotAvailableError",
    "GroupIdNotFound",
    "GroupLoadInProgressError",
    "IllegalArgumentError",
    "IllegalGenerationError",
    "IllegalOperation",
    "IllegalSaslStateError",
    "IllegalStateError",
    "IncompatibleBrokerVersion",
    "InconsistentGroupProtocolError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigurationError",
    "InvalidFetchRequestError",
    "InvalidFetchSessionEpoch",
    "InvalidGroupIdError",
    "InvalidMessageError",
    "InvalidPartitionsError",
    "InvalidPrincipalType",
    "InvalidProducerEpoch",
    "InvalidProducerIdMapping",
    "InvalidReplicationAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeout",
    "InvalidTxnState",
    "KafkaConfigurationError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "KafkaUnavailableError",
    "LeaderNotAvailableError",
    "ListenerNotFound",
    "LogDirNotFound",
    "MemberIdRequired",
    "MessageSizeTooLargeError",
    "MetadataEmptyBrokerList",
    "NoBrokersAvailable",
    "NoError",
    "NoOffsetForPartitionError",
    "NodeNotReadyError",
    "NonEmptyGroup",
    "NotControllerError",
    "NotCoordinatorError",
    "NotCoordinatorForGroupError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderForPartitionError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OperationNotAttempted",
    "OutOfOrderSequenceNumber",
    "PolicyViolationError",
    "ProducerClosed",
    "ProducerFenced",
    "QuotaViolationError",
    "ReassignmentInProgress",
    "RebalanceInProgressError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "SaslAuthenticationFailed",
    "SecurityDisabled",
    "StaleControllerEpochError",
    "StaleLeaderEpochCodeError",
    "StaleMetadata",
    "TooManyInFlightRequests",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TransactionCoordinatorFenced",
    "TransactionalIdAuthorizationFailed",
    "UnknownError",
    "UnknownMemberIdError",
    "UnknownProducerId",
    "UnknownTopicOrPartitionError",
    "UnrecognizedBrokerVersion",
    "UnsupportedCodecError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "for_code",
    "from_pykaf",
    "kafka_errors",
]
