"""A damaged batch in the middle of a segment (docs/log_format.md, "Damaged batches").

Produces numbered messages in many small batches, stops the broker (SIGTERM:
a clean shutdown, found by the scrubber or the read check; SIGKILL: a crash,
found by recovery), flips one byte in the records of a batch in the middle of the
segment file, and restarts. A consumer that checks CRCs (check.crcs=true)
must then read every message of every intact batch, before and after the
damaged one, and nothing of the damaged one; the log end offset must not
move; /metrics must count the damage.
"""

import glob
import os
import signal
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from sluice_harness import wait_until

TOPIC = "damaged"
MESSAGES = 300


def batches(path):
    """(position, base offset, last offset, size) of every batch of a segment file."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length == 0:  # the segment's prepared tail: zeros past its last batch (docs/log_format.md)
            break
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, base, base + delta, 12 + length))
        pos += 12 + length
    return out

def consume_all(bootstrap, timeout=20.0):
    """Every message of the partition from offset 0 to its end, CRCs checked."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-damage", "enable.auto.commit": False,
                  "enable.partition.eof": True, "check.crcs": True})
    got = {}
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return got
                raise AssertionError(f"consumer error: {m.error()}")
            got[m.offset()] = m.value()
        raise AssertionError(f"no end of partition within {timeout}s; read {len(got)} messages")
    finally:
        c.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "crash"])
def test_damaged_batch_in_the_middle_is_skipped_and_later_batches_kept(broker_factory, sig):
    b = broker_factory(settings={"num.partitions": 1})
    b.start()
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 10, "acks": "all"})
    for i in range(MESSAGES):
        p.produce(TOPIC, value=b"message-%04d-" % i + b"x" * 200, partition=0)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0
    assert b.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)

    segs = sorted(glob.glob(os.path.join(b.data_dir, "logs", f"{TOPIC}-0", "*.log")))
    assert len(segs) == 1
    bs = batches(segs[0])
    assert len(bs) >= 10, "the producer should have sent many small batches"
    end = bs[-1][2] + 1
    pos, base, last, size = bs[len(bs) // 2]
    with open(segs[0], "r+b") as f:
        f.seek(pos + size - 20)  # inside the last record's value
        byte = f.read(1)
        f.seek(pos + size - 20)
        f.write(bytes([byte[0] ^ 0x10]))

    b.start()
    key = f'{{topic="{TOPIC}",partition="0"}}'
    m = wait_until(lambda: (lambda m: m if m.get("sluice_log_damaged_ranges_total" + key) == 1 else None)(b.metrics()),
                   20, "the damage to be found")
    assert m["sluice_log_damaged_bytes_total" + key] == size
    assert m["sluice_log_end_offset" + key] == end
    if sig == signal.SIGTERM:
        assert m["sluice_log_scrub_bytes_total"] > 0
    wait_until(lambda: b.metrics()["sluice_log_damaged_bytes_removed_total" + key] == size, 20,
               "the damaged range to be rewritten away")

    got = consume_all(b.bootstrap)
    want = [o for o in range(end) if not base <= o <= last]
    assert sorted(got) == want
    for o, v in got.items():
        assert v == b"message-%04d-" % o + b"x" * 200
    # After a clean stop the scrubber's first pass (or a read, whichever
    # comes first) finds it; after a crash recovery's scan does.
    found_by = ["found by the scrubber", "found by a read"] if sig == signal.SIGTERM else ["found by recovery"]
    assert any(f in b.log_text() for f in found_by)
    assert b.stop() == 0
