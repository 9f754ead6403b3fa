"""Bad input over raw sockets never hurts the broker or its well-behaved clients.

While a background confluent_kafka producer and consumer keep producing and
reading back (and check every message), raw sockets send: random bytes, a
frame declaring 2 GiB, negative lengths, truncated requests, unknown API keys,
unsupported versions, invalid topic names, and hundreds of connections dropped
mid-request. Throughout, the broker stays alive, answers valid requests, frees
the dropped connections, and its resident memory stays bounded.

Requests are encoded by hand (request header v1: int16 api_key, int16
api_version, int32 correlation_id, int16-length client_id).
"""

import os
import random
import socket
import struct
import threading
import time

import kafka
import kafka.errors as kerr
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice_harness import Broker, GoodClient, Reader, fd_count, record, v2_batch, wait_fds_at_most

SEED = int(os.environ.get("SLUICE_BAD_INPUT_SEED", "20261202"))

API_PRODUCE, API_METADATA, API_API_VERSIONS, API_CREATE_TOPICS = 0, 3, 18, 19
UNSUPPORTED_VERSION, INVALID_TOPIC_EXCEPTION = 35, 17


# ------------------------------------------------------------ wire helpers

def kstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(b)) + b


def request(api_key, version, corr, body=b"", client_id="bad-input"):
    payload = struct.pack(">hhi", api_key, version, corr) + kstr(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def connect(port, timeout=30.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def recv_response(s):
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, n)


def assert_closed(s, what, timeout=5.0):
    """The broker closes the connection (EOF or reset) without answering."""
    s.settimeout(timeout)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        data = b""
    except socket.timeout:
        pytest.fail(f"{what}: connection still open after {timeout}s")
    assert data == b"", f"{what}: expected the connection closed, got {data[:64]!r}"
    s.close()


def api_versions_v0(port):
    """Sends ApiVersions v0 on a fresh connection; returns {api_key: (min, max)}."""
    with connect(port) as s:
        s.sendall(request(API_API_VERSIONS, 0, 7))
        r = Reader(recv_response(s))
        assert r.take(">i") == 7
        assert r.take(">h") == 0
        return {k: (lo, hi) for k, lo, hi in (r.take(">hhh") for _ in range(r.take(">i")))}


def metadata_v1(s, corr, topics):
    body = struct.pack(">i", len(topics)) + b"".join(kstr(t) for t in topics)
    s.sendall(request(API_METADATA, 1, corr, body))
    r = Reader(recv_response(s))
    assert r.take(">i") == corr
    for _ in range(r.take(">i")):  # brokers: node_id, host, port, rack
        r.take(">i"), r.string(), r.take(">i"), r.string()
    r.take(">i")  # controller_id
    out = {}
    for _ in range(r.take(">i")):
        err, name, _internal = r.take(">h"), r.string(), r.take(">b")
        for _ in range(r.take(">i")):  # partitions: err, index, leader, replicas, isr
            r.take(">hii")
            for _array in ("replicas", "isr"):
                for _ in range(r.take(">i")):
                    r.take(">i")
        out[name] = err
    return out


def create_topics_v0(s, corr, names):
    body = struct.pack(">i", len(names))
    for n in names:
        body += kstr(n) + struct.pack(">ihii", 1, 1, 0, 0)  # partitions, rf, no assignments, no configs
    body += struct.pack(">i", 10000)
    s.sendall(request(API_CREATE_TOPICS, 0, corr, body))
    r = Reader(recv_response(s))
    assert r.take(">i") == corr
    return {r.string(): r.take(">h") for _ in range(r.take(">i"))}


# ------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def shared_running():
    """One broker and one well-behaved client for the whole module, so the
    client keeps working across every kind of abuse below."""
    b = Broker()
    b.start()
    good = GoodClient(b.bootstrap)
    good.start()
    try:
        # Let the client connect and do a few rounds before the abuse starts.
        deadline = time.monotonic() + 30
        while good.rounds < 3 and time.monotonic() < deadline and not good.errors:
            time.sleep(0.05)
        assert good.rounds >= 3, f"well-behaved client did not get going: {good.errors}"
        yield b, good
        rounds, errors = good.finish()
        assert not errors, f"the well-behaved client failed: {errors}"
        rc = b.stop()
        assert rc == 0, f"broker exited with {rc} on SIGTERM:\n{b.log_text()}"
    finally:
        good.stop_flag.set()
        b.close()


@pytest.fixture
def running(shared_running):
    b, good = shared_running
    start_rounds = good.rounds
    yield b
    assert b.proc is not None and b.proc.poll() is None, f"broker died:\n{b.log_text()}"
    # The well-behaved client made progress across this test.
    deadline = time.monotonic() + 15
    while good.rounds <= start_rounds and not good.errors and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not good.errors, f"the well-behaved client failed: {good.errors}"
    assert good.rounds > start_rounds, "the well-behaved client made no progress"


def test_unsupported_api_versions_version_gets_v0_answer(running):
    with connect(running.port) as s:
        # ApiVersions v3+ uses request header v2: header v1 plus tagged fields
        # (here none: one 0 byte). The body of an unknown version is not read;
        # this one is what a future client might send.
        s.sendall(request(API_API_VERSIONS, 99, 4242, b"\x00" + b"\x07future\x041.0\x00\x55\x66"))
        r = Reader(recv_response(s))
        assert r.take(">i") == 4242
        assert r.take(">h") == UNSUPPORTED_VERSION
        rows = {k: (lo, hi) for k, lo, hi in (r.take(">hhh") for _ in range(r.take(">i")))}
        assert r.p == len(r.d), "v0 layout: nothing after the api_keys array (no throttle_time_ms)"
        assert rows[API_API_VERSIONS][0] == 0 and rows[API_API_VERSIONS][1] >= 3
        # The connection stays usable: the client retries with a version it knows.
        s.sendall(request(API_API_VERSIONS, 0, 4243))
        r = Reader(recv_response(s))
        assert r.take(">i") == 4243 and r.take(">h") == 0
    # Like Kafka, the error answer lists only ApiVersions itself, with the
    # range the full answer gives.
    assert list(rows) == [API_API_VERSIONS]
    assert api_versions_v0(running.port)[API_API_VERSIONS] == rows[API_API_VERSIONS]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_advertised_old_produce_versions_answer_unsupported_version_per_partition(running, version):
    """Produce v0-v2 are advertised (librdkafka detects its codecs by v0;
    Kafka 4.0 does the same) but never served: every partition answers
    UNSUPPORTED_VERSION, as Kafka 4.0 does, nothing is written, and the
    connection stays open for the client's next request."""
    s = connect(running.port)
    records = b"\x00" * 40  # a v0 message set would go here; never read
    body = (struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + kstr("old-formats") +
            struct.pack(">i", 2) + struct.pack(">ii", 0, len(records)) + records +
            struct.pack(">ii", 1, len(records)) + records)
    s.sendall(request(API_PRODUCE, version, 7, body))
    r = Reader(recv_response(s))
    assert r.take('>i') == 7
    assert r.take('>i') == 1
    assert r.string() == "old-formats"
    assert r.take('>i') == 2
    for p in (0, 1):
        assert r.take('>i') == p
        assert r.take('>h') == UNSUPPORTED_VERSION
        assert r.take('>q') == -1  # base offset
        if version >= 2:
            r.take('>q')  # log append time
    # The same connection still answers.
    s.sendall(request(API_API_VERSIONS, 0, 8))
    assert Reader(recv_response(s)).take('>i') == 8
    s.close()


@pytest.mark.parametrize("api_key,version", [(API_METADATA, 99), (API_PRODUCE, 100),
                                             (API_CREATE_TOPICS, 50), (1, 3), (1, 30000)])
def test_other_unsupported_versions_close_the_connection(running, api_key, version):
    s = connect(running.port)
    s.sendall(request(api_key, version, 1, b"\x00" * 16))
    assert_closed(s, f"api {api_key} v{version}")


@pytest.mark.parametrize("api_key", [77, 999, 32767, -1, -32768])
def test_unknown_api_keys_close_the_connection(running, api_key):
    s = connect(running.port)
    s.sendall(request(api_key, 0, 1, b"\x00" * 8))
    assert_closed(s, f"unknown api key {api_key}")


@pytest.mark.parametrize("length", [2**31 - 1, 2**30 + 1, 200 * 1024 * 1024, -1, -2**31])
def test_oversized_and_negative_frames_close_the_connection(running, length):
    before = running.rss_bytes()
    s = connect(running.port)
    s.sendall(struct.pack(">i", length) + b"\x00\x03\x00\x01")
    assert_closed(s, f"frame length {length}")
    # One log line names the length and the limit.
    deadline = time.monotonic() + 5
    while f"frame length {length} " not in running.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(f"frame length {length} " in line and "socket.request.max.bytes" in line
               for line in running.log_text().splitlines()), running.log_text()[-2000:]
    # Nothing was allocated for the declared size.
    assert running.rss_bytes() < before + 32 * 1024 * 1024


def test_truncated_requests_close_the_connection(running):
    # Complete frames whose content stops early: each is malformed.
    good_metadata = request(API_METADATA, 1, 5, struct.pack(">i", 1) + kstr("some-topic"))[4:]
    cases = {
        "header cut in api_version": good_metadata[:3],
        "header cut in client_id": good_metadata[:10],
        "metadata body cut in topic count": good_metadata[:len(good_metadata) - len(kstr("some-topic")) - 2],
        "metadata body cut in topic name": good_metadata[:-3],
        "client_id length past the end": struct.pack(">hhih", 3, 1, 5, 500) + b"abc",
        "array count past the end": struct.pack(">hhih", 3, 1, 5, 0) + struct.pack(">i", 10**6),
        "empty frame": b"",
    }
    for what, payload in cases.items():
        s = connect(running.port)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        assert_closed(s, what)
    # A valid request after all that still works.
    with connect(running.port) as s:
        assert "some-topic" in metadata_v1(s, 9, ["some-topic"])


def test_invalid_topic_names_in_metadata_and_create_topics(running):
    bad = ["bad name", "a/b", "x" * 250, ".", "..", "ünïcode", "tab\there"]
    with connect(running.port) as s:
        got = metadata_v1(s, 11, bad + ["fine-name"])
        for name in bad:
            assert got.get(name) == INVALID_TOPIC_EXCEPTION, (name, got)
        assert got["fine-name"] == 0  # auto-created
        created = create_topics_v0(s, 12, bad + ["", "ok-created"])
        for name in bad + [""]:
            assert created.get(name) == INVALID_TOPIC_EXCEPTION, (name, created)
        assert created["ok-created"] == 0
        # None of the invalid names exists afterwards.
        listing = metadata_v1(s, 13, bad)
        assert all(listing[n] == INVALID_TOPIC_EXCEPTION for n in bad)
    logs = os.listdir(os.path.join(running.data_dir, "logs"))
    assert [d for d in logs if d.rsplit("-", 1)[0] in bad + [""]] == []


def test_random_bytes_and_dropped_connections(running):
    rng = random.Random(SEED)
    print(f"bad input seed={SEED} (SLUICE_BAD_INPUT_SEED to replay)")
    pid = running.proc.pid
    # Warm up, then take the baselines.
    for _ in range(50):
        api_versions_v0(running.port)
    time.sleep(0.5)
    rss_before = running.rss_bytes()
    fds_before = fd_count(pid)

    # 1. Random bytes: garbage of every size, some with a plausible length prefix.
    for i in range(300):
        s = connect(running.port)
        n = rng.randint(1, 4096)
        junk = bytes(rng.getrandbits(8) for _ in range(n))
        if i % 3 == 0:
            junk = struct.pack(">i", len(junk)) + junk
        try:
            s.sendall(junk)
        except OSError:
            pass
        s.close()

    # 2. Hundreds of connections dropped mid-request: open 100 at a time, each
    # sends part of a frame (declared length larger than what is sent), then
    # all are dropped, half of them with a reset.
    frame = request(API_METADATA, 1, 3, struct.pack(">i", 1) + kstr("well-behaved"))
    for _round in range(4):
        socks = []
        for _ in range(100):
            s = connect(running.port)
            cut = rng.randint(1, len(frame) - 1)
            s.sendall(frame[:cut])
            socks.append(s)
        for j, s in enumerate(socks):
            if j % 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()

    # 3. Pipelined requests whose answers are never read, then a reset.
    for _ in range(50):
        s = connect(running.port)
        s.sendall(b"".join(request(API_METADATA, 1, c, struct.pack(">i", 0)) for c in range(64)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()

    # The broker is alive and answers, the dropped connections are freed, and
    # memory is bounded.
    assert running.proc.poll() is None, running.log_text()
    assert API_API_VERSIONS in api_versions_v0(running.port)
    fds_after = wait_fds_at_most(pid, fds_before + 4)
    assert fds_after <= fds_before + 4, f"{fds_after - fds_before} connections leaked (fds {fds_before} -> {fds_after})"
    rss_after = running.rss_bytes()
    print(f"RSS {rss_before / 2**20:.1f} MiB -> {rss_after / 2**20:.1f} MiB; fds {fds_before} -> {fds_after}")
    assert rss_after < rss_before + 64 * 2**20, f"RSS grew from {rss_before} to {rss_after}"


# ------------------------------------------------------ corrupt batches

def record_batch(values, magic=2, count=None, corrupt_crc=False, pid=-1, epoch=-1, seq=-1):
    """A v2 record batch of uncompressed records with null keys."""
    recs = b"".join(record(i, v) for i, v in enumerate(values))
    ts = int(time.time() * 1000)
    return v2_batch(recs, len(values) if count is None else count, ts, ts, last_delta=len(values) - 1,
                    magic=magic, producer=(pid, epoch, seq), crc_xor=0xDEADBEEF if corrupt_crc else 0)


def produce_v3(s, corr, topic, batches_by_partition, acks=-1):
    body = struct.pack(">hhi", -1, acks, 10000) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", len(batches_by_partition))
    for p, batch in batches_by_partition.items():
        body += struct.pack(">ii", p, len(batch)) + batch
    s.sendall(request(API_PRODUCE, 3, corr, body))
    r = Reader(recv_response(s))
    assert r.take(">i") == corr
    out = {}
    for _ in range(r.take(">i")):
        assert r.string() == topic
        for _ in range(r.take(">i")):
            p, err, base, _append_time = r.take(">ihqq")
            out[p] = (err, base)
    return out


def test_corrupt_batches_fail_only_their_partition(running):
    CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_FOR_MESSAGE_FORMAT = 2, 87, 43
    topic = "corrupt-batches"
    with connect(running.port) as s:
        body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">ihii", 4, 1, 0, 0) + struct.pack(">i", 10000)
        s.sendall(request(API_CREATE_TOPICS, 0, 1, body))
        recv_response(s)
        good = record_batch([b"good-0", b"good-1"])
        res = produce_v3(s, 2, topic, {
            0: good,
            1: record_batch([b"bad-crc"], corrupt_crc=True),
            2: record_batch([b"a", b"b"], count=5),  # count says 5, holds 2 (CRC valid)
            3: record_batch([b"old"], magic=1),
        })
        assert res[0] == (0, 0), res
        assert res[1][0] == CORRUPT_MESSAGE, res
        assert res[2][0] in (CORRUPT_MESSAGE, INVALID_RECORD), res
        assert res[3][0] in (CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_FOR_MESSAGE_FORMAT), res
        # The good partition keeps going; the bad ones stored nothing.
        assert produce_v3(s, 3, topic, {0: good}) == {0: (0, 2)}
    c = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "unused-corrupt"})
    try:
        for p, end in [(0, 4), (1, 0), (2, 0), (3, 0)]:
            assert c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, end), p
    finally:
        c.close()


def test_idempotent_duplicates_gaps_and_fencing(running):
    """Raw idempotent produce: a retried batch is answered with its first
    offsets and not stored again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER;
    after a new epoch the old one is fenced."""
    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH = 45, 47
    topic = "idempotence-raw"

    def init_producer_id(s, corr):
        s.sendall(request(22, 0, corr, struct.pack(">hi", -1, 60000)))
        r = Reader(recv_response(s))
        assert r.take(">i") == corr
        _throttle, err, pid, epoch = r.take(">ihqh")
        assert err == 0
        return pid, epoch

    with connect(running.port) as s:
        assert metadata_v1(s, 0, [topic]) == {topic: 0}  # auto-creates it, as clients do first
        pid, epoch = init_producer_id(s, 1)
        pid2, _ = init_producer_id(s, 2)
        assert pid2 != pid, "InitProducerId handed out the same producer id twice"
        b0 = record_batch([b"a", b"b", b"c"], pid=pid, epoch=epoch, seq=0)
        b1 = record_batch([b"d", b"e"], pid=pid, epoch=epoch, seq=3)
        assert produce_v3(s, 3, topic, {0: b0}) == {0: (0, 0)}
        assert produce_v3(s, 4, topic, {0: b1}) == {0: (0, 3)}
        # Retries of either batch: same offsets, nothing appended.
        assert produce_v3(s, 5, topic, {0: b0}) == {0: (0, 0)}
        assert produce_v3(s, 6, topic, {0: b1}) == {0: (0, 3)}
        # A gap: sequence 7 when 5 is next.
        gap = record_batch([b"x"], pid=pid, epoch=epoch, seq=7)
        assert produce_v3(s, 7, topic, {0: gap})[0][0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        # The next sequence still works.
        assert produce_v3(s, 8, topic, {0: record_batch([b"f"], pid=pid, epoch=epoch, seq=5)}) == {0: (0, 5)}
        # A newer epoch of the same producer fences the old one.
        newer = record_batch([b"g"], pid=pid, epoch=epoch + 1, seq=0)
        assert produce_v3(s, 9, topic, {0: newer}) == {0: (0, 6)}
        stale = record_batch([b"h"], pid=pid, epoch=epoch, seq=6)
        assert produce_v3(s, 10, topic, {0: stale})[0][0] == INVALID_PRODUCER_EPOCH
    c = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "unused-idem", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 7 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 7)
    finally:
        c.close()


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_idempotent_state_survives_restart(broker, how):
    """After a restart (crash or clean) a retried batch is still recognised as
    a duplicate and the sequence continues where it was."""
    topic = "idempotence-restart"
    with connect(broker.port) as s:
        metadata_v1(s, 0, [topic])
        s.sendall(request(22, 0, 1, struct.pack(">hi", -1, 60000)))
        r = Reader(recv_response(s))
        r.take(">i")
        _throttle, err, pid, epoch = r.take(">ihqh")
        assert err == 0
        b0 = record_batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0)
        b1 = record_batch([b"c"], pid=pid, epoch=epoch, seq=2)
        assert produce_v3(s, 2, topic, {0: b0}) == {0: (0, 0)}
        assert produce_v3(s, 3, topic, {0: b1}) == {0: (0, 2)}
    if how == "sigkill":
        broker.kill()
    else:
        assert broker.stop() == 0
    broker.start()
    with connect(broker.port) as s:
        assert produce_v3(s, 4, topic, {0: b1}) == {0: (0, 2)}, "retry after restart was stored again"
        assert produce_v3(s, 5, topic, {0: b0}) == {0: (0, 0)}
        nxt = record_batch([b"d"], pid=pid, epoch=epoch, seq=3)
        assert produce_v3(s, 6, topic, {0: nxt}) == {0: (0, 3)}
        # A new InitProducerId after the restart never reuses the old id.
        s.sendall(request(22, 0, 7, struct.pack(">hi", -1, 60000)))
        r = Reader(recv_response(s))
        r.take(">i")
        assert r.take(">ihqh")[2] != pid


def test_connection_cap_and_idle_timeout(broker_factory):
    """--max.connections refuses connections past the cap and frees slots as
    connections close (nothing leaks from the count); --connections.max.idle.ms
    closes idle connections, and clients that reconnect keep working."""
    b = broker_factory(settings={"max.connections": 20, "connections.max.idle.ms": 1500})
    b.start()
    def attempt():
        socks = [connect(b.port) for _ in range(40)]
        answered = 0
        for i, s in enumerate(socks):
            try:
                s.sendall(request(API_API_VERSIONS, 0, i))
                s.settimeout(5)
                recv_response(s)
                answered += 1
            except (EOFError, ConnectionResetError, BrokenPipeError):
                pass
        for s in socks:
            s.close()
        return answered

    for _round in range(3):
        # Closed connections free their slots asynchronously: retry until the
        # full 20 are served again; never more than 20.
        deadline = time.monotonic() + 15
        while True:
            answered = attempt()
            assert answered <= 20, f"{answered} connections served past max.connections 20"
            if answered == 20 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert answered == 20, f"only {answered} of 20 slots came back: connection count leaks"

    # Idle timeout: a silent connection is closed after ~1.5 s, not before 1 s.
    s = connect(b.port)
    t0 = time.monotonic()
    assert_closed(s, "idle connection", timeout=10)
    assert 1.0 <= time.monotonic() - t0 <= 8, time.monotonic() - t0

    # A client idling across the timeout reconnects and keeps working.
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    reports = []
    for i in range(3):
        p.produce("idle-reconnect", b"v%d" % i, on_delivery=lambda e, m: reports.append((e, m.offset())))
        assert p.flush(15) == 0
        time.sleep(2.0)
    assert reports == [(None, 0), (None, 1), (None, 2)]
    assert b.stop() == 0


def test_pipelined_requests_answered_in_order_past_the_inflight_bound(running):
    """500 requests written at once (well past the 64 in flight per
    connection), mixing ApiVersions, Metadata and Produce with acks=1 and
    acks=0: every answer comes back, in request order, and acks=0 gets none."""
    topic = "pipelined"
    with connect(running.port, timeout=30) as s:
        metadata_v1(s, 0, [topic])
        frames, expect = [], []
        for corr in range(1, 501):
            kind = corr % 4
            if kind == 0:
                frames.append(request(API_API_VERSIONS, 0, corr))
                expect.append(corr)
            elif kind == 1:
                frames.append(request(API_METADATA, 1, corr, struct.pack(">i", 1) + kstr(topic)))
                expect.append(corr)
            else:
                acks = 1 if kind == 2 else 0
                batch = record_batch([b"pipe-%d" % corr])
                body = struct.pack(">hhi", -1, acks, 10000) + struct.pack(">i", 1) + kstr(topic)
                body += struct.pack(">iii", 1, 0, len(batch)) + batch
                frames.append(request(API_PRODUCE, 3, corr, body))
                if acks:
                    expect.append(corr)
        data = b"".join(frames)
        sender = threading.Thread(target=s.sendall, args=(data,), daemon=True)
        sender.start()  # the broker stops reading while we do not read answers
        got = []
        for _ in expect:
            got.append(struct.unpack_from(">i", recv_response(s))[0])
        sender.join(timeout=10)
        assert got == expect
    c = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "unused-pipe"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 250)
    finally:
        c.close()


def test_topic_churn_under_traffic(broker):
    """Topics created and deleted over and over while producers and consumers
    use them (auto-creation on): the broker neither crashes nor wedges, and
    afterwards a fresh topic of the same name works normally."""
    from confluent_kafka.admin import AdminClient, NewTopic

    names = ["churn-a", "churn-b"]
    stop = threading.Event()
    errors = []

    def traffic():
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1,
                      "message.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 200})
        # The consumer is kafka-python's: librdkafka 2.0.2's consumer can hang
        # for tens of seconds in close() after its assigned topics were deleted and
        # recreated under it (its broker thread keeps references: "Handle is
        # terminating ... 3 refcnts", with no request outstanding), a client
        # bug that has nothing to do with the broker.
        c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                metadata_max_age_ms=200, request_timeout_ms=5000)
        c.assign([kafka.TopicPartition(n, 0) for n in names])
        try:
            i = 0
            while not stop.is_set():
                for n in names:
                    try:
                        p.produce(n, b"churn-%d" % i)
                    except BufferError:
                        pass
                    i += 1
                p.poll(0.005)
                try:
                    c.poll(timeout_ms=5)
                except kerr.KafkaError:
                    pass  # the topic may be gone at this moment
            p.flush(5)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            c.close()

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for round_ in range(12):
        for fs in (admin.delete_topics(names, operation_timeout=5), admin.create_topics(
                [NewTopic(n, 1 + round_ % 3, 1) for n in names])):
            for f in fs.values():
                try:
                    f.result(timeout=30)
                except Exception:  # noqa: BLE001 - races with auto-creation are expected
                    pass
        assert broker.proc.poll() is None, f"broker died in round {round_}:\n{broker.log_text()}"
    stop.set()
    t.join(timeout=30)
    assert not t.is_alive(), "client traffic thread did not stop"
    assert not errors, errors
    assert API_API_VERSIONS in api_versions_v0(broker.port)

    for fs in (admin.delete_topics(names), ):
        for f in fs.values():
            try:
                f.result(timeout=30)
            except Exception:  # noqa: BLE001 - may already be gone
                pass
    deadline = time.monotonic() + 10
    while set(names) & set(admin.list_topics(timeout=10).topics) and time.monotonic() < deadline:
        time.sleep(0.1)
    for f in admin.create_topics([NewTopic("churn-a", 2, 1)]).values():
        try:
            f.result(timeout=30)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"create after delete: {e}\n{broker.log_text()[-6000:]}")
    reports = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("churn-a", b"final-%d" % i, partition=i % 2,
                  on_delivery=lambda e, m: reports.append((e, m.partition(), m.offset())))
    assert p.flush(30) == 0
    assert sorted(reports, key=lambda r: (r[1], r[2])) == [(None, pp, o) for pp in (0, 1) for o in range(5)]


def fetch_v4(s, corr, topic, offset, max_wait_ms):
    body = struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">iiqi", 1, 0, offset, 1 << 20)
    s.sendall(request(1, 4, corr, body))


def read_fetch_v4(s, corr):
    r = Reader(recv_response(s))
    assert r.take(">i") == corr
    r.take(">i")  # throttle
    assert r.take(">i") == 1
    r.string()
    assert r.take(">i") == 1
    partition, err, hw = r.take(">ihq")
    return err, hw


def test_parked_fetch_on_deleted_topic_completes_with_unknown_topic(broker):
    topic = "parked-delete"
    with connect(broker.port, timeout=20) as s:
        metadata_v1(s, 1, [topic])
        assert produce_v3(s, 2, topic, {0: record_batch([b"x"])}) == {0: (0, 0)}
        f = connect(broker.port, timeout=20)
        t0 = time.monotonic()
        fetch_v4(f, 3, topic, 1, 30000)  # at the end: parks for up to 30 s
        time.sleep(0.3)
        s.sendall(request(20, 0, 4, struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 5000)))
        recv_response(s)
        err, hw = read_fetch_v4(f, 3)
        took = time.monotonic() - t0
        f.close()
    assert err == 3, f"parked fetch answered error {err} (high watermark {hw}) after the topic was deleted"
    # Answered when the topic went, not at max_wait_ms (30 s).
    assert took < 20.0, f"parked fetch answered only after {took:.1f}s"
