"""Adding partitions to a topic whose records carry keys (the brief: it
"moves which partition each key maps to, which breaks per-key order for a
while"): `sluice topic alter --partitions N` and `add-partitions` say so and
ask for --yes; the broker logs it whoever adds them."""

import subprocess

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from sluice_harness import SLUICE_BIN


def sluice(*args):
    return subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=60)


def partitions(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return len(md.topics[topic].partitions)


def test_more_partitions_for_keyed_records_need_a_yes(broker):
    bs = broker.bootstrap
    a = AdminClient({"bootstrap.servers": bs})
    for t in ("keyed", "plain"):
        a.create_topics([NewTopic(t, num_partitions=2, replication_factor=1)])[t].result(30)
    p = Producer({"bootstrap.servers": bs})
    for i in range(20):
        p.produce("keyed", key=f"user-{i}".encode(), value=b"v")
        p.produce("plain", value=b"v", partition=i % 2)
    assert p.flush(30) == 0

    r = sluice("topic", "alter", "keyed", "--partitions", "4", "--bootstrap", bs)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "carries keyed records" in r.stderr and "--yes" in r.stderr, r.stderr
    assert partitions(bs, "keyed") == 2
    r = sluice("topic", "add-partitions", "keyed", "--total", "4", "--bootstrap", bs)
    assert r.returncode == 1 and "--yes" in r.stderr, r.stderr
    assert partitions(bs, "keyed") == 2

    r = sluice("topic", "alter", "keyed", "--partitions", "4", "--yes", "--bootstrap", bs)
    assert r.returncode == 0, r.stderr
    assert partitions(bs, "keyed") == 4
    assert "keyed goes from 2 to 4 partitions and its records carry keys" in broker.log_text()

    # Records without keys: nothing to warn about.
    r = sluice("topic", "alter", "plain", "--partitions", "3", "--bootstrap", bs)
    assert r.returncode == 0, r.stderr
    assert partitions(bs, "plain") == 3
    assert "plain goes from" not in broker.log_text()
    # Another client adding partitions (no --yes anywhere): done, and logged.
    a.create_partitions([NewPartitions("keyed", 6)])["keyed"].result(30)
    assert partitions(bs, "keyed") == 6
    assert "keyed goes from 4 to 6 partitions" in broker.log_text()

    # Usage: nothing to alter, or both at once.
    assert sluice("topic", "alter", "plain", "--bootstrap", bs).returncode == 2
    assert sluice("topic", "alter", "plain", "-p", "5", "-c", "retention.ms=1000", "--bootstrap", bs).returncode != 0
