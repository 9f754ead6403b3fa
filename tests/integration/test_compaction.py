"""Log compaction end to end with confluent-kafka-python.

100,000 messages over 1,000 keys with updates and tombstones on a compacted
topic with small segments and a cleaner that backs off briefly: once cleaned,
a full read from earliest yields exactly the newest value of each key, at
its original offset; tombstones go after delete.retention.ms; SIGKILL during
cleaning, several times, then restart: the same logical content. Plus a
keyless record refused, and __consumer_offsets compacted with the group's
offsets intact after a restart.
"""

import glob
import os
import random
import signal
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 30
KEYS = 1000
MESSAGES = 100_000
TOMBSTONED = range(0, 100)  # keys whose last record is a tombstone
CLEANER = {"log.cleaner.backoff.ms": 100}


def create_compacted(bootstrap, topic, **extra):
    cfg = {"cleanup.policy": "compact", "segment.bytes": "262144", "segment.ms": "300",
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "4000", "file.delete.delay.ms": "0"}
    cfg.update(extra)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    fs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=cfg)])
    fs[topic].result(timeout=TIMEOUT)


def produce(bootstrap, topic, records, **conf):
    """records: (key, value-or-None). Returns {key: (offset, value)} of the newest."""
    newest = {}
    errors = []

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            k = msg.key().decode()
            if k not in newest or newest[k][0] < msg.offset():
                newest[k] = (msg.offset(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all", **conf})
    for k, v in records:
        while True:
            try:
                p.produce(topic, key=k.encode(), value=v, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    assert not errors, errors[:3]
    return newest


def roll(bootstrap, topic):
    """Closes the segment holding everything so far (segment.ms is 300)."""
    time.sleep(0.4)
    # A key of its own each time: the active segment is never cleaned, so a
    # reused key would show twice (closed and active segment) for good.
    return produce(bootstrap, topic, [("~marker-" + uuid.uuid4().hex[:8], b"m")])


def read_all(bootstrap, topic):
    """Every record from earliest to the high watermark: [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        c.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        out = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                if not out or out[-1][0] >= high - 1 or m.offset() >= high:
                    break
                continue
            out.append((m.offset(), m.key().decode(), m.value()))
            if m.offset() >= high - 1:
                break
        return out
    finally:
        c.close()


def workload(seed):
    rnd = random.Random(seed)
    recs = []
    for i in range(MESSAGES):
        k = i % KEYS if i < MESSAGES // 2 else rnd.randrange(KEYS)
        recs.append((f"k{k}", f"v{i}-{k}".encode()))
    recs += [(f"k{k}", None) for k in TOMBSTONED]
    return recs


def expected_view(newest, with_tombstones=True):
    return {k: v for k, (o, v) in newest.items() if with_tombstones or v is not None}


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def check_newest_only(records, newest, with_tombstones):
    """The read holds exactly one record per key, the newest, at its offset."""
    seen = {}
    for off, k, v in records:
        assert k not in seen, f"key {k} twice: offsets {seen[k][0]} and {off}"
        seen[k] = (off, v)
    want = {k: ov for k, ov in newest.items() if with_tombstones or ov[1] is not None}
    assert seen == want


def cleaned_view(bootstrap, topic, newest, with_tombstones):
    recs = read_all(bootstrap, topic)
    keys = [k for _, k, _ in recs]
    if len(keys) != len(set(keys)):
        return None
    if not with_tombstones and any(v is None for _, _, v in recs):
        return None
    return recs


def test_compaction_keeps_newest_per_key_then_drops_tombstones(broker_factory):
    b = broker_factory(settings=CLEANER)
    b.start()
    topic = "compacted-" + uuid.uuid4().hex[:6]
    create_compacted(b.bootstrap, topic)
    newest = produce(b.bootstrap, topic, workload(1), **{"compression.type": "lz4"})
    newest.update(roll(b.bootstrap, topic))
    assert len(newest) == KEYS + 1
    recs = wait_for(lambda: cleaned_view(b.bootstrap, topic, newest, True), 40, "the first clean")
    check_newest_only(recs, newest, with_tombstones=True)
    assert sum(1 for _, _, v in recs if v is None) == len(TOMBSTONED)
    # delete.retention.ms (4 s) later the tombstones are gone; nothing else moves.
    recs = wait_for(lambda: cleaned_view(b.bootstrap, topic, newest, False), 40, "tombstones to go")
    check_newest_only(recs, newest, with_tombstones=False)
    seg_dir = os.path.join(b.data_dir, "logs", f"{topic}-0")
    assert not glob.glob(os.path.join(seg_dir, "*.swap")) and not glob.glob(os.path.join(seg_dir, "*.cleaned"))
    assert os.path.exists(os.path.join(seg_dir, "cleaner-offset-checkpoint"))
    assert "cleaned:" in b.log_text()
    assert b.stop() == 0


def test_keyless_record_refused_on_compacted_topic(broker_factory):
    b = broker_factory()
    b.start()
    topic = "compacted-" + uuid.uuid4().hex[:6]
    create_compacted(b.bootstrap, topic)
    errs = []
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "retries": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errs.append(err))
    p.flush(TIMEOUT)
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() == KafkaError.INVALID_RECORD, errs[0]
    assert b.stop() == 0


def test_sigkill_during_cleaning_keeps_logical_content(broker_factory):
    b = broker_factory(settings=CLEANER)
    b.start()
    topic = "compacted-" + uuid.uuid4().hex[:6]
    create_compacted(b.bootstrap, topic, **{"delete.retention.ms": "86400000"})
    rnd = random.Random(7)
    newest = {}
    for round_ in range(5):
        recs = [(f"k{rnd.randrange(KEYS)}", f"r{round_}-{i}".encode()) for i in range(20_000)]
        newest.update(produce(b.bootstrap, topic, recs, **{"compression.type": "zstd"}))
        newest.update(roll(b.bootstrap, topic))
        time.sleep(rnd.uniform(0.0, 0.3))  # the cleaner is at work now or soon
        b.stop(signal.SIGKILL)
        b.start()
        # Whatever the kill interrupted, the log reads as the same content:
        # for every key its newest record is there and is the last one.
        recs = read_all(b.bootstrap, topic)
        last = {}
        for off, k, v in recs:
            last[k] = (off, v)
        assert last == newest, f"round {round_}: logical content changed"
    recs = wait_for(lambda: cleaned_view(b.bootstrap, topic, newest, True), 40, "a full clean after the kills")
    check_newest_only(recs, newest, with_tombstones=True)
    seg_dir = os.path.join(b.data_dir, "logs", f"{topic}-0")
    assert not glob.glob(os.path.join(seg_dir, "*.swap")) and not glob.glob(os.path.join(seg_dir, "*.cleaned"))
    assert b.stop() == 0


def test_consumer_offsets_is_compacted(broker_factory):
    b = broker_factory(settings={**CLEANER, "offsets.topic.num.partitions": 1, "log.segment.bytes": 16384,
                                 "log.roll.ms": 300, "log.cleaner.min.cleanable.ratio": 0.01})
    b.start()
    topic = "plain-" + uuid.uuid4().hex[:6]
    produce(b.bootstrap, topic, [("a", b"x")])
    group = "g-" + uuid.uuid4().hex[:6]
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for i in range(1500):
            c.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
    finally:
        c.close()
    time.sleep(0.4)
    # A commit after segment.ms rolls the last segment so it can be cleaned.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 1501)], asynchronous=False)
    c.close()
    wait_for(lambda: "cleaner: __consumer_offsets-0 cleaned" in b.log_text(), 40, "__consumer_offsets to be cleaned")
    b.stop()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
        assert got[0].offset == 1501
    finally:
        c.close()
    assert b.stop() == 0
