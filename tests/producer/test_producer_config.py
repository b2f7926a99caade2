"""Producer options: defaults valid, bad values and bad combinations refused at once."""

from __future__ import annotations

from typing import Any

import pytest

from pykaf._producer.config import ProducerConfig
from pykaf.errors import ConfigError


def test_defaults_are_valid_idempotent_and_documented() -> None:
    cfg = ProducerConfig()
    assert cfg.idempotence and cfg.acks_int == -1
    assert cfg.compression_code == 0
    names = [name for name, _default, _doc in ProducerConfig.options()]
    assert "bootstrap_servers" in names  # client options apply to the producer
    for name, _default, doc in ProducerConfig.options():
        assert doc, f"option {name} has no documentation"


@pytest.mark.parametrize(("acks", "expected"), [(0, 0), (1, 1), (-1, -1), ("all", -1), ("ALL", -1)])
def test_acks_forms(acks: Any, expected: int) -> None:
    cfg = ProducerConfig.from_kwargs(acks=acks, idempotence=expected == -1)
    assert cfg.acks_int == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"acks": 2},
        {"acks": True},
        {"acks": "leader"},
        {"linger": -1},
        {"batch_bytes": 0},
        {"batch_bytes": 61},
        {"batch_records": 0},
        {"max_message_bytes": 2_000_000},  # larger than batch_bytes
        {"batch_bytes": 20_000_000},  # larger than max_request_bytes
        {"compression": "brotli"},
        {"compression": "zstd", "compression_level": 99},
        {"compression": "snappy", "compression_level": 1},
        {"retries": -1},
        {"delivery_timeout": 0},
        {"max_in_flight": 0},
        {"buffer_bytes": 0},
        {"buffer_records": -5},
        {"partitioner": "no-such-partitioner"},
        {"partitioner": 42},
        {"on_send": [42]},
        {"idempotence": True, "acks": 1},
        {"idempotence": True, "retries": 0},
        {"idempotence": True, "max_in_flight": 6},
        {"transactional_id": ""},
        {"transactional_id": "t", "idempotence": False, "acks": 1},
    ],
)
def test_bad_values_and_combinations(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ProducerConfig.from_kwargs(**kwargs)


def test_valid_non_default_settings() -> None:
    cfg = ProducerConfig.from_kwargs(
        acks=1,
        idempotence=False,
        max_in_flight=10,
        compression="ZSTD",
        compression_level=19,
        partitioner=lambda topic, key, n, available: 0,
        on_send=[lambda record: record],
    )
    assert cfg.compression_code == 4 and cfg.acks_int == 1


def test_unknown_option_is_named() -> None:
    with pytest.raises(ConfigError, match="did you mean 'linger'"):
        ProducerConfig.from_kwargs(lingr=0.1)
