"""Replication (docs/replication.md) on a three-broker cluster over a
three-member etcd (cluster_harness.py), with real clients: followers copy
their leaders' logs, acks=all is answered only once every in-sync replica
has the batch, a confirmed message survives the loss of its leader, a
follower that stops fetching leaves the ISR and returns after a restart,
min.insync.replicas refuses acks=all below it while acks=1 goes on, and a
consumer group's committed offsets survive the loss of its coordinator.
"""

import os
import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster, produce_request
from sluice_harness import SLUICE_BIN

SESSION_TIMEOUT_MS = 4000
LAG_MAX_MS = 3000
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 5
NOT_ENOUGH_REPLICAS = 19


@pytest.fixture
def cluster():
    with Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                 extra_settings={"replica.lag.time.max.ms": str(LAG_MAX_MS),
                                 "replica.fetch.wait.max.ms": "200",
                                 "replica.fetch.backoff.ms": "200"}) as c:
        yield c


def create(c, topic, partitions=1, rf=3, configs=None):
    a = AdminClient({"bootstrap.servers": c.live_bootstrap(), "socket.timeout.ms": 10000})
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                                   config=configs or {})], operation_timeout=20)
    fs[topic].result(30)
    c.wait_for(lambda: all(p.leader >= 0 for p in c.metadata_from(c.live_ids()[0]).topics[topic]
                           .partitions.values()) if topic in c.metadata_from(c.live_ids()[0]).topics
               else False, 20, "leaders for " + topic)


def partition_view(c, topic, p=0, via=None):
    via = via if via is not None else c.live_ids()[0]
    return c.metadata_from(via).topics[topic].partitions[p]


def produce_all(c, topic, values, acks="all", partition=0):
    """Produces `values` with idempotence; returns {value: offset} of the
    acknowledged ones and the delivery errors."""
    p = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": acks,
                  "enable.idempotence": acks == "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "retry.backoff.ms": 200})
    acked, errors = {}, []

    def cb(err, msg):
        if err is None:
            acked[msg.value().decode()] = msg.offset()
        else:
            errors.append(err)
    for v in values:
        p.produce(topic, v.encode(), partition=partition, on_delivery=cb)
        p.poll(0)
    assert p.flush(90) == 0, "messages still in flight"
    return acked, errors


def consume_all(bootstrap, topic, expected, partition=0, timeout=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-%d" % time.monotonic_ns(),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    seen = []
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
            continue
        assert not m.error(), m.error()
        seen.append((m.offset(), m.value().decode()))
    c.close()
    return seen


def metrics(c, node_id):
    """The unlabelled samples of a broker's /metrics, by name."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % c.broker(node_id).metrics_port,
                                  timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        name, value = line.split(" ", 1)
        out[name] = float(value)
    return out


def isr_of(c, topic, via=None):
    return sorted(partition_view(c, topic, via=via).isr)


def test_followers_copy_the_log_and_a_confirmed_message_survives_its_leader(cluster):
    c = cluster
    create(c, "rep", configs={"min.insync.replicas": "2"})
    c.wait_for(lambda: isr_of(c, "rep") == [1, 2, 3], 20, "a full ISR")
    values = ["m%05d" % i for i in range(2000)]
    acked, errors = produce_all(c, "rep", values)
    assert not errors and len(acked) == len(values)
    leader = partition_view(c, "rep").leader
    # Every follower holds the log: the leader dies, and a follower has all.
    c.kill(leader)
    c.wait_for(lambda: partition_view(c, "rep").leader not in (-1, leader), FAILOVER_S, "a new leader")
    seen = consume_all(c.live_bootstrap(), "rep", len(values))
    assert [v for _, v in seen] == values
    assert [o for o, _ in seen] == [acked[v] for v in values]
    # More writes under the new leader; the old one comes back as a follower
    # and catches up (its log then leads again after another failover).
    more = ["n%05d" % i for i in range(500)]
    acked2, errors2 = produce_all(c, "rep", more)
    assert not errors2 and len(acked2) == len(more)
    c.restart(leader)
    c.wait_for(lambda: leader in isr_of(c, "rep"), 30, "the restarted broker back in the ISR")
    for other in [n for n in c.live_ids() if n != leader]:
        c.kill(other)
    # The restarted broker alone: unclean election is off, so it leads only
    # if it is in the ISR, which it is after catching up.
    c.restart(other)
    seen = consume_all(c.live_bootstrap(), "rep", len(values) + len(more))
    assert [v for _, v in seen] == values + more


def test_lagging_follower_leaves_the_isr_and_min_insync_guards_acks_all(cluster):
    c = cluster
    create(c, "isr", configs={"min.insync.replicas": "2"})
    c.wait_for(lambda: isr_of(c, "isr") == [1, 2, 3], 20, "a full ISR")
    leader = partition_view(c, "isr").leader
    followers = [n for n in c.node_ids if n != leader]
    c.kill(followers[0])
    # Gone longer than replica.lag.time.max.ms (its registration lapses too).
    c.wait_for(lambda: followers[0] not in isr_of(c, "isr", via=leader), LAG_MAX_MS / 1000 + FAILOVER_S,
               "the dead follower out of the ISR")
    acked, errors = produce_all(c, "isr", ["a%d" % i for i in range(100)])
    assert not errors and len(acked) == 100
    # Two of three down: acks=all is refused, acks=1 still works.
    c.kill(followers[1])
    c.wait_for(lambda: isr_of(c, "isr", via=leader) == [leader], LAG_MAX_MS / 1000 + FAILOVER_S,
               "the ISR down to the leader")
    port = int(c.broker(leader).address.split(":")[1])
    err, _ = produce_request(port, "isr", 0, b"refused", acks=-1)
    assert err == NOT_ENOUGH_REPLICAS
    # The operator sees it on the leader's /metrics.
    m = metrics(c, leader)
    # (The shrinks may be the controller's, which drops a dead broker from
    # the ISR when it elects, or the leader's: the counter is the leader's.)
    assert "sluice_isr_shrinks_total" in m and "sluice_isr_expands_total" in m
    assert m["sluice_replication_bytes_out_total"] > 0
    assert m["sluice_under_replicated_partitions"] >= 1
    assert m["sluice_under_min_isr_partitions"] >= 1
    # And with `sluice topic describe --under-replicated`.
    out = subprocess.run([SLUICE_BIN, "topic", "describe", "--under-replicated",
                          "--bootstrap", c.broker(leader).address], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert ("isr-0\tleader=%d\t" % leader) in out.stdout and ("\tisr=%d\t" % leader) in out.stdout, out.stdout
    err, off = produce_request(port, "isr", 0, b"accepted", acks=1)
    assert err == 0 and off == 100
    # Both return, catch up and rejoin the ISR.
    c.restart(followers[0])
    c.restart(followers[1])
    c.wait_for(lambda: isr_of(c, "isr", via=leader) == [1, 2, 3], 30, "both followers back in the ISR")
    err, off = produce_request(port, "isr", 0, b"again", acks=-1)
    assert err == 0 and off == 101
    # A follower stopped cleanly leaves its high watermark in its checkpoint
    # (it learnt 102 from the leader's next fetch answer), so that it does
    # not start from its log start when it comes back.
    def checkpointed():
        path = os.path.join(c.broker(followers[0]).data_dir, "meta", "high_watermarks")
        if not os.path.exists(path):
            return None
        for line in open(path).read().splitlines():
            topic, part, hw = line.split()
            if topic == "isr" and part == "0":
                return int(hw)
    c.wait_for(lambda: checkpointed() == 102 or None, 15, "the follower's periodic checkpoint to reach 102")
    c.stop(followers[0])
    assert checkpointed() == 102


def test_group_offsets_survive_the_coordinators_broker(cluster):
    c = cluster
    create(c, "grp", partitions=3)
    values = ["g%04d" % i for i in range(300)]
    for p in range(3):
        acked, errors = produce_all(c, "grp", values[p::3], partition=p)
        assert not errors
    conf = {"bootstrap.servers": c.live_bootstrap(), "group.id": "survivors", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    cons = Consumer(conf)
    cons.subscribe(["grp"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 150 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m.value().decode())
    cons.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in cons.committed([TopicPartition("grp", p) for p in range(3)])}
    cons.close()
    # The coordinator: the leader of the group's __consumer_offsets partition.
    coord = _coordinator_of(c, "survivors")
    assert coord is not None
    c.kill(coord)
    c.wait_for(lambda: _coordinator_of(c, "survivors") not in (None, coord), FAILOVER_S + 5,
               "a new coordinator")
    cons = Consumer(conf)
    cons.subscribe(["grp"])
    rest = []
    after = {}
    deadline = time.monotonic() + 60
    while not after and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            rest.append(m.value().decode())
        a = cons.assignment()
        if a:
            after = {tp.partition: tp.offset for tp in cons.committed(a, timeout=10)}
    deadline = time.monotonic() + 60
    while len(got) + len(rest) < 300 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None or m.error():
            continue
        rest.append(m.value().decode())
    cons.close()
    assert after == committed
    assert sorted(got + rest) == sorted(values)


def _coordinator_of(c, group):
    """The node id FindCoordinator names for `group`, asked of a live broker."""
    import struct
    from cluster_harness import _request, _kstr
    for n in c.live_ids():
        port = int(c.broker(n).address.split(":")[1])
        try:
            r = _request(port, 10, 1, _kstr(group) + struct.pack(">b", 0), 5.0)
        except OSError:
            continue
        _throttle, err = r.take(">ih")
        r.string()  # error message (nullable)
        node = r.take(">i")
        if err == 0:
            return node
    return None


def test_consumer_reads_from_a_follower_in_its_rack():
    """KIP-392: a consumer with client.rack is sent by the leader to the
    in-sync replica in its rack, which serves it up to its high watermark."""
    c = Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                extra_settings={"replica.fetch.wait.max.ms": "200"})
    for n in c.node_ids:
        c.broker(n).settings["broker.rack"] = "rack-%d" % n
    try:
        c.start()
        create(c, "racks")
        c.wait_for(lambda: isr_of(c, "racks") == [1, 2, 3], 20, "a full ISR")
        values = ["r%04d-" % i + "x" * 1000 for i in range(300)]
        acked, errors = produce_all(c, "racks", values)
        assert not errors and len(acked) == len(values)
        leader = partition_view(c, "racks").leader
        follower = [n for n in c.node_ids if n != leader][0]
        before = {n: metrics(c, n)["sluice_network_bytes_out_total"] for n in c.node_ids}
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "rack-reader",
                         "client.rack": "rack-%d" % follower, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
        cons.assign([TopicPartition("racks", 0, OFFSET_BEGINNING)])
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < len(values) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error():
                continue
            seen.append(m.value().decode())
        cons.close()
        assert seen == values
        sent = {n: metrics(c, n)["sluice_network_bytes_out_total"] - before[n] for n in c.node_ids}
        # The records (300 KB) left the follower in the consumer's rack, not the leader.
        assert sent[follower] > 250_000, sent
        assert sent[leader] < 100_000, sent
    finally:
        c.close()
