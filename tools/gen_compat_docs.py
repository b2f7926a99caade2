"""Write docs/compatibility.md from the compatibility suite's results.

Run: python tools/gen_compat_docs.py [tests/brokers/results.json [docs/compatibility.md]]
(``make test-brokers`` runs the suite on every release, then this). The
table's rows are the suite's ``compat`` markers, its columns the releases the
results hold; the protocol notes come from ``pykaf.protocol.versions``. A
test fails when the committed page is not what this writes.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykaf.protocol import API_NAMES  # noqa: E402
from pykaf.protocol.versions import BROKER_FEATURES, NEWER_VERSIONS  # noqa: E402
from pykaf.testing._kafka_dist import DEFAULT_KAFKA_VERSION  # noqa: E402

RESULTS = ROOT / "tests" / "brokers" / "results.json"
PAGE = ROOT / "docs" / "compatibility.md"


def _kip_link(kip: str) -> str:
    number = kip.removeprefix("KIP-")
    if not number.isdigit():
        return kip
    return f"[{kip}](https://cwiki.apache.org/confluence/display/KAFKA/KIP-{number})"


def _rows(releases: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (KIP, feature) row of any release, ordered by KIP number, then feature."""
    rows: set[tuple[str, str]] = set()
    for release in releases.values():
        for key in release["rows"]:
            kip, _, feature = key.partition(" | ")
            rows.add((kip, feature))

    def order(row: tuple[str, str]) -> tuple[int, str]:
        number = row[0].removeprefix("KIP-")
        return (int(number) if number.isdigit() else 0, row[1])

    return sorted(rows, key=order)


def _cell(result: str | None, notes: list[str]) -> str:
    if result is None:
        return "not run"
    if result == "passed":
        return "yes"
    if result.startswith("refused: "):
        note = result.removeprefix("refused: ")
        if note not in notes:
            notes.append(note)
        return f"no ({notes.index(note) + 1})"
    return result  # "failed" or "skipped"


def render(results: dict[str, Any]) -> str:
    """The page for ``results`` (the suite's JSON: ``{"releases": {version: {"rows": ...}}}``)."""
    releases: dict[str, Any] = results["releases"]
    versions = list(releases)
    notes: list[str] = []
    lines = [
        "# Compatibility",
        "",
        "Generated from the compatibility suite's results (`tests/brokers/results.json`) by",
        "`tools/gen_compat_docs.py`; do not edit. `make test-brokers` runs the suite",
        "(`tests/brokers`) on each Apache Kafka release below, one node in KRaft mode with",
        "SASL, TLS and ACLs on, started by `pykaf.testing.KafkaCluster`, and redraws this page.",
        f"`make test` runs the same suite on the default release, {DEFAULT_KAFKA_VERSION}.",
        "",
        "**yes**: every test of the row passed on that release. **no (n)**: the release lacks",
        "the feature and pykaf refuses it as note *n* says (the test checked that refusal).",
        "**failed**: a test of the row failed there.",
        "",
        "| KIP | Feature | " + " | ".join(versions) + " |",
        "|---|---|" + "---|" * len(versions),
    ]
    for kip, feature in _rows(releases):
        key = f"{kip} | {feature}"
        cells = [_cell(releases[v]["rows"].get(key), notes) for v in versions]
        lines.append(f"| {_kip_link(kip)} | {feature} | " + " | ".join(cells) + " |")
    lines.append("")
    for n, note in enumerate(notes, 1):
        lines.append(f"{n}. {note}")
    lines += [
        "",
        "Besides its rows, every test of the suite checks that each request it sent was",
        "within the broker's ApiVersions range for that API.",
        "",
        "## What differs between the releases",
        "",
        "- **Consumer groups (KIP-848)**: 3.7 to 3.9 advertise ConsumerGroupHeartbeat v0 as an",
        "  early access but finalize no `group.version`; pykaf refuses `group_protocol=",
        "  'consumer'` there at open. 4.0 makes them GA. 3.8 and 3.9 also advertise",
        "  ConsumerGroupDescribe and answer it UNSUPPORTED_VERSION for every group: the admin",
        "  client's `describe_group` then describes the group with DescribeGroups (found by",
        "  this suite: it failed on 3.8 and 3.9 before).",
        "- **Share groups (KIP-932)**: none before 4.1; 4.1 has the APIs as a preview that a",
        "  cluster turns on with `share.version` 1 (refused at open otherwise); 4.2 finalizes",
        "  `share.version` 1 by default; 4.4 finalizes 2. RENEW acknowledgements need 4.2.",
        "- **Transactions**: 3.x speaks transactions V1 only; 4.0 and newer finalize",
        "  `transaction.version` 2 (KIP-890 part 2) and pykaf's producer takes it. Both",
        "  pass the same tests.",
        "- **Protocol**: the versions 4.0 to 4.4 added beyond pykaf's message classes are",
        "  listed below; pykaf negotiates the one below on every release.",
        "- **The launcher**: 3.x logs with log4j 1 (reload4j), 4.x with log4j 2; 3.7's",
        "  storage tool takes no `--feature`; share-group settings exist from 4.0",
        "  ([Releases](testing.md#releases)).",
        "",
        "## Features a broker must have",
        "",
        "pykaf checks these when it opens what needs them and raises",
        "`pykaf.protocol.versions.BrokerFeatureError` (an `UnsupportedVersionError`) naming the",
        "broker's release (from its `metadata.version`) and what is missing, before any",
        "request of the feature is sent.",
        "",
        "| Feature | Needs |",
        "|---|---|",
    ]
    for needed in BROKER_FEATURES:
        lines.append(f"| {needed.name} | {needed.needs()} |")
    lines += [
        "",
        "Transactions V2 (KIP-890 part 2) need no check: the transactional producer uses them",
        "where the cluster finalizes `transaction.version` 2 (Kafka 4.0 on) and V1 elsewhere.",
        "RENEW acknowledgements of share groups (KIP-1222) need ShareFetch and",
        "ShareAcknowledge v2 (Kafka 4.2 on); on 4.1 the acknowledgement is refused with an",
        "`UnsupportedVersionError` and kept, so the record can be settled otherwise.",
        "",
        "## Protocol versions pykaf stays below",
        "",
        "Versions the tested releases speak beyond pykaf's message classes",
        "(`pykaf.protocol.versions.NEWER_VERSIONS`); pykaf negotiates the version below. The",
        "suite fails on a release that advertises a version not listed here.",
        "",
        "| API | Version | Since | Why pykaf stays below it |",
        "|---|---|---|---|",
    ]
    for newer in NEWER_VERSIONS:
        lines.append(
            f"| {API_NAMES[newer.api_key]} | {newer.version} | {newer.since} | {newer.reason} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    results = pathlib.Path(argv[0]) if argv else RESULTS
    page = pathlib.Path(argv[1]) if len(argv) > 1 else PAGE
    page.write_text(render(json.loads(results.read_text())))
    print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
