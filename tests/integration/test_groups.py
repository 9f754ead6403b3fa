"""Consumer groups against the real broker with librdkafka (confluent-kafka)
and kafka-python: partition ownership, failover, cooperative and static
membership, committed offsets across restarts, admin listings."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_harness import wait_until

# Fast groups: no initial rebalance delay, short sessions allowed.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 8,
}
SESSION_MS = 6000


@pytest.fixture
def gbroker(broker_factory):
    b = broker_factory(settings=GROUP_SETTINGS)
    b.start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}:\n{b.log_text()}"


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for f in futures.values():
        f.result(timeout=30)


def produce(bootstrap, topic, count, partitions):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0

class Member:
    """One consumer polling on its own thread, tracking what it owns."""

    def __init__(self, bootstrap, group, topic, **conf):
        self.events = []  # ("assign"|"revoke", frozenset of partitions)
        self.owned = set()
        self.lock = threading.Lock()
        self.cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        c = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        c.update(conf)
        self.consumer = Consumer(c)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.stop_flag = threading.Event()
        self.records = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer, parts):
        ps = frozenset(p.partition for p in parts)
        with self.lock:
            self.events.append(("assign", ps))
            self.owned = self.owned | ps if self.cooperative else set(ps)
        if self.cooperative:
            consumer.incremental_assign(parts)

    def _on_revoke(self, consumer, parts):
        ps = frozenset(p.partition for p in parts)
        with self.lock:
            self.events.append(("revoke", ps))
            self.owned = self.owned - ps
        if self.cooperative:
            consumer.incremental_unassign(parts)

    def _run(self):
        while not self.stop_flag.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and m.error() is None:
                with self.lock:
                    self.records.append((m.partition(), m.offset()))

    def partitions(self):
        with self.lock:
            return set(self.owned)

    def close(self):
        self.stop_flag.set()
        self.thread.join(10)
        self.consumer.close()


def exact_cover(members, n):
    owned = [m.partitions() for m in members]
    union = set().union(*owned)
    return union == set(range(n)) and sum(len(o) for o in owned) == n


CHILD = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": %d,
              "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
def on_assign(consumer, parts):
    print("assigned", " ".join(str(p.partition) for p in parts), flush=True)
c.subscribe([sys.argv[3]], on_assign=on_assign)
while True:
    c.poll(0.1)
""" % SESSION_MS


def test_three_members_share_twelve_partitions_and_fail_over(gbroker):
    create_topic(gbroker.bootstrap, "orders", 12)
    produce(gbroker.bootstrap, "orders", 120, 12)
    child = subprocess.Popen([sys.executable, "-c", CHILD, gbroker.bootstrap, "g3", "orders"],
                             stdout=subprocess.PIPE, text=True)
    members = []
    try:
        members = [Member(gbroker.bootstrap, "g3", "orders") for _ in range(2)]
        # The child's current assignment, read from its stdout.
        child_owned = {"p": set()}

        def read_child():
            for line in child.stdout:
                if line.startswith("assigned"):
                    child_owned["p"] = {int(x) for x in line.split()[1:]}

        threading.Thread(target=read_child, daemon=True).start()

        def covered():
            owned = [m.partitions() for m in members] + [child_owned["p"]]
            return (set().union(*owned) == set(range(12)) and sum(len(o) for o in owned) == 12
                    and all(len(o) == 4 for o in owned))

        wait_until(covered, 60, "3 members owning 4 partitions each")

        # SIGKILL the child: after the session timeout its partitions move.
        killed_at = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        wait_until(lambda: exact_cover(members, 12), SESSION_MS / 1000 + 30, "the survivors to own all 12")
        took = time.monotonic() - killed_at
        assert took >= SESSION_MS / 1000 - 1.5, f"partitions moved after {took:.1f}s, before the session timeout"

        # A graceful close hands over at once (LeaveGroup), well before a
        # session timeout would.
        leaving = members.pop()
        t0 = time.monotonic()
        leaving.close()
        wait_until(lambda: members[0].partitions() == set(range(12)), 20, "the last member to own all 12")
        assert time.monotonic() - t0 < SESSION_MS / 1000, "a graceful leave waited for the session timeout"
        # Everything produced was read by someone (at-least-once, no commits).
        wait_until(lambda: len({r[0] for r in members[0].records}) == 12, 30, "records from all 12 partitions")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for m in members:
            m.close()


def test_cooperative_join_does_not_revoke_the_others(gbroker):
    create_topic(gbroker.bootstrap, "coop", 12)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = Member(gbroker.bootstrap, "gc", "coop", **conf)
    b = Member(gbroker.bootstrap, "gc", "coop", **conf)
    c = None
    try:
        wait_until(lambda: exact_cover([a, b], 12) and len(a.partitions()) == 6, 60, "two members with 6 each")
        before = {id(m): m.partitions() for m in (a, b)}
        events_before = {id(m): len(m.events) for m in (a, b)}
        c = Member(gbroker.bootstrap, "gc", "coop", **conf)
        wait_until(lambda: exact_cover([a, b, c], 12) and len(c.partitions()) == 4, 60, "three members with 4 each")
        for m in (a, b):
            later = m.events[events_before[id(m)]:]
            revoked = set().union(*[ps for kind, ps in later if kind == "revoke"])
            # Only what moved to the newcomer was revoked; the rest stayed
            # owned (and consumed) through the rebalance.
            assert revoked <= c.partitions(), (later, c.partitions())
            assert before[id(m)] - revoked == m.partitions()
            assert len(m.partitions()) == 4
    finally:
        for m in (a, b, c):
            if m:
                m.close()


def test_static_member_restart_causes_no_rebalance(gbroker):
    create_topic(gbroker.bootstrap, "static", 6)
    a = Member(gbroker.bootstrap, "gs", "static", **{"group.instance.id": "a"})
    b = Member(gbroker.bootstrap, "gs", "static", **{"group.instance.id": "b"})
    b2 = None
    try:
        wait_until(lambda: exact_cover([a, b], 6) and len(a.partitions()) == 3, 60, "two static members")
        a_events = len(a.events)
        b_owned = b.partitions()
        b.close()  # a static member does not send LeaveGroup
        time.sleep(1)
        b2 = Member(gbroker.bootstrap, "gs", "static", **{"group.instance.id": "b"})
        wait_until(lambda: b2.partitions() == b_owned, 30, "the restarted member to get its partitions back")
        time.sleep(3)  # several heartbeats: a rebalance would show up now
        assert len(a.events) == a_events, a.events[a_events:]
        assert a.partitions() | b2.partitions() == set(range(6))
    finally:
        a.close()
        if b2:
            b2.close()


def committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


def consume_and_commit(bootstrap, group, topic, expect):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": SESSION_MS})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


def test_two_groups_progress_independently_and_survive_a_restart(gbroker):
    create_topic(gbroker.bootstrap, "shared", 3)
    produce(gbroker.bootstrap, "shared", 30, 3)
    a = consume_and_commit(gbroker.bootstrap, "ga", "shared", 30)
    assert sorted(a) == sorted(str(i).encode() for i in range(30))
    assert committed(gbroker.bootstrap, "ga", "shared", 3) == {0: 10, 1: 10, 2: 10}
    assert committed(gbroker.bootstrap, "gb", "shared", 3) == {0: -1001, 1: -1001, 2: -1001}
    produce(gbroker.bootstrap, "shared", 30, 3)
    b = consume_and_commit(gbroker.bootstrap, "gb", "shared", 60)
    assert len(b) == 60
    assert committed(gbroker.bootstrap, "gb", "shared", 3) == {0: 20, 1: 20, 2: 20}
    assert committed(gbroker.bootstrap, "ga", "shared", 3) == {0: 10, 1: 10, 2: 10}

    # Offsets and groups come back from __consumer_offsets after a restart,
    # clean or killed.
    assert gbroker.stop() == 0
    gbroker.start()
    assert committed(gbroker.bootstrap, "ga", "shared", 3) == {0: 10, 1: 10, 2: 10}
    gbroker.kill()
    gbroker.start()
    assert committed(gbroker.bootstrap, "gb", "shared", 3) == {0: 20, 1: 20, 2: 20}
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    groups = {g.id for g in admin.list_groups(timeout=30)}
    assert {"ga", "gb"} <= groups
    # Group ga resumes where it committed: only the second 30 messages.
    rest = consume_and_commit(gbroker.bootstrap, "ga", "shared", 30)
    assert sorted(rest) == sorted(str(i).encode() for i in range(30))


def test_a_topic_created_again_under_its_name_has_none_of_the_old_offsets(gbroker):
    """Committed offsets belong to the topic they were committed against (its
    topic id, docs/group_records.md): once a topic is deleted and created
    again under its name, the group has no committed offset for the new one
    (librdkafka's -1001, not the old topic's), and the offsets it commits
    then are the new topic's and come back after a kill -9 and a restart."""
    bs = gbroker.bootstrap
    create_topic(bs, "again", 2)
    produce(bs, "again", 10, 2)
    assert len(consume_and_commit(bs, "gr", "again", 10)) == 10
    assert committed(bs, "gr", "again", 2) == {0: 5, 1: 5}

    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_topics(["again"]).values():
        f.result(timeout=30)
    wait_until(lambda: "again" not in admin.list_topics(timeout=10).topics, 20, "the topic to be gone")
    create_topic(bs, "again", 2)
    assert committed(bs, "gr", "again", 2) == {0: -1001, 1: -1001}
    # Nor in a fetch of all the group's offsets (OffsetFetch without topics).
    from kafka.admin import KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        assert kadmin.list_consumer_group_offsets("gr") == {}
    finally:
        kadmin.close()

    produce(bs, "again", 4, 2)
    assert sorted(consume_and_commit(bs, "gr", "again", 4)) == [b"0", b"1", b"2", b"3"]
    assert committed(bs, "gr", "again", 2) == {0: 2, 1: 2}
    gbroker.kill()
    gbroker.start()
    assert committed(bs, "gr", "again", 2) == {0: 2, 1: 2}
    assert gbroker.stop() == 0
    gbroker.start()
    assert committed(bs, "gr", "again", 2) == {0: 2, 1: 2}


def test_kafka_python_group_and_admin(gbroker):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    create_topic(gbroker.bootstrap, "kp", 4)
    produce(gbroker.bootstrap, "kp", 40, 4)
    c = KafkaConsumer("kp", bootstrap_servers=gbroker.bootstrap, group_id="kpg", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=15000, session_timeout_ms=SESSION_MS,
                      heartbeat_interval_ms=500, api_version_auto_timeout_ms=10000)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 40:
            break
    assert sorted(got) == sorted(str(i).encode() for i in range(40))
    c.commit()
    assert c.committed(KTP("kp", 0)) == 10
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        listed = dict(admin.list_consumer_groups())
        assert listed.get("kpg") == "consumer"
        described = admin.describe_consumer_groups(["kpg"])[0]
        assert described.state == "Stable"
        assert len(described.members) == 1
        # Kafka's form of the member's address: a slash, then the IP.
        assert described.members[0].client_host == "/127.0.0.1"
        offsets = admin.list_consumer_group_offsets("kpg")
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 10, 1: 10, 2: 10, 3: 10}
    finally:
        c.close()
        admin.close()
    # After the member left, the group is Empty and can be deleted.
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        wait_until(lambda: admin.describe_consumer_groups(["kpg"])[0].state == "Empty", 20, "the group to be empty")
        result = admin.delete_consumer_groups(["kpg", "nope"])
        errors = {g: e.__name__ for g, e in result}
        assert errors["kpg"] == "NoError"
        assert errors["nope"] == "GroupIdNotFoundError"
        assert "kpg" not in dict(admin.list_consumer_groups())
    finally:
        admin.close()


def test_bad_input_gets_errors_not_crashes(gbroker):
    # A stale generation and an unknown member, through kafka-python's
    # low-level client.
    from kafka.client_async import KafkaClient
    from kafka.protocol.commit import OffsetCommitRequest
    from kafka.protocol.group import JoinGroupRequest

    create_topic(gbroker.bootstrap, "bad", 1)
    client = KafkaClient(bootstrap_servers=gbroker.bootstrap, api_version=(2, 0, 0))
    try:
        node = client.least_loaded_node()
        deadline = time.monotonic() + 10
        while not client.ready(node):
            assert time.monotonic() < deadline, "no connection to the broker"
            client.poll(timeout_ms=100)

        def call(req):
            f = client.send(node, req)
            client.poll(future=f, timeout_ms=10000)
            assert f.succeeded(), f.exception
            return f.value

        r = call(OffsetCommitRequest[2]("badg", 5, "nobody", -1, [("bad", [(0, 1, "")])]))
        assert r.topics[0][1][0][1] == 22  # ILLEGAL_GENERATION: unknown group with a generation
        r = call(OffsetCommitRequest[2]("badg", -1, "", -1, [("bad", [(0, 1, "")])]))
        assert r.topics[0][1][0][1] == 0  # a groupless commit
        r = call(OffsetCommitRequest[2]("badg", 3, "nobody", -1, [("bad", [(0, 1, "")])]))
        assert r.topics[0][1][0][1] == 25  # UNKNOWN_MEMBER_ID
        huge = b"x" * (300 * 1024)
        r = call(JoinGroupRequest[2]("badg", 6000, 6000, "", "consumer", [("range", huge)]))
        assert r.error_code == 42  # INVALID_REQUEST: oversized metadata
        r = call(JoinGroupRequest[2]("badg", 10, 6000, "", "consumer", [("range", b"")]))
        assert r.error_code == 26  # INVALID_SESSION_TIMEOUT
    finally:
        client.close()
