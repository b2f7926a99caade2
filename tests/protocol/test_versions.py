"""The version-cap table (pykaf.protocol.versions): real versions, applied where they say."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykaf import errors
from pykaf import protocol as P
from pykaf.protocol import versions
from pykaf.protocol.connection import negotiate


@pytest.mark.parametrize("cap", versions.ALL_CAPS, ids=lambda c: P.API_NAMES[c.api_key])
def test_each_cap_is_a_version_pykaf_speaks_below_its_newest(cap: versions.VersionCap) -> None:
    req = P.REQUESTS[cap.api_key]
    assert req.MIN_VERSION <= cap.max_version < req.MAX_VERSION
    assert cap.reason.strip()


class _Conn:
    def __init__(self, chosen: dict[int, int]) -> None:
        self.chosen = chosen

    def version_for(self, api_key: int) -> int:
        if api_key not in self.chosen:
            raise errors.UnsupportedVersionError(f"api {api_key}")
        return self.chosen[api_key]


def test_pick_takes_the_lower_of_the_cap_and_the_negotiated_version() -> None:
    cap = versions.FETCH
    assert cap.pick(_Conn({cap.api_key: 17})) == cap.max_version
    assert cap.pick(_Conn({cap.api_key: 4})) == 4
    with pytest.raises(errors.UnsupportedVersionError):
        cap.pick(_Conn({}))


def test_client_caps_apply_at_negotiation() -> None:
    key = versions.ADD_PARTITIONS_TO_TXN.api_key
    fetch = versions.FETCH.api_key
    chosen = negotiate({key: (0, 5), fetch: (4, 17)}).chosen
    assert chosen[key] == versions.ADD_PARTITIONS_TO_TXN.max_version
    # a cap of one use only is not applied to every request of its API
    assert chosen[fetch] == min(17, P.FetchRequest.MAX_VERSION)


def test_design_doc_lists_every_cap() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "design.md").read_text()
    for cap in versions.ALL_CAPS:
        assert f"| {P.API_NAMES[cap.api_key]} | {cap.max_version} |" in doc
