"""Control batches: transaction markers (commit/abort) and other control records."""

from __future__ import annotations

import struct
from types import ModuleType

import codec_wire as w
import pytest

from pykaf.errors import CorruptRecordError

T = 1_700_000_000_000


def _marker(control_type: int, coordinator_epoch: int, **kwargs: int) -> bytes:
    """A transaction marker exactly as Kafka writes one (version 0 key and value)."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return w.batch(
        w.record(0, 0, key, value),
        count=1,
        attributes=w.ATTR_TRANSACTIONAL | w.ATTR_CONTROL,
        base_sequence=-1,
        **kwargs,
    )


@pytest.mark.parametrize(("control_type", "name"), [(1, "commit"), (0, "abort")])
def test_encode_is_exact(codec: ModuleType, control_type: int, name: str) -> None:
    assert getattr(codec, f"CONTROL_{name.upper()}") == control_type
    out = codec.encode_control_batch(
        control_type,
        producer_id=4000,
        producer_epoch=2,
        timestamp=T,
        coordinator_epoch=17,
        base_offset=55,
        partition_leader_epoch=6,
    )
    want = _marker(
        control_type,
        17,
        base_offset=55,
        partition_leader_epoch=6,
        base_timestamp=T,
        producer_id=4000,
        producer_epoch=2,
    )
    assert type(out) is bytes
    assert out.hex() == want.hex()


def test_encode_defaults(codec: ModuleType) -> None:
    out = codec.encode_control_batch(
        codec.CONTROL_ABORT, producer_id=1, producer_epoch=0, timestamp=T
    )
    p = w.parse_batch(out)
    assert p.base_offset == 0
    assert p.partition_leader_epoch == -1
    assert p.attributes == 0x30
    assert p.record_count == 1
    assert p.last_offset_delta == 0
    assert p.base_sequence == -1
    (rec,) = w.parse_records(p.records, 1)
    assert rec.key == struct.pack(">hh", 0, 0)
    assert rec.value == struct.pack(">hi", 0, 0)
    assert rec.headers == []


@pytest.mark.parametrize(("control_type", "name"), [(1, "commit"), (0, "abort")])
def test_decode_marker(codec: ModuleType, control_type: int, name: str) -> None:
    data = _marker(
        control_type, 12345, base_offset=900, producer_id=77, producer_epoch=3, base_timestamp=T
    )
    (batch,) = codec.decode_batches(data)
    assert batch.is_control is True
    assert batch.is_transactional is True
    assert batch.control_type == name
    assert batch.control_type_id == control_type
    assert batch.coordinator_epoch == 12345
    assert batch.producer_id == 77
    assert batch.producer_epoch == 3
    assert batch.base_offset == 900
    assert batch.last_offset == 900
    assert batch.next_offset == 901


@pytest.mark.parametrize("control_type", [0, 1])
def test_encode_decode_round_trip(codec: ModuleType, control_type: int) -> None:
    out = codec.encode_control_batch(
        control_type,
        producer_id=2**62,
        producer_epoch=32000,
        timestamp=T,
        coordinator_epoch=2**31 - 1,
        base_offset=2**40,
        partition_leader_epoch=9,
    )
    (batch,) = codec.decode_batches(out)
    assert batch.control_type == ("commit" if control_type else "abort")
    assert batch.coordinator_epoch == 2**31 - 1
    assert batch.producer_id == 2**62
    assert batch.producer_epoch == 32000
    assert batch.base_offset == 2**40
    assert batch.partition_leader_epoch == 9
    assert batch.max_timestamp == T


def test_ordinary_batch_is_not_control(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    builder.append(T, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
    (batch,) = codec.decode_batches(builder.build(is_transactional=True))
    assert batch.is_control is False
    assert batch.is_transactional is True
    assert batch.control_type is None
    assert batch.control_type_id == -1
    assert batch.coordinator_epoch == -1


@pytest.mark.parametrize("control_type", [2, 3, 4, 5, 100])
def test_other_control_types(codec: ModuleType, control_type: int) -> None:
    # KRaft control records (leader change, snapshot header/footer, voters...)
    # are control batches too; they are neither commit nor abort.
    data = w.batch(
        w.record(0, 0, struct.pack(">hh", 0, control_type), b"\x00\x00opaque payload"),
        count=1,
        attributes=w.ATTR_CONTROL,
    )
    (batch,) = codec.decode_batches(data)
    assert batch.is_control is True
    assert batch.control_type_id == control_type
    assert batch.control_type is None
    assert batch.coordinator_epoch == -1


def test_empty_control_batch(codec: ModuleType) -> None:
    # The log cleaner may leave a control batch with no records.
    data = w.batch(
        b"",
        count=0,
        base_offset=70,
        last_offset_delta=0,
        attributes=w.ATTR_TRANSACTIONAL | w.ATTR_CONTROL,
    )
    (batch,) = codec.decode_batches(data)
    assert batch.is_control is True
    assert batch.records == []
    assert batch.control_type is None
    assert batch.last_offset == 70


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("producer_id", 2**63),
        ("producer_epoch", 2**15),
        ("timestamp", 2**63),
        ("coordinator_epoch", 2**31),
        ("base_offset", -(2**63) - 1),
        ("partition_leader_epoch", 2**31),
    ],
)
def test_encode_rejects_fields_outside_their_width(
    codec: ModuleType, field: str, value: int
) -> None:
    kwargs = {"producer_id": 1, "producer_epoch": 0, "timestamp": T, field: value}
    with pytest.raises(ValueError):
        codec.encode_control_batch(codec.CONTROL_COMMIT, **kwargs)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, struct.pack(">hi", 0, 1)),  # null key
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),  # key too short
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00"),  # marker value too short
        (struct.pack(">hh", 0, 0), None),  # marker without a value
    ],
)
def test_malformed_marker(codec: ModuleType, key: bytes | None, value: bytes | None) -> None:
    data = w.batch(
        w.record(0, 0, key, value), count=1, attributes=w.ATTR_TRANSACTIONAL | w.ATTR_CONTROL
    )
    for check in (True, False):
        with pytest.raises(CorruptRecordError):
            codec.decode_batches(data, check_crc=check)
