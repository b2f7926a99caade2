"""kafka-python's exception names (``kafka.errors``), raised by :mod:`pykaf.compat.kafka`.

Every error the shim raises is one of these classes, so code written against
kafka-python catches what it always caught::

    from pykaf.compat.kafka.errors import KafkaTimeoutError, TopicAlreadyExistsError

A pykaf error becomes the class a kafka-python user would catch
(:func:`from_pykaf`); the pykaf error stays reachable as ``__cause__``. Broker
error codes map one class per code, with kafka-python's names (for instance
code 36 is ``TopicAlreadyExistsError``, code 6 ``NotLeaderForPartitionError``),
``errno`` the code, ``message`` Kafka's symbolic name and ``retriable`` as
Kafka marks it.
"""

from __future__ import annotations

import typing
from typing import Any

from pykaf import errors as _pe

if typing.TYPE_CHECKING:
    from pykaf.compat._options import UserNames


class KafkaError(Exception):
    """Base class of every error raised by :mod:`pykaf.compat.kafka`."""

    retriable: bool = False
    invalid_metadata: bool = False

    def __str__(self) -> str:
        if not self.args:
            return type(self).__name__
        return f"{type(self).__name__}: {super().__str__()}"


class RetriableError(KafkaError):
    """The operation may succeed if retried."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """The client's view of the cluster is stale; a metadata refresh may cure it."""

    invalid_metadata = True


class Cancelled(RetriableError):
    """The operation was cancelled."""


class CommitFailedError(KafkaError):
    """A consumer group commit failed (for instance after a rebalance)."""


class IllegalArgumentError(KafkaError):
    """An argument is not valid for the call."""


class IllegalStateError(KafkaError):
    """The call is not allowed in the client's state (closed, no transaction, ...)."""


class KafkaConfigurationError(KafkaError):
    """A configuration option is unknown, unsupported or invalid."""


class KafkaConnectionError(InvalidMetadataError):
    """A socket or TLS failure talking to a broker."""


class NoBrokersAvailable(KafkaError):
    """No bootstrap server could be reached when the client was made."""


class KafkaProtocolError(KafkaError):
    """A broker broke the wire protocol."""


class KafkaTimeoutError(RetriableError):
    """A blocking call did not finish within its timeout."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and no ``auto_offset_reset`` policy for a partition."""


class LogTruncationError(KafkaError):
    """The partition's log was truncated below the consumer's position."""


class UnsupportedCodecError(KafkaError):
    """A compression codec is not available."""


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent."""

    message = "Failing batch since transaction was aborted"


class BrokerResponseError(KafkaError):
    """A Kafka error code in a broker's answer: ``errno``, ``message``, ``description``."""

    errno: int = -1
    message: str = "UNKNOWN"
    description: str = ""

    def __str__(self) -> str:
        text = f"[Error {self.errno}] {type(self).__name__}"
        return f"{text}: {self.args[0]}" if self.args else text


class AuthorizationError(BrokerResponseError):
    """The client is not authorized for the operation."""


class NoError(BrokerResponseError):
    """Kafka code 0: no error (what per-item results hold for a success)."""

    errno = 0
    message = "NO_ERROR"


#: Kafka error code -> the class of that code.
_BY_ERRNO: dict[int, type[BrokerResponseError]] = {}

_METADATA_CODES = frozenset({3, 5, 6, 9, 13})


def _broker_error(source: type[_pe.KafkaError], name: str) -> type[BrokerResponseError]:
    """The kafka-python class of the Kafka error code that ``source`` (a pykaf class) has."""
    bases: tuple[type, ...]
    if source.code in _METADATA_CODES:
        bases = (InvalidMetadataError, BrokerResponseError)
    elif source.retriable:
        bases = (RetriableError, BrokerResponseError)
    elif "Authorization" in source.__name__:
        bases = (AuthorizationError,)
    else:
        bases = (BrokerResponseError,)
    namespace: dict[str, Any] = {
        "errno": source.code,
        "message": source.name,
        "description": source.description,
        "retriable": source.retriable,
        "__doc__": f"Kafka error {source.code}, {source.name}: {source.description}",
        "__module__": __name__,
    }
    cls: type[BrokerResponseError] = type(name, bases, namespace)
    _BY_ERRNO[source.code] = cls
    return cls


UnknownError = _broker_error(_pe.UnknownServerError, "UnknownError")
OffsetOutOfRangeError = _broker_error(_pe.OffsetOutOfRangeError, "OffsetOutOfRangeError")
CorruptRecordError = _broker_error(_pe.CorruptRecordError, "CorruptRecordError")
UnknownTopicOrPartitionError = _broker_error(
    _pe.UnknownTopicOrPartitionError, "UnknownTopicOrPartitionError"
)
InvalidFetchRequestError = _broker_error(_pe.InvalidFetchSizeError, "InvalidFetchRequestError")
LeaderNotAvailableError = _broker_error(_pe.LeaderNotAvailableError, "LeaderNotAvailableError")
NotLeaderForPartitionError = _broker_error(
    _pe.NotLeaderOrFollowerError, "NotLeaderForPartitionError"
)
RequestTimedOutError = _broker_error(_pe.TimeoutError, "RequestTimedOutError")
BrokerNotAvailableError = _broker_error(_pe.BrokerNotAvailableError, "BrokerNotAvailableError")
ReplicaNotAvailableError = _broker_error(_pe.ReplicaNotAvailableError, "ReplicaNotAvailableError")
MessageSizeTooLargeError = _broker_error(_pe.RecordTooLargeError, "MessageSizeTooLargeError")
StaleControllerEpochError = _broker_error(_pe.ControllerMovedError, "StaleControllerEpochError")
OffsetMetadataTooLargeError = _broker_error(
    _pe.OffsetMetadataTooLargeError, "OffsetMetadataTooLargeError"
)
NetworkExceptionError = _broker_error(_pe.NetworkError, "NetworkExceptionError")
CoordinatorLoadInProgressError = _broker_error(
    _pe.CoordinatorLoadInProgressError, "CoordinatorLoadInProgressError"
)
CoordinatorNotAvailableError = _broker_error(
    _pe.CoordinatorNotAvailableError, "CoordinatorNotAvailableError"
)
NotCoordinatorError = _broker_error(_pe.NotCoordinatorError, "NotCoordinatorError")
InvalidTopicError = _broker_error(_pe.InvalidTopicError, "InvalidTopicError")
RecordListTooLargeError = _broker_error(_pe.RecordBatchTooLargeError, "RecordListTooLargeError")
NotEnoughReplicasError = _broker_error(_pe.NotEnoughReplicasError, "NotEnoughReplicasError")
NotEnoughReplicasAfterAppendError = _broker_error(
    _pe.NotEnoughReplicasAfterAppendError, "NotEnoughReplicasAfterAppendError"
)
InvalidRequiredAcksError = _broker_error(_pe.InvalidRequiredAcksError, "InvalidRequiredAcksError")
IllegalGenerationError = _broker_error(_pe.IllegalGenerationError, "IllegalGenerationError")
InconsistentGroupProtocolError = _broker_error(
    _pe.InconsistentGroupProtocolError, "InconsistentGroupProtocolError"
)
InvalidGroupIdError = _broker_error(_pe.InvalidGroupIdError, "InvalidGroupIdError")
UnknownMemberIdError = _broker_error(_pe.UnknownMemberIdError, "UnknownMemberIdError")
InvalidSessionTimeoutError = _broker_error(
    _pe.InvalidSessionTimeoutError, "InvalidSessionTimeoutError"
)
RebalanceInProgressError = _broker_error(_pe.RebalanceInProgressError, "RebalanceInProgressError")
InvalidCommitOffsetSizeError = _broker_error(
    _pe.InvalidCommitOffsetSizeError, "InvalidCommitOffsetSizeError"
)
TopicAuthorizationFailedError = _broker_error(
    _pe.TopicAuthorizationError, "TopicAuthorizationFailedError"
)
GroupAuthorizationFailedError = _broker_error(
    _pe.GroupAuthorizationError, "GroupAuthorizationFailedError"
)
ClusterAuthorizationFailedError = _broker_error(
    _pe.ClusterAuthorizationError, "ClusterAuthorizationFailedError"
)
InvalidTimestampError = _broker_error(_pe.InvalidTimestampError, "InvalidTimestampError")
UnsupportedSaslMechanismError = _broker_error(
    _pe.UnsupportedSaslMechanismError, "UnsupportedSaslMechanismError"
)
IllegalSaslStateError = _broker_error(_pe.IllegalSaslStateError, "IllegalSaslStateError")
UnsupportedVersionError = _broker_error(_pe.UnsupportedVersionError, "UnsupportedVersionError")
TopicAlreadyExistsError = _broker_error(_pe.TopicExistsError, "TopicAlreadyExistsError")
InvalidPartitionsError = _broker_error(_pe.InvalidPartitionsError, "InvalidPartitionsError")
InvalidReplicationFactorError = _broker_error(
    _pe.InvalidReplicationFactorError, "InvalidReplicationFactorError"
)
InvalidReplicationAssignmentError = _broker_error(
    _pe.InvalidReplicaAssignmentError, "InvalidReplicationAssignmentError"
)
InvalidConfigurationError = _broker_error(
    _pe.InvalidConfigurationError, "InvalidConfigurationError"
)
NotControllerError = _broker_error(_pe.NotControllerError, "NotControllerError")
InvalidRequestError = _broker_error(_pe.InvalidRequestError, "InvalidRequestError")
UnsupportedForMessageFormatError = _broker_error(
    _pe.UnsupportedForMessageFormatError, "UnsupportedForMessageFormatError"
)
PolicyViolationError = _broker_error(_pe.PolicyViolationError, "PolicyViolationError")
OutOfOrderSequenceNumberError = _broker_error(
    _pe.OutOfOrderSequenceError, "OutOfOrderSequenceNumberError"
)
DuplicateSequenceNumberError = _broker_error(
    _pe.DuplicateSequenceError, "DuplicateSequenceNumberError"
)
InvalidProducerEpochError = _broker_error(
    _pe.InvalidProducerEpochError, "InvalidProducerEpochError"
)
InvalidTxnStateError = _broker_error(_pe.InvalidTxnStateError, "InvalidTxnStateError")
InvalidProducerIdMappingError = _broker_error(
    _pe.InvalidPidMappingError, "InvalidProducerIdMappingError"
)
InvalidTransactionTimeoutError = _broker_error(
    _pe.InvalidTxnTimeoutError, "InvalidTransactionTimeoutError"
)
ConcurrentTransactionsError = _broker_error(
    _pe.ConcurrentTransactionsError, "ConcurrentTransactionsError"
)
TransactionCoordinatorFencedError = _broker_error(
    _pe.TransactionCoordinatorFencedError, "TransactionCoordinatorFencedError"
)
TransactionalIdAuthorizationFailedError = _broker_error(
    _pe.TransactionalIdAuthorizationError, "TransactionalIdAuthorizationFailedError"
)
SecurityDisabledError = _broker_error(_pe.SecurityDisabledError, "SecurityDisabledError")
OperationNotAttemptedError = _broker_error(
    _pe.OperationNotAttemptedError, "OperationNotAttemptedError"
)
KafkaStorageError = _broker_error(_pe.KafkaStorageError, "KafkaStorageError")
LogDirNotFoundError = _broker_error(_pe.LogDirNotFoundError, "LogDirNotFoundError")
SaslAuthenticationFailedError = _broker_error(
    _pe.SaslAuthenticationError, "SaslAuthenticationFailedError"
)
UnknownProducerIdError = _broker_error(_pe.UnknownProducerIdError, "UnknownProducerIdError")
ReassignmentInProgressError = _broker_error(
    _pe.ReassignmentInProgressError, "ReassignmentInProgressError"
)
DelegationTokenAuthDisabledError = _broker_error(
    _pe.DelegationTokenDisabledError, "DelegationTokenAuthDisabledError"
)
DelegationTokenNotFoundError = _broker_error(
    _pe.DelegationTokenNotFoundError, "DelegationTokenNotFoundError"
)
DelegationTokenOwnerMismatchError = _broker_error(
    _pe.DelegationTokenOwnerMismatchError, "DelegationTokenOwnerMismatchError"
)
DelegationTokenRequestNotAllowedError = _broker_error(
    _pe.UnsupportedByAuthenticationError, "DelegationTokenRequestNotAllowedError"
)
DelegationTokenAuthorizationFailedError = _broker_error(
    _pe.DelegationTokenAuthorizationError, "DelegationTokenAuthorizationFailedError"
)
DelegationTokenExpiredError = _broker_error(
    _pe.DelegationTokenExpiredError, "DelegationTokenExpiredError"
)
InvalidPrincipalTypeError = _broker_error(
    _pe.InvalidPrincipalTypeError, "InvalidPrincipalTypeError"
)
NonEmptyGroupError = _broker_error(_pe.GroupNotEmptyError, "NonEmptyGroupError")
GroupIdNotFoundError = _broker_error(_pe.GroupIdNotFoundError, "GroupIdNotFoundError")
FetchSessionIdNotFoundError = _broker_error(
    _pe.FetchSessionIdNotFoundError, "FetchSessionIdNotFoundError"
)
InvalidFetchSessionEpochError = _broker_error(
    _pe.InvalidFetchSessionEpochError, "InvalidFetchSessionEpochError"
)
ListenerNotFoundError = _broker_error(_pe.ListenerNotFoundError, "ListenerNotFoundError")
TopicDeletionDisabledError = _broker_error(
    _pe.TopicDeletionDisabledError, "TopicDeletionDisabledError"
)
FencedLeaderEpochError = _broker_error(_pe.FencedLeaderEpochError, "FencedLeaderEpochError")
UnknownLeaderEpochError = _broker_error(_pe.UnknownLeaderEpochError, "UnknownLeaderEpochError")
UnsupportedCompressionTypeError = _broker_error(
    _pe.UnsupportedCompressionTypeError, "UnsupportedCompressionTypeError"
)
StaleBrokerEpochError = _broker_error(_pe.StaleBrokerEpochError, "StaleBrokerEpochError")
OffsetNotAvailableError = _broker_error(_pe.OffsetNotAvailableError, "OffsetNotAvailableError")
MemberIdRequiredError = _broker_error(_pe.MemberIdRequiredError, "MemberIdRequiredError")
PreferredLeaderNotAvailableError = _broker_error(
    _pe.PreferredLeaderNotAvailableError, "PreferredLeaderNotAvailableError"
)
GroupMaxSizeReachedError = _broker_error(_pe.GroupMaxSizeReachedError, "GroupMaxSizeReachedError")
FencedInstanceIdError = _broker_error(_pe.FencedInstanceIdError, "FencedInstanceIdError")
EligibleLeadersNotAvailableError = _broker_error(
    _pe.EligibleLeadersNotAvailableError, "EligibleLeadersNotAvailableError"
)
ElectionNotNeededError = _broker_error(_pe.ElectionNotNeededError, "ElectionNotNeededError")
NoReassignmentInProgressError = _broker_error(
    _pe.NoReassignmentInProgressError, "NoReassignmentInProgressError"
)
GroupSubscribedToTopicError = _broker_error(
    _pe.GroupSubscribedToTopicError, "GroupSubscribedToTopicError"
)
InvalidRecordError = _broker_error(_pe.InvalidRecordError, "InvalidRecordError")
UnstableOffsetCommitError = _broker_error(
    _pe.UnstableOffsetCommitError, "UnstableOffsetCommitError"
)
ThrottlingQuotaExceededError = _broker_error(
    _pe.ThrottlingQuotaExceededError, "ThrottlingQuotaExceededError"
)
ProducerFencedError = _broker_error(_pe.ProducerFencedError, "ProducerFencedError")
ResourceNotFoundError = _broker_error(_pe.ResourceNotFoundError, "ResourceNotFoundError")
DuplicateResourceError = _broker_error(_pe.DuplicateResourceError, "DuplicateResourceError")
UnacceptableCredentialError = _broker_error(
    _pe.UnacceptableCredentialError, "UnacceptableCredentialError"
)
InconsistentVoterSetError = _broker_error(
    _pe.InconsistentVoterSetError, "InconsistentVoterSetError"
)
InvalidUpdateVersionError = _broker_error(
    _pe.InvalidUpdateVersionError, "InvalidUpdateVersionError"
)
FeatureUpdateFailedError = _broker_error(_pe.FeatureUpdateFailedError, "FeatureUpdateFailedError")
PrincipalDeserializationFailureError = _broker_error(
    _pe.PrincipalDeserializationError, "PrincipalDeserializationFailureError"
)
SnapshotNotFoundError = _broker_error(_pe.SnapshotNotFoundError, "SnapshotNotFoundError")
UnknownTopicIdError = _broker_error(_pe.UnknownTopicIdError, "UnknownTopicIdError")
DuplicateBrokerRegistrationError = _broker_error(
    _pe.DuplicateBrokerRegistrationError, "DuplicateBrokerRegistrationError"
)
BrokerIdNotRegisteredError = _broker_error(
    _pe.BrokerIdNotRegisteredError, "BrokerIdNotRegisteredError"
)
InconsistentTopicIdError = _broker_error(_pe.InconsistentTopicIdError, "InconsistentTopicIdError")
InconsistentClusterIdError = _broker_error(
    _pe.InconsistentClusterIdError, "InconsistentClusterIdError"
)
TransactionalIdNotFoundError = _broker_error(
    _pe.TransactionalIdNotFoundError, "TransactionalIdNotFoundError"
)
FetchSessionTopicIdError = _broker_error(_pe.FetchSessionTopicIdError, "FetchSessionTopicIdError")
IneligibleReplicaError = _broker_error(_pe.IneligibleReplicaError, "IneligibleReplicaError")
NewLeaderElectedError = _broker_error(_pe.NewLeaderElectedError, "NewLeaderElectedError")
OffsetMovedToTieredStorageError = _broker_error(
    _pe.OffsetMovedToTieredStorageError, "OffsetMovedToTieredStorageError"
)
FencedMemberEpochError = _broker_error(_pe.FencedMemberEpochError, "FencedMemberEpochError")
UnreleasedInstanceIdError = _broker_error(
    _pe.UnreleasedInstanceIdError, "UnreleasedInstanceIdError"
)
UnsupportedAssignorError = _broker_error(_pe.UnsupportedAssignorError, "UnsupportedAssignorError")
StaleMemberEpochError = _broker_error(_pe.StaleMemberEpochError, "StaleMemberEpochError")
MismatchedEndpointTypeError = _broker_error(
    _pe.MismatchedEndpointTypeError, "MismatchedEndpointTypeError"
)
UnsupportedEndpointTypeError = _broker_error(
    _pe.UnsupportedEndpointTypeError, "UnsupportedEndpointTypeError"
)
UnknownControllerIdError = _broker_error(_pe.UnknownControllerIdError, "UnknownControllerIdError")
UnknownSubscriptionIdError = _broker_error(
    _pe.UnknownSubscriptionIdError, "UnknownSubscriptionIdError"
)
TelemetryTooLargeError = _broker_error(_pe.TelemetryTooLargeError, "TelemetryTooLargeError")
InvalidRegistrationError = _broker_error(_pe.InvalidRegistrationError, "InvalidRegistrationError")
TransactionAbortableError = _broker_error(
    _pe.TransactionAbortableError, "TransactionAbortableError"
)
InvalidRecordStateError = _broker_error(_pe.InvalidRecordStateError, "InvalidRecordStateError")
ShareSessionNotFoundError = _broker_error(
    _pe.ShareSessionNotFoundError, "ShareSessionNotFoundError"
)
InvalidShareSessionEpochError = _broker_error(
    _pe.InvalidShareSessionEpochError, "InvalidShareSessionEpochError"
)
FencedStateEpochError = _broker_error(_pe.FencedStateEpochError, "FencedStateEpochError")
InvalidVoterKeyError = _broker_error(_pe.InvalidVoterKeyError, "InvalidVoterKeyError")
DuplicateVoterError = _broker_error(_pe.DuplicateVoterError, "DuplicateVoterError")
VoterNotFoundError = _broker_error(_pe.VoterNotFoundError, "VoterNotFoundError")
InvalidRegularExpressionError = _broker_error(
    _pe.InvalidRegularExpressionError, "InvalidRegularExpressionError"
)


def from_pykaf(error: BaseException, names: UserNames | None = None) -> BaseException:
    """The kafka-python exception a user would catch for ``error`` (a pykaf error).

    Errors that are not pykaf's (``TypeError``, ``ValueError``, ...) and this
    module's own classes come back unchanged. Raise the result ``from error``
    so the pykaf error stays reachable as ``__cause__``. With ``names``, the
    message names the user's options (``max_request_size``), not pykaf's.
    """
    if not isinstance(error, _pe.PykafError):
        return error
    message = str(error) if names is None else names.text(error)
    if isinstance(error, _pe.ConsumerError):
        return from_pykaf(error.error, names)
    if isinstance(error, (_pe.DeliveryError, _pe.AdminError)):
        causes = (
            [failure[3] for failure in error.failures]
            if isinstance(error, _pe.DeliveryError)
            else list(error.failures.values())
        )
        if causes:
            translated = from_pykaf(causes[0], names)
            if translated is not causes[0]:
                translated.__cause__ = causes[0]
            return translated
        return KafkaError(message)
    if isinstance(error, _pe.CommitError):
        return CommitFailedError(message)
    if isinstance(error, (_pe.TransactionStateError, _pe.ClosedError)):
        return IllegalStateError(message)
    if isinstance(error, _pe.LogTruncationError):
        return LogTruncationError(message)
    if isinstance(error, _pe.KafkaError):
        cls = _BY_ERRNO.get(error.code)
        if cls is None:
            unknown = BrokerResponseError(message)
            unknown.errno = error.code
            return unknown
        return cls(message)
    if isinstance(error, _pe.ConfigError):
        return KafkaConfigurationError(message)
    if isinstance(error, (_pe.KafkaTimeoutError, _pe.BufferFullError)):
        return KafkaTimeoutError(message)
    if isinstance(error, (_pe.KafkaConnectionError, _pe.TlsCertificateError)):
        return KafkaConnectionError(message)
    if isinstance(error, _pe.TransactionAbortedError):
        return TransactionAbortedError(message)
    if isinstance(error, _pe.ProtocolError):
        return KafkaProtocolError(message)
    return KafkaError(message)
