"""Topic names at Kafka's limit of 249 characters (issue 16, item 6).

A 249-character topic is created, written, read, deleted and the broker
restarted: every step works, the deletion leaves nothing behind, and the
broker starts again (it used to answer the delete with OK, fail to rename
the directory, and then refuse every later start).
"""

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 30
LONGEST = "L" * 245 + ".a_b"  # 249 characters of [a-zA-Z0-9._-]
PARTITIONS = 12  # two-digit partition numbers too


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def wait_futures(client, call, *args):
    for f in getattr(client, call)(*args).values():
        f.result(TIMEOUT)


def produce(b, topic, n):
    acked = []
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS,
                  on_delivery=lambda err, msg: acked.append(err))
    assert p.flush(TIMEOUT) == 0
    assert acked == [None] * n


def count(b, topic):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got, eof = 0, set()
        deadline = time.monotonic() + TIMEOUT
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
            else:
                got += 1
        return got
    finally:
        c.close()


def test_longest_topic_name_create_produce_delete_restart(broker_factory):
    assert len(LONGEST) == 249
    b = broker_factory(settings={"auto.create.topics.enable": "false"})
    b.start()
    wait_futures(admin(b), "create_topics", [NewTopic(LONGEST, PARTITIONS, 1)])
    produce(b, LONGEST, 60)
    assert b.restart() is b
    assert count(b, LONGEST) == 60

    wait_futures(admin(b), "delete_topics", [LONGEST])
    assert LONGEST not in admin(b).list_topics(timeout=TIMEOUT).topics
    logs = os.path.join(b.data_dir, "logs")
    assert [n for n in os.listdir(logs) if n.startswith("LLLL")] == []
    assert [n for n in os.listdir(os.path.join(b.data_dir, "meta", "producers")) if n.startswith("LLLL")] == []

    # The broker starts again and the name is free.
    assert b.stop() == 0
    b.start()
    assert LONGEST not in admin(b).list_topics(timeout=TIMEOUT).topics
    wait_futures(admin(b), "create_topics", [NewTopic(LONGEST, PARTITIONS, 1)])
    produce(b, LONGEST, 12)
    assert count(b, LONGEST) == 12
    assert b.stop() == 0
