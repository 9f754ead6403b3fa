"""confluent-kafka-python 1.7 (librdkafka 2.0.2) and kafka-python 2.0.2 against Sluice.

Produce and consume (assign(), no consumer group: Sluice has none yet), topic
administration with its errors, offsets by time, and configs described and
altered. Every check is on content: values, keys, headers, offsets, error codes.
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

import kafka
import kafka.errors as kerr
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic

TIMEOUT = 30


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- helpers

def ck_produce(bootstrap, topic, messages, **conf):
    """messages: list of dicts for Producer.produce. Returns delivery reports (err, partition, offset, value)."""
    reports = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for m in messages:
        p.produce(topic, on_delivery=lambda err, msg: reports.append(
            (err, msg.partition(), msg.offset(), msg.value())), **m)
        p.poll(0)
    assert p.flush(TIMEOUT) == 0, "producer did not drain"
    return reports


def ck_consume(bootstrap, tps, expected, timeout=TIMEOUT):
    """Reads `expected` messages from the assigned TopicPartitions (with offsets)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": unique("unused"),  # required by the client; no group API is used
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    })
    try:
        c.assign(tps)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
        assert len(out) == expected, f"consumed {len(out)} of {expected}"
        # Nothing beyond what was expected.
        extra = c.poll(0.5)
        assert extra is None or extra.error() is not None, f"unexpected extra message {extra.value()}"
        return out
    finally:
        c.close()


def ck_admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def wait_futures(fs):
    """{name: exception or None} for a dict of admin futures."""
    out = {}
    for name, f in fs.items():
        try:
            f.result(timeout=TIMEOUT)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def topic_names(admin):
    return set(admin.list_topics(timeout=TIMEOUT).topics)


# ------------------------------------------------- confluent-kafka-python

def test_confluent_produce_consume_keys_headers(broker):
    admin = ck_admin(broker.bootstrap)
    topic = unique("ck")
    assert wait_futures(admin.create_topics([NewTopic(topic, 3, 1)])) == {topic: None}
    msgs = [
        {"key": f"k{i % 5}".encode(), "value": f"value-{i}".encode(), "partition": i % 3,
         "headers": [("n", str(i).encode()), ("dup", b"a"), ("dup", b"b")]}
        for i in range(300)
    ]
    reports = ck_produce(broker.bootstrap, topic, msgs, **{"compression.type": "zstd"})
    assert [r[0] for r in reports] == [None] * 300
    got = ck_consume(broker.bootstrap, [TopicPartition(topic, p, 0) for p in range(3)], 300)
    by_part = {}
    for m in got:
        by_part.setdefault(m.partition(), []).append(m)
    for p in range(3):
        ms = by_part[p]
        assert [m.offset() for m in ms] == list(range(100))
        idx = [int(m.value().decode().split("-")[1]) for m in ms]
        assert idx == [i for i in range(300) if i % 3 == p]
        for m, i in zip(ms, idx):
            assert m.key() == f"k{i % 5}".encode()
            assert m.headers() == [("n", str(i).encode()), ("dup", b"a"), ("dup", b"b")]
            assert m.topic() == topic
    # Delivery reports gave the offsets the consumer saw.
    seen = {(m.partition(), m.offset()): m.value() for m in got}
    for err, p, off, val in reports:
        assert seen[(p, off)] == val


def test_confluent_consume_from_middle_offset_and_empty_value(broker):
    topic = unique("ck-mid")
    msgs = [{"value": f"m{i}".encode()} for i in range(10)] + [{"key": b"tomb", "value": None}]
    ck_produce(broker.bootstrap, topic, msgs)
    got = ck_consume(broker.bootstrap, [TopicPartition(topic, 0, 6)], 5)
    assert [(m.offset(), m.value()) for m in got] == [(6, b"m6"), (7, b"m7"), (8, b"m8"), (9, b"m9"), (10, None)]
    assert got[-1].key() == b"tomb"


def test_confluent_admin_create_delete_and_errors(broker):
    admin = ck_admin(broker.bootstrap)
    good, other = unique("adm"), unique("adm")
    res = wait_futures(admin.create_topics([NewTopic(good, 4, 1), NewTopic(other, 1, 1)]))
    assert res == {good: None, other: None}
    md = admin.list_topics(timeout=TIMEOUT)
    assert len(md.topics[good].partitions) == 4
    assert {p.leader for p in md.topics[good].partitions.values()} == {0}

    # Existing topic, invalid names, replication factor 3: each its own error.
    bad = wait_futures(admin.create_topics([
        NewTopic(good, 1, 1),
        NewTopic("bad/name", 1, 1),
        NewTopic("x" * 250, 1, 1),
        NewTopic("..", 1, 1),
        NewTopic(unique("rf3"), 1, 3),
    ]))
    codes = {name: (e.code() if e else None) for name, e in bad.items()}
    assert codes[good] == KafkaError.TOPIC_ALREADY_EXISTS
    assert codes["bad/name"] == KafkaError.TOPIC_EXCEPTION
    assert codes["x" * 250] == KafkaError.TOPIC_EXCEPTION
    assert codes[".."] == KafkaError.TOPIC_EXCEPTION
    rf3 = [n for n in codes if n.startswith("rf3")][0]
    assert codes[rf3] == KafkaError.INVALID_REPLICATION_FACTOR
    # Kafka's own text, as a single broker has one replica to give.
    assert "Replication factor: 3 larger than available brokers: 1." in bad[rf3].str(), bad[rf3].str()
    names = topic_names(admin)
    assert rf3 not in names and "bad/name" not in names
    # The existing topic was not touched by the failed create.
    assert len(admin.list_topics(timeout=TIMEOUT).topics[good].partitions) == 4

    # validate_only creates nothing.
    vo = unique("vo")
    assert wait_futures(admin.create_topics([NewTopic(vo, 2, 1)], validate_only=True)) == {vo: None}
    assert vo not in topic_names(admin)

    # Partitions can grow.
    assert wait_futures(admin.create_partitions([NewPartitions(other, 3)])) == {other: None}
    assert len(admin.list_topics(timeout=TIMEOUT).topics[other].partitions) == 3

    # Delete, then deleting again is UNKNOWN_TOPIC_OR_PART.
    assert wait_futures(admin.delete_topics([good])) == {good: None}
    deadline = time.monotonic() + 10
    while good in topic_names(admin) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert good not in topic_names(admin)
    again = wait_futures(admin.delete_topics([good]))
    assert again[good] is not None and again[good].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert other in topic_names(admin)


def test_confluent_offsets_for_times(broker):
    topic = unique("ck-time")
    base = 1_700_000_000_000
    msgs = [{"value": f"t{i}".encode(), "timestamp": base + i * 1000} for i in range(20)]
    ck_produce(broker.bootstrap, topic, msgs)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False})
    try:
        def lookup(ts):
            r = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=TIMEOUT)
            assert r[0].error is None
            return r[0].offset

        assert lookup(base) == 0
        assert lookup(base + 5000) == 5
        assert lookup(base + 5500) == 6  # first message at or after the time
        assert lookup(base - 10**6) == 0
        assert lookup(base + 10**6) == -1  # after the last: no offset (end)
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        assert (lo, hi) == (0, 20)
        # Consuming from the looked-up offset gives that message with its timestamp.
        c.assign([TopicPartition(topic, 0, lookup(base + 12000))])
        m = None
        deadline = time.monotonic() + TIMEOUT
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.2)
        assert m is not None and m.error() is None
        assert m.value() == b"t12"
        assert m.timestamp()[1] == base + 12000
    finally:
        c.close()


def describe(admin, topic):
    fs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    (res,) = fs.values()
    return {k: v.value for k, v in res.result(timeout=TIMEOUT).items()}


def test_confluent_describe_and_alter_configs(broker):
    admin = ck_admin(broker.bootstrap)
    topic = unique("cfg")
    assert wait_futures(admin.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})])) == {topic: None}
    cfg = describe(admin, topic)
    assert cfg["retention.ms"] == "3600000"
    for key in ("cleanup.policy", "segment.bytes", "max.message.bytes", "compression.type"):
        assert key in cfg, f"{key} missing from DescribeConfigs: {sorted(cfg)}"

    # A valid alter applies.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "7200000"})
    (f,) = admin.alter_configs([res]).values()
    f.result(timeout=TIMEOUT)
    assert describe(admin, topic)["retention.ms"] == "7200000"

    # An invalid value is refused with INVALID_CONFIG and nothing of that
    # request is applied, not even its valid entries.
    before = describe(admin, topic)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                         set_config={"retention.ms": "not-a-number", "segment.ms": "60000"})
    (f,) = admin.alter_configs([res]).values()
    with pytest.raises(KafkaException) as ei:
        f.result(timeout=TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert describe(admin, topic) == before

    # An unknown topic is UNKNOWN_TOPIC_OR_PART.
    fs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, unique("nope"))])
    (f,) = fs.values()
    with pytest.raises(KafkaException) as ei:
        f.result(timeout=TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# ------------------------------------------------------------ kafka-python

def kp_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000,
                            client_id="sluice-it")


def test_kafka_python_produce_consume_assign(broker):
    topic = unique("kp")
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                            compression_type="gzip")
    futures = [p.send(topic, key=f"k{i % 7}".encode(), value=f"kp-{i}".encode(),
                      headers=[("i", str(i).encode())]) for i in range(200)]
    p.flush(timeout=TIMEOUT)
    metas = [f.get(timeout=TIMEOUT) for f in futures]
    p.close(timeout=TIMEOUT)
    assert [m.offset for m in metas] == list(range(200))

    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                            enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 200 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(recs)
        assert len(got) == 200
        for i, r in enumerate(got):
            assert (r.offset, r.key, r.value) == (i, f"k{i % 7}".encode(), f"kp-{i}".encode())
            assert r.headers == [("i", str(i).encode())]
        assert c.end_offsets([tp]) == {tp: 200}
        assert c.beginning_offsets([tp]) == {tp: 0}
        # Seek to an offset and read from there.
        c.seek(tp, 150)
        r = []
        deadline = time.monotonic() + TIMEOUT
        while not r and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                r.extend(recs)
        assert r[0].offset == 150 and r[0].value == b"kp-150"
    finally:
        c.close()


def test_kafka_python_offsets_for_times(broker):
    topic = unique("kp-time")
    base = 1_600_000_000_000
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    for i in range(10):
        p.send(topic, value=f"v{i}".encode(), timestamp_ms=base + i * 100)
    p.flush(timeout=TIMEOUT)
    p.close(timeout=TIMEOUT)
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = kafka.TopicPartition(topic, 0)
        r = c.offsets_for_times({tp: base + 350})
        assert r[tp].offset == 4 and r[tp].timestamp == base + 400
        r = c.offsets_for_times({tp: base})
        assert r[tp].offset == 0 and r[tp].timestamp == base
        r = c.offsets_for_times({tp: base + 10_000})
        assert r[tp] is None
    finally:
        c.close()


def test_kafka_python_admin(broker):
    admin = kp_admin(broker.bootstrap)
    try:
        t1, t2 = unique("kpa"), unique("kpa")
        admin.create_topics([KNewTopic(t1, 2, 1), KNewTopic(t2, 1, 1, topic_configs={"cleanup.policy": "compact"})])
        assert {t1, t2} <= set(admin.list_topics())

        with pytest.raises(kerr.TopicAlreadyExistsError):
            admin.create_topics([KNewTopic(t1, 1, 1)])
        with pytest.raises(kerr.InvalidTopicError):
            admin.create_topics([KNewTopic("has space", 1, 1)])
        with pytest.raises(kerr.InvalidReplicationFactorError):
            admin.create_topics([KNewTopic(unique("rf3"), 1, 3)])

        (res,) = admin.describe_configs([KConfigResource(KConfigResourceType.TOPIC, t2)])[0].resources
        err, _, _, name, entries = res[:5]
        assert err == 0 and name == t2
        cfg = {e[0]: e[1] for e in entries}
        assert cfg["cleanup.policy"] == "compact"

        resp = admin.alter_configs([KConfigResource(KConfigResourceType.TOPIC, t2,
                                                    configs={"retention.ms": "-7"})])
        (r,) = resp.resources
        assert r[0] == kerr.InvalidConfigurationError.errno, r
        (res,) = admin.describe_configs([KConfigResource(KConfigResourceType.TOPIC, t2)])[0].resources
        assert {e[0]: e[1] for e in res[4]} == cfg

        admin.delete_topics([t1, t2])
        deadline = time.monotonic() + 10
        while {t1, t2} & set(admin.list_topics()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not ({t1, t2} & set(admin.list_topics()))
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            admin.delete_topics([t1])
    finally:
        admin.close()


# ------------------------------------------------ fetch and topic settings

def test_long_poll_fetch_is_woken_by_new_data(broker):
    """A consumer parked in a long-poll Fetch (fetch.wait.max.ms 10 s) gets a
    new message as soon as it is produced, not when the wait expires."""
    topic = unique("longpoll")
    ck_produce(broker.bootstrap, topic, [{"value": b"first"}])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10000})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        m = None
        deadline = time.monotonic() + TIMEOUT
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.2)
        assert m is not None and m.value() == b"first"
        time.sleep(1.0)  # the next Fetch is now waiting at the end of the log
        latencies = []
        for i in range(3):
            t0 = time.monotonic()
            p.produce(topic, value=b"wake-%d" % i)
            p.flush(TIMEOUT)
            m = None
            while m is None and time.monotonic() - t0 < TIMEOUT:
                m = c.poll(0.05)
            assert m is not None and m.error() is None and m.value() == b"wake-%d" % i
            latencies.append(time.monotonic() - t0)
            time.sleep(0.5)
        assert max(latencies) < 3.0, f"long-poll fetch not woken by new data: {latencies}"
    finally:
        c.close()


def test_log_append_time_topic(broker):
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's."""
    admin = ck_admin(broker.bootstrap)
    topic = unique("lat")
    assert wait_futures(admin.create_topics(
        [NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})])) == {topic: None}
    old = 1_000_000_000_000  # 2001
    before = int(time.time() * 1000)
    reports = ck_produce(broker.bootstrap, topic, [{"value": b"v%d" % i, "timestamp": old + i} for i in range(5)])
    after = int(time.time() * 1000)
    assert [r[0] for r in reports] == [None] * 5
    got = ck_consume(broker.bootstrap, [TopicPartition(topic, 0, 0)], 5)
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == 2, f"timestamp type {ts_type}, want LogAppendTime (2)"
        assert before - 1000 <= ts <= after + 1000, (ts, before, after)
    # CreateTime (the default) keeps the producer's timestamps.
    t2 = unique("ct")
    ck_produce(broker.bootstrap, t2, [{"value": b"x", "timestamp": old}])
    (m,) = ck_consume(broker.bootstrap, [TopicPartition(t2, 0, 0)], 1)
    assert m.timestamp() == (1, old)


def test_small_fetch_limits_still_return_a_whole_large_batch_and_too_large_is_refused(broker):
    """Fetch returns at least one whole batch even when it exceeds the
    consumer's fetch.max.bytes and max.partition.fetch.bytes (Kafka's rule, so a
    consumer can never get stuck); a batch over message.max.bytes is refused
    with MESSAGE_TOO_LARGE and not stored."""
    topic = unique("big")
    big = bytes(range(256)) * 2400  # 600 KiB, incompressible enough
    reports = ck_produce(broker.bootstrap, topic, [{"value": big}, {"value": b"small"}],
                         **{"linger.ms": 0, "batch.num.messages": 1})
    assert [(r[0], r[2]) for r in reports] == [(None, 0), (None, 1)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "fetch.max.bytes": 1024,
                  "max.partition.fetch.bytes": 1024, "message.max.bytes": 1000,
                  "receive.message.max.bytes": 2_000_000})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        assert got == [big, b"small"]
    finally:
        c.close()

    huge = bytes(range(256)) * 8192  # 2 MiB > message.max.bytes (1048588)
    reports = ck_produce(broker.bootstrap, topic, [{"value": huge}],
                         **{"message.max.bytes": 4_000_000, "compression.type": "none"})
    assert reports[0][0] is not None and reports[0][0].code() == KafkaError.MSG_SIZE_TOO_LARGE, reports
    lo_hi = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    try:
        assert lo_hi.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 2)
    finally:
        lo_hi.close()


def test_delete_records_moves_log_start_for_clients(broker):
    """DeleteRecords (raw: neither Python client has it in these versions)
    moves the log start offset; clients then see it in watermarks and
    ListOffsets, and a consumer asking for a deleted offset is reset to it."""
    import struct

    from test_bad_input import Reader, connect, kstr, recv_response, request

    topic = unique("delrec")
    reports = ck_produce(broker.bootstrap, topic, [{"value": b"r%d" % i} for i in range(10)])
    assert [r[2] for r in reports] == list(range(10))
    with connect(broker.port) as s:
        body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">iiq", 1, 0, 4) + struct.pack(">i", 10000)
        s.sendall(request(21, 0, 77, body))
        r = Reader(recv_response(s))
        assert r.take(">i") == 77
        r.take(">i")  # throttle
        assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
        assert r.take(">iqh") == (0, 4, 0)
        # Beyond the high watermark: OFFSET_OUT_OF_RANGE (1), nothing changes.
        body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">iiq", 1, 0, 11) + struct.pack(">i", 10000)
        s.sendall(request(21, 0, 78, body))
        r = Reader(recv_response(s))
        r.take(">ii"), r.take(">i"), r.string(), r.take(">i")
        assert r.take(">iqh")[2] == 1
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (4, 10)
        c.assign([TopicPartition(topic, 0, 1)])  # deleted: reset to the log start
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 6 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
        assert got == [(i, b"r%d" % i) for i in range(4, 10)]
    finally:
        c.close()
    kc = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert kc.beginning_offsets([tp]) == {tp: 4}
    finally:
        kc.close()


def test_recreated_topic_starts_empty_also_after_restart(broker):
    """Deleting a topic removes its data: a topic created again under the same
    name starts at offset 0 with none of the old records, before and after a
    restart; shrinking partitions is INVALID_PARTITIONS."""
    admin = ck_admin(broker.bootstrap)
    topic = unique("again")
    assert wait_futures(admin.create_topics([NewTopic(topic, 2, 1)])) == {topic: None}
    ck_produce(broker.bootstrap, topic, [{"value": b"old-%d" % i, "partition": i % 2} for i in range(20)])
    bad = wait_futures(admin.create_partitions([NewPartitions(topic, 1)]))
    assert bad[topic] is not None and bad[topic].code() == KafkaError.INVALID_PARTITIONS
    assert wait_futures(admin.delete_topics([topic])) == {topic: None}
    deadline = time.monotonic() + 10
    while topic in topic_names(admin) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert wait_futures(admin.create_topics([NewTopic(topic, 1, 1)])) == {topic: None}
    ck_produce(broker.bootstrap, topic, [{"value": b"new-%d" % i} for i in range(3)])

    def check():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused")})
        try:
            assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 3)
        finally:
            c.close()
        got = ck_consume(broker.bootstrap, [TopicPartition(topic, 0, 0)], 3)
        assert [m.value() for m in got] == [b"new-0", b"new-1", b"new-2"]
        md = ck_admin(broker.bootstrap).list_topics(timeout=TIMEOUT)
        assert len(md.topics[topic].partitions) == 1

    check()
    assert broker.stop() == 0
    broker.start()
    check()


def test_concurrent_producers_on_shared_partitions(broker):
    """Four producers at once (acks=all; two idempotent, two not) on the same
    four partitions: every acknowledged message is stored exactly once at its
    acknowledged offset, each producer's order kept per partition."""
    import threading

    admin = ck_admin(broker.bootstrap)
    topic = unique("shared")
    assert wait_futures(admin.create_topics([NewTopic(topic, 4, 1)])) == {topic: None}
    results = {}

    def run(pid):
        conf = {"acks": "all", "enable.idempotence": pid % 2 == 0, "linger.ms": 1}
        msgs = [{"value": b"p%d-%05d" % (pid, i), "partition": i % 4} for i in range(3000)]
        results[pid] = ck_produce(broker.bootstrap, topic, msgs, **conf)

    threads = [threading.Thread(target=run, args=(pid,)) for pid in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(results) == [0, 1, 2, 3]
    acked = {}
    for reports in results.values():
        assert [r[0] for r in reports] == [None] * 3000
        for _, p, off, val in reports:
            assert (p, off) not in acked, f"two messages acknowledged at {p}/{off}"
            acked[(p, off)] = val
    got = ck_consume(broker.bootstrap, [TopicPartition(topic, p, 0) for p in range(4)], 12000)
    stored = {(m.partition(), m.offset()): m.value() for m in got}
    assert stored == acked
    for p in range(4):
        for pid in range(4):
            seq = [int(v.split(b"-")[1]) for (pp, _), v in sorted(stored.items())
                   if pp == p and v.startswith(b"p%d-" % pid)]
            assert seq == sorted(seq) and len(seq) == 750


def test_alter_configs_replaces_and_incremental_alter_merges(broker):
    """AlterConfigs replaces a topic's whole set of overrides (Kafka's
    semantics, what confluent-kafka 1.7 sends); IncrementalAlterConfigs (raw:
    no client here has it) sets and deletes single keys, refuses bad values
    with INVALID_CONFIG and changes nothing then, and validate_only changes nothing."""
    import struct

    from test_bad_input import Reader, connect, kstr, recv_response, request

    admin = ck_admin(broker.bootstrap)
    topic = unique("incr")
    assert wait_futures(admin.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "3600000", "segment.ms": "7200000"})])) == {topic: None}

    def sources(name):
        fs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
        (res,) = fs.values()
        return {k: (v.value, v.source) for k, v in res.result(timeout=TIMEOUT).items()}

    dynamic = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert sources(topic)["retention.ms"] == ("3600000", dynamic)

    # AlterConfigs with only segment.ms: retention.ms falls back to its default.
    (f,) = admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, topic,
                                               set_config={"segment.ms": "60000"})]).values()
    f.result(timeout=TIMEOUT)
    cfg = sources(topic)
    assert cfg["segment.ms"] == ("60000", dynamic)
    assert cfg["retention.ms"][1] != dynamic, cfg["retention.ms"]

    def incremental(corr, ops, validate_only=False):
        body = struct.pack(">i", 1) + struct.pack(">b", 2) + kstr(topic) + struct.pack(">i", len(ops))
        for name, op, value in ops:
            body += kstr(name) + struct.pack(">b", op) + (kstr(value) if value is not None else struct.pack(">h", -1))
        body += struct.pack(">b", 1 if validate_only else 0)
        with connect(broker.port) as s:
            s.sendall(request(44, 0, corr, body))
            r = Reader(recv_response(s))
        assert r.take(">i") == corr
        r.take(">i")
        assert r.take(">i") == 1
        err, _msg, rtype, name = r.take(">h"), r.string(), r.take(">b"), r.string()
        assert (rtype, name) == (2, topic)
        return err

    SET, DELETE = 0, 1
    assert incremental(1, [("retention.ms", SET, "1800000")]) == 0
    cfg = sources(topic)
    assert cfg["retention.ms"] == ("1800000", dynamic) and cfg["segment.ms"] == ("60000", dynamic)
    assert incremental(2, [("segment.ms", DELETE, None)]) == 0
    cfg = sources(topic)
    assert cfg["segment.ms"][1] != dynamic and cfg["retention.ms"] == ("1800000", dynamic)

    before = sources(topic)
    assert incremental(3, [("segment.ms", SET, "120000"), ("retention.ms", SET, "soon")]) == KafkaError.INVALID_CONFIG
    assert incremental(4, [("no.such.config", SET, "1")]) == KafkaError.INVALID_CONFIG
    assert incremental(5, [("segment.ms", SET, "120000")], validate_only=True) == 0
    assert sources(topic) == before


def test_fetch_past_the_end_is_offset_out_of_range(broker):
    """Fetching past the high watermark is OFFSET_OUT_OF_RANGE: with
    auto.offset.reset=error the consumer reports it; with latest it resumes at
    the end and gets only new messages."""
    topic = unique("oor")
    ck_produce(broker.bootstrap, topic, [{"value": b"x%d" % i} for i in range(10)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])
        err = None
        deadline = time.monotonic() + TIMEOUT
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is not None, f"got a message at {m.offset()}"
                err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower(), err.str()
    finally:
        c.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "auto.offset.reset": "latest"})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])
        time.sleep(1.5)
        ck_produce(broker.bootstrap, topic, [{"value": b"after"}])
        m = None
        deadline = time.monotonic() + TIMEOUT
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.2)
        assert m is not None and m.error() is None and (m.offset(), m.value()) == (10, b"after")
    finally:
        c.close()
