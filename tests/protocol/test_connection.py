"""The sans-I/O connection: framing, correlation, acks=0, version negotiation, bad peers."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from pykaf import protocol as P
from pykaf.errors import ProtocolError, UnsupportedVersionError
from pykaf.protocol import connection
from pykaf.protocol.connection import Connection, negotiate


class FakeBroker:
    """Reads the client's frames and writes answers, the way a broker would."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def requests(self, data: bytes) -> list[tuple[Any, Any]]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            (size,) = struct.unpack_from(">i", self.buf)
            if len(self.buf) < 4 + size:
                break
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            header = P.decode_request_header(frame)
            out.append((header, frame))
        return out

    @staticmethod
    def answer(header: Any, body: Any, version: int | None = None) -> bytes:
        v = header.api_version if version is None else version
        flexible = P.response_header_flexible(header.api_key, v)
        payload = P.encode_response_header(header.correlation_id, flexible) + body.encode(v)
        return struct.pack(">i", len(payload)) + payload


def api_versions_response(**ranges: tuple[int, int]) -> Any:
    keys = {"Metadata": 3, "Produce": 0, "ApiVersions": 18, "Fetch": 1}
    return P.ApiVersionsResponse(
        error_code=0,
        api_keys=[
            P.ApiVersionsResponse.ApiVersion(api_key=keys[name], min_version=lo, max_version=hi)
            for name, (lo, hi) in ranges.items()
        ],
    )


def handshake(conn: Connection, broker: FakeBroker, **ranges: tuple[int, int]) -> None:
    conn.send_request(conn.api_versions_request(), P.ApiVersionsRequest.MAX_VERSION)
    [(header, _)] = broker.requests(conn.data_to_send())
    [resp] = conn.receive_data(broker.answer(header, api_versions_response(**ranges)))
    assert conn.handle_api_versions(resp) is not None


def test_negotiation_picks_the_highest_common_version() -> None:
    conn, broker = Connection("cid"), FakeBroker()
    handshake(conn, broker, Metadata=(0, 99), Produce=(3, 5), ApiVersions=(0, 3))
    assert conn.version_for(3) == P.MetadataRequest.MAX_VERSION
    assert conn.version_for(0) == 5
    with pytest.raises(UnsupportedVersionError, match="Fetch"):
        conn.version_for(1)


def test_no_common_version_is_a_clear_error() -> None:
    versions = negotiate(
        {3: (P.MetadataRequest.MAX_VERSION + 1, P.MetadataRequest.MAX_VERSION + 5)}
    )
    with pytest.raises(UnsupportedVersionError, match="no common version of Metadata"):
        versions.version_for(3)


def test_requests_are_framed_and_answered_in_order() -> None:
    conn, broker = Connection("client-x"), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    ids = [conn.send_request(P.MetadataRequest(topics=None), context=i) for i in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert conn.in_flight == 3
    reqs = broker.requests(conn.data_to_send())
    assert [h.correlation_id for h, _ in reqs] == ids
    assert all(h.client_id == "client-x" for h, _ in reqs)
    wire = b"".join(
        broker.answer(h, P.MetadataResponse(cluster_id=f"c{i}")) for i, (h, _) in enumerate(reqs)
    )
    got = []
    for i in range(0, len(wire), 7):  # dribble the bytes in
        got += conn.receive_data(wire[i : i + 7])
    assert [r.correlation_id for r in got] == ids
    assert [r.context for r in got] == [0, 1, 2]
    assert [r.body.cluster_id for r in got] == ["c0", "c1", "c2"]
    assert conn.in_flight == 0


@pytest.mark.parametrize("seed", range(20))
def test_frames_split_anywhere_decode_the_same(seed: int) -> None:
    # Reads end anywhere: inside a size prefix, inside a body, across several
    # frames; bytes may come as bytes, bytearray or memoryview.
    rng = random.Random(seed)
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    n = rng.randrange(1, 8)
    for _ in range(n):
        conn.send_request(P.MetadataRequest(topics=None))
    reqs = broker.requests(conn.data_to_send())
    names = ["x" * rng.randrange(0, 3000) for _ in range(n)]
    wire = b"".join(
        broker.answer(h, P.MetadataResponse(cluster_id=name))
        for (h, _), name in zip(reqs, names, strict=True)
    )
    got = []
    pos = 0
    while pos < len(wire):
        step = rng.choice([1, 2, 3, 5, rng.randrange(1, 5000)])
        piece = wire[pos : pos + step]
        piece = rng.choice([bytes, bytearray, memoryview])(piece)
        got += conn.receive_data(piece)
        pos += step
    assert [r.body.cluster_id for r in got] == names
    assert conn.in_flight == 0
    assert conn.receive_data(b"") == []


@pytest.mark.parametrize("seed", range(10))
def test_large_frames_are_gathered_as_they_come_and_decode_the_same(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A frame of FILL_FROM bytes or more is gathered into one buffer as its
    # reads come, each read freed at once (none held until the frame is
    # whole); small frames around it, and reads across frames, are as before.
    monkeypatch.setattr(connection, "FILL_FROM", 200)
    rng = random.Random(seed)
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Fetch=(4, 12), ApiVersions=(0, 3))
    n = 6
    for _ in range(n):
        conn.send_request(P.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]))
    reqs = broker.requests(conn.data_to_send())
    sizes = [3000] + [rng.choice([0, 10, 150, 400, 3000]) for _ in range(n - 1)]
    rng.shuffle(sizes)  # one frame at least is larger than any read
    blobs = [rng.randbytes(size) for size in sizes]
    answers = [
        broker.answer(
            h,
            P.FetchResponse(
                responses=[
                    P.FetchableTopicResponse(
                        topic="t", partitions=[P.PartitionData(partition_index=0, records=blob)]
                    )
                ]
            ),
        )
        for (h, _), blob in zip(reqs, blobs, strict=True)
    ]
    wire = b"".join(answers)
    got: list[Any] = []
    pos = gathering = 0
    while pos < len(wire):
        piece = wire[pos : pos + rng.choice([1, 3, 7, rng.randrange(1, 2000)])]
        got += conn.receive_data(rng.choice([bytes, bytearray, memoryview])(piece))
        pos += len(piece)
        if conn._filling is not None:
            gathering += 1
            assert not conn._chunks  # a large frame's reads are not kept
    assert [bytes(r.body.responses[0].partitions[0].records) for r in got] == blobs
    assert conn.in_flight == 0 and conn._filling is None and not conn._chunks
    assert gathering


def test_acks_zero_produce_expects_no_response() -> None:
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Produce=(0, 9), Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(
        P.ProduceRequest(acks=0, timeout_ms=100, topic_data=[]), expect_response=False
    )
    assert conn.in_flight == 0
    cid = conn.send_request(P.MetadataRequest(topics=None))
    reqs = broker.requests(conn.data_to_send())
    assert len(reqs) == 2
    [resp] = conn.receive_data(broker.answer(reqs[1][0], P.MetadataResponse()))
    assert resp.correlation_id == cid


@pytest.mark.parametrize("version", [8, 9])  # non-flexible and flexible response headers
def test_an_answer_to_an_acks_zero_produce_is_dropped(version: int) -> None:
    # Tansu and librdkafka's mock answer acks=0 Produce requests; Kafka never does.
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Produce=(0, 9), Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(
        P.ProduceRequest(acks=0, timeout_ms=100, topic_data=[]), version, expect_response=False
    )
    cid = conn.send_request(P.MetadataRequest(topics=None))
    reqs = broker.requests(conn.data_to_send())
    stray = broker.answer(reqs[0][0], P.ProduceResponse(responses=[]))
    # Before, with and after the answer that is owed: dropped each time, never twice.
    assert conn.receive_data(stray) == []
    [resp] = conn.receive_data(broker.answer(reqs[1][0], P.MetadataResponse()))
    assert resp.correlation_id == cid and not conn.broken
    with pytest.raises(ProtocolError, match="no request pending"):
        conn.receive_data(stray)  # the same answer again is not owed


def test_only_the_latest_acks_zero_requests_are_remembered() -> None:
    from pykaf.protocol.connection import UNANSWERED_KEPT

    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Produce=(0, 9), Metadata=(0, 12), ApiVersions=(0, 3))
    for _ in range(UNANSWERED_KEPT + 1):
        conn.send_request(
            P.ProduceRequest(acks=0, timeout_ms=100, topic_data=[]), 8, expect_response=False
        )
    reqs = broker.requests(conn.data_to_send())
    assert conn.receive_data(broker.answer(reqs[-1][0], P.ProduceResponse(responses=[]))) == []
    with pytest.raises(ProtocolError, match="no request pending"):  # forgotten: too old
        conn.receive_data(broker.answer(reqs[0][0], P.ProduceResponse(responses=[])))


def test_wrong_correlation_id_breaks_the_connection() -> None:
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(P.MetadataRequest(topics=None))
    [(header, _)] = broker.requests(conn.data_to_send())
    wrong = header._replace(correlation_id=header.correlation_id + 1)
    with pytest.raises(ProtocolError, match="correlation id"):
        conn.receive_data(broker.answer(wrong, P.MetadataResponse()))
    assert conn.broken
    with pytest.raises(ValueError, match="broken"):
        conn.send_request(P.MetadataRequest(topics=None))
    # The request the stray answer did not match is still owed an answer: the
    # owner takes it to fail it.
    assert [p.api_key for p in conn.take_pending()] == [3]


def test_response_without_request_is_a_protocol_error() -> None:
    conn = Connection()
    with pytest.raises(ProtocolError, match="no request pending"):
        conn.receive_data(struct.pack(">ii", 4, 0))


@pytest.mark.parametrize("size", [-5, 0, 3, 2**31 - 1])
def test_invalid_or_oversized_frames_are_refused(size: int) -> None:
    conn, broker = Connection(max_response_bytes=1 << 20), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(P.MetadataRequest(topics=None))
    with pytest.raises(ProtocolError, match="invalid response size"):
        conn.receive_data(struct.pack(">i", size) + b"\0" * 8)
    assert [p.api_key for p in conn.take_pending()] == [3]


def test_undecodable_body_is_a_protocol_error() -> None:
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(P.MetadataRequest(topics=None))
    [(header, _)] = broker.requests(conn.data_to_send())
    frame = broker.answer(header, P.MetadataResponse(cluster_id="x" * 50))
    cut = frame[:-20]
    bad = struct.pack(">i", len(cut) - 4) + cut[4:]
    with pytest.raises(ProtocolError, match="malformed Metadata"):
        conn.receive_data(bad)


def test_a_bad_frame_after_a_good_one_in_the_same_read_is_a_protocol_error() -> None:
    # Once a frame has been consumed from the buffer, a decoding error in the
    # next one must surface as itself (it once came out as a BufferError from
    # trimming a buffer that a memoryview still held).
    conn, broker = Connection(), FakeBroker()
    handshake(conn, broker, Metadata=(0, 12), ApiVersions=(0, 3))
    conn.send_request(P.MetadataRequest(topics=None))
    conn.send_request(P.MetadataRequest(topics=None))
    [(first, _), (second, _)] = broker.requests(conn.data_to_send())
    good = broker.answer(first, P.MetadataResponse())
    frame = broker.answer(second, P.MetadataResponse(cluster_id="x" * 50))
    cut = frame[:-20]
    bad = struct.pack(">i", len(cut) - 4) + cut[4:]
    with pytest.raises(ProtocolError, match="malformed Metadata"):
        conn.receive_data(good + bad)


def test_api_versions_falls_back_when_the_broker_rejects_our_version() -> None:
    conn, broker = Connection(), FakeBroker()
    top = P.ApiVersionsRequest.MAX_VERSION
    conn.send_request(conn.api_versions_request(), top)
    [(header, _)] = broker.requests(conn.data_to_send())
    # KIP-511: an older broker answers UNSUPPORTED_VERSION with a v0 body
    # naming the ApiVersions versions it does speak.
    reject = P.ApiVersionsResponse(
        error_code=35,
        api_keys=[P.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=1)],
    )
    [resp] = conn.receive_data(broker.answer(header, reject, version=0))
    assert resp.version == 0
    assert conn.handle_api_versions(resp) is None
    assert conn.retry_api_versions_version == 1
    conn.send_request(conn.api_versions_request(), conn.retry_api_versions_version)
    [(header, _)] = broker.requests(conn.data_to_send())
    assert header.api_version == 1
    ok = broker.answer(header, api_versions_response(Metadata=(0, 5), ApiVersions=(0, 1)))
    [resp] = conn.receive_data(ok)
    assert conn.handle_api_versions(resp) is not None
    assert conn.version_for(3) == 5


def test_api_versions_rejected_at_v0_is_fatal() -> None:
    conn, broker = Connection(), FakeBroker()
    conn.send_request(conn.api_versions_request(), 0)
    [(header, _)] = broker.requests(conn.data_to_send())
    [resp] = conn.receive_data(broker.answer(header, P.ApiVersionsResponse(error_code=35)))
    with pytest.raises(ProtocolError, match="rejected every ApiVersions"):
        conn.handle_api_versions(resp)


def test_version_outside_pykaf_range_is_refused() -> None:
    conn = Connection()
    with pytest.raises(UnsupportedVersionError):
        conn.send_request(P.MetadataRequest(topics=None), P.MetadataRequest.MAX_VERSION + 1)
    with pytest.raises(UnsupportedVersionError, match="not been negotiated"):
        conn.send_request(P.MetadataRequest(topics=None))
