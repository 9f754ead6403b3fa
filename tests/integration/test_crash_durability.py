"""Crash durability: SIGKILL the broker 20 times under an idempotent acks=all producer.

A confluent_kafka producer (enable.idempotence=true, acks=all) sends a numbered
stream to 2 partitions (number i to partition i % 2) while the broker is killed
with SIGKILL and restarted on the same port and data directory at random
moments. Afterwards every acknowledged message must be present exactly once
and in order in its partition, nothing else may be there (no duplicates from
retries, no torn or invented records), and kcat must read both partitions to
their end. The seed is printed; set SLUICE_CRASH_SEED to replay one.
"""

import ctypes
import glob
import os
import random
import re
import struct
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition


KILLS = 20
PARTITIONS = 2
TOPIC = "crash"


_isal = ctypes.CDLL("libisal.so.2")
_isal.crc32_iscsi.restype = ctypes.c_uint32
_isal.crc32_iscsi.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32]


def crc32c(data: bytes) -> int:
    # ISA-L's crc32_iscsi does no inversion (see docs/conventions).
    return ~_isal.crc32_iscsi(data, len(data), 0xFFFFFFFF) & 0xFFFFFFFF


def check_segments(data_dir, partition):
    """Walks the partition's segment files: every batch is whole, its CRC-32C
    holds, and offsets follow on without gaps. Returns the next offset."""
    next_offset = None
    files = sorted(glob.glob(os.path.join(data_dir, "logs", f"{TOPIC}-{partition}", "*.log")))
    assert files, f"no segment files for partition {partition}"
    for seg in files:
        data = open(seg, "rb").read()
        pos = 0
        while pos < len(data):
            assert pos + 61 <= len(data), f"{seg}: torn batch header at byte {pos}"
            base, length = struct.unpack_from(">qi", data, pos)
            end = pos + 12 + length
            assert length >= 49 and end <= len(data), f"{seg}: torn batch at byte {pos}"
            magic = data[pos + 16]
            (crc,) = struct.unpack_from(">I", data, pos + 17)
            assert magic == 2 and crc == crc32c(data[pos + 21:end]), f"{seg}: bad batch at byte {pos}"
            (last_delta,) = struct.unpack_from(">i", data, pos + 23)
            if next_offset is not None:
                assert base == next_offset, f"{seg}: batch at {base}, expected {next_offset}"
            next_offset = base + last_delta + 1
            pos = end
    return next_offset


def read_all(bootstrap, partitions, timeout=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-crash", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    out = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == m.error()._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out[m.partition()].append((m.offset(), int(m.value()[:10])))
        assert len(eof) == partitions, "consumer did not reach the end of every partition"
    finally:
        c.close()
    return out


def test_sigkill_restarts_lose_nothing_acknowledged(tmp_path, broker_factory):
    seed = int(os.environ.get("SLUICE_CRASH_SEED", time.time_ns() % 1_000_000_007))
    print(f"crash durability seed={seed} (SLUICE_CRASH_SEED={seed} to replay)")
    rng = random.Random(seed)

    # Small segments so kills also land around rolls (and the producer-state
    # snapshots taken there) and recovery spans many segments.
    b = broker_factory(data_dir=tmp_path / "data",
                       settings={"num.partitions": PARTITIONS, "log.segment.bytes": 1 << 20})
    b.start()
    acked = {p: [] for p in range(PARTITIONS)}  # numbers in ack order per partition
    failed = []
    fatal = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        n = int(msg.value()[:10])
        with lock:
            if err is None:
                acked[msg.partition()].append((msg.offset(), n))
            else:
                failed.append((n, str(err)))

    p = Producer({
        "bootstrap.servers": b.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 200,
        "socket.connection.setup.timeout.ms": 2000,
        "queue.buffering.max.messages": 20000,
        # Connection errors while the broker is down are expected; a fatal
        # idempotence error (say, a sequence gap after recovery) is a failure.
        "error_cb": lambda err: fatal.append(err) if err.fatal() else None,
    })
    stop = threading.Event()
    sent = [0]

    def produce_loop():
        n = 0
        while not stop.is_set():
            for _ in range(50):
                try:
                    p.produce(TOPIC, value=b"%010d-" % n + b"x" * 90, partition=n % PARTITIONS,
                              on_delivery=on_delivery)
                    n += 1
                except BufferError:
                    break
            p.poll(0.01)
        sent[0] = n

    t = threading.Thread(target=produce_loop, daemon=True)
    t.start()
    try:
        for i in range(KILLS):
            # Mostly up long enough for traffic to flow, sometimes killed
            # right after start while it is still recovering or accepting.
            time.sleep(rng.choice([rng.uniform(0.05, 0.3), rng.uniform(0.3, 2.5)]))
            b.kill()
            time.sleep(rng.uniform(0.0, 0.3))
            b.start()
        time.sleep(1.0)
    finally:
        stop.set()
        t.join(timeout=30)
    remaining = p.flush(90)
    assert remaining == 0, f"{remaining} messages still unacknowledged 90 s after the last restart"
    assert not failed, f"{len(failed)} deliveries failed, first: {failed[:3]}"
    assert not fatal, fatal

    log = b.log_text()
    assert len(re.findall(r"unclean shutdown", log)) >= 1, log
    assert b.stop() == 0
    # On disk, after a clean stop: whole batches with valid CRCs, no gaps.
    ends = {part: check_segments(b.data_dir, part) for part in range(PARTITIONS)}
    # One more clean start so the final state is also what recovery rebuilds.
    b.start()
    got = read_all(b.bootstrap, PARTITIONS)
    total_acked = sum(len(v) for v in acked.values())
    assert total_acked > 1000, f"only {total_acked} messages acknowledged; the test did not exercise much"
    for part in range(PARTITIONS):
        offs = [o for o, _ in got[part]]
        nums = [n for _, n in got[part]]
        assert offs == list(range(len(offs))), f"partition {part}: offsets not dense"
        assert ends[part] == len(offs), f"partition {part}: segments end at {ends[part]}, consumer read {len(offs)}"
        assert len(set(nums)) == len(nums), f"partition {part}: duplicates"
        assert nums == sorted(nums), f"partition {part}: out of order"
        assert all(n % PARTITIONS == part for n in nums), f"partition {part}: message from another partition"
        # Every acknowledged message is present at the offset it was acknowledged with.
        at = dict(got[part])
        for off, n in acked[part]:
            assert at.get(off) == n, f"partition {part}: acked {n} at offset {off}, found {at.get(off)}"
        # With idempotence and unlimited retries, every produced message was
        # acknowledged, so the partition holds exactly the numbers sent to it.
        assert nums == [n for n in range(sent[0]) if n % PARTITIONS == part]

    # kcat reads every partition to the end without errors (no torn batch served).
    for part in range(PARTITIONS):
        r = subprocess.run(["kcat", "-C", "-b", b.bootstrap, "-t", TOPIC, "-p", str(part), "-o", "beginning",
                            "-e", "-q", "-f", "%o\n"], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == len(got[part])
        assert b"ERROR" not in r.stderr, r.stderr
    segments = len(glob.glob(os.path.join(b.data_dir, "logs", f"{TOPIC}-*", "*.log")))
    print(f"acknowledged {total_acked} of {sent[0]} over {KILLS} SIGKILLs; {segments} segments")
    assert segments > 2 * PARTITIONS, "no segment rolls happened"
    assert b.stop() == 0
    b.close()


def test_acknowledged_admin_changes_survive_sigkill(tmp_path, broker_factory):
    """Topic creations, deletions, partition additions and config changes are
    durable once answered: SIGKILL right after each answer loses none."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    b = broker_factory(data_dir=tmp_path / "data")
    b.start()

    clients = []

    def admin():
        # Kept alive: futures of a destroyed AdminClient fail with _DESTROY.
        clients.append(AdminClient({"bootstrap.servers": b.bootstrap}))
        return clients[-1]

    def done(fs):
        for f in fs.values():
            f.result(timeout=30)

    names = [f"adm-{i}" for i in range(12)]
    done(admin().create_topics([NewTopic(n, 1 + i % 3, 1) for i, n in enumerate(names)]))
    b.kill()
    b.start()
    md = admin().list_topics(timeout=30).topics
    for i, n in enumerate(names):
        assert n in md and len(md[n].partitions) == 1 + i % 3, n

    done(admin().delete_topics(names[:4]))
    done(admin().create_partitions([NewPartitions(names[4], 5)]))
    done(admin().alter_configs([ConfigResource(ConfigResource.Type.TOPIC, names[5],
                                                set_config={"retention.ms": "123456"})]))
    b.kill()
    b.start()
    md = admin().list_topics(timeout=30).topics
    assert not set(names[:4]) & set(md), "deleted topics came back after SIGKILL"
    assert len(md[names[4]].partitions) == 5
    (f,) = admin().describe_configs([ConfigResource(ConfigResource.Type.TOPIC, names[5])]).values()
    assert f.result(timeout=30)["retention.ms"].value == "123456"
    # A deleted name can be created again and is empty.
    done(admin().create_topics([NewTopic(names[0], 1, 1)]))
    b.kill()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused-adm"})
    try:
        assert c.get_watermark_offsets(TopicPartition(names[0], 0), timeout=30) == (0, 0)
    finally:
        c.close()
    assert b.stop() == 0
    b.close()
