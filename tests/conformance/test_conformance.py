"""The fake cluster checked against Apache Kafka, request by request.

Each case (``cases_*.py``) sends the same raw requests to a fresh topic on
each target and records the answers that matter, normalised. ``test_case``
runs one case on one target; ``test_same_answers`` runs it on both (reusing
the answers ``test_case`` got in this session) and asserts they are equal,
except for the expected differences a case names, which must still be
exactly what each target was seen to answer (docs/testing.md, "Checked
against Apache Kafka", says why each one is there).
"""

from __future__ import annotations

from pprint import pformat
from typing import Any

import cases_admin  # noqa: F401 (registers its cases)
import cases_consumer_groups  # noqa: F401
import cases_data  # noqa: F401
import cases_group_migration  # noqa: F401
import cases_groups  # noqa: F401
import cases_sessions  # noqa: F401
import cases_share  # noqa: F401
import cases_telemetry  # noqa: F401
import cases_txn  # noqa: F401
import pytest
from conformance_harness import CASES, Answers, Target, Wire, fake_target, kafka_target

import pykaf
from pykaf import protocol as P
from pykaf.testing import FakeClusterThread
from pykaf.testing._kafka import KafkaCluster

#: each (target name, case name)'s answers, for the comparison
_ANSWERS: dict[tuple[str, str], dict[str, Any] | BaseException] = {}


async def run_case(target: Target, name: str) -> dict[str, Any]:
    """Run case ``name`` on ``target`` once per session; its answers by label."""
    key = (target.name, name)
    if key not in _ANSWERS:
        out = Answers()
        try:
            async with pykaf.open_client(target.bootstrap) as client:
                (node,) = await client.brokers()
                await CASES[name].fn(target, Wire(client, node.node_id), out)
        except BaseException as exc:
            exc.add_note(f"answers so far on {target.name}:\n{pformat(out.values, width=110)}")
            _ANSWERS[key] = exc  # a case runs once per target: its topics exist now
            raise
        _ANSWERS[key] = out.values
    answers = _ANSWERS[key]
    if isinstance(answers, BaseException):
        raise AssertionError(f"case {name} failed on {target.name} earlier") from answers
    return answers


@pytest.mark.parametrize("name", sorted(CASES))
async def test_case(target: Target, name: str) -> None:
    """The case runs on this target; an expected difference shows this target's answer."""
    answers = await run_case(target, name)
    for label, diff in CASES[name].differs.items():
        assert answers[label] == getattr(diff, target.name), (label, diff.why)


@pytest.mark.parametrize("name", sorted(CASES))
async def test_same_answers(
    conformance_fake: FakeClusterThread, kafka_cluster: KafkaCluster, name: str
) -> None:
    """The fake cluster answers as Kafka does (but for the named, expected differences)."""
    fake = await run_case(fake_target(conformance_fake), name)
    kafka = await run_case(kafka_target(kafka_cluster), name)
    assert list(fake) == list(kafka)
    differs = CASES[name].differs
    mismatches = {}
    for label in kafka:
        expected = (differs[label].fake, differs[label].kafka) if label in differs else None
        got = (fake[label], kafka[label])
        if (expected is None and got[0] != got[1]) or (expected is not None and got != expected):
            mismatches[label] = {"fake": got[0], "kafka": got[1], "expected": expected}
    if mismatches:
        pytest.fail("answers differ:\n" + pformat(mismatches, width=110))


async def test_api_versions_within_kafkas(
    conformance_fake: FakeClusterThread, kafka_cluster: KafkaCluster
) -> None:
    """Every version range the fake cluster advertises is one Kafka 4.3 answers too."""
    ranges = {}
    for bootstrap in (conformance_fake.bootstrap, kafka_cluster.bootstrap):
        async with pykaf.open_client(bootstrap) as client:
            (node,) = await client.brokers()
            resp = await client.request(
                node.node_id,
                P.ApiVersionsRequest(
                    client_software_name="pykaf-conformance", client_software_version="1"
                ),
                3,
            )
            ranges[bootstrap] = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    fake, kafka = ranges[conformance_fake.bootstrap], ranges[kafka_cluster.bootstrap]
    outside = {
        P.API_NAMES[key]: (lo_hi, kafka.get(key))
        for key, lo_hi in fake.items()
        if key not in kafka or not (kafka[key][0] <= lo_hi[0] and lo_hi[1] <= kafka[key][1])
    }
    if outside:
        pytest.fail("outside Kafka's ranges (fake, kafka):\n" + pformat(outside))
