"""Replication (docs/replication.md) on a three-broker cluster over a
three-member etcd (cluster_harness.py), with real clients: followers copy
their leaders' logs, acks=all is answered only once every in-sync replica
has the batch, a confirmed message survives the loss of its leader, a
follower that stops fetching leaves the ISR and returns after a restart,
min.insync.replicas refuses acks=all below it while acks=1 goes on (and
answers NOT_ENOUGH_REPLICAS_AFTER_APPEND to a batch the ISR shrank under
while it waited), and a consumer group's committed offsets survive the
loss of its coordinator. Unclean leader election off keeps a partition
offline rather than lose acknowledged messages; on (from the start, or
turned on while the partition is offline) it loses exactly the ones the
old leader then counts as truncated committed offsets. An idempotent
producer's retry to a new leader is recognised as a duplicate, and
producer ids are unique across brokers.
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
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
REQUEST_TIMED_OUT = 7


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


def test_isr_shrinking_under_a_waiting_acks_all_batch_answers_not_enough_replicas_after_append(cluster):
    """min.insync.replicas 3, all three in sync: a batch produced with
    acks=all while a follower is paused waits (the follower never fetches
    it) until the follower leaves the ISR; the high watermark then passes
    it, and with two in-sync replicas it is answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND at the offset it was written at
    (Kafka's DelayedProduce). The next is refused before it is written
    (NOT_ENOUGH_REPLICAS). The follower comes back with the batch."""
    c = cluster
    topic = "after-append"
    create(c, topic, configs={"min.insync.replicas": "3"})
    c.wait_for(lambda: isr_of(c, topic) == [1, 2, 3], 20, "a full ISR")
    leader = partition_view(c, topic).leader
    follower = [n for n in c.node_ids if n not in (leader, c.controller_id())][0]
    port = _port(c, leader)
    _wait_leading(c, port, topic)
    assert produce_request(port, topic, 0, b"first", acks=-1) == (0, 0)
    c.pause(follower)
    assert produce_request(port, topic, 0, b"waited", acks=-1, timeout=30.0) == (NOT_ENOUGH_REPLICAS_AFTER_APPEND, 1)
    c.wait_for(lambda: follower not in isr_of(c, topic, via=leader), 10, "the paused follower out of the ISR")
    err, _ = produce_request(port, topic, 0, b"refused", acks=-1)
    assert err == NOT_ENOUGH_REPLICAS
    c.resume(follower)
    c.wait_for(lambda: isr_of(c, topic, via=leader) == [1, 2, 3], 30, "the follower back in the ISR")
    assert produce_request(port, topic, 0, b"again", acks=-1) == (0, 2)
    seen = consume_all(c.live_bootstrap(), topic, 3)
    assert [v for _, v in seen] == ["first", "waited", "again"], seen


STALE_BROKER_EPOCH = 77


def fetch_v7(port, topic, partition, offset, replica_id, timeout=10.0):
    """Fetch v7 (sessionless, no wait) of one partition from broker
    127.0.0.1:port, claiming `replica_id` (-1: a consumer); returns (top-level
    error, partition error, high watermark), the last two None when the
    answer names no partition."""
    import struct
    from cluster_harness import _kstr, _request
    body = struct.pack(">iiiibii", replica_id, 0, 0, 1 << 20, 0, 0, -1)
    body += struct.pack(">i", 1) + _kstr(topic) + struct.pack(">i", 1)
    body += struct.pack(">iqqi", partition, offset, -1, 1 << 20)
    body += struct.pack(">i", 0)  # forgotten topics
    r = _request(port, 1, 7, body, timeout)
    r.take(">i")  # throttle_time_ms
    top, _session = r.take(">hi")
    if r.take(">i") == 0:
        return top, None, None
    r.string()
    assert r.take(">i") == 1
    index, err, hw = r.take(">ihq")
    assert index == partition
    return top, err, hw


def _wait_leading(c, port, topic, partition=0):
    """Waits until the broker at `port` serves the partition as its leader
    (a consumer's fetch from it answers no error): Metadata may name a
    leader before that broker has applied its leadership."""
    c.wait_for(lambda: fetch_v7(port, topic, partition, 0, -1)[1] == 0, 20, "the leader serving " + topic)


def test_a_fetch_claiming_a_followers_id_without_its_broker_epoch_moves_nothing():
    """A client that sends a Fetch with a follower's replica id but not the
    follower's registered broker epoch (KIP-903) is refused with
    STALE_BROKER_EPOCH: it reads nothing past the high watermark and does not
    move it. The follower's own fetches, which carry its epoch, do. (Long
    lag and session limits, so the paused follower stays in the ISR.)"""
    c = Cluster(brokers=2, etcd=1, session_timeout_ms=20000,
                extra_settings={"replica.lag.time.max.ms": "30000", "replica.fetch.wait.max.ms": "200",
                                "replica.fetch.backoff.ms": "200"})
    F = None
    try:
        c.start()
        topic = "forged"
        create(c, topic, rf=2)
        view = partition_view(c, topic)
        L = view.leader
        F = [n for n in view.replicas if n != L][0]
        c.wait_for(lambda: sorted(isr_of(c, topic)) == sorted(view.replicas), 20, "a full ISR")
        port = _port(c, L)
        _wait_leading(c, port, topic)
        assert produce_request(port, topic, 0, b"a", acks=-1) == (0, 0)
        c.pause(F)
        assert produce_request(port, topic, 0, b"b", acks=1) == (0, 1)
        assert fetch_v7(port, topic, 0, 0, -1) == (0, 0, 1)  # F has not fetched b
        assert fetch_v7(port, topic, 0, 2, F) == (STALE_BROKER_EPOCH, None, None)
        assert fetch_v7(port, topic, 0, 0, -1) == (0, 0, 1)
        assert F in isr_of(c, topic, via=L)
        c.resume(F)
        F = None
        c.wait_for(lambda: fetch_v7(port, topic, 0, 0, -1)[2] == 2, 15, "F's own fetch moving the high watermark")
    finally:
        if F is not None:
            c.resume(F)
        c.close()


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


# ------------------------------------------------------------ unclean leader election
#
# One scenario, three endings. An RF 3 partition with min.insync.replicas 1
# gets batch A while all three replicas are in sync; both followers X and Y
# die and leave the ISR, and batch B is confirmed with acks=all by the
# leader L alone (ISR {L}); then L goes too and only X, which lacks B, comes
# back. Unclean election off: the partition stays offline and L brings
# everything back. On: X leads, B is lost, and when L returns as a follower
# and truncates, the committed offsets it throws away are counted.

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
UNCLEAN_A, UNCLEAN_B, UNCLEAN_C = 40, 25, 10


def labelled_metric(c, node_id, name, labels):
    """One labelled sample of a broker's /metrics, e.g. ("...", 'kind="unclean"')."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % c.broker(node_id).metrics_port,
                                  timeout=10).read().decode()
    want = "%s{%s} " % (name, labels)
    for line in text.splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    raise AssertionError("no sample %s{%s} in /metrics of broker %d" % (name, labels, node_id))


def _port(c, n):
    return c.broker(n).port


def _leader_seen_by(c, topic, n):
    try:
        return c.metadata_from(n).topics[topic].partitions[0].leader
    except (OSError, EOFError, KeyError):
        return None


def _only_the_leader_has_b(c, topic, unclean):
    """Runs the scenario up to: L has A and B (B confirmed by L alone), L,
    X and Y all down. Returns (L, X, Y, acked A, acked B)."""
    create(c, topic, configs={"min.insync.replicas": "1",
                              "unclean.leader.election.enable": "true" if unclean else "false"})
    c.wait_for(lambda: isr_of(c, topic) == [1, 2, 3], 20, "a full ISR")
    view = partition_view(c, topic)
    L = view.leader
    X, Y = [n for n in view.replicas if n != L]
    a_values = ["A%03d" % i for i in range(UNCLEAN_A)]
    acked_a, errors = produce_all(c, topic, a_values)
    assert not errors and len(acked_a) == UNCLEAN_A
    # A is on every replica before the followers go (acks=all, ISR of 3).
    c.kill(X)
    c.kill(Y)
    c.wait_for(lambda: isr_of(c, topic, via=L) == [L], LAG_MAX_MS / 1000 + FAILOVER_S,
               "the ISR down to the leader")
    b_values = ["B%03d" % i for i in range(UNCLEAN_B)]
    acked_b, errors = produce_all(c, topic, b_values)
    assert not errors and len(acked_b) == UNCLEAN_B
    assert sorted(acked_b.values()) == list(range(UNCLEAN_A, UNCLEAN_A + UNCLEAN_B))
    # L's high-watermark checkpoint (every 5 s) has caught up with B, so a
    # killed and restarted L knows B was committed, as Kafka's would.
    c.wait_for(lambda: _checkpointed_hw(c, L, topic) == UNCLEAN_A + UNCLEAN_B, 15,
               "L's checkpoint to hold the high watermark after B")
    return L, X, Y, acked_a, acked_b


def _checkpointed_hw(c, node, topic, partition=0):
    """The high watermark `node` last checkpointed for the partition
    (meta/high_watermarks, docs/replication.md), or None."""
    path = os.path.join(c.broker(node).data_dir, "meta", "high_watermarks")
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for line in lines:
        t, p, hw = line.split()
        if t == topic and int(p) == partition:
            return int(hw)
    return None


def test_unclean_election_off_keeps_the_partition_offline_and_loses_nothing(cluster):
    c = cluster
    topic = "unclean-off"
    L, X, Y, acked_a, acked_b = _only_the_leader_has_b(c, topic, unclean=False)
    c.kill(L)
    c.restart(X)  # waits out X's old registration
    c.wait_converged(timeout=FAILOVER_S + 10)
    # X lacks B and is not in the ISR: nobody may lead.
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)  # L's registration gone, the controller (X) has decided
    assert c.controller_id() == X
    view = partition_view(c, topic, via=X)
    assert view.leader == -1, view
    assert view.isr == [L], view
    err, _ = produce_request(_port(c, X), topic, 0, b"offline", acks=-1)
    assert err in (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE), err
    assert labelled_metric(c, X, "sluice_leader_elections_total", 'kind="unclean"') == 0
    # L, the ISR, comes back and leads (a clean election): nothing was lost.
    c.restart(L)
    c.wait_for(lambda: _leader_seen_by(c, topic, X) == L, FAILOVER_S, "L leading again")
    expected = [(acked_a[v], v) for v in sorted(acked_a)] + [(acked_b[v], v) for v in sorted(acked_b)]
    seen = consume_all(c.live_bootstrap(), topic, UNCLEAN_A + UNCLEAN_B)
    assert seen == expected
    assert labelled_metric(c, c.controller_id(), "sluice_leader_elections_total", 'kind="unclean"') == 0


def _unclean_on_after_l_is_gone(c, topic, L, X, acked_a, acked_b, restart_x=True):
    """X alone comes back (unless it runs already) and is elected
    uncleanly; C is written to it. Returns the values of the acknowledged
    messages a consumer no longer sees."""
    if restart_x:
        c.restart(X)
    c.wait_for(lambda: _leader_seen_by(c, topic, X) == X, FAILOVER_S + 10, "X elected uncleanly")
    view = partition_view(c, topic, via=X)
    assert view.isr == [X], view
    controller = c.controller_id()
    assert controller == X
    assert labelled_metric(c, controller, "sluice_leader_elections_total", 'kind="unclean"') == 1
    if restart_x:  # elected on X's registration, and logged so
        assert "1 unclean" in c.broker(X).log_text(200000)
    c_values = ["C%03d" % i for i in range(UNCLEAN_C)]
    acked_c, errors = produce_all(c, topic, c_values)
    assert not errors and len(acked_c) == UNCLEAN_C
    # X's log: A, then C at the offsets B had on L.
    assert sorted(acked_c.values()) == list(range(UNCLEAN_A, UNCLEAN_A + UNCLEAN_C))
    seen = consume_all(c.live_bootstrap(), topic, UNCLEAN_A + UNCLEAN_C)
    seen_values = {v for _, v in seen}
    assert len(seen) == UNCLEAN_A + UNCLEAN_C
    lost = sorted(v for v in list(acked_a) + list(acked_b) + list(acked_c) if v not in seen_values)
    return lost, acked_c


def _truncation_counted(c, n):
    m = metrics(c, n)["sluice_truncated_committed_offsets_total"]
    import re
    logged = [int(x) for x in re.findall(r"discarded (\d+) committed offsets", c.broker(n).log_text(10 ** 7))]
    return m, logged


def test_unclean_election_on_loses_b_and_the_paused_old_leader_counts_it(cluster):
    """L is paused (SIGSTOP) rather than killed, so it keeps in memory the
    high watermark it had: when it resumes as a follower and truncates, the
    committed offsets it discards are exactly B."""
    c = cluster
    topic = "unclean-on-pause"
    L, X, Y, acked_a, acked_b = _only_the_leader_has_b(c, topic, unclean=True)
    c.pause(L)
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)  # L's lease (and controller key) lapse
    lost, acked_c = _unclean_on_after_l_is_gone(c, topic, L, X, acked_a, acked_b)
    assert lost == sorted(acked_b), lost  # exactly B, every one acknowledged
    c.resume(L)
    c.wait_for(lambda: L in isr_of(c, topic, via=X), 30, "L back in the ISR as a follower")
    m, logged = _truncation_counted(c, L)
    assert m == len(lost) and logged == [len(lost)], (m, logged, c.broker(L).log_text(4000))
    assert metrics(c, X)["sluice_truncated_committed_offsets_total"] == 0
    # L's log now agrees with X's: L alone can serve A and C after X goes.
    seen = consume_all(c.live_bootstrap(), topic, UNCLEAN_A + UNCLEAN_C)
    assert sorted(v for _, v in seen) == sorted(list(acked_a) + list(acked_c))


def test_unclean_election_on_loses_b_and_the_restarted_old_leader_truncates_it(cluster):
    """L is killed and restarted, and truncates B away on following X. It
    knows B was committed from its high-watermark checkpoint (written after
    B, before the kill), so the truncation counts exactly B."""
    c = cluster
    topic = "unclean-on-kill"
    L, X, Y, acked_a, acked_b = _only_the_leader_has_b(c, topic, unclean=True)
    c.kill(L)
    lost, acked_c = _unclean_on_after_l_is_gone(c, topic, L, X, acked_a, acked_b)
    assert lost == sorted(acked_b), lost
    c.restart(L)
    c.wait_for(lambda: L in isr_of(c, topic, via=X), 30, "L back in the ISR as a follower")
    m, logged = _truncation_counted(c, L)
    assert m == len(lost) and logged == [len(lost)], (m, logged, c.broker(L).log_text(4000))


# ------------------------------------------------------------ producer ids across leaders

def init_producer_id(port, timeout=10.0):
    """InitProducerId v1 (no transactional id) to 127.0.0.1:port; returns
    (error code, producer id, epoch)."""
    import struct
    from cluster_harness import _request
    body = struct.pack(">hi", -1, 60000)  # null transactional id, transaction_timeout_ms
    r = _request(port, 22, 1, body, timeout)
    _throttle, err, pid, epoch = r.take(">ihqh")
    return err, pid, epoch


def produce_batch(port, topic, partition, values, producer, acks=-1, timeout=10.0):
    """Produce v3 of one v2 batch holding `values`, with `producer` =
    (producer id, epoch, base sequence); returns (error code, base offset)."""
    import struct
    from cluster_harness import _kstr, _request
    from sluice_harness import record, v2_batch
    now_ms = 1_700_000_000_000  # fixed: a retry is the same bytes
    recs = b"".join(record(i, v) for i, v in enumerate(values))
    batch = v2_batch(recs, len(values), now_ms, now_ms, producer=producer)
    body = struct.pack(">hhi", -1, acks, int(timeout * 1000))
    body += struct.pack(">i", 1) + _kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch
    r = _request(port, 0, 3, body, timeout + 5)
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    index, error, base_offset, _append_time = r.take(">ihqq")
    assert index == partition
    return error, base_offset


def test_idempotent_retry_to_a_new_leader_is_a_duplicate(cluster):
    c = cluster
    topic = "idem"
    create(c, topic, configs={"min.insync.replicas": "2"})
    c.wait_for(lambda: isr_of(c, topic) == [1, 2, 3], 20, "a full ISR")
    # A new topic's ISR is its whole assignment from the start, so the
    # above does not prove the leader has applied the topic yet (a raw
    # Produce would get UNKNOWN_TOPIC_OR_PARTITION): every broker must show it.
    c.wait_for(lambda: len({_leader_seen_by(c, topic, n) for n in c.live_ids()} - {None, -1}) == 1
               and None not in {_leader_seen_by(c, topic, n) for n in c.live_ids()}, 20,
               "every broker knowing the leader")
    leader = partition_view(c, topic).leader
    err, pid, epoch = init_producer_id(c.broker(leader).port)
    assert err == 0 and pid >= 0 and epoch >= 0
    first = [b"s0-a", b"s0-b", b"s0-c"]
    # Metadata may name the leader before its replica is installed (on a
    # fresh cluster the metadata thread is busy with __consumer_offsets):
    # the produce then answers UNKNOWN_TOPIC_OR_PARTITION at once, having
    # written nothing, and a client retries.
    deadline = time.monotonic() + 15
    while True:
        err, base = produce_batch(c.broker(leader).port, topic, 0, first, (pid, epoch, 0))
        if err not in (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert err == 0 and base == 0, (err, base, c.describe())
    # acks=-1 answered: every ISR member has the batch, with its producer
    # fields. The leader dies before the client heard (as far as it knows).
    c.kill(leader)
    c.wait_for(lambda: partition_view(c, topic).leader not in (-1, leader), FAILOVER_S, "a new leader")
    new_leader = partition_view(c, topic).leader
    # The same batch again, to the new leader: a duplicate, answered with
    # the first append's offset, not written again.
    err2, base2 = produce_batch(c.broker(new_leader).port, topic, 0, first, (pid, epoch, 0))
    assert (err2, base2) == (0, base), (err2, base2, c.broker(new_leader).log_text(3000))
    # The next sequence goes on right after it.
    err3, base3 = produce_batch(c.broker(new_leader).port, topic, 0, [b"s3-a", b"s3-b"], (pid, epoch, 3))
    assert (err3, base3) == (0, base + 3)
    # base3 == 3 already says the log ended at 3 (the retry wrote nothing);
    # the log holds the first batch once, then the next.
    seen = consume_all(c.live_bootstrap(), topic, 5, timeout=20)
    assert seen == [(0, "s0-a"), (1, "s0-b"), (2, "s0-c"), (3, "s3-a"), (4, "s3-b")], seen


def test_producer_ids_are_unique_across_brokers(cluster):
    c = cluster
    got = []
    for n in c.node_ids:
        for _ in range(2):
            err, pid, epoch = init_producer_id(c.broker(n).port)
            assert err == 0 and pid >= 0 and epoch == 0, (n, err, pid, epoch)
            got.append((n, pid))
    pids = [p for _, p in got]
    assert len(set(pids)) == len(pids), got
    # Each broker reserved its own block of 1000 (docs/replication.md).
    assert len({p // 1000 for p in pids}) == len(c.node_ids), got


def _ten_committed(c, topic):
    """Creates `topic` (min ISR 1), waits until every live broker knows it,
    and commits A00..A09 at offsets 0-9; returns (leader, [the two
    followers], the values acknowledged)."""
    create(c, topic, configs={"min.insync.replicas": "1"})
    c.wait_for(lambda: None not in {_leader_seen_by(c, topic, n) for n in c.live_ids()}, 20,
               "every broker knowing the topic")
    view = partition_view(c, topic)
    acked, errors = produce_all(c, topic, ["A%02d" % i for i in range(10)])
    assert not errors and len(acked) == 10
    return view.leader, [n for n in view.replicas if n != view.leader], acked


def test_a_restarted_replica_truncating_an_uncommitted_tail_counts_nothing(cluster):
    """No unclean election: L writes D with acks=1 while its followers are
    paused (D is never committed: the ISR still holds them), dies, a
    follower is elected cleanly, and L comes back and truncates D. Nothing
    committed was discarded, so sluice_truncated_committed_offsets_total
    must stay 0."""
    c = cluster
    topic = "clean-tail"
    L, (X, Y), acked_a = _ten_committed(c, topic)
    c.pause(X)
    c.pause(Y)
    t0 = time.monotonic()
    for i in range(5):
        err, off = produce_request(_port(c, L), topic, 0, b"D%d" % i, acks=1)
        assert (err, off) == (0, 10 + i)
    c.kill(L)  # well within replica.lag.time.max.ms: X and Y are still in the ISR
    assert time.monotonic() - t0 < LAG_MAX_MS / 1000 / 2
    c.resume(X)
    c.resume(Y)
    c.wait_for(lambda: _leader_seen_by(c, topic, X) in (X, Y), FAILOVER_S + 5, "a clean election")
    assert sorted(isr_of(c, topic, via=X)) == sorted([X, Y])
    for n in c.live_ids():
        assert labelled_metric(c, n, "sluice_leader_elections_total", 'kind="unclean"') == 0
    seen = consume_all(c.live_bootstrap(), topic, 10, timeout=20)
    assert [v for _, v in seen] == sorted(acked_a)
    c.restart(L)
    c.wait_for(lambda: L in isr_of(c, topic, via=X), 30, "L back in the ISR")
    m, logged = _truncation_counted(c, L)
    assert m == 0 and logged == [], (m, logged, [l for l in c.broker(L).log_text(10 ** 7).splitlines()
                                                 if topic in l])


def _sluice(*args, timeout=60):
    import subprocess
    from sluice_harness import SLUICE_BIN
    r = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_unclean_enabled_while_offline_elects_at_once(cluster):
    """The partition is offline (unclean election off) while X, live but out
    of the ISR, could lead. Turning unclean.leader.election.enable on for
    the topic with AlterConfigs makes the controller elect X within seconds,
    with no broker coming or going (as Kafka's ZooKeeper controller did on
    the config change; Kafka's KRaft controller scans for leaderless
    partitions every 5 minutes). Exactly B is lost, and L counts it when it
    comes back and truncates."""
    from confluent_kafka.admin import ConfigResource
    c = cluster
    topic = "unclean-late"
    L, X, Y, acked_a, acked_b = _only_the_leader_has_b(c, topic, unclean=False)
    c.kill(L)
    c.restart(X)
    c.wait_converged(timeout=FAILOVER_S + 10)
    c.wait_for(lambda: c.controller_id() == X, FAILOVER_S, "X the controller")
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)  # L's registration gone, the controller has decided
    assert partition_view(c, topic, via=X).leader == -1
    assert labelled_metric(c, X, "sluice_leader_elections_total", 'kind="unclean"') == 0
    live = c.live_ids()
    assert live == [X], live
    # AlterConfigs (not incremental) replaces the topic's whole set.
    admin = AdminClient({"bootstrap.servers": c.broker(X).address, "socket.timeout.ms": 10000})
    fs = admin.alter_configs([ConfigResource("topic", topic, set_config={
        "min.insync.replicas": "1", "unclean.leader.election.enable": "true"})])
    for f in fs.values():
        f.result(30)
    altered = time.monotonic()
    c.wait_for(lambda: _leader_seen_by(c, topic, X) == X, 10, "X elected on the config change alone")
    elected_s = time.monotonic() - altered
    assert c.live_ids() == [X]  # no broker came or went
    assert "1 unclean" in c.broker(X).log_text(200000)
    lost, acked_c = _unclean_on_after_l_is_gone(c, topic, L, X, acked_a, acked_b, restart_x=False)
    assert lost == sorted(acked_b), lost
    c.restart(L)
    c.wait_for(lambda: L in isr_of(c, topic, via=X), 30, "L back in the ISR as a follower")
    m, logged = _truncation_counted(c, L)
    assert m == len(lost) and logged == [len(lost)], (m, logged)
    assert elected_s < 10, elected_s


def test_a_restarted_follower_does_not_serve_reads_past_the_leaders_high_watermark():
    """Y is paused (still in the ISR: the lag and session limits are long),
    so the leader's high watermark stays at 10 while the leader and F hold
    D at 10..14 (acks=1). F restarts and rejoins the ISR; a consumer in F's
    rack is sent to F, which must not hand out D: it is not committed.

    Y must stay in the ISR for the whole test whatever the machine's pace
    (on a busy machine 30 s of lag allowance and a 20 s session were not
    enough), so both are far longer than the test can take: the test's own
    waits bound it first."""
    c = Cluster(brokers=3, etcd=3, session_timeout_ms=300000,
                extra_settings={"replica.lag.time.max.ms": "600000", "replica.fetch.wait.max.ms": "200",
                                "replica.fetch.backoff.ms": "200"})
    for n in c.node_ids:
        c.broker(n).settings["broker.rack"] = "rack-%d" % n
    Y = None
    try:
        c.start()
        topic = "tail-reads"
        L, (F, Y), acked = _ten_committed(c, topic)
        c.pause(Y)
        for i in range(5):
            assert produce_request(_port(c, L), topic, 0, b"D%d" % i, acks=1) == (0, 10 + i)
        time.sleep(1)  # F fetches D; Y cannot, so the high watermark stays at 10
        c.stop(F, timeout=5)
        c.restart(F)
        c.wait_for(lambda: isr_of(c, topic, via=L) == [1, 2, 3], 20, "F back in the ISR, Y still in it")

        def read(conf, seconds):
            cons = Consumer({"bootstrap.servers": c.broker(L).address, "group.id": "tail-%d" % time.monotonic_ns(),
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf})
            cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            seen, deadline = [], time.monotonic() + seconds
            while time.monotonic() < deadline:
                m = cons.poll(0.5)
                if m is not None and not m.error():
                    seen.append(m.value().decode())
            cons.close()
            return seen
        from_leader = read({}, 5)
        assert from_leader == sorted(acked)  # the leader: committed only
        from_follower = read({"client.rack": "rack-%d" % F}, 6)
        assert c.broker(Y).paused and isr_of(c, topic, via=L) == [1, 2, 3]
        assert from_follower == sorted(acked), from_follower
        # acks=all with timeout_ms 0 while Y, in the ISR, cannot fetch: the
        # batch cannot be committed, so every answer is REQUEST_TIMED_OUT
        # (the timer due at once once answered these as a success).
        for i in range(20):
            err, base = produce_request(_port(c, L), topic, 0, b"Z%d" % i, acks=-1, timeout_ms=0)
            assert err == REQUEST_TIMED_OUT, (i, err)
            assert base >= 15, (i, base)  # appended: the answer keeps the batch's base offset, as Kafka's
        assert c.broker(Y).paused and isr_of(c, topic, via=L) == [1, 2, 3]
    finally:
        if Y is not None and c.broker(Y).paused:
            c.resume(Y)
        c.close()


def test_delete_records_reaches_every_replica_and_survives_a_failover(cluster):
    """Issue 31: DeleteRecords (KafkaJS's admin) is answered once every
    in-sync replica's log start reached the target (followers take the
    leader's from their fetch answers), so after the leader dies the new
    one starts there too: the deleted records stay deleted and the earliest
    offset never goes back."""
    import json
    from pathlib import Path

    c = cluster
    create(c, "delrep", configs={"min.insync.replicas": "2"})
    c.wait_for(lambda: isr_of(c, "delrep") == [1, 2, 3], 20, "a full ISR")
    values = ["d%03d" % i for i in range(30)]
    acked, errors = produce_all(c, "delrep", values)
    assert not errors and len(acked) == len(values)
    script = Path(__file__).parent / "kafkajs" / "delete_records.js"
    r = subprocess.run(["node", str(script), c.live_bootstrap(), "delrep", "0", "12"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"low": 12, "high": 30}
    leader = partition_view(c, "delrep").leader
    c.kill(leader)
    c.wait_for(lambda: partition_view(c, "delrep").leader not in (-1, leader), FAILOVER_S, "a new leader")
    lo_hi = Consumer({"bootstrap.servers": c.live_bootstrap(), "group.id": "x"})
    try:
        def watermarks():
            try:
                return lo_hi.get_watermark_offsets(TopicPartition("delrep", 0), timeout=10)
            except Exception:  # the new leader not known to the client yet
                return None
        c.wait_for(lambda: watermarks() is not None, 30, "watermarks from the new leader")
        assert watermarks() == (12, 30)
    finally:
        lo_hi.close()
    seen = consume_all(c.live_bootstrap(), "delrep", len(values) - 12)
    assert seen == [(i, values[i]) for i in range(12, 30)]
