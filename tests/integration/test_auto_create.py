"""Automatic topic creation on (the default) and off (--auto.create.topics.enable false)."""

import os
import subprocess
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import kafka
import kafka.errors as kerr

TIMEOUT = 30


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap, topic, n, **conf):
    reports = []
    p = Producer({"bootstrap.servers": bootstrap, "topic.metadata.propagation.max.ms": 1000,
                  "message.timeout.ms": 10000, **conf})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(),
                  on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())))
    assert p.flush(TIMEOUT) == 0
    return reports


def topics(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT).topics


def test_auto_create_on_by_default_with_num_partitions(broker_factory):
    b = broker_factory(settings={"num.partitions": 3})
    b.start()
    topic = unique("auto")
    assert topic not in topics(b.bootstrap)
    reports = produce(b.bootstrap, topic, 60)
    assert [r[0] for r in reports] == [None] * 60
    md = topics(b.bootstrap)
    assert topic in md
    assert sorted(md[topic].partitions) == [0, 1, 2]
    # The data is there: 60 messages over the 3 partitions with dense offsets.
    per_part = {}
    for _, p, off in reports:
        per_part.setdefault(p, []).append(off)
    assert sum(len(v) for v in per_part.values()) == 60
    for offs in per_part.values():
        assert sorted(offs) == list(range(len(offs)))
    assert os.path.isdir(os.path.join(b.data_dir, "logs", f"{topic}-0"))

    # kafka-python's Metadata request for one topic (allow_auto_topic_creation
    # true) creates it too.
    t2 = unique("auto-consume")
    kp = kafka.KafkaProducer(bootstrap_servers=b.bootstrap)
    try:
        assert kp.partitions_for(t2) == {0, 1, 2}
    finally:
        kp.close(timeout=5)
    assert sorted(topics(b.bootstrap)[t2].partitions) == [0, 1, 2]

    # CreateTopics with -1 partitions and replication factor (KIP-464, what
    # KafkaJS sends by default) takes the broker defaults too.
    from confluent_kafka.admin import NewTopic
    t3 = unique("defaults")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept alive while its futures run
    for f in admin.create_topics([NewTopic(t3, -1, -1)]).values():
        f.result(timeout=TIMEOUT)
    assert sorted(topics(b.bootstrap)[t3].partitions) == [0, 1, 2]
    assert b.stop() == 0


def test_auto_create_off_refuses_unknown_topics(broker_factory):
    b = broker_factory(settings={"auto.create.topics.enable": "false"})
    b.start()
    topic = unique("noauto")

    # librdkafka: the message fails with unknown topic (the broker's
    # UNKNOWN_TOPIC_OR_PARTITION in Metadata becomes the client's local
    # "unknown topic" error), and no topic appears.
    reports = produce(b.bootstrap, topic, 3)
    assert len(reports) == 3
    for err, _, _ in reports:
        assert err is not None
        assert err.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART), err
    assert topic not in topics(b.bootstrap)
    assert not os.path.exists(os.path.join(b.data_dir, "logs", f"{topic}-0"))

    # kafka-python: the Metadata answer never holds the topic, so send() gives up.
    p = kafka.KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=2000)
    try:
        try:
            p.send(topic, b"x").get(timeout=10)
            raised = None
        except (kerr.KafkaTimeoutError, kerr.UnknownTopicOrPartitionError) as e:
            raised = e
        assert raised is not None, "kafka-python produced to an unknown topic with auto-creation off"
    finally:
        p.close(timeout=5)

    # kcat's metadata listing reports the broker's error for the topic.
    r = subprocess.run(["kcat", "-L", "-b", b.bootstrap, "-t", topic], capture_output=True, timeout=60)
    assert b"Unknown topic or partition" in r.stdout + r.stderr, r.stdout + r.stderr

    # A consumer assigned to the unknown topic sees the error (librdkafka
    # reports it through the error callback for assigned partitions), and
    # never a message.
    errors = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("unused"),
                  "enable.auto.commit": False, "topic.metadata.propagation.max.ms": 1000,
                  "error_cb": errors.append})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while not errors and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is not None, f"consumed {m.value()} from a topic that does not exist"
                errors.append(m.error())
        assert errors, "consumer saw no error for an unknown topic"
        assert errors[0].code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART,
                                    KafkaError._UNKNOWN_PARTITION), errors[0]
        md = c.list_topics(topic, timeout=TIMEOUT)
        assert md.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()
    r = subprocess.run(["kcat", "-C", "-b", b.bootstrap, "-t", topic, "-o", "beginning", "-e"],
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and b"Unknown topic or partition" in r.stderr, r
    assert topic not in topics(b.bootstrap)

    # Explicitly created topics still work.
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=TIMEOUT)
    reports = produce(b.bootstrap, topic, 5)
    assert [(r[0], r[2]) for r in reports] == [(None, i) for i in range(5)]
    assert b.stop() == 0
