"""Produced batches are validated record by record, as Kafka's broker does.

Each batch here is built by hand with a correct CRC-32C, so only the
record-level check can catch it: records that do not parse, a record length
past the batch's end, a record count larger or smaller than the records
present, an unknown codec, the gzip flag on bytes that are not gzip, a
decompression bomb, a batch over max.message.bytes or segment.bytes, a
record without a key in a compacted topic. Each is answered with Kafka's
error for that partition and nothing is stored, so consumers never stop at a
bad offset. A batch whose header carries max timestamp -1 (as some Go
clients write it) is stored with the largest record timestamp, so time
retention and ListOffsets by timestamp work on it.

Requests are encoded by hand: Produce v7 (request header v1).
"""

import gzip
import struct
import threading
import time
import zlib

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_harness import Broker, record, v2_batch, varint
from test_bad_input import connect, kstr, recv_exact, request

CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE = 2, 10, 18
UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD = 76, 87


# ------------------------------------------------------------ batches

def plain_records(n, base_ts=None, size=64, keyed=False):
    base_ts = int(time.time() * 1000) if base_ts is None else base_ts
    recs = b"".join(record(i, b"v" * size, key=(b"k%d" % i) if keyed else None, ts_delta=i)
                    for i in range(n))
    return recs, base_ts


def good_batch(n=5, keyed=False):
    recs, ts = plain_records(n, keyed=keyed)
    return v2_batch(recs, n, ts, ts + n - 1)


# ------------------------------------------------------------ Produce v7

def produce(port, topic, records, partition=0, acks=-1):
    body = struct.pack(">h", -1) + struct.pack(">hi", acks, 30000)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1)
    body += struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
    s = connect(port)
    try:
        s.sendall(request(0, 7, 1, body))
        n = struct.unpack(">i", recv_exact(s, 4))[0]
        r = recv_exact(s, n)
    finally:
        s.close()
    pos = 4 + 4  # correlation id, topic count
    name_len = struct.unpack_from(">h", r, pos)[0]
    pos += 2 + name_len + 4  # name, partition count
    _index, err, base = struct.unpack_from(">ihq", r, pos)
    return err, base


def create(admin, name, config=None):
    fs = admin.create_topics([NewTopic(name, 1, 1, config=config or {})])
    fs[name].result(30)


def watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def read_all(bootstrap, topic, expect):
    """Reads `expect` messages from the start with CRC checks on."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + topic, "check.crcs": True,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while len(got) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def broker():
    b = Broker(settings={"log.retention.check.interval.ms": 100})
    b.start()
    yield b
    b.close()


def bad_cases():
    """(topic, batch, the error Kafka answers) by case name."""
    recs, ts = plain_records(4)
    one = record(0, b"x" * 40)
    cases = {}
    # A record length past the batch's end.
    cases["length past end"] = ("bad", v2_batch(varint(1000) + one[1:] + recs, 4, ts, ts), INVALID_RECORD)
    # Record bytes that do not parse: a key length of -5.
    cases["bytes that do not parse"] = (
        "bad", v2_batch(varint(7) + b"\x00\x00\x00" + varint(-5) + b"\x00\x00\x00", 1, ts, ts), INVALID_RECORD)
    # More records claimed than present, and fewer.
    cases["count larger"] = ("bad", v2_batch(recs, 5, ts, ts), INVALID_RECORD)
    cases["count smaller"] = ("bad", v2_batch(recs, 3, ts, ts), INVALID_RECORD)
    # Offset deltas that do not count 0, 1, 2, ...
    cases["offset deltas"] = (
        "bad", v2_batch(record(0, b"a") + record(1, b"b", offset_delta=7), 2, ts, ts), INVALID_RECORD)
    # An unknown compression codec, and the gzip flag on plain bytes.
    cases["codec 7"] = ("bad", v2_batch(recs, 4, ts, ts, attributes=7), UNSUPPORTED_COMPRESSION_TYPE)
    cases["gzip flag on plain bytes"] = ("bad", v2_batch(recs, 4, ts, ts, attributes=1), CORRUPT_MESSAGE)
    # A gzip bomb: a few KB that decompress past max.message.bytes.
    bomb_body = b"".join(record(i, b"\x00" * 60000) for i in range(40))
    bomb = v2_batch(gzip.compress(bomb_body, 9), 40, ts, ts, attributes=1)
    assert len(bomb) < 65536
    cases["decompression bomb"] = ("bad", bomb, MESSAGE_TOO_LARGE)
    # Larger than max.message.bytes.
    big_recs, _ = plain_records(2, size=40000)
    cases["over max.message.bytes"] = ("bad", v2_batch(big_recs, 2, ts, ts), MESSAGE_TOO_LARGE)
    # Larger than the log's own bound (64 MiB), which was checked first and
    # answered CORRUPT_MESSAGE (librdkafka's "Invalid message"). The size is
    # checked before the CRC, so the padding is left out of it.
    huge = v2_batch(record(0, b"\x00" * 100) * 1, 1, ts, ts) + b"\x00" * (65 << 20)
    huge = huge[:8] + struct.pack(">i", len(huge) - 12) + huge[12:]
    cases["over 64 MiB"] = ("bad", huge, MESSAGE_TOO_LARGE)
    # Larger than segment.bytes (but within max.message.bytes).
    seg_recs, _ = plain_records(1, size=20000)
    cases["over segment.bytes"] = ("small-seg", v2_batch(seg_recs, 1, ts, ts), RECORD_LIST_TOO_LARGE)
    # A record without a key in a compacted topic.
    cases["no key, compacted"] = ("compacted", good_batch(3), INVALID_RECORD)
    return cases


@pytest.fixture(scope="module")
def topics(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "bad", {"max.message.bytes": "65536", "segment.bytes": "1048576"})
    create(admin, "small-seg", {"segment.bytes": "16384", "max.message.bytes": "1048576"})
    create(admin, "compacted", {"cleanup.policy": "compact"})
    return broker


@pytest.mark.parametrize("what", list(bad_cases()))
def test_a_bad_batch_is_refused_and_nothing_is_stored(topics, what):
    topic, b, want = bad_cases()[what]
    before = watermarks(topics.bootstrap, topic)
    err, _ = produce(topics.port, topic, b)
    assert err == want, f"{what}: error {err}, want {want}"
    assert watermarks(topics.bootstrap, topic) == before, "a refused batch was stored"


def test_the_partition_still_serves_good_batches(topics):
    broker = topics
    assert produce(broker.port, "compacted", good_batch(3, keyed=True))[0] == 0
    start, end = watermarks(broker.bootstrap, "bad")
    for _ in range(3):
        assert produce(broker.port, "bad", good_batch(5))[0] == 0
    # A CRC-checking consumer reads exactly the good batches.
    assert len(read_all(broker.bootstrap, "bad", end + 15)) == end + 15
    assert watermarks(broker.bootstrap, "bad") == (start, end + 15)


def test_max_timestamp_minus_one_is_worked_out_from_the_records(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Small segments so most of them close; seven days of retention.
    create(admin, "go-client", {"segment.bytes": "4096", "retention.ms": str(7 * 86400 * 1000)})
    create(admin, "no-timestamps", {"segment.bytes": "4096", "retention.ms": str(7 * 86400 * 1000)})
    base_ts = int(time.time() * 1000) - 60_000
    for i in range(50):
        recs, _ = plain_records(5, base_ts=base_ts + 10 * i, size=100)
        assert produce(broker.port, "go-client", v2_batch(recs, 5, base_ts + 10 * i, -1))[0] == 0
        # Records with no timestamp at all (-1 everywhere).
        untimed = b"".join(record(j, b"u" * 100) for j in range(5))
        assert produce(broker.port, "no-timestamps", v2_batch(untimed, 5, -1, -1))[0] == 0
    # Several retention passes (every 100 ms) must leave every segment.
    time.sleep(1.5)
    assert watermarks(broker.bootstrap, "go-client") == (0, 250)
    assert watermarks(broker.bootstrap, "no-timestamps") == (0, 250)
    # ListOffsets by timestamp finds the batch whose records carry it.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    try:
        want = base_ts + 10 * 30
        found = c.offsets_for_times([TopicPartition("go-client", 0, want)], timeout=10)
        assert found[0].offset == 150, found
    finally:
        c.close()
    msgs = read_all(broker.bootstrap, "go-client", 250)
    assert len(msgs) == 250
    assert msgs[7].timestamp()[1] == base_ts + 10 + 2


def gzip_bomb(decompressed_bytes):
    """A gzip stream of zeros, built in chunks so the test holds little."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip wrapper
    chunk = b"\0" * (1 << 20)
    out = [z.compress(chunk) for _ in range(decompressed_bytes >> 20)]
    out.append(z.flush())
    return b"".join(out)


def test_concurrent_decompression_bombs_stay_within_the_bound(broker):
    """16 gzip bombs of about 255 KB, each inflating to 256 MiB, sent at
    once: each is refused once it passes max.message.bytes, so the broker's
    peak memory grows by megabytes, not by the 1 GB they once took."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "bombs")
    _, ts = plain_records(1)
    bomb = v2_batch(gzip_bomb(256 << 20), 1000, ts, ts, attributes=1)
    assert len(bomb) < 1 << 20
    before = broker.peak_rss_bytes()
    results = []

    def send():
        results.append(produce(broker.port, "bombs", bomb)[0])

    threads = [threading.Thread(target=send) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [MESSAGE_TOO_LARGE] * 16
    grown = broker.peak_rss_bytes() - before
    assert grown < 128 << 20, f"peak resident memory grew by {grown >> 20} MiB"
    assert watermarks(broker.bootstrap, "bombs") == (0, 0)
