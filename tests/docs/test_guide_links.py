"""Each guide links its main names to the API reference, at their first mention.

A mention is a code span in the prose (not a heading, not a code block) whose
text, a call's arguments dropped, is one of the name's forms: by default the
full name (``pykaf.sync.Producer``), without ``pykaf.``, and the last part
(``Producer``); where the last part would name something else on that page,
only the forms listed. The first mention must be a mkdocstrings cross-reference,
``[`Producer`][pykaf.sync.Producer]``, which ``mkdocs build --strict`` resolves
to the reference entry (an unknown name fails the build).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml  # type: ignore[import-untyped]
from markdown_it import MarkdownIt

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPAN = re.compile(r"(\[)?`([^`\n]+)`(\]\[([^\]]+)\])?")


class Name(NamedTuple):
    """A reference identifier and, when not the default ones, the forms that mention it."""

    ident: str
    forms: tuple[str, ...] = ()

    def all_forms(self) -> set[str]:
        if self.forms:
            return set(self.forms)
        parts = self.ident.split(".")
        return {self.ident, ".".join(parts[1:]), parts[-1]}


def full(ident: str) -> Name:
    """A name mentioned only in full (its last part names something else on the page)."""
    return Name(ident, (ident,))


MAIN: dict[str, list[Name]] = {
    "quickstart.md": [Name("pykaf.sync"), Name("pykaf.OLDEST"), Name("pykaf.NEWEST")],
    "producer.md": [
        Name("pykaf.open_producer"),
        Name("pykaf.Producer.send"),
        Name("pykaf.Producer.send_nowait"),
        Name("pykaf.Producer.send_batch"),
        Name("pykaf.Producer.flush"),
        Name("pykaf.RecordMetadata"),
        Name("pykaf.BatchDelivery"),
        Name("pykaf.ProducerError"),
        Name("pykaf.ProducerStatistics"),
    ],
    "consumer.md": [
        Name("pykaf.open_consumer"),
        Name("pykaf.Consumer"),
        Name("pykaf.open_consumer_group"),
        Name("pykaf.ConsumerGroup"),
        full("pykaf.sync.Consumer"),
        full("pykaf.sync.ConsumerGroup"),
        Name("pykaf.OLDEST"),
        Name("pykaf.NEWEST"),
        Name("pykaf.ColumnBatch"),
        Name("pykaf.CommitError"),
        Name("pykaf.ConsumerError"),
    ],
    "asyncio.md": [
        Name("pykaf.aio"),
        Name("pykaf.aio.open_producer"),
        Name("pykaf.aio.open_consumer"),
        Name("pykaf.aio.open_consumer_group"),
        Name("pykaf.aio.open_admin"),
        Name("pykaf.aio.open_share_consumer"),
        Name("pykaf.aio.open_client"),
        Name("pykaf.aio.Producer"),
        Name("pykaf.aio.testing.open_fake_cluster"),
    ],
    "share-groups.md": [
        Name("pykaf.ACCEPT"),
        Name("pykaf.RELEASE"),
        Name("pykaf.REJECT"),
        Name("pykaf.RENEW"),
        Name("pykaf.AcknowledgeType"),
        Name("pykaf.ShareRecord"),
        Name("pykaf.ShareGroupOffset"),
    ],
    "transactions.md": [
        Name("pykaf.Producer.begin_transaction"),
        Name("pykaf.Producer.commit_transaction"),
        Name("pykaf.Producer.abort_transaction"),
        Name("pykaf.Producer.send_offsets_to_transaction"),
        Name("pykaf.TxnStatus"),
        Name("pykaf.TransactionStateError"),
        Name("pykaf.TransactionAbortedError"),
        full("pykaf.sync.Producer"),
    ],
    "sync.md": [
        Name("pykaf.sync.Producer"),
        Name("pykaf.sync.Consumer"),
        Name("pykaf.sync.ConsumerGroup"),
        Name("pykaf.sync.Admin"),
        Name("pykaf.sync.ShareConsumer"),
        Name("pykaf.sync.Producer.send_async"),
        Name("pykaf.sync.Producer.produce"),
        Name("pykaf.sync.Producer.send_many"),
    ],
    "migrating.md": [
        Name("pykaf.compat.confluent_kafka"),
        Name("pykaf.compat.confluent_kafka.Producer", ("Producer",)),
        Name("pykaf.compat.confluent_kafka.Consumer", ("Consumer",)),
        full("pykaf.sync.Producer"),
        full("pykaf.sync.ConsumerGroup"),
        full("pykaf.sync.Admin"),
        Name("pykaf.compat.kafka"),
        Name("pykaf.compat.kafka.KafkaConsumer"),
        Name("pykaf.compat.kafka.KafkaAdminClient"),
        Name("pykaf.compat.kafka.errors"),
        Name("pykaf.ConsumerGroupHandler"),
    ],
    "client.md": [
        Name("pykaf.open_client"),
        Name("pykaf.BrokerInfo"),
        Name("pykaf.OLDEST"),
        Name("pykaf.NEWEST"),
    ],
    "admin.md": [
        Name("pykaf.open_admin"),
        Name("pykaf.sync.Admin"),
        Name("pykaf.TopicDescription"),
        Name("pykaf.ConfigEntry"),
        Name("pykaf.AclBinding"),
        Name("pykaf.AclFilter"),
        Name("pykaf.GroupListing"),
        Name("pykaf.GroupDescription"),
        Name("pykaf.PartitionLag"),
        Name("pykaf.AdminError"),
    ],
    "partitioners.md": [
        Name("pykaf.codec.murmur2"),
        Name("pykaf.codec.fnv1a_32"),
        Name("pykaf.PartitionerError"),
    ],
    "spark.md": [
        Name("pykaf.spark.register"),
        Name("pykaf.spark.get_producer"),
        Name("pykaf.spark.arrow_producer"),
        Name("pykaf.spark.DataLossError"),
    ],
    "observability.md": [
        Name("pykaf.ClientStatistics"),
        Name("pykaf.RequestStatistics"),
        Name("pykaf.ProducerStatistics"),
        Name("pykaf.ConsumerStatistics"),
        Name("pykaf.GroupStatistics"),
        Name("pykaf.RequestEvent"),
        Name("pykaf.BatchEvent"),
    ],
    "testing.md": [
        Name("pykaf.testing.KafkaCluster"),
        Name("pykaf.testing.open_kafka_cluster"),
        Name("pykaf.testing.FakeCluster"),
        Name("pykaf.testing.open_fake_cluster"),
        Name("pykaf.testing.FakeClusterThread"),
        Name("pykaf.testing.TansuBroker"),
        Name("pykaf.testing.MockCluster"),
        Name("pykaf.testing.fixtures.kafka_cluster"),
        Name("pykaf.testing.fixtures.fake_cluster"),
    ],
    "codec.md": [
        Name("pykaf.codec"),
        Name("pykaf.codec.BatchBuilder"),
        Name("pykaf.codec.decode_batches"),
        Name("pykaf.codec.Record"),
        Name("pykaf.codec.RecordBatch"),
        Name("pykaf.codec.BinaryColumn"),
        Name("pykaf.codec.ProduceSet"),
    ],
}


def normal(text: str) -> str:
    """A code span's text with a call's arguments dropped: ``send(topic) -> None`` -> ``send``."""
    return re.sub(r"\(.*\)$", "", re.sub(r"\s*->.*$", "", text.strip()))


def prose_lines(text: str) -> list[int]:
    """The 0-based lines of paragraphs, list items and table cells, in order (no headings)."""
    out: list[int] = []
    heading = False
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "heading_open":
            heading = True
        elif token.type == "heading_close":
            heading = False
        elif token.type == "inline" and not heading and token.map:
            out.extend(i for i in range(*token.map) if i not in out)
    return out


def first_mention(text: str, name: Name) -> tuple[int, re.Match[str]] | None:
    """The line (0-based) and code span of a name's first mention in the prose."""
    lines = text.splitlines()
    forms = name.all_forms()
    for i in prose_lines(text):
        for match in SPAN.finditer(lines[i]):
            if normal(match.group(2)) in forms:
                return i, match
    return None


def link_first_mention(text: str, name: Name) -> str:
    """The page with the name's first mention made a cross-reference (used to write them)."""
    found = first_mention(text, name)
    if found is None or found[1].group(3):
        return text
    i, match = found
    lines = text.splitlines(keepends=True)
    span = f"`{match.group(2)}`"
    lines[i] = f"{lines[i][: match.start()]}[{span}][{name.ident}]{lines[i][match.end() :]}"
    return "".join(lines)


CASES = [(page, name) for page, names in MAIN.items() for name in names]


@pytest.mark.parametrize(("page", "name"), CASES, ids=[f"{p}:{n.ident}" for p, n in CASES])
def test_first_mention_links_to_the_reference(page: str, name: Name) -> None:
    text = (DOCS / page).read_text()
    found = first_mention(text, name)
    assert found is not None, f"docs/{page} never mentions {name.ident} in its prose"
    line, match = found
    assert match.group(1) == "[" and match.group(4) == name.ident, (
        f"docs/{page}:{line + 1}: the first mention of {name.ident}, {match.group(0)!r}, "
        f"is not a link to the reference: write [`{match.group(2)}`][{name.ident}]"
    )


def test_every_guide_of_the_nav_has_main_names() -> None:
    nav = yaml.safe_load((DOCS.parent / "mkdocs.yml").read_text())["nav"]
    sections = {key: value for entry in nav for key, value in entry.items()}
    guides = {sections["Quickstart"]} | {
        page for entry in sections["Guide"] for page in entry.values()
    }
    # The command line guide documents a command, not Python names.
    assert sorted(guides - set(MAIN)) == ["cli.md"]


def test_the_rule_itself() -> None:
    page = (
        "# `Producer` in a heading\n\n```python\nProducer()\n```\n\n"
        "Use `Producer(bootstrap) -> Producer` here, then `Producer` again.\n"
    )
    name = Name("pykaf.sync.Producer")
    found = first_mention(page, name)
    assert found is not None and found[0] == 6 and found[1].group(1) is None
    linked = link_first_mention(page, name)
    assert (
        "[`Producer(bootstrap) -> Producer`][pykaf.sync.Producer] here, then `Producer`" in linked
    )
    _line, match = first_mention(linked, name) or (0, None)
    assert match is not None and match.group(4) == "pykaf.sync.Producer"
    assert first_mention(page, full("pykaf.sync.Producer")) is None
