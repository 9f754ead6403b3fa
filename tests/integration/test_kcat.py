"""kcat (librdkafka 2.0.2) produces and consumes with keys, headers and every codec.

Each codec gets its own topic so a codec's batches are the only thing in it:
the consumer must decompress exactly what the producer compressed (the broker
stores batches as sent), and offsets must run 0..n-1 without gaps.
"""

import glob
import os
import socket
import struct
import subprocess

import pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_batches(data_dir, topic, partition=0):
    """(base_offset, record_count, codec id) of each batch in the partition's segment files."""
    out = []
    for seg in sorted(glob.glob(os.path.join(data_dir, "logs", f"{topic}-{partition}", "*.log"))):
        data = open(seg, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0:
                break
            attrs = struct.unpack_from(">h", data, pos + 21)[0]
            count = struct.unpack_from(">i", data, pos + 57)[0]
            out.append((base, count, attrs & 7))
            pos += 12 + length
    return out


def kcat(*args, input=None, timeout=60):
    r = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {args} failed ({r.returncode}): {r.stderr.decode(errors='replace')}"
    return r


def consume_all(bootstrap, topic, fmt, *extra):
    # -e exits at the end of the partition; -u unbuffered; the format ends each
    # message with a record separator that cannot occur in the payloads.
    out = kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt, *extra).stdout
    return out.decode()


def produce_codec_topic(broker, codec, n):
    topic = f"kcat-{codec}"
    # Values of varied sizes (compressible and not) so batches have many records.
    lines = [f"key-{i % 17}\t{'v' * (i % 50)}payload-{i}-{codec}" for i in range(n)]
    kcat(
        "-P", "-b", broker.bootstrap, "-t", topic, "-K", "\t", "-z", codec,
        "-H", "app=sluice-it", "-H", f"codec={codec}",
        "-X", "linger.ms=20", "-X", "batch.num.messages=64",
        input=("\n".join(lines) + "\n").encode(),
    )
    return topic


@pytest.mark.parametrize("codec", CODECS)
def test_codec_keys_headers_offsets(broker, codec):
    n = 300
    topic = produce_codec_topic(broker, codec, n)
    out = consume_all(broker.bootstrap, topic, "%p|%o|%k|%s|%h\x1e")
    recs = [r for r in out.split("\x1e") if r]
    assert len(recs) == n, f"expected {n} records, got {len(recs)}"
    for i, rec in enumerate(recs):
        p, o, k, v, h = rec.split("|", 4)
        assert p == "0"
        assert int(o) == i
        assert k == f"key-{i % 17}"
        assert v == f"{'v' * (i % 50)}payload-{i}-{codec}"
        assert h == f"app=sluice-it,codec={codec}"


def advertised_versions(port):
    """{api_key: (min, max)} from an ApiVersions v0 request on a raw socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        payload = struct.pack(">hhih", 18, 0, 1, 2) + b"it"
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed during ApiVersions"
            buf += chunk
    _corr, err, n = struct.unpack_from(">ihi", buf, 4)
    assert err == 0
    return {k: (lo, hi) for k, lo, hi in (struct.unpack_from(">hhh", buf, 14 + 6 * i) for i in range(n))}


def expected_codec(broker, codec):
    """The codec librdkafka 2.0.2 really uses against this broker. It drops lz4
    unless FindCoordinator v0 is advertised (its "LZ4" feature probe), and
    drops gzip, snappy and lz4 unless Produce v0 is advertised (fixed in
    Sluice by advertising Produce from v0, as Kafka 4.0 does). Until consumer
    groups bring FindCoordinator, kcat's lz4 goes out uncompressed; this
    follows the broker's answer so the test keeps holding when they land."""
    if codec == "lz4":
        find_coordinator = advertised_versions(broker.port).get(10)
        if find_coordinator is None or find_coordinator[0] > 0:
            return CODEC_ID["none"]
    return CODEC_ID[codec]


@pytest.mark.parametrize("codec", CODECS)
def test_codec_stored_as_sent(broker, codec):
    """The batches on disk carry the codec kcat asked for: the client really
    compressed, and the broker stored the batch without recompressing it."""
    n = 300
    topic = produce_codec_topic(broker, codec, n)
    batches = stored_batches(broker.data_dir, topic)
    assert batches, "no segment file found"
    assert sum(c for _, c, _ in batches) == n
    # librdkafka sends a batch uncompressed when compressing does not make it
    # smaller (a lone first message does that); every batch of many records
    # must carry the codec.
    big = [b for b in batches if b[1] >= 16]
    assert sum(c for _, c, _ in big) >= n - 20, batches
    assert {codec_id for _, _, codec_id in big} == {expected_codec(broker, codec)}, batches


def test_mixed_codecs_in_one_partition(broker):
    """Batches of every codec one after another in one partition read back in order."""
    topic = "kcat-mixed"
    expected = []
    for codec in CODECS:
        lines = [f"k{codec}:{codec}-{i}" for i in range(40)]
        kcat("-P", "-b", broker.bootstrap, "-t", topic, "-K", ":", "-z", codec,
             input=("\n".join(lines) + "\n").encode())
        expected += [(f"k{codec}", f"{codec}-{i}") for i in range(40)]
    out = consume_all(broker.bootstrap, topic, "%o|%k|%s\n")
    got = [tuple(l.split("|")) for l in out.splitlines()]
    assert [int(o) for o, _, _ in got] == list(range(len(expected)))
    assert [(k, v) for _, k, v in got] == expected


def test_consume_from_offset_and_null_key(broker):
    topic = "kcat-offsets"
    kcat("-P", "-b", broker.bootstrap, "-t", topic, input=b"".join(b"m%d\n" % i for i in range(10)))
    # Without -K the key is null: kcat prints -1 for its length with %K.
    out = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-o", "7", "-e", "-q", "-f", "%o %K %s\n").stdout
    assert out.decode().splitlines() == ["7 -1 m7", "8 -1 m8", "9 -1 m9"]
    # Negative offset: relative to the end.
    out = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-o", "-2", "-e", "-q", "-f", "%s\n").stdout
    assert out.decode().splitlines() == ["m8", "m9"]


def test_multi_partition_keys_stay_on_their_partition(broker_factory):
    b = broker_factory(settings={"num.partitions": 4})
    b.start()
    topic = "kcat-parts"
    lines = [f"user-{i % 10}:event-{i}" for i in range(200)]
    kcat("-P", "-b", b.bootstrap, "-t", topic, "-K", ":", "-z", "lz4",
         input=("\n".join(lines) + "\n").encode())
    out = consume_all(b.bootstrap, topic, "%p|%o|%k|%s\n")
    by_part = {}
    key_part = {}
    for line in out.splitlines():
        p, o, k, v = line.split("|")
        by_part.setdefault(p, []).append((int(o), k, v))
        assert key_part.setdefault(k, p) == p, f"key {k} on two partitions"
    assert sum(len(v) for v in by_part.values()) == 200
    assert len(by_part) > 1, "200 messages over 10 keys all landed on one partition"
    for p, recs in by_part.items():
        assert [o for o, _, _ in recs] == list(range(len(recs)))
    # Per key, events come back in produce order.
    for key in {f"user-{j}" for j in range(10)}:
        events = [int(v.split("-")[1]) for recs in by_part.values() for _, k, v in recs if k == key]
        assert events == sorted(events)
        assert events == [i for i in range(200) if f"user-{i % 10}" == key]
    # kcat -L sees 4 partitions.
    meta = kcat("-L", "-b", b.bootstrap, "-t", topic).stdout.decode()
    assert "4 partitions" in meta, meta
    assert b.stop() == 0
