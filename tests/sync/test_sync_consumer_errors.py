"""A partition's fetch error through pykaf.sync.Consumer: one ConsumerError, typed as its cause.

Issue 35: an authorization failure came out as ``ConsumerError: secured/0:
secured/0: Topic authorization failed.``, which ``except
TopicAuthorizationError`` did not catch. The fake cluster answers Fetch with
the error code (its ACLs are not enforced); Apache Kafka's own refusal is in
``tests/cluster/test_authorization.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import pykaf
import pykaf.sync
from pykaf import errors
from pykaf import protocol as P
from pykaf.testing import FakeClusterThread

T = 30.0
FAST: dict[str, Any] = {"fetch_max_wait": 0.05, "retry_backoff": 0.05}


def first_failure(consumer: pykaf.sync.Consumer) -> BaseException:
    """The first error ``consume`` raises, within ``T`` seconds."""
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        try:
            consumer.consume(100, timeout=0.5)
        except errors.PykafError as exc:
            return exc
    pytest.fail("no error came out of consume()")


@pytest.mark.parametrize(
    ("kind", "catch"),
    [
        (errors.TopicAuthorizationError, errors.TopicAuthorizationError),
        (errors.UnsupportedCompressionTypeError, errors.KafkaError),
    ],
)
def test_a_fetch_error_is_caught_by_its_own_class(
    fake_cluster: FakeClusterThread, kind: type[errors.KafkaError], catch: type[Exception]
) -> None:
    topic = "secured"
    fake_cluster.create_topic(topic, 1)
    fake_cluster.push_request_errors(P.FetchRequest.API_KEY, kind.code)
    with pykaf.sync.Consumer(fake_cluster.bootstrap, **FAST) as consumer:
        consumer.assign([(topic, 0, pykaf.OLDEST)])
        failure = first_failure(consumer)
    assert isinstance(failure, catch) and isinstance(failure, kind)
    assert isinstance(failure, pykaf.ConsumerError)  # still one, for code that catches that
    assert (failure.topic, failure.partition) == (topic, 0)
    assert isinstance(failure.error, kind)
    assert str(failure) == f"{topic}/0: {kind.description}"  # the partition named once
