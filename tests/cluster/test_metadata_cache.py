"""The metadata cache's topic ids: what KIP-848 and share-group members resolve assignments by."""

from __future__ import annotations

import uuid

from pykaf._cluster.metadata import Metadata, TopicInfo, as_topic_uuid


def test_topic_ids_and_names_both_ways() -> None:
    md = Metadata()
    a, b = uuid.uuid4(), uuid.uuid4()
    md.topics["a"] = TopicInfo("a", a.bytes, False)  # as a Metadata response gives it
    md.topics["b"] = TopicInfo("b", b, False)  # type: ignore[arg-type]  # already a UUID
    md.topics["old"] = TopicInfo("old", bytes(16), False)  # a broker without topic ids
    md.topics["none"] = TopicInfo("none", None, False)
    assert (md.topic_id("a"), md.topic_id("b")) == (a, b)
    assert md.topic_id("old") is None and md.topic_id("none") is None
    assert md.topic_id("unknown") is None
    assert md.names_of({a, b, uuid.uuid4()}) == {a: "a", b: "b"}
    assert md.names_of(set()) == {}
    assert as_topic_uuid(None) is None and as_topic_uuid(uuid.UUID(int=0)) is None
