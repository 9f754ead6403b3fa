"""A full disk refuses writes with KAFKA_STORAGE_ERROR, and writes resume by
themselves once space returns; a SIGTERM then stops the broker cleanly and
nothing acknowledged is lost.

The data directory is a small tmpfs this test mounts (as root) and removes;
a filler file takes the space and gives it back.
"""

import os
import subprocess
import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_harness import Broker


@pytest.fixture
def small_disk():
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and needs root, as the README's test command runs")
    mnt = tempfile.mkdtemp(prefix="sluice-full-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)
        os.rmdir(mnt)


def fill(path, leave_bytes):
    """Writes a filler file until at most `leave_bytes` are free."""
    with open(path, "wb") as f:
        chunk = b"\0" * (256 << 10)
        while True:
            st = os.statvfs(os.path.dirname(path))
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                f.write(chunk[:max(4096, min(len(chunk), free - leave_bytes))])
                f.flush()
            except OSError:
                break


def produce_one(p, topic, value):
    out = {}

    def cb(err, msg):
        out["err"] = err
        out["offset"] = msg.offset() if err is None else None

    p.produce(topic, value=value, partition=0, on_delivery=cb)
    p.flush(30)
    return out


def test_writes_resume_when_space_returns(small_disk):
    data = os.path.join(small_disk, "data")
    os.mkdir(data)
    broker = Broker(data_dir=data, settings={"log.segment.bytes": 1 << 20})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("full", 1, 1)])["full"].result(30)
        # No retries: each refusal reaches the callback.
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                      "enable.idempotence": False, "linger.ms": 0})
        acked = []
        for i in range(20):
            r = produce_one(p, "full", b"before-%d" % i)
            assert r["err"] is None, r
            acked.append(r["offset"])

        filler = os.path.join(small_disk, "filler")
        fill(filler, 8 << 10)
        refused = 0
        for i in range(50):
            r = produce_one(p, "full", b"x" * 60000)
            if r["err"] is None:
                acked.append(r["offset"])
                continue
            assert r["err"].code() == KafkaError.KAFKA_STORAGE_ERROR, r["err"]
            refused += 1
        assert refused > 0, "the disk never filled"
        m = broker.metrics()
        assert m['sluice_log_out_of_space{topic="full",partition="0"}'] == 1
        assert m['sluice_log_out_of_space_errors_total{topic="full",partition="0"}'] >= refused
        assert m['sluice_log_offline{topic="full",partition="0"}'] == 0

        # Space returns: the next write goes through, with no restart.
        os.unlink(filler)
        deadline = time.monotonic() + 20
        while True:
            r = produce_one(p, "full", b"after")
            if r["err"] is None:
                acked.append(r["offset"])
                break
            assert time.monotonic() < deadline, r["err"]
            time.sleep(0.2)
        for i in range(10):
            r = produce_one(p, "full", b"after-%d" % i)
            assert r["err"] is None, r
            acked.append(r["offset"])
        assert broker.metrics()['sluice_log_out_of_space{topic="full",partition="0"}'] == 0
        p.flush(10)

        assert broker.stop() == 0, broker.log_text()
        broker.start()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "check.crcs": True,
                      "enable.auto.commit": False})
        c.assign([TopicPartition("full", 0, 0)])
        seen = set()
        deadline = time.monotonic() + 30
        while len(seen) < len(acked) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen.add(msg.offset())
        c.close()
        assert set(acked) <= seen, f"lost {sorted(set(acked) - seen)[:10]}"
    finally:
        broker.close()
